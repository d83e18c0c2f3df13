package rdmauapi

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// headerPath is the uapi header, the source of truth this package mirrors.
const headerPath = "../../guest-driver/include/uapi/falconnic.h"

// cFacts compiles and runs a C program against the uapi header that prints
// "name value" lines for every size and offset the Go side claims.
func cFacts(t *testing.T) map[string]int {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("gcc not installed")
	}
	hdr, err := filepath.Abs(headerPath)
	if err != nil {
		t.Fatal(err)
	}
	var c strings.Builder
	fmt.Fprintf(&c, "#include <stdio.h>\n#include <stddef.h>\n#include <rdma/rdma_user_rxe.h>\n#include <rdma/ib_user_verbs.h>\n#include %q\n", hdr)
	c.WriteString("#define P(n, v) printf(\"%s %zu\\n\", n, (size_t)(v))\nint main(void) {\n")
	for _, s := range Layouts {
		fmt.Fprintf(&c, "\tP(%q, sizeof(struct %s));\n", s.C, s.C)
		for _, f := range s.Fields {
			fmt.Fprintf(&c, "\tP(%q, offsetof(struct %s, %s));\n", s.C+"."+f.C, s.C, f.C)
			fmt.Fprintf(&c, "\tP(%q, sizeof(((struct %s *)0)->%s));\n", s.C+"."+f.C+".size", s.C, f.C)
		}
	}
	for _, x := range []string{
		"sizeof(struct rxe_send_wqe)", "sizeof(struct rxe_recv_wqe)", "sizeof(struct rxe_sge)",
		"sizeof(struct ib_uverbs_wc)", "sizeof(struct rxe_queue_buf)",
		"offsetof(struct rxe_queue_buf, log2_elem_size)", "offsetof(struct rxe_queue_buf, index_mask)",
		"offsetof(struct rxe_queue_buf, producer_index)", "offsetof(struct rxe_queue_buf, consumer_index)",
		"FALCONNIC_ETHERTYPE", "FALCONNIC_MAGIC", "FALCONNIC_VERSION", "FALCONNIC_MAX_BODY",
		"FALCONNIC_PAGE_SHIFT", "FALCONNIC_PBL_ENTRIES", "FALCONNIC_FIRST_QPN", "FALCONNIC_RING_HDR_SIZE",
		"FALCONNIC_RING_NIC_POLLING_OFF", "FALCONNIC_RING_CQ_ARM_OFF", "FALCONNIC_WQE_REG_OFF",
		"offsetof(struct rxe_send_wqe, wr.wr)", "FALCONNIC_ARM_SOLICITED", "FALCONNIC_ARM_NEXT", "FALCONNIC_ARM_WORD",
		"FALCONNIC_CAP_MEM_MGT", "FALCONNIC_CAP_ARM_WORD", "FALCONNIC_GSI_QPN", "FALCONNIC_GSI_QKEY", "FALCONNIC_DMA_LKEY",
		"FALCONNIC_WC_NET_TYPE_OFF", "FALCONNIC_NET_IPV4", "FALCONNIC_NET_IPV6", "FALCONNIC_QPT_GSI",
		"FALCONNIC_QP_F_KERNEL", "offsetof(struct ib_uverbs_wc, reserved)", "RXE_NETWORK_TYPE_IPV4",
		"RXE_NETWORK_TYPE_IPV6",
	} {
		fmt.Fprintf(&c, "\tP(%q, %s);\n", x, x)
	}
	for _, o := range sortedOpcodes() {
		name := "FALCONNIC_OP_" + Table[o].Name
		fmt.Fprintf(&c, "\tP(%q, %s);\n", name, name)
	}
	for _, r := range rxeFields {
		fmt.Fprintf(&c, "\tP(%q, offsetof(struct %s, %s));\n", r.c+"."+r.field, r.c, r.field)
		fmt.Fprintf(&c, "\tP(%q, sizeof(((struct %s *)0)->%s));\n", r.c+"."+r.field+".size", r.c, r.field)
	}
	for _, x := range rxeConsts {
		fmt.Fprintf(&c, "\tP(%q, %s);\n", x.c, x.c)
	}
	for s := StatusOK; int(s) < len(statusNames); s++ {
		name := "FALCONNIC_ST_" + s.String()
		fmt.Fprintf(&c, "\tP(%q, %s);\n", name, name)
	}
	c.WriteString("\treturn 0;\n}\n")

	dir := t.TempDir()
	src := filepath.Join(dir, "layout.c")
	bin := filepath.Join(dir, "layout")
	if err := os.WriteFile(src, []byte(c.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(gcc, "-std=gnu11", "-Wall", "-Wextra", "-Wpadded", "-Werror", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	facts := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		sp := strings.LastIndexByte(line, ' ')
		if sp < 0 {
			t.Fatalf("bad line %q", line)
		}
		name, val := line[:sp], line[sp+1:]
		n, err := strconv.Atoi(val)
		if err != nil {
			t.Fatalf("bad line %q", sc.Text())
		}
		facts[name] = n
	}
	return facts
}

func TestLayoutsMatchGCC(t *testing.T) {
	facts := cFacts(t)
	for _, s := range Layouts {
		if got := facts[s.C]; got != s.Size {
			t.Errorf("sizeof(struct %s) = %d in C, %d in Go", s.C, got, s.Size)
		}
		end := 0
		for _, f := range s.Fields {
			if got := facts[s.C+"."+f.C]; got != f.Offset {
				t.Errorf("offsetof(%s, %s) = %d in C, %d in Go", s.C, f.C, got, f.Offset)
			}
			if got := facts[s.C+"."+f.C+".size"]; got != f.Size {
				t.Errorf("sizeof(%s.%s) = %d in C, %d in Go", s.C, f.C, got, f.Size)
			}
			if f.Offset != end {
				t.Errorf("%s.%s: hole before offset %d (fields must be packed explicitly)", s.C, f.C, f.Offset)
			}
			end = f.Offset + f.Size
		}
		if end != s.Size {
			t.Errorf("struct %s: tail padding (%d of %d bytes used)", s.C, end, s.Size)
		}
		if s.Size%8 != 0 && s.C != "falconnic_pbl" {
			t.Errorf("struct %s: size %d not a multiple of 8", s.C, s.Size)
		}
	}
}

func TestConstantsMatchGCC(t *testing.T) {
	facts := cFacts(t)
	want := map[string]int{
		"sizeof(struct rxe_send_wqe)":                    SendWQESize,
		"sizeof(struct rxe_recv_wqe)":                    RecvWQESize,
		"sizeof(struct rxe_sge)":                         SGESize,
		"sizeof(struct ib_uverbs_wc)":                    CQESize,
		"sizeof(struct rxe_queue_buf)":                   RingHdrSize,
		"offsetof(struct rxe_queue_buf, log2_elem_size)": RingLog2ElemSizeOff,
		"offsetof(struct rxe_queue_buf, index_mask)":     RingIndexMaskOff,
		"offsetof(struct rxe_queue_buf, producer_index)": RingProducerOff,
		"offsetof(struct rxe_queue_buf, consumer_index)": RingConsumerOff,
		"FALCONNIC_ETHERTYPE":                            EtherType,
		"FALCONNIC_MAGIC":                                Magic,
		"FALCONNIC_VERSION":                              Version,
		"FALCONNIC_MAX_BODY":                             MaxBody,
		"FALCONNIC_PAGE_SHIFT":                           PageShift,
		"FALCONNIC_PBL_ENTRIES":                          PBLEntries,
		"FALCONNIC_FIRST_QPN":                            FirstQPN,
		"FALCONNIC_RING_HDR_SIZE":                        RingHdrSize,
		"FALCONNIC_RING_NIC_POLLING_OFF":                 RingNICPollingOff,
		"FALCONNIC_RING_CQ_ARM_OFF":                      RingCQArmOff,
		"FALCONNIC_WQE_REG_OFF":                          WQERegOff,
		"offsetof(struct rxe_send_wqe, wr.wr)":           WQERegOff,
		"FALCONNIC_ARM_SOLICITED":                        ArmSolicited,
		"FALCONNIC_ARM_NEXT":                             ArmNext,
		"FALCONNIC_ARM_WORD":                             ArmWord,
		"FALCONNIC_CAP_MEM_MGT":                          CapMemMgt,
		"FALCONNIC_CAP_ARM_WORD":                         CapArmWord,
		"FALCONNIC_GSI_QPN":                              GSIQPN,
		"FALCONNIC_GSI_QKEY":                             GSIQKey,
		"FALCONNIC_DMA_LKEY":                             DMALKey,
		"FALCONNIC_WC_NET_TYPE_OFF":                      WCNetTypeOff,
		"offsetof(struct ib_uverbs_wc, reserved)":        WCNetTypeOff,
		"FALCONNIC_NET_IPV4":                             NetIPv4,
		"RXE_NETWORK_TYPE_IPV4":                          NetIPv4,
		"FALCONNIC_NET_IPV6":                             NetIPv6,
		"RXE_NETWORK_TYPE_IPV6":                          NetIPv6,
		"FALCONNIC_QPT_GSI":                              QPTypeGSI,
		"FALCONNIC_QP_F_KERNEL":                          QPFlagKernel,
	}
	for _, o := range sortedOpcodes() {
		want["FALCONNIC_OP_"+Table[o].Name] = int(o)
	}
	for s := StatusOK; int(s) < len(statusNames); s++ {
		want["FALCONNIC_ST_"+s.String()] = int(s)
	}
	for name, v := range want {
		if got, ok := facts[name]; !ok || got != v {
			t.Errorf("%s = %d in C, %d in Go", name, got, v)
		}
	}
}

// TestAccessorsUseLayoutOffsets ties every getter and setter to the checked
// layout: setting a field through its setter must change exactly the bytes
// the layout (and so gcc) assigns to it, and the getter must read it back.
func TestAccessorsUseLayoutOffsets(t *testing.T) {
	views := map[string]func([]byte) any{
		"Hdr": func(b []byte) any { return Hdr(b) }, "HandleReq": func(b []byte) any { return HandleReq(b) },
		"ProbeReq": func(b []byte) any { return ProbeReq(b) }, "OpenReq": func(b []byte) any { return OpenReq(b) },
		"DeviceAttr": func(b []byte) any { return DeviceAttr(b) }, "PortAttr": func(b []byte) any { return PortAttr(b) },
		"PBL": func(b []byte) any { return PBL(b) }, "RegMR": func(b []byte) any { return RegMR(b) },
		"Ring": func(b []byte) any { return Ring(b) }, "CreateCQ": func(b []byte) any { return CreateCQ(b) },
		"ArmCQ": func(b []byte) any { return ArmCQ(b) }, "CreateQP": func(b []byte) any { return CreateQP(b) },
		"AV": func(b []byte) any { return AV(b) }, "QPAttr": func(b []byte) any { return QPAttr(b) },
		"CreateSRQ": func(b []byte) any { return CreateSRQ(b) }, "SRQAttr": func(b []byte) any { return SRQAttr(b) },
		"CreateAH": func(b []byte) any { return CreateAH(b) }, "Doorbell": func(b []byte) any { return Doorbell(b) },
		"Event": func(b []byte) any { return Event(b) }, "AllocMR": func(b []byte) any { return AllocMR(b) },
		"RegWR": func(b []byte) any { return RegWR(b) },
	}
	for _, s := range Layouts {
		mk, ok := views[s.Go]
		if !ok {
			t.Errorf("no view for %s", s.Go)
			continue
		}
		for _, f := range s.Fields {
			if f.Kind == KindReserved {
				continue
			}
			b := make([]byte, s.Size)
			v := reflect.ValueOf(mk(b))
			get := v.MethodByName(f.Go)
			if !get.IsValid() {
				t.Errorf("%s.%s: no getter", s.Go, f.Go)
				continue
			}
			switch f.Kind {
			case KindScalar:
				set := v.MethodByName("Set" + f.Go)
				arg := reflect.New(set.Type().In(0)).Elem()
				arg.SetUint(0xF1F2F3F4F5F6F7F8 >> (64 - 8*f.Size))
				set.Call([]reflect.Value{arg})
				if got := get.Call(nil)[0].Uint(); got != arg.Uint() {
					t.Errorf("%s.%s: read %#x after writing %#x", s.Go, f.Go, got, arg.Uint())
				}
			case KindBytes:
				set := v.MethodByName("Set" + f.Go)
				set.Call([]reflect.Value{reflect.ValueOf(bytes.Repeat([]byte{0xF1}, f.Size))})
				if got := get.Call(nil)[0].Bytes(); len(got) != f.Size {
					t.Errorf("%s.%s: getter returns %d bytes, want %d", s.Go, f.Go, len(got), f.Size)
				}
			case KindStruct:
				sub := get.Call(nil)[0].Bytes()
				if len(sub) != f.Size {
					t.Errorf("%s.%s: sub-view of %d bytes, want %d", s.Go, f.Go, len(sub), f.Size)
				}
				for i := range sub {
					sub[i] = 0xF1
				}
			}
			for i, x := range b {
				in := i >= f.Offset && i < f.Offset+f.Size
				if in && x == 0 {
					t.Errorf("%s.%s: byte %d not written (layout offset %d size %d)", s.Go, f.Go, i, f.Offset, f.Size)
					break
				}
				if !in && x != 0 {
					t.Errorf("%s.%s: wrote byte %d outside its field (offset %d size %d)", s.Go, f.Go, i, f.Offset, f.Size)
					break
				}
			}
		}
	}
}
