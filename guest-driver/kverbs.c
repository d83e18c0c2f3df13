// SPDX-License-Identifier: GPL-2.0
/*
 * Kernel consumers' data path: what ib_mad (the GSI QP, QP1), ib_cm and
 * rdma_cm need from a RoCE device.
 *
 * - Rings are the same rxe_queue_buf rings user QPs and CQs use, but only
 *   this driver reads and writes them (never mmapped).
 * - DMA: the device uses virtual DMA (no dma_device), so the "DMA address"
 *   ib_dma_map_* gives ib_mad is the kernel virtual address.  post_send and
 *   post_recv translate it with virt_to_phys (linear-map memory only:
 *   kmalloc'ed buffers are physically contiguous) and put the GPA in the
 *   SGE with FALCONNIC_DMA_LKEY; the NIC accepts that key only on QPs
 *   created with FALCONNIC_QP_F_KERNEL and checks the range against guest
 *   RAM.
 * - Kernel AHs never reach the NIC (ib_cm creates them in atomic context):
 *   the AV is kept in struct fnic_ah and written inline into each UD WQE
 *   (wr.ud.av, ah_num 0), as rxe's own kernel path does.
 * - post_send may run with IRQs disabled (ib_mad holds a spinlock): the
 *   DB_SQ frame is sent from a work item (fnic_db_kick), skipped while the
 *   NIC reports it is still draining the SQ.  Receives posted to a QP in
 *   ERR get a DB_RQ the same way, so the NIC flushes them (ib_drain_rq
 *   waits for that).
 * - RC/UC kernel QPs (NIC with FALCONNIC_CAP_MEM_MGT): WRITE, READ, SEND
 *   (with immediate or invalidate), IB_SEND_INLINE (the data is copied
 *   into the WQE), and the fast-registration work requests: REG_MR names
 *   the NIC's MR handle and the page count map_mr_sg left in the MR's page
 *   list (struct falconnic_reg_wr), LOCAL_INV the key.  map_mr_sg turns
 *   each page's "DMA address" (a kernel virtual address, virtual DMA) into
 *   its GPA with virt_to_phys, refusing addresses outside the linear map.
 * - req_notify_cq of a kernel CQ never sleeps (ib_cq's softirq poller
 *   re-arms from softirq): with FALCONNIC_CAP_ARM_WORD it stores the arm
 *   flags in the CQ ring's arm word (xchg: a full barrier) and then looks
 *   for CQEs already written (IB_CQ_REPORT_MISSED_EVENTS), the uapi's
 *   Dekker pair with the NIC's compare-and-swap.  Without it, an atomic
 *   caller's ARM_CQ goes out from a work item and the CQ watchdog covers
 *   the window.
 * - Loss of the instance (daemon restart, NIC reset; chan.c): the NIC
 *   holds none of our objects any more, so no CQE will ever come for the
 *   work requests in our rings.  The driver becomes the producer of the
 *   lost kernel CQs and completes every outstanding WR of a lost kernel QP
 *   with IB_WC_WR_FLUSH_ERR, in ring order, as the NIC's own flush would
 *   (rxe and mlx5 do the same on a fatal error); WRs posted later to a
 *   lost QP are flushed at once.  nvme-rdma then recovers and ib_cm's DREQ
 *   send completes, so cm_destroy_id does not wait forever.  The GSI QP
 *   is the exception: ib_mad never re-creates QP1 and never reposts a
 *   receive that completed in error, so its receive queue is kept and the
 *   QP (with its PD and CQ) is re-created on the NIC at the next OPEN over
 *   the same rings (fnic_revive_gsi); only its sends are flushed.
 * - poll_cq converts the NIC's ib_uverbs_wc CQEs into struct ib_wc, with
 *   IB_WC_WITH_NETWORK_HDR_TYPE from the byte the NIC puts at
 *   FALCONNIC_WC_NET_TYPE_OFF, so ib_init_ah_attr_from_wc can parse the GRH
 *   area and build the reply AH.
 */
#include <linux/workqueue.h>
#include <rdma/ib_addr.h>
#include "falconnic.h"

static void fnic_kcq_use(struct fnic_cq *cq, bool use);

static void *fnic_slot(struct fnic_buf *buf, u32 i)
{
	return buf->vaddr + sizeof(struct rxe_queue_buf) +
	       ((size_t)(i & (buf->slots - 1)) << buf->log2_elem);
}

/* fnic_ring_room reports whether the producer may publish one more slot. */
static bool fnic_ring_room(struct fnic_buf *buf, u32 prod)
{
	struct rxe_queue_buf *q = buf->vaddr;
	u32 mask = buf->slots - 1;

	return ((prod + 1) & mask) != (smp_load_acquire(&q->consumer_index) & mask);
}

/* fnic_kdma_sge fills a NIC SGE from a kernel consumer's ib_sge. */
static bool fnic_kdma_sge(struct fnic_dev *fd, const struct ib_sge *in,
			  struct rxe_sge *out)
{
	void *va = (void *)(uintptr_t)in->addr;

