package psp

import "testing"

// BenchmarkSeal4K and BenchmarkOpen4K measure one 4 KiB Falcon datagram
// (a Push Data of an RDMA MTU) per operation on one core; SetBytes makes
// the MB/s column the payload rate.
func BenchmarkSeal4K(b *testing.B) {
	for _, v := range []Version{AESGCM128, AESGCM256} {
		b.Run(v.String(), func(b *testing.B) {
			_, _, tx := pair(b, v, 1)
			pkt := falconPkt(3, 4096-4, 0)
			dst := make([]byte, 0, len(pkt)+Overhead)
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			for b.Loop() {
				if tx.seq == 1<<32-1 {
					tx.seq = 0
				}
				if _, err := tx.Seal(dst, pkt, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkOpen4K(b *testing.B) {
	for _, v := range []Version{AESGCM128, AESGCM256} {
		b.Run(v.String(), func(b *testing.B) {
			_, rx, tx := pair(b, v, 1)
			pkt := falconPkt(3, 4096-4, 0)
			d := seal(b, tx, pkt, 1)
			orig := append([]byte(nil), d...)
			b.SetBytes(int64(len(pkt)))
			b.ReportAllocs()
			for b.Loop() {
				copy(d, orig)         // Open decrypts in place
				rx.cur.win = replay{} // the same datagram again: not a replay here
				if _, _, drop := rx.Open(d); drop != dropNone {
					b.Fatal(drop)
				}
			}
		})
	}
}
