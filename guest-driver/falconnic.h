/* SPDX-License-Identifier: GPL-2.0 */
/*
 * falconnic.ko internals.  The wire contract is include/uapi/falconnic.h.
 *
 * Roles:
 *   chan.c   control channel: frames out via dev_queue_xmit, frames in via a
 *            packet_type handler, request ids, timeouts, event dispatch.
 *   queue.c  guest memory given to the NIC: page lists (PBL), rings
 *            (vmalloc_user, mmapped to librxe), quarantine of memory the NIC
 *            may still own.
 *   verbs.c  the ib_device ops (rxe user ABI).
 *   kverbs.c kernel consumers' data path: post_send/post_recv into kernel
 *            rings (RC/UC/UD/GSI, FRWR work requests), poll_cq, inline
 *            AVs, fast-registration MRs, the CQ arm word.
 *   main.c   module init/exit, rdma link type, netdev notifier, autoprobe.
 */
#ifndef FALCONNIC_H
#define FALCONNIC_H

#include <linux/types.h>
#include <linux/netdevice.h>
#include <linux/completion.h>
#include <linux/idr.h>
#include <linux/xarray.h>
#include <linux/kref.h>
#include <linux/workqueue.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_umem.h>
#include <rdma/rdma_user_rxe.h>
#include "uapi/falconnic.h"

#define FNIC_GID_TBL_LEN	32

/* Counters, one per cause; shown in /sys/class/infiniband/<dev>/counters. */
enum fnic_counter {
	FNIC_C_TX_REQ,
	FNIC_C_TX_DOORBELL,
	FNIC_C_DOORBELL_SUPPRESSED,
	FNIC_C_DOORBELL_RETRY,		/* doorbell frame not sent: sent again later */
	FNIC_C_TX_ERR,
	FNIC_C_REQ_TIMEOUT,
	FNIC_C_REQ_ERR_STATUS,
	FNIC_C_RX_REPLY,
	FNIC_C_RX_EVENT,
	FNIC_C_RX_SHORT,
	FNIC_C_RX_BAD_MAGIC,
	FNIC_C_RX_BAD_VERSION,
	FNIC_C_RX_BAD_LENGTH,
	FNIC_C_RX_BAD_FLAGS,
	FNIC_C_RX_BAD_INSTANCE,		/* reply or request of another instance */
	FNIC_C_RX_EVENT_BAD_INSTANCE,	/* event of another instance (dropped) */
	FNIC_C_RX_UNMATCHED_REPLY,
	FNIC_C_RX_REPLY_BAD_BODY,
	FNIC_C_RX_EVENT_UNKNOWN,
	FNIC_C_RX_EVENT_NO_OBJECT,
	FNIC_C_QUARANTINED,
	FNIC_C_KPOST_SEND,		/* kernel send WRs posted */
	FNIC_C_KPOST_RECV,		/* kernel receive WRs posted */
	FNIC_C_KPOST_FULL,		/* kernel WR refused: queue full */
	FNIC_C_KPOST_BAD_WR,		/* kernel WR refused: opcode, SGE or AH */
	FNIC_C_KPOLL_CQE,		/* CQEs polled from kernel CQs */
	FNIC_C_KARM_RETRY,		/* kernel CQ arm failed: consumer re-polls */
	FNIC_C_KCQ_WATCH_POLL,		/* kernel CQ had CQEs and no event yet */
	FNIC_C_KREG_MR,			/* REG_MR work requests posted */
	FNIC_C_KLOCAL_INV,		/* LOCAL_INV work requests posted */
	FNIC_C_KMAP_MR_BAD_PAGE,	/* map_mr_sg refused a page (not linear-map) */
	FNIC_C_KARM_WORD,		/* kernel CQ armed through the ring's arm word */
	FNIC_C_KARM_DEFERRED,		/* ARM_CQ sent from a work item (atomic caller) */
	FNIC_C_KARM_MISSED,		/* arm found CQEs: IB_CQ_REPORT_MISSED_EVENTS */
	FNIC_C_NIC_LOST,		/* the NIC no longer knew this instance */
	FNIC_C_KEEPALIVE,		/* keepalive requests sent */
	FNIC_C_KFLUSH_WR,		/* kernel WRs completed with WR_FLUSH_ERR by us */
	FNIC_C_KFLUSH_CQ_FULL,		/* flush CQE dropped: the consumer's CQ was full */
	FNIC_C_KFLUSH_CQ_NIC,		/* flush CQE dropped: the CQ is the NIC's again */
	FNIC_C_GSI_REVIVED,		/* the GSI QP re-created on the NIC after a loss */
	FNIC_C_GSI_REVIVE_FAIL,		/* re-creating the GSI QP failed (retried at next OPEN) */
	FNIC_C_NUM
};

