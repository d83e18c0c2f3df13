// SPDX-License-Identifier: GPL-2.0
/*
 * Guest memory handed to the NIC: page lists, shared rings, quarantine.
 *
 * Rings are vmalloc_user memory (virtually contiguous for librxe, any
 * physical pages) described to the NIC by a page list.  A ring lives until
 * the object is destroyed *and* every user mapping is gone *and* the NIC has
 * confirmed it no longer uses it; struct fnic_buf's kref counts those users.
 */
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include "falconnic.h"

static u64 fnic_page_gpa(struct page *p)
{
	/* No vIOMMU in the guest: the physical address is the GPA. */
	return (u64)page_to_phys(p);
}

int fnic_pbl_alloc(struct fnic_pbl_mem *p, u32 npages)
{
	u32 i;

	memset(p, 0, sizeof(*p));
	if (!npages || npages > FALCONNIC_PBL_ENTRIES * FALCONNIC_PBL_ENTRIES)
		return -EINVAL;
	p->npages = npages;
	p->nleaves = DIV_ROUND_UP(npages, FALCONNIC_PBL_ENTRIES);
	p->levels = p->nleaves == 1 ? 1 : 2;
	p->leaves = kcalloc(p->nleaves, sizeof(*p->leaves), GFP_KERNEL);
	if (!p->leaves)
		return -ENOMEM;
	for (i = 0; i < p->nleaves; i++) {
		p->leaves[i] = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!p->leaves[i])
			goto nomem;
	}
	if (p->levels == 2) {
		__le64 *dir;

		p->dir = alloc_page(GFP_KERNEL | __GFP_ZERO);
		if (!p->dir)
			goto nomem;
		dir = page_address(p->dir);
		for (i = 0; i < p->nleaves; i++)
			dir[i] = cpu_to_le64(fnic_page_gpa(p->leaves[i]));
	}
	return 0;
nomem:
	fnic_pbl_free(p);
	return -ENOMEM;
}

void fnic_pbl_set(struct fnic_pbl_mem *p, u32 i, u64 gpa)
{
	__le64 *leaf;

	if (WARN_ON(i >= p->npages))
		return;
	leaf = page_address(p->leaves[i / FALCONNIC_PBL_ENTRIES]);
	leaf[i % FALCONNIC_PBL_ENTRIES] = cpu_to_le64(gpa);
}

void fnic_pbl_free(struct fnic_pbl_mem *p)
{
	u32 i;

	if (p->leaves) {
		for (i = 0; i < p->nleaves; i++)
			if (p->leaves[i])
				__free_page(p->leaves[i]);
		kfree(p->leaves);
	}
	if (p->dir)
		__free_page(p->dir);
	memset(p, 0, sizeof(*p));
}

void fnic_pbl_wire(const struct fnic_pbl_mem *p, struct falconnic_pbl *w)
{
	memset(w, 0, sizeof(*w));
	w->root = cpu_to_le64(fnic_page_gpa(p->levels == 2 ? p->dir :
					     p->leaves[0]));
	w->npages = cpu_to_le32(p->npages);
	w->levels = p->levels;
	w->page_shift = FALCONNIC_PAGE_SHIFT;
}

/*
 * fnic_buf_alloc allocates a ring of slots elements of 1 << log2_elem bytes
 * after the 384-byte struct rxe_queue_buf header, and its page list.
 */
struct fnic_buf *fnic_buf_alloc(u32 slots, u32 log2_elem)
{
	struct rxe_queue_buf *q;
	struct fnic_buf *buf;
	size_t size;
	u32 i, npages;

	BUILD_BUG_ON(sizeof(struct rxe_queue_buf) != FALCONNIC_RING_HDR_SIZE);
	BUILD_BUG_ON(PAGE_SHIFT != FALCONNIC_PAGE_SHIFT);
	BUILD_BUG_ON(FALCONNIC_RING_NIC_POLLING_OFF < offsetof(struct rxe_queue_buf, pad_1) ||
		     FALCONNIC_RING_NIC_POLLING_OFF + 4 > offsetof(struct rxe_queue_buf, producer_index));
	if (!is_power_of_2(slots) || log2_elem > 16 || slots > (1u << 20))
		return ERR_PTR(-EINVAL);
	size = sizeof(*q) + ((size_t)slots << log2_elem);
	buf = kzalloc(sizeof(*buf), GFP_KERNEL);
	if (!buf)
		return ERR_PTR(-ENOMEM);
	kref_init(&buf->ref);
	buf->size = size;
	buf->slots = slots;
	buf->log2_elem = log2_elem;
	buf->vaddr = vmalloc_user(PAGE_ALIGN(size));
	if (!buf->vaddr)
		goto nomem;
	npages = PAGE_ALIGN(size) >> PAGE_SHIFT;
	if (fnic_pbl_alloc(&buf->pbl, npages))
		goto nomem;
	for (i = 0; i < npages; i++)
		fnic_pbl_set(&buf->pbl, i, fnic_page_gpa(vmalloc_to_page(
				buf->vaddr + ((size_t)i << PAGE_SHIFT))));
	q = buf->vaddr;
	q->log2_elem_size = log2_elem;
	q->index_mask = slots - 1;
	return buf;
nomem:
	vfree(buf->vaddr);
	kfree(buf);
	return ERR_PTR(-ENOMEM);
}

static void fnic_buf_release(struct kref *ref)
{
	struct fnic_buf *buf = container_of(ref, struct fnic_buf, ref);

	fnic_pbl_free(&buf->pbl);
	vfree(buf->vaddr);
	kfree(buf);
}

