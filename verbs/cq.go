package verbs

// CQ arm flags (FALCONNIC_ARM_*).
const (
	ArmSolicited = 1 << 0
	ArmNext      = 1 << 1
	// ArmWord switches the CQ to arming through its ring header: from
	// then on, besides ARM_CQ requests, the driver arms by storing
	// ArmNext or ArmSolicited in the __le32 at CQArmWordOff, which the
	// NIC reads (and clears when it raises the event) after each CQE.
	ArmWord = 1 << 2
)

// CQArmWordOff is FALCONNIC_RING_CQ_ARM_OFF: the arm word of a CQ ring
// (in rxe_queue_buf.pad_1, unused by librxe).
//
// The protocol is a Dekker pair. Driver: store the arm flags with a full
// barrier (xchg), then read the producer index; CQEs present → poll again
// (IB_CQ_REPORT_MISSED_EVENTS). NIC: store the CQE and the producer index,
// then a compare-and-swap on the arm word (a full barrier): armed for this
// CQE → swap to 0 and raise EV_CQ_COMP; not armed → swap to itself. One of
// the two always sees the other, so a CQE written while the CQ is being
// armed is either reported by the event or found by the driver.
const CQArmWordOff = 64

// CQ is a completion queue: a ring of ib_uverbs_wc the NIC produces into.
type CQ struct {
	H       uint32
	ring    *Ring
	prod    uint32
	armed   uint32
	armWord bool
	err     bool
	refs    int
	wc      [WCSize]byte
}

// CreateCQ creates completion queue h over the ring s.
func (e *Engine) CreateCQ(h uint32, s RingSpec) error {
	_, ok := e.cqs[h]
	if err := e.checkNew(h, ok, len(e.cqs), e.cfg.Limits.MaxCQ); err != nil {
		return err
	}
	if e.cfg.Mem == nil {
		return ErrNoMemory
	}
	r, err := e.loadRing(s, WCSize)
	if err != nil {
		return err
	}
	prod, err := r.Producer(e.cfg.Mem)
	if err != nil {
		e.dropRing(r)
		return err
	}
	e.cqs[h] = &CQ{H: h, ring: r, prod: prod}
	return nil
}

// DestroyCQ destroys completion queue h (busy while QPs use it).
func (e *Engine) DestroyCQ(h uint32) error {
	cq, ok := e.cqs[h]
	if !ok {
		return ErrBadHandle
	}
	if cq.refs > 0 {
		return ErrBusy
	}
	delete(e.cqs, h)
	e.dropRing(cq.ring)
	return nil
}

// ArmCQ arms completion queue h: the next CQE (flags ArmNext) or the next
// solicited or error CQE (ArmSolicited) raises one EvCQComp.
func (e *Engine) ArmCQ(h, flags uint32) error {
	cq, ok := e.cqs[h]
	if !ok {
		return ErrBadHandle
	}
	if flags&(ArmNext|ArmSolicited|ArmWord) == 0 || flags&^(ArmNext|ArmSolicited|ArmWord) != 0 {
		return ErrBadParam
	}
	if flags&ArmWord != 0 {
		cq.armWord = true
	}
	cq.armed |= flags &^ ArmWord
	return nil
}

// armWordFire consults the CQ's arm word after a CQE (see CQArmWordOff).
func (e *Engine) armWordFire(cq *CQ, solicited bool) bool {
	mem := e.cfg.Mem
	gpa, ok := cq.ring.reg.wordGPA(CQArmWordOff)
	if !ok {
		e.Stats.CQRingErr.Inc()
		return false
	}
	am, atomic := mem.(AtomicMemory)
	var b [4]byte
	for range 4 {
		if mem.Read(gpa, b[:]) != nil {
			e.Stats.CQRingErr.Inc()
			return false
		}
		w := le.Uint32(b[:])
		fire := w&ArmNext != 0 || (w&ArmSolicited != 0 && solicited)
		nw := w
		if fire {
			nw = 0
		}
		if !atomic {
			// A Memory without atomics (tests) has no concurrent guest.
			if fire {
				le.PutUint32(b[:], 0)
				_ = mem.Write(gpa, b[:])
			}
			return fire
		}
		swapped, err := am.CompareAndSwap32(gpa, w, nw)
		if err != nil {
			e.Stats.CQRingErr.Inc()
			return false
		}
		if swapped {
			return fire
		}
	}
	// The guest keeps rewriting the word: an extra event is harmless, a
	// missing one stalls the consumer.
	e.Stats.CQArmWordContended.Inc()
	return true
}