	if (in->lkey != fd->ib.local_dma_lkey) {
		/* An MR's key (a fast-registration MR): the NIC translates. */
		out->addr = in->addr;
		out->length = in->length;
		out->lkey = in->lkey;
		return true;
	}
	if (in->length) {
		if (!virt_addr_valid(va) ||
		    !virt_addr_valid(va + in->length - 1))
			return false;
		out->addr = virt_to_phys(va);
	} else {
		out->addr = 0;
	}
	out->length = in->length;
	out->lkey = FALCONNIC_DMA_LKEY;
	return true;
}

/* fnic_inline_av writes a kernel AH's address vector as rxe's struct rxe_av. */
static void fnic_inline_av(const struct falconnic_av *av, struct rxe_av *out)
{
	union ib_gid gid;

	memset(out, 0, sizeof(*out));
	out->port_num = av->port_num;
	out->network_type = av->network_type;
	memcpy(out->dmac, av->dmac, ETH_ALEN);
	memcpy(out->grh.dgid.raw, av->dgid, sizeof(av->dgid));
	out->grh.flow_label = le32_to_cpu(av->flow_label);
	out->grh.sgid_index = av->sgid_index;
	out->grh.hop_limit = av->hop_limit;
	out->grh.traffic_class = av->traffic_class;
	memcpy(gid.raw, av->sgid, sizeof(gid.raw));
	rdma_gid2ip((struct sockaddr *)&out->sgid_addr, &gid);
	memcpy(gid.raw, av->dgid, sizeof(gid.raw));
	rdma_gid2ip((struct sockaddr *)&out->dgid_addr, &gid);
}

/* fnic_kinline copies the SGEs' bytes into the WQE (IB_SEND_INLINE). */
static int fnic_kinline(struct fnic_qp *qp, const struct ib_send_wr *wr,
			struct rxe_send_wqe *wqe)
{
	u8 *dst = wqe->dma.inline_data;
	u32 total = 0;
	int i;

	for (i = 0; i < wr->num_sge; i++) {
		const struct ib_sge *sge = &wr->sg_list[i];

		if (sge->length > qp->cap.max_inline_data - total)
			return -EINVAL;
		/* Kernel consumers' addresses are kernel virtual (virtual DMA). */
		memcpy(dst + total, (void *)(uintptr_t)sge->addr, sge->length);
		total += sge->length;
	}
	wqe->dma.length = total;
	wqe->dma.resid = total;
	return 0;
}

/* fnic_kreg writes an IB_WR_REG_MR as struct falconnic_reg_wr. */
static int fnic_kreg(struct fnic_dev *fd, struct fnic_qp *qp,
		     const struct ib_send_wr *wr, struct rxe_send_wqe *wqe)
{
	const struct ib_reg_wr *reg = reg_wr(wr);
	struct falconnic_reg_wr *r = (void *)wqe + FALCONNIC_WQE_REG_OFF;
	struct fnic_mr *mr;

	if (!reg->mr || reg->mr->device != qp->ibqp.device)
		return -EINVAL;
	mr = container_of(reg->mr, struct fnic_mr, ibmr);
	if (!mr->fast || !mr->npages || reg->mr->page_size != PAGE_SIZE)
		return -EINVAL;
	r->mr = cpu_to_le32(mr->handle);
	r->key = cpu_to_le32(reg->key);
	r->access = cpu_to_le32(reg->access & (IB_ACCESS_LOCAL_WRITE |
					       IB_ACCESS_REMOTE_WRITE |
					       IB_ACCESS_REMOTE_READ |
					       IB_ACCESS_REMOTE_ATOMIC));
	r->npages = cpu_to_le32(mr->npages);
	r->iova = cpu_to_le64(reg->mr->iova);
	r->length = cpu_to_le64(reg->mr->length);
	fnic_count(fd, FNIC_C_KREG_MR);
	return 0;
}

static int fnic_kbuild_send(struct fnic_dev *fd, struct fnic_qp *qp,
			    const struct ib_send_wr *wr,
			    struct rxe_send_wqe *wqe)
{
	bool ud = qp->ibqp.qp_type == IB_QPT_UD || qp->ibqp.qp_type == IB_QPT_GSI;
	bool rc = qp->ibqp.qp_type == IB_QPT_RC;
	u32 total = 0;
	int i;

