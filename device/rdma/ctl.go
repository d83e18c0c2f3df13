package rdma

import (
	"errors"

	"falconnic/device/rdmauapi"
	"falconnic/verbs"
)

// The control channel [uapi falconnic.h]: requests from the guest driver,
// decoded strictly (rdmauapi), executed against the verbs engine, answered
// with the same opcode and req_id. Every handler checks its body's fields
// (rdmauapi's Check methods, then the engine's own checks) before acting.

// rdmaDeviceAttr are the limits PROBE reports.
func (r *Func) deviceAttr(b rdmauapi.DeviceAttr) {
	l := r.eng.Limits()
	b.SetFWVer(1)
	b.SetMaxMRSize(l.MaxMRSize)
	b.SetPageSizeCap(verbs.PageSize)
	b.SetMAC(r.mac[:])
	b.SetNports(1)
	b.SetVendorID(0x1af4)
	b.SetVendorPartID(0xfa1c)
	b.SetHWVer(1)
	b.SetMaxQP(l.MaxQP)
	b.SetMaxQPWR(verbs.MaxRingSlots - 1)
	b.SetMaxSendSGE(l.MaxSGE)
	b.SetMaxRecvSGE(l.MaxSGE)
	b.SetMaxSGERd(l.MaxSGE)
	b.SetMaxCQ(l.MaxCQ)
	b.SetMaxCQE(verbs.MaxRingSlots - 1)
	b.SetMaxMR(l.MaxMR)
	b.SetMaxPD(l.MaxPD)
	b.SetMaxQPRdAtom(16)
	b.SetMaxQPInitRdAtom(16)
	b.SetMaxSRQ(l.MaxSRQ)
	b.SetMaxSRQWR(verbs.MaxRingSlots - 1)
	b.SetMaxSRQSGE(l.MaxSGE)
	b.SetMaxAH(l.MaxAH)
	b.SetMaxInlineData(l.MaxInline)
	b.SetCapFlags(rdmauapi.CapRC | rdmauapi.CapUC | rdmauapi.CapUD | rdmauapi.CapSRQ |
		rdmauapi.CapAtomic | rdmauapi.CapImm | rdmauapi.CapInline | rdmauapi.CapMemMgt | rdmauapi.CapArmWord)
	b.SetMaxFastRegPages(l.MaxFastRegPages)
}

// ctlHandler runs one request; it returns the reply body (nil when the
// reply has none) or an error that becomes the status.
type ctlHandler func(r *Func, body, reply []byte) error

