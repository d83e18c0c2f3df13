package verbs

// Fast registration (FRWR) for the guest kernel's ULPs (nvme-rdma, xprtrdma,
// iSER, RDS): an MR allocated once with a page-list capacity (AllocMR, the
// driver's alloc_mr of type IB_MR_TYPE_MEM_REG), then registered and
// invalidated by work requests on a kernel QP's send queue [IB 10.6.3.4
// "Fast Register Physical MR", 10.6.5 "Invalidate"]:
//
//	           AllocMR                REG_MR WR (key variant, page list)
//	(none) ─────────────▶ FREE ─────────────────────────────────▶ VALID
//	                       ▲  ◀── LOCAL_INV WR, or a SEND_WITH_INV ──┘
//	                       │      naming its rkey (receiver's side)
//	            DeregMR ───┴──────────────────────────────▶ INVALID
//
// Only a VALID MR's keys translate (localSGE, rkeyCheck). REG_MR is taken
// only in FREE, with a key whose upper 24 bits are the allocated key's (the
// consumer steps the low byte with ib_inc_rkey); the page list is read from
// the guest page list named at AllocMR and validated page by page exactly as
// a user MR's (loadPBLInto), into the MR's own page array. A REG_MR waits
// while an earlier, unfinished WQE of its QP uses the MR (its READ data
// still lands through the old translation). Another QP's WQEs are not
// waited for: a consumer that re-registers an MR another QP still uses
// sees the new translation.

// MRState is a memory region's state [IB 10.6.1 "Memory Region states"].
type MRState uint8

// Memory region states.
const (
	MRInvalid MRState = iota // deregistered: no key translates
	MRFree                   // fast-registration MR without a translation
	MRValid                  // keys translate within [IOVA, IOVA+Len)
	numMRStates
)

var mrStateNames = [numMRStates]string{"INVALID", "FREE", "VALID"}

// String names the state.
func (s MRState) String() string {
	if s < numMRStates {
		return mrStateNames[s]
	}
	return "MRState(" + itoa(int(s)) + ")"
}

// fastMR is what a fast-registration MR adds to an MR.
type fastMR struct {
	keyIdx uint32   // key &^ keyVariantMask: fixed at allocation
	pbl    PBL      // the page list in guest memory; NPages = capacity
	pages  []uint64 // the NIC's copy of the current registration
}

// keyVariantMask is the part of a key ib_inc_rkey changes.
const keyVariantMask = 0xff

// FastMRSpec is an ALLOC_MR request.
type FastMRSpec struct {
	H, PD, Key uint32
	// PBL names the guest page list REG_MR work requests fill; its
	// NPages is the MR's capacity (max_num_sg).
	PBL PBL
}

// AllocMR allocates a fast-registration MR in MRFree. Its MTT room (the
// whole capacity) is reserved now, so a REG_MR never runs out of it.
func (e *Engine) AllocMR(s FastMRSpec) error {
	_, ok := e.mrs[s.H]
	if err := e.checkNew(s.H, ok, len(e.mrs), e.cfg.Limits.MaxMR); err != nil {
		return err
	}
	p, ok := e.pds[s.PD]
	if !ok {
		return ErrBadHandle
	}
	if s.Key == DMALKey || s.Key&^keyVariantMask == 0 || e.lkeys[s.Key] != nil || e.rkeys[s.Key] != nil {
		return ErrBadParam
	}
	n := s.PBL.NPages
	if n == 0 || n > e.cfg.Limits.MaxFastRegPages || s.PBL.Shift != PageShift {
		return ErrBadParam
	}
	if (s.PBL.Levels != 1 && s.PBL.Levels != 2) || (s.PBL.Levels == 1 && n > pblEntries) || n > MaxPages {
		return ErrBadPBL
	}
	if e.cfg.Mem == nil {
		return ErrNoMemory
	}
	if s.PBL.Root%PageSize != 0 || !e.cfg.Mem.Check(s.PBL.Root, PageSize) {
		return ErrBadGPA
	}
	if err := e.reserve(n); err != nil {
		return err
	}
	mr := &MR{H: s.H, PD: s.PD, LKey: s.Key, RKey: s.Key, state: MRFree, mttPages: n,
		fast: &fastMR{keyIdx: s.Key &^ keyVariantMask, pbl: s.PBL, pages: make([]uint64, 0, n)}}
	e.mrs[s.H] = mr
	e.lkeys[s.Key] = mr
	e.rkeys[s.Key] = mr
	p.refs++
	return nil
}

// MRState returns the state of MR h.
func (e *Engine) MRState(h uint32) (MRState, bool) {
	mr, ok := e.mrs[h]
	if !ok {
		return MRInvalid, false
	}
	return mr.state, true
}

// regWR is a REG_MR work request (struct falconnic_reg_wr).
type regWR struct {
	mr, key, access, npages uint32
	iova, length            uint64
}

// The REG_MR work request of a kernel QP: struct falconnic_reg_wr in
// rxe_send_wr.wr (rxe keeps a kernel pointer there; this ABI names the MR
// by handle and carries what ib_map_mr_sg set: iova, length, page count).
const sendWQERegOff = 24

// RegWR returns the REG_MR fields: MR handle, key, access, page count,
// iova and length.
func (w SendWQE) RegWR() (mr, key, access, npages uint32, iova, length uint64) {
	r := w[sendWQERegOff:]
	return le.Uint32(r[0:]), le.Uint32(r[4:]), le.Uint32(r[8:]), le.Uint32(r[12:]), le.Uint64(r[16:]), le.Uint64(r[24:])
}

