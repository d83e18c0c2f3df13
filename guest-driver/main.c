// SPDX-License-Identifier: GPL-2.0
/*
 * falconnic.ko: RDMA function of the falconnic emulated NIC.
 *
 * An ib_device is bound to the NIC's netdev by `rdma link add NAME type
 * falconnic netdev DEV`, or automatically (module parameter autoprobe) for
 * every virtio_net netdev whose NIC answers PROBE.  Userspace is stock librxe
 * (driver_id RDMA_DRIVER_RXE).
 */
#include <linux/module.h>
#include <linux/netdevice.h>
#include <linux/workqueue.h>
#include <net/addrconf.h>
#include <rdma/rdma_netlink.h>
#include "falconnic.h"

static bool fnic_autoprobe = true;
module_param_named(autoprobe, fnic_autoprobe, bool, 0644);
MODULE_PARM_DESC(autoprobe, "bind virtio_net netdevs whose NIC answers PROBE (default Y)");

static LIST_HEAD(fnic_devs);
static DEFINE_MUTEX(fnic_devs_lock);
static struct workqueue_struct *fnic_wq;

const char *const fnic_counter_names[FNIC_C_NUM] = {
	[FNIC_C_TX_REQ]			= "tx_req",
	[FNIC_C_TX_DOORBELL]		= "tx_doorbell",
	[FNIC_C_DOORBELL_SUPPRESSED]	= "doorbell_suppressed",
	[FNIC_C_DOORBELL_RETRY]		= "doorbell_retry",
	[FNIC_C_TX_ERR]			= "tx_err",
	[FNIC_C_REQ_TIMEOUT]		= "req_timeout",
	[FNIC_C_REQ_ERR_STATUS]		= "req_err_status",
	[FNIC_C_RX_REPLY]		= "rx_reply",
	[FNIC_C_RX_EVENT]		= "rx_event",
	[FNIC_C_RX_SHORT]		= "rx_short",
	[FNIC_C_RX_BAD_MAGIC]		= "rx_bad_magic",
	[FNIC_C_RX_BAD_VERSION]		= "rx_bad_version",
	[FNIC_C_RX_BAD_LENGTH]		= "rx_bad_length",
	[FNIC_C_RX_BAD_FLAGS]		= "rx_bad_flags",
	[FNIC_C_RX_BAD_INSTANCE]	= "rx_bad_instance",
	[FNIC_C_RX_EVENT_BAD_INSTANCE]	= "rx_event_bad_instance",
	[FNIC_C_RX_UNMATCHED_REPLY]	= "rx_unmatched_reply",
	[FNIC_C_RX_REPLY_BAD_BODY]	= "rx_reply_bad_body",
	[FNIC_C_RX_EVENT_UNKNOWN]	= "rx_event_unknown",
	[FNIC_C_RX_EVENT_NO_OBJECT]	= "rx_event_no_object",
	[FNIC_C_QUARANTINED]		= "quarantined",
	[FNIC_C_KPOST_SEND]		= "kpost_send",
	[FNIC_C_KPOST_RECV]		= "kpost_recv",
	[FNIC_C_KPOST_FULL]		= "kpost_full",
	[FNIC_C_KPOST_BAD_WR]		= "kpost_bad_wr",
	[FNIC_C_KPOLL_CQE]		= "kpoll_cqe",
	[FNIC_C_KARM_RETRY]		= "karm_retry",
	[FNIC_C_KCQ_WATCH_POLL]		= "kcq_watch_poll",
	[FNIC_C_KREG_MR]		= "kreg_mr",
	[FNIC_C_KLOCAL_INV]		= "klocal_inv",
	[FNIC_C_KMAP_MR_BAD_PAGE]	= "kmap_mr_bad_page",
	[FNIC_C_KARM_WORD]		= "karm_word",
	[FNIC_C_KARM_DEFERRED]		= "karm_deferred",
	[FNIC_C_KARM_MISSED]		= "karm_missed",
	[FNIC_C_NIC_LOST]		= "nic_lost",
	[FNIC_C_KEEPALIVE]		= "keepalive",
	[FNIC_C_KFLUSH_WR]		= "kflush_wr",
	[FNIC_C_KFLUSH_CQ_FULL]		= "kflush_cq_full",
	[FNIC_C_KFLUSH_CQ_NIC]		= "kflush_cq_nic",
	[FNIC_C_GSI_REVIVED]		= "gsi_revived",
	[FNIC_C_GSI_REVIVE_FAIL]	= "gsi_revive_fail",
};