	if (wr->num_sge < 0 || wr->num_sge > qp->sq_max_sge)
		return -EINVAL;
	switch (wr->opcode) {
	case IB_WR_SEND:
	case IB_WR_SEND_WITH_IMM:
		break;
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		if (ud)
			return -EINVAL;
		break;
	case IB_WR_RDMA_READ:
	case IB_WR_SEND_WITH_INV:
		if (!rc)
			return -EINVAL;
		break;
	case IB_WR_LOCAL_INV:
	case IB_WR_REG_MR:
		if (ud)
			return -EINVAL;
		break;
	default:
		return -EINVAL;
	}
	memset(wqe, 0, sizeof(*wqe));
	wqe->wr.wr_id = wr->wr_id;
	wqe->wr.opcode = wr->opcode;
	wqe->wr.send_flags = wr->send_flags &
			     (IB_SEND_FENCE | IB_SEND_SIGNALED | IB_SEND_SOLICITED);
	switch (wr->opcode) {
	case IB_WR_SEND_WITH_IMM:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		wqe->wr.ex.imm_data = (__force __u32)wr->ex.imm_data;
		break;
	case IB_WR_SEND_WITH_INV:
		wqe->wr.ex.invalidate_rkey = wr->ex.invalidate_rkey;
		break;
	case IB_WR_LOCAL_INV:
		wqe->wr.ex.invalidate_rkey = wr->ex.invalidate_rkey;
		fnic_count(fd, FNIC_C_KLOCAL_INV);
		return 0;
	case IB_WR_REG_MR:
		return fnic_kreg(fd, qp, wr, wqe);
	default:
		break;
	}
	switch (wr->opcode) {
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
	case IB_WR_RDMA_READ:
		wqe->wr.wr.rdma.remote_addr = rdma_wr(wr)->remote_addr;
		wqe->wr.wr.rdma.rkey = rdma_wr(wr)->rkey;
		break;
	default:
		break;
	}
	if (ud) {
		const struct ib_ud_wr *udw = ud_wr(wr);
		struct fnic_ah *ah;

		if (!udw->ah)
			return -EINVAL;
		ah = container_of(udw->ah, struct fnic_ah, ibah);
		wqe->wr.wr.ud.remote_qpn = udw->remote_qpn;
		wqe->wr.wr.ud.remote_qkey = udw->remote_qkey;
		wqe->wr.wr.ud.pkey_index = udw->pkey_index;
		if (ah->handle)
			wqe->wr.wr.ud.ah_num = ah->handle;
		else
			fnic_inline_av(&ah->av, &wqe->wr.wr.ud.av);
	}
	if ((wr->send_flags & IB_SEND_INLINE) && wr->opcode != IB_WR_RDMA_READ) {
		wqe->wr.send_flags |= IB_SEND_INLINE;
		return fnic_kinline(qp, wr, wqe);
	}
	for (i = 0; i < wr->num_sge; i++) {
		if (!fnic_kdma_sge(fd, &wr->sg_list[i], &wqe->dma.sge[i]))
			return -EINVAL;
		total += wr->sg_list[i].length;
	}
	wqe->dma.length = total;
	wqe->dma.resid = total;
	wqe->dma.num_sge = wr->num_sge;
	return 0;
}

/* ---- completing the work of a lost instance ---- */

/* fnic_flush_wc_opcode is the completion opcode of a send WQE's opcode. */
static u32 fnic_flush_wc_opcode(u32 wr_opcode)
{
	switch (wr_opcode) {
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		return IB_WC_RDMA_WRITE;
	case IB_WR_RDMA_READ:
		return IB_WC_RDMA_READ;
	case IB_WR_LOCAL_INV:
		return IB_WC_LOCAL_INV;
	case IB_WR_REG_MR:
		return IB_WC_REG_MR;
	default:
		return IB_WC_SEND;
	}
}

/*
 * fnic_kcq_flush_cqe writes one flush-error CQE into a kernel CQ that the
 * NIC no longer owns (its epoch is lost); false when it could not.
 */
static bool fnic_kcq_flush_cqe(struct fnic_dev *fd, struct fnic_cq *cq,
			       u64 wr_id, u32 opcode, u32 qpn)
{
	struct rxe_queue_buf *q = cq->buf->vaddr;
	u32 mask = cq->buf->slots - 1, prod;
	struct ib_uverbs_wc *u;
	unsigned long flags;
	bool ok = false;

	spin_lock_irqsave(&cq->lock, flags);
	if (!fnic_obj_lost(fd, cq->epoch)) {
		/* Re-created on the NIC (shared with the GSI QP): not ours to write. */
		fnic_count(fd, FNIC_C_KFLUSH_CQ_NIC);
		goto out;
	}
	prod = READ_ONCE(q->producer_index) & mask;
	if (((prod + 1) & mask) == (READ_ONCE(q->consumer_index) & mask)) {
		fnic_count(fd, FNIC_C_KFLUSH_CQ_FULL);
		goto out;
	}
	u = fnic_slot(cq->buf, prod);
	memset(u, 0, sizeof(*u));
	u->wr_id = wr_id;
	u->status = IB_WC_WR_FLUSH_ERR;
	u->opcode = opcode;
	u->qp_num = qpn;
	smp_store_release(&q->producer_index, (prod + 1) & mask);
	fnic_count(fd, FNIC_C_KFLUSH_WR);
	ok = true;
out:
	spin_unlock_irqrestore(&cq->lock, flags);
	return ok;
}

/*
 * fnic_kcq_flush_notify calls a CQ's completion handler after we wrote
 * CQEs into it, if the consumer armed it (the NIC would have raised the
 * event); an unarmed consumer polls on its own, and the CQ watchdog covers
 * the rest.
 */
static void fnic_kcq_flush_notify(struct fnic_cq *cq)
{
	if (!cq || !cq->ibcq.comp_handler)
		return;
	if (cq->arm_word) {
		u32 *word = cq->buf->vaddr + FALCONNIC_RING_CQ_ARM_OFF;

		if (!xchg(word, 0))
			return;
	}
	cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
}

