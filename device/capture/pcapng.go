package capture

import (
	"bufio"
	"io"
	"net"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"falconnic/falcon/link"
)

// PcapWriter writes capture records as pcapng: one interface per Iface
// (named NIC:fabric, NIC:portlink), Ethernet / IP / UDP framing around
// each record (link.AppendUDPFrame, the framing of falcon/link's capture
// of in-memory links), the direction in each packet's flags, and the
// daemon's drops in the fabric interface's statistics at the end.
type PcapWriter struct {
	bw    *bufio.Writer
	ng    *pcapgo.NgWriter
	ids   [NumIfaces]int
	frame []byte
	macs  map[[16]byte]net.HardwareAddr
	start time.Time
}

// NewPcapWriter starts a pcapng stream on w for a capture of NIC nic
// ("all" for every NIC).
func NewPcapWriter(w io.Writer, nic string) (*PcapWriter, error) {
	bw := bufio.NewWriterSize(w, 1<<20)
	prefix := nic
	first := pcapgo.NgInterface{Name: prefix + ":" + IfaceNames[0], LinkType: layers.LinkTypeEthernet, SnapLength: MaxSnap,
		Description:         "UDP datagrams of the falconnic fabric (fabric header, then an Ethernet frame, a Falcon packet or a CM message)",
		TimestampResolution: 9}
	ng, err := pcapgo.NewNgWriterInterface(bw, first, pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{
		Application: "falconnic capture", Comment: "falconnic capture of NIC " + prefix}})
	if err != nil {
		return nil, err
	}
	p := &PcapWriter{bw: bw, ng: ng, macs: map[[16]byte]net.HardwareAddr{}, start: time.Now()}
	id, err := ng.AddInterface(pcapgo.NgInterface{Name: prefix + ":" + IfaceNames[1], LinkType: layers.LinkTypeEthernet,
		SnapLength: MaxSnap, Description: "Falcon frames between two NICs' ports in the daemon (UDP port 1000, IPv6 fd00::MAC)",
		TimestampResolution: 9})
	if err != nil {
		return nil, err
	}
	p.ids[PortLink] = id
	return p, nil
}

// macOf is the Ethernet address a frame shows for a: the NIC's MAC for a
// port-link address (fd00::MAC), else a locally administered one.
func macOf(a [16]byte) net.HardwareAddr {
	if a[0] == 0xfd {
		return net.HardwareAddr(a[10:16])
	}
	return net.HardwareAddr{0x02, 0, a[12], a[13], a[14], a[15]}
}

// Write writes one record.
func (p *PcapWriter) Write(r Record) error {
	p.frame = link.AppendUDPFrame(p.frame[:0], r.Data, r.Flow, macOf(r.Src.Addr().As16()), macOf(r.Dst.Addr().As16()), r.Src, r.Dst)
	hdr := len(p.frame) - len(r.Data)
	ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, r.Time), CaptureLength: len(p.frame), Length: hdr + r.Len,
		InterfaceIndex: p.ids[r.Iface%NumIfaces]}
	flags := pcapgo.NgEpbFlags{Direction: pcapgo.NgEpbFlagDirectionInbound}
	if r.Dir == Out {
		flags.Direction = pcapgo.NgEpbFlagDirectionOutbound
	}
	return p.ng.WritePacketWithOptions(ci, p.frame, pcapgo.NgPacketOptions{Flags: &flags})
}

// Close writes each interface's statistics (dropped, the daemon's drops,
// on the first) and flushes; it does not close w.
func (p *PcapWriter) Close(dropped uint64) error {
	for i, id := range p.ids {
		st := pcapgo.NgInterfaceStatistics{LastUpdate: time.Now(), StartTime: p.start, EndTime: time.Now(),
			PacketsReceived: pcapgo.NgNoValue64, PacketsDropped: pcapgo.NgNoValue64}
		if i == 0 {
			st.PacketsDropped = dropped
		}
		if err := p.ng.WriteInterfaceStats(id, st); err != nil {
			return err
		}
	}
	if err := p.ng.Flush(); err != nil {
		return err
	}
	return p.bw.Flush()
}
