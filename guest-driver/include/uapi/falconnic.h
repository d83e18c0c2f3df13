/* SPDX-License-Identifier: (GPL-2.0 WITH Linux-syscall-note) OR MIT */
/*
 * falconnic control channel: the contract between falconnic.ko (guest) and the
 * emulated NIC (device/ in the falconnic daemon).  This header is the single
 * source of truth; device/rdmauapi mirrors it in Go and a test checks every
 * size and offset against gcc's view of this file.
 *
 * Transport
 *   Every message is one Ethernet frame, EtherType FALCONNIC_ETHERTYPE
 *   (0x88B5, IEEE local experimental), destination MAC = source MAC = the
 *   NIC's own MAC (the virtio-net MAC).  The driver sends them with
 *   dev_queue_xmit() on the NIC's netdev; the NIC consumes every such frame it
 *   sees on its TX path and never forwards one; frames of this EtherType
 *   arriving from the fabric are dropped by the NIC.  Replies and events reach
 *   the guest on the netdev's RX path with the same addressing.
 *
 *   frame = ethhdr (14) | struct falconnic_hdr (32) | body (hdr.length bytes)
 *
 *   Frames shorter than 60 bytes are padded by the sender; the receiver uses
 *   hdr.length and ignores the padding.  hdr.length <= FALCONNIC_MAX_BODY.
 *   Every body has a fixed size per opcode (see the table in the comment on
 *   enum falconnic_opcode); a message whose length differs is rejected with
 *   FALCONNIC_ST_BAD_LENGTH.  No pointers, no variable-length arrays.
 *
 * Encoding
 *   All multi-byte integers are little-endian.  GIDs and MACs are byte
 *   strings in network order.  Every struct is naturally aligned with
 *   explicit reserved fields; senders write reserved fields as zero and
 *   receivers ignore them (so later versions may assign them).
 *
 * Requests, replies, events
 *   A request carries a fresh non-zero req_id chosen by the driver.  The NIC
 *   answers every request (unless FALCONNIC_F_NO_REPLY is set) with a frame
 *   carrying the same opcode, the same req_id and instance, FALCONNIC_F_REPLY
 *   in flags, a status, and the opcode's reply body (present only when status
 *   is FALCONNIC_ST_OK; an error reply has length 0).  The driver times out a
 *   request after falconnic.cmd_timeout_ms (module parameter, default 1000)
 *   and fails the verb with -ETIMEDOUT; late replies are dropped.
 *   Events are sent by the NIC with FALCONNIC_F_EVENT, req_id 0, and a
 *   struct falconnic_event body, with the open instance in hdr.instance;
 *   the NIC sends no event while no instance is open, and the driver drops
 *   every event (EV_PORT included) whose instance is not its own.  Port
 *   state changes before OPEN are not lost: the driver reads the port with
 *   QUERY_PORT once OPEN is acknowledged (also after a re-OPEN).  A frame
 *   with an unknown magic, version, flags or instance is dropped and counted
 *   by the receiver; requests are answered per FALCONNIC_ST_*.
 *
 * Instances and cleanup
 *   hdr.instance is a random 64-bit id the driver picks when it binds a
 *   netdev.  OPEN makes that instance the owner of the NIC's RDMA function:
 *   the NIC first destroys every object of any other instance (a rebooted or
 *   crashed guest, a reloaded module).  CLOSE destroys every object of the
 *   instance.  Requests other than PROBE, OPEN and CLOSE from an instance that
 *   is not the open one fail with FALCONNIC_ST_BAD_INSTANCE; the driver
 *   then takes the NIC to have lost it (daemon restart, NIC reset): it
 *   completes the kernel consumers' outstanding work requests with flush
 *   errors and sends OPEN again (an open driver also asks QUERY_PORT now
 *   and then, so an idle one learns it too).  The NIC also
 *   drops all RDMA objects when its virtio-net device is reset or its
 *   vhost-user session ends (the guest died), since any GPA it holds may no
 *   longer belong to the driver.
 *
 * Handles
 *   The driver assigns every object handle (PD, MR, CQ, QP, SRQ, AH) and
 *   the MR keys, so that it can always name an object to destroy it, even
 *   after a create request timed out.  Handle 0 is never used ("none").
 *   A QP handle is its QPN (>= FALCONNIC_FIRST_QPN, or FALCONNIC_GSI_QPN
 *   for the GSI QP).  An AH handle is the
 *   ah_num librxe writes into UD send WQEs.  The NIC rejects a handle that is
 *   in use with FALCONNIC_ST_HANDLE_IN_USE and one above its limit with
 *   FALCONNIC_ST_BAD_HANDLE.
 *
 * Guest memory: page lists (PBL)
 *   MRs and rings are described by a page list of guest-physical page
 *   addresses (guest RAM is shared with the daemon, there is no vIOMMU, so
 *   a kernel page's physical address is its GPA).  A page list is held in
 *   guest memory, not in the frame:
 *     levels = 1: root is the GPA of one 4 KiB PBL page holding npages
 *                 __le64 data-page GPAs (npages <= 512).
 *     levels = 2: root is the GPA of a 4 KiB directory page holding
 *                 ceil(npages / 512) __le64 GPAs of PBL pages, each holding
 *                 up to 512 __le64 data-page GPAs (npages <= 512 * 512).
 *   Every GPA in a list is page aligned.  The NIC reads and validates the
 *   whole list (against its memory table) while it handles the request and
 *   keeps its own copy (its MTT); the PBL pages themselves are owned by the
 *   driver and may be reused as soon as the reply arrives.
 *
 * Rings (SQ, RQ, SRQ, CQ)
 *   A ring is the Soft-RoCE struct rxe_queue_buf from <rdma/rdma_user_rxe.h>
 *   laid out in virtually contiguous kernel memory (vmalloc_user, mmapped to
 *   userspace by librxe) and given to the NIC as a page list: byte offset x
 *   of the ring lives at pbl[x >> 12] + (x & 4095).  The ring header is 384
 *   bytes (log2_elem_size @0, index_mask @4, producer_index @128,
 *   consumer_index @256), elements start at byte 384, slot i at
 *   384 + ((i & (slots - 1)) << log2_elem_size).  The NIC uses the slot count
 *   and element size from the create request, never the values in the shared
 *   header (userspace can write those).  Indices are free-running modulo
 *   2^32 and masked by slots - 1; a queue is full when
 *   ((producer + 1) & mask) == (consumer & mask), as librxe computes it.
 *   SQ elements are struct rxe_send_wqe, RQ/SRQ elements struct rxe_recv_wqe
 *   (each followed by max_sge struct rxe_sge or max_inline bytes), CQ
 *   elements struct ib_uverbs_wc.  For an SQ/RQ/SRQ the user is the producer
 *   and the NIC the consumer; for a CQ the NIC is the producer.
 *
 *   What the NIC writes, as rxe does (librxe and applications rely on it):
 *   - a CQE is written into the slot at the CQ's producer index, then the
 *     producer index is advanced (a release store); a CQ found full is an
 *     overrun: EV_CQ_ERR, and the QPs using it go to ERR;
 *   - a UD receive puts a 40-byte GRH area first in the receive buffer: for
 *     IPv6 the IPv6 header, for IPv4 20 zero bytes then the IPv4 header
 *     (with a valid checksum), built by the receiving NIC from the source and
 *     destination GIDs the sending NIC took from the sender's address vector;
 *     the CQE then has IB_WC_GRH in wc_flags and byte_len includes the 40
 *     bytes, and ib_uverbs_wc.reserved (byte FALCONNIC_WC_NET_TYPE_OFF)
 *     holds the network header type (FALCONNIC_NET_IPV4 / _IPV6; 0 when
 *     the sender had no GIDs and the GRH area is zero but for the IPv6
 *     version nibble);
 *   - send WQEs carry ah_num (an AH handle) for UD; rxe_av in the WQE is
 *     informational, except on a kernel QP (FALCONNIC_QP_F_KERNEL), whose
 *     UD WQEs carry ah_num 0 and the address vector inline in wr.ud.av
 *     (network_type, dmac, grh.dgid/flow_label/hop_limit/traffic_class, and
 *     the source GID as rxe's sgid_addr: sockaddr_in or sockaddr_in6);
 *   - the consumer index of an SQ/RQ/SRQ is advanced by the NIC when it is
 *     done with a WQE (librxe uses it to find free slots).
 *
 * Doorbells
 *   librxe posts send WQEs into the SQ ring and kicks with a zero-WR
 *   post_send; the driver turns that into DB_SQ (no reply).  librxe posts
 *   receive WQEs without a kick: the NIC reads the RQ/SRQ producer index
 *   when it needs a receive WQE.  DB_RQ/DB_SRQ exist for kernel consumers.
 *   Doorbell suppression (optional for the NIC): the __le32 at byte
 *   FALCONNIC_RING_NIC_POLLING_OFF of an SQ ring (in rxe_queue_buf.pad_1,
 *   unused by librxe) is the NIC's "still draining this SQ" flag.  The
 *   driver skips DB_SQ while it reads non-zero.  A NIC that uses it sets it
 *   to 1 before it starts draining and, when it finds the SQ empty, stores
 *   0, then (after a full barrier) re-reads the producer index and resumes
 *   draining if it moved.  The driver issues a full barrier between the
 *   user's producer store and its read of the flag, so one side always sees
 *   the other.  A NIC that never writes the flag gets every doorbell.
 *   Kernel QPs (FALCONNIC_QP_F_KERNEL, rings that only the guest kernel
 *   sees) post receive WQEs without a doorbell too, and send WQEs with
 *   DB_SQ.
 *   ARM_CQ is a request with a reply: when the reply arrives the CQ is armed,
 *   so a CQE the NIC writes after that raises exactly one EV_CQ_COMP; a CQE
 *   written before is visible to the poll the application does after arming.
 *
 * Arming without a request (FALCONNIC_CAP_ARM_WORD)
 *   A kernel consumer may arm from softirq context, where the driver cannot
 *   wait for a reply.  ARM_CQ with FALCONNIC_ARM_WORD (once, at create time)
 *   switches the CQ to also arming through the __le32 at byte
 *   FALCONNIC_RING_CQ_ARM_OFF of its ring (rxe_queue_buf.pad_1): the driver
 *   stores FALCONNIC_ARM_NEXT or FALCONNIC_ARM_SOLICITED there with a full
 *   barrier (xchg), then reads the producer index: CQEs already there are
 *   reported to the consumer (IB_CQ_REPORT_MISSED_EVENTS).  After writing a
 *   CQE and advancing the producer index, the NIC does a compare-and-swap
 *   on the word (a full barrier): when the word arms for that CQE it swaps
 *   it to 0 and sends one EV_CQ_COMP; otherwise it swaps it to itself.  One
 *   of the two sides always sees the other's store, so no CQE is missed.
 *
 * Kernel consumers (FALCONNIC_CAP_MEM_MGT)
 *   Kernel QPs (FALCONNIC_QP_F_KERNEL) of every type may also post, in
 *   rxe_send_wqe.wr.opcode:
 *   - IB_WR_LOCAL_INV (7): ex.invalidate_rkey names a fast-registration MR
 *     of the QP's PD by its current key; it becomes FREE.  Completion
 *     opcode IB_WC_LOCAL_INV (6); an unknown key fails with
 *     IB_WC_LOC_QP_OP_ERR.
 *   - IB_WR_REG_MR (0x20): struct falconnic_reg_wr at byte
 *     FALCONNIC_WQE_REG_OFF (rxe_send_wqe.wr.wr) registers a FREE MR made
 *     by ALLOC_MR: the NIC reads the first npages entries of the MR's page
 *     list (the GPAs of the pages ib_map_mr_sg chose, in order) and
 *     validates them as REG_MR's; [iova, iova+length) then maps to byte
 *     (iova & 4095) of the first listed page.  key must keep the upper 24
 *     bits of ALLOC_MR's key (ib_inc_rkey changes the low 8) and becomes
 *     both lkey and rkey.  Completion opcode IB_WC_REG_MR (8); a refused
 *     registration fails with IB_WC_MW_BIND_ERR and leaves the MR FREE.
 *     The NIC executes it after the QP's earlier WQEs that use the MR.
 *   RC QPs (user or kernel) may post IB_WR_SEND_WITH_INV (9) with
 *   ex.invalidate_rkey: the receiver's NIC moves the fast-registration MR
 *   with that rkey (of the receiving QP's PD) to FREE and the receive CQE
 *   has IB_WC_WITH_INVALIDATE in wc_flags and the rkey in
 *   ex.invalidate_rkey (host order); a key naming no such MR fails the
 *   receive with IB_WC_REM_INV_REQ_ERR and the sender's WQE with the same.
 *   Only a VALID MR's keys translate; FALCONNIC_DMA_LKEY is never an rkey.
 */