// ctlHandlers maps every request and doorbell opcode to its handler.
var ctlHandlers = map[rdmauapi.Opcode]ctlHandler{
	rdmauapi.OpProbe: func(r *Func, b, reply []byte) error {
		r.deviceAttr(rdmauapi.DeviceAttr(reply))
		return nil
	},
	rdmauapi.OpOpen:  func(r *Func, b, reply []byte) error { return nil }, // handled in control
	rdmauapi.OpClose: func(r *Func, b, reply []byte) error { return nil },
	rdmauapi.OpQueryPort: func(r *Func, b, reply []byte) error {
		if rdmauapi.HandleReq(b).Handle() != 1 {
			return verbs.ErrBadHandle
		}
		p := rdmauapi.PortAttr(reply)
		p.SetState(4) // IB_PORT_ACTIVE
		p.SetMaxMTU(5)
		p.SetActiveMTU(5)
		p.SetMaxMsgSz(1 << 31)
		p.SetActiveSpeed(1)
		p.SetActiveWidth(1)
		p.SetPhysState(5) // LINK_UP
		return nil
	},
	rdmauapi.OpCreatePD:  func(r *Func, b, _ []byte) error { return r.eng.CreatePD(rdmauapi.HandleReq(b).Handle()) },
	rdmauapi.OpDestroyPD: func(r *Func, b, _ []byte) error { return r.eng.DestroyPD(rdmauapi.HandleReq(b).Handle()) },
	rdmauapi.OpRegMR: func(r *Func, b, _ []byte) error {
		m := rdmauapi.RegMR(b)
		if st := m.Check(); st != rdmauapi.StatusOK {
			return statusErr(st)
		}
		return r.eng.RegMR(verbs.MRSpec{H: m.MR(), PD: m.PD(), LKey: m.LKey(), RKey: m.RKey(), IOVA: m.IOVA(),
			Len: m.Length(), Access: m.Access(), FirstOffset: m.FirstOffset(), PBL: pbl(m.PBL())})
	},
	rdmauapi.OpDeregMR: func(r *Func, b, _ []byte) error { return r.eng.DeregMR(rdmauapi.HandleReq(b).Handle()) },
	rdmauapi.OpAllocMR: func(r *Func, b, _ []byte) error {
		m := rdmauapi.AllocMR(b)
		if st := m.Check(); st != rdmauapi.StatusOK {
			return statusErr(st)
		}
		return r.eng.AllocMR(verbs.FastMRSpec{H: m.MR(), PD: m.PD(), Key: m.Key(), PBL: pbl(m.PBL())})
	},
	rdmauapi.OpCreateCQ: func(r *Func, b, _ []byte) error {
		c := rdmauapi.CreateCQ(b)
		if st := c.Check(); st != rdmauapi.StatusOK {
			return statusErr(st)
		}
		return r.eng.CreateCQ(c.CQ(), ring(c.Ring()))
	},
	rdmauapi.OpDestroyCQ: func(r *Func, b, _ []byte) error { return r.eng.DestroyCQ(rdmauapi.HandleReq(b).Handle()) },
	rdmauapi.OpArmCQ: func(r *Func, b, _ []byte) error {
		a := rdmauapi.ArmCQ(b)
		if st := a.Check(); st != rdmauapi.StatusOK {
			return statusErr(st)
		}
		return r.eng.ArmCQ(a.CQ(), a.Flags())
	},
	rdmauapi.OpCreateQP: func(r *Func, b, _ []byte) error {
		c := rdmauapi.CreateQP(b)
		if st := c.Check(); st != rdmauapi.StatusOK {
			return statusErr(st)
		}
		s := verbs.QPSpec{H: c.QP(), PD: c.PD(), SendCQ: c.SendCQ(), RecvCQ: c.RecvCQ(), SRQ: c.SRQ(),
			Type: c.Type(), SigAll: c.SQSigAll() != 0, Kernel: c.Flags()&rdmauapi.QPFlagKernel != 0, SQ: ring(c.SQ())}
		if c.SRQ() == 0 {
			s.RQ = ring(c.RQ())
		}
		return r.eng.CreateQP(s)
	},
	rdmauapi.OpModifyQP: func(r *Func, b, _ []byte) error {
		a := rdmauapi.QPAttr(b)
		if st := a.Check(); st != rdmauapi.StatusOK {
			return statusErr(st)
		}
		return r.eng.ModifyQP(a.QP(), qpAttr(a))
	},
	rdmauapi.OpQueryQP: func(r *Func, b, reply []byte) error {
		h := rdmauapi.HandleReq(b).Handle()
		a, err := r.eng.QueryQP(h)
		if err != nil {
			return err
		}
		putQPAttr(rdmauapi.QPAttr(reply), h, a)
		return nil
	},
	rdmauapi.OpDestroyQP: func(r *Func, b, _ []byte) error { return r.eng.DestroyQP(rdmauapi.HandleReq(b).Handle()) },
	rdmauapi.OpCreateSRQ: func(r *Func, b, _ []byte) error {
		c := rdmauapi.CreateSRQ(b)
		if st := c.Check(); st != rdmauapi.StatusOK {
			return statusErr(st)
		}
		return r.eng.CreateSRQ(c.SRQ(), c.PD(), c.SRQLimit(), ring(c.Ring()))
	},
	rdmauapi.OpModifySRQ: func(r *Func, b, _ []byte) error {
		a := rdmauapi.SRQAttr(b)
		if a.AttrMask() != rdmauapi.SRQAttrLimit {
			return verbs.ErrNotSupported
		}
		return r.eng.ModifySRQ(a.SRQ(), a.SRQLimit())
	},
	rdmauapi.OpQuerySRQ: func(r *Func, b, reply []byte) error {
		h := rdmauapi.HandleReq(b).Handle()
		i, err := r.eng.QuerySRQ(h)
		if err != nil {
			return err
		}
		a := rdmauapi.SRQAttr(reply)
		a.SetSRQ(h)
		a.SetAttrMask(rdmauapi.SRQAttrMaxWR | rdmauapi.SRQAttrLimit)
		a.SetMaxWR(i.MaxWR)
		a.SetMaxSGE(i.MaxSGE)
		a.SetSRQLimit(i.Limit)
		return nil
	},
	rdmauapi.OpDestroySRQ: func(r *Func, b, _ []byte) error { return r.eng.DestroySRQ(rdmauapi.HandleReq(b).Handle()) },
	rdmauapi.OpCreateAH: func(r *Func, b, _ []byte) error {
		c := rdmauapi.CreateAH(b)
		if st := c.AV().Check(); st != rdmauapi.StatusOK {
			return statusErr(st)
		}
		return r.eng.CreateAH(c.AH(), c.PD(), av(c.AV()))
	},
	rdmauapi.OpDestroyAH: func(r *Func, b, _ []byte) error { return r.eng.DestroyAH(rdmauapi.HandleReq(b).Handle()) },
	rdmauapi.OpDBSQ: func(r *Func, b, _ []byte) error {
		r.eng.KickSQ(rdmauapi.Doorbell(b).Handle())
		return nil
	},
	rdmauapi.OpDBRQ: func(r *Func, b, _ []byte) error {
		r.eng.KickRQ(rdmauapi.Doorbell(b).Handle())
		return nil
	},
	rdmauapi.OpDBSRQ: func(r *Func, b, _ []byte) error { return nil }, // the NIC reads SRQs when it needs a WQE
}