/* fnic_kflush_sq completes [consumer, producer) of the SQ (sq_lock held). */
static void fnic_kflush_sq(struct fnic_dev *fd, struct fnic_qp *qp)
{
	struct rxe_queue_buf *q = qp->sq->vaddr;
	u32 mask = qp->sq->slots - 1;
	u32 cons = READ_ONCE(q->consumer_index) & mask;
	u32 prod = READ_ONCE(q->producer_index) & mask;

	for (; cons != prod; cons = (cons + 1) & mask) {
		struct rxe_send_wqe *wqe = fnic_slot(qp->sq, cons);

		fnic_kcq_flush_cqe(fd, qp->kcq[0], wqe->wr.wr_id,
				   fnic_flush_wc_opcode(wqe->wr.opcode),
				   qp->handle);
	}
	smp_store_release(&q->consumer_index, prod);
}

/* fnic_kflush_rq completes [consumer, producer) of the RQ (rq_lock held). */
static void fnic_kflush_rq(struct fnic_dev *fd, struct fnic_qp *qp)
{
	struct rxe_queue_buf *q = qp->rq->vaddr;
	u32 mask = qp->rq->slots - 1;
	u32 cons = READ_ONCE(q->consumer_index) & mask;
	u32 prod = READ_ONCE(q->producer_index) & mask;

	for (; cons != prod; cons = (cons + 1) & mask) {
		struct rxe_recv_wqe *wqe = fnic_slot(qp->rq, cons);

		fnic_kcq_flush_cqe(fd, qp->kcq[1], wqe->wr_id, IB_WC_RECV,
				   qp->handle);
	}
	smp_store_release(&q->consumer_index, prod);
}

/* fnic_kqp_sq_lost: is the SQ's work ours to flush? (sq_lock held) */
static bool fnic_kqp_sq_lost(struct fnic_dev *fd, struct fnic_qp *qp)
{
	return fnic_obj_lost(fd, qp->epoch) && !qp->reviving;
}

/* fnic_kqp_rq_lost: is the RQ's work ours to flush? The GSI QP keeps it. */
static bool fnic_kqp_rq_lost(struct fnic_dev *fd, struct fnic_qp *qp)
{
	return qp->rq && qp->ibqp.qp_type != IB_QPT_GSI &&
	       fnic_obj_lost(fd, READ_ONCE(qp->epoch));
}

/*
 * fnic_kqp_flush_lost completes the outstanding work of a lost kernel QP
 * (lost_work, under the QP table's lock, so the QP and its CQs live).
 */
void fnic_kqp_flush_lost(struct fnic_qp *qp)
{
	struct fnic_dev *fd = to_fdev(qp->ibqp.device);
	unsigned long flags;

	spin_lock_irqsave(&qp->sq_lock, flags);
	if (fnic_kqp_sq_lost(fd, qp))
		fnic_kflush_sq(fd, qp);
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	if (fnic_kqp_rq_lost(fd, qp)) {
		spin_lock_irqsave(&qp->rq_lock, flags);
		fnic_kflush_rq(fd, qp);
		spin_unlock_irqrestore(&qp->rq_lock, flags);
	}
	fnic_kcq_flush_notify(qp->kcq[0]);
	if (qp->kcq[1] != qp->kcq[0])
		fnic_kcq_flush_notify(qp->kcq[1]);
}

/*
 * fnic_kqp_revived ends a GSI QP's re-creation: ok, the NIC runs it again
 * (sends posted meanwhile wait in the SQ: ring the doorbell); not ok, its
 * sends are flushed as a lost QP's are.
 */
void fnic_kqp_revived(struct fnic_qp *qp, bool ok)
{
	struct fnic_dev *fd = to_fdev(qp->ibqp.device);
	struct rxe_queue_buf *q = qp->sq->vaddr;
	unsigned long flags;
	bool kick = false;

	spin_lock_irqsave(&qp->sq_lock, flags);
	qp->reviving = false;
	if (ok) {
		WRITE_ONCE(qp->epoch, READ_ONCE(fd->live_epoch));
		kick = (READ_ONCE(q->producer_index) & (qp->sq->slots - 1)) !=
		       (READ_ONCE(q->consumer_index) & (qp->sq->slots - 1));
	} else if (fnic_kqp_sq_lost(fd, qp)) {
		fnic_kflush_sq(fd, qp);
	}
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	if (kick)
		fnic_db_kick(&qp->sq_db);
	else if (!ok)
		fnic_kcq_flush_notify(qp->kcq[0]);
}

