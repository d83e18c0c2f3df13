package uring

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkDirect4K is the host kernel's own cost of the IO a file
// namespace does: 4 KiB O_DIRECT reads and writes at random offsets of a
// 64 MiB file in the test's temporary directory, through the ring, with
// depth of them in flight and the goroutine sleeping in io_uring_enter
// until one completes. No daemon work is in it, so its cpu-µs/op (user and
// system time of the whole process per IO; sys-µs/op the kernel's share)
// is the floor under the daemon's CPU per 4 KiB IO on a file namespace on
// this host, and ctxsw/op the sleeps and wakes the IO alone costs.
func BenchmarkDirect4K(b *testing.B) { benchDirectDepths(b, 4096, true, 1, 32) }

// BenchmarkDirect128K is BenchmarkDirect4K at 128 KiB, sequential, at
// fio's depth in `falconnic bench nvme`: ms-per-MiB is the floor under the
// daemon's figure for its 128 KiB tests.
func BenchmarkDirect128K(b *testing.B) { benchDirectDepths(b, 128<<10, false, 32) }

func benchDirectDepths(b *testing.B, bs int, random bool, depths ...int) {
	for _, depth := range depths {
		for _, dir := range []struct {
			name string
			op   uint8
		}{{"read", OpReadv}, {"write", OpWritev}} {
			b.Run(fmt.Sprintf("%s/qd%d", dir.name, depth), func(b *testing.B) {
				benchDirect(b, dir.op, bs, depth, random)
			})
		}
	}
}

func benchDirect(b *testing.B, op uint8, bs, depth int, random bool) {
	const size = 64 << 20
	path := filepath.Join(b.TempDir(), "ns.img")
	data := make([]byte, size)
	rand.New(rand.NewSource(2)).Read(data)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Skipf("no O_DIRECT here: %v", err)
	}
	defer unix.Close(fd)
	r, err := New(uint32(2 * depth))
	if err != nil {
		b.Skipf("no io_uring here: %v", err)
	}
	defer r.Close()
	// O_DIRECT wants aligned buffers: page-aligned anonymous memory.
	mem, err := unix.Mmap(-1, 0, depth*bs, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Munmap(mem)
	iovs := make([][]unix.Iovec, depth)
	for i := range iovs {
		iovs[i] = iovecs(mem[i*bs : (i+1)*bs])
	}
	rng := rand.New(rand.NewSource(1))
	next := int64(0)
	post := func(slot int) {
		off := next
		if random {
			off = int64(rng.Intn(size/bs)) * int64(bs)
		}
		next = (next + int64(bs)) % size
		if err := r.Prep(op, fd, iovs[slot], off, 0, uint64(slot)); err != nil {
			b.Fatal(err)
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for i := 0; i < depth && i < b.N; i++ {
		post(i)
	}
	var ru0 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	posted, failed := min(depth, b.N), 0
	for done := 0; done < b.N; { // done < posted: an IO is in flight to wait for
		if _, err := r.Submit(); err != nil {
			b.Fatal(err)
		}
		if err := r.Wait(1); err != nil {
			b.Fatal(err)
		}
		r.Reap(func(c CQE) {
			done++
			if int(c.Res) != bs {
				failed++
			}
			if posted < b.N {
				post(int(c.UserData))
				posted++
			}
		})
	}
	b.StopTimer()
	if failed > 0 {
		b.Fatalf("%d of %d IOs failed or were short", failed, b.N)
	}
	var ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	usr := time.Duration(unix.TimevalToNsec(ru1.Utime) - unix.TimevalToNsec(ru0.Utime))
	sys := time.Duration(unix.TimevalToNsec(ru1.Stime) - unix.TimevalToNsec(ru0.Stime))
	sw := (ru1.Nvcsw + ru1.Nivcsw) - (ru0.Nvcsw + ru0.Nivcsw)
	b.ReportMetric(float64(usr+sys)/1e3/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(usr+sys)/1e6/(float64(b.N)*float64(bs)/(1<<20)), "cpu-ms/MiB")
	b.ReportMetric(float64(sys)/1e3/float64(b.N), "sys-µs/op")
	b.ReportMetric(float64(sw)/float64(b.N), "ctxsw/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IOPS")
}
