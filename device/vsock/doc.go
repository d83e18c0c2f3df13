// Package vsock is the daemon's vhost-user-vsock device (virtio 1.2
// §5.10): a guest's AF_VSOCK stream connections bridged to host unix
// sockets, the way Firecracker's vsock device does (a connect line on the
// host socket picks the guest port). It carries the guest agent; it talks
// to no other function of the NIC.
//
// Files: vsock.go (the device, its vhost-user face and status), proto.go
// (the packet header, decoded strictly), conn.go (one connection's state
// and credit), ring.go (byte FIFOs), counters.go (one counter per drop).
package vsock