#ifndef _UAPI_FALCONNIC_H
#define _UAPI_FALCONNIC_H

#include <linux/types.h>

#define FALCONNIC_ETHERTYPE	0x88B5
#define FALCONNIC_MAGIC		0x43494E46u	/* "FNIC" in memory order */
#define FALCONNIC_VERSION	1
#define FALCONNIC_MAX_BODY	1468		/* 1500-byte MTU minus the header */
#define FALCONNIC_PAGE_SHIFT	12
#define FALCONNIC_PBL_ENTRIES	512		/* __le64 entries per 4 KiB PBL page */
#define FALCONNIC_FIRST_QPN	16
#define FALCONNIC_RING_HDR_SIZE	384		/* sizeof(struct rxe_queue_buf) */
#define FALCONNIC_RING_NIC_POLLING_OFF 64	/* SQ: NIC is draining (see Doorbells) */
#define FALCONNIC_RING_CQ_ARM_OFF 64	/* CQ: arm word (see "Arming without a request") */
#define FALCONNIC_WQE_REG_OFF	24	/* offsetof(struct rxe_send_wqe, wr.wr): REG_MR */
#define FALCONNIC_GSI_QPN	1		/* the GSI QP (QP1): FALCONNIC_QPT_GSI only */
#define FALCONNIC_GSI_QKEY	0x80010000u	/* IB_QP1_QKEY */
/*
 * FALCONNIC_DMA_LKEY: the local key of "this guest's physical memory".  An
 * SGE of a kernel QP (FALCONNIC_QP_F_KERNEL) with this lkey names the
 * guest-physical range [addr, addr+length), checked against guest RAM.  It
 * is never an rkey and never valid on a user QP.  REG_MR never assigns it.
 */