static ssize_t counters_show(struct device *device,
			     struct device_attribute *attr, char *buf)
{
	struct fnic_dev *fd = rdma_device_to_drv_device(device, struct fnic_dev, ib);
	int i, n = 0;

	for (i = 0; i < FNIC_C_NUM; i++)
		n += sysfs_emit_at(buf, n, "%s %lld\n", fnic_counter_names[i],
				   (long long)atomic64_read(&fd->counters[i]));
	return n;
}
static DEVICE_ATTR_RO(counters);

static ssize_t nic_present_show(struct device *device,
				struct device_attribute *attr, char *buf)
{
	struct fnic_dev *fd = rdma_device_to_drv_device(device, struct fnic_dev, ib);

	return sysfs_emit(buf, "%d\n", fd->nic_present);
}
static DEVICE_ATTR_RO(nic_present);

static ssize_t parent_show(struct device *device,
			   struct device_attribute *attr, char *buf)
{
	struct fnic_dev *fd = rdma_device_to_drv_device(device, struct fnic_dev, ib);

	return sysfs_emit(buf, "%s\n", netdev_name(fd->ndev));
}
static DEVICE_ATTR_RO(parent);

static struct attribute *fnic_attrs[] = {
	&dev_attr_counters.attr,
	&dev_attr_nic_present.attr,
	&dev_attr_parent.attr,
	NULL,
};

const struct attribute_group fnic_attr_group = {
	.attrs = fnic_attrs,
};

static struct fnic_dev *fnic_find(struct net_device *ndev)
{
	struct fnic_dev *fd;

	list_for_each_entry(fd, &fnic_devs, list)
		if (fd->ndev == ndev)
			return fd;
	return NULL;
}

/* fnic_dev_release undoes fnic_add; called from the ib core's dealloc. */
void fnic_dev_release(struct fnic_dev *fd)
{
	fnic_chan_shutdown(fd);	/* no loss handling or keepalive from here on */
	fnic_close_nic(fd);
	fnic_chan_stop(fd);
	xa_destroy(&fd->cqs);
	xa_destroy(&fd->qps);
	xa_destroy(&fd->srqs);
	ida_destroy(&fd->pd_ida);
	ida_destroy(&fd->mr_ida);
	ida_destroy(&fd->cq_ida);
	ida_destroy(&fd->qp_ida);
	ida_destroy(&fd->srq_ida);
	ida_destroy(&fd->ah_ida);
	mutex_lock(&fnic_devs_lock);
	list_del_init(&fd->list);
	mutex_unlock(&fnic_devs_lock);
	dev_put(fd->ndev);
}

/*
 * fnic_add binds an ib_device to ndev.  With need_nic (autoprobe) it gives
 * up when the NIC does not answer PROBE; from `rdma link add` it registers
 * anyway with default limits and a DOWN port, and every verb that needs the
 * NIC fails with a clean error until the NIC answers OPEN.
 */
