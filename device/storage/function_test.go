package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"falconnic/nvme"
)

func TestFileBackendReadWriteZeroDiscard(t *testing.T) {
	for _, direct := range []bool{false, true} {
		t.Run(map[bool]string{false: "cached", true: "direct"}[direct], func(t *testing.T) {
			testFileBackend(t, direct)
		})
	}
}

// testFileBackend writes, zeroes, discards and reads a file backend with
// unaligned buffers (with O_DIRECT they take the bounce path) and checks
// the file against a model.
func testFileBackend(t *testing.T, direct bool) {
	p := filepath.Join(t.TempDir(), "disk.img")
	b, err := OpenFileBackend(p, 1<<20, false, direct)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if direct && !b.Direct() {
		t.Log("the test directory's filesystem refuses O_DIRECT: cached fallback")
	}
	if b.Size() != 1<<20 {
		t.Fatalf("size %d", b.Size())
	}
	data := bytes.Repeat([]byte{0x5a}, 64<<10+1)[1:] // never 4 KiB aligned
	if _, err := b.WriteAt(data, 4096); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := b.WriteZeroes(8192, 4096, false); err != nil {
		t.Fatal(err)
	}
	if err := b.Discard(16384, 8192); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 64<<10+1)[1:]
	if _, err := b.ReadAt(got, 4096); err != nil {
		t.Fatal(err)
	}
	want := bytes.Clone(data)
	clear(want[4096:8192])
	clear(want[12288:20480])
	if !bytes.Equal(got, want) {
		t.Fatal("file contents differ from the model")
	}
	disk, _ := os.ReadFile(p)
	if !bytes.Equal(disk[4096:4096+len(want)], want) {
		t.Fatal("file on disk differs")
	}
}

func TestFileBackendSizeRules(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "d.img")
	if err := os.WriteFile(p, make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileBackend(p, 4096, false, false); err == nil {
		t.Error("shrinking an existing file was accepted")
	}
	if _, err := OpenFileBackend(filepath.Join(dir, "missing.img"), 4096, true, false); err == nil {
		t.Error("a read-only namespace on a missing file was accepted")
	}
	b, err := OpenFileBackend(p, 0, true, false)
	if err != nil || b.Size() != 8192 {
		t.Fatalf("existing file: %v size %d", err, b.Size())
	}
	b.Close()
	if _, err := OpenFileBackend(dir, 0, false, false); err == nil {
		t.Error("a directory was accepted as a backend")
	}
}

// TestBlkOverFileNamespace: the disk end to end onto a file namespace.
func TestBlkOverFileNamespace(t *testing.T) {
	p := filepath.Join(t.TempDir(), "ns.img")
	r := newBlkRig(t, NamespaceSpec{NSID: 3, Backing: p, Size: 1 << 20, BlockSize: 4096})
	cfg := r.start()
	if cfg[blkCfgBlkSize+1] != 0x10 { // 4096 little-endian
		t.Fatalf("blk_size bytes % x", cfg[blkCfgBlkSize:blkCfgBlkSize+4])
	}
	data := bytes.Repeat([]byte("file-backed 4k!!"), 8192/16)
	w := r.Request(blkTypeOut, 16, false, data, 8192)
	odd := r.Request(blkTypeOut, 1, false, data[:512], 512) // not a whole 4 KiB block
	r.Run(w, odd)
	if w.Status() != blkStatusOK || odd.Status() != blkStatusIOErr {
		t.Fatalf("statuses %d %d", w.Status(), odd.Status())
	}
	rd := r.Request(blkTypeIn, 16, true, nil, 8192)
	r.Run(rd)
	disk, _ := os.ReadFile(p)
	if rd.Status() != blkStatusOK || !bytes.Equal(rd.Data(8192), data) || !bytes.Equal(disk[8192:16384], data) {
		t.Fatal("file namespace round trip failed")
	}
}

// TestFileBackendDirectBounce: with O_DIRECT (block devices) unaligned
// buffers go through the aligned bounce buffer. A regular file on a file
// system that supports O_DIRECT stands in for the device.
func TestFileBackendDirectBounce(t *testing.T) {
	p := filepath.Join(t.TempDir(), "direct.img")
	if err := os.WriteFile(p, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR|unix.O_DIRECT, 0)
	if err != nil {
		t.Skipf("O_DIRECT not supported here: %v", err)
	}
	b := &FileBackend{f: f, direct: true, size: 1 << 20, bounce: alignedBuf(nvme.ChunkSize + directAlign)}
	defer b.Close()
	raw := make([]byte, 4096+1)
	unaligned := raw[1:] // never 4 KiB aligned
	copy(unaligned, bytes.Repeat([]byte("direct!!"), 512))
	if _, err := b.WriteAt(unaligned, 8192); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096+3)[3:]
	if _, err := b.ReadAt(got, 8192); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, unaligned) {
		t.Fatal("bounce-buffered round trip differs")
	}
	aligned := alignedBuf(4096)
	if _, err := b.ReadAt(aligned, 8192); err != nil || !bytes.Equal(aligned, unaligned) {
		t.Fatalf("aligned read: %v", err)
	}
}
