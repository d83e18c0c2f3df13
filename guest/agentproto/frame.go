package agentproto

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frame layout constants (see the package comment).
const (
	HeaderLen  = 12
	MaxPayload = 1 << 20
	// ChunkLen is the largest Stdout/Stderr/Stdin payload a sender produces.
	ChunkLen = 64 << 10
)

// Magic starts every frame.
var Magic = [4]byte{'F', 'N', 'A', 'G'}

// Type is a frame's message type.
type Type uint8

// Message types.
const (
	TypeHello Type = iota + 1
	TypeReady
	TypeExec
	TypeStdin
	TypeStdinEOF
	TypeKill
	TypeStdout
	TypeStderr
	TypeExit
	typeEnd
)

// typeInfo describes one message type: its name, who sends it and the
// largest payload it may carry.
type typeInfo struct {
	name       string
	fromClient bool
	maxLen     int
}

var types = [typeEnd]typeInfo{
	TypeHello:    {"Hello", true, 10},
	TypeReady:    {"Ready", false, 10 + 4 + 255},
	TypeExec:     {"Exec", true, MaxPayload},
	TypeStdin:    {"Stdin", true, ChunkLen},
	TypeStdinEOF: {"StdinEOF", true, 0},
	TypeKill:     {"Kill", true, 0},
	TypeStdout:   {"Stdout", false, ChunkLen},
	TypeStderr:   {"Stderr", false, ChunkLen},
	TypeExit:     {"Exit", false, 4 + 4 + 4096},
}

func (t Type) valid() bool { return t > 0 && t < typeEnd }

// String names the type.
func (t Type) String() string {
	if t.valid() {
		return types[t].name
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// FromClient reports whether the client (host) sends this type.
func (t Type) FromClient() bool { return t.valid() && types[t].fromClient }

// Header is a byte view of a frame header.
type Header []byte

// Magic returns the magic field.
func (h Header) Magic() [4]byte { return [4]byte(h[0:4]) }

// Type returns the message type.
func (h Header) Type() Type { return Type(h[4]) }

// Reserved returns the three reserved bytes as one number.
func (h Header) Reserved() uint32 { return uint32(h[5])<<16 | uint32(h[6])<<8 | uint32(h[7]) }

// Length returns the payload length.
func (h Header) Length() uint32 { return binary.BigEndian.Uint32(h[8:12]) }

// SetMagic writes the magic.
func (h Header) SetMagic() { copy(h[0:4], Magic[:]) }

// SetType sets the message type.
func (h Header) SetType(t Type) { h[4] = byte(t) }

// SetLength sets the payload length.
func (h Header) SetLength(n uint32) { binary.BigEndian.PutUint32(h[8:12], n) }

// Frame errors, one per cause.
var (
	ErrBadMagic    = errors.New("agentproto: bad frame magic")
	ErrUnknownType = errors.New("agentproto: unknown frame type")
	ErrReserved    = errors.New("agentproto: reserved header bits set")
	ErrTooLong     = errors.New("agentproto: payload longer than its type allows")
	ErrBadPayload  = errors.New("agentproto: malformed payload")
)

// AppendFrame appends one frame of type t carrying payload to dst.
func AppendFrame(dst []byte, t Type, payload []byte) []byte {
	var hb [HeaderLen]byte
	h := Header(hb[:])
	h.SetMagic()
	h.SetType(t)
	h.SetLength(uint32(len(payload)))
	dst = append(dst, hb[:]...)
	return append(dst, payload...)
}

// CheckHeader validates a header on its own: magic, type, reserved bits and
// the payload length against the type's limit.
func CheckHeader(h Header) error {
	if len(h) < HeaderLen {
		return fmt.Errorf("%w: header of %d bytes", ErrBadPayload, len(h))
	}
	if h.Magic() != Magic {
		return ErrBadMagic
	}
	t := h.Type()
	if !t.valid() {
		return fmt.Errorf("%w %d", ErrUnknownType, uint8(t))
	}
	if h.Reserved() != 0 {
		return ErrReserved
	}
	if h.Length() > uint32(types[t].maxLen) {
		return fmt.Errorf("%w: %s with %d bytes", ErrTooLong, t, h.Length())
	}
	return nil
}

// Reader reads frames from a byte stream.
type Reader struct {
	r *bufio.Reader
	// Resync makes Next skip bytes until the magic after a bad header
	// instead of failing; for streams without connection boundaries.
	Resync   bool
	Counters *Counters
	buf      []byte
}

// NewReader returns a Reader over r counting into c (which may be nil).
func NewReader(r io.Reader, c *Counters) *Reader {
	if c == nil {
		c = new(Counters)
	}
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), Counters: c}
}

// Next returns the next frame's type and payload. The payload is valid until
// the following call.
func (rd *Reader) Next() (Type, []byte, error) {
	for {
		hb, err := rd.r.Peek(HeaderLen)
		if err != nil {
			if len(hb) > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, nil, err
		}
		h := Header(hb)
		if err := CheckHeader(h); err != nil {
			rd.Counters.count(err)
			if !rd.Resync {
				return 0, nil, err
			}
			rd.skipToMagic()
			continue
		}
		t, n := h.Type(), int(h.Length())
		if _, err := rd.r.Discard(HeaderLen); err != nil {
			return 0, nil, err
		}
		if cap(rd.buf) < n {
			rd.buf = make([]byte, n)
		}
		p := rd.buf[:n]
		if _, err := io.ReadFull(rd.r, p); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return 0, nil, err
		}
		rd.Counters.FramesIn.Inc()
		return t, p, nil
	}
}

// skipToMagic drops at least one byte, then everything before the next
// possible start of the magic.
func (rd *Reader) skipToMagic() {
	rd.r.Discard(1)
	rd.Counters.ResyncBytes.Inc()
	for {
		b, err := rd.r.Peek(1)
		if err != nil || b[0] == Magic[0] {
			return
		}
		rd.r.Discard(1)
		rd.Counters.ResyncBytes.Inc()
	}
}
