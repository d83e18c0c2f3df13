package rdma

import (
	"testing"

	"falconnic/device/rdmauapi"
	"falconnic/verbs"
)

// nextEvent returns the event frame the function delivered to the guest
// (deliver runs on the port goroutine, so after Call it is already queued),
// or ok false when none was sent.
func (v *vm) nextEvent() (hdr rdmauapi.Hdr, ev rdmauapi.Event, ok bool) {
	v.t.Helper()
	select {
	case f := <-v.frames:
		p, isCtl := rdmauapi.ControlPayload(f)
		if !isCtl {
			v.t.Fatal("event is not a control frame")
		}
		m, err := rdmauapi.DecodeFromNIC(p)
		if err != nil {
			v.t.Fatalf("undecodable frame from the NIC: %v", err)
		}
		if m.Hdr.Flags() != rdmauapi.FlagEvent {
			v.t.Fatalf("frame flags %#x, want an event", m.Hdr.Flags())
		}
		return m.Hdr, rdmauapi.Event(m.Body), true
	default:
		return nil, nil, false
	}
}

// Events go to the NIC's current owner only: none while no instance is
// open (counted), the open instance in hdr.instance, and after another
// instance takes the NIC over (a reloaded module) the new one's — the
// driver drops events of any other instance [issue 18, finding 4].
func TestRDMAEventsCarryTheOwnersInstance(t *testing.T) {
	v := newVM(t, 0x21, nil)
	raise := func() {
		v.r.Call(func(r *Func) { r.sendEvent(verbs.Event{Kind: verbs.EvQPFatal, Handle: 16, Code: 0}) })
	}
	var noOwner uint64
	raise()
	if _, _, ok := v.nextEvent(); ok {
		t.Fatal("an event was sent before any OPEN")
	}
	v.r.Call(func(r *Func) { noOwner = r.Stats.CtlEventNoOwner.Load() })
	if noOwner != 1 {
		t.Fatalf("rdma_ctl_event_no_owner %d, want 1", noOwner)
	}

	v.ok(rdmauapi.OpOpen, make([]byte, rdmauapi.OpenReqSize))
	raise()
	h, ev, ok := v.nextEvent()
	if !ok || h.Instance() != v.inst || h.Opcode() != rdmauapi.OpEvQPFatal || ev.Handle() != 16 {
		t.Fatalf("event after OPEN: sent %v instance %#x opcode %v, want instance %#x EV_QP_FATAL", ok, h.Instance(), h.Opcode(), v.inst)
	}

	old := v.inst
	v.inst++ // a reloaded module opens the NIC
	v.ok(rdmauapi.OpOpen, make([]byte, rdmauapi.OpenReqSize))
	raise()
	h, _, ok = v.nextEvent()
	if !ok || h.Instance() != v.inst {
		t.Fatalf("event after a takeover: sent %v instance %#x, want the new owner %#x (old %#x)", ok, h.Instance(), v.inst, old)
	}

	v.ok(rdmauapi.OpClose, nil)
	raise()
	if _, _, ok := v.nextEvent(); ok {
		t.Fatal("an event was sent after CLOSE")
	}
	v.r.Call(func(r *Func) { noOwner = r.Stats.CtlEventNoOwner.Load() })
	if noOwner != 2 {
		t.Fatalf("rdma_ctl_event_no_owner %d, want 2", noOwner)
	}
}