void fnic_buf_put(struct fnic_buf *buf)
{
	if (buf)
		kref_put(&buf->ref, fnic_buf_release);
}

void fnic_buf_wire(const struct fnic_buf *buf, u32 max_sge, u32 max_inline,
		   struct falconnic_ring *w)
{
	memset(w, 0, sizeof(*w));
	fnic_pbl_wire(&buf->pbl, &w->pbl);
	w->slots = cpu_to_le32(buf->slots);
	w->log2_elem_size = cpu_to_le32(buf->log2_elem);
	w->max_sge = cpu_to_le32(max_sge);
	w->max_inline = cpu_to_le32(max_inline);
}

/* fnic_buf_expose makes buf mmappable by the context and fills mminfo. */
int fnic_buf_expose(struct ib_ucontext *uctx, struct fnic_buf *buf,
		    struct rdma_user_mmap_entry **entry, struct mminfo *mi)
{
	struct fnic_mmap_entry *e;
	int err;

	e = kzalloc(sizeof(*e), GFP_KERNEL);
	if (!e)
		return -ENOMEM;
	kref_get(&buf->ref);
	e->buf = buf;
	err = rdma_user_mmap_entry_insert(uctx, &e->rdma, PAGE_ALIGN(buf->size));
	if (err) {
		fnic_buf_put(buf);
		kfree(e);
		return err;
	}
	*entry = &e->rdma;
	mi->offset = rdma_user_mmap_get_offset(&e->rdma);
	mi->size = buf->size;
	mi->pad = 0;
	return 0;
}

void fnic_buf_unexpose(struct rdma_user_mmap_entry *entry)
{
	if (entry)
		rdma_user_mmap_entry_remove(entry);
}

void fnic_mmap_free(struct rdma_user_mmap_entry *rentry)
{
	struct fnic_mmap_entry *e = container_of(rentry, struct fnic_mmap_entry,
						 rdma);

	fnic_buf_put(e->buf);
	kfree(e);
}

/*
 * VMAs hold a buf reference and a module reference: the pages must outlive
 * a destroyed object that is still mapped, and these vm_ops must outlive
 * every mapping.
 */
static void fnic_vm_open(struct vm_area_struct *vma)
{
	struct fnic_buf *buf = vma->vm_private_data;

	kref_get(&buf->ref);
	__module_get(THIS_MODULE);
}

static void fnic_vm_close(struct vm_area_struct *vma)
{
	fnic_buf_put(vma->vm_private_data);
	module_put(THIS_MODULE);
}

static const struct vm_operations_struct fnic_vm_ops = {
	.open = fnic_vm_open,
	.close = fnic_vm_close,
};

int fnic_mmap(struct ib_ucontext *uctx, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *rentry;
	struct fnic_buf *buf;
	int err;

	rentry = rdma_user_mmap_entry_get(uctx, vma);
	if (!rentry)
		return -EINVAL;
	buf = container_of(rentry, struct fnic_mmap_entry, rdma)->buf;
	err = remap_vmalloc_range(vma, buf->vaddr, 0);
	if (!err) {
		vma->vm_ops = &fnic_vm_ops;
		vma->vm_private_data = buf;
		fnic_vm_open(vma);
	}
	rdma_user_mmap_entry_put(rentry);
	return err;
}

/*
 * fnic_quarantine keeps memory the NIC may still read or write (its
 * destroy request went unanswered) until an OPEN or CLOSE reply proves the
 * NIC dropped every object of ours.  Takes its own buf reference; takes
 * ownership of umem and pbl.
 */
void fnic_quarantine(struct fnic_dev *fd, struct fnic_buf *buf,
		     struct ib_umem *umem, struct fnic_pbl_mem *pbl)
{
	struct fnic_qitem *q = kzalloc(sizeof(*q), GFP_KERNEL);

	fnic_count(fd, FNIC_C_QUARANTINED);
	if (!q) {
		/* Cannot track it: leak rather than hand the NIC freed memory. */
		ibdev_warn(&fd->ib, "leaking memory the NIC may still use\n");
		if (buf)
			kref_get(&buf->ref);
		return;
	}
	if (buf)
		kref_get(&buf->ref);
	q->buf = buf;
	q->umem = umem;
	if (pbl) {
		q->pbl = *pbl;
		memset(pbl, 0, sizeof(*pbl));
	}
	spin_lock(&fd->quarantine_lock);
	list_add_tail(&q->list, &fd->quarantine);
	spin_unlock(&fd->quarantine_lock);
}

void fnic_quarantine_release(struct fnic_dev *fd)
{
	struct fnic_qitem *q, *n;
	LIST_HEAD(items);

	spin_lock(&fd->quarantine_lock);
	list_splice_init(&fd->quarantine, &items);
	spin_unlock(&fd->quarantine_lock);
	list_for_each_entry_safe(q, n, &items, list) {
		fnic_buf_put(q->buf);
		if (q->umem)
			ib_umem_release(q->umem);
		fnic_pbl_free(&q->pbl);
		kfree(q);
	}
}

/* fnic_quarantine_leak gives up on quarantined memory for good. */
void fnic_quarantine_leak(struct fnic_dev *fd)
{
	struct fnic_qitem *q, *n;

	spin_lock(&fd->quarantine_lock);
	list_for_each_entry_safe(q, n, &fd->quarantine, list) {
		list_del(&q->list);
		kfree(q);	/* the memory it named stays allocated */
	}
	spin_unlock(&fd->quarantine_lock);
}