int fnic_kpost_send(struct fnic_qp *qp, const struct ib_send_wr *wr,
		    const struct ib_send_wr **bad_wr)
{
	struct fnic_dev *fd = to_fdev(qp->ibqp.device);
	struct rxe_queue_buf *q = qp->sq->vaddr;
	u32 *polling = qp->sq->vaddr + FALCONNIC_RING_NIC_POLLING_OFF;
	unsigned long flags;
	u32 prod, mask = qp->sq->slots - 1;
	bool posted = false, flushed = false, held = false;
	int err = 0;

	if (fnic_obj_lost(fd, READ_ONCE(qp->epoch)) && !READ_ONCE(qp->reviving) &&
	    !fnic_obj_lost(fd, READ_ONCE(qp->kcq[0]->epoch))) {
		/* Lost QP on a CQ the NIC runs again: no flush CQE can be written. */
		*bad_wr = wr;
		return -EIO;
	}
	spin_lock_irqsave(&qp->sq_lock, flags);
	prod = READ_ONCE(q->producer_index);
	for (; wr; wr = wr->next) {
		if (!fnic_ring_room(qp->sq, prod)) {
			fnic_count(fd, FNIC_C_KPOST_FULL);
			err = -ENOMEM;
			break;
		}
		err = fnic_kbuild_send(fd, qp, wr, fnic_slot(qp->sq, prod));
		if (err) {
			fnic_count(fd, FNIC_C_KPOST_BAD_WR);
			break;
		}
		prod = (prod + 1) & mask;
		smp_store_release(&q->producer_index, prod);
		fnic_count(fd, FNIC_C_KPOST_SEND);
		posted = true;
	}
	if (posted && fnic_obj_lost(fd, qp->epoch)) {
		/* No NIC runs this QP: flush (in ring order), or keep for the revived GSI QP. */
		if (qp->reviving) {
			held = true;
		} else {
			fnic_kflush_sq(fd, qp);
			flushed = true;
		}
		posted = false;
	}
	spin_unlock_irqrestore(&qp->sq_lock, flags);
	if (err)
		*bad_wr = wr;
	if (flushed)
		fnic_kcq_flush_notify(qp->kcq[0]);
	if (held)
		return err;
	if (posted) {
		/* Our producer store, then the NIC's flag (see the uapi). */
		smp_mb();
		if (READ_ONCE(*polling))
			fnic_count(fd, FNIC_C_DOORBELL_SUPPRESSED);
		else
			fnic_db_kick(&qp->sq_db);
	}
	return err;
}

int fnic_kpost_recv(struct fnic_qp *qp, const struct ib_recv_wr *wr,
		    const struct ib_recv_wr **bad_wr)
{
	struct fnic_dev *fd = to_fdev(qp->ibqp.device);
	struct rxe_queue_buf *q = qp->rq->vaddr;
	unsigned long flags;
	u32 prod, mask = qp->rq->slots - 1;
	int err = 0;

	if (fnic_kqp_rq_lost(fd, qp) &&
	    !fnic_obj_lost(fd, READ_ONCE(qp->kcq[1]->epoch))) {
		*bad_wr = wr;
		return -EIO;	/* see fnic_kpost_send */
	}
	spin_lock_irqsave(&qp->rq_lock, flags);
	prod = READ_ONCE(q->producer_index);
	for (; wr; wr = wr->next) {
		struct rxe_recv_wqe *wqe = fnic_slot(qp->rq, prod);
		u32 total = 0;
		int i;

		if (!fnic_ring_room(qp->rq, prod)) {
			fnic_count(fd, FNIC_C_KPOST_FULL);
			err = -ENOMEM;
			break;
		}
		if (wr->num_sge < 0 || wr->num_sge > qp->rq_max_sge) {
			fnic_count(fd, FNIC_C_KPOST_BAD_WR);
			err = -EINVAL;
			break;
		}
		memset(wqe, 0, sizeof(*wqe));
		wqe->wr_id = wr->wr_id;
		for (i = 0; i < wr->num_sge; i++) {
			if (!fnic_kdma_sge(fd, &wr->sg_list[i], &wqe->dma.sge[i])) {
				err = -EINVAL;
				break;
			}
			total += wr->sg_list[i].length;
		}
		if (err) {
			fnic_count(fd, FNIC_C_KPOST_BAD_WR);
			break;
		}
		wqe->dma.length = total;
		wqe->dma.resid = total;
		wqe->dma.num_sge = wr->num_sge;
		prod = (prod + 1) & mask;
		/* The NIC reads the producer index when a message arrives. */
		smp_store_release(&q->producer_index, prod);
		fnic_count(fd, FNIC_C_KPOST_RECV);
	}
	if (fnic_kqp_rq_lost(fd, qp)) {
		fnic_kflush_rq(fd, qp);
		spin_unlock_irqrestore(&qp->rq_lock, flags);
		if (err)
			*bad_wr = wr;
		fnic_kcq_flush_notify(qp->kcq[1]);
		return err;
	}
	spin_unlock_irqrestore(&qp->rq_lock, flags);
	if (err)
		*bad_wr = wr;
	/* In ERR no message arrives: the NIC flushes on a DB_RQ. */
	if (READ_ONCE(qp->state) == IB_QPS_ERR && qp->rq)
		fnic_db_kick(&qp->rq_db);
	return err;
}

void fnic_kqp_init(struct fnic_qp *qp)
{
	qp->kernel = true;
	spin_lock_init(&qp->sq_lock);
	spin_lock_init(&qp->rq_lock);
}

