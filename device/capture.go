package device

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"falconnic/device/capture"
	"falconnic/device/cm"
	"falconnic/device/fabric"
	"falconnic/device/l2"
	"falconnic/device/port"
	"falconnic/falcon"
	"falconnic/falcon/framebuf"
	"falconnic/falcon/wire"
	"falconnic/internal/control"
	"falconnic/psp"
)

// The daemon's capture (`falconnic capture`, package capture): the fabric
// reports every datagram it sends and receives (fabric.Fabric.SetTap), fabric
// links say which NIC sends (cm.Manager.LinkHook), and the link between
// two ports of the daemon is tapped as the port makes it
// (port.Port.WrapLink). Both ask capture.Hub.Active first, so they cost
// one atomic load while nobody captures. This file tells which NIC a
// packet belongs to.

// maxCaptureNICs bounds the NICs a capture can select one by one (a
// capture.NICSet bit each).
const maxCaptureNICs = capture.MaxNICs

// startCapture wires the hub into the fabric and the connection manager
// (NewDaemon, once the NICs exist).
func (d *Daemon) startCapture() {
	d.capture = capture.NewHub(d.clk)
	d.nicIndex = map[[6]byte]int{}
	d.portIndex = map[cm.FalconReceiver]int{}
	for i, n := range d.nics {
		d.nicIndex[n.mac()] = i
		d.portIndex[n.falcon] = i
	}
	for _, n := range d.nics {
		from := n
		n.falcon.WrapLink = func(to *port.Port, l falcon.RefLink) falcon.RefLink {
			i, ok := d.portIndex[to]
			if !ok {
				return l
			}
			dst := d.nics[i]
			return &tappedPortLink{RefLink: l, hub: d.capture, from: d.nicBit(from.mac()), to: d.nicBit(dst.mac()),
				src: portLinkAddr(from.mac()), dst: portLinkAddr(dst.mac())}
		}
	}
	d.cm.LinkHook = d.tapLink
	d.cm.KeyHook = d.tapKey
	if d.fabric != nil {
		d.fabric.SetTap(d.tapFabric)
	}
}

// nicBit is the capture set of the NIC with MAC mac (empty when no NIC of
// the daemon has it).
func (d *Daemon) nicBit(mac [6]byte) capture.NICSet {
	if i, ok := d.nicIndex[mac]; ok {
		return capture.NIC(i)
	}
	return 0
}

// tapFabric is the fabric's tap: it tells the NIC of each datagram from
// its payload — an Ethernet frame's source (out) or destination (in) MAC,
// every NIC for a group address; a CM message's source or destination
// NIC; a Falcon packet's sending NIC (out, FabricLink) or the owner of its
// destination CID (in). Datagrams that tell none go to captures of every
// NIC only.
func (d *Daemon) tapFabric(out bool, origin [6]byte, local, remote netip.AddrPort, b []byte) {
	if !d.capture.Active() {
		return
	}
	set := capture.Wire
	if h, payload, ok := fabric.Decode(b); ok {
		switch h.Kind() {
		case fabric.KindEthernet:
			mac := l2.Frame(payload).Src()
			if !out {
				mac = l2.Frame(payload).Dst()
			}
			if mac[0]&1 != 0 { // a group address
				set |= capture.EveryNIC
			} else {
				set |= d.nicBit([6]byte(mac))
			}
		case fabric.KindCM:
			if src, dst, ok := cm.Addrs(payload); ok {
				if out {
					set |= d.nicBit(src)
				} else {
					set |= d.nicBit(dst)
				}
			}
		case fabric.KindFalcon:
			if out {
				set |= d.nicBit(origin)
			} else {
				// A sealed datagram's Falcon word 0 (with the CID) is in the clear.
				if clear, ok := psp.PeekClear(payload); ok && payload[0] == psp.NextHeaderFalcon {
					payload = clear
				}
				if len(payload) >= 4 {
					if i, ok := d.portIndex[d.cm.CIDPort(wire.Packet(payload).CID())]; ok {
						set |= capture.NIC(i)
					}
				}
			}
		}
	}
	dir, src, dst := capture.In, remote, local
	if out {
		dir, src, dst = capture.Out, local, remote
	}
	d.capture.Report(set, capture.Fabric, dir, src, dst, 0, b)
}

// tapLink tells a connection's fabric link which NIC it sends for (the
// links between ports of the daemon are tapped as the ports make them:
// port.Port.WrapLink).
func (d *Daemon) tapLink(from, _ [6]byte, l falcon.Link) falcon.Link {
	if fl, ok := l.(*fabric.Link); ok {
		return fl.From(from)
	}
	return l
}

// portLinkAddr is the address captures give a NIC on the in-daemon port
// links: fd00::/64 with the NIC's MAC in the low bytes.
func portLinkAddr(mac [6]byte) netip.Addr {
	var a [16]byte
	a[0] = 0xfd
	copy(a[10:], mac[:])
	return netip.AddrFrom16(a)
}

// tappedPortLink is a link between two ports of the daemon that reports
// every frame to the capture: out on the sender's NIC (and in captures of
// every NIC), in on the receiver's.
type tappedPortLink struct {
	falcon.RefLink
	hub      *capture.Hub
	from, to capture.NICSet
	src, dst netip.Addr
}

