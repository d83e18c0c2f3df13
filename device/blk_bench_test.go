package device

import (
	"math/rand"
	"testing"
)

// benchBlk keeps depth requests of size bytes in flight from the simulated
// guest through the block function, the NVMe initiator and target over two
// Falcon ports (real clock, in-process links) to a memory namespace.
func benchBlk(b *testing.B, typ uint32, size, depth int, random bool) {
	r := newBlkRig(b, NamespaceSpec{NSID: 1, Backing: NamespaceMemory, Size: 64 << 20})
	r.start()
	r.q.UseIndirect = true
	rng := rand.New(rand.NewSource(1))
	sectors := uint64(size / 512)
	next := uint64(0)
	post := func() {
		var sector uint64
		if random {
			sector = uint64(rng.Intn(int((64<<20)/size))) * sectors
		} else {
			sector = next
			next = (next + sectors) % ((64 << 20) / 512)
		}
		x := r.request(typ, sector, typ == blkTypeIn, nil, size)
		x.post()
	}
	for i := 0; i < depth; i++ {
		post()
	}
	r.q.Publish()
	r.q.Kick()
	b.SetBytes(int64(size))
	b.ResetTimer()
	for done := 0; done < b.N; {
		r.waitInterrupts(1)
		for {
			u, ok := r.q.PopUsed()
			if !ok {
				break
			}
			_ = u
			r.consumed++
			done++
			if done+depth <= b.N {
				post()
			}
		}
		r.q.Publish()
		r.q.Kick()
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "IOPS")
}

func BenchmarkBlkRandRead4K(b *testing.B)  { benchBlk(b, blkTypeIn, 4096, 32, true) }
func BenchmarkBlkRandWrite4K(b *testing.B) { benchBlk(b, blkTypeOut, 4096, 32, true) }
func BenchmarkBlkSeqRead128K(b *testing.B) { benchBlk(b, blkTypeIn, 128<<10, 8, false) }
func BenchmarkBlkSeqWrite128K(b *testing.B) {
	benchBlk(b, blkTypeOut, 128<<10, 8, false)
}