// SetRegWR sets the REG_MR fields.
func (w SendWQE) SetRegWR(mr, key, access, npages uint32, iova, length uint64) {
	r := w[sendWQERegOff:]
	le.PutUint32(r[0:], mr)
	le.PutUint32(r[4:], key)
	le.PutUint32(r[8:], access)
	le.PutUint32(r[12:], npages)
	le.PutUint64(r[16:], iova)
	le.PutUint64(r[24:], length)
}

// errLocalWait: a REG_MR must wait for earlier WQEs using its MR.
var errLocalWait = errLocalWaitT{}

type errLocalWaitT struct{}

func (errLocalWaitT) Error() string { return "verbs: local operation waits for earlier WQEs" }

// execLocal runs a local operation (LOCAL_INV, REG_MR) in SQ order; it
// sets op's status. It returns errLocalWait when the op must wait.
func (e *Engine) execLocal(qp *QP, op *sendOp) error {
	if op.op == WRRegMR {
		if mr := e.mrs[op.reg.mr]; mr != nil && e.mrBusy(qp, op, mr) {
			return errLocalWait
		}
		op.status = e.fastReg(qp, &op.reg)
	} else {
		op.status = e.localInv(qp, op.inv)
	}
	op.done = true
	return nil
}

// mrBusy reports whether a WQE of qp taken before op and not finished has
// an SGE in mr.
func (e *Engine) mrBusy(qp *QP, cur *sendOp, mr *MR) bool {
	mask := uint32(len(qp.ops)) - 1
	for s := qp.sqDone; s != qp.sqNext; s++ {
		o := &qp.ops[s&mask]
		if o == cur || !o.live || o.done {
			continue
		}
		for i := range o.nsge {
			if o.sges[i].mr == mr {
				return true
			}
		}
	}
	return false
}

// localInv executes LOCAL_INV: a fast-registration MR of the QP's PD named
// by its current key goes to MRFree (invalidating a FREE one is a no-op).
func (e *Engine) localInv(qp *QP, key uint32) WCStatus {
	mr := e.lkeys[key]
	if key == DMALKey || mr == nil || mr.fast == nil || mr.PD != qp.pd || mr.LKey != key || mr.state == MRInvalid {
		e.Stats.LocalInvErr.Inc()
		return WCLocQPOpErr
	}
	mr.state = MRFree
	e.Stats.LocalInv.Inc()
	return WCSuccess
}

// fastReg executes REG_MR; a refused registration leaves the MR FREE and
// completes with WCMWBindErr (as rxe does).
func (e *Engine) fastReg(qp *QP, r *regWR) WCStatus {
	mr := e.mrs[r.mr]
	fail := func() WCStatus {
		e.Stats.FastRegErr.Inc()
		return WCMWBindErr
	}
	if mr == nil || mr.fast == nil || mr.PD != qp.pd || mr.state != MRFree {
		return fail()
	}
	f := mr.fast
	if r.key == DMALKey || r.key&^keyVariantMask != f.keyIdx {
		return fail()
	}
	if o := e.lkeys[r.key]; o != nil && o != mr {
		return fail()
	}
	if o := e.rkeys[r.key]; o != nil && o != mr {
		return fail()
	}
	if r.access&^accessAll != 0 || r.access&AccessMWBind != 0 ||
		(r.access&(AccessRemoteWrite|AccessRemoteAtomic) != 0 && r.access&AccessLocalWrite == 0) {
		return fail()
	}
	if r.npages == 0 || r.npages > f.pbl.NPages || r.length == 0 || r.length > e.cfg.Limits.MaxMRSize ||
		r.iova+r.length < r.iova {
		return fail()
	}
	p := f.pbl
	p.NPages = r.npages
	pages, err := loadPBLInto(e.cfg.Mem, p, f.pages, &e.pbl)
	if err != nil {
		return fail()
	}
	f.pages = pages
	reg, err := newRegion(pages, r.iova&(PageSize-1), r.length)
	if err != nil {
		return fail()
	}
	if e.lkeys[mr.LKey] == mr {
		delete(e.lkeys, mr.LKey)
	}
	if e.rkeys[mr.RKey] == mr {
		delete(e.rkeys, mr.RKey)
	}
	mr.LKey, mr.RKey = r.key, r.key
	e.lkeys[r.key] = mr
	e.rkeys[r.key] = mr
	mr.IOVA, mr.Len, mr.Access, mr.reg = r.iova, r.length, r.access, reg
	mr.state = MRValid
	e.Stats.FastReg.Inc()
	return WCSuccess
}

// remoteInvalidate executes the invalidation a SEND_WITH_INV asks for: a
// fast-registration MR of the receiving QP's PD whose rkey is key goes to
// MRFree. A user MR, another PD's MR or an unknown key refuses it.
func (e *Engine) remoteInvalidate(qp *QP, key uint32) bool {
	mr := e.rkeys[key]
	if key == DMALKey || mr == nil || mr.fast == nil || mr.PD != qp.pd || mr.RKey != key || mr.state == MRInvalid {
		e.Stats.RxRemoteInvErr.Inc()
		return false
	}
	mr.state = MRFree
	e.Stats.RxRemoteInv.Inc()
	return true
}
