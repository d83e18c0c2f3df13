package rdmauapi

// Structural checks of request bodies. Each returns the status the NIC
// answers with (StatusOK when the body is well formed). They check what the
// body alone can tell; the NIC still checks handles, GPAs against guest
// memory, and its limits.

// MaxPBLPages is the most data pages a two-level PBL can list.
const MaxPBLPages = PBLEntries * PBLEntries

// MaxRingSlots is the largest ring the NIC must accept.
const MaxRingSlots = 1 << 20

// Check validates a page list descriptor.
func (p PBL) Check() Status {
	n := p.Npages()
	switch {
	case p.PageShift() != PageShift:
		return StatusBadParam
	case n == 0:
		return StatusBadParam
	case p.Levels() == 1 && n > PBLEntries:
		return StatusBadParam
	case p.Levels() == 2 && n > MaxPBLPages:
		return StatusBadParam
	case p.Levels() != 1 && p.Levels() != 2:
		return StatusBadParam
	case p.Root()%PageSize != 0:
		return StatusBadGPA
	}
	return StatusOK
}

// Bytes returns the ring's size in guest memory: header plus slots.
func (r Ring) Bytes() uint64 {
	return RingHdrSize + uint64(r.Slots())<<(r.Log2ElemSize()&63)
}

// Check validates a ring descriptor whose elements must be at least
// minElem bytes.
func (r Ring) Check(minElem int) Status {
	s := r.Slots()
	switch {
	case s < 2 || s > MaxRingSlots || s&(s-1) != 0:
		return StatusBadParam
	case r.Log2ElemSize() > 16 || 1<<r.Log2ElemSize() < minElem:
		return StatusBadParam
	}
	if st := r.PBL().Check(); st != StatusOK {
		return st
	}
	if uint64(r.PBL().Npages())*PageSize < r.Bytes() {
		return StatusBadParam
	}
	return StatusOK
}

// Check validates REG_MR.
func (m RegMR) Check() Status {
	switch {
	case m.MR() == 0 || m.PD() == 0 || m.LKey() == 0:
		return StatusBadHandle
	case m.Access()&^AccessAll != 0:
		return StatusBadAccess
	case m.FirstOffset() >= PageSize || m.Length() == 0:
		return StatusBadParam
	case m.IOVA()+m.Length() < m.IOVA():
		return StatusBadParam
	}
	if st := m.PBL().Check(); st != StatusOK {
		return st
	}
	if uint64(m.FirstOffset())+m.Length() > uint64(m.PBL().Npages())*PageSize {
		return StatusBadParam
	}
	return StatusOK
}

// Check validates ALLOC_MR: handles, a key the DMA key cannot be confused
// with, and a page-list descriptor (its npages is the capacity).
func (m AllocMR) Check() Status {
	switch {
	case m.MR() == 0 || m.PD() == 0:
		return StatusBadHandle
	case m.Key() == DMALKey || m.Key()>>8 == 0:
		return StatusBadParam
	}
	return m.PBL().Check()
}

// Check validates an ARM_CQ body's flags.
func (a ArmCQ) Check() Status {
	f := a.Flags()
	if f == 0 || f&^(ArmSolicited|ArmNext|ArmWord) != 0 {
		return StatusBadParam
	}
	return StatusOK
}

// Sizes of the ring elements of <rdma/rdma_user_rxe.h> and ib_user_verbs.h
// (checked against gcc in layout_test.go).
const (
	SendWQESize = 208 // sizeof(struct rxe_send_wqe), without SGEs
	RecvWQESize = 40  // sizeof(struct rxe_recv_wqe), without SGEs
	SGESize     = 16  // sizeof(struct rxe_sge)
	CQESize     = 48  // sizeof(struct ib_uverbs_wc)
)

// Check validates CREATE_CQ.
func (c CreateCQ) Check() Status {
	if c.CQ() == 0 {
		return StatusBadHandle
	}
	if st := c.Ring().Check(CQESize); st != StatusOK {
		return st
	}
	if c.CQE() != c.Ring().Slots()-1 {
		return StatusBadParam
	}
	return StatusOK
}

