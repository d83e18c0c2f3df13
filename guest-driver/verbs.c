// SPDX-License-Identifier: GPL-2.0
/*
 * ib_device ops speaking the Soft-RoCE user ABI (<rdma/rdma_user_rxe.h>) so
 * that stock librxe drives the device.  Every object lives in the NIC; this
 * file turns verbs into control-channel requests and owns the guest memory
 * (rings, page lists, pinned MRs) the NIC reads and writes.
 *
 * Kernel consumers (ib_mad's GSI QP, ib_cm, rdma_cm, and with a NIC that has
 * FALCONNIC_CAP_MEM_MGT nvme-rdma, nvmet-rdma, xprtrdma) get kernel CQs, UD,
 * GSI, RC and UC QPs, AHs and fast-registration MRs; their data path is in
 * kverbs.c.  Kernel SRQs and get_dma_mr are not supported (-EOPNOTSUPP).
 *
 * Handle lifetime: a handle returns to its allocator only when the NIC
 * confirmed the destroy (OK or BAD_HANDLE).  When a destroy is unanswered
 * the handle stays allocated and the object's memory goes to quarantine.
 */
#include <linux/etherdevice.h>
#include <linux/log2.h>
#include <linux/scatterlist.h>
#include <net/addrconf.h>
#include <rdma/ib_addr.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_mad.h>
#include <rdma/uverbs_ioctl.h>
#include "falconnic.h"

/* Limits used when the NIC did not answer PROBE, and hard caps of ours. */
#define FNIC_DEF_MAX_QP		4096
#define FNIC_DEF_MAX_QP_WR	16384
#define FNIC_DEF_MAX_SGE	32
#define FNIC_DEF_MAX_CQ		4096
#define FNIC_DEF_MAX_CQE	65535
#define FNIC_DEF_MAX_MR		65536
#define FNIC_DEF_MAX_PD		4096
#define FNIC_DEF_MAX_RD_ATOM	128
#define FNIC_DEF_MAX_SRQ	1024
#define FNIC_DEF_MAX_AH		4096
#define FNIC_DEF_MAX_INLINE	256
#define FNIC_MAX_MR_SIZE	((u64)FALCONNIC_PBL_ENTRIES * FALCONNIC_PBL_ENTRIES * PAGE_SIZE)
#define FNIC_MAX_SLOTS		(1u << 20)
#define FNIC_MAX_HANDLE		0xffffffu

static u32 fnic_lim(u32 nic, u32 def, u32 cap)
{
	u32 v = nic ? nic : def;

	return min(v, cap);
}

/* fnic_fill_attrs sets fd->attrs from the PROBE reply (or our defaults). */
void fnic_fill_attrs(struct fnic_dev *fd)
{
	const struct falconnic_device_attr *n = &fd->nic_attr;
	struct ib_device_attr *a = &fd->attrs;
	u32 caps = le32_to_cpu(n->cap_flags);
	u64 mr_size = le64_to_cpu(n->max_mr_size);

	if (!fd->nic_present)
		caps = FALCONNIC_CAP_RC | FALCONNIC_CAP_UC | FALCONNIC_CAP_UD |
		       FALCONNIC_CAP_SRQ | FALCONNIC_CAP_ATOMIC |
		       FALCONNIC_CAP_IMM | FALCONNIC_CAP_INLINE;
	memset(a, 0, sizeof(*a));
	a->fw_ver = le64_to_cpu(n->fw_ver);
	addrconf_addr_eui48((unsigned char *)&a->sys_image_guid,
			    fd->ndev->dev_addr);
	a->max_mr_size = mr_size && mr_size < FNIC_MAX_MR_SIZE ? mr_size :
			 FNIC_MAX_MR_SIZE;
	a->page_size_cap = PAGE_SIZE;
	a->vendor_id = le32_to_cpu(n->vendor_id);
	a->vendor_part_id = le32_to_cpu(n->vendor_part_id);
	a->hw_ver = le32_to_cpu(n->hw_ver);
	a->max_qp = fnic_lim(le32_to_cpu(n->max_qp), FNIC_DEF_MAX_QP,
			     FNIC_MAX_HANDLE - FALCONNIC_FIRST_QPN);
	a->max_qp_wr = fnic_lim(le32_to_cpu(n->max_qp_wr), FNIC_DEF_MAX_QP_WR,
				FNIC_MAX_SLOTS - 1);
	a->max_send_sge = fnic_lim(le32_to_cpu(n->max_send_sge),
				   FNIC_DEF_MAX_SGE, 256);
	a->max_recv_sge = fnic_lim(le32_to_cpu(n->max_recv_sge),
				   FNIC_DEF_MAX_SGE, 256);
	a->max_sge_rd = fnic_lim(le32_to_cpu(n->max_sge_rd), FNIC_DEF_MAX_SGE,
				 256);
	a->max_cq = fnic_lim(le32_to_cpu(n->max_cq), FNIC_DEF_MAX_CQ,
			     FNIC_MAX_HANDLE);
	a->max_cqe = fnic_lim(le32_to_cpu(n->max_cqe), FNIC_DEF_MAX_CQE,
			      FNIC_MAX_SLOTS - 1);
	a->max_mr = fnic_lim(le32_to_cpu(n->max_mr), FNIC_DEF_MAX_MR,
			     FNIC_MAX_HANDLE);
	a->max_pd = fnic_lim(le32_to_cpu(n->max_pd), FNIC_DEF_MAX_PD,
			     FNIC_MAX_HANDLE);
	a->max_qp_rd_atom = fnic_lim(le32_to_cpu(n->max_qp_rd_atom),
				     FNIC_DEF_MAX_RD_ATOM, 255);
	a->max_qp_init_rd_atom = fnic_lim(le32_to_cpu(n->max_qp_init_rd_atom),
					  FNIC_DEF_MAX_RD_ATOM, 255);
	a->max_res_rd_atom = a->max_qp * a->max_qp_rd_atom;
	a->atomic_cap = caps & FALCONNIC_CAP_ATOMIC ? IB_ATOMIC_HCA :
			IB_ATOMIC_NONE;
	if (caps & FALCONNIC_CAP_SRQ) {
		a->max_srq = fnic_lim(le32_to_cpu(n->max_srq), FNIC_DEF_MAX_SRQ,
				      FNIC_MAX_HANDLE);
		a->max_srq_wr = fnic_lim(le32_to_cpu(n->max_srq_wr),
					 FNIC_DEF_MAX_QP_WR, FNIC_MAX_SLOTS - 1);
		a->max_srq_sge = fnic_lim(le32_to_cpu(n->max_srq_sge),
					  FNIC_DEF_MAX_SGE, 256);
	}
	a->max_ah = fnic_lim(le32_to_cpu(n->max_ah), FNIC_DEF_MAX_AH,
			     FNIC_MAX_HANDLE);
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	/* local_dma_lkey (FALCONNIC_DMA_LKEY) names guest memory: kverbs.c */
	a->kernel_cap_flags = IBK_LOCAL_DMA_LKEY;
	if ((caps & FALCONNIC_CAP_MEM_MGT) && le32_to_cpu(n->max_fast_reg_pages)) {
		/* alloc_mr/map_mr_sg/IB_WR_REG_MR, LOCAL_INV, SEND_WITH_INV */
		a->device_cap_flags |= IB_DEVICE_MEM_MGT_EXTENSIONS;
		a->max_fast_reg_page_list_len =
			min_t(u32, le32_to_cpu(n->max_fast_reg_pages),
			      FALCONNIC_PBL_ENTRIES * FALCONNIC_PBL_ENTRIES);
	} else {
		caps &= ~FALCONNIC_CAP_MEM_MGT;
	}
	a->max_send_sge = max(a->max_send_sge, 1u);
	/* Inline data needs FALCONNIC_CAP_INLINE; 0 disables it. */
	fd->nic_attr.max_inline_data = cpu_to_le32(caps & FALCONNIC_CAP_INLINE ?
		fnic_lim(le32_to_cpu(n->max_inline_data), FNIC_DEF_MAX_INLINE,
			 4096) : 0);
	fd->nic_attr.cap_flags = cpu_to_le32(caps);
}

static int fnic_query_device(struct ib_device *ibdev, struct ib_device_attr *attr,
			     struct ib_udata *udata)
{
	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;
	*attr = to_fdev(ibdev)->attrs;
	return 0;
}