#define FALCONNIC_DMA_LKEY	0
#define FALCONNIC_WC_NET_TYPE_OFF 47		/* offsetof(struct ib_uverbs_wc, reserved) */
#define FALCONNIC_NET_IPV4	1		/* RXE_NETWORK_TYPE_IPV4 */
#define FALCONNIC_NET_IPV6	2		/* RXE_NETWORK_TYPE_IPV6 */

/* struct falconnic_hdr: the common header of every message. */
struct falconnic_hdr {
	__le32	magic;		/* FALCONNIC_MAGIC */
	__le16	version;	/* FALCONNIC_VERSION */
	__le16	opcode;		/* enum falconnic_opcode */
	__le64	instance;	/* driver instance id, see "Instances" */
	__le32	req_id;		/* non-zero in requests and replies, 0 in events */
	__le16	flags;		/* FALCONNIC_F_* */
	__le16	length;		/* body bytes following this header */
	__le32	status;		/* enum falconnic_status; 0 in requests and events */
	__le32	reserved;
};

enum falconnic_flags {
	FALCONNIC_F_REPLY	= 1 << 0,	/* NIC -> driver, answers req_id */
	FALCONNIC_F_EVENT	= 1 << 1,	/* NIC -> driver, unsolicited */
	FALCONNIC_F_NO_REPLY	= 1 << 2,	/* driver -> NIC, do not answer */
};

