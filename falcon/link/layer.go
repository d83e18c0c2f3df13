package link

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"falconnic/falcon/wire"
)

// LayerTypeFalconNumber is the gopacket layer type number of Falcon, chosen
// outside gopacket's own range.
const LayerTypeFalconNumber = 1871

// LayerTypeFalcon is the gopacket layer type of a Falcon packet, registered
// as the decoder for UDP port 1000.
var LayerTypeFalcon = gopacket.RegisterLayerType(LayerTypeFalconNumber, gopacket.LayerTypeMetadata{
	Name:    "Falcon",
	Decoder: gopacket.DecodeFunc(decodeFalcon),
})

func init() {
	layers.RegisterUDPPortLayerType(FalconUDPPort, LayerTypeFalcon)
}

// Falcon is a decoded Falcon packet as a gopacket layer. Contents is the
// Falcon header, Payload the ULP bytes of Pull Data and Push Data.
//
// Three framings are recognised, tried in this order:
//   - the transport's PSP stand-in envelope, | packet | IV timestamp (4) |
//     ICV (4) |, when the ICV verifies and the packet before the IV parses
//     (HasIV and ICV set; IV holds the T1/T3 transmit timestamp);
//   - | packet | ICV (4) | (wire.SealICV) when the ICV verifies (ICV set);
//   - a bare packet.
//
// The ICV makes the choice reliable except for a Pull Data sealed without
// an IV, whose last four payload bytes would be read as an IV.
type Falcon struct {
	layers.BaseLayer
	Packet wire.Packet
	ICV    bool
	HasIV  bool
	IV     wire.Timestamp
	Type   wire.PacketType
	CID    uint32
	// DataBase and ReqBase are the piggy-backed or explicit window bases.
	DataBase, ReqBase wire.PSN
	// Txn holds the transaction fields of Pull Request, Pull Data, Push
	// Data and Resync.
	Txn wire.TxnFields
	// Ack holds the fields of BACK and EACK.
	Ack wire.AckFields
	// Nack holds the fields of NACK.
	Nack wire.NackFields
}

// LayerType returns LayerTypeFalcon.
func (f *Falcon) LayerType() gopacket.LayerType { return LayerTypeFalcon }

// CanDecode returns LayerTypeFalcon.
func (f *Falcon) CanDecode() gopacket.LayerClass { return LayerTypeFalcon }

// NextLayerType returns gopacket.LayerTypePayload when the packet carries
// ULP payload, gopacket.LayerTypeZero otherwise.
func (f *Falcon) NextLayerType() gopacket.LayerType {
	if len(f.Payload) > 0 {
		return gopacket.LayerTypePayload
	}
	return gopacket.LayerTypeZero
}

// DecodeFromBytes decodes a Falcon packet, with or without a trailing ICV,
// validating it with wire.Parse.
func (f *Falcon) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	*f = Falcon{}
	body := data
	if b, ok := wire.OpenICV(data); ok {
		if n := len(b) - ivLen; n >= 0 && parses(b[:n]) {
			body, f.ICV, f.HasIV = b[:n], true, true
			f.IV = wire.Timestamp(binary.BigEndian.Uint32(b[n:]))
		} else if parses(b) {
			body, f.ICV = b, true
		}
	}
	p, err := wire.Parse(body)
	if err != nil {
		if df != nil && errors.Is(err, wire.ErrShort) {
			df.SetTruncated()
		}
		return fmt.Errorf("falcon layer: %w", err)
	}
	f.Packet = p
	f.Type, f.CID, f.DataBase, f.ReqBase = p.Type(), p.CID(), p.DataBase(), p.ReqBase()
	switch p.Type() {
	case wire.TypeBACK, wire.TypeEACK:
		p.Ack().Fields(&f.Ack)
	case wire.TypeNACK:
		f.Nack = p.Nack().Fields()
	default:
		f.Txn = p.Txn().Fields()
	}
	hdr := p.Header()
	f.Contents = hdr
	f.Payload = p.Payload()
	return nil
}

// ivLen is the IV timestamp of the transport's envelope.
const ivLen = 4

func parses(b []byte) bool {
	_, err := wire.Parse(b)
	return err == nil
}

func decodeFalcon(data []byte, pb gopacket.PacketBuilder) error {
	f := &Falcon{}
	if err := f.DecodeFromBytes(data, pb); err != nil {
		return err
	}
	pb.AddLayer(f)
	if len(f.Payload) == 0 {
		return nil
	}
	return pb.NextDecoder(gopacket.LayerTypePayload)
}
