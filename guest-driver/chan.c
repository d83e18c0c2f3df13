// SPDX-License-Identifier: GPL-2.0
/*
 * Control channel: requests, replies and events as EtherType 0x88B5 frames
 * exchanged with the NIC through its own netdev (see the uapi header).
 */
#include <linux/etherdevice.h>
#include <linux/if_ether.h>
#include <linux/jiffies.h>
#include <linux/pkt_sched.h>
#include <linux/skbuff.h>
#include "falconnic.h"

unsigned int fnic_cmd_timeout_ms = 1000;
module_param_named(cmd_timeout_ms, fnic_cmd_timeout_ms, uint, 0644);
MODULE_PARM_DESC(cmd_timeout_ms, "NIC request timeout in milliseconds (default 1000, at least 10)");

static unsigned int fnic_keepalive_ms = 1000;
module_param_named(keepalive_ms, fnic_keepalive_ms, uint, 0644);
MODULE_PARM_DESC(keepalive_ms, "while open, ask the NIC this often whether it still knows us (QUERY_PORT); 0: never (default 1000, at least 100)");

static void fnic_lost(struct fnic_dev *fd, u32 seq);
static void fnic_lost_work(struct work_struct *w);
static void fnic_keepalive_work(struct work_struct *w);

/* Reply body size of each opcode; requests not listed have an empty reply. */
static u16 fnic_reply_size(u16 opcode)
{
	switch (opcode) {
	case FALCONNIC_OP_PROBE:
		return sizeof(struct falconnic_device_attr);
	case FALCONNIC_OP_QUERY_PORT:
		return sizeof(struct falconnic_port_attr);
	case FALCONNIC_OP_QUERY_QP:
		return sizeof(struct falconnic_qp_attr);
	case FALCONNIC_OP_QUERY_SRQ:
		return sizeof(struct falconnic_srq_attr);
	default:
		return 0;
	}
}

/* NIC status -> errno, indexed by status. */
static const int fnic_status_errnos[] = {
	[FALCONNIC_ST_OK]		= 0,
	[FALCONNIC_ST_BAD_VERSION]	= -EPROTO,
	[FALCONNIC_ST_BAD_OPCODE]	= -EOPNOTSUPP,
	[FALCONNIC_ST_BAD_LENGTH]	= -EPROTO,
	[FALCONNIC_ST_BAD_INSTANCE]	= -ENODEV,
	[FALCONNIC_ST_BAD_HANDLE]	= -ENOENT,
	[FALCONNIC_ST_HANDLE_IN_USE]	= -EEXIST,
	[FALCONNIC_ST_BAD_PARAM]	= -EINVAL,
	[FALCONNIC_ST_BAD_GPA]		= -EFAULT,
	[FALCONNIC_ST_NO_RESOURCES]	= -ENOMEM,
	[FALCONNIC_ST_BAD_STATE]	= -EINVAL,
	[FALCONNIC_ST_BUSY]		= -EBUSY,
	[FALCONNIC_ST_NOT_SUPPORTED]	= -EOPNOTSUPP,
	[FALCONNIC_ST_BAD_ACCESS]	= -EACCES,
	[FALCONNIC_ST_INTERNAL]		= -EIO,
};

int fnic_status_errno(u32 status)
{
	if (status >= ARRAY_SIZE(fnic_status_errnos))
		return -EIO;
	return fnic_status_errnos[status];
}