/*
 * enum falconnic_opcode: message types.  Request body / reply body:
 *   PROBE        probe_req      / device_attr
 *   OPEN         open_req       / none
 *   CLOSE        none           / none
 *   QUERY_PORT   handle_req     / port_attr     (handle = port number, 1)
 *   CREATE_PD    handle_req     / none
 *   DESTROY_PD   handle_req     / none
 *   REG_MR       reg_mr         / none
 *   DEREG_MR     handle_req     / none      (also for ALLOC_MR's MRs)
 *   ALLOC_MR     alloc_mr       / none      (FALCONNIC_CAP_MEM_MGT)
 *   CREATE_CQ    create_cq      / none
 *   DESTROY_CQ   handle_req     / none
 *   ARM_CQ       arm_cq         / none
 *   CREATE_QP    create_qp      / none
 *   MODIFY_QP    qp_attr        / none
 *   QUERY_QP     handle_req     / qp_attr       (attr_mask = all valid fields)
 *   DESTROY_QP   handle_req     / none
 *   CREATE_SRQ   create_srq     / none
 *   MODIFY_SRQ   srq_attr       / none
 *   QUERY_SRQ    handle_req     / srq_attr
 *   DESTROY_SRQ  handle_req     / none
 *   CREATE_AH    create_ah      / none
 *   DESTROY_AH   handle_req     / none
 *   DB_SQ, DB_RQ, DB_SRQ  doorbell, sent with FALCONNIC_F_NO_REPLY
 *   EV_*         event (NIC -> driver)
 */
