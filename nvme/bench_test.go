package nvme

import (
	"math/rand"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// benchIO keeps depth commands of size bytes in flight through initiator +
// target over two in-process Falcon endpoints (no impairments) and reports
// IOPS, bandwidth and the CPU per command (cpu-ns/op: the engines run on
// the benchmark's goroutine alone, pinned to its thread, so the thread's
// CPU time is theirs whatever else loads the host). Random offsets when
// random, else sequential.
func benchIO(b *testing.B, op Opcode, size, depth int, random bool) {
	const blocks = 1 << 17 // 64 MiB namespace of 512 B blocks
	r := newRig(b, rigConfig{namespaces: []NamespaceConfig{{NSID: 1, BlockSize: 512, Blocks: blocks}}})
	rng := rand.New(rand.NewSource(1))
	per := uint64(size / 512)
	next := uint64(0)
	cmds := make([]Command, depth)
	bufs := make([][][]byte, depth)
	for i := range cmds {
		bufs[i] = [][]byte{pattern(size, byte(i))}
	}
	issue := func(c *Command, i int) {
		var slba uint64
		if random {
			slba = uint64(rng.Intn(blocks/int(per))) * per
		} else {
			slba = next
			next = (next + per) % blocks
		}
		*c = Command{Op: op, NSID: 1, SLBA: slba, Blocks: uint32(per), Data: bufs[i], Cookie: uint64(i)}
		r.submit(c)
	}
	for i := range cmds {
		issue(&cmds[i], i)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	b.ResetTimer()
	issued := depth
	for done := 0; done < b.N; {
		r.done = r.done[:0]
		if !r.pair.Step() {
			b.Fatal("stalled")
		}
		for _, c := range r.done {
			if !c.Status.OK() {
				b.Fatal(c.Status)
			}
			done++
			if issued < b.N+depth {
				i := int(c.Cookie)
				issue(&cmds[i], i)
				issued++
			}
		}
	}
	b.StopTimer()
	cpu := threadCPU() - cpu0
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IOPS")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// rusageThread is Linux's RUSAGE_THREAD: getrusage for the calling thread.
const rusageThread = 1

// threadCPU returns the calling thread's user and system CPU time.
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(rusageThread, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkRandRead4K(b *testing.B)   { benchIO(b, OpRead, 4096, 32, true) }
func BenchmarkRandWrite4K(b *testing.B)  { benchIO(b, OpWrite, 4096, 32, true) }
func BenchmarkSeqRead128K(b *testing.B)  { benchIO(b, OpRead, 128<<10, 8, false) }
func BenchmarkSeqWrite128K(b *testing.B) { benchIO(b, OpWrite, 128<<10, 8, false) }