static int fnic_xmit(struct fnic_dev *fd, u16 opcode, u16 flags, u32 req_id,
		     const void *body, u16 len)
{
	struct net_device *ndev = fd->ndev;
	struct falconnic_hdr *h;
	struct sk_buff *skb;
	unsigned int total = sizeof(*h) + len;
	int hlen = LL_RESERVED_SPACE(ndev);

	if (len > FALCONNIC_MAX_BODY)
		return -EMSGSIZE;
	if (!netif_running(ndev) || !netif_carrier_ok(ndev)) {
		fnic_count(fd, FNIC_C_TX_ERR);
		return -ENETDOWN;
	}
	skb = alloc_skb(hlen + max_t(unsigned int, total, ETH_ZLEN) +
			ndev->needed_tailroom, GFP_KERNEL);
	if (!skb) {
		fnic_count(fd, FNIC_C_TX_ERR);
		return -ENOMEM;
	}
	skb_reserve(skb, hlen);
	skb_reset_network_header(skb);
	h = skb_put_zero(skb, total);
	h->magic = cpu_to_le32(FALCONNIC_MAGIC);
	h->version = cpu_to_le16(FALCONNIC_VERSION);
	h->opcode = cpu_to_le16(opcode);
	h->instance = cpu_to_le64(fd->instance);
	h->req_id = cpu_to_le32(req_id);
	h->flags = cpu_to_le16(flags);
	h->length = cpu_to_le16(len);
	if (len)
		memcpy(h + 1, body, len);
	skb->dev = ndev;
	skb->protocol = htons(FALCONNIC_ETHERTYPE);
	skb->priority = TC_PRIO_CONTROL;
	if (dev_hard_header(skb, ndev, FALCONNIC_ETHERTYPE, ndev->dev_addr,
			    ndev->dev_addr, skb->len) < 0) {
		kfree_skb(skb);
		fnic_count(fd, FNIC_C_TX_ERR);
		return -EINVAL;
	}
	if (skb->len < ETH_ZLEN)
		skb_put_zero(skb, ETH_ZLEN - skb->len);
	if (dev_queue_xmit(skb) != NET_XMIT_SUCCESS) {
		fnic_count(fd, FNIC_C_TX_ERR);
		return -ENOBUFS;
	}
	return 0;
}

/*
 * fnic_cmd sends one request and waits for its reply.  reply (reply_len
 * bytes, which must be the opcode's reply size) receives the body of an OK
 * reply.  Returns 0, the errno of the NIC's status, or -ETIMEDOUT.
 */
int fnic_cmd(struct fnic_dev *fd, u16 opcode, const void *body, u16 len,
	     void *reply, u16 reply_len)
{
	struct fnic_req req = {};
	unsigned long left;
	u32 seq;
	int err;

	might_sleep();
	if (WARN_ON(reply_len != fnic_reply_size(opcode)))
		return -EINVAL;
	init_completion(&req.done);
	req.opcode = opcode;
	req.reply = reply;
	req.reply_len = reply_len;

	spin_lock_bh(&fd->req_lock);
	if (++fd->next_req_id == 0)
		fd->next_req_id = 1;
	req.id = fd->next_req_id;
	list_add_tail(&req.list, &fd->reqs);
	seq = fd->state_seq;	/* the open state this request is sent in */
	spin_unlock_bh(&fd->req_lock);

	fnic_count(fd, FNIC_C_TX_REQ);
	err = fnic_xmit(fd, opcode, 0, req.id, body, len);
	if (!err) {
		left = wait_for_completion_timeout(&req.done,
				msecs_to_jiffies(max(fnic_cmd_timeout_ms, 10u)));
		if (!left)
			err = -ETIMEDOUT;
	}

	spin_lock_bh(&fd->req_lock);
	if (!list_empty(&req.list))
		list_del_init(&req.list);
	else if (err == -ETIMEDOUT)
		err = 0;	/* the reply raced with the timeout: it won */
	spin_unlock_bh(&fd->req_lock);

	if (err == -ETIMEDOUT) {
		fnic_count(fd, FNIC_C_REQ_TIMEOUT);
		return err;
	}
	if (err)
		return err;
	if (req.status != FALCONNIC_ST_OK) {
		fnic_count(fd, FNIC_C_REQ_ERR_STATUS);
		if (req.status == FALCONNIC_ST_BAD_INSTANCE &&
		    opcode != FALCONNIC_OP_OPEN)
			fnic_lost(fd, seq);
		return fnic_status_errno(req.status);
	}
	return 0;
}