static int fnic_query_port(struct ib_device *ibdev, u32 port,
			   struct ib_port_attr *attr)
{
	struct fnic_dev *fd = to_fdev(ibdev);
	struct net_device *ndev = fd->ndev;
	bool up = netif_running(ndev) && netif_carrier_ok(ndev) &&
		  fd->nic_present && READ_ONCE(fd->nic_port_active);

	/* attr was zeroed by the core. */
	attr->state = up ? IB_PORT_ACTIVE : IB_PORT_DOWN;
	attr->phys_state = up ? IB_PORT_PHYS_STATE_LINK_UP :
				IB_PORT_PHYS_STATE_DISABLED;
	attr->max_mtu = fd->port_max_mtu ? fd->port_max_mtu : IB_MTU_4096;
	/*
	 * RDMA packets never cross the guest's Ethernet: the NIC segments
	 * them for its own transport.  So the active MTU is the NIC's, not
	 * one derived from the netdev's MTU.
	 */
	attr->active_mtu = fd->port_active_mtu ? fd->port_active_mtu :
						 attr->max_mtu;
	if (attr->active_mtu > attr->max_mtu)
		attr->active_mtu = attr->max_mtu;
	attr->gid_tbl_len = FNIC_GID_TBL_LEN;
	attr->port_cap_flags = IB_PORT_CM_SUP;
	attr->max_msg_sz = 0x80000000;
	attr->pkey_tbl_len = 1;
	attr->ip_gids = true;
	/*
	 * The NIC's link, not virtio-net's (which has no speed, so
	 * ib_get_eth_speed would warn on every query: ib_cm and rdma_cm query
	 * the port for each connection): 4 lanes of 25 Gb/s.
	 */
	attr->active_speed = IB_SPEED_EDR;
	attr->active_width = IB_WIDTH_4X;
	return 0;
}

static int fnic_get_port_immutable(struct ib_device *ibdev, u32 port,
				   struct ib_port_immutable *imm)
{
	struct ib_port_attr attr = {};
	int err;

	err = ib_query_port(ibdev, port, &attr);
	if (err)
		return err;
	imm->pkey_tbl_len = attr.pkey_tbl_len;
	imm->gid_tbl_len = attr.gid_tbl_len;
	/*
	 * RoCEv2 with MADs: ib_mad runs the GSI QP (QP1) on the NIC, so
	 * ib_cm and rdma_cm (perftest -R, rping) work over this port.
	 */
	imm->core_cap_flags = RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
	imm->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

static enum rdma_link_layer fnic_get_link_layer(struct ib_device *ibdev,
						u32 port)
{
	return IB_LINK_LAYER_ETHERNET;
}

static int fnic_query_pkey(struct ib_device *ibdev, u32 port, u16 index,
			   u16 *pkey)
{
	if (index)
		return -EINVAL;
	*pkey = IB_DEFAULT_PKEY_FULL;
	return 0;
}

static int fnic_alloc_ucontext(struct ib_ucontext *uctx, struct ib_udata *udata)
{
	return 0;
}

static void fnic_dealloc_ucontext(struct ib_ucontext *uctx)
{
}

/* fnic_destroy_cmd sends a destroy-type request; true when the NIC let go. */
bool fnic_destroy_cmd(struct fnic_dev *fd, u16 opcode, u32 handle)
{
	struct falconnic_handle_req req = { .handle = cpu_to_le32(handle) };
	int err = fnic_cmd(fd, opcode, &req, sizeof(req), NULL, 0);

	/* -ENODEV (BAD_INSTANCE): the NIC holds nothing of ours (chan.c). */
	if (!err || err == -ENOENT || err == -ENODEV)
		return true;
	ibdev_warn_ratelimited(&fd->ib, "destroy op %#x handle %u: %d\n",
			       opcode, handle, err);
	return false;
}

static int fnic_handle_alloc(struct ida *ida, u32 min, u32 max)
{
	return ida_alloc_range(ida, min, max, GFP_KERNEL);
}

static struct ib_ucontext *fnic_uctx(struct ib_udata *udata)
{
	return &rdma_udata_to_drv_context(udata, struct fnic_ucontext, ibuc)->ibuc;
}

/* ---- PD ---- */

static int fnic_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct fnic_dev *fd = to_fdev(ibpd->device);
	struct fnic_pd *pd = container_of(ibpd, struct fnic_pd, ibpd);
	struct falconnic_handle_req req = {};
	int id, err;

	err = fnic_ensure_open(fd);
	if (err)
		return err;
	id = fnic_handle_alloc(&fd->pd_ida, 1, fd->attrs.max_pd);
	if (id < 0)
		return id;
	req.handle = cpu_to_le32(id);
	pd->epoch = READ_ONCE(fd->live_epoch);
	err = fnic_cmd(fd, FALCONNIC_OP_CREATE_PD, &req, sizeof(req), NULL, 0);
	if (err) {
		if (err != -ETIMEDOUT ||
		    fnic_destroy_cmd(fd, FALCONNIC_OP_DESTROY_PD, id))
			ida_free(&fd->pd_ida, id);
		return err;
	}
	pd->handle = id;
	return 0;
}

static int fnic_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct fnic_dev *fd = to_fdev(ibpd->device);
	struct fnic_pd *pd = container_of(ibpd, struct fnic_pd, ibpd);

	if (fnic_destroy_cmd(fd, FALCONNIC_OP_DESTROY_PD, pd->handle))
		ida_free(&fd->pd_ida, pd->handle);
	return 0;
}

u32 fnic_pd_handle(struct ib_pd *ibpd)
{
	return container_of(ibpd, struct fnic_pd, ibpd)->handle;
}

/* ---- MR ---- */

static struct ib_mr *fnic_get_dma_mr(struct ib_pd *pd, int access)
{
	return ERR_PTR(-EOPNOTSUPP);
}

static struct ib_mr *fnic_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				      u64 iova, int access,
				      struct ib_udata *udata)
{
	struct fnic_dev *fd = to_fdev(ibpd->device);
	struct falconnic_reg_mr req = {};
	struct sg_page_iter piter;
	struct fnic_mr *mr;
	u32 npages, i = 0, key;
	int id, err;

	if (access & ~(0x1f | IB_ACCESS_OPTIONAL))
		return ERR_PTR(-EOPNOTSUPP);
	if (!length || length > fd->attrs.max_mr_size)
		return ERR_PTR(-EINVAL);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->umem = ib_umem_get(ibpd->device, start, length, access);
	if (IS_ERR(mr->umem)) {
		err = PTR_ERR(mr->umem);
		goto free_mr;
	}
	npages = ib_umem_num_pages(mr->umem);
	err = fnic_pbl_alloc(&mr->pbl, npages);
	if (err)
		goto release;
	for_each_sgtable_page(&mr->umem->sgt_append.sgt, &piter, 0) {
		if (i >= npages)
			break;
		fnic_pbl_set(&mr->pbl, i++, page_to_phys(sg_page_iter_page(&piter)));
	}
	if (i != npages) {
		err = -EFAULT;
		goto free_pbl;
	}
	id = fnic_handle_alloc(&fd->mr_ida, 1, min_t(u32, fd->attrs.max_mr,
						     FNIC_MAX_HANDLE));
	if (id < 0) {
		err = id;
		goto free_pbl;
	}
	key = (u32)id << 8 | (fd->mr_key_seq++ & 0xff);
	req.mr = cpu_to_le32(id);
	req.pd = cpu_to_le32(fnic_pd_handle(ibpd));
	req.lkey = cpu_to_le32(key);
	req.rkey = cpu_to_le32(key);
	req.iova = cpu_to_le64(iova);
	req.length = cpu_to_le64(length);
	req.access = cpu_to_le32(access & 0x1f);
	req.first_offset = cpu_to_le32(ib_umem_offset(mr->umem));
	fnic_pbl_wire(&mr->pbl, &req.pbl);
	err = fnic_cmd(fd, FALCONNIC_OP_REG_MR, &req, sizeof(req), NULL, 0);
	if (err) {
		if (err == -ETIMEDOUT &&
		    !fnic_destroy_cmd(fd, FALCONNIC_OP_DEREG_MR, id)) {
			fnic_quarantine(fd, NULL, mr->umem, &mr->pbl);
			kfree(mr);
			return ERR_PTR(err);
		}
		ida_free(&fd->mr_ida, id);
		goto free_pbl;
	}
	mr->handle = id;
	mr->ibmr.lkey = key;
	mr->ibmr.rkey = key;
	mr->ibmr.length = length;
	mr->ibmr.iova = iova;
	mr->ibmr.page_size = PAGE_SIZE;
	return &mr->ibmr;
free_pbl:
	fnic_pbl_free(&mr->pbl);
release:
	ib_umem_release(mr->umem);
free_mr:
	kfree(mr);
	return ERR_PTR(err);
}

