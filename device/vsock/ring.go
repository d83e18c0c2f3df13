package vsock

// vsockRing is a FIFO of stream bytes that grows (doubling) up to max. It
// buffers one direction of one connection: guest-to-host bytes waiting for
// the host socket, or host-to-guest bytes waiting for guest credit.
type vsockRing struct {
	buf  []byte
	r, n int
	max  int
}

func (b *vsockRing) Len() int  { return b.n }
func (b *vsockRing) Room() int { return b.max - b.n }

// Write appends p; the caller checks Room first. It returns the bytes taken.
func (b *vsockRing) Write(p []byte) int {
	if len(p) > b.Room() {
		p = p[:b.Room()]
	}
	taken := len(p)
	if taken == 0 {
		return 0
	}
	if b.n+len(p) > len(b.buf) {
		b.grow(b.n + len(p))
	}
	for len(p) > 0 {
		w := (b.r + b.n) % len(b.buf)
		end := len(b.buf)
		if w < b.r {
			end = b.r
		}
		c := copy(b.buf[w:end], p)
		b.n += c
		p = p[c:]
	}
	return taken
}

func (b *vsockRing) grow(need int) {
	size := len(b.buf)
	if size == 0 {
		size = 4096
	}
	for size < need {
		size *= 2
	}
	if size > b.max {
		size = b.max
	}
	nb := make([]byte, size)
	b.Peek(nb[:b.n])
	b.buf, b.r = nb, 0
}

// Peek copies up to len(p) of the oldest bytes into p without consuming them.
func (b *vsockRing) Peek(p []byte) int { return b.peekAt(0, p) }

// peekAt copies up to len(p) bytes starting skip bytes after the oldest.
func (b *vsockRing) peekAt(skip int, p []byte) int {
	if skip >= b.n {
		return 0
	}
	if len(p) > b.n-skip {
		p = p[:b.n-skip]
	}
	total := len(p)
	r := (b.r + skip) % len(b.buf)
	for len(p) > 0 {
		end := len(b.buf)
		if r+len(p) < end {
			end = r + len(p)
		}
		c := copy(p, b.buf[r:end])
		p = p[c:]
		r = (r + c) % len(b.buf)
	}
	return total
}

// Discard drops the n oldest bytes.
func (b *vsockRing) Discard(n int) {
	if n > b.n {
		n = b.n
	}
	if n == 0 {
		return
	}
	b.r = (b.r + n) % len(b.buf)
	b.n -= n
	if b.n == 0 {
		b.r = 0
	}
}

// Reset empties the ring and frees its memory.
func (b *vsockRing) Reset() { b.buf, b.r, b.n = nil, 0, 0 }

// vsockFIFO is a queue that reuses its backing array: popping moves a head
// index, and the array is compacted when the head passes half of it, so a
// steady state allocates nothing.
type vsockFIFO[T any] struct {
	buf  []T
	head int
}

func (f *vsockFIFO[T]) Len() int { return len(f.buf) - f.head }

// Front returns the oldest item; the caller checks Len first.
func (f *vsockFIFO[T]) Front() T { return f.buf[f.head] }

// Items returns the queued items, oldest first (valid until the next change).
func (f *vsockFIFO[T]) Items() []T { return f.buf[f.head:] }

func (f *vsockFIFO[T]) Push(v T) {
	if f.head > 0 && f.head >= len(f.buf)/2 {
		n := copy(f.buf, f.buf[f.head:])
		clear(f.buf[n:])
		f.buf, f.head = f.buf[:n], 0
	}
	f.buf = append(f.buf, v)
}

func (f *vsockFIFO[T]) Pop() {
	var zero T
	f.buf[f.head] = zero
	f.head++
	if f.head == len(f.buf) {
		f.buf, f.head = f.buf[:0], 0
	}
}

func (f *vsockFIFO[T]) Reset() {
	clear(f.buf)
	f.buf, f.head = f.buf[:0], 0
}
