package vhostuser

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"

	"golang.org/x/sys/unix"
)

// ErrFDTruncated means the kernel dropped fds because more arrived than we accept.
var ErrFDTruncated = errors.New("vhostuser: control message truncated (too many fds)")

// Conn reads and writes vhost-user messages on a unix stream socket. The
// header is read on its own (fds ride on its bytes), then exactly the
// payload, so back-to-back messages are never merged.
type Conn struct {
	c   *net.UnixConn
	hdr [HeaderSize]byte
	buf [MaxPayload]byte
	oob []byte
	out []byte
}

// NewConn wraps a connected unix socket.
func NewConn(c *net.UnixConn) *Conn {
	return &Conn{
		c:   c,
		oob: make([]byte, unix.CmsgSpace(4*(MaxMemRegions+1))),
		out: make([]byte, HeaderSize+MaxPayload),
	}
}

// Close closes the socket.
func (c *Conn) Close() error { return c.c.Close() }

// ReadMsg reads one message. The payload aliases an internal buffer valid
// until the next ReadMsg. Received fds are owned by the caller (they are
// closed here only when ReadMsg fails). Errors from CheckHeader mean the
// stream can no longer be trusted: the caller resets the session.
func (c *Conn) ReadMsg() (Msg, error) {
	var fds []int
	got := 0
	for got < HeaderSize {
		n, oobn, flags, _, err := c.c.ReadMsgUnix(c.hdr[got:], c.oob)
		if oobn > 0 {
			more, perr := parseRights(c.oob[:oobn])
			fds = append(fds, more...)
			if perr != nil && err == nil {
				err = perr
			}
		}
		if err == nil && flags&unix.MSG_CTRUNC != 0 {
			err = ErrFDTruncated
		}
		if err == nil && n == 0 {
			err = io.EOF
		}
		if err != nil {
			closeFDs(fds)
			if got > 0 && errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return Msg{}, err
		}
		got += n
	}
	h := Header(c.hdr[:])
	if err := CheckHeader(h); err != nil {
		closeFDs(fds)
		return Msg{}, err
	}
	p := c.buf[:h.Size()]
	if _, err := io.ReadFull(c.c, p); err != nil {
		closeFDs(fds)
		return Msg{}, err
	}
	return Msg{Request: h.Request(), Flags: h.Flags(), Payload: p, FDs: fds}, nil
}

func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for i := range msgs {
		r, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		fds = append(fds, r...)
	}
	return fds, nil
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}

// WriteReply sends a reply (flags version|REPLY) with the given payload and fds.
func (c *Conn) WriteReply(req Request, payload []byte, fds ...int) error {
	return c.write(req, FlagVersion|FlagReply, payload, fds)
}

// WriteRequest sends a front-end request; tests' front-end simulator uses it.
func (c *Conn) WriteRequest(req Request, flags uint32, payload []byte, fds ...int) error {
	return c.write(req, flags|FlagVersion, payload, fds)
}

func (c *Conn) write(req Request, flags uint32, payload []byte, fds []int) error {
	if len(payload) > MaxPayload {
		return fmt.Errorf("%w: %d", ErrPayloadTooBig, len(payload))
	}
	b := c.out[:HeaderSize+len(payload)]
	h := Header(b)
	h.SetRequest(req)
	h.SetFlags(flags)
	h.SetSize(uint32(len(payload)))
	copy(b[HeaderSize:], payload)
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	n, _, err := c.c.WriteMsgUnix(b, oob, nil)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	return err
}

// ReadReply reads a back-end reply (front-end side): it checks the REPLY
// flag and the request code and returns the payload and any fds.
func (c *Conn) ReadReply(req Request) ([]byte, []int, error) {
	var fds []int
	got := 0
	for got < HeaderSize {
		n, oobn, _, _, err := c.c.ReadMsgUnix(c.hdr[got:], c.oob)
		if oobn > 0 {
			more, _ := parseRights(c.oob[:oobn])
			fds = append(fds, more...)
		}
		if err == nil && n == 0 {
			err = io.EOF
		}
		if err != nil {
			closeFDs(fds)
			return nil, nil, err
		}
		got += n
	}
	h := Header(c.hdr[:])
	if h.Flags() != FlagVersion|FlagReply || h.Request() != req || h.Size() > MaxPayload {
		closeFDs(fds)
		return nil, nil, fmt.Errorf("vhostuser: bad reply to %v: req=%v flags=%#x size=%d", req, h.Request(), h.Flags(), h.Size())
	}
	p := make([]byte, h.Size())
	if _, err := io.ReadFull(c.c, p); err != nil {
		closeFDs(fds)
		return nil, nil, err
	}
	return p, fds, nil
}

// putU64 returns an 8-byte little-endian payload.
func putU64(b []byte, v uint64) []byte {
	binary.LittleEndian.PutUint64(b, v)
	return b[:8]
}