static int fnic_add(const char *name, struct net_device *ndev, bool need_nic)
{
	struct fnic_dev *fd;
	int err;

	mutex_lock(&fnic_devs_lock);
	if (fnic_find(ndev)) {
		mutex_unlock(&fnic_devs_lock);
		return -EEXIST;
	}
	fd = ib_alloc_device(fnic_dev, ib);
	if (!fd) {
		mutex_unlock(&fnic_devs_lock);
		return -ENOMEM;
	}
	dev_hold(ndev);
	fd->ndev = ndev;
	INIT_LIST_HEAD(&fd->list);
	list_add_tail(&fd->list, &fnic_devs);	/* claims ndev */
	mutex_unlock(&fnic_devs_lock);

	fnic_chan_init(fd);
	ida_init(&fd->pd_ida);
	ida_init(&fd->mr_ida);
	ida_init(&fd->cq_ida);
	ida_init(&fd->qp_ida);
	ida_init(&fd->srq_ida);
	ida_init(&fd->ah_ida);
	xa_init_flags(&fd->cqs, XA_FLAGS_LOCK_BH);
	xa_init_flags(&fd->qps, XA_FLAGS_LOCK_BH);
	xa_init_flags(&fd->srqs, XA_FLAGS_LOCK_BH);
	spin_lock_init(&fd->quarantine_lock);
	INIT_LIST_HEAD(&fd->quarantine);
	/* From here on ib_dealloc_device undoes everything (dealloc_driver). */
	ib_set_device_ops(&fd->ib, &fnic_dev_ops);
	fnic_chan_start(fd);

	err = fnic_probe_nic(fd);
	if (err && need_nic)
		goto fail;
	if (err)
		netdev_warn(ndev, "falconnic: NIC did not answer PROBE (%d); registering with default limits\n",
			    err);
	fnic_fill_attrs(fd);

	strscpy(fd->ib.node_desc, "falconnic", sizeof(fd->ib.node_desc));
	fd->ib.node_type = RDMA_NODE_IB_CA;
	fd->ib.phys_port_cnt = 1;
	fd->ib.num_comp_vectors = 1;
	fd->ib.local_dma_lkey = 0;
	addrconf_addr_eui48((unsigned char *)&fd->ib.node_guid, ndev->dev_addr);
	fd->ib.uverbs_cmd_mask |= BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |
				  BIT_ULL(IB_USER_VERBS_CMD_POST_RECV) |
				  BIT_ULL(IB_USER_VERBS_CMD_POST_SRQ_RECV) |
				  BIT_ULL(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
	err = ib_device_set_netdev(&fd->ib, ndev, 1);
	if (err)
		goto fail;
	/* Virtual DMA (no dma_device): we hand the NIC page addresses ourselves. */
	err = ib_register_device(&fd->ib, name, NULL);
	if (err)
		goto fail;
	/* Registered: from now on only the core frees fd (dealloc_driver). */
	if (fd->nic_present)
		fnic_ensure_open(fd);
	return 0;
fail:
	ib_dealloc_device(&fd->ib);	/* calls fnic_dev_release */
	return err;
}

static int fnic_newlink(const char *name, struct net_device *ndev)
{
	if (ndev->type != ARPHRD_ETHER)
		return -EINVAL;
	/* Let a running autoprobe of this netdev finish first (-EEXIST then). */
	flush_workqueue(fnic_wq);
	return fnic_add(name, ndev, false);
}

static struct rdma_link_ops fnic_link_ops = {
	.type = "falconnic",
	.newlink = fnic_newlink,
};

struct fnic_probe_work {
	struct work_struct	work;
	struct net_device	*ndev;
};

static void fnic_probe_work_fn(struct work_struct *w)
{
	struct fnic_probe_work *pw = container_of(w, struct fnic_probe_work, work);
	int err;

	err = fnic_add("falcon%d", pw->ndev, true);
	if (err && err != -EEXIST)
		netdev_dbg(pw->ndev, "falconnic: no NIC answered (%d)\n", err);
	dev_put(pw->ndev);
	kfree(pw);
}

static bool fnic_is_virtio_net(struct net_device *ndev)
{
	struct device *parent = ndev->dev.parent;

	return ndev->type == ARPHRD_ETHER && parent && parent->driver &&
	       !strcmp(parent->driver->name, "virtio_net");
}

static void fnic_schedule_probe(struct net_device *ndev)
{
	struct fnic_probe_work *pw;

	if (!fnic_autoprobe || !fnic_is_virtio_net(ndev))
		return;
	pw = kzalloc(sizeof(*pw), GFP_KERNEL);
	if (!pw)
		return;
	INIT_WORK(&pw->work, fnic_probe_work_fn);
	dev_hold(ndev);
	pw->ndev = ndev;
	queue_work(fnic_wq, &pw->work);
}

static void fnic_port_event(struct fnic_dev *fd, enum ib_event_type type)
{
	struct ib_event ev = {
		.device = &fd->ib,
		.element.port_num = 1,
		.event = type,
	};

	if (!ib_device_try_get(&fd->ib))
		return;	/* not registered yet, or going away */
	ib_dispatch_event(&ev);
	ib_device_put(&fd->ib);
}

static int fnic_netdev_event(struct notifier_block *nb, unsigned long event,
			     void *ptr)
{
	struct net_device *ndev = netdev_notifier_info_to_dev(ptr);
	struct fnic_dev *fd;

	if (event == NETDEV_UP) {
		mutex_lock(&fnic_devs_lock);
		fd = fnic_find(ndev);
		mutex_unlock(&fnic_devs_lock);
		if (!fd)
			fnic_schedule_probe(ndev);
	}
	mutex_lock(&fnic_devs_lock);
	fd = fnic_find(ndev);
	if (fd) {
		switch (event) {
		case NETDEV_UNREGISTER:
			ib_unregister_device_queued(&fd->ib);
			break;
		case NETDEV_UP:
		case NETDEV_CHANGE:
			if (netif_running(ndev) && netif_carrier_ok(ndev) &&
			    fd->nic_present && READ_ONCE(fd->nic_port_active))
				fnic_port_event(fd, IB_EVENT_PORT_ACTIVE);
			else
				fnic_port_event(fd, IB_EVENT_PORT_ERR);
			break;
		case NETDEV_DOWN:
			fnic_port_event(fd, IB_EVENT_PORT_ERR);
			break;
		default:
			break;
		}
	}
	mutex_unlock(&fnic_devs_lock);
	return NOTIFY_OK;
}

static struct notifier_block fnic_netdev_nb = {
	.notifier_call = fnic_netdev_event,
};

static int __init fnic_init(void)
{
	int err;

	fnic_wq = alloc_ordered_workqueue("falconnic", 0);
	if (!fnic_wq)
		return -ENOMEM;
	rdma_link_register(&fnic_link_ops);
	err = register_netdevice_notifier(&fnic_netdev_nb);
	if (err) {
		rdma_link_unregister(&fnic_link_ops);
		destroy_workqueue(fnic_wq);
		return err;
	}
	pr_info("falconnic: loaded (control EtherType %#x, uapi v%d)\n",
		FALCONNIC_ETHERTYPE, FALCONNIC_VERSION);
	return 0;
}

static void __exit fnic_exit(void)
{
	struct fnic_dev *fd;

	unregister_netdevice_notifier(&fnic_netdev_nb);
	rdma_link_unregister(&fnic_link_ops);
	destroy_workqueue(fnic_wq);	/* drains pending probes */
	/*
	 * Only our devices: ib_unregister_driver(RXE) would take rdma_rxe's.
	 * The core frees each device (dealloc_driver removes it from the
	 * list); the device reference keeps fd valid across a concurrent
	 * queued unregistration.
	 */
	for (;;) {
		mutex_lock(&fnic_devs_lock);
		fd = list_first_entry_or_null(&fnic_devs, struct fnic_dev, list);
		if (fd)
			get_device(&fd->ib.dev);
		mutex_unlock(&fnic_devs_lock);
		if (!fd)
			break;
		ib_unregister_device(&fd->ib);
		mutex_lock(&fnic_devs_lock);
		list_del_init(&fd->list);	/* in case the core has not yet */
		mutex_unlock(&fnic_devs_lock);
		put_device(&fd->ib.dev);
	}
	pr_info("falconnic: unloaded\n");
}

module_init(fnic_init);
module_exit(fnic_exit);
MODULE_AUTHOR("falconnic");
MODULE_DESCRIPTION("falconnic RDMA function (Soft-RoCE user ABI, verbs in the NIC)");
MODULE_LICENSE("GPL");
MODULE_ALIAS_RDMA_LINK("falconnic");