func (t *tappedPortLink) report(frame []byte, flow uint32) {
	if !t.hub.Active() {
		return
	}
	src, dst := netip.AddrPortFrom(t.src, uint16(0xc000|flow&0x3fff)), netip.AddrPortFrom(t.dst, capture.FalconUDPPort)
	t.hub.Report(t.from|capture.Wire, capture.PortLink, capture.Out, src, dst, flow, frame)
	t.hub.Report(t.to, capture.PortLink, capture.In, src, dst, flow, frame)
}

// Send reports the frame, then sends it.
func (t *tappedPortLink) Send(frame []byte, flow uint32) {
	t.report(frame, flow)
	t.RefLink.Send(frame, flow)
}

// SendRef reports the frame, then sends it by reference.
func (t *tappedPortLink) SendRef(frame []byte, flow uint32) {
	t.report(frame, flow)
	t.RefLink.SendRef(frame, flow)
}

// SendShared reports the frame, then hands it over in its shared buffer.
func (t *tappedPortLink) SendShared(frame []byte, mem *framebuf.Buf, flow uint32) {
	t.report(frame, flow)
	t.RefLink.SendShared(frame, mem, flow)
}

// CaptureStartParams are capture.start's params.
type CaptureStartParams struct {
	NIC    string `json:"nic,omitempty"` // empty: every NIC, and what none owns
	Count  int    `json:"count,omitempty"`
	Snap   int    `json:"snap,omitempty"`
	Buffer int    `json:"buffer,omitempty"`
	// KeyLog: the session's batches also carry the key-log lines of the
	// keys its NICs use (keylog.go; a secret).
	KeyLog bool `json:"keylog,omitempty"`
}

// CaptureStarted is capture.start's result: the session to read.
type CaptureStarted struct {
	ID uint64 `json:"id"`
}

// CaptureReadParams are capture.read's params.
type CaptureReadParams struct {
	ID       uint64 `json:"id"`
	MaxBytes int    `json:"max_bytes,omitempty"`
	WaitMs   int    `json:"wait_ms,omitempty"`
}

// captureReadMax bounds a capture.read answer's packet bytes: base64 in
// JSON grows them by a third, under control.MaxMessage.
const (
	captureReadMax  = 1 << 20
	captureWaitMax  = 2 * time.Second
	captureWaitDflt = 500 * time.Millisecond
)

func (d *Daemon) captureMethods() map[string]control.HandlerFunc {
	return map[string]control.HandlerFunc{
		"capture.start": func(_ context.Context, p json.RawMessage) (any, error) {
			var req CaptureStartParams
			if len(p) > 0 {
				if err := json.Unmarshal(p, &req); err != nil {
					return nil, fmt.Errorf("%w: %v", control.ErrBadParams, err)
				}
			}
			if req.Count < 0 || req.Snap < 0 || req.Buffer < 0 {
				return nil, fmt.Errorf("%w: count, snap and buffer must not be negative", control.ErrBadParams)
			}
			o := capture.Options{NIC: capture.AllNICs, Count: req.Count, Snap: req.Snap, Buffer: req.Buffer, KeyLog: req.KeyLog}
			if req.NIC != "" {
				o.NIC = -2
				for i, n := range d.nics {
					if n.spec.Name == req.NIC {
						o.NIC = i
					}
				}
				if o.NIC == -2 {
					return nil, fmt.Errorf("%w: no NIC %q", control.ErrBadParams, req.NIC)
				}
				if o.NIC >= maxCaptureNICs {
					return nil, fmt.Errorf("NIC %q: captures select only the first %d NICs one by one (capture every NIC instead)", req.NIC, maxCaptureNICs)
				}
			}
			s, err := d.capture.Start(o)
			if err != nil {
				return nil, err
			}
			res := CaptureStarted{ID: s.ID()}
			if req.KeyLog {
				d.logKeys(s, o.NIC)
			}
			d.log.Info("capture started", "id", s.ID(), "nic", req.NIC, "count", req.Count, "keylog", req.KeyLog)
			return res, nil
		},
		"capture.read": func(ctx context.Context, p json.RawMessage) (any, error) {
			var req CaptureReadParams
			if err := json.Unmarshal(p, &req); err != nil {
				return nil, fmt.Errorf("%w: %v", control.ErrBadParams, err)
			}
			s, err := d.capture.Session(req.ID)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", control.ErrBadParams, err)
			}
			maxBytes := req.MaxBytes
			if maxBytes <= 0 || maxBytes > captureReadMax {
				maxBytes = captureReadMax
			}
			wait := captureWaitDflt
			if req.WaitMs > 0 {
				wait = min(time.Duration(req.WaitMs)*time.Millisecond, captureWaitMax)
			}
			t := time.NewTimer(wait)
			defer t.Stop()
			b := s.Read(maxBytes, t.C)
			if b.Done {
				d.capture.Stop(req.ID)
			}
			return b, nil
		},
		"capture.stop": func(_ context.Context, p json.RawMessage) (any, error) {
			var req struct {
				ID uint64 `json:"id"`
			}
			if err := json.Unmarshal(p, &req); err != nil {
				return nil, fmt.Errorf("%w: %v", control.ErrBadParams, err)
			}
			if err := d.capture.Stop(req.ID); err != nil && !errors.Is(err, capture.ErrNoSession) {
				return nil, err
			}
			return struct{}{}, nil
		},
	}
}