enum falconnic_opcode {
	FALCONNIC_OP_PROBE		= 0x01,
	FALCONNIC_OP_OPEN		= 0x02,
	FALCONNIC_OP_CLOSE		= 0x03,
	FALCONNIC_OP_QUERY_PORT		= 0x04,
	FALCONNIC_OP_CREATE_PD		= 0x10,
	FALCONNIC_OP_DESTROY_PD		= 0x11,
	FALCONNIC_OP_REG_MR		= 0x18,
	FALCONNIC_OP_DEREG_MR		= 0x19,
	FALCONNIC_OP_ALLOC_MR		= 0x1a,
	FALCONNIC_OP_CREATE_CQ		= 0x20,
	FALCONNIC_OP_DESTROY_CQ		= 0x21,
	FALCONNIC_OP_ARM_CQ		= 0x22,
	FALCONNIC_OP_CREATE_QP		= 0x28,
	FALCONNIC_OP_MODIFY_QP		= 0x29,
	FALCONNIC_OP_QUERY_QP		= 0x2a,
	FALCONNIC_OP_DESTROY_QP		= 0x2b,
	FALCONNIC_OP_CREATE_SRQ		= 0x30,
	FALCONNIC_OP_MODIFY_SRQ		= 0x31,
	FALCONNIC_OP_QUERY_SRQ		= 0x32,
	FALCONNIC_OP_DESTROY_SRQ	= 0x33,
	FALCONNIC_OP_CREATE_AH		= 0x38,
	FALCONNIC_OP_DESTROY_AH		= 0x39,
	FALCONNIC_OP_DB_SQ		= 0x40,
	FALCONNIC_OP_DB_RQ		= 0x41,
	FALCONNIC_OP_DB_SRQ		= 0x42,
	FALCONNIC_OP_EV_CQ_COMP		= 0x80,	/* handle = CQ */
	FALCONNIC_OP_EV_CQ_ERR		= 0x81,	/* handle = CQ (overrun, bad ring) */
	FALCONNIC_OP_EV_QP_FATAL	= 0x82,	/* handle = QP */
	FALCONNIC_OP_EV_QP_REQ_ERR	= 0x83,	/* handle = QP */
	FALCONNIC_OP_EV_QP_ACCESS_ERR	= 0x84,	/* handle = QP */
	FALCONNIC_OP_EV_QP_LAST_WQE	= 0x85,	/* handle = QP (SRQ-attached, in ERR) */
	FALCONNIC_OP_EV_SRQ_LIMIT	= 0x86,	/* handle = SRQ */
	FALCONNIC_OP_EV_SRQ_ERR		= 0x87,	/* handle = SRQ */
	FALCONNIC_OP_EV_PORT		= 0x88,	/* handle = port, code = new port state */
};

/* enum falconnic_status: result of a request, in reply headers. */
enum falconnic_status {
	FALCONNIC_ST_OK			= 0,
	FALCONNIC_ST_BAD_VERSION	= 1,	/* header version not supported */
	FALCONNIC_ST_BAD_OPCODE		= 2,	/* unknown or direction-invalid opcode */
	FALCONNIC_ST_BAD_LENGTH		= 3,	/* body length is not the opcode's size */
	FALCONNIC_ST_BAD_INSTANCE	= 4,	/* instance is not the open one */
	FALCONNIC_ST_BAD_HANDLE		= 5,	/* no such object, or out of range */
	FALCONNIC_ST_HANDLE_IN_USE	= 6,	/* create with a handle that exists */
	FALCONNIC_ST_BAD_PARAM		= 7,	/* a field is out of range */
	FALCONNIC_ST_BAD_GPA		= 8,	/* a GPA is unaligned or outside guest RAM */
	FALCONNIC_ST_NO_RESOURCES	= 9,	/* a device limit was reached */
	FALCONNIC_ST_BAD_STATE		= 10,	/* invalid QP state transition */
	FALCONNIC_ST_BUSY		= 11,	/* object still referenced (PD with MRs, CQ with QPs) */
	FALCONNIC_ST_NOT_SUPPORTED	= 12,	/* valid but not implemented */
	FALCONNIC_ST_BAD_ACCESS		= 13,	/* access flags invalid for the object */
	FALCONNIC_ST_INTERNAL		= 14,
};

/* struct falconnic_handle_req: a request that names one object. */
struct falconnic_handle_req {
	__le32	handle;
	__le32	reserved;
};

/* struct falconnic_probe_req: PROBE body. */
struct falconnic_probe_req {
	__le32	driver_version;	/* FALCONNIC_VERSION the driver speaks */
	__le32	max_body;	/* largest body the driver accepts */
	__le64	reserved;
};

/* struct falconnic_open_req: OPEN body. */
struct falconnic_open_req {
	__le32	driver_version;
	__le32	reserved;
};

