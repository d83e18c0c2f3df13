package rdma

import (
	"bytes"
	"testing"

	"falconnic/device/rdmauapi"
	"falconnic/verbs"
)

// The engine's copies of the kernel-consumer ABI agree with the uapi
// mirror that the gcc-based layout test checks.
func TestVerbsKernelABIMatchesUapi(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"GSI QPN", verbs.GSIQPN, rdmauapi.GSIQPN},
		{"GSI Q_Key", verbs.GSIQKey, rdmauapi.GSIQKey},
		{"DMA lkey", verbs.DMALKey, rdmauapi.DMALKey},
		{"GSI QP type", verbs.QPTypeGSI, rdmauapi.QPTypeGSI},
		{"IPv4", verbs.NetIPv4, rdmauapi.NetIPv4},
		{"IPv6", verbs.NetIPv6, rdmauapi.NetIPv6},
	} {
		if c.got != c.want {
			t.Errorf("%s: verbs %#x, uapi %#x", c.name, c.got, c.want)
		}
	}
	// The inline AV as verbs reads it is where gcc puts rxe_av's fields.
	b := make([]byte, 1024)
	sgid := [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 1}
	dgid := [16]byte{10: 0xff, 11: 0xff, 12: 10, 15: 2}
	verbs.SendWQE(b).SetAV(&verbs.AV{DMAC: verbs.MAC{2, 0, 0, 0, 0, 0xb}, Net: verbs.NetIPv4, SGID: sgid, DGID: dgid,
		Flow: 7, HopLimit: 64, TClass: 3})
	av := rdmauapi.SendWQE(b).UDAV()
	sa := av.SGIDAddr()
	if av.NetworkType() != rdmauapi.NetIPv4 || !bytes.Equal(av.DMAC(), []byte{2, 0, 0, 0, 0, 0xb}) ||
		!bytes.Equal(av.DGID(), dgid[:]) || av.FlowLabel() != 7 || av.HopLimit() != 64 || av.TrafficClass() != 3 ||
		sa[0] != 2 || !bytes.Equal(sa[4:8], sgid[12:]) {
		t.Fatalf("inline AV: % x", av)
	}
	// The CQE's network type byte is ib_uverbs_wc.reserved.
	wc := make([]byte, rdmauapi.CQESize)
	wc[rdmauapi.WCNetTypeOff] = rdmauapi.NetIPv6
	if verbs.WC(wc).NetType() != verbs.NetIPv6 {
		t.Fatal("verbs reads the network type from another byte")
	}
}
