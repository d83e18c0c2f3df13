// Package qemu builds falconnic's guest images and runs guests under QEMU.
//
// Images (Build): the Debian guest kernel plus one uncompressed initramfs
// holding u-root's Go userland, falconnic's guest programs (guest/uinit,
// guest/agent, guest/xfer, guest/litmus), the kernel modules the guest needs
// (the closure from modules.dep, in load order, in /etc/falconnic/modules) and Debian's
// rdma-core, perftest, fio, nvme-cli, iproute2, e2fsprogs and iperf3 with
// their shared-library closure, resolved from the ELF headers against the
// extracted packages only (never the host's libraries). The pipeline:
//
//	apt-cache (versions) → key = hash of every input → cached? done
//	apt-get download → dpkg-deb -x → depmod → module order
//	ELF closure → stage dir → base.cpio (cpio -H newc)
//	u-root (Go workspace: u-root's module + our guest module) -base base.cpio
//	→ images/KEY/{vmlinuz, initramfs.cpio, manifest.json}, images/latest
//
// Machines (Cmdline, VM): QEMU command lines for TCG guests (q35, shared
// memfd RAM so vhost-user backends can map it, vhost-user NICs with
// vectors=0 against QEMU 7.2's MSI-X crash under TCG, stream links,
// vhost-user-blk disks served by the daemon (with num-queues), raw files
// QEMU serves itself through virtio-blk with cache=none,aio=native as the
// local-disk baseline, an agent virtio-serial port) and the lifecycle of one VM: a state directory
// per name with the pid, sockets and console log; start; wait for the
// readiness marker guest/uinit prints; stop.
//
// The agent (DialAgent): over the virtio-serial port's host socket now;
// over the daemon's vhost-user-vsock device through its hybrid bridge
// ("CONNECT 1024\n" / "OK <port>\n") when the machine has one.
//
// The reason for each choice is given where it is made (cmdline.go,
// image.go); the VM tests in tests/ exercise them, and the README's
// Measured section has the numbers.
package qemu
