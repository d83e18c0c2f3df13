package agentproto

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
)

// BenchmarkReaderStdoutFrames measures decoding of full 64 KiB output
// frames (bytes/s of payload).
func BenchmarkReaderStdoutFrames(b *testing.B) {
	payload := bytes.Repeat([]byte{0xa5}, ChunkLen)
	var stream []byte
	for i := 0; i < 16; i++ {
		stream = AppendFrame(stream, TypeStdout, payload)
	}
	b.SetBytes(int64(16 * ChunkLen))
	b.ReportAllocs()
	r := bytes.NewReader(stream)
	rd := NewReader(r, nil)
	for i := 0; i < b.N; i++ {
		r.Reset(stream)
		rd.r.Reset(r)
		for j := 0; j < 16; j++ {
			if _, _, err := rd.Next(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkExecTrue measures one command round trip (Exec → Exit) through
// the server and client over net.Pipe, with the host's /bin/true.
func BenchmarkExecTrue(b *testing.B) {
	a, c := net.Pipe()
	defer a.Close()
	go (&Server{Hostname: "bench", Env: []string{"PATH=/usr/bin:/bin"}}).Serve(c)
	cl := NewClient(a)
	if _, err := cl.Hello(1); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		x, err := cl.Run(context.Background(), Exec{Argv: []string{"true"}}, nil, io.Discard, io.Discard)
		if err != nil || x.Code != 0 {
			b.Fatal(x, err)
		}
	}
}
