package agentproto

import (
	"io"
	"sync"
)

// Writer sends frames; it is safe for concurrent use, and frames never
// interleave.
type Writer struct {
	mu       sync.Mutex
	w        io.Writer
	buf      []byte
	counters *Counters
}

// NewWriter returns a Writer onto w counting into c (which may be nil).
func NewWriter(w io.Writer, c *Counters) *Writer {
	if c == nil {
		c = new(Counters)
	}
	return &Writer{w: w, counters: c}
}

// Send writes one frame.
func (w *Writer) Send(t Type, payload []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = AppendFrame(w.buf[:0], t, payload)
	_, err := w.w.Write(w.buf)
	if err == nil {
		w.counters.FramesOut.Inc()
	}
	return err
}

// streamWriter turns writes into Stdout/Stderr/Stdin frames of at most
// ChunkLen bytes.
type streamWriter struct {
	w *Writer
	t Type
}

func (s streamWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), ChunkLen)
		if err := s.w.Send(s.t, p[:c]); err != nil {
			return n, err
		}
		n += c
		p = p[c:]
	}
	return n, nil
}
