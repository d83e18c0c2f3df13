// Command xfer moves deterministic bytes over TCP and prints their SHA-256,
// so two guests can prove a transfer arrived intact:
//
//	xfer recv [-l :5001]            # accepts one connection, reads to EOF
//	xfer send [-n BYTES] HOST:PORT  # connects (retrying), writes, closes
//
// Both print "bytes=N sha256=HEX Mbit/s=R".
package main

import (
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"hash"
	"io"
	"net"
	"os"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: xfer recv [-l ADDR] | xfer send [-n BYTES] HOST:PORT")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "recv":
		err = recv(os.Args[2:])
	case "send":
		err = send(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "xfer:", err)
		os.Exit(1)
	}
}

func recv(args []string) error {
	fs := flag.NewFlagSet("recv", flag.ExitOnError)
	addr := fs.String("l", ":5001", "address to listen on")
	fs.Parse(args)
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "xfer: listening on", l.Addr())
	conn, err := l.Accept()
	l.Close()
	if err != nil {
		return err
	}
	defer conn.Close()
	h := sha256.New()
	start := time.Now()
	n, err := io.Copy(h, conn)
	if err != nil {
		return err
	}
	report(n, h, time.Since(start))
	return nil
}

func send(args []string) error {
	fs := flag.NewFlagSet("send", flag.ExitOnError)
	n := fs.Int64("n", 100<<20, "bytes to send")
	retry := fs.Duration("retry", 30*time.Second, "how long to retry connecting")
	fs.Parse(args)
	if fs.NArg() != 1 {
		return fmt.Errorf("send needs HOST:PORT")
	}
	var conn net.Conn
	var err error
	deadline := time.Now().Add(*retry)
	for {
		conn, err = net.Dial("tcp", fs.Arg(0))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	h := sha256.New()
	start := time.Now()
	sent, err := io.Copy(io.MultiWriter(conn, h), io.LimitReader(&pattern{}, *n))
	if err != nil {
		return err
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		return err
	}
	io.Copy(io.Discard, conn) // wait for the receiver to close
	conn.Close()
	report(sent, h, time.Since(start))
	return nil
}

// pattern is an endless deterministic byte stream (xorshift64, little
// endian words), the same whatever the read sizes.
type pattern struct {
	s    uint64
	word [8]byte
	used int // bytes of word already returned
}

func (p *pattern) Read(b []byte) (int, error) {
	if p.s == 0 {
		p.s = 0x9e3779b97f4a7c15
		p.used = 8
	}
	n := 0
	for n < len(b) {
		if p.used == 8 {
			p.s ^= p.s << 13
			p.s ^= p.s >> 7
			p.s ^= p.s << 17
			binary.LittleEndian.PutUint64(p.word[:], p.s)
			p.used = 0
		}
		c := copy(b[n:], p.word[p.used:])
		p.used += c
		n += c
	}
	return n, nil
}

func report(n int64, h hash.Hash, d time.Duration) {
	rate := float64(n) * 8 / d.Seconds() / 1e6
	fmt.Printf("bytes=%d sha256=%x Mbit/s=%.1f\n", n, h.Sum(nil), rate)
}
