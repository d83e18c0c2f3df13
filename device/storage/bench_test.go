package storage

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"falconnic/device/port"
)

const benchNSSize = 64 << 20

// benchBlk keeps depth requests of size bytes in flight from the simulated
// guest through the block function, the NVMe initiator and target over two
// Falcon ports (real clock, in-process links) to a memory namespace.
func benchBlk(b *testing.B, typ uint32, size, depth int, random bool) {
	benchBlkNS(b, NamespaceSpec{NSID: 1, Backing: NamespaceMemory, Size: benchNSSize}, typ, size, depth, random)
}

// benchFileNS returns a file namespace of benchNSSize bytes of data (so
// reads hit written blocks, as in `falconnic bench nvme`).
func benchFileNS(b *testing.B) NamespaceSpec {
	path := filepath.Join(b.TempDir(), "ns.img")
	buf := make([]byte, benchNSSize)
	rand.New(rand.NewSource(2)).Read(buf)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		b.Fatal(err)
	}
	return NamespaceSpec{NSID: 1, Backing: path, Size: benchNSSize, Direct: true} // as `falconnic bench nvme` opens it
}

// benchBlkNS is benchBlk on the namespace ns; it reports MB/s too.
func benchBlkNS(b *testing.B, ns NamespaceSpec, typ uint32, size, depth int, random bool) {
	benchBlkCores(b, ns, typ, size, depth, random, 1)
}

// benchBlkCores is benchBlkNS with the ports on cores goroutines.
func benchBlkCores(b *testing.B, ns NamespaceSpec, typ uint32, size, depth int, random bool, cores int) {
	benchBlkOn(b, newBlkRigCores(b, ns, 1, cores), typ, size, depth, random)
}

// benchBlkOn runs the workload on the rig r.
func benchBlkOn(b *testing.B, r *blkRig, typ uint32, size, depth int, random bool) {
	r.start()
	r.Q.UseIndirect = true
	rng := rand.New(rand.NewSource(1))
	sectors := uint64(size / 512)
	next := uint64(0)
	post := func() {
		var sector uint64
		if random {
			sector = uint64(rng.Intn(int(benchNSSize/size))) * sectors
		} else {
			sector = next
			next = (next + sectors) % (benchNSSize / 512)
		}
		x := r.Request(typ, sector, typ == blkTypeIn, nil, size)
		x.Post()
	}
	for i := 0; i < depth; i++ {
		post()
	}
	r.Q.Publish()
	r.Q.Kick()
	b.SetBytes(int64(size))
	// The simulated guest runs on this goroutine, pinned to its thread:
	// the process's CPU less this thread's is the daemon's (block
	// function, ports, NVMe engines, Go runtime).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0, guest0 := processCPU(), threadCPU()
	sw0, guestSw0 := switches(unix.RUSAGE_SELF), switches(rusageThread)
	b.ResetTimer()
	for done := 0; done < b.N; {
		r.WaitInterrupts(1)
		for {
			u, ok := r.Q.PopUsed()
			if !ok {
				break
			}
			_ = u
			r.Consumed++
			done++
			if done+depth <= b.N {
				post()
			}
		}
		r.Q.Publish()
		r.Q.Kick()
	}
	b.StopTimer()
	// CPU per request tells changes apart on a shared machine, where
	// wall-clock rates wander: the whole process's (the simulated guest
	// too), and the daemon's alone (cpu-ns/op: the process less the
	// guest's thread), the figure `falconnic bench nvme` reports per IO.
	cpu, guest := processCPU()-cpu0, threadCPU()-guest0
	sw := switches(unix.RUSAGE_SELF) - sw0 - (switches(rusageThread) - guestSw0)
	b.ReportMetric(float64(cpu)/1e3/float64(b.N), "cpu-µs/op")
	b.ReportMetric(float64(cpu-guest)/float64(b.N), "cpu-ns/op")
	// The daemon's threads' context switches per request: each is a
	// thread that slept and was woken (costly on a virtual machine).
	b.ReportMetric(float64(sw)/float64(b.N), "ctxsw/op")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IOPS")
	b.ReportMetric(float64(b.N)*float64(size)/1e6/b.Elapsed().Seconds(), "MB/s")
}

func BenchmarkBlkRandRead4K(b *testing.B)  { benchBlk(b, blkTypeIn, 4096, 32, true) }
func BenchmarkBlkRandWrite4K(b *testing.B) { benchBlk(b, blkTypeOut, 4096, 32, true) }

// BenchmarkBlkRand4KQD1 is one 4 KiB request at a time: every request
// finds the daemon idle and pays the whole chain of wake-ups (kick
// reader, queue worker, port, completion, call), as each request of a
// TCG guest does in `falconnic bench nvme`, whose guest is too slow to
// keep a batch in the ring.
func BenchmarkBlkRand4KQD1(b *testing.B) {
	b.Run("read", func(b *testing.B) { benchBlk(b, blkTypeIn, 4096, 1, true) })
	b.Run("write", func(b *testing.B) { benchBlk(b, blkTypeOut, 4096, 1, true) })
}
func BenchmarkBlkSeqRead128K(b *testing.B) { benchBlk(b, blkTypeIn, 128<<10, 8, false) }
func BenchmarkBlkSeqWrite128K(b *testing.B) {
	benchBlk(b, blkTypeOut, 128<<10, 8, false)
}

