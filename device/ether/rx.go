package ether

import (
	"encoding/binary"

	"falconnic/vhostuser"
)

// rxState is the RX ring goroutine's scratch, reused for every frame.
type rxState struct {
	c     vhostuser.Chain
	heads [maxMergeBufs]uint16
	lens  [maxMergeBufs]uint32
}

// rxBatch bounds the frames written between two notifications.
const rxBatch = 256

// runRX owns RX ring q of pair: it takes frames from the NIC's queue and
// writes them into the guest's buffers. A frame waits (at most one, held
// here) while the guest has posted no buffers; the queue behind it is
// bounded by rxQueueDepth.
func (n *NIC) runRX(q *vhostuser.Queue, pair int) {
	n.rxActive[pair].Store(true)
	defer n.rxActive[pair].Store(false)
	in := n.rxq[pair]
	st := &rxState{}
	var pending []byte
	for {
		var recv chan []byte
		if pending == nil {
			recv = in
		}
		select {
		case <-q.Done():
			if pending != nil {
				n.counters.RxPendingReset.Inc()
				n.putBuf(pending)
			}
			return
		case <-q.Wake():
			if pending == nil && len(in) == 0 {
				q.Refresh() // a wake may announce a new memory table
				continue
			}
		case f := <-recv:
			pending = f
		}
		hdrLen, mrg := n.dev.layout()
	batch:
		for i := 0; i < rxBatch; i++ {
			if pending == nil {
				select {
				case pending = <-in:
				default:
					break batch
				}
			}
			if !n.rxFrame(q, st, pending, hdrLen, mrg) {
				n.counters.RxGuestNoBufs.Inc()
				break
			}
			n.putBuf(pending)
			pending = nil
			if n.rxStalled[pair].Load() {
				n.rxStalled[pair].Store(false)
			}
		}
		q.Flush()
		q.Notify()
	}
}

// rxFrame writes hdr+frame into the guest's RX buffers. It reports false
// when the guest has not posted enough buffers (nothing consumed; the
// frame waits). Frames that can never fit are dropped (counted) and true
// is returned. With MRG_RXBUF a frame spans several chains and num_buffers
// says how many; all its used elements are filled together.
func (n *NIC) rxFrame(q *vhostuser.Queue, st *rxState, frame []byte, hdrLen int, mrg bool) bool {
	need := hdrLen + len(frame)
	done, nb := 0, 0
	q.Mark()
	var hdr []byte
	drop := func(ctr interface{ Inc() }) bool {
		ctr.Inc()
		for i := 0; i < nb; i++ {
			q.Fill(st.heads[i], 0)
		}
		return true
	}
	for done < need {
		if nb == len(st.heads) {
			return drop(&n.counters.RxTooManyBufs)
		}
		if !q.Pop(&st.c) {
			if !q.RewindToMark() {
				// A bad chain came back in between: our chains cannot be
				// re-popped, so they go back empty; the frame waits.
				n.counters.RxPartialReturned.Add(uint64(nb))
				for i := 0; i < nb; i++ {
					q.Fill(st.heads[i], 0)
				}
			}
			return false
		}
		c := &st.c
		if c.ReadLen != 0 {
			q.Fill(c.Head, 0)
			return drop(&n.counters.RxChainReadable)
		}
		if nb == 0 {
			if len(c.Bufs) == 0 || len(c.Bufs[0].Data) < hdrLen {
				q.Fill(c.Head, 0)
				return drop(&n.counters.RxChainTooSmall)
			}
			hdr = c.Bufs[0].Data[:hdrLen]
		}
		w := 0
		for _, b := range c.Bufs {
			if done == need {
				break
			}
			k := fill(b.Data, done, hdrLen, frame)
			done += k
			w += k
		}
		st.heads[nb], st.lens[nb] = c.Head, uint32(w)
		nb++
		if !mrg && done < need {
			return drop(&n.counters.RxChainTooSmall)
		}
	}
	if hdrLen == netHdrLen {
		binary.LittleEndian.PutUint16(hdr[netHdrNumBufs:], uint16(nb))
	}
	for i := 0; i < nb; i++ {
		q.Fill(st.heads[i], st.lens[i])
	}
	n.counters.RxFrames.Inc()
	n.counters.RxBytes.Add(uint64(len(frame)))
	return true
}

// fill writes the stream (hdrLen zero bytes, then frame) from position
// pos into dst and returns the bytes written. The header carries no
// offload flags (we offer none) and GSO_NONE.
func fill(dst []byte, pos, hdrLen int, frame []byte) int {
	k := 0
	if pos < hdrLen {
		m := min(hdrLen-pos, len(dst))
		clear(dst[:m])
		k, pos = m, pos+m
	}
	if k < len(dst) && pos >= hdrLen {
		k += copy(dst[k:], frame[pos-hdrLen:])
	}
	return k
}
