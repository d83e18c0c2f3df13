// Package guest holds the programs that run inside falconnic's guest VMs and
// the wire protocol the host uses to drive them.
//
//   - guest/uinit: the u-root uinit command (PID 1's job after u-root's init):
//     mounts, loads the kernel modules the image lists, configures the NICs
//     from the kernel command line, starts the agent and prints the readiness
//     marker on the console.
//   - guest/agent: runs commands for the host over virtio-vsock and
//     virtio-serial, speaking guest/agentproto.
//   - guest/xfer: a TCP sender/receiver of deterministic bytes that prints a
//     SHA-256, for end-to-end transfer checks.
//   - guest/litmus: the guest side of the store→load ordering litmus
//     (internal/litmus) that `falconnic vm litmus` plays against it.
//   - guest/agentproto: framing, messages, the agent's server loop and the
//     host's client.
//
// The programs import only the standard library, github.com/mdlayher/vsock
// and internal/*, because the image builder (package qemu) compiles them in a
// throwaway module next to u-root's own module, pinned to u-root's versions.
package guest