static int fnic_doorbell(struct fnic_dev *fd, u16 opcode, u32 handle, u32 producer)
{
	struct falconnic_doorbell db = {
		.handle = cpu_to_le32(handle),
		.producer = cpu_to_le32(producer),
	};

	fnic_count(fd, FNIC_C_TX_DOORBELL);
	return fnic_xmit(fd, opcode, FALCONNIC_F_NO_REPLY, 0, &db, sizeof(db));
}

static void fnic_db_work(struct work_struct *w)
{
	fnic_db_ring(container_of(to_delayed_work(w), struct fnic_db, work));
}

/* fnic_db_init: ring's doorbell, opcode DB_SQ, DB_RQ or DB_SRQ. */
void fnic_db_init(struct fnic_db *db, struct fnic_dev *fd, u16 opcode,
		  u32 handle, struct fnic_buf *ring)
{
	INIT_DELAYED_WORK(&db->work, fnic_db_work);
	db->fd = fd;
	db->ring = ring;
	db->handle = handle;
	db->opcode = opcode;
}

/*
 * fnic_db_ring sends the ring's producer index now (process context).  A
 * frame the netdev refused (-ENOBUFS: its queue is full; -ENOMEM) is sent
 * again a jiffy later with the then-current index, and the caller is told
 * 0: its WQEs are in the ring and the NIC will see them.  A netdev that is
 * down is an error for the caller (the NIC is unreachable).
 */
int fnic_db_ring(struct fnic_db *db)
{
	struct rxe_queue_buf *q = db->ring->vaddr;
	int err;

	err = fnic_doorbell(db->fd, db->opcode, db->handle,
			    READ_ONCE(q->producer_index));
	if (err != -ENOBUFS && err != -ENOMEM)
		return err;
	fnic_count(db->fd, FNIC_C_DOORBELL_RETRY);
	queue_delayed_work(system_highpri_wq, &db->work, 1);
	return 0;
}

/*
 * fnic_db_kick rings the doorbell from a work item (any context).  Already
 * queued, it stays so: that work reads the producer index when it runs,
 * and a pending retry means the netdev's queue was full a moment ago.
 */
void fnic_db_kick(struct fnic_db *db)
{
	queue_delayed_work(system_highpri_wq, &db->work, 0);
}

/* fnic_db_fini: no doorbell of this ring is pending or sent after return. */
void fnic_db_fini(struct fnic_db *db)
{
	if (db->fd)
		cancel_delayed_work_sync(&db->work);
}

static void fnic_rx_reply(struct fnic_dev *fd, const struct falconnic_hdr *h,
			  const void *body, u16 len)
{
	u32 id = le32_to_cpu(h->req_id);
	u16 opcode = le16_to_cpu(h->opcode);
	u32 status = le32_to_cpu(h->status);
	struct fnic_req *req, *found = NULL;

	spin_lock(&fd->req_lock);
	list_for_each_entry(req, &fd->reqs, list) {
		if (req->id == id && req->opcode == opcode) {
			found = req;
			break;
		}
	}
	if (!found) {
		spin_unlock(&fd->req_lock);
		fnic_count(fd, FNIC_C_RX_UNMATCHED_REPLY);
		return;
	}
	if (status == FALCONNIC_ST_OK && len != found->reply_len) {
		/* An OK reply must carry exactly the opcode's body. */
		fnic_count(fd, FNIC_C_RX_REPLY_BAD_BODY);
		status = FALCONNIC_ST_INTERNAL;
	} else if (status == FALCONNIC_ST_OK && len) {
		memcpy(found->reply, body, len);
	}
	found->status = status;
	list_del_init(&found->list);
	complete(&found->done);
	spin_unlock(&fd->req_lock);
	fnic_count(fd, FNIC_C_RX_REPLY);
}

static int fnic_rx(struct sk_buff *skb, struct net_device *ndev,
		   struct packet_type *pt, struct net_device *orig)
{
	struct fnic_dev *fd = container_of(pt, struct fnic_dev, ptype);
	const struct falconnic_hdr *h;
	u16 len, flags;