/* struct fnic_req: one outstanding request. */
struct fnic_req {
	struct list_head	list;
	u32			id;
	u16			opcode;
	u16			reply_len;	/* expected reply body size */
	void			*reply;		/* reply body destination */
	u32			status;		/* FALCONNIC_ST_* once done */
	struct completion	done;
};

/* struct fnic_pbl_mem: a page list held in guest memory for the NIC. */
struct fnic_pbl_mem {
	u32		npages;
	u32		nleaves;
	u8		levels;
	struct page	*dir;		/* levels == 2 */
	struct page	**leaves;
};

/* struct fnic_buf: a ring shared by the driver, librxe and the NIC. */
struct fnic_buf {
	struct kref		ref;	/* creator, mmap entry, each VMA, quarantine */
	void			*vaddr;
	size_t			size;	/* bytes librxe maps */
	struct fnic_pbl_mem	pbl;
	u32			slots;
	u32			log2_elem;
};

struct fnic_mmap_entry {
	struct rdma_user_mmap_entry	rdma;
	struct fnic_buf			*buf;
};

/* struct fnic_qitem: memory the NIC may still use after a lost destroy. */
struct fnic_qitem {
	struct list_head	list;
	struct fnic_buf		*buf;
	struct ib_umem		*umem;
	struct fnic_pbl_mem	pbl;
};

struct fnic_dev {
	struct ib_device	ib;
	struct net_device	*ndev;
	struct list_head	list;		/* fnic_devs */
	u64			instance;
	struct packet_type	ptype;
	bool			ptype_added;
	bool			nic_present;	/* PROBE answered */
	bool			nic_port_active; /* QUERY_PORT / EV_PORT */

	/* control channel */
	spinlock_t		req_lock;
	struct list_head	reqs;
	u32			next_req_id;

	/* OPEN state */
	struct mutex		open_lock;
	bool			opened;
	/*
	 * Loss of our instance by the NIC (see chan.c): state_seq counts
	 * OPEN/CLOSE/loss transitions (req_lock), so that only a request
	 * sent in the current open state can declare a loss; live_epoch
	 * counts losses, and an object created in an older epoch is "lost"
	 * (the NIC holds nothing of it).  lost_work flushes and re-opens.
	 */
	u32			state_seq;
	u32			live_epoch;
	struct work_struct	lost_work;
	struct delayed_work	keepalive;
	bool			dying;		/* fnic_chan_shutdown ran (req_lock) */

	struct falconnic_device_attr nic_attr;
	struct ib_device_attr	attrs;		/* what query_device reports */
	u32			port_max_mtu;	/* IB_MTU_* from QUERY_PORT */
	u32			port_active_mtu; /* IB_MTU_* from QUERY_PORT */

	/* handle allocators (handles are ours, see the uapi) */
	struct ida		pd_ida, mr_ida, cq_ida, qp_ida, srq_ida, ah_ida;
	u32			mr_key_seq;

	/* objects events can name (XA_FLAGS_LOCK_BH) */
	struct xarray		cqs, qps, srqs;

	spinlock_t		quarantine_lock;
	struct list_head	quarantine;

	atomic64_t		counters[FNIC_C_NUM];
};

struct fnic_ucontext {
	struct ib_ucontext	ibuc;
};

struct fnic_pd {
	struct ib_pd	ibpd;
	u32		handle;
	u32		epoch;		/* live_epoch when created (or revived) */
};

