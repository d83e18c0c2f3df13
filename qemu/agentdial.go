package qemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"
)

// AgentVsockPort is the vsock port the guest agent listens on.
const AgentVsockPort = 1024

// Agent transports.
const (
	ViaSerial = "serial" // the virtio-serial port's host socket
	ViaVsock  = "vsock"  // the daemon's vhost-user-vsock hybrid socket
	// ViaDiag is the agent's diagnosis port: a second virtio-serial
	// channel, free while a command holds the agent's main one (the stall
	// report's way in, and a user's into a guest whose agent is busy).
	ViaDiag = "diag"
)

// ErrHybridHandshake means the vsock bridge refused or garbled CONNECT.
var ErrHybridHandshake = errors.New("vsock bridge handshake failed")

// maxOKLine bounds the bridge's "OK <port>\n" answer.
const maxOKLine = 32

// DialAgent connects to the guest agent. via is ViaSerial, ViaVsock, ViaDiag or ""
// (vsock when the machine has a vsock bridge, else serial). The returned
// connection carries agentproto.
func (v *VM) DialAgent(ctx context.Context, via string) (net.Conn, error) {
	m, err := v.Machine()
	if err != nil {
		return nil, err
	}
	if via == "" {
		via = ViaSerial
		if m.Vsock != nil && m.Vsock.UDS != "" {
			via = ViaVsock
		}
	}
	var d net.Dialer
	switch via {
	case ViaSerial:
		return dialRetry(ctx, v.AgentSock())
	case ViaDiag:
		return dialRetry(ctx, v.DiagSock())
	case ViaVsock:
		if m.Vsock == nil || m.Vsock.UDS == "" {
			return nil, fmt.Errorf("vm %s has no vsock bridge socket", v.Name)
		}
		conn, err := d.DialContext(ctx, "unix", m.Vsock.UDS)
		if err != nil {
			return nil, err
		}
		if dl, ok := ctx.Deadline(); ok {
			conn.SetDeadline(dl)
		} else {
			conn.SetDeadline(time.Now().Add(30 * time.Second))
		}
		if err := HybridConnect(conn, AgentVsockPort); err != nil {
			conn.Close()
			return nil, err
		}
		conn.SetDeadline(time.Time{})
		return conn, nil
	}
	return nil, fmt.Errorf("unknown agent transport %q (want %s, %s or %s)", via, ViaSerial, ViaVsock, ViaDiag)
}

// dialRetry dials a unix socket, retrying while its listen backlog is full
// (QEMU serves one agent session at a time) until ctx ends.
func dialRetry(ctx context.Context, path string) (net.Conn, error) {
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "unix", path)
		if err == nil || !errors.Is(err, syscall.EAGAIN) {
			return conn, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (another session holds the agent)", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// HybridConnect does the host side of a hybrid vsock bridge's handshake
// (Firecracker's format, served by the daemon): write "CONNECT <port>\n",
// read "OK <hostport>\n". It reads byte by byte so that no byte of the
// stream that follows is consumed.
func HybridConnect(conn net.Conn, port uint32) error {
	if _, err := fmt.Fprintf(conn, "CONNECT %d\n", port); err != nil {
		return err
	}
	var line []byte
	var b [1]byte
	for {
		if _, err := conn.Read(b[:]); err != nil {
			return fmt.Errorf("%w: %v (after %q)", ErrHybridHandshake, err, line)
		}
		if b[0] == '\n' {
			break
		}
		line = append(line, b[0])
		if len(line) > maxOKLine {
			return fmt.Errorf("%w: answer longer than %d bytes", ErrHybridHandshake, maxOKLine)
		}
	}
	_, err := ParseHybridOK(line)
	return err
}

// ParseHybridOK parses the bridge's answer line (without its newline):
// "OK <decimal port>".
func ParseHybridOK(line []byte) (uint32, error) {
	const prefix = "OK "
	if len(line) <= len(prefix) || string(line[:len(prefix)]) != prefix {
		return 0, fmt.Errorf("%w: answer %q", ErrHybridHandshake, line)
	}
	digits := line[len(prefix):]
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%w: answer %q", ErrHybridHandshake, line)
		}
	}
	p, err := strconv.ParseUint(string(digits), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: answer %q", ErrHybridHandshake, line)
	}
	return uint32(p), nil
}