// Check validates CREATE_QP.
func (c CreateQP) Check() Status {
	switch {
	case c.Type() == QPTypeGSI && (c.QP() != GSIQPN || c.Flags()&QPFlagKernel == 0):
		return StatusBadParam
	case c.Type() != QPTypeGSI && (c.QP() < FirstQPN || c.QP() > 0xffffff):
		return StatusBadHandle
	case c.PD() == 0 || c.SendCQ() == 0 || c.RecvCQ() == 0:
		return StatusBadHandle
	case c.Type() != QPTypeGSI && c.Type() != QPTypeRC && c.Type() != QPTypeUC && c.Type() != QPTypeUD:
		return StatusBadParam
	case c.SQSigAll() > 1 || c.Flags()&^QPFlagKernel != 0:
		return StatusBadParam
	}
	if st := c.SQ().Check(SendWQESize); st != StatusOK {
		return st
	}
	sq := c.SQ()
	if 1<<sq.Log2ElemSize() < SendWQESize+int(sq.MaxSGE())*SGESize ||
		1<<sq.Log2ElemSize() < SendWQESize+int(sq.MaxInline()) {
		return StatusBadParam
	}
	if c.SRQ() != 0 {
		for _, b := range c.RQ() {
			if b != 0 {
				return StatusBadParam
			}
		}
		return StatusOK
	}
	if st := c.RQ().Check(RecvWQESize); st != StatusOK {
		return st
	}
	rq := c.RQ()
	if 1<<rq.Log2ElemSize() < RecvWQESize+int(rq.MaxSGE())*SGESize {
		return StatusBadParam
	}
	return StatusOK
}

// Check validates CREATE_SRQ.
func (c CreateSRQ) Check() Status {
	if c.SRQ() == 0 || c.PD() == 0 {
		return StatusBadHandle
	}
	if st := c.Ring().Check(RecvWQESize); st != StatusOK {
		return st
	}
	r := c.Ring()
	if 1<<r.Log2ElemSize() < RecvWQESize+int(r.MaxSGE())*SGESize ||
		c.SRQLimit() >= r.Slots() {
		return StatusBadParam
	}
	return StatusOK
}

// Check validates an address vector.
func (a AV) Check() Status {
	if a.PortNum() != 1 || (a.NetworkType() != NetworkIPv4 && a.NetworkType() != NetworkIPv6) ||
		a.FlowLabel() > 0xfffff {
		return StatusBadParam
	}
	return StatusOK
}

// Check validates MODIFY_QP: known mask bits, and every field the mask
// names within its IB range.
func (q QPAttr) Check() Status {
	m := q.AttrMask()
	switch {
	case m&^QPAttrAll != 0:
		return StatusBadParam
	case m&QPAttrState != 0 && q.QPState() > QPSErr:
		return StatusBadParam
	case m&QPAttrCurState != 0 && q.CurQPState() > QPSErr:
		return StatusBadParam
	case m&QPAttrPathMTU != 0 && (q.PathMTU() < 1 || q.PathMTU() > 5):
		return StatusBadParam
	case m&QPAttrAccessFlags != 0 && q.AccessFlags()&^AccessAll != 0:
		return StatusBadAccess
	case m&QPAttrPort != 0 && q.PortNum() != 1:
		return StatusBadParam
	case m&QPAttrRQPSN != 0 && q.RQPSN() > 0xffffff,
		m&QPAttrSQPSN != 0 && q.SQPSN() > 0xffffff,
		m&QPAttrDestQPN != 0 && q.DestQPNum() > 0xffffff:
		return StatusBadParam
	case m&QPAttrTimeout != 0 && q.Timeout() > 31,
		m&QPAttrMinRNRTimer != 0 && q.MinRNRTimer() > 31,
		m&QPAttrRetryCnt != 0 && q.RetryCnt() > 7,
		m&QPAttrRNRRetry != 0 && q.RNRRetry() > 7:
		return StatusBadParam
	}
	if m&QPAttrAV != 0 {
		return q.AV().Check()
	}
	return StatusOK
}