struct fnic_mr {
	struct ib_mr		ibmr;
	u32			handle;
	struct ib_umem		*umem;
	struct fnic_pbl_mem	pbl;
	/* fast-registration MRs (alloc_mr): pbl is the page list map_mr_sg fills */
	bool			fast;
	u32			npages;		/* pages mapped by the last map_mr_sg */
};

struct fnic_cq {
	struct ib_cq		ibcq;
	u32			handle;
	struct fnic_buf		*buf;
	struct rdma_user_mmap_entry *entry;	/* user CQs */
	bool			kernel;		/* polled by poll_cq, not librxe */
	spinlock_t		lock;		/* kernel CQs: poll_cq, watchdog */
	struct delayed_work	watch;		/* kernel CQs: see kverbs.c */
	u32			kqps;		/* kernel QPs using it (lock) */
	bool			watch_on;	/* (lock) */
	bool			arm_failed;	/* (lock) */
	bool			arm_word;	/* kernel CQs: armed via the ring (uapi) */
	struct work_struct	arm_work;	/* kernel CQs without arm word */
	u32			arm_flags;	/* for arm_work (lock) */
	u32			epoch;		/* live_epoch when created (lock) */
};

/*
 * struct fnic_db: the doorbell of one ring.  It is rung after WQEs are in
 * the ring, so it must reach the NIC: a frame the netdev cannot take now
 * (queue full, no memory) is sent again from delayed work until it goes
 * out or the ring's owner is destroyed.
 */
struct fnic_db {
	struct delayed_work	work;
	struct fnic_dev		*fd;
	struct fnic_buf		*ring;
	u32			handle;
	u16			opcode;
};

struct fnic_srq {
	struct ib_srq		ibsrq;
	u32			handle;
	struct fnic_db		db;
	u32			limit;
	struct fnic_buf		*buf;
	struct rdma_user_mmap_entry *entry;
};

struct fnic_qp {
	struct ib_qp		ibqp;
	u32			handle;
	enum ib_qp_state	state;
	struct ib_qp_cap	cap;
	u8			sq_sig_all;
	struct fnic_buf		*sq, *rq;
	struct rdma_user_mmap_entry *sq_entry, *rq_entry;
	struct fnic_db		sq_db, rq_db;
	struct mutex		lock;	/* serializes modify/query */

	/* kernel QPs (ib_mad's GSI QP, kernel UD QPs): rings only we see */
	bool			kernel;
	u32			sq_max_sge, rq_max_sge;
	spinlock_t		sq_lock, rq_lock;
	struct fnic_cq		*kcq[2];	/* send and receive CQ */

	/* loss of the instance (see chan.c) */
	u32			epoch;		/* live_epoch when created (sq_lock) */
	bool			reviving;	/* GSI being re-created (sq_lock) */
	bool			lost_reported;	/* QP_FATAL dispatched */
	u32			qkey;		/* last set, to re-create the GSI QP */
	u16			pkey_index;
	u32			sq_psn;
};

/* A user AH lives in the NIC (handle = ah_num); a kernel AH (handle 0) only
 * here: its AV goes inline into each UD WQE (see kverbs.c). */
struct fnic_ah {
	struct ib_ah		ibah;
	u32			handle;
	struct falconnic_av	av;
};

static inline struct fnic_dev *to_fdev(struct ib_device *ib)
{
	return container_of(ib, struct fnic_dev, ib);
}

static inline void fnic_count(struct fnic_dev *fd, enum fnic_counter c)
{
	atomic64_inc(&fd->counters[c]);
}

extern unsigned int fnic_cmd_timeout_ms;
extern const char *const fnic_counter_names[FNIC_C_NUM];

/* chan.c */
void fnic_chan_init(struct fnic_dev *fd);
int fnic_chan_start(struct fnic_dev *fd);
void fnic_chan_stop(struct fnic_dev *fd);
int fnic_cmd(struct fnic_dev *fd, u16 opcode, const void *body, u16 len,
	     void *reply, u16 reply_len);
void fnic_db_init(struct fnic_db *db, struct fnic_dev *fd, u16 opcode,
		  u32 handle, struct fnic_buf *ring);