func pbl(p rdmauapi.PBL) verbs.PBL {
	return verbs.PBL{Root: p.Root(), NPages: p.Npages(), Levels: p.Levels(), Shift: p.PageShift()}
}

func ring(g rdmauapi.Ring) verbs.RingSpec {
	return verbs.RingSpec{PBL: pbl(g.PBL()), Slots: g.Slots(), Log2Elem: g.Log2ElemSize(), MaxSGE: g.MaxSGE(), MaxInline: g.MaxInline()}
}

func av(a rdmauapi.AV) verbs.AV {
	var v verbs.AV
	copy(v.DMAC[:], a.DMAC())
	copy(v.SGID[:], a.SGID())
	copy(v.DGID[:], a.DGID())
	v.Flow = a.FlowLabel()
	v.Net, v.HopLimit, v.TClass = a.NetworkType(), a.HopLimit(), a.TrafficClass()
	return v
}

func qpAttr(a rdmauapi.QPAttr) verbs.QPAttr {
	v := verbs.QPAttr{Mask: a.AttrMask(), State: verbs.QPState(a.QPState()), CurState: verbs.QPState(a.CurQPState()),
		PathMTU: a.PathMTU(), QKey: a.QKey(), RQPSN: a.RQPSN(), SQPSN: a.SQPSN(), DestQPN: a.DestQPNum(),
		Access: a.AccessFlags(), PKeyIndex: a.PkeyIndex(), Port: a.PortNum(), MaxRdAtomic: a.MaxRdAtomic(),
		MaxDestRdAtomic: a.MaxDestRdAtomic(), MinRNRTimer: a.MinRNRTimer(), Timeout: a.Timeout(),
		RetryCnt: a.RetryCnt(), RNRRetry: a.RNRRetry()}
	if v.Mask&verbs.AttrAV != 0 {
		v.AV = av(a.AV())
	}
	return v
}