	skb = skb_share_check(skb, GFP_ATOMIC);
	if (!skb)
		return NET_RX_DROP;
	if (!pskb_may_pull(skb, sizeof(*h))) {
		fnic_count(fd, FNIC_C_RX_SHORT);
		goto drop;
	}
	h = (const struct falconnic_hdr *)skb->data;
	if (le32_to_cpu(h->magic) != FALCONNIC_MAGIC) {
		fnic_count(fd, FNIC_C_RX_BAD_MAGIC);
		goto drop;
	}
	if (le16_to_cpu(h->version) != FALCONNIC_VERSION) {
		fnic_count(fd, FNIC_C_RX_BAD_VERSION);
		goto drop;
	}
	len = le16_to_cpu(h->length);
	if (len > FALCONNIC_MAX_BODY || !pskb_may_pull(skb, sizeof(*h) + len)) {
		fnic_count(fd, FNIC_C_RX_BAD_LENGTH);
		goto drop;
	}
	h = (const struct falconnic_hdr *)skb->data;	/* pull may move data */
	flags = le16_to_cpu(h->flags);
	/*
	 * Replies and events alike carry our instance: the NIC sends events
	 * only to its open instance (port state before OPEN is read with
	 * QUERY_PORT once OPEN is acknowledged).  Anything else is another
	 * instance's frame or a forgery [issue 18, finding 4]: it must not
	 * move our port state or name our objects.
	 */
	if (le64_to_cpu(h->instance) != fd->instance) {
		fnic_count(fd, flags == FALCONNIC_F_EVENT ?
			   FNIC_C_RX_EVENT_BAD_INSTANCE :
			   FNIC_C_RX_BAD_INSTANCE);
		goto drop;
	}
	if (flags == FALCONNIC_F_REPLY) {
		fnic_rx_reply(fd, h, h + 1, len);
	} else if (flags == FALCONNIC_F_EVENT) {
		if (len != sizeof(struct falconnic_event)) {
			fnic_count(fd, FNIC_C_RX_BAD_LENGTH);
			goto drop;
		}
		fnic_count(fd, FNIC_C_RX_EVENT);
		fnic_dispatch_event(fd, le16_to_cpu(h->opcode),
				    (const struct falconnic_event *)(h + 1));
	} else {
		fnic_count(fd, FNIC_C_RX_BAD_FLAGS);
	}
drop:
	consume_skb(skb);
	return NET_RX_SUCCESS;
}

void fnic_chan_init(struct fnic_dev *fd)
{
	spin_lock_init(&fd->req_lock);
	INIT_LIST_HEAD(&fd->reqs);
	mutex_init(&fd->open_lock);
	INIT_WORK(&fd->lost_work, fnic_lost_work);
	INIT_DELAYED_WORK(&fd->keepalive, fnic_keepalive_work);
	get_random_bytes(&fd->instance, sizeof(fd->instance));
	if (!fd->instance)
		fd->instance = 1;
	fd->ptype.type = htons(FALCONNIC_ETHERTYPE);
	fd->ptype.dev = fd->ndev;
	fd->ptype.func = fnic_rx;
}

int fnic_chan_start(struct fnic_dev *fd)
{
	dev_add_pack(&fd->ptype);
	fd->ptype_added = true;
	return 0;
}

/* fnic_chan_shutdown stops loss handling and the keepalive for good. */
void fnic_chan_shutdown(struct fnic_dev *fd)
{
	spin_lock_bh(&fd->req_lock);
	WRITE_ONCE(fd->dying, true);
	spin_unlock_bh(&fd->req_lock);
	cancel_work_sync(&fd->lost_work);
	cancel_delayed_work_sync(&fd->keepalive);
}

void fnic_chan_stop(struct fnic_dev *fd)
{
	if (fd->ptype_added) {
		dev_remove_pack(&fd->ptype);	/* waits for running handlers */
		fd->ptype_added = false;
	}
}