static int fnic_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct fnic_dev *fd = to_fdev(ibmr->device);
	struct fnic_mr *mr = container_of(ibmr, struct fnic_mr, ibmr);

	if (fnic_destroy_cmd(fd, FALCONNIC_OP_DEREG_MR, mr->handle)) {
		ida_free(&fd->mr_ida, mr->handle);
		fnic_pbl_free(&mr->pbl);
		ib_umem_release(mr->umem);
	} else {
		fnic_quarantine(fd, NULL, mr->umem, &mr->pbl);
	}
	kfree(mr);
	return 0;
}

/* ---- CQ ---- */

static int fnic_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
			  struct ib_udata *udata)
{
	struct fnic_dev *fd = to_fdev(ibcq->device);
	struct fnic_cq *cq = container_of(ibcq, struct fnic_cq, ibcq);
	struct falconnic_create_cq req = {};
	struct rxe_create_cq_resp resp = {};
	u32 slots;
	int id, err;

	if (attr->flags)
		return -EOPNOTSUPP;
	if (attr->cqe < 1 || attr->cqe > fd->attrs.max_cqe)
		return -EINVAL;
	if (udata && udata->outlen < sizeof(resp))
		return -EINVAL;
	cq->kernel = !udata;
	spin_lock_init(&cq->lock);
	fnic_kcq_init(cq);
	err = fnic_ensure_open(fd);
	if (err)
		return err;
	slots = roundup_pow_of_two(attr->cqe + 1);
	cq->buf = fnic_buf_alloc(slots, order_base_2(sizeof(struct ib_uverbs_wc)));
	if (IS_ERR(cq->buf))
		return PTR_ERR(cq->buf);
	id = fnic_handle_alloc(&fd->cq_ida, 1, fd->attrs.max_cq);
	if (id < 0) {
		err = id;
		goto put;
	}
	req.cq = cpu_to_le32(id);
	req.cqe = cpu_to_le32(slots - 1);
	fnic_buf_wire(cq->buf, 0, 0, &req.ring);
	cq->epoch = READ_ONCE(fd->live_epoch);
	err = fnic_cmd(fd, FALCONNIC_OP_CREATE_CQ, &req, sizeof(req), NULL, 0);
	if (err)
		goto undo_nic;
	cq->handle = id;
	if (cq->kernel)
		fnic_kcq_arm_word_init(cq);
	if (udata) {
		err = fnic_buf_expose(fnic_uctx(udata), cq->buf, &cq->entry,
				      &resp.mi);
		if (err)
			goto destroy;
		err = ib_copy_to_udata(udata, &resp, sizeof(resp));
		if (err)
			goto destroy;
	}
	err = xa_insert_bh(&fd->cqs, id, cq, GFP_KERNEL);
	if (err)
		goto destroy;
	ibcq->cqe = slots - 1;
	return 0;
destroy:
	fnic_buf_unexpose(cq->entry);
	cq->entry = NULL;
	if (fnic_destroy_cmd(fd, FALCONNIC_OP_DESTROY_CQ, id))
		ida_free(&fd->cq_ida, id);
	else
		fnic_quarantine(fd, cq->buf, NULL, NULL);
	goto put;
undo_nic:
	if (err != -ETIMEDOUT || fnic_destroy_cmd(fd, FALCONNIC_OP_DESTROY_CQ, id))
		ida_free(&fd->cq_ida, id);
	else
		fnic_quarantine(fd, cq->buf, NULL, NULL);
put:
	fnic_buf_put(cq->buf);
	cq->buf = NULL;
	return err;
}

static int fnic_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct fnic_dev *fd = to_fdev(ibcq->device);
	struct fnic_cq *cq = container_of(ibcq, struct fnic_cq, ibcq);

	xa_erase_bh(&fd->cqs, cq->handle);	/* no event reaches it after this */
	if (cq->kernel)
		fnic_kcq_fini(cq);
	if (fnic_destroy_cmd(fd, FALCONNIC_OP_DESTROY_CQ, cq->handle))
		ida_free(&fd->cq_ida, cq->handle);
	else
		fnic_quarantine(fd, cq->buf, NULL, NULL);
	fnic_buf_unexpose(cq->entry);
	fnic_buf_put(cq->buf);
	return 0;
}

static int fnic_poll_cq(struct ib_cq *ibcq, int n, struct ib_wc *wc)
{
	if (!container_of(ibcq, struct fnic_cq, ibcq)->kernel)
		return -EOPNOTSUPP;	/* user CQs are polled by librxe */
	return fnic_kpoll_cq(ibcq, n, wc);
}

static bool fnic_ring_empty(struct fnic_buf *buf)
{
	struct rxe_queue_buf *q = buf->vaddr;
	u32 mask = buf->slots - 1;

	return (smp_load_acquire(&q->producer_index) & mask) ==
	       (READ_ONCE(q->consumer_index) & mask);
}

static int fnic_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct fnic_dev *fd = to_fdev(ibcq->device);
	struct fnic_cq *cq = container_of(ibcq, struct fnic_cq, ibcq);
	struct falconnic_arm_cq req = {
		.cq = cpu_to_le32(cq->handle),
		.flags = cpu_to_le32((flags & IB_CQ_SOLICITED_MASK) == IB_CQ_SOLICITED ?
				     FALCONNIC_ARM_SOLICITED : FALCONNIC_ARM_NEXT),
	};
	int err;

	if (cq->kernel)
		return fnic_kreq_notify_cq(cq, flags);	/* never sleeps */
	err = fnic_cmd(fd, FALCONNIC_OP_ARM_CQ, &req, sizeof(req), NULL, 0);
	if (err)
		return err;
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) && !fnic_ring_empty(cq->buf))
		return 1;
	return 0;
}

/* ---- SRQ ---- */

static u32 fnic_recv_log2(u32 max_sge)
{
	return order_base_2(sizeof(struct rxe_recv_wqe) +
			    max_sge * sizeof(struct rxe_sge));
}

static int fnic_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
			   struct ib_udata *udata)
{
	struct fnic_dev *fd = to_fdev(ibsrq->device);
	struct fnic_srq *srq = container_of(ibsrq, struct fnic_srq, ibsrq);
	struct ib_srq_attr *a = &init->attr;
	struct falconnic_create_srq req = {};
	struct rxe_create_srq_resp resp = {};
	u32 slots, sge;
	int id, err;

	if (!udata)
		return -EOPNOTSUPP;
	if (init->srq_type != IB_SRQT_BASIC)
		return -EOPNOTSUPP;
	if (!a->max_wr || a->max_wr > fd->attrs.max_srq_wr ||
	    a->max_sge > fd->attrs.max_srq_sge || a->srq_limit > a->max_wr)
		return -EINVAL;
	if (udata->outlen < sizeof(resp))
		return -EINVAL;
	err = fnic_ensure_open(fd);
	if (err)
		return err;
	sge = max(a->max_sge, 1u);
	slots = roundup_pow_of_two(a->max_wr + 1);
	srq->buf = fnic_buf_alloc(slots, fnic_recv_log2(sge));
	if (IS_ERR(srq->buf))
		return PTR_ERR(srq->buf);
	id = fnic_handle_alloc(&fd->srq_ida, 1, fd->attrs.max_srq);
	if (id < 0) {
		err = id;
		goto put;
	}
	req.srq = cpu_to_le32(id);
	req.pd = cpu_to_le32(fnic_pd_handle(ibsrq->pd));
	req.srq_limit = cpu_to_le32(a->srq_limit);
	fnic_buf_wire(srq->buf, sge, 0, &req.ring);
	err = fnic_cmd(fd, FALCONNIC_OP_CREATE_SRQ, &req, sizeof(req), NULL, 0);
	if (err)
		goto undo_nic;
	srq->handle = id;
	srq->limit = a->srq_limit;
	fnic_db_init(&srq->db, fd, FALCONNIC_OP_DB_SRQ, id, srq->buf);
	resp.srq_num = id;
	err = fnic_buf_expose(fnic_uctx(udata), srq->buf, &srq->entry,
			      &resp.mi);
	if (err)
		goto destroy;
	err = ib_copy_to_udata(udata, &resp, sizeof(resp));
	if (err)
		goto destroy;
	err = xa_insert_bh(&fd->srqs, id, srq, GFP_KERNEL);
	if (err)
		goto destroy;
	a->max_wr = slots - 1;
	a->max_sge = sge;
	return 0;
destroy:
	fnic_buf_unexpose(srq->entry);
	srq->entry = NULL;
	if (fnic_destroy_cmd(fd, FALCONNIC_OP_DESTROY_SRQ, id))
		ida_free(&fd->srq_ida, id);
	else
		fnic_quarantine(fd, srq->buf, NULL, NULL);
	goto put;
undo_nic:
	if (err != -ETIMEDOUT || fnic_destroy_cmd(fd, FALCONNIC_OP_DESTROY_SRQ, id))
		ida_free(&fd->srq_ida, id);
	else
		fnic_quarantine(fd, srq->buf, NULL, NULL);
put:
	fnic_buf_put(srq->buf);
	srq->buf = NULL;
	return err;
}