func putQPAttr(b rdmauapi.QPAttr, h uint32, a verbs.QPAttr) {
	b.SetQP(h)
	b.SetAttrMask(verbs.AttrState | verbs.AttrCurState | verbs.AttrAccessFlags | verbs.AttrPKeyIndex | verbs.AttrPort |
		verbs.AttrQKey | verbs.AttrAV | verbs.AttrPathMTU | verbs.AttrTimeout | verbs.AttrRetryCnt | verbs.AttrRNRRetry |
		verbs.AttrRQPSN | verbs.AttrMaxQPRdAtomic | verbs.AttrMinRNRTimer | verbs.AttrSQPSN | verbs.AttrMaxDestRdAtom |
		verbs.AttrDestQPN)
	b.SetQPState(uint32(a.State))
	b.SetCurQPState(uint32(a.CurState))
	b.SetPathMTU(a.PathMTU)
	b.SetQKey(a.QKey)
	b.SetRQPSN(a.RQPSN)
	b.SetSQPSN(a.SQPSN)
	b.SetDestQPNum(a.DestQPN)
	b.SetAccessFlags(a.Access)
	b.SetPkeyIndex(a.PKeyIndex)
	b.SetPortNum(max(a.Port, 1))
	b.SetMaxRdAtomic(a.MaxRdAtomic)
	b.SetMaxDestRdAtomic(a.MaxDestRdAtomic)
	b.SetMinRNRTimer(a.MinRNRTimer)
	b.SetTimeout(a.Timeout)
	b.SetRetryCnt(a.RetryCnt)
	b.SetRNRRetry(a.RNRRetry)
	if a.SQDraining {
		b.SetSQDraining(1)
	}
	v := b.AV()
	v.SetPortNum(1)
	v.SetDMAC(a.AV.DMAC[:])
	v.SetSGID(a.AV.SGID[:])
	v.SetDGID(a.AV.DGID[:])
	v.SetFlowLabel(a.AV.Flow)
	v.SetNetworkType(a.AV.Net)
	v.SetHopLimit(a.AV.HopLimit)
	v.SetTrafficClass(a.AV.TClass)
}

// statusError carries a status from a uapi Check.
type statusError rdmauapi.Status

func (e statusError) Error() string { return "control: status " + itoaU(uint64(e)) }

func statusErr(s rdmauapi.Status) error { return statusError(s) }