void fnic_kqp_fini(struct fnic_qp *qp)
{
	if (!qp->kernel)
		return;
	fnic_kcq_use(qp->kcq[0], false);
	fnic_kcq_use(qp->kcq[1], false);
	qp->kcq[0] = qp->kcq[1] = NULL;
}

/*
 * Kernel CQ watchdog.  ib_mad polls QP1's CQ only when an event says so; an
 * EV_CQ_COMP frame lost on the netdev's RX path, or an ARM_CQ that timed out
 * or could not be sent, would leave CQEs that no one polls and stop every
 * MAD (and so rdma_cm) for good.  So once the consumer has armed the CQ, a
 * delayed work checks it every FNIC_KCQ_WATCH_MS: CQEs present, or an arm
 * that failed, make it call the completion handler (the consumer polls and
 * re-arms).  A spurious call costs one empty poll.
 *
 * It runs only while kernel QPs use the CQ: the last one's destroy stops it
 * and waits for it, so it never calls the handler after consumers destroy
 * their QPs (ib_free_cq cancels the consumer's poll work after that and
 * before destroy_cq).
 */
#define FNIC_KCQ_WATCH_MS	250

static bool fnic_kcq_pending(struct fnic_cq *cq)
{
	struct rxe_queue_buf *q = cq->buf->vaddr;
	u32 mask = cq->buf->slots - 1;

	return (smp_load_acquire(&q->producer_index) & mask) !=
	       (READ_ONCE(q->consumer_index) & mask);
}

static void fnic_kcq_watch(struct work_struct *w)
{
	struct fnic_cq *cq = container_of(to_delayed_work(w), struct fnic_cq,
					  watch);
	unsigned long flags;
	bool failed;

	spin_lock_irqsave(&cq->lock, flags);
	failed = cq->arm_failed;
	cq->arm_failed = false;
	if (!cq->kqps) {
		cq->watch_on = false;
		spin_unlock_irqrestore(&cq->lock, flags);
		return;
	}
	spin_unlock_irqrestore(&cq->lock, flags);

	if ((failed || fnic_kcq_pending(cq)) && cq->ibcq.comp_handler) {
		if (!failed)
			fnic_count(to_fdev(cq->ibcq.device), FNIC_C_KCQ_WATCH_POLL);
		cq->ibcq.comp_handler(&cq->ibcq, cq->ibcq.cq_context);
	}

	spin_lock_irqsave(&cq->lock, flags);
	if (cq->kqps)
		queue_delayed_work(system_wq, &cq->watch,
				   msecs_to_jiffies(FNIC_KCQ_WATCH_MS));
	else
		cq->watch_on = false;
	spin_unlock_irqrestore(&cq->lock, flags);
}

static void fnic_kcq_arm_work(struct work_struct *w);

void fnic_kcq_init(struct fnic_cq *cq)
{
	INIT_DELAYED_WORK(&cq->watch, fnic_kcq_watch);
	INIT_WORK(&cq->arm_work, fnic_kcq_arm_work);
}

/*
 * fnic_kcq_armed runs after each req_notify_cq of a kernel CQ; the first
 * one (the consumer's handler is set up by then) starts the watchdog.
 */
void fnic_kcq_armed(struct fnic_cq *cq, int err)
{
	unsigned long flags;

	if (err)
		fnic_count(to_fdev(cq->ibcq.device), FNIC_C_KARM_RETRY);
	spin_lock_irqsave(&cq->lock, flags);
	if (err)
		cq->arm_failed = true;
	if (cq->kqps && (err || !cq->watch_on)) {
		mod_delayed_work(system_wq, &cq->watch,
				 msecs_to_jiffies(err ? 10 : FNIC_KCQ_WATCH_MS));
		cq->watch_on = true;
	}
	spin_unlock_irqrestore(&cq->lock, flags);
}

void fnic_kcq_fini(struct fnic_cq *cq)
{
	cancel_work_sync(&cq->arm_work);
	cancel_delayed_work_sync(&cq->watch);
}

/* fnic_kcq_use counts a kernel QP on cq; the last one stops the watchdog. */
static void fnic_kcq_use(struct fnic_cq *cq, bool use)
{
	unsigned long flags;
	bool stop;

	if (!cq || !cq->kernel)
		return;
	spin_lock_irqsave(&cq->lock, flags);
	if (use)
		cq->kqps++;
	else if (cq->kqps)
		cq->kqps--;
	stop = !cq->kqps;
	if (stop)
		cq->watch_on = false;
	spin_unlock_irqrestore(&cq->lock, flags);
	if (stop)
		cancel_delayed_work_sync(&cq->watch);
}

void fnic_kqp_attach(struct fnic_qp *qp, struct ib_cq *scq, struct ib_cq *rcq)
{
	qp->kcq[0] = container_of(scq, struct fnic_cq, ibcq);
	qp->kcq[1] = container_of(rcq, struct fnic_cq, ibcq);
	fnic_kcq_use(qp->kcq[0], true);
	fnic_kcq_use(qp->kcq[1], true);
}