static int fnic_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
			   enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct fnic_dev *fd = to_fdev(ibsrq->device);
	struct fnic_srq *srq = container_of(ibsrq, struct fnic_srq, ibsrq);
	struct falconnic_srq_attr req = {};
	int err;

	if (mask & IB_SRQ_MAX_WR)
		return -EOPNOTSUPP;	/* resizing a shared ring is not supported */
	if (!(mask & IB_SRQ_LIMIT))
		return 0;
	if (attr->srq_limit >= srq->buf->slots)
		return -EINVAL;
	req.srq = cpu_to_le32(srq->handle);
	req.attr_mask = cpu_to_le32(FALCONNIC_SRQ_LIMIT);
	req.srq_limit = cpu_to_le32(attr->srq_limit);
	err = fnic_cmd(fd, FALCONNIC_OP_MODIFY_SRQ, &req, sizeof(req), NULL, 0);
	if (!err)
		srq->limit = attr->srq_limit;
	return err;
}

static int fnic_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct fnic_dev *fd = to_fdev(ibsrq->device);
	struct fnic_srq *srq = container_of(ibsrq, struct fnic_srq, ibsrq);
	struct falconnic_handle_req req = { .handle = cpu_to_le32(srq->handle) };
	struct falconnic_srq_attr rep;
	int err;

	err = fnic_cmd(fd, FALCONNIC_OP_QUERY_SRQ, &req, sizeof(req), &rep,
		       sizeof(rep));
	if (err)
		return err;
	attr->max_wr = srq->buf->slots - 1;
	attr->max_sge = (1u << srq->buf->log2_elem) > sizeof(struct rxe_recv_wqe) ?
		((1u << srq->buf->log2_elem) - sizeof(struct rxe_recv_wqe)) /
		sizeof(struct rxe_sge) : 0;
	attr->srq_limit = le32_to_cpu(rep.srq_limit);
	return 0;
}

static int fnic_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct fnic_dev *fd = to_fdev(ibsrq->device);
	struct fnic_srq *srq = container_of(ibsrq, struct fnic_srq, ibsrq);

	xa_erase_bh(&fd->srqs, srq->handle);
	fnic_db_fini(&srq->db);
	if (fnic_destroy_cmd(fd, FALCONNIC_OP_DESTROY_SRQ, srq->handle))
		ida_free(&fd->srq_ida, srq->handle);
	else
		fnic_quarantine(fd, srq->buf, NULL, NULL);
	fnic_buf_unexpose(srq->entry);
	fnic_buf_put(srq->buf);
	return 0;
}

static int fnic_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			      const struct ib_recv_wr **bad_wr)
{
	struct fnic_srq *srq = container_of(ibsrq, struct fnic_srq, ibsrq);

	if (wr) {
		*bad_wr = wr;
		return -EOPNOTSUPP;
	}
	return fnic_db_ring(&srq->db);
}

/* ---- AH and address vectors ---- */

static int fnic_av_from_ah(const struct rdma_ah_attr *ah, struct falconnic_av *av)
{
	const struct ib_global_route *grh;

	memset(av, 0, sizeof(*av));
	if (ah->type != RDMA_AH_ATTR_TYPE_ROCE ||
	    !(rdma_ah_get_ah_flags(ah) & IB_AH_GRH))
		return -EINVAL;
	grh = rdma_ah_read_grh(ah);
	if (!grh->sgid_attr)
		return -EINVAL;
	switch (rdma_gid_attr_network_type(grh->sgid_attr)) {
	case RDMA_NETWORK_IPV4:
		av->network_type = RXE_NETWORK_TYPE_IPV4;
		break;
	case RDMA_NETWORK_IPV6:
		av->network_type = RXE_NETWORK_TYPE_IPV6;
		break;
	default:
		return -EINVAL;	/* RoCEv2 only */
	}
	av->port_num = rdma_ah_get_port_num(ah);
	memcpy(av->dmac, ah->roce.dmac, ETH_ALEN);
	av->flow_label = cpu_to_le32(grh->flow_label);
	av->sgid_index = grh->sgid_index;
	av->hop_limit = grh->hop_limit;
	av->traffic_class = grh->traffic_class;
	memcpy(av->sgid, grh->sgid_attr->gid.raw, sizeof(av->sgid));
	memcpy(av->dgid, grh->dgid.raw, sizeof(av->dgid));
	return 0;
}

static void fnic_av_to_ah(struct ib_device *ibdev, const struct falconnic_av *av,
			  struct rdma_ah_attr *ah)
{
	union ib_gid dgid;

	memset(ah, 0, sizeof(*ah));
	ah->type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(ah, av->port_num);
	memcpy(dgid.raw, av->dgid, sizeof(dgid.raw));
	rdma_ah_set_grh(ah, &dgid, le32_to_cpu(av->flow_label), av->sgid_index,
			av->hop_limit, av->traffic_class);
	memcpy(ah->roce.dmac, av->dmac, ETH_ALEN);
}

static int fnic_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
			  struct ib_udata *udata)
{
	struct fnic_dev *fd = to_fdev(ibah->device);
	struct fnic_ah *ah = container_of(ibah, struct fnic_ah, ibah);
	struct falconnic_create_ah req = {};
	struct rxe_create_ah_resp resp = {};
	int id, err;

	err = fnic_av_from_ah(init->ah_attr, &req.av);
	if (err)
		return err;
	if (!udata) {
		/*
		 * A kernel AH (ib_cm creates them in atomic context) stays
		 * here: its AV goes inline into each UD WQE (kverbs.c).
		 */
		ah->handle = 0;
		ah->av = req.av;
		return 0;
	}
	if (!(init->flags & RDMA_CREATE_AH_SLEEPABLE))
		return -EOPNOTSUPP;	/* a request must wait for its reply */
	err = fnic_ensure_open(fd);
	if (err)
		return err;
	id = fnic_handle_alloc(&fd->ah_ida, 1, fd->attrs.max_ah);
	if (id < 0)
		return id;
	req.ah = cpu_to_le32(id);
	req.pd = cpu_to_le32(fnic_pd_handle(ibah->pd));
	err = fnic_cmd(fd, FALCONNIC_OP_CREATE_AH, &req, sizeof(req), NULL, 0);
	if (err) {
		if (err != -ETIMEDOUT ||
		    fnic_destroy_cmd(fd, FALCONNIC_OP_DESTROY_AH, id))
			ida_free(&fd->ah_ida, id);
		return err;
	}
	ah->handle = id;
	ah->av = req.av;
	if (udata && udata->outlen >= sizeof(resp)) {
		resp.ah_num = id;
		err = ib_copy_to_udata(udata, &resp, sizeof(resp));
		if (err) {
			if (fnic_destroy_cmd(fd, FALCONNIC_OP_DESTROY_AH, id))
				ida_free(&fd->ah_ida, id);
			return err;
		}
	}
	return 0;
}

static int fnic_query_ah(struct ib_ah *ibah, struct rdma_ah_attr *attr)
{
	struct fnic_ah *ah = container_of(ibah, struct fnic_ah, ibah);

	fnic_av_to_ah(ibah->device, &ah->av, attr);
	return 0;
}