// BenchmarkBlkRand4KFile is the 4 KiB random workload on an
// O_DIRECT file namespace (io_uring), as `falconnic bench nvme` runs it,
// at fio's queue depth 32 and one request at a time.
func BenchmarkBlkRand4KFile(b *testing.B) {
	for _, depth := range []int{32, 1} {
		for _, dir := range blkBenchDirs {
			b.Run(fmt.Sprintf("%s/qd%d", dir.name, depth), func(b *testing.B) {
				benchBlkNS(b, benchFileNS(b), dir.typ, 4096, depth, true)
			})
		}
	}
}

// blkBenchDirs are the two directions the 128 KiB benchmarks run.
var blkBenchDirs = []struct {
	name string
	typ  uint32
}{{"read", blkTypeIn}, {"write", blkTypeOut}}

// BenchmarkBlkSeq128KQD32 is the 128 KiB sequential workload at
// fio's queue depth 32, on a memory and on a file namespace: the numbers
// `falconnic bench nvme` compares with a local disk, without QEMU.
func BenchmarkBlkSeq128KQD32(b *testing.B) {
	for _, backing := range []string{"mem", "file"} {
		for _, dir := range blkBenchDirs {
			b.Run(backing+"/"+dir.name, func(b *testing.B) {
				ns := NamespaceSpec{NSID: 1, Backing: NamespaceMemory, Size: benchNSSize}
				if backing == "file" {
					ns = benchFileNS(b)
				}
				benchBlkNS(b, ns, dir.typ, 128<<10, 32, false)
			})
		}
	}
}

// BenchmarkBlkSeq128KQD32Cores is the 128 KiB workload on a file
// namespace with the two ports on one goroutine (the daemon's default,
// NVMeSpec.Cores) and on two: compare cpu-µs/op.
func BenchmarkBlkSeq128KQD32Cores(b *testing.B) {
	for _, dir := range blkBenchDirs {
		for _, cores := range []int{1, 2} {
			b.Run(fmt.Sprintf("file/%s/cores=%d", dir.name, cores), func(b *testing.B) {
				benchBlkCores(b, benchFileNS(b), dir.typ, 128<<10, 32, false, cores)
			})
		}
	}
}

// BenchmarkBlkFirmware runs the VM bench's workloads with each firmware
// on both ports (memory namespace, one goroutine for both ports, as the
// daemon runs them): between two ports of one daemon Swift should cost
// what Fixed costs, its windows open and its work some 40 ns per RUE
// event (BenchmarkSwiftHandle). Compare cpu-ns/op and IOPS, interleaved.
func BenchmarkBlkFirmware(b *testing.B) {
	for _, w := range []struct {
		name        string
		typ         uint32
		size, depth int
		random      bool
	}{
		{"randread4k/qd32", blkTypeIn, 4096, 32, true},
		{"randwrite4k/qd32", blkTypeOut, 4096, 32, true},
		{"randread4k/qd1", blkTypeIn, 4096, 1, true},
		{"read128k/qd32", blkTypeIn, 128 << 10, 32, false},
		{"write128k/qd32", blkTypeOut, 128 << 10, 32, false},
	} {
		for _, fw := range []string{port.FirmwareSwift, port.FirmwareFixed} {
			b.Run(w.name+"/"+fw, func(b *testing.B) {
				ns := NamespaceSpec{NSID: 1, Backing: NamespaceMemory, Size: benchNSSize}
				r := newBlkRigFirmware(b, ns, 1, 1, port.FirmwareSpec{Name: fw})
				benchBlkOn(b, r, w.typ, w.size, w.depth, w.random)
			})
		}
	}
}

// BenchmarkBlkSeq128KQD1 is one 128 KiB command at a time to a memory
// namespace: the latency of a command's 32 nCMDs through both ports.
func BenchmarkBlkSeq128KQD1(b *testing.B) {
	b.Run("read", func(b *testing.B) { benchBlk(b, blkTypeIn, 128<<10, 1, false) })
	b.Run("write", func(b *testing.B) { benchBlk(b, blkTypeOut, 128<<10, 1, false) })
}

// processCPU returns the process's user+system CPU time in nanoseconds.
func processCPU() int64 {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// switches returns the voluntary and involuntary context switches of
// the process (unix.RUSAGE_SELF) or of the calling thread (rusageThread).
func switches(who int) int64 {
	var ru unix.Rusage
	if unix.Getrusage(who, &ru) != nil {
		return 0
	}
	return ru.Nvcsw + ru.Nivcsw
}

// rusageThread is Linux's RUSAGE_THREAD: getrusage for the calling thread.
const rusageThread = 1

// threadCPU returns the calling thread's user+system CPU time in
// nanoseconds (the caller has locked its goroutine to the thread).
func threadCPU() int64 {
	var ru unix.Rusage
	if unix.Getrusage(rusageThread, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkBlkSeq128KQD32AIO is the 128 KiB workload on an O_DIRECT file
// namespace with its IO through io_uring (the default) and through the
// worker threads (NamespaceSpec.AIO): compare cpu-µs/op.
func BenchmarkBlkSeq128KQD32AIO(b *testing.B) {
	for _, dir := range blkBenchDirs {
		for _, aio := range []string{AIOUring, AIOThreads} {
			b.Run(dir.name+"/"+aio, func(b *testing.B) {
				ns := benchFileNS(b)
				ns.AIO = aio
				benchBlkNS(b, ns, dir.typ, 128<<10, 32, false)
			})
		}
	}
}