/* fnic_probe_nic asks the NIC for its limits; 0 when it answered. */
int fnic_probe_nic(struct fnic_dev *fd)
{
	struct falconnic_probe_req req = {
		.driver_version = cpu_to_le32(FALCONNIC_VERSION),
		.max_body = cpu_to_le32(FALCONNIC_MAX_BODY),
	};
	struct falconnic_device_attr attr;
	int err;

	err = fnic_cmd(fd, FALCONNIC_OP_PROBE, &req, sizeof(req), &attr,
		       sizeof(attr));
	if (err)
		return err;
	fd->nic_attr = attr;
	fd->nic_present = true;
	fd->nic_port_active = true;	/* until QUERY_PORT or EV_PORT say otherwise */
	return 0;
}

/* fnic_query_nic_port refreshes the port state and MTU (needs OPEN). */
static void fnic_query_nic_port(struct fnic_dev *fd)
{
	struct falconnic_handle_req port = { .handle = cpu_to_le32(1) };
	struct falconnic_port_attr pattr;
	u32 mtu;

	if (fnic_cmd(fd, FALCONNIC_OP_QUERY_PORT, &port, sizeof(port), &pattr,
		     sizeof(pattr)))
		return;
	mtu = le32_to_cpu(pattr.max_mtu);
	if (mtu >= IB_MTU_256 && mtu <= IB_MTU_4096)
		fd->port_max_mtu = mtu;
	mtu = le32_to_cpu(pattr.active_mtu);
	if (mtu >= IB_MTU_256 && mtu <= IB_MTU_4096)
		fd->port_active_mtu = mtu;
	WRITE_ONCE(fd->nic_port_active,
		   le32_to_cpu(pattr.state) == IB_PORT_ACTIVE);
}

/* fnic_set_opened records an OPEN or CLOSE: a new open state. */
static void fnic_set_opened(struct fnic_dev *fd, bool opened)
{
	spin_lock_bh(&fd->req_lock);
	WRITE_ONCE(fd->opened, opened);
	fd->state_seq++;
	spin_unlock_bh(&fd->req_lock);
}

static void fnic_keepalive_arm(struct fnic_dev *fd)
{
	unsigned int ms = READ_ONCE(fnic_keepalive_ms);

	if (ms && !READ_ONCE(fd->dying))
		mod_delayed_work(system_wq, &fd->keepalive,
				 msecs_to_jiffies(max(ms, 100u)));
}

/*
 * fnic_lost: a request sent while open in state seq got BAD_INSTANCE.  The
 * NIC holds nothing of ours (it answers so only when another instance or
 * none is open, and it drops every object of ours before that: daemon
 * restart, NIC reset, guest memory gone).  Every object created so far is
 * lost from now on (live_epoch); lost_work completes the kernel consumers'
 * outstanding work requests with flush errors and opens again.  A reply to
 * a request sent before an earlier loss or OPEN (seq is stale) proves
 * nothing about the current state and is ignored.
 */
static void fnic_lost(struct fnic_dev *fd, u32 seq)
{
	bool lost = false;

	spin_lock_bh(&fd->req_lock);
	if (fd->opened && fd->state_seq == seq && !fd->dying) {
		WRITE_ONCE(fd->opened, false);
		fd->state_seq++;
		WRITE_ONCE(fd->live_epoch, fd->live_epoch + 1);
		lost = true;
	}
	spin_unlock_bh(&fd->req_lock);
	if (!lost)
		return;
	fnic_count(fd, FNIC_C_NIC_LOST);
	ibdev_warn_ratelimited(&fd->ib, "NIC lost this instance (restart or reset): flushing kernel work requests, reopening\n");
	queue_work(system_wq, &fd->lost_work);
}

/*
 * fnic_lost_work: flush every kernel QP of the lost epoch (send and receive
 * queues complete with IB_WC_WR_FLUSH_ERR, the QPs go to ERR and their
 * consumers get IB_EVENT_QP_FATAL), then OPEN again, which re-creates the
 * GSI QP (ib_mad keeps using QP1 and never re-creates it).
 */