enum falconnic_cap_flags {
	FALCONNIC_CAP_RC		= 1 << 0,
	FALCONNIC_CAP_UC		= 1 << 1,
	FALCONNIC_CAP_UD		= 1 << 2,
	FALCONNIC_CAP_SRQ		= 1 << 3,
	FALCONNIC_CAP_ATOMIC		= 1 << 4,
	FALCONNIC_CAP_IMM		= 1 << 5,
	FALCONNIC_CAP_INLINE		= 1 << 6,
	/* Kernel RC/UC QPs, ALLOC_MR, REG_MR/LOCAL_INV WQEs, SEND_WITH_INV. */
	FALCONNIC_CAP_MEM_MGT		= 1 << 7,
	/* ARM_CQ's FALCONNIC_ARM_WORD (see "Arming without a request"). */
	FALCONNIC_CAP_ARM_WORD		= 1 << 8,
};

/* struct falconnic_device_attr: PROBE reply, the NIC's limits. */
struct falconnic_device_attr {
	__le64	fw_ver;
	__le64	max_mr_size;
	__le64	page_size_cap;
	__u8	mac[6];
	__le16	nports;		/* always 1 */
	__le32	vendor_id;
	__le32	vendor_part_id;
	__le32	hw_ver;
	__le32	max_qp;
	__le32	max_qp_wr;
	__le32	max_send_sge;
	__le32	max_recv_sge;
	__le32	max_sge_rd;
	__le32	max_cq;
	__le32	max_cqe;
	__le32	max_mr;
	__le32	max_pd;
	__le32	max_qp_rd_atom;
	__le32	max_qp_init_rd_atom;
	__le32	max_srq;
	__le32	max_srq_wr;
	__le32	max_srq_sge;
	__le32	max_ah;
	__le32	max_inline_data;
	__le32	cap_flags;	/* FALCONNIC_CAP_* */
	__le32	max_fast_reg_pages;	/* ALLOC_MR page-list capacity limit (MEM_MGT) */
	__le32	reserved;
};

/* struct falconnic_port_attr: QUERY_PORT reply; enums use IB values. */
struct falconnic_port_attr {
	__le32	state;		/* IB_PORT_DOWN=1 .. IB_PORT_ACTIVE=4 */
	__le32	max_mtu;	/* IB_MTU_256=1 .. IB_MTU_4096=5 */
	__le32	active_mtu;
	__le32	max_msg_sz;
	__u8	active_speed;	/* IB_SPEED_* */
	__u8	active_width;	/* IB_WIDTH_* */
	__u8	phys_state;	/* IB_PORT_PHYS_STATE_* */
	__u8	reserved[5];
};

/* struct falconnic_pbl: a page list in guest memory (see "page lists"). */
struct falconnic_pbl {
	__le64	root;		/* GPA of the PBL page (levels 1) or directory (2) */
	__le32	npages;		/* data pages in the list */
	__u8	levels;		/* 1 or 2 */
	__u8	page_shift;	/* FALCONNIC_PAGE_SHIFT */
	__le16	reserved;
};

/* Access flags, the IB_ACCESS_* values. */
enum falconnic_access {
	FALCONNIC_ACCESS_LOCAL_WRITE	= 1 << 0,
	FALCONNIC_ACCESS_REMOTE_WRITE	= 1 << 1,
	FALCONNIC_ACCESS_REMOTE_READ	= 1 << 2,
	FALCONNIC_ACCESS_REMOTE_ATOMIC	= 1 << 3,
	FALCONNIC_ACCESS_MW_BIND	= 1 << 4,
};

/*
 * struct falconnic_reg_mr: REG_MR body.  The MR covers [iova, iova+length);
 * iova maps to byte first_offset of the first listed page.
 */
struct falconnic_reg_mr {
	__le32	mr;		/* handle */
	__le32	pd;
	__le32	lkey;
	__le32	rkey;		/* 0 when no remote access is granted */
	__le64	iova;
	__le64	length;
	__le32	access;		/* FALCONNIC_ACCESS_* */
	__le32	first_offset;	/* < 4096 */
	struct falconnic_pbl pbl;
};

/*
 * struct falconnic_alloc_mr: ALLOC_MR body.  A fast-registration MR
 * (IB_MR_TYPE_MEM_REG), FREE until an IB_WR_REG_MR registers it.  pbl names
 * the page list in guest memory that REG_MR work requests read; pbl.npages
 * is its capacity (<= device_attr.max_fast_reg_pages) and its pages are
 * reserved in the NIC now.  key (!= FALCONNIC_DMA_LKEY, upper 24 bits not 0)
 * is the initial lkey = rkey.  DEREG_MR destroys it.
 */
