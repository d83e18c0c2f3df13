package falcon

import (
	"strconv"
	"strings"

	"falconnic/falcon/wire"
)

// Describe renders one Falcon packet (no envelope) as a one-line summary for
// transcripts and traces, e.g. "PushData psn=300 rsn=1 ar=0".
func Describe(pkt []byte) string {
	p, err := wire.Parse(pkt)
	if err != nil {
		return "malformed: " + err.Error()
	}
	var b strings.Builder
	b.WriteString(p.Type().String())
	kv := func(k string, v uint64) {
		b.WriteByte(' ')
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.FormatUint(v, 10))
	}
	switch p.Type() {
	case wire.TypeBACK, wire.TypeEACK:
		a := p.Ack()
		kv("rbase", uint64(a.ReqBase()))
		kv("dbase", uint64(a.DataBase()))
		if a.IsEACK() {
			var bm wire.Bitmap
			a.ReqBitmap(&bm)
			b.WriteString(" req=" + bitString(&bm))
			a.DataAckBitmap(&bm)
			b.WriteString(" dack=" + bitString(&bm))
			a.DataRxBitmap(&bm)
			b.WriteString(" drx=" + bitString(&bm))
			if a.OWNRequest() || a.OWNData() {
				b.WriteString(" own")
			}
		}
	case wire.TypeNACK:
		n := p.Nack()
		b.WriteString(" code=" + n.Code().String())
		kv("psn", uint64(n.NackPSN()))
		b.WriteString(" w=" + n.Window().String())
		if n.Code() == wire.NackRNR {
			kv("rnr", uint64(n.RNRTimeoutCode()))
		}
		if n.ULPCode() != 0 {
			kv("ulp", uint64(n.ULPCode()))
		}
	default:
		t := p.Txn()
		kv("psn", uint64(t.PSN()))
		kv("rsn", uint64(t.RSN()))
		if t.Type() == wire.TypeResync {
			b.WriteString(" code=" + t.ResyncCode().String() + " of=" + t.ResyncPacketType().String())
		}
		ar := uint64(0)
		if t.AR() {
			ar = 1
		}
		kv("ar", ar)
		if n := len(t.Payload()); n > 0 {
			kv("len", uint64(n))
		}
	}
	return b.String()
}

// bitString renders the set bits of bm as a binary number, bit 0 rightmost
// ("0b0111" = bits 0..2 set), "0" when empty.
func bitString(bm *wire.Bitmap) string {
	h := bm.Highest()
	if h < 0 {
		return "0"
	}
	var b strings.Builder
	b.WriteString("0b")
	for i := h; i >= 0; i-- {
		if bm.Test(i) {
			b.WriteByte('1')
		} else {
			b.WriteByte('0')
		}
	}
	return b.String()
}
