package wire

import "testing"

// BenchmarkParse validates one 4 KiB Push Data packet per op.
func BenchmarkParse(b *testing.B) {
	pkt := AppendPushData(nil, &TxnFields{CID: 1, PSN: 300, RSN: 1}, make([]byte, 4096))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p, err := Parse(pkt)
		if err != nil || p.Txn().PSN() != 300 {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendPushDataHeader encodes a Push Data header into a reused
// buffer (payload space reserved, not copied).
func BenchmarkAppendPushDataHeader(b *testing.B) {
	buf := make([]byte, 0, 9000)
	f := TxnFields{CID: 1, Protocol: ProtoRDMA}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		f.PSN++
		_ = AppendTxnHeader(buf[:0], TypePushData, &f, 4096)
	}
}

// BenchmarkEACKRoundTrip encodes an EACK and decodes its three bitmaps.
func BenchmarkEACKRoundTrip(b *testing.B) {
	buf := make([]byte, 0, EACKLen)
	f := AckFields{DataAck: NewBitmap(128), DataRx: NewBitmap(128), Req: NewBitmap(64)}
	f.DataRx.Set(3)
	var out Bitmap
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		a := AppendEACK(buf[:0], &f)
		a.DataAckBitmap(&out)
		a.DataRxBitmap(&out)
		a.ReqBitmap(&out)
	}
}

// BenchmarkSealOpenICV checksums a 4 KiB packet and verifies it.
func BenchmarkSealOpenICV(b *testing.B) {
	pkt := make([]byte, 4124, 4124+ICVLen)
	b.SetBytes(int64(len(pkt)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, ok := OpenICV(SealICV(pkt)); !ok {
			b.Fatal("ICV")
		}
	}
}