static int fnic_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	struct fnic_dev *fd = to_fdev(ibah->device);
	struct fnic_ah *ah = container_of(ibah, struct fnic_ah, ibah);

	/*
	 * A destroy that may not sleep cannot wait for the reply: the handle
	 * then stays allocated (the NIC drops it at CLOSE).  An AH names no
	 * guest memory, so nothing needs quarantine.
	 */
	if (ah->handle && (flags & RDMA_DESTROY_AH_SLEEPABLE) &&
	    fnic_destroy_cmd(fd, FALCONNIC_OP_DESTROY_AH, ah->handle))
		ida_free(&fd->ah_ida, ah->handle);
	return 0;
}

/* ---- QP ---- */

static const u8 fnic_qp_types[] = {
	[IB_QPT_GSI] = FALCONNIC_QPT_GSI,
	[IB_QPT_RC] = FALCONNIC_QPT_RC,
	[IB_QPT_UC] = FALCONNIC_QPT_UC,
	[IB_QPT_UD] = FALCONNIC_QPT_UD,
};

/*
 * fnic_qp_forget destroys a QP the NIC may hold; when the NIC does not
 * confirm, the handle stays allocated and the rings go to quarantine.
 */
static void fnic_qp_forget(struct fnic_dev *fd, struct fnic_qp *qp, u32 id)
{
	if (fnic_destroy_cmd(fd, FALCONNIC_OP_DESTROY_QP, id)) {
		if (id != FALCONNIC_GSI_QPN)	/* GSI's handle is fixed */
			ida_free(&fd->qp_ida, id);
		return;
	}
	fnic_quarantine(fd, qp->sq, NULL, NULL);
	if (qp->rq)
		fnic_quarantine(fd, qp->rq, NULL, NULL);
}

static int fnic_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
			  struct ib_udata *udata)
{
	struct fnic_dev *fd = to_fdev(ibqp->device);
	struct fnic_qp *qp = container_of(ibqp, struct fnic_qp, ibqp);
	const struct ib_device_attr *da = &fd->attrs;
	struct ib_qp_cap *cap = &init->cap;
	u32 max_inline = le32_to_cpu(fd->nic_attr.max_inline_data);
	struct falconnic_create_qp req = {};
	struct rxe_create_qp_resp resp = {};
	struct ib_ucontext *uctx;
	u32 wqe, sq_slots, rq_slots = 0, rq_sge = 0;
	int id, err;

	if (init->qp_type >= ARRAY_SIZE(fnic_qp_types) ||
	    !fnic_qp_types[init->qp_type])
		return -EOPNOTSUPP;
	/*
	 * Kernel consumers: UD and GSI always; RC and UC when the NIC runs
	 * kernel work requests (FALCONNIC_CAP_MEM_MGT).  GSI is kernel only.
	 */
	if (!udata && init->qp_type != IB_QPT_UD && init->qp_type != IB_QPT_GSI &&
	    !(le32_to_cpu(fd->nic_attr.cap_flags) & FALCONNIC_CAP_MEM_MGT))
		return -EOPNOTSUPP;
	if (udata && init->qp_type == IB_QPT_GSI)
		return -EINVAL;
	if (init->create_flags)
		return -EOPNOTSUPP;
	/* A queue of 0 WRs is legal (send- or receive-only QP): it gets 1. */
	if (cap->max_send_wr > da->max_qp_wr ||
	    cap->max_send_sge > da->max_send_sge ||
	    cap->max_inline_data > max_inline)
		return -EINVAL;
	if (!init->srq && (cap->max_recv_wr > da->max_qp_wr ||
			   cap->max_recv_sge > da->max_recv_sge))
		return -EINVAL;
	if (udata && udata->outlen < sizeof(resp))
		return -EINVAL;
	if (!udata && init->srq)
		return -EOPNOTSUPP;
	err = fnic_ensure_open(fd);
	if (err)
		return err;
	uctx = udata ? fnic_uctx(udata) : NULL;
	if (!udata) {
		err = fnic_revive_objs(fd, ibqp->pd, init->send_cq, init->recv_cq);
		if (err)
			return err;
	}

	mutex_init(&qp->lock);
	if (!udata)
		fnic_kqp_init(qp);
	qp->state = IB_QPS_RESET;
	/* Send WQE: struct rxe_send_wqe then SGEs or inline data, like rxe. */
	wqe = max_t(u32, cap->max_send_sge * sizeof(struct rxe_sge),
		    cap->max_inline_data);
	cap->max_send_sge = wqe / sizeof(struct rxe_sge);
	cap->max_inline_data = wqe;
	sq_slots = roundup_pow_of_two(max(cap->max_send_wr, 1u) + 1);
	qp->sq = fnic_buf_alloc(sq_slots, order_base_2(sizeof(struct rxe_send_wqe) + wqe));
	if (IS_ERR(qp->sq)) {
		err = PTR_ERR(qp->sq);
		qp->sq = NULL;
		return err;
	}
	if (!init->srq) {
		rq_sge = max(cap->max_recv_sge, 1u);
		rq_slots = roundup_pow_of_two(max(cap->max_recv_wr, 1u) + 1);
		qp->rq = fnic_buf_alloc(rq_slots, fnic_recv_log2(rq_sge));
		if (IS_ERR(qp->rq)) {
			err = PTR_ERR(qp->rq);
			qp->rq = NULL;
			goto put;
		}
	}
	if (init->qp_type == IB_QPT_GSI)
		id = FALCONNIC_GSI_QPN;	/* one GSI QP per port, named QP1 */
	else
		id = fnic_handle_alloc(&fd->qp_ida, FALCONNIC_FIRST_QPN,
				       FALCONNIC_FIRST_QPN + da->max_qp - 1);
	if (id < 0) {
		err = id;
		goto put;
	}
	req.qp = cpu_to_le32(id);
	req.pd = cpu_to_le32(fnic_pd_handle(ibqp->pd));
	req.send_cq = cpu_to_le32(container_of(init->send_cq, struct fnic_cq, ibcq)->handle);
	req.recv_cq = cpu_to_le32(container_of(init->recv_cq, struct fnic_cq, ibcq)->handle);
	if (init->srq)
		req.srq = cpu_to_le32(container_of(init->srq, struct fnic_srq, ibsrq)->handle);
	req.type = fnic_qp_types[init->qp_type];
	req.sq_sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;
	req.flags = udata ? 0 : FALCONNIC_QP_F_KERNEL;
	fnic_buf_wire(qp->sq, cap->max_send_sge, cap->max_inline_data, &req.sq);
	if (qp->rq)
		fnic_buf_wire(qp->rq, rq_sge, 0, &req.rq);
	qp->epoch = READ_ONCE(fd->live_epoch);
	err = fnic_cmd(fd, FALCONNIC_OP_CREATE_QP, &req, sizeof(req), NULL, 0);
	if (err) {
		/* Refused: the NIC holds nothing.  Unanswered: it may. */
		if (err == -ETIMEDOUT)
			fnic_qp_forget(fd, qp, id);
		else if (id != FALCONNIC_GSI_QPN)
			ida_free(&fd->qp_ida, id);
		goto put;
	}
	qp->handle = id;
	ibqp->qp_num = id;
	fnic_db_init(&qp->sq_db, fd, FALCONNIC_OP_DB_SQ, id, qp->sq);
	if (qp->rq)
		fnic_db_init(&qp->rq_db, fd, FALCONNIC_OP_DB_RQ, id, qp->rq);
	if (uctx) {
		err = fnic_buf_expose(uctx, qp->sq, &qp->sq_entry, &resp.sq_mi);
		if (!err && qp->rq)
			err = fnic_buf_expose(uctx, qp->rq, &qp->rq_entry,
					      &resp.rq_mi);
		if (!err)
			err = ib_copy_to_udata(udata, &resp, sizeof(resp));
	}
	if (!err)
		err = xa_insert_bh(&fd->qps, id, qp, GFP_KERNEL);
	if (err) {
		fnic_buf_unexpose(qp->sq_entry);
		fnic_buf_unexpose(qp->rq_entry);
		qp->sq_entry = qp->rq_entry = NULL;
		fnic_qp_forget(fd, qp, id);
		goto put;
	}
	cap->max_send_wr = sq_slots - 1;
	if (qp->rq) {
		cap->max_recv_wr = rq_slots - 1;
		cap->max_recv_sge = rq_sge;
	} else {
		cap->max_recv_wr = 0;
		cap->max_recv_sge = 0;
	}
	qp->cap = *cap;
	qp->sq_sig_all = req.sq_sig_all;
	qp->sq_max_sge = cap->max_send_sge;
	qp->rq_max_sge = cap->max_recv_sge;
	if (qp->kernel)
		fnic_kqp_attach(qp, init->send_cq, init->recv_cq);
	return 0;
put:
	fnic_buf_put(qp->sq);
	fnic_buf_put(qp->rq);
	qp->sq = qp->rq = NULL;
	return err;
}

