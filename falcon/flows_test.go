package falcon

import (
	"testing"
	"time"

	"falconnic/falcon/tl"
	"falconnic/falcon/wire"
)

// The eight reference flows of the spec [S §6.6] (digest §9.4) as golden
// transcripts: one line per packet delivered or lost, plus the ULP events.

// Flow 1: RDMA READ larger than one MTU — two pulls, reordered in the
// fabric, delivered in RSN order, one coalesced ACK; Pull Data completes
// them in RSN order.
func TestFlow1ReadTwoMTU(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, Ordered: true, TxRSN: 1, RxRSN: 1,
		TxReqPSN: 100, TxDataPSN: 300, RxReqPSN: 150, RxDataPSN: 200})
	s.ca.Pull(1, 4096)
	s.ca.Pull(2, 4096)
	s.deliver(1)
	s.deliver(0)
	s.wait(10 * time.Microsecond) // coalesced ACK for both
	s.deliver(0)
	s.cb.PullData(1, pattern(1, 4096))
	s.cb.PullData(2, pattern(2, 4096))
	s.settle()
	s.check(`
A→B PullRequest psn=101 rsn=2 ar=0
A→B PullRequest psn=100 rsn=1 ar=0
B: deliver pull rsn=1 len=4096
B: deliver pull rsn=2 len=4096
B→A BACK rbase=102 dbase=300
B→A PullData psn=200 rsn=1 ar=0 len=4096
A: complete pull rsn=1 ok len=4096
B→A PullData psn=201 rsn=2 ar=0 len=4096
A: complete pull rsn=2 ok len=4096
A→B BACK rbase=150 dbase=202
`)
}

// Flow 2: RDMA WRITE larger than one MTU — two pushes reordered, delivered by
// RSN, push-acked by the ULP, one coalesced ACK, two completions.
func TestFlow2WriteTwoMTU(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, Ordered: true, TxRSN: 1, RxRSN: 1,
		TxReqPSN: 100, TxDataPSN: 300, RxReqPSN: 150, RxDataPSN: 200})
	s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	s.ca.Push(1, pattern(1, 4096))
	s.ca.Push(2, pattern(2, 1000))
	s.deliver(1)
	s.deliver(0)
	s.settle()
	s.check(`
A→B PushData psn=301 rsn=2 ar=0 len=1000
A→B PushData psn=300 rsn=1 ar=0 len=4096
B: deliver push rsn=1 len=4096
B: deliver push rsn=2 len=1000
B→A BACK rbase=100 dbase=302
A: complete push rsn=1 ok len=0
A: complete push rsn=2 ok len=0
`)
}

// Flow 3: push RNR — the ULP is not ready, the RNR NACK is lost, the RTO
// resends, the second RNR NACK arrives, the initiator waits the RNR delay,
// resends, the ULP accepts.
func TestFlow3PushRNR(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, Ordered: true, TxRSN: 1, RxRSN: 1,
		TxReqPSN: 100, TxDataPSN: 301, RxReqPSN: 150, RxDataPSN: 200})
	ready := 0
	s.ub.onReq = func(c *Conn, r *Request) {
		if ready < 2 {
			ready++
			c.NackPush(r.RSN, wire.NackRNR, 0, 14) // 1.28 ms
			return
		}
		c.AckPush(r.RSN)
	}
	s.ca.Push(1, pattern(1, 512))
	s.deliver(0)
	s.lose(0)                    // RNR NACK lost
	s.wait(1 * time.Millisecond) // RTO
	s.deliver(0)
	s.deliver(0) // RNR NACK arrives
	s.wait(time.Millisecond)
	if len(s.q) != 0 {
		t.Fatal("resent before the RNR delay")
	}
	s.wait(300 * time.Microsecond)
	s.settle()
	s.check(`
A→B PushData psn=301 rsn=1 ar=0 len=512
B: deliver push rsn=1 len=512
B→A NACK code=RNR psn=301 w=data rnr=14 (lost)
A→B PushData psn=301 rsn=1 ar=1 len=512
B: deliver push rsn=1 len=512
B→A NACK code=RNR psn=301 w=data rnr=14
A→B PushData psn=301 rsn=1 ar=1 len=512
B: deliver push rsn=1 len=512
B→A BACK rbase=100 dbase=302
A: complete push rsn=1 ok len=0
`)
}

