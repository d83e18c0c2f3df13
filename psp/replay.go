package psp

// ReplayWindow is how many sequence numbers, the newest included, an RxSA
// accepts (each once): the reordering the fabric's paths may add, in
// packets. Older ones are dropped (DropTooOld). The bitmap has one word
// more than the window, so the word a new top clears never holds a number
// still inside it [RFC 6479 §2].
const ReplayWindow = (replayWords - 1) * 64

const replayWords = 32

// replay is an anti-replay window over IV sequence numbers, as IPsec's
// [RFC 4303 §3.4.3]: top is the highest number accepted, bit n%ReplayWindow
// of bits says whether n (top-ReplayWindow < n ≤ top) was. It is updated
// only for a datagram whose tag verified.
type replay struct {
	top  uint32
	bits [replayWords]uint64
}

// check returns why seq must be dropped, or dropNone, without changing
// the window.
func (w *replay) check(seq uint32) Drop {
	switch {
	case seq == 0:
		return DropTooOld // senders start at 1
	case seq > w.top:
		return dropNone
	case w.top-seq >= ReplayWindow:
		return DropTooOld
	case w.bits[seq/64%replayWords]&(1<<(seq%64)) != 0:
		return DropReplay
	}
	return dropNone
}

// mark records seq (check said dropNone).
func (w *replay) mark(seq uint32) {
	if seq > w.top {
		// Clear the words between the old top's and seq's, seq's included.
		from, to := w.top/64+1, seq/64
		if to-from+1 >= replayWords {
			w.bits = [replayWords]uint64{}
		} else {
			for i := from; i <= to; i++ {
				w.bits[i%replayWords] = 0
			}
		}
		w.top = seq
	}
	w.bits[seq/64%replayWords] |= 1 << (seq % 64)
}