/* ib_uverbs_wc flags the NIC writes that mean the same in struct ib_wc. */
#define FNIC_WC_FLAGS (IB_WC_GRH | IB_WC_WITH_IMM | IB_WC_WITH_INVALIDATE)

static void fnic_wc_convert(struct fnic_dev *fd, const struct ib_uverbs_wc *u,
			    struct ib_wc *wc)
{
	const u8 *raw = (const u8 *)u;
	struct fnic_qp *qp;

	memset(wc, 0, sizeof(*wc));
	wc->wr_id = u->wr_id;	/* also wr_cqe: the same union */
	wc->status = u->status;
	wc->opcode = u->opcode;
	wc->vendor_err = u->vendor_err;
	wc->byte_len = u->byte_len;
	wc->ex.imm_data = (__force __be32)u->ex.imm_data;
	wc->src_qp = u->src_qp;
	wc->wc_flags = u->wc_flags & FNIC_WC_FLAGS;
	wc->pkey_index = u->pkey_index;
	wc->port_num = 1;
	switch (raw[FALCONNIC_WC_NET_TYPE_OFF]) {
	case FALCONNIC_NET_IPV4:
		wc->network_hdr_type = RDMA_NETWORK_IPV4;
		wc->wc_flags |= IB_WC_WITH_NETWORK_HDR_TYPE;
		break;
	case FALCONNIC_NET_IPV6:
		wc->network_hdr_type = RDMA_NETWORK_IPV6;
		wc->wc_flags |= IB_WC_WITH_NETWORK_HDR_TYPE;
		break;
	}
	/* The QP outlives its CQEs: consumers destroy QPs before their CQs. */
	qp = xa_load(&fd->qps, u->qp_num);
	wc->qp = qp ? &qp->ibqp : NULL;
}

int fnic_kpoll_cq(struct ib_cq *ibcq, int n, struct ib_wc *wc)
{
	struct fnic_dev *fd = to_fdev(ibcq->device);
	struct fnic_cq *cq = container_of(ibcq, struct fnic_cq, ibcq);
	struct rxe_queue_buf *q = cq->buf->vaddr;
	u32 mask = cq->buf->slots - 1, cons;
	unsigned long flags;
	int got = 0;

	spin_lock_irqsave(&cq->lock, flags);
	cons = READ_ONCE(q->consumer_index);
	while (got < n &&
	       (cons & mask) != (smp_load_acquire(&q->producer_index) & mask)) {
		fnic_wc_convert(fd, fnic_slot(cq->buf, cons), &wc[got++]);
		cons = (cons + 1) & mask;
	}
	/* Slots are free for the NIC only after we copied them out. */
	smp_store_release(&q->consumer_index, cons);
	spin_unlock_irqrestore(&cq->lock, flags);
	if (got)
		atomic64_add(got, &fd->counters[FNIC_C_KPOLL_CQE]);
	return got;
}

/* ---- arming kernel CQs without sleeping ---- */

/*
 * fnic_kcq_arm_word_init switches a new kernel CQ to the ring's arm word
 * when the NIC offers it (process context, at create_cq).
 */
void fnic_kcq_arm_word_init(struct fnic_cq *cq)
{
	struct fnic_dev *fd = to_fdev(cq->ibcq.device);
	struct falconnic_arm_cq req = {
		.cq = cpu_to_le32(cq->handle),
		.flags = cpu_to_le32(FALCONNIC_ARM_WORD),
	};

	if (!(le32_to_cpu(fd->nic_attr.cap_flags) & FALCONNIC_CAP_ARM_WORD))
		return;
	if (!fnic_cmd(fd, FALCONNIC_OP_ARM_CQ, &req, sizeof(req), NULL, 0))
		cq->arm_word = true;
}