int fnic_db_ring(struct fnic_db *db);
void fnic_db_kick(struct fnic_db *db);
void fnic_db_fini(struct fnic_db *db);
int fnic_status_errno(u32 status);
int fnic_probe_nic(struct fnic_dev *fd);
int fnic_ensure_open(struct fnic_dev *fd);
void fnic_close_nic(struct fnic_dev *fd);
void fnic_chan_shutdown(struct fnic_dev *fd);

static inline bool fnic_obj_lost(struct fnic_dev *fd, u32 epoch)
{
	return epoch != READ_ONCE(fd->live_epoch);
}

/* queue.c */
int fnic_pbl_alloc(struct fnic_pbl_mem *p, u32 npages);
void fnic_pbl_set(struct fnic_pbl_mem *p, u32 i, u64 gpa);
void fnic_pbl_free(struct fnic_pbl_mem *p);
void fnic_pbl_wire(const struct fnic_pbl_mem *p, struct falconnic_pbl *w);
struct fnic_buf *fnic_buf_alloc(u32 slots, u32 log2_elem);
void fnic_buf_put(struct fnic_buf *buf);
void fnic_buf_wire(const struct fnic_buf *buf, u32 max_sge, u32 max_inline,
		   struct falconnic_ring *w);
int fnic_buf_expose(struct ib_ucontext *uctx, struct fnic_buf *buf,
		    struct rdma_user_mmap_entry **entry, struct mminfo *mi);
void fnic_buf_unexpose(struct rdma_user_mmap_entry *entry);
int fnic_mmap(struct ib_ucontext *uctx, struct vm_area_struct *vma);
void fnic_mmap_free(struct rdma_user_mmap_entry *rentry);
void fnic_quarantine(struct fnic_dev *fd, struct fnic_buf *buf,
		     struct ib_umem *umem, struct fnic_pbl_mem *pbl);
void fnic_quarantine_release(struct fnic_dev *fd);
void fnic_quarantine_leak(struct fnic_dev *fd);

/* verbs.c */
extern const struct ib_device_ops fnic_dev_ops;
bool fnic_destroy_cmd(struct fnic_dev *fd, u16 opcode, u32 handle);
u32 fnic_pd_handle(struct ib_pd *ibpd);
void fnic_fill_attrs(struct fnic_dev *fd);
void fnic_dispatch_event(struct fnic_dev *fd, u16 opcode,
			 const struct falconnic_event *ev);
void fnic_revive_gsi(struct fnic_dev *fd);
int fnic_revive_objs(struct fnic_dev *fd, struct ib_pd *ibpd,
		     struct ib_cq *scq, struct ib_cq *rcq);

/* kverbs.c: kernel consumers (ib_mad, ib_cm, rdma_cm) */
int fnic_kpoll_cq(struct ib_cq *ibcq, int n, struct ib_wc *wc);
int fnic_kpost_send(struct fnic_qp *qp, const struct ib_send_wr *wr,
		    const struct ib_send_wr **bad_wr);
int fnic_kpost_recv(struct fnic_qp *qp, const struct ib_recv_wr *wr,
		    const struct ib_recv_wr **bad_wr);
void fnic_kcq_init(struct fnic_cq *cq);
void fnic_kcq_armed(struct fnic_cq *cq, int err);
void fnic_kcq_fini(struct fnic_cq *cq);
void fnic_kqp_init(struct fnic_qp *qp);
void fnic_kqp_attach(struct fnic_qp *qp, struct ib_cq *scq, struct ib_cq *rcq);
void fnic_kqp_fini(struct fnic_qp *qp);
struct ib_mr *fnic_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
			    u32 max_num_sg);
int fnic_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		   unsigned int *sg_offset);
int fnic_kreq_notify_cq(struct fnic_cq *cq, enum ib_cq_notify_flags flags);
void fnic_kcq_arm_word_init(struct fnic_cq *cq);
void fnic_kqp_flush_lost(struct fnic_qp *qp);
void fnic_kqp_revived(struct fnic_qp *qp, bool ok);

/* main.c */
extern const struct attribute_group fnic_attr_group;
void fnic_dev_release(struct fnic_dev *fd);

#endif /* FALCONNIC_H */
