package main

import (
	"bytes"
	"testing"
)

func TestLineWatchSignalsTheReadyLineAcrossWrites(t *testing.T) {
	var echo bytes.Buffer
	w := &lineWatch{want: []byte(litmusReady), ready: make(chan struct{}), echo: &echo}
	w.Write([]byte("booting\nlitmus: re"))
	select {
	case <-w.ready:
		t.Fatal("ready before the ready line ended")
	default:
	}
	w.Write([]byte("ady\nlitmus: ready\n")) // a second marker must not close ready again
	select {
	case <-w.ready:
	default:
		t.Fatal("not ready after the ready line")
	}
	if echo.String() != "booting\nlitmus: ready\nlitmus: ready\n" {
		t.Fatalf("echoed %q", echo.String())
	}
}

func TestLineWatchIgnoresTheMarkerInsideALine(t *testing.T) {
	var echo bytes.Buffer
	w := &lineWatch{want: []byte(litmusReady), ready: make(chan struct{}), echo: &echo}
	w.Write([]byte("not litmus: ready\n" + string(bytes.Repeat([]byte("x"), 1000)) + "\n"))
	select {
	case <-w.ready:
		t.Fatal("ready on a line that does not start with the marker")
	default:
	}
}