// Flow 4: pull RNR — the pull is acked at once; the ULP says RNR; the target
// redelivers after the RNR delay and the Pull Data completes the pull.
func TestFlow4PullRNR(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, Ordered: true, TxRSN: 1, RxRSN: 1,
		TxReqPSN: 101, TxDataPSN: 300, RxReqPSN: 150, RxDataPSN: 201})
	tries := 0
	s.ub.onReq = func(c *Conn, r *Request) {
		tries++
		if tries == 1 {
			c.NackPull(r.RSN, 10) // 0.32 ms
			return
		}
		c.PullData(r.RSN, pattern(r.RSN, 64))
	}
	s.ca.Pull(1, 64)
	s.deliver(0)
	s.wait(20 * time.Microsecond) // ACK of the pull
	s.deliver(0)
	s.wait(400 * time.Microsecond) // RNR delay, redelivery
	s.settle()
	s.check(`
A→B PullRequest psn=101 rsn=1 ar=0
B: deliver pull rsn=1 len=64
B→A BACK rbase=102 dbase=300
B: deliver pull rsn=1 len=64
B→A PullData psn=201 rsn=1 ar=0 len=64
A: complete pull rsn=1 ok len=64
A→B BACK rbase=150 dbase=202
`)
}

// Flow 5: push CIE — the ULP completes in error, the CIE NACK is lost, the
// RTO resend meets a remembered verdict and gets the same NACK, the
// initiator resyncs the PSN, and completes in error once the Resync is acked.
func TestFlow5PushCIE(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, Ordered: true, TxRSN: 1, RxRSN: 1,
		TxReqPSN: 100, TxDataPSN: 301, RxReqPSN: 150, RxDataPSN: 200})
	s.ub.onReq = func(c *Conn, r *Request) { c.NackPush(r.RSN, wire.NackCIE, 98, 0) }
	s.ca.Push(1, pattern(1, 100))
	s.deliver(0)
	s.lose(0)
	s.wait(time.Millisecond)
	s.settle()
	s.check(`
A→B PushData psn=301 rsn=1 ar=0 len=100
B: deliver push rsn=1 len=100
B→A NACK code=CIE psn=301 w=data ulp=98 (lost)
A→B PushData psn=301 rsn=1 ar=1 len=100
B→A NACK code=CIE psn=301 w=data ulp=98
A→B Resync psn=301 rsn=1 code=TargetCIE of=PushData ar=1
B→A BACK rbase=100 dbase=302
A: complete push rsn=1 target-cie len=0
`)
	if got := s.ua.cpls[0].ULPCode; got != 98 {
		t.Errorf("ULP code %d, want 98", got)
	}
}

// Flow 6: EACK early retransmission — PSN 300 of 300-303 is lost; the
// target holds 301-303 (ordered); the EACK's data-rx bitmap shows the hole;
// the initiator resends 300; all four are delivered in order; one ACK; four
// completions.
func TestFlow6EACKEarlyRetransmit(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, Ordered: true, TxRSN: 1, RxRSN: 1,
		TxReqPSN: 100, TxDataPSN: 300, RxReqPSN: 150, RxDataPSN: 200, OOODistance: 2})
	s.ub.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	for i := 1; i <= 4; i++ {
		s.ca.Push(uint64(i), pattern(wire.RSN(i), 8))
	}
	s.lose(0)
	s.settle()
	s.check(`
A→B PushData psn=300 rsn=1 ar=0 len=8 (lost)
A→B PushData psn=301 rsn=2 ar=0 len=8
A→B PushData psn=302 rsn=3 ar=0 len=8
A→B PushData psn=303 rsn=4 ar=0 len=8
B→A EACK rbase=100 dbase=300 req=0 dack=0 drx=0b1110
A→B PushData psn=300 rsn=1 ar=1 len=8
B: deliver push rsn=1 len=8
B: deliver push rsn=2 len=8
B: deliver push rsn=3 len=8
B: deliver push rsn=4 len=8
B→A BACK rbase=100 dbase=304
A: complete push rsn=1 ok len=0
A: complete push rsn=2 ok len=0
A: complete push rsn=3 ok len=0
A: complete push rsn=4 ok len=0
`)
	if s.ca.Stats.RetxEarly.Load() != 1 {
		t.Errorf("early retransmissions %d, want 1", s.ca.Stats.RetxEarly.Load())
	}
}

