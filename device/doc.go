// Package device is falconnic's NIC daemon: it builds each guest NIC from
// the config with the functions the NIC owns, connects the NICs, and
// answers the control socket (status, impairment).
//
// Rooms, one package each:
//
//	device/ether     the Ethernet function: virtio-net over vhost-user
//	device/rdma      the RDMA function: control channel, verbs engine, DMA over guest memory
//	device/rdmauapi  the RDMA control channel's wire format (the guest driver's uapi)
//	device/storage   the NVMe function and its namespaces, and the vhost-user-blk disks
//	device/vsock     the vhost-user-vsock device for the guest agent
//	device/port      a NIC's Falcon port: its one Falcon endpoint, carrying every ULP
//	device/cm        the connection manager of every Falcon protocol
//	device/fabric    the L2 switch between a daemon's NICs and the UDP fabric port to other daemons
//	device/l2        Ethernet frames and the sinks that take them
//
// The function packages reach each other only through the port, the
// connection manager and the frame vocabulary; the daemon assembles them
// (internal/archtest holds every edge).
//
// A NIC (nic.go) owns its Ethernet function (on a switch port), its one
// Falcon port with the connection manager's agent for it, the RDMA
// function (riding on a vhost-user Ethernet function as its ether.Upper)
// and, when the config gives it namespaces or disks, its NVMe function and
// disks (nvme.go). The RDMA function's verbs engine (protocol 2) and the
// NVMe function's engine (protocol 3) attach to the port by protocol, so
// the NIC has one CID space, one set of resource pools and one RUE, and
// the RDMA function's control frames are work items of the port.
// Connections between two NICs of the daemon hand each burst of frames
// straight to the other port (Port.LinkTo).
//
// Security (config_secure.go, daemon_secure.go): with the fabric's key
// file the connection manager seals its messages between daemons
// (psp/cmauth) and every Falcon datagram between daemons is PSP-sealed
// per connection (package psp) with keys derived from the receiving NIC's
// master keys (crypto/rand, one set per NIC, rotated by the control
// method fabric.rotate_keys); "insecure": true runs the fabric in
// plaintext and says so in the log and the status. Exported namespaces
// serve the initiators their allow lists name (config_nvme_acl.go).
//
// Ports (ports.go): the ports of the NICs with NVMe functions share
// "nvme.cores" goroutines (default one; Port.Adopt); every other NIC's
// port has a goroutine of its own.
//
// Observability (metrics.go, capture.go): CounterTables lists every
// counter table of the daemon with its labels, the one source of the
// Prometheus endpoint (internal/metrics) and `falconnic top`; the capture
// hub (package device/capture) gets every fabric datagram
// (fabric.Fabric.SetTap) and every frame on a link between two ports of
// the daemon (port.Port.WrapLink), and the daemon tells the NIC of each.
//
// Invariants: frames and descriptors from a guest never reach another
// NIC's memory: the only thing crossing NICs is a frame — copied, or in
// the daemon's packet memory (falcon/framebuf: Pull Data handed over with
// a reference; a Read Response lent for reading), never a guest's. Every
// counter the status reports is snake_case, with a dotted prefix naming
// where it comes from ("vhost.", "rdma.").
package device
