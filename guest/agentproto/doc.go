// Package agentproto is the wire protocol between the host and falconnic's
// guest agent, with the agent's server loop and the host's client.
//
// The transport is any byte stream: a vsock connection, the guest end of a
// virtio-serial port, a unix socket, net.Pipe in tests. Every message is one
// frame:
//
//	offset size field
//	0      4    magic "FNAG"
//	4      1    type (see the types table)
//	5      3    reserved, zero
//	8      4    payload length, big endian, at most MaxPayload
//	12     n    payload
//
// A session is: the client sends Hello{version, nonce}; the server answers
// Ready{version, nonce, hostname}. Then, one at a time, the client sends
// Exec{dir, argv, env, flags} and optionally Stdin/StdinEOF frames; the
// server streams Stdout and Stderr frames and ends the command with
// Exit{code, message}. Kill asks the server to kill the running command's
// process group (it still answers with Exit).
//
// A virtio-serial port has no connection boundaries: bytes of an earlier,
// abandoned session may still be in flight when a new client connects. So
// the client discards frames until the Ready that echoes its nonce, both
// sides can resynchronise on the magic after garbage (Reader.Resync), and a
// Hello in the middle of a session resets it (killing a running command).
//
// Bytes from the other side are hostile: every length and count is checked
// against what remains, unknown types and bad magic are counted per cause in
// Counters, and nothing panics.
package agentproto