struct falconnic_alloc_mr {
	__le32	mr;		/* handle */
	__le32	pd;
	__le32	key;
	__le32	reserved;
	struct falconnic_pbl pbl;
};

/*
 * struct falconnic_reg_wr: an IB_WR_REG_MR send WQE of a kernel QP carries
 * this at byte FALCONNIC_WQE_REG_OFF (see "Kernel consumers").
 */
struct falconnic_reg_wr {
	__le32	mr;		/* ALLOC_MR handle */
	__le32	key;		/* new lkey = rkey */
	__le32	access;		/* FALCONNIC_ACCESS_* (not MW_BIND) */
	__le32	npages;		/* 1 .. the MR's capacity */
	__le64	iova;
	__le64	length;
};

/* struct falconnic_ring: a shared ring (see "Rings"). */
struct falconnic_ring {
	struct falconnic_pbl pbl;	/* covers 384 + (slots << log2_elem_size) bytes */
	__le32	slots;		/* power of two; index_mask = slots - 1 */
	__le32	log2_elem_size;
	__le32	max_sge;	/* SGEs per WQE (0 for a CQ) */
	__le32	max_inline;	/* inline bytes per WQE (0 for a CQ or RQ) */
};

/* struct falconnic_create_cq: CREATE_CQ body. */
struct falconnic_create_cq {
	__le32	cq;
	__le32	cqe;		/* usable entries, slots - 1 */
	struct falconnic_ring ring;
};

enum falconnic_arm_flags {
	FALCONNIC_ARM_SOLICITED	= 1 << 0,	/* only solicited or error CQEs raise the event */
	FALCONNIC_ARM_NEXT	= 1 << 1,	/* any CQE raises the event */
	FALCONNIC_ARM_WORD	= 1 << 2,	/* also arm through the ring's arm word */
};

/* struct falconnic_arm_cq: ARM_CQ body. */
struct falconnic_arm_cq {
	__le32	cq;
	__le32	flags;		/* FALCONNIC_ARM_* */
};

/*
 * QP types, the IB_QPT_* values.  GSI is a UD QP with handle
 * FALCONNIC_GSI_QPN and Q_Key FALCONNIC_GSI_QKEY, created by the kernel's
 * ib_mad (so always with FALCONNIC_QP_F_KERNEL); its state transitions are
 * UD's without the port attribute.
 */
enum falconnic_qp_type {
	FALCONNIC_QPT_GSI	= 1,
	FALCONNIC_QPT_RC	= 2,
	FALCONNIC_QPT_UC	= 3,
	FALCONNIC_QPT_UD	= 4,
};

enum falconnic_qp_flags {
	/*
	 * A kernel consumer's QP: its rings are not mapped to user space, so
	 * its SGEs may use FALCONNIC_DMA_LKEY and its UD WQEs carry the
	 * address vector inline (ah_num 0).
	 */
	FALCONNIC_QP_F_KERNEL	= 1 << 0,
};

/* struct falconnic_create_qp: CREATE_QP body; the QP starts in RESET. */
struct falconnic_create_qp {
	__le32	qp;		/* handle = QPN (FALCONNIC_GSI_QPN for GSI) */
	__le32	pd;
	__le32	send_cq;
	__le32	recv_cq;
	__le32	srq;		/* 0: the QP has its own RQ */
	__u8	type;		/* FALCONNIC_QPT_* */
	__u8	sq_sig_all;	/* 1: every send WQE completes */
	__u8	flags;		/* FALCONNIC_QP_F_* */
	__u8	reserved;
	struct falconnic_ring sq;
	struct falconnic_ring rq;	/* all zero when srq != 0 */
};

/* struct falconnic_av: an address vector (RoCEv2). */
struct falconnic_av {
	__u8	port_num;
	__u8	network_type;	/* RXE_NETWORK_TYPE_IPV4=1, _IPV6=2 */
	__u8	dmac[6];
	__le32	flow_label;
	__u8	sgid_index;
	__u8	hop_limit;
	__u8	traffic_class;
	__u8	reserved;
	__u8	sgid[16];	/* IPv4-mapped (::ffff:a.b.c.d) for IPv4 */
	__u8	dgid[16];
};