static u32 fnic_arm_flags(enum ib_cq_notify_flags flags)
{
	return (flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED ?
	       FALCONNIC_ARM_SOLICITED : FALCONNIC_ARM_NEXT;
}

static void fnic_kcq_arm_work(struct work_struct *w)
{
	struct fnic_cq *cq = container_of(w, struct fnic_cq, arm_work);
	struct falconnic_arm_cq req = { .cq = cpu_to_le32(cq->handle) };
	unsigned long flags;
	int err;

	spin_lock_irqsave(&cq->lock, flags);
	req.flags = cpu_to_le32(cq->arm_flags);
	spin_unlock_irqrestore(&cq->lock, flags);
	err = fnic_cmd(to_fdev(cq->ibcq.device), FALCONNIC_OP_ARM_CQ, &req,
		       sizeof(req), NULL, 0);
	/* A failed arm is retried by the watchdog, never reported. */
	fnic_kcq_armed(cq, err);
}

static bool fnic_kcq_has_cqes(struct fnic_cq *cq)
{
	struct rxe_queue_buf *q = cq->buf->vaddr;
	u32 mask = cq->buf->slots - 1;

	return (smp_load_acquire(&q->producer_index) & mask) !=
	       (READ_ONCE(q->consumer_index) & mask);
}

/*
 * fnic_kreq_notify_cq arms a kernel CQ from any context (softirq included)
 * and reports CQEs written before the arm took effect when asked to.
 */
int fnic_kreq_notify_cq(struct fnic_cq *cq, enum ib_cq_notify_flags flags)
{
	struct fnic_dev *fd = to_fdev(cq->ibcq.device);
	u32 arm = fnic_arm_flags(flags);
	unsigned long irq;
	int err = 0;

	if (cq->arm_word) {
		u32 *word = cq->buf->vaddr + FALCONNIC_RING_CQ_ARM_OFF;

		/* xchg is a full barrier: our store, then the producer index. */
		xchg(word, cpu_to_le32(arm));
		fnic_count(fd, FNIC_C_KARM_WORD);
	} else if (in_task() && !in_atomic() && !irqs_disabled()) {
		struct falconnic_arm_cq req = {
			.cq = cpu_to_le32(cq->handle),
			.flags = cpu_to_le32(arm),
		};

		err = fnic_cmd(fd, FALCONNIC_OP_ARM_CQ, &req, sizeof(req),
			       NULL, 0);
	} else {
		spin_lock_irqsave(&cq->lock, irq);
		cq->arm_flags = arm;
		spin_unlock_irqrestore(&cq->lock, irq);
		queue_work(system_highpri_wq, &cq->arm_work);
		fnic_count(fd, FNIC_C_KARM_DEFERRED);
	}
	fnic_kcq_armed(cq, err);
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) && fnic_kcq_has_cqes(cq)) {
		fnic_count(fd, FNIC_C_KARM_MISSED);
		return 1;
	}
	return 0;
}

/* ---- fast-registration MRs ---- */

struct ib_mr *fnic_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
			    u32 max_num_sg)
{
	struct fnic_dev *fd = to_fdev(ibpd->device);
	struct falconnic_alloc_mr req = {};
	struct fnic_mr *mr;
	u32 key;
	int id, err;

	if (type != IB_MR_TYPE_MEM_REG)
		return ERR_PTR(-EOPNOTSUPP);
	if (!(fd->attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS))
		return ERR_PTR(-EOPNOTSUPP);
	if (!max_num_sg || max_num_sg > fd->attrs.max_fast_reg_page_list_len)
		return ERR_PTR(-EINVAL);
	err = fnic_revive_objs(fd, ibpd, NULL, NULL);	/* a PD kept over a loss */
	if (err)
		return ERR_PTR(err);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	err = fnic_pbl_alloc(&mr->pbl, max_num_sg);
	if (err)
		goto free_mr;
	id = ida_alloc_range(&fd->mr_ida, 1, min_t(u32, fd->attrs.max_mr,
						     0xffffffu), GFP_KERNEL);
	if (id < 0) {
		err = id;
		goto free_pbl;
	}
	/* The upper 24 bits are the handle: never 0, never the DMA key. */
	key = (u32)id << 8 | (fd->mr_key_seq++ & 0xff);
	req.mr = cpu_to_le32(id);
	req.pd = cpu_to_le32(fnic_pd_handle(ibpd));
	req.key = cpu_to_le32(key);
	fnic_pbl_wire(&mr->pbl, &req.pbl);
	err = fnic_cmd(fd, FALCONNIC_OP_ALLOC_MR, &req, sizeof(req), NULL, 0);
	if (err) {
		if (err == -ETIMEDOUT &&
		    !fnic_destroy_cmd(fd, FALCONNIC_OP_DEREG_MR, id)) {
			fnic_quarantine(fd, NULL, NULL, &mr->pbl);
			kfree(mr);
			return ERR_PTR(err);
		}
		ida_free(&fd->mr_ida, id);
		goto free_pbl;
	}
	mr->handle = id;
	mr->fast = true;
	mr->ibmr.lkey = key;
	mr->ibmr.rkey = key;
	mr->ibmr.page_size = PAGE_SIZE;
	return &mr->ibmr;
free_pbl:
	fnic_pbl_free(&mr->pbl);
free_mr:
	kfree(mr);
	return ERR_PTR(err);
}

static int fnic_set_page(struct ib_mr *ibmr, u64 addr)
{
	struct fnic_mr *mr = container_of(ibmr, struct fnic_mr, ibmr);
	void *va = (void *)(uintptr_t)addr;

	if (mr->npages >= mr->pbl.npages)
		return -ENOMEM;
	/* Virtual DMA: the address is a kernel virtual one, page aligned. */
	if (!virt_addr_valid(va) || offset_in_page(addr)) {
		fnic_count(to_fdev(ibmr->device), FNIC_C_KMAP_MR_BAD_PAGE);
		return -EINVAL;
	}
	fnic_pbl_set(&mr->pbl, mr->npages++, virt_to_phys(va));
	return 0;
}

int fnic_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg, int sg_nents,
		   unsigned int *sg_offset)
{
	struct fnic_mr *mr = container_of(ibmr, struct fnic_mr, ibmr);

	if (!mr->fast || ibmr->page_size != PAGE_SIZE)
		return -EINVAL;
	mr->npages = 0;
	return ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, fnic_set_page);
}