static int fnic_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct fnic_dev *fd = to_fdev(ibqp->device);
	struct fnic_qp *qp = container_of(ibqp, struct fnic_qp, ibqp);

	/* Not while an OPEN re-creates the GSI QP (fnic_revive_gsi). */
	mutex_lock(&fd->open_lock);
	xa_erase_bh(&fd->qps, qp->handle);
	mutex_unlock(&fd->open_lock);
	fnic_kqp_fini(qp);
	fnic_db_fini(&qp->sq_db);
	fnic_db_fini(&qp->rq_db);
	fnic_qp_forget(fd, qp, qp->handle);
	fnic_buf_unexpose(qp->sq_entry);
	fnic_buf_unexpose(qp->rq_entry);
	fnic_buf_put(qp->sq);
	fnic_buf_put(qp->rq);
	return 0;
}

/* IB_QP_* bits the NIC understands (the FALCONNIC_QP_* values). */
#define FNIC_QP_MASK (IB_QP_STATE | IB_QP_CUR_STATE | IB_QP_ACCESS_FLAGS | \
		      IB_QP_PKEY_INDEX | IB_QP_PORT | IB_QP_QKEY | IB_QP_AV | \
		      IB_QP_PATH_MTU | IB_QP_TIMEOUT | IB_QP_RETRY_CNT | \
		      IB_QP_RNR_RETRY | IB_QP_RQ_PSN | IB_QP_MAX_QP_RD_ATOMIC | \
		      IB_QP_MIN_RNR_TIMER | IB_QP_SQ_PSN | \
		      IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_DEST_QPN)

static int fnic_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
			  int mask, struct ib_udata *udata)
{
	struct fnic_dev *fd = to_fdev(ibqp->device);
	struct fnic_qp *qp = container_of(ibqp, struct fnic_qp, ibqp);
	struct falconnic_qp_attr req = {};
	enum ib_qp_state cur, next;
	int err;

	if (mask & ~(FNIC_QP_MASK | IB_QP_EN_SQD_ASYNC_NOTIFY | IB_QP_CAP))
		return -EOPNOTSUPP;
	mutex_lock(&qp->lock);
	cur = mask & IB_QP_CUR_STATE ? attr->cur_qp_state : qp->state;
	next = mask & IB_QP_STATE ? attr->qp_state : cur;
	err = -EINVAL;
	if (!ib_modify_qp_is_ok(cur, next, ibqp->qp_type, mask))
		goto out;
	if ((mask & IB_QP_PORT) && attr->port_num != 1)
		goto out;
	if ((mask & IB_QP_PATH_MTU) &&
	    (attr->path_mtu < IB_MTU_256 || attr->path_mtu > IB_MTU_4096))
		goto out;
	if ((mask & IB_QP_MAX_QP_RD_ATOMIC) &&
	    attr->max_rd_atomic > fd->attrs.max_qp_init_rd_atom)
		goto out;
	if ((mask & IB_QP_MAX_DEST_RD_ATOMIC) &&
	    attr->max_dest_rd_atomic > fd->attrs.max_qp_rd_atom)
		goto out;
	if (fnic_obj_lost(fd, READ_ONCE(qp->epoch)) &&
	    ibqp->qp_type != IB_QPT_GSI) {
		/*
		 * The NIC lost it (chan.c): only the way out is left.  ERR is
		 * what ib_drain_qp and rdma_disconnect ask for; the driver
		 * flushes the rings itself (kverbs.c).
		 */
		err = -ENODEV;
		if (next == IB_QPS_ERR || next == IB_QPS_RESET) {
			qp->state = next;
			err = 0;
		}
		goto out;
	}
	req.qp = cpu_to_le32(qp->handle);
	req.attr_mask = cpu_to_le32(mask & FNIC_QP_MASK);
	req.qp_state = cpu_to_le32(next);
	req.cur_qp_state = cpu_to_le32(cur);
	req.path_mtu = cpu_to_le32(attr->path_mtu);
	req.qkey = cpu_to_le32(attr->qkey);
	req.rq_psn = cpu_to_le32(attr->rq_psn & 0xffffff);
	req.sq_psn = cpu_to_le32(attr->sq_psn & 0xffffff);
	req.dest_qp_num = cpu_to_le32(attr->dest_qp_num & 0xffffff);
	req.access_flags = cpu_to_le32(attr->qp_access_flags & 0x1f);
	req.pkey_index = cpu_to_le16(attr->pkey_index);
	req.port_num = attr->port_num;
	req.max_rd_atomic = attr->max_rd_atomic;
	req.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	req.min_rnr_timer = attr->min_rnr_timer & 0x1f;
	req.timeout = attr->timeout & 0x1f;
	req.retry_cnt = attr->retry_cnt & 0x7;
	req.rnr_retry = attr->rnr_retry & 0x7;
	if (mask & IB_QP_AV) {
		err = fnic_av_from_ah(&attr->ah_attr, &req.av);
		if (err)
			goto out;
	}
	err = fnic_cmd(fd, FALCONNIC_OP_MODIFY_QP, &req, sizeof(req), NULL, 0);
	if (err == -ENODEV && ibqp->qp_type != IB_QPT_GSI &&
	    fnic_obj_lost(fd, READ_ONCE(qp->epoch)) &&
	    (next == IB_QPS_ERR || next == IB_QPS_RESET))
		err = 0;	/* this very request found the NIC lost us */
	if (!err) {
		qp->state = next;
		/* What re-creating the GSI QP after a loss needs. */
		if (mask & IB_QP_QKEY)
			qp->qkey = attr->qkey;
		if (mask & IB_QP_PKEY_INDEX)
			qp->pkey_index = attr->pkey_index;
		if (mask & IB_QP_SQ_PSN)
			qp->sq_psn = attr->sq_psn & 0xffffff;
	}
out:
	mutex_unlock(&qp->lock);
	return err;
}

static int fnic_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
			 struct ib_qp_init_attr *init)
{
	struct fnic_dev *fd = to_fdev(ibqp->device);
	struct fnic_qp *qp = container_of(ibqp, struct fnic_qp, ibqp);
	struct falconnic_handle_req req = { .handle = cpu_to_le32(qp->handle) };
	struct falconnic_qp_attr rep;
	int err;

	err = fnic_cmd(fd, FALCONNIC_OP_QUERY_QP, &req, sizeof(req), &rep,
		       sizeof(rep));
	if (err)
		return err;
	if (le32_to_cpu(rep.qp_state) > IB_QPS_ERR ||
	    le32_to_cpu(rep.path_mtu) > IB_MTU_4096)
		return -EPROTO;
	memset(attr, 0, sizeof(*attr));
	attr->qp_state = le32_to_cpu(rep.qp_state);
	attr->cur_qp_state = attr->qp_state;
	attr->path_mtu = le32_to_cpu(rep.path_mtu);
	attr->qkey = le32_to_cpu(rep.qkey);
	attr->rq_psn = le32_to_cpu(rep.rq_psn) & 0xffffff;
	attr->sq_psn = le32_to_cpu(rep.sq_psn) & 0xffffff;
	attr->dest_qp_num = le32_to_cpu(rep.dest_qp_num) & 0xffffff;
	attr->qp_access_flags = le32_to_cpu(rep.access_flags) & 0x1f;
	attr->pkey_index = le16_to_cpu(rep.pkey_index);
	attr->port_num = 1;
	attr->max_rd_atomic = rep.max_rd_atomic;
	attr->max_dest_rd_atomic = rep.max_dest_rd_atomic;
	attr->min_rnr_timer = rep.min_rnr_timer & 0x1f;
	attr->timeout = rep.timeout & 0x1f;
	attr->retry_cnt = rep.retry_cnt & 0x7;
	attr->rnr_retry = rep.rnr_retry & 0x7;
	attr->sq_draining = !!rep.sq_draining;
	attr->cap = qp->cap;
	fnic_av_to_ah(ibqp->device, &rep.av, &attr->ah_attr);
	mutex_lock(&qp->lock);
	qp->state = attr->qp_state;
	mutex_unlock(&qp->lock);

	memset(init, 0, sizeof(*init));
	init->qp_type = ibqp->qp_type;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = qp->cap;
	init->sq_sig_type = qp->sq_sig_all ? IB_SIGNAL_ALL_WR : IB_SIGNAL_REQ_WR;
	return 0;
}