/* QP attribute mask bits, the IB_QP_* values. */
enum falconnic_qp_attr_mask {
	FALCONNIC_QP_STATE		= 1 << 0,
	FALCONNIC_QP_CUR_STATE		= 1 << 1,
	FALCONNIC_QP_ACCESS_FLAGS	= 1 << 3,
	FALCONNIC_QP_PKEY_INDEX		= 1 << 4,
	FALCONNIC_QP_PORT		= 1 << 5,
	FALCONNIC_QP_QKEY		= 1 << 6,
	FALCONNIC_QP_AV			= 1 << 7,
	FALCONNIC_QP_PATH_MTU		= 1 << 8,
	FALCONNIC_QP_TIMEOUT		= 1 << 9,
	FALCONNIC_QP_RETRY_CNT		= 1 << 10,
	FALCONNIC_QP_RNR_RETRY		= 1 << 11,
	FALCONNIC_QP_RQ_PSN		= 1 << 12,
	FALCONNIC_QP_MAX_QP_RD_ATOMIC	= 1 << 13,
	FALCONNIC_QP_MIN_RNR_TIMER	= 1 << 15,
	FALCONNIC_QP_SQ_PSN		= 1 << 16,
	FALCONNIC_QP_MAX_DEST_RD_ATOMIC	= 1 << 17,
	FALCONNIC_QP_DEST_QPN		= 1 << 20,
};

/* QP states, the IB_QPS_* values. */
enum falconnic_qp_state {
	FALCONNIC_QPS_RESET	= 0,
	FALCONNIC_QPS_INIT	= 1,
	FALCONNIC_QPS_RTR	= 2,
	FALCONNIC_QPS_RTS	= 3,
	FALCONNIC_QPS_SQD	= 4,
	FALCONNIC_QPS_SQE	= 5,
	FALCONNIC_QPS_ERR	= 6,
};

/*
 * struct falconnic_qp_attr: MODIFY_QP body (fields named by attr_mask are
 * valid) and QUERY_QP reply.  Enums use IB values (path_mtu: IB_MTU_*).
 */
struct falconnic_qp_attr {
	__le32	qp;
	__le32	attr_mask;	/* FALCONNIC_QP_* */
	__le32	qp_state;	/* FALCONNIC_QPS_* */
	__le32	cur_qp_state;
	__le32	path_mtu;
	__le32	qkey;
	__le32	rq_psn;		/* 24 bits */
	__le32	sq_psn;		/* 24 bits */
	__le32	dest_qp_num;	/* 24 bits */
	__le32	access_flags;	/* FALCONNIC_ACCESS_* (remote ones) */
	__le16	pkey_index;
	__u8	port_num;
	__u8	max_rd_atomic;
	__u8	max_dest_rd_atomic;
	__u8	min_rnr_timer;	/* IB encoding, 5 bits */
	__u8	timeout;	/* 4.096 us * 2^timeout, 5 bits */
	__u8	retry_cnt;	/* 3 bits */
	__u8	rnr_retry;	/* 3 bits, 7 = infinite */
	__u8	sq_draining;	/* QUERY_QP only */
	__u8	reserved[6];
	struct falconnic_av av;	/* the primary path, with FALCONNIC_QP_AV */
};

/* SRQ attribute mask bits, the IB_SRQ_* values. */
enum falconnic_srq_attr_mask {
	FALCONNIC_SRQ_MAX_WR	= 1 << 0,
	FALCONNIC_SRQ_LIMIT	= 1 << 1,
};

/* struct falconnic_create_srq: CREATE_SRQ body. */
struct falconnic_create_srq {
	__le32	srq;
	__le32	pd;
	__le32	srq_limit;	/* 0: no limit event armed */
	__le32	reserved;
	struct falconnic_ring ring;
};

/* struct falconnic_srq_attr: MODIFY_SRQ body and QUERY_SRQ reply. */
struct falconnic_srq_attr {
	__le32	srq;
	__le32	attr_mask;	/* FALCONNIC_SRQ_*; MODIFY supports LIMIT only */
	__le32	max_wr;
	__le32	max_sge;
	__le32	srq_limit;
	__le32	reserved;
};

/* struct falconnic_create_ah: CREATE_AH body. */
struct falconnic_create_ah {
	__le32	ah;		/* handle = ah_num in UD send WQEs */
	__le32	pd;
	struct falconnic_av av;
};

/* struct falconnic_doorbell: DB_SQ / DB_RQ / DB_SRQ body. */
struct falconnic_doorbell {
	__le32	handle;		/* QP (DB_SQ, DB_RQ) or SRQ (DB_SRQ) */
	__le32	producer;	/* producer index the driver saw: a hint only */
};

/* struct falconnic_event: body of every EV_* message. */
struct falconnic_event {
	__le32	handle;
	__le32	code;		/* event-specific: port state, error cause */
	__le64	info;
};

#endif /* _UAPI_FALCONNIC_H */