// post writes one CQE. It reports false when the CQ is full or broken: the
// CQE is lost, the CQ is in error (EvCQErr once) and the caller moves its
// QP to the error state.
func (e *Engine) post(cq *CQ, c *Completion, solicited bool) bool {
	mem := e.cfg.Mem
	if cq.err || mem == nil {
		return false
	}
	cons, err := cq.ring.Consumer(mem)
	if err != nil {
		e.cqError(cq, 2)
		e.Stats.CQRingErr.Inc()
		return false
	}
	mask := cq.ring.slots - 1
	if (cq.prod+1)&mask == cons&mask {
		e.Stats.CQOverflow.Inc()
		e.cqError(cq, 1)
		return false
	}
	c.put(cq.wc[:])
	if cq.ring.WriteSlot(mem, cq.prod, cq.wc[:]) != nil {
		e.Stats.CQRingErr.Inc()
		e.cqError(cq, 2)
		return false
	}
	cq.prod++
	if cq.ring.SetProducer(mem, cq.prod) != nil {
		e.Stats.CQRingErr.Inc()
		e.cqError(cq, 2)
		return false
	}
	sol := solicited || c.Status != WCSuccess
	fire := cq.armed&ArmNext != 0 || (cq.armed&ArmSolicited != 0 && sol)
	if fire {
		cq.armed = 0
	}
	if cq.armWord && e.armWordFire(cq, sol) {
		fire = true
	}
	if fire {
		e.event(EvCQComp, cq.H, 0)
	}
	return true
}

// cqError puts cq in error; code 1 = overrun, 2 = ring not accessible.
func (e *Engine) cqError(cq *CQ, code uint32) {
	if !cq.err {
		cq.err = true
		e.event(EvCQErr, cq.H, code)
	}
}

// SRQ is a shared receive queue.
type SRQ struct {
	H, PD  uint32
	ring   *Ring
	cons   uint32
	limit  uint32
	maxSGE uint32
	refs   int
}

// CreateSRQ creates shared receive queue h.
func (e *Engine) CreateSRQ(h, pdh, limit uint32, s RingSpec) error {
	_, ok := e.srqs[h]
	if err := e.checkNew(h, ok, len(e.srqs), e.cfg.Limits.MaxSRQ); err != nil {
		return err
	}
	p, ok := e.pds[pdh]
	if !ok {
		return ErrBadHandle
	}
	if e.cfg.Mem == nil {
		return ErrNoMemory
	}
	if s.MaxSGE > e.cfg.Limits.MaxSGE || RecvWQESize+int(s.MaxSGE)*SGESize > 1<<min(s.Log2Elem, 31) {
		return ErrBadParam
	}
	if limit >= s.Slots {
		return ErrBadParam
	}
	r, err := e.loadRing(s, RecvWQESize)
	if err != nil {
		return err
	}
	cons, err := r.Consumer(e.cfg.Mem)
	if err != nil {
		e.dropRing(r)
		return err
	}
	e.srqs[h] = &SRQ{H: h, PD: pdh, ring: r, cons: cons, limit: limit, maxSGE: s.MaxSGE}
	p.refs++
	return nil
}

// ModifySRQ sets the SRQ limit (0 disarms).
func (e *Engine) ModifySRQ(h, limit uint32) error {
	s, ok := e.srqs[h]
	if !ok {
		return ErrBadHandle
	}
	if limit >= s.ring.slots {
		return ErrBadParam
	}
	s.limit = limit
	return nil
}

// SRQInfo is QUERY_SRQ's answer.
type SRQInfo struct{ MaxWR, MaxSGE, Limit uint32 }

// QuerySRQ reports an SRQ's attributes.
func (e *Engine) QuerySRQ(h uint32) (SRQInfo, error) {
	s, ok := e.srqs[h]
	if !ok {
		return SRQInfo{}, ErrBadHandle
	}
	return SRQInfo{MaxWR: s.ring.slots - 1, MaxSGE: s.maxSGE, Limit: s.limit}, nil
}

// DestroySRQ destroys shared receive queue h.
func (e *Engine) DestroySRQ(h uint32) error {
	s, ok := e.srqs[h]
	if !ok {
		return ErrBadHandle
	}
	if s.refs > 0 {
		return ErrBusy
	}
	delete(e.srqs, h)
	e.dropRing(s.ring)
	if p := e.pds[s.PD]; p != nil {
		p.refs--
	}
	return nil
}
