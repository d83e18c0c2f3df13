package agentproto

import (
	"encoding/binary"
	"fmt"
)

// Version is the protocol version carried in Hello and Ready.
const Version = 1

// Limits on an Exec request.
const (
	MaxArgs      = 4096
	MaxHostname  = 255
	MaxExitMsg   = 4096
	ExecStdin    = 1 << 0 // Exec flag: Stdin frames follow; otherwise stdin is empty
	knownExecFls = ExecStdin
)

// Hello opens (or resets) a session.
type Hello struct {
	Version uint16
	Nonce   uint64
}

// Ready answers Hello; it echoes the nonce.
type Ready struct {
	Version  uint16
	Nonce    uint64
	Hostname string
}

// Exec asks the agent to run a command.
type Exec struct {
	Flags uint32
	Dir   string
	Argv  []string
	Env   []string // added to the agent's environment; later entries win
}

// Exit ends a command. Code is the exit status, 128+signal when killed by a
// signal, 127 or 126 when the command could not start (Message says why).
type Exit struct {
	Code    int32
	Message string
}

// AppendHello appends h's payload to dst.
func AppendHello(dst []byte, h Hello) []byte {
	dst = binary.BigEndian.AppendUint16(dst, h.Version)
	return binary.BigEndian.AppendUint64(dst, h.Nonce)
}

// ParseHello decodes a Hello payload.
func ParseHello(p []byte) (Hello, error) {
	if len(p) != 10 {
		return Hello{}, fmt.Errorf("%w: Hello of %d bytes", ErrBadPayload, len(p))
	}
	return Hello{Version: binary.BigEndian.Uint16(p), Nonce: binary.BigEndian.Uint64(p[2:])}, nil
}

// AppendReady appends r's payload to dst. Hostnames longer than MaxHostname
// are cut.
func AppendReady(dst []byte, r Ready) []byte {
	dst = binary.BigEndian.AppendUint16(dst, r.Version)
	dst = binary.BigEndian.AppendUint64(dst, r.Nonce)
	return appendString(dst, clip(r.Hostname, MaxHostname))
}

// ParseReady decodes a Ready payload.
func ParseReady(p []byte) (Ready, error) {
	d := decoder{p: p}
	r := Ready{Version: d.u16(), Nonce: d.u64(), Hostname: d.str(MaxHostname)}
	return r, d.finish("Ready")
}

// AppendExec appends e's payload to dst.
func AppendExec(dst []byte, e Exec) []byte {
	dst = binary.BigEndian.AppendUint32(dst, e.Flags)
	dst = appendString(dst, e.Dir)
	dst = appendList(dst, e.Argv)
	return appendList(dst, e.Env)
}

// ParseExec decodes an Exec payload. It needs at least one argument and
// refuses unknown flags.
func ParseExec(p []byte) (Exec, error) {
	d := decoder{p: p}
	e := Exec{Flags: d.u32(), Dir: d.str(MaxPayload), Argv: d.list(), Env: d.list()}
	if err := d.finish("Exec"); err != nil {
		return Exec{}, err
	}
	if e.Flags&^knownExecFls != 0 {
		return Exec{}, fmt.Errorf("%w: Exec flags %#x", ErrBadPayload, e.Flags)
	}
	if len(e.Argv) == 0 || e.Argv[0] == "" {
		return Exec{}, fmt.Errorf("%w: Exec without a command", ErrBadPayload)
	}
	return e, nil
}

// AppendExit appends x's payload to dst. Messages longer than MaxExitMsg are
// cut.
func AppendExit(dst []byte, x Exit) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(x.Code))
	return appendString(dst, clip(x.Message, MaxExitMsg))
}

// ParseExit decodes an Exit payload.
func ParseExit(p []byte) (Exit, error) {
	d := decoder{p: p}
	x := Exit{Code: int32(d.u32()), Message: d.str(MaxExitMsg)}
	return x, d.finish("Exit")
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func appendString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

func appendList(dst []byte, l []string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(l)))
	for _, s := range l {
		dst = appendString(dst, s)
	}
	return dst
}

// decoder reads big-endian fields from a payload, remembering the first
// failure; every length is checked against what remains.
type decoder struct {
	p   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.p) {
		d.err = fmt.Errorf("%w: need %d bytes, have %d", ErrBadPayload, n, len(d.p))
		return nil
	}
	b := d.p[:n]
	d.p = d.p[n:]
	return b
}

func (d *decoder) u16() uint16 {
	if b := d.take(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if b := d.take(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if b := d.take(8); b != nil {
		return binary.BigEndian.Uint64(b)
	}
	return 0
}

func (d *decoder) str(max int) string {
	n := d.u32()
	if d.err == nil && n > uint32(max) {
		d.err = fmt.Errorf("%w: string of %d bytes, limit %d", ErrBadPayload, n, max)
	}
	if n > uint32(len(d.p)) {
		n = uint32(len(d.p)) + 1 // take fails with the real shortfall
	}
	return string(d.take(int(n)))
}

func (d *decoder) list() []string {
	n := d.u32()
	if d.err != nil {
		return nil
	}
	// Each entry needs at least its 4-byte length.
	if n > MaxArgs || int(n) > len(d.p)/4 {
		d.err = fmt.Errorf("%w: list of %d entries in %d bytes", ErrBadPayload, n, len(d.p))
		return nil
	}
	l := make([]string, 0, n)
	for i := uint32(0); i < n && d.err == nil; i++ {
		l = append(l, d.str(MaxPayload))
	}
	return l
}

func (d *decoder) finish(what string) error {
	if d.err == nil && len(d.p) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes after %s", ErrBadPayload, len(d.p), what)
	}
	return d.err
}