static void fnic_lost_work(struct work_struct *w)
{
	struct fnic_dev *fd = container_of(w, struct fnic_dev, lost_work);
	struct ib_event ie = { .device = &fd->ib, .event = IB_EVENT_QP_FATAL };
	struct fnic_qp *qp;
	unsigned long i;

	if (!ib_device_try_get(&fd->ib))
		return;		/* unregistering: every object goes anyway */
	xa_lock_bh(&fd->qps);
	xa_for_each(&fd->qps, i, qp) {
		if (!fnic_obj_lost(fd, READ_ONCE(qp->epoch)))
			continue;
		if (qp->kernel)
			fnic_kqp_flush_lost(qp);
		if (qp->ibqp.qp_type == IB_QPT_GSI || qp->lost_reported)
			continue;
		WRITE_ONCE(qp->state, IB_QPS_ERR);
		qp->lost_reported = true;
		if (qp->ibqp.event_handler) {
			ie.element.qp = &qp->ibqp;
			qp->ibqp.event_handler(&ie, qp->ibqp.qp_context);
		}
	}
	xa_unlock_bh(&fd->qps);
	fnic_ensure_open(fd);
	ib_device_put(&fd->ib);
}

/*
 * fnic_keepalive_work asks the NIC, while open, whether it still knows us:
 * an idle guest (an nvmet-rdma target, ib_mad waiting for MADs) sends no
 * request of its own, and without one it would never learn that the NIC
 * restarted and lost its QP1.  QUERY_PORT also refreshes the port state.
 */
static void fnic_keepalive_work(struct work_struct *w)
{
	struct fnic_dev *fd = container_of(to_delayed_work(w), struct fnic_dev,
					   keepalive);

	if (!READ_ONCE(fd->opened))
		return;		/* the next OPEN re-arms it */
	fnic_count(fd, FNIC_C_KEEPALIVE);
	fnic_query_nic_port(fd);
	if (READ_ONCE(fd->opened))
		fnic_keepalive_arm(fd);
}

/*
 * fnic_ensure_open makes this instance the owner of the NIC's RDMA
 * function.  Object commands are only ever sent after an acknowledged OPEN,
 * so a NIC that never answered holds nothing of ours.
 */
int fnic_ensure_open(struct fnic_dev *fd)
{
	struct falconnic_open_req req = {
		.driver_version = cpu_to_le32(FALCONNIC_VERSION),
	};
	int err = 0;

	mutex_lock(&fd->open_lock);
	if (!READ_ONCE(fd->opened)) {
		err = fnic_cmd(fd, FALCONNIC_OP_OPEN, &req, sizeof(req), NULL, 0);
		if (!err) {
			fnic_set_opened(fd, true);
			/* OPEN destroyed everything any older request made. */
			fnic_quarantine_release(fd);
			fnic_query_nic_port(fd);
			/* After a loss: ib_mad's QP1 must live on (see kverbs.c). */
			fnic_revive_gsi(fd);
			fnic_keepalive_arm(fd);
		} else {
			ibdev_warn_ratelimited(&fd->ib, "NIC did not open: %d\n",
					       err);
		}
	}
	mutex_unlock(&fd->open_lock);
	return err;
}

/* fnic_close_nic destroys every NIC object of this instance. */
void fnic_close_nic(struct fnic_dev *fd)
{
	int err;

	mutex_lock(&fd->open_lock);
	if (READ_ONCE(fd->opened)) {
		err = fnic_cmd(fd, FALCONNIC_OP_CLOSE, NULL, 0, NULL, 0);
		if (!err) {
			fnic_quarantine_release(fd);
		} else {
			ibdev_warn(&fd->ib, "NIC did not close: %d; leaking memory it may still use\n",
				   err);
			fnic_quarantine_leak(fd);
		}
		fnic_set_opened(fd, false);
	} else {
		/* Never opened (or already closed): the NIC holds nothing. */
		fnic_quarantine_release(fd);
	}
	mutex_unlock(&fd->open_lock);
}