/* A zero-WR post_send from librxe is the SQ doorbell. */
static int fnic_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
			  const struct ib_send_wr **bad_wr)
{
	struct fnic_qp *qp = container_of(ibqp, struct fnic_qp, ibqp);
	struct fnic_dev *fd = to_fdev(ibqp->device);
	u32 *polling = qp->sq->vaddr + FALCONNIC_RING_NIC_POLLING_OFF;

	if (qp->kernel)
		return fnic_kpost_send(qp, wr, bad_wr);
	if (wr) {
		*bad_wr = wr;
		return -EOPNOTSUPP;
	}
	/* The user's producer store, then the NIC's flag (see the uapi). */
	smp_mb();
	if (READ_ONCE(*polling)) {
		fnic_count(fd, FNIC_C_DOORBELL_SUPPRESSED);
		return 0;
	}
	return fnic_db_ring(&qp->sq_db);
}

static int fnic_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
			  const struct ib_recv_wr **bad_wr)
{
	struct fnic_qp *qp = container_of(ibqp, struct fnic_qp, ibqp);

	if (qp->kernel && qp->rq)
		return fnic_kpost_recv(qp, wr, bad_wr);
	if (wr || !qp->rq) {
		*bad_wr = wr;
		return -EOPNOTSUPP;
	}
	return fnic_db_ring(&qp->rq_db);
}

/* ---- re-creating the GSI QP after a loss ---- */

static int fnic_revive_modify(struct fnic_dev *fd, struct fnic_qp *qp,
			      u32 mask, enum ib_qp_state cur,
			      enum ib_qp_state next)
{
	struct falconnic_qp_attr req = {
		.qp = cpu_to_le32(qp->handle),
		.attr_mask = cpu_to_le32(mask),
		.qp_state = cpu_to_le32(next),
		.cur_qp_state = cpu_to_le32(cur),
		.qkey = cpu_to_le32(qp->qkey),
		.sq_psn = cpu_to_le32(qp->sq_psn),
		.pkey_index = cpu_to_le16(qp->pkey_index),
		.port_num = 1,
	};

	return fnic_cmd(fd, FALCONNIC_OP_MODIFY_QP, &req, sizeof(req), NULL, 0);
}

static int fnic_revive_pd(struct fnic_dev *fd, struct fnic_pd *pd, u32 epoch)
{
	struct falconnic_handle_req req = { .handle = cpu_to_le32(pd->handle) };
	int err;

	if (!fnic_obj_lost(fd, pd->epoch))
		return 0;
	err = fnic_cmd(fd, FALCONNIC_OP_CREATE_PD, &req, sizeof(req), NULL, 0);
	if (!err)
		pd->epoch = epoch;
	return err;
}

/*
 * fnic_revive_cq re-creates a lost kernel CQ on the NIC, same handle, same
 * ring: the NIC produces from the ring's producer index on.  Lost QPs
 * still attached to it can have no more flush CQEs written for them
 * (posting to them fails with EIO from then on, see kverbs.c); consumers
 * destroy their QPs before reusing a CQ (ib_cq_pool).
 */
static int fnic_revive_cq(struct fnic_dev *fd, struct fnic_cq *cq, u32 epoch)
{
	struct falconnic_create_cq req = {
		.cq = cpu_to_le32(cq->handle),
		.cqe = cpu_to_le32(cq->buf->slots - 1),
	};
	unsigned long flags;
	u32 old;
	int err;

	if (!fnic_obj_lost(fd, cq->epoch))
		return 0;
	fnic_buf_wire(cq->buf, 0, 0, &req.ring);
	/* The NIC produces from its CREATE on (it reads our producer index). */
	spin_lock_irqsave(&cq->lock, flags);
	old = cq->epoch;
	cq->epoch = epoch;
	spin_unlock_irqrestore(&cq->lock, flags);
	err = fnic_cmd(fd, FALCONNIC_OP_CREATE_CQ, &req, sizeof(req), NULL, 0);
	if (err) {
		spin_lock_irqsave(&cq->lock, flags);
		cq->epoch = old;
		spin_unlock_irqrestore(&cq->lock, flags);
		return err;
	}
	cq->arm_word = false;
	fnic_kcq_arm_word_init(cq);
	return 0;
}

/*
 * fnic_revive_objs re-creates the lost kernel PD and CQs a new object is
 * about to use.  Kernel consumers keep some across a loss: ib_core's CQ
 * pool (ib_cq_pool_get: nvme-rdma, nvmet-rdma) hands the same CQs to the
 * QPs of the next connection, and a consumer may keep its PD.
 */
int fnic_revive_objs(struct fnic_dev *fd, struct ib_pd *ibpd,
		     struct ib_cq *scq, struct ib_cq *rcq)
{
	struct fnic_cq *cqs[2] = {
		scq ? container_of(scq, struct fnic_cq, ibcq) : NULL,
		rcq ? container_of(rcq, struct fnic_cq, ibcq) : NULL,
	};
	struct fnic_pd *pd = ibpd ? container_of(ibpd, struct fnic_pd, ibpd) : NULL;
	u32 epoch;
	int i, err = 0;

	mutex_lock(&fd->open_lock);
	epoch = READ_ONCE(fd->live_epoch);
	if (pd && !ibpd->uobject)
		err = fnic_revive_pd(fd, pd, epoch);
	for (i = 0; i < 2 && !err; i++)
		if (cqs[i] && cqs[i]->kernel)
			err = fnic_revive_cq(fd, cqs[i], epoch);
	mutex_unlock(&fd->open_lock);
	return err;
}

/*
 * fnic_revive_gsi re-creates, after an OPEN that followed a loss, the GSI
 * QP that ib_mad created at registration and keeps for the device's life
 * (it never re-creates QP1): its PD, CQ(s) and the QP itself with the same
 * handles and rings, then takes it back to the state ib_mad left it in.
 * The receive queue still holds ib_mad's posted buffers and the NIC starts
 * from the rings' indices, so MADs flow again; sends posted meanwhile were
 * held and go out now.  Runs under open_lock, which destroy_qp takes too.
 */
void fnic_revive_gsi(struct fnic_dev *fd)
{
	u32 epoch = READ_ONCE(fd->live_epoch);
	struct falconnic_create_qp req = {};
	enum ib_qp_state target;
	struct fnic_pd *pd;
	struct fnic_qp *qp;
	unsigned long flags;
	int err;

	qp = xa_load(&fd->qps, FALCONNIC_GSI_QPN);
	if (!qp || !qp->kernel || !fnic_obj_lost(fd, READ_ONCE(qp->epoch)))
		return;
	spin_lock_irqsave(&qp->sq_lock, flags);
	qp->reviving = true;
	spin_unlock_irqrestore(&qp->sq_lock, flags);

	pd = container_of(qp->ibqp.pd, struct fnic_pd, ibpd);
	err = fnic_revive_pd(fd, pd, epoch);
	if (err)
		goto fail;
	err = fnic_revive_cq(fd, qp->kcq[0], epoch);
	if (!err && qp->kcq[1] != qp->kcq[0])
		err = fnic_revive_cq(fd, qp->kcq[1], epoch);
	if (err)
		goto fail;

	req.qp = cpu_to_le32(qp->handle);
	req.pd = cpu_to_le32(pd->handle);
	req.send_cq = cpu_to_le32(qp->kcq[0]->handle);
	req.recv_cq = cpu_to_le32(qp->kcq[1]->handle);
	req.type = fnic_qp_types[IB_QPT_GSI];
	req.sq_sig_all = qp->sq_sig_all;
	req.flags = FALCONNIC_QP_F_KERNEL;
	fnic_buf_wire(qp->sq, qp->cap.max_send_sge, qp->cap.max_inline_data,
		      &req.sq);
	fnic_buf_wire(qp->rq, qp->rq_max_sge, 0, &req.rq);
	err = fnic_cmd(fd, FALCONNIC_OP_CREATE_QP, &req, sizeof(req), NULL, 0);
	if (err)
		goto fail;
	target = READ_ONCE(qp->state);
	if (target >= IB_QPS_INIT && target <= IB_QPS_RTS)
		err = fnic_revive_modify(fd, qp, IB_QP_STATE | IB_QP_PKEY_INDEX |
					 IB_QP_QKEY, IB_QPS_RESET, IB_QPS_INIT);
	if (!err && target >= IB_QPS_RTR && target <= IB_QPS_RTS)
		err = fnic_revive_modify(fd, qp, IB_QP_STATE, IB_QPS_INIT,
					 IB_QPS_RTR);
	if (!err && target == IB_QPS_RTS)
		err = fnic_revive_modify(fd, qp, IB_QP_STATE | IB_QP_SQ_PSN,
					 IB_QPS_RTR, IB_QPS_RTS);
	if (err)
		goto fail;
	fnic_count(fd, FNIC_C_GSI_REVIVED);
	fnic_kqp_revived(qp, true);
	return;
fail:
	fnic_count(fd, FNIC_C_GSI_REVIVE_FAIL);
	ibdev_warn_ratelimited(&fd->ib, "could not re-create the GSI QP: %d; rdma_cm needs the module reloaded\n",
			       err);
	fnic_kqp_revived(qp, false);
}

