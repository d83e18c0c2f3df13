package verbs

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestABIMatchesGCC checks the rxe ABI offsets this package uses against
// gcc's view of <rdma/rdma_user_rxe.h> and <rdma/ib_user_verbs.h> (skipped
// when gcc or the headers are missing).
func TestABIMatchesGCC(t *testing.T) {
	if _, err := os.Stat("/usr/include/rdma/rdma_user_rxe.h"); err != nil {
		t.Skip("no rdma_user_rxe.h")
	}
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc")
	}
	dir := t.TempDir()
	src := `#include <stdio.h>
#include <stddef.h>
#include <rdma/rdma_user_rxe.h>
#include <rdma/ib_user_verbs.h>
#define O(t, f) printf(#t "." #f " %zu\n", offsetof(struct t, f))
#define S(t) printf(#t " %zu\n", sizeof(struct t))
int main(void) {
S(rxe_send_wqe); S(rxe_recv_wqe); S(rxe_sge); S(ib_uverbs_wc); S(rxe_queue_buf); S(rxe_av);
O(rxe_queue_buf, producer_index); O(rxe_queue_buf, consumer_index);
O(rxe_send_wqe, wr.wr_id); O(rxe_send_wqe, wr.opcode); O(rxe_send_wqe, wr.send_flags); O(rxe_send_wqe, wr.ex.imm_data);
O(rxe_send_wqe, wr.wr.rdma.remote_addr); O(rxe_send_wqe, wr.wr.rdma.rkey);
O(rxe_send_wqe, wr.wr.atomic.compare_add); O(rxe_send_wqe, wr.wr.atomic.swap); O(rxe_send_wqe, wr.wr.atomic.rkey);
O(rxe_send_wqe, wr.wr.ud.remote_qpn); O(rxe_send_wqe, wr.wr.ud.remote_qkey); O(rxe_send_wqe, wr.wr.ud.ah_num);
O(rxe_send_wqe, wr.wr.ud.av); O(rxe_send_wqe, dma.length); O(rxe_send_wqe, dma.num_sge); O(rxe_send_wqe, dma.sge);
O(rxe_recv_wqe, wr_id); O(rxe_recv_wqe, dma.length); O(rxe_recv_wqe, dma.num_sge); O(rxe_recv_wqe, dma.sge);
O(ib_uverbs_wc, status); O(ib_uverbs_wc, opcode); O(ib_uverbs_wc, byte_len); O(ib_uverbs_wc, ex.imm_data);
O(ib_uverbs_wc, qp_num); O(ib_uverbs_wc, src_qp); O(ib_uverbs_wc, wc_flags); O(ib_uverbs_wc, port_num);
return 0; }
`
	if err := os.WriteFile(filepath.Join(dir, "abi.c"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "abi")
	if out, err := exec.Command(gcc, "-o", bin, filepath.Join(dir, "abi.c")).CombinedOutput(); err != nil {
		t.Skipf("gcc: %v %s", err, out)
	}
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(l)
		n, _ := strconv.Atoi(f[1])
		got[f[0]] = n
	}
	want := map[string]int{
		"rxe_send_wqe": SendWQESize, "rxe_recv_wqe": RecvWQESize, "rxe_sge": SGESize, "ib_uverbs_wc": WCSize,
		"rxe_queue_buf": RingHdrSize, "rxe_av": avSize,
		"rxe_queue_buf.producer_index": ringProducerOff, "rxe_queue_buf.consumer_index": ringConsumerOff,
		"rxe_send_wqe.dma.sge": SendWQESize, "rxe_recv_wqe.dma.sge": RecvWQESize,
	}
	// Accessor offsets: set a field through the view, find where it landed.
	at := func(set func(b []byte), size int) int {
		b := make([]byte, 512)
		set(b)
		for i, v := range b {
			if v != 0 {
				return i - (size - 1) // little-endian: the low byte is first; we set the top byte
			}
		}
		return -1
	}
	top := func(n int) uint64 { return 1 << (8*n - 1) }
	want["rxe_send_wqe.wr.wr_id"] = at(func(b []byte) { SendWQE(b).SetWRID(top(8)) }, 8)
	want["rxe_send_wqe.wr.opcode"] = at(func(b []byte) { SendWQE(b).SetOpcode(uint32(top(4))) }, 4)
	want["rxe_send_wqe.wr.send_flags"] = at(func(b []byte) { SendWQE(b).SetFlags(uint32(top(4))) }, 4)
	want["rxe_send_wqe.wr.ex.imm_data"] = at(func(b []byte) { SendWQE(b).SetImm(1) }, 4) // big-endian: the 1 lands in the last byte
	want["rxe_send_wqe.wr.wr.rdma.remote_addr"] = at(func(b []byte) { SendWQE(b).SetRemoteAddr(top(8)) }, 8)
	want["rxe_send_wqe.wr.wr.rdma.rkey"] = at(func(b []byte) { SendWQE(b).SetRKey(uint32(top(4))) }, 4)
	want["rxe_send_wqe.wr.wr.atomic.compare_add"] = at(func(b []byte) { SendWQE(b).SetCompareAdd(top(8)) }, 8)
	want["rxe_send_wqe.wr.wr.atomic.swap"] = at(func(b []byte) { SendWQE(b).SetSwap(top(8)) }, 8)
	want["rxe_send_wqe.wr.wr.atomic.rkey"] = at(func(b []byte) { SendWQE(b).SetAtomicRKey(uint32(top(4))) }, 4)
	want["rxe_send_wqe.wr.wr.ud.remote_qpn"] = at(func(b []byte) { SendWQE(b).SetRemoteQPN(uint32(top(4))) }, 4)
	want["rxe_send_wqe.wr.wr.ud.remote_qkey"] = at(func(b []byte) { SendWQE(b).SetRemoteQKey(uint32(top(4))) }, 4)
	want["rxe_send_wqe.wr.wr.ud.ah_num"] = at(func(b []byte) { SendWQE(b).SetAHNum(uint32(top(4))) }, 4)
	want["rxe_send_wqe.wr.wr.ud.av"] = 56
	want["rxe_send_wqe.dma.length"] = at(func(b []byte) { SendWQE(b).SetLength(uint32(top(4))) }, 4)
	want["rxe_send_wqe.dma.num_sge"] = at(func(b []byte) { SendWQE(b).SetNumSGE(uint32(top(4))) }, 4)
	want["rxe_recv_wqe.wr_id"] = at(func(b []byte) { RecvWQE(b).SetWRID(top(8)) }, 8)
	want["rxe_recv_wqe.dma.length"] = at(func(b []byte) { RecvWQE(b).SetLength(uint32(top(4))) }, 4)
	want["rxe_recv_wqe.dma.num_sge"] = at(func(b []byte) { RecvWQE(b).SetNumSGE(uint32(top(4))) }, 4)
	wc := func(c Completion) int {
		b := make([]byte, WCSize)
		c.put(b)
		b[46] = 0 // port_num is always written
		for i, v := range b {
			if v != 0 {
				return i
			}
		}
		return -1
	}
	want["ib_uverbs_wc.status"] = wc(Completion{Status: 1})
	want["ib_uverbs_wc.opcode"] = wc(Completion{Opcode: 1})
	want["ib_uverbs_wc.byte_len"] = wc(Completion{ByteLen: 1})
	want["ib_uverbs_wc.ex.imm_data"] = wc(Completion{Imm: 1 << 24}) // network order: first byte
	want["ib_uverbs_wc.qp_num"] = wc(Completion{QPN: 1})
	want["ib_uverbs_wc.src_qp"] = wc(Completion{SrcQP: 1})
	want["ib_uverbs_wc.wc_flags"] = wc(Completion{Flags: 1})
	want["ib_uverbs_wc.port_num"] = 46
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s: gcc %d (found %v), Go %d", k, g, ok, v)
		}
	}
}
