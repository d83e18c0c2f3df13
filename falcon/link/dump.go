package link

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"falconnic/falcon/wire"
)

// DumpCapture reads a pcapng stream (as written by Capture) and prints one
// line per packet to w: time since the first packet, IPv6 source and
// destination, flow label, and the Falcon packet rendered by describe (which
// gets the bare Falcon packet, envelope removed; nil prints type, CID and
// length). Frames that are not Falcon-over-UDP-1000 are printed with the
// reason. It returns the number of packets read.
func DumpCapture(r io.Reader, w io.Writer, describe func(pkt []byte) string) (int, error) {
	ng, err := pcapgo.NewNgReader(r, pcapgo.DefaultNgReaderOptions)
	if err != nil {
		return 0, err
	}
	if describe == nil {
		describe = shortDescribe
	}
	bw := bufio.NewWriter(w)
	var first time.Time
	n := 0
	for {
		data, ci, err := ng.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			bw.Flush()
			return n, err
		}
		if n == 0 {
			first = ci.Timestamp
		}
		n++
		fmt.Fprintf(bw, "%12.9f ", ci.Timestamp.Sub(first).Seconds())
		pkt := gopacket.NewPacket(data, layers.LinkTypeEthernet, gopacket.NoCopy)
		if ip, ok := pkt.Layer(layers.LayerTypeIPv6).(*layers.IPv6); ok {
			fmt.Fprintf(bw, "%v > %v flow=%#05x ", ip.SrcIP, ip.DstIP, ip.FlowLabel)
		}
		fl, ok := pkt.Layer(LayerTypeFalcon).(*Falcon)
		switch {
		case ok:
			fmt.Fprint(bw, describe(fl.Packet))
			if fl.HasIV {
				fmt.Fprintf(bw, " iv=%d", fl.IV)
			}
		case pkt.ErrorLayer() != nil:
			fmt.Fprintf(bw, "undecodable: %v", pkt.ErrorLayer().Error())
		default:
			fmt.Fprintf(bw, "not Falcon (%d bytes)", len(data))
		}
		bw.WriteByte('\n')
	}
	return n, bw.Flush()
}

func shortDescribe(b []byte) string {
	p := wire.Packet(b)
	return fmt.Sprintf("%v cid=%d len=%d", p.Type(), p.CID(), len(p))
}