/* ---- events ---- */

enum fnic_ev_kind { FNIC_EV_NONE, FNIC_EV_COMP, FNIC_EV_CQ, FNIC_EV_QP,
		    FNIC_EV_SRQ, FNIC_EV_PORT };

static const struct {
	u8			kind;
	enum ib_event_type	type;
} fnic_events[] = {
	[FALCONNIC_OP_EV_CQ_COMP - 0x80]	= { FNIC_EV_COMP, 0 },
	[FALCONNIC_OP_EV_CQ_ERR - 0x80]		= { FNIC_EV_CQ, IB_EVENT_CQ_ERR },
	[FALCONNIC_OP_EV_QP_FATAL - 0x80]	= { FNIC_EV_QP, IB_EVENT_QP_FATAL },
	[FALCONNIC_OP_EV_QP_REQ_ERR - 0x80]	= { FNIC_EV_QP, IB_EVENT_QP_REQ_ERR },
	[FALCONNIC_OP_EV_QP_ACCESS_ERR - 0x80]	= { FNIC_EV_QP, IB_EVENT_QP_ACCESS_ERR },
	[FALCONNIC_OP_EV_QP_LAST_WQE - 0x80]	= { FNIC_EV_QP, IB_EVENT_QP_LAST_WQE_REACHED },
	[FALCONNIC_OP_EV_SRQ_LIMIT - 0x80]	= { FNIC_EV_SRQ, IB_EVENT_SRQ_LIMIT_REACHED },
	[FALCONNIC_OP_EV_SRQ_ERR - 0x80]	= { FNIC_EV_SRQ, IB_EVENT_SRQ_ERR },
	[FALCONNIC_OP_EV_PORT - 0x80]		= { FNIC_EV_PORT, 0 },
};

/* fnic_dispatch_event runs in softirq context (the netdev RX path). */
void fnic_dispatch_event(struct fnic_dev *fd, u16 opcode,
			 const struct falconnic_event *ev)
{
	u32 handle = le32_to_cpu(ev->handle);
	struct ib_event ie = { .device = &fd->ib };
	unsigned int i = opcode - 0x80;
	bool found = false;

	if (opcode < 0x80 || i >= ARRAY_SIZE(fnic_events) ||
	    fnic_events[i].kind == FNIC_EV_NONE) {
		fnic_count(fd, FNIC_C_RX_EVENT_UNKNOWN);
		return;
	}
	/* Not once unregistration started: queued core work must not outlive it. */
	if (!ib_device_try_get(&fd->ib)) {
		fnic_count(fd, FNIC_C_RX_EVENT_NO_OBJECT);
		return;
	}
	ie.event = fnic_events[i].type;
	switch (fnic_events[i].kind) {
	case FNIC_EV_COMP:
	case FNIC_EV_CQ: {
		struct fnic_cq *cq;

		xa_lock(&fd->cqs);
		cq = xa_load(&fd->cqs, handle);
		if (cq) {
			found = true;
			if (fnic_events[i].kind == FNIC_EV_COMP) {
				if (cq->ibcq.comp_handler)
					cq->ibcq.comp_handler(&cq->ibcq,
							      cq->ibcq.cq_context);
			} else if (cq->ibcq.event_handler) {
				ie.element.cq = &cq->ibcq;
				cq->ibcq.event_handler(&ie, cq->ibcq.cq_context);
			}
		}
		xa_unlock(&fd->cqs);
		break;
	}
	case FNIC_EV_QP: {
		struct fnic_qp *qp;

		xa_lock(&fd->qps);
		qp = xa_load(&fd->qps, handle);
		if (qp) {
			found = true;
			if (ie.event != IB_EVENT_QP_LAST_WQE_REACHED)
				qp->state = IB_QPS_ERR;
			if (qp->ibqp.event_handler) {
				ie.element.qp = &qp->ibqp;
				qp->ibqp.event_handler(&ie, qp->ibqp.qp_context);
			}
		}
		xa_unlock(&fd->qps);
		break;
	}
	case FNIC_EV_SRQ: {
		struct fnic_srq *srq;

		xa_lock(&fd->srqs);
		srq = xa_load(&fd->srqs, handle);
		if (srq) {
			found = true;
			if (srq->ibsrq.event_handler) {
				ie.element.srq = &srq->ibsrq;
				srq->ibsrq.event_handler(&ie, srq->ibsrq.srq_context);
			}
		}
		xa_unlock(&fd->srqs);
		break;
	}
	case FNIC_EV_PORT:
		if (handle != 1)
			break;
		found = true;
		WRITE_ONCE(fd->nic_port_active,
			   le32_to_cpu(ev->code) == IB_PORT_ACTIVE);
		ie.element.port_num = 1;
		ie.event = fd->nic_port_active ? IB_EVENT_PORT_ACTIVE :
						 IB_EVENT_PORT_ERR;
		ib_dispatch_event(&ie);
		break;
	}
	ib_device_put(&fd->ib);
	if (!found)
		fnic_count(fd, FNIC_C_RX_EVENT_NO_OBJECT);
}

static int fnic_add_gid(const struct ib_gid_attr *attr, void **context)
{
	return 0;	/* the NIC learns GIDs from each QP's and AH's path */
}

static int fnic_del_gid(const struct ib_gid_attr *attr, void **context)
{
	return 0;
}

static void fnic_dealloc_driver(struct ib_device *ibdev);

const struct ib_device_ops fnic_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_RXE,
	.uverbs_abi_ver = 2,	/* RXE_UVERBS_ABI_VERSION */

	.add_gid = fnic_add_gid,
	.alloc_mr = fnic_alloc_mr,
	.alloc_pd = fnic_alloc_pd,
	.alloc_ucontext = fnic_alloc_ucontext,
	.create_ah = fnic_create_ah,
	.create_cq = fnic_create_cq,
	.create_qp = fnic_create_qp,
	.create_srq = fnic_create_srq,
	.create_user_ah = fnic_create_ah,
	.dealloc_driver = fnic_dealloc_driver,
	.dealloc_pd = fnic_dealloc_pd,
	.dealloc_ucontext = fnic_dealloc_ucontext,
	.del_gid = fnic_del_gid,
	.dereg_mr = fnic_dereg_mr,
	.destroy_ah = fnic_destroy_ah,
	.destroy_cq = fnic_destroy_cq,
	.destroy_qp = fnic_destroy_qp,
	.destroy_srq = fnic_destroy_srq,
	.device_group = &fnic_attr_group,
	.get_dma_mr = fnic_get_dma_mr,
	.get_link_layer = fnic_get_link_layer,
	.get_port_immutable = fnic_get_port_immutable,
	.map_mr_sg = fnic_map_mr_sg,
	.mmap = fnic_mmap,
	.mmap_free = fnic_mmap_free,
	.modify_qp = fnic_modify_qp,
	.modify_srq = fnic_modify_srq,
	.poll_cq = fnic_poll_cq,
	.post_recv = fnic_post_recv,
	.post_send = fnic_post_send,
	.post_srq_recv = fnic_post_srq_recv,
	.query_ah = fnic_query_ah,
	.query_device = fnic_query_device,
	.query_pkey = fnic_query_pkey,
	.query_port = fnic_query_port,
	.query_qp = fnic_query_qp,
	.query_srq = fnic_query_srq,
	.reg_user_mr = fnic_reg_user_mr,
	.req_notify_cq = fnic_req_notify_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, fnic_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, fnic_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_pd, fnic_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, fnic_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_srq, fnic_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, fnic_ucontext, ibuc),
};

static void fnic_dealloc_driver(struct ib_device *ibdev)
{
	fnic_dev_release(to_fdev(ibdev));
}