// Flow 7: NVMe 8 KiB read on an unordered connection — two Read Requests
// (pushes), delivered in arrival order and acked; two Read Responses as
// target-initiated pushes with the target's own RSNs.
func TestFlow7NVMeRead(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, Protocol: wire.ProtoNVMe, TxRSN: 1, RxRSN: 101,
		TxReqPSN: 50, TxDataPSN: 100, RxReqPSN: 150, RxDataPSN: 200})
	var reqs []wire.RSN
	s.ub.onReq = func(c *Conn, r *Request) {
		c.AckPush(r.RSN)
		reqs = append(reqs, r.RSN)
	}
	s.ua.onReq = func(c *Conn, r *Request) { c.AckPush(r.RSN) }
	s.ca.Push(1, pattern(1, 64))
	s.ca.Push(2, pattern(2, 64))
	s.deliver(1)
	s.deliver(0)
	s.wait(10 * time.Microsecond)
	s.deliver(0)
	for range reqs {
		s.cb.Push(9, pattern(9, 4096))
	}
	s.settle()
	s.check(`
A→B PushData psn=101 rsn=2 ar=0 len=64
B: deliver push rsn=2 len=64
A→B PushData psn=100 rsn=1 ar=0 len=64
B: deliver push rsn=1 len=64
B→A BACK rbase=50 dbase=102
A: complete push rsn=1 ok len=0
A: complete push rsn=2 ok len=0
B→A PushData psn=200 rsn=101 ar=0 len=4096
A: deliver push rsn=101 len=4096
B→A PushData psn=201 rsn=102 ar=0 len=4096
A: deliver push rsn=102 len=4096
A→B BACK rbase=150 dbase=202
B: complete push rsn=101 ok len=0
B: complete push rsn=102 ok len=0
`)
}

// Flow 8: NVMe 8 KiB write on an unordered connection — two Write Requests
// (push); the target pulls the data (Write Data Request = pull, Write Data
// Response = Pull Data); then pushes two Write Completions.
func TestFlow8NVMeWrite(t *testing.T) {
	s := newScript(t, ConnConfig{SCID: 1, DCID: 2, Protocol: wire.ProtoNVMe, TxRSN: 1, RxRSN: 301,
		TxReqPSN: 50, TxDataPSN: 100, RxReqPSN: 200, RxDataPSN: 202})
	s.ub.onReq = func(c *Conn, r *Request) {
		c.AckPush(r.RSN)
		c.Pull(uint64(r.RSN), 4096)
	}
	s.ua.onReq = func(c *Conn, r *Request) {
		if r.Kind == tl.Pull {
			c.PullData(r.RSN, pattern(r.RSN, 4096))
			return
		}
		c.AckPush(r.RSN)
	}
	s.ub.onCpl = func(c *Conn, cpl *Completion) {
		if cpl.Kind == tl.Pull {
			c.Push(cpl.Cookie, pattern(1, 16))
		}
	}
	s.ca.Push(1, pattern(1, 64))
	s.ca.Push(2, pattern(2, 64))
	s.settle()
	s.check(`
A→B PushData psn=100 rsn=1 ar=0 len=64
B: deliver push rsn=1 len=64
A→B PushData psn=101 rsn=2 ar=0 len=64
B: deliver push rsn=2 len=64
B→A PullRequest psn=200 rsn=301 ar=0
A: complete push rsn=1 ok len=0
A: deliver pull rsn=301 len=4096
B→A PullRequest psn=201 rsn=302 ar=0
A: complete push rsn=2 ok len=0
A: deliver pull rsn=302 len=4096
A→B PullData psn=102 rsn=301 ar=0 len=4096
B: complete pull rsn=301 ok len=4096
A→B PullData psn=103 rsn=302 ar=0 len=4096
B: complete pull rsn=302 ok len=4096
B→A PushData psn=202 rsn=303 ar=0 len=16
A: deliver push rsn=303 len=16
B→A PushData psn=203 rsn=304 ar=0 len=16
A: deliver push rsn=304 len=16
A→B BACK rbase=202 dbase=204
B: complete push rsn=303 ok len=0
B: complete push rsn=304 ok len=0
`)
}