func itoaU(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

// ctlStatus maps a handler's error to the reply status.
var ctlErrStatus = []struct {
	err error
	st  rdmauapi.Status
}{
	{verbs.ErrBadHandle, rdmauapi.StatusBadHandle},
	{verbs.ErrHandleInUse, rdmauapi.StatusHandleInUse},
	{verbs.ErrBadParam, rdmauapi.StatusBadParam},
	{verbs.ErrBadState, rdmauapi.StatusBadState},
	{verbs.ErrBusy, rdmauapi.StatusBusy},
	{verbs.ErrNoResources, rdmauapi.StatusNoResources},
	{verbs.ErrBadAccess, rdmauapi.StatusBadAccess},
	{verbs.ErrNotSupported, rdmauapi.StatusNotSupported},
	{verbs.ErrBadGPA, rdmauapi.StatusBadGPA},
	{verbs.ErrNoMemory, rdmauapi.StatusBadGPA},
	{verbs.ErrBadPBL, rdmauapi.StatusBadParam},
	{verbs.ErrTooLarge, rdmauapi.StatusNoResources},
	{verbs.ErrBounds, rdmauapi.StatusBadParam},
	{verbs.ErrRingSlots, rdmauapi.StatusBadParam},
	{verbs.ErrRingElem, rdmauapi.StatusBadParam},
}

func ctlStatus(err error) rdmauapi.Status {
	if err == nil {
		return rdmauapi.StatusOK
	}
	var se statusError
	if errors.As(err, &se) {
		return rdmauapi.Status(se)
	}
	for _, m := range ctlErrStatus {
		if errors.Is(err, m.err) {
			return m.st
		}
	}
	return rdmauapi.StatusInternal
}

// control handles one control frame on the owning goroutine.
func (r *Func) control(frame []byte) {
	r.Stats.CtlFrames.Inc()
	p, ok := rdmauapi.ControlPayload(frame)
	if !ok {
		r.Stats.CtlDecodeErr.Inc()
		return
	}
	m, err := rdmauapi.DecodeRequest(p)
	if err != nil {
		r.Stats.CtlDecodeErr.Inc()
		if st, ok := rdmauapi.ReplyStatus(m, err); ok {
			r.reply(m.Hdr, st, nil)
		} else {
			r.Stats.CtlNoAck.Inc()
		}
		return
	}
	op, inst := m.Hdr.Opcode(), m.Hdr.Instance()
	switch op {
	case rdmauapi.OpProbe:
	case rdmauapi.OpOpen:
		if !r.open || r.instance != inst {
			if r.eng.Objects() > 0 {
				r.reset()
			}
			r.instance, r.open = inst, true
		}
	case rdmauapi.OpClose:
		if r.open && r.instance == inst {
			r.reset()
		}
	default:
		if !r.open || r.instance != inst {
			r.Stats.CtlBadInstance.Inc()
			if m.Info.Kind == rdmauapi.KindRequest {
				r.reply(m.Hdr, rdmauapi.StatusBadInstance, nil)
			}
			return
		}
	}
	h := ctlHandlers[op]
	body := r.replyBody[:m.Info.ReplySize]
	clear(body) // handlers fill in what they answer; the rest is zero
	if h == nil {
		err = verbs.ErrNotSupported
	} else {
		err = h(r, m.Body, body)
	}
	if m.Info.Kind == rdmauapi.KindDoorbell {
		r.Stats.Doorbells.Inc()
		return
	}
	st := ctlStatus(err)
	if st != rdmauapi.StatusOK {
		r.Stats.CtlFailed.Inc()
	}
	r.reply(m.Hdr, st, body)
}

func (r *Func) reply(req rdmauapi.Hdr, st rdmauapi.Status, body []byte) {
	r.out = rdmauapi.AppendReply(r.out[:0], r.mac, req, st, body)
	r.Stats.CtlReplies.Inc()
	if r.deliver != nil {
		r.deliver(r.out)
	}
}

// eventOps maps the engine's events to their opcodes.
var eventOps = map[verbs.EventKind]rdmauapi.Opcode{
	verbs.EvCQComp: rdmauapi.OpEvCQComp, verbs.EvCQErr: rdmauapi.OpEvCQErr, verbs.EvQPFatal: rdmauapi.OpEvQPFatal,
	verbs.EvQPReqErr: rdmauapi.OpEvQPReqErr, verbs.EvQPAccessErr: rdmauapi.OpEvQPAccessErr,
	verbs.EvQPLastWQE: rdmauapi.OpEvQPLastWQE, verbs.EvSRQLimit: rdmauapi.OpEvSRQLimit,
}

// sendEvent sends an engine event to the driver instance that owns the
// NIC (hdr.instance = the open instance). With no instance open there is no
// one to tell: the event is dropped and counted; a driver that opens later
// reads the state it needs (QUERY_PORT, QUERY_QP) after OPEN. The driver
// drops every event whose instance is not its own [issue 18, finding 4].
func (r *Func) sendEvent(e verbs.Event) {
	op, ok := eventOps[e.Kind]
	if !ok {
		return
	}
	if !r.open {
		r.Stats.CtlEventNoOwner.Inc()
		return
	}
	r.out = rdmauapi.AppendEvent(r.out[:0], r.mac, r.instance, op, e.Handle, e.Code, 0)
	r.Stats.CtlEvents.Inc()
	if r.deliver != nil {
		r.deliver(r.out)
	}
}
