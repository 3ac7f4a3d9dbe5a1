/* fc_mem.c: fakecuda (CPU test double for libcuda.so.1) memory: the device reservation and the
 * allocation table, pinned host memory, pointer attributes, and every copy and memset entry point
 * (each turned into a queued stream operation; the sync forms then wait for it). */
#include "fc_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

typedef struct {
    uintptr_t base;
    size_t size, mapped;
    int kind; /* FC_PTR_DEVICE or FC_PTR_PINNED */
    int registered, free_pending;
    fc_ctx *ctx;
    int pooled; /* from cuMemAllocAsync: counted in the pool until its free is enqueued */
} fc_alloc;

static fc_alloc *allocs;
static size_t nallocs;
static unsigned char *dev_base;
static size_t dev_size, dev_next, dev_used;

/* Device addresses never overlap the host heap and are never reused, so a host pointer or a
 * stale device pointer is always recognized. */
int fc_mem_init(void)
{
    for (size_t sz = (size_t)64 << 30; sz >= ((size_t)256 << 20); sz >>= 1) {
        void *p = mmap(NULL, sz, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p != MAP_FAILED) {
            dev_base = p;
            dev_size = sz;
            dev_next = 1 << 20; /* keep the first MiB unmapped: small offsets from 0 stay invalid */
            return 0;
        }
    }
    return -ENOMEM;
}

static int in_reservation(uintptr_t p)
{
    return p >= (uintptr_t)dev_base && p < (uintptr_t)dev_base + dev_size;
}

static fc_alloc *alloc_find(uintptr_t p, size_t n)
{
    for (size_t i = 0; i < nallocs; i++)
        if (p >= allocs[i].base && p - allocs[i].base < allocs[i].size) {
            if (n > allocs[i].size - (p - allocs[i].base)) return NULL;
            return &allocs[i];
        }
    return NULL;
}

int fc_ptr_check(uintptr_t p, size_t n)
{
    fc_alloc *a = alloc_find(p, n ? n : 1);
    if (a) return a->free_pending ? FC_PTR_BAD : a->kind;
    if (in_reservation(p) || (p && alloc_find(p, 1))) return FC_PTR_BAD;
    return p ? FC_PTR_PAGEABLE : FC_PTR_BAD;
}

/* Device memory (no capture rule: a stream-ordered allocation is no unsafe call). */
static CUresult fc_dev_alloc(CUdeviceptr *dptr, size_t n)
{
    if (!dptr || n == 0) return CUDA_ERROR_INVALID_VALUE;
    size_t mapped = (n + 4095) & ~(size_t)4095;
    if (mapped < n || mapped > dev_size - dev_next) return CUDA_ERROR_OUT_OF_MEMORY;
    unsigned char *p = dev_base + dev_next;
    if (mprotect(p, mapped, PROT_READ | PROT_WRITE)) return CUDA_ERROR_OUT_OF_MEMORY;
    memset(p, 0xCD, mapped);
    fc_alloc a = {(uintptr_t)p, n, mapped, FC_PTR_DEVICE, 0, 0, fc_cur_ctx(), 0};
    if (fc_vec_push((void **)&allocs, &nallocs, sizeof(a), &a)) {
        mprotect(p, mapped, PROT_NONE);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    dev_next += mapped;
    dev_used += mapped;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}
static CUresult fc_mem_alloc(CUdeviceptr *dptr, size_t n)
{
    CUresult r = fc_capture_unsafe_check();
    return r ? r : fc_dev_alloc(dptr, n);
}
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t n) { FC_API(1, fc_mem_alloc(dptr, n)); }

static void alloc_remove(fc_alloc *a)
{
    if (a) *a = allocs[--nallocs];
}

CUresult fc_mem_free_now(CUdeviceptr dp)
{
    uintptr_t p = (uintptr_t)dp;
    fc_alloc *a = alloc_find(p, 1);
    if (!a || a->base != p || a->kind != FC_PTR_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    madvise((void *)p, a->mapped, MADV_DONTNEED);
    mprotect((void *)p, a->mapped, PROT_NONE);
    dev_used -= a->mapped;
    alloc_remove(a);
    return CUDA_SUCCESS;
}

void fc_mem_ctx_gone(const fc_ctx *c)
{
    for (size_t i = nallocs; i-- > 0;) {
        fc_alloc *a = &allocs[i];
        if (a->ctx != c)
            continue;
        if (a->kind == FC_PTR_DEVICE) {
            if (a->pooled) fc_g.pool_in_use -= a->mapped;
            fc_mem_free_now((CUdeviceptr)a->base);
        } else if (a->registered) { /* the program's memory again */
            alloc_remove(a);
        } else { /* page-locked memory of the context: no longer readable or writable (kept out of the heap) */
            mprotect((void *)a->base, (a->size + 4095) & ~(size_t)4095, PROT_NONE);
            alloc_remove(a);
        }
    }
}

static CUresult fc_mem_free(CUdeviceptr p)
{
    CUresult r = fc_capture_unsafe_check();
    if (r) return r;
    if (!p) return CUDA_SUCCESS;
    fc_alloc *a = alloc_find((uintptr_t)p, 1);
    if (!a || a->base != (uintptr_t)p || a->kind != FC_PTR_DEVICE || a->free_pending)
        return CUDA_ERROR_INVALID_VALUE;
    r = fc_sync_all(); /* cuMemFree synchronizes implicitly */
    CUresult r2 = fc_mem_free_now(p);
    return r2 ? r2 : r;
}
CUresult cuMemFree_v2(CUdeviceptr p) { FC_API(1, fc_mem_free(p)); }

static CUresult fc_mem_alloc_async(CUdeviceptr *dptr, size_t n, CUstream h, int ptds)
{
    fc_stream *s;
    CUresult r = fc_stream_resolve(h, ptds, &s);
    if (r) return r;
    if (s->cap) return CUDA_ERROR_NOT_SUPPORTED; /* no mem-alloc graph nodes in the fake */
    /* on a stream that does not capture: the legacy stream's rule first, then as cuMemAlloc (the GPU's
     * table: IMPLICIT beside a blocking stream's capture, whatever the mode) */
    if ((r = fc_legacy_capture_check(s, 1))) return r;
    r = fc_capture_unsafe_check();
    if (r) return r;
    size_t mapped = (n + 4095) & ~(size_t)4095;
    if (fc_g.pool_limit && (mapped < n || fc_g.pool_in_use + mapped > fc_g.pool_limit))
        return CUDA_ERROR_OUT_OF_MEMORY;
    r = fc_dev_alloc(dptr, n);
    if (r) return r;
    fc_alloc *a = alloc_find((uintptr_t)*dptr, 1);
    a->pooled = 1;
    fc_g.pool_in_use += a->mapped;
    return CUDA_SUCCESS;
}
CUresult cuMemAllocAsync(CUdeviceptr *d, size_t n, CUstream s) { FC_API(1, fc_mem_alloc_async(d, n, s, FC_LEGACY)); }
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *d, size_t n, CUstream s) { FC_API(1, fc_mem_alloc_async(d, n, s, FC_PTDS)); }
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *d, size_t n, CUmemoryPool p, CUstream s) { FC_API(1, CUDA_ERROR_NOT_SUPPORTED); }
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *d, size_t n, CUmemoryPool p, CUstream s) { FC_API(1, CUDA_ERROR_NOT_SUPPORTED); }

static CUresult fc_mem_free_async(CUdeviceptr p, CUstream h, int ptds)
{
    fc_stream *s;
    CUresult r = fc_stream_resolve(h, ptds, &s);
    if (r) return r;
    fc_alloc *a = alloc_find((uintptr_t)p, 1);
    if (!a || a->base != (uintptr_t)p || a->kind != FC_PTR_DEVICE || a->free_pending)
        return CUDA_ERROR_INVALID_VALUE;
    if (s->cap) return CUDA_ERROR_NOT_SUPPORTED;
    /* on a stream that does not capture: the legacy stream's rule first, then as cuMemFree (the GPU's table) */
    if ((r = fc_legacy_capture_check(s, 1))) return r;
    r = fc_capture_unsafe_check();
    if (r) return r;
    fc_op *op = fc_op_new(FC_OP_FREE);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    op->freeptr = p;
    /* Marked before the submission, which may run queued work, this free included: an entry removed from
     * the table moves another into its place, so a is not looked at after it */
    a->free_pending = 1; /* later enqueues that touch it are errors */
    size_t pooled = a->pooled ? a->mapped : 0;
    fc_g.pool_in_use -= pooled;
    r = fc_submit(s, op, NULL);
    if (r && (a = alloc_find((uintptr_t)p, 1)) != NULL) { /* not enqueued */
        a->free_pending = 0;
        fc_g.pool_in_use += pooled;
    }
    return r;
}
CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) { FC_API(1, fc_mem_free_async(p, s, FC_LEGACY)); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) { FC_API(1, fc_mem_free_async(p, s, FC_PTDS)); }

static CUresult fc_host_alloc(void **pp, size_t n, unsigned flags)
{
    if (!pp || n == 0) return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_capture_unsafe_check();
    if (r) return r;
    void *p = aligned_alloc(4096, (n + 4095) & ~(size_t)4095);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    fc_alloc a = {(uintptr_t)p, n, n, FC_PTR_PINNED, 0, 0, fc_cur_ctx(), 0};
    if (fc_vec_push((void **)&allocs, &nallocs, sizeof(a), &a)) {
        free(p);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return CUDA_SUCCESS;
}
CUresult cuMemAllocHost_v2(void **pp, size_t n) { fc_host_alloc_wait(); FC_API(1, fc_host_alloc(pp, n, 0)); }
CUresult cuMemHostAlloc(void **pp, size_t n, unsigned int flags) { fc_host_alloc_wait(); FC_API(1, fc_host_alloc(pp, n, flags)); }

static CUresult fc_host_free(void *p)
{
    fc_alloc *a = alloc_find((uintptr_t)p, 1);
    if (!p || !a || a->base != (uintptr_t)p || a->kind != FC_PTR_PINNED || a->registered)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_capture_unsafe_check();
    if (r) return r;
    r = fc_sync_all(); /* pending copies may still read it */
    /* (found again: the work just run may have freed other allocations, which moves table entries) */
    alloc_remove(alloc_find((uintptr_t)p, 1));
    free(p);
    return r;
}
CUresult cuMemFreeHost(void *p) { FC_API(1, fc_host_free(p)); }

static CUresult fc_host_register(void *p, size_t n, unsigned flags)
{
    if (!p || n == 0) return CUDA_ERROR_INVALID_VALUE;
    if (in_reservation((uintptr_t)p)) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_capture_unsafe_check();
    if (r) return r;
    for (size_t i = 0; i < nallocs; i++)
        if ((uintptr_t)p < allocs[i].base + allocs[i].size && allocs[i].base < (uintptr_t)p + n)
            return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    fc_alloc a = {(uintptr_t)p, n, n, FC_PTR_PINNED, 1, 0, fc_cur_ctx(), 0};
    return fc_vec_push((void **)&allocs, &nallocs, sizeof(a), &a) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}
CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned int flags) { FC_API(1, fc_host_register(p, n, flags)); }

static CUresult fc_host_unregister(void *p)
{
    fc_alloc *a = alloc_find((uintptr_t)p, 1);
    if (!a || a->base != (uintptr_t)p || !a->registered) return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    CUresult r = fc_capture_unsafe_check();
    if (r) return r;
    r = fc_sync_all();
    alloc_remove(alloc_find((uintptr_t)p, 1)); /* (found again, as in fc_host_free) */
    return r;
}
CUresult cuMemHostUnregister(void *p) { FC_API(1, fc_host_unregister(p)); }

static CUresult fc_mem_info(size_t *fr, size_t *total)
{
    if (!fr || !total) return CUDA_ERROR_INVALID_VALUE;
    *total = dev_size;
    *fr = dev_size - dev_used;
    return CUDA_SUCCESS;
}
CUresult cuMemGetInfo_v2(size_t *fr, size_t *total) { FC_API(1, fc_mem_info(fr, total)); }
CUresult cuMemUnmap(CUdeviceptr p, size_t n) { FC_API(1, CUDA_ERROR_NOT_SUPPORTED); }
CUresult cuMemRelease(CUmemGenericAllocationHandle h) { FC_API(1, CUDA_ERROR_NOT_SUPPORTED); }
CUresult cuMemAddressReserve(CUdeviceptr *p, size_t n, size_t al, CUdeviceptr a, unsigned long long f) { FC_API(1, CUDA_ERROR_NOT_SUPPORTED); }
CUresult cuMemAddressFree(CUdeviceptr p, size_t n) { FC_API(1, CUDA_ERROR_NOT_SUPPORTED); }
CUresult cuMemCreate(CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *pr, unsigned long long f) { FC_API(1, CUDA_ERROR_NOT_SUPPORTED); }
CUresult cuMemMap(CUdeviceptr p, size_t n, size_t o, CUmemGenericAllocationHandle h, unsigned long long f) { FC_API(1, CUDA_ERROR_NOT_SUPPORTED); }
CUresult cuMemSetAccess(CUdeviceptr p, size_t n, const CUmemAccessDesc *d, size_t c) { FC_API(1, CUDA_ERROR_NOT_SUPPORTED); }

static CUresult fc_ptr_attr(void *data, CUpointer_attribute attr, CUdeviceptr dp)
{
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t p = (uintptr_t)dp;
    fc_alloc *a = alloc_find(p, 1);
    if (attr == CU_POINTER_ATTRIBUTE_IS_MANAGED) {
        *(unsigned *)data = 0;
        return CUDA_SUCCESS;
    }
    if (!a) return CUDA_ERROR_INVALID_VALUE; /* pageable or unknown, as the real driver says */
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = a->kind == FC_PTR_DEVICE ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = (CUcontext)a->ctx; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = dp; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (a->kind == FC_PTR_DEVICE) return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)p;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = 0; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = a->base; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = a->size; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(int *)data = 1; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = (unsigned long long)(a - allocs) + 1; return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: *(int *)data = 1; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}
CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr p) { FC_API(1, fc_ptr_attr(data, attr, p)); }

static CUresult fc_ptr_attrs(unsigned n, CUpointer_attribute *attrs, void **data, CUdeviceptr p)
{
    if (!attrs || !data) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++) {
        CUresult r = fc_ptr_attr(data[i], attrs[i], p);
        /* The plural form reports unknown pointers as "not device memory" instead of failing. */
        if (r && attrs[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) *(unsigned *)data[i] = 0, r = CUDA_SUCCESS;
        else if (r && attrs[i] == CU_POINTER_ATTRIBUTE_CONTEXT) *(CUcontext *)data[i] = NULL, r = CUDA_SUCCESS;
        if (r) return r;
    }
    return CUDA_SUCCESS;
}
CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *a, void **d, CUdeviceptr p) { FC_API(1, fc_ptr_attrs(n, a, d, p)); }

/* ---- copies ---- */
typedef struct {
    CUmemorytype type;
    const void *host;
    CUdeviceptr dev;
    size_t x, y, z, pitch, height;
} fc_side;

static CUresult side_resolve(const fc_side *sd, size_t w, size_t h, size_t d, unsigned char **addr,
                             int *pageable, int *isdev, size_t *span)
{
    size_t pitch = sd->pitch ? sd->pitch : w, height = sd->height ? sd->height : h;
    if ((h > 1 || d > 1) && pitch < w + sd->x) return CUDA_ERROR_INVALID_VALUE;
    if (d > 1 && height < h + sd->y) return CUDA_ERROR_INVALID_VALUE;
    uintptr_t base;
    switch (sd->type) {
    case CU_MEMORYTYPE_HOST: base = (uintptr_t)sd->host; break;
    case CU_MEMORYTYPE_DEVICE: case CU_MEMORYTYPE_UNIFIED: base = (uintptr_t)sd->dev; break;
    case CU_MEMORYTYPE_ARRAY: return CUDA_ERROR_NOT_SUPPORTED;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    uintptr_t start = base + sd->x + sd->y * pitch + sd->z * pitch * height;
    *span = (d - 1) * pitch * height + (h - 1) * pitch + w;
    int k = fc_ptr_check(start, *span);
    if (k == FC_PTR_BAD) return CUDA_ERROR_INVALID_VALUE;
    if (sd->type == CU_MEMORYTYPE_DEVICE && k == FC_PTR_PAGEABLE) return CUDA_ERROR_INVALID_VALUE;
    if (sd->type == CU_MEMORYTYPE_HOST && k == FC_PTR_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    *addr = (unsigned char *)start;
    *pageable = k == FC_PTR_PAGEABLE;
    *isdev = k != FC_PTR_PAGEABLE;
    return CUDA_SUCCESS;
}

static CUresult copy_build(const fc_side *src, const fc_side *dst, size_t w, size_t h, size_t d, fc_copy *c)
{
    memset(c, 0, sizeof(*c));
    c->width = w, c->height = h ? h : 1, c->depth = d ? d : 1;
    if (w == 0 || h == 0 || d == 0) return CUDA_SUCCESS;
    CUresult r = side_resolve(src, w, c->height, c->depth, &c->src, &c->src_pageable, &c->src_dev, &c->sspan);
    if (!r) r = side_resolve(dst, w, c->height, c->depth, &c->dst, &c->dst_pageable, &c->dst_dev, &c->dspan);
    c->spitch = src->pitch ? src->pitch : w, c->sheight = src->height ? src->height : c->height;
    c->dpitch = dst->pitch ? dst->pitch : w, c->dheight = dst->height ? dst->height : c->height;
    return r;
}

CUresult fc_copy_from3d(const CUDA_MEMCPY3D *p, fc_copy *out)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    fc_side s = {p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch, p->srcHeight};
    fc_side d = {p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch, p->dstHeight};
    if ((p->srcMemoryType == CU_MEMORYTYPE_ARRAY && p->srcArray) || (p->dstMemoryType == CU_MEMORYTYPE_ARRAY && p->dstArray))
        return CUDA_ERROR_NOT_SUPPORTED;
    return copy_build(&s, &d, p->WidthInBytes, p->Height, p->Depth, out);
}

CUresult fc_copy_exec(fc_copy *c)
{
    if (!c->width || !c->src) return CUDA_SUCCESS;
    /* Memory freed in stream order after the copy was queued: CUDA would fault. */
    if ((c->src_dev && fc_ptr_check((uintptr_t)c->src, c->sspan) == FC_PTR_BAD) ||
        (c->dst_dev && fc_ptr_check((uintptr_t)c->dst, c->dspan) == FC_PTR_BAD))
        return FC_ERR_ASYNC;
    for (size_t z = 0; z < c->depth; z++)
        for (size_t y = 0; y < c->height; y++)
            memmove(c->dst + z * c->dpitch * c->dheight + y * c->dpitch,
                    c->src + z * c->spitch * c->sheight + y * c->spitch, c->width);
    return CUDA_SUCCESS;
}

static CUresult copy_1d(CUmemorytype dt, void *dh, CUdeviceptr dd, CUmemorytype st, const void *sh,
                        CUdeviceptr sdv, size_t n, CUstream h, int ptds, int sync)
{
    fc_side s = {st, sh, sdv, 0, 0, 0, 0, 0}, d = {dt, dh, dd, 0, 0, 0, 0, 0};
    fc_copy c;
    CUresult r = copy_build(&s, &d, n, 1, 1, &c);
    return r ? r : fc_copy_submit(&c, h, ptds, sync);
}

static CUresult copy_2d(const CUDA_MEMCPY2D *p, CUstream h, int ptds, int sync)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    fc_side s = {p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY, 0, p->srcPitch, 0};
    fc_side d = {p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY, 0, p->dstPitch, 0};
    if (p->srcMemoryType == CU_MEMORYTYPE_ARRAY || p->dstMemoryType == CU_MEMORYTYPE_ARRAY) return CUDA_ERROR_NOT_SUPPORTED;
    fc_copy c;
    CUresult r = copy_build(&s, &d, p->WidthInBytes, p->Height, 1, &c);
    return r ? r : fc_copy_submit(&c, h, ptds, sync);
}

static CUresult copy_3d(const CUDA_MEMCPY3D *p, CUstream h, int ptds, int sync)
{
    fc_copy c;
    CUresult r = fc_copy_from3d(p, &c);
    return r ? r : fc_copy_submit(&c, h, ptds, sync);
}

static CUresult copy_3dpeer(const CUDA_MEMCPY3D_PEER *p, CUstream h, int ptds, int sync)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    if ((p->srcContext && !fc_obj_valid(p->srcContext, FC_OBJ_CTX)) ||
        (p->dstContext && !fc_obj_valid(p->dstContext, FC_OBJ_CTX)))
        return CUDA_ERROR_INVALID_CONTEXT;
    CUDA_MEMCPY3D m = {p->srcXInBytes, p->srcY, p->srcZ, p->srcLOD, p->srcMemoryType, p->srcHost, p->srcDevice,
                       p->srcArray, NULL, p->srcPitch, p->srcHeight, p->dstXInBytes, p->dstY, p->dstZ, p->dstLOD,
                       p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, NULL, p->dstPitch, p->dstHeight,
                       p->WidthInBytes, p->Height, p->Depth};
    return copy_3d(&m, h, ptds, sync);
}

static CUresult copy_peer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream h, int ptds, int sync)
{
    if (!fc_obj_valid(dc, FC_OBJ_CTX) || !fc_obj_valid(sc, FC_OBJ_CTX)) return CUDA_ERROR_INVALID_CONTEXT;
    return copy_1d(CU_MEMORYTYPE_DEVICE, NULL, d, CU_MEMORYTYPE_DEVICE, NULL, s, n, h, ptds, sync);
}

#define HD CU_MEMORYTYPE_HOST
#define DV CU_MEMORYTYPE_DEVICE
#define UN CU_MEMORYTYPE_UNIFIED
CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) { FC_TRACED(cuMemcpy, 1, copy_1d(UN, NULL, d, UN, NULL, s, n, NULL, FC_LEGACY, 1)); }
CUresult cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) { FC_TRACED(cuMemcpy_ptds, 1, copy_1d(UN, NULL, d, UN, NULL, s, n, NULL, FC_PTDS, 1)); }
CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) { FC_TRACED(cuMemcpyAsync, 1, copy_1d(UN, NULL, d, UN, NULL, s, n, h, FC_LEGACY, 0)); }
CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) { FC_TRACED(cuMemcpyAsync_ptsz, 1, copy_1d(UN, NULL, d, UN, NULL, s, n, h, FC_PTDS, 0)); }
CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *s, size_t n) { FC_TRACED(cuMemcpyHtoD_v2, 1, copy_1d(DV, NULL, d, HD, s, 0, n, NULL, FC_LEGACY, 1)); }
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void *s, size_t n) { FC_TRACED(cuMemcpyHtoD_v2_ptds, 1, copy_1d(DV, NULL, d, HD, s, 0, n, NULL, FC_PTDS, 1)); }
CUresult cuMemcpyDtoH_v2(void *d, CUdeviceptr s, size_t n) { FC_TRACED(cuMemcpyDtoH_v2, 1, copy_1d(HD, d, 0, DV, NULL, s, n, NULL, FC_LEGACY, 1)); }
CUresult cuMemcpyDtoH_v2_ptds(void *d, CUdeviceptr s, size_t n) { FC_TRACED(cuMemcpyDtoH_v2_ptds, 1, copy_1d(HD, d, 0, DV, NULL, s, n, NULL, FC_PTDS, 1)); }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { FC_TRACED(cuMemcpyDtoD_v2, 1, copy_1d(DV, NULL, d, DV, NULL, s, n, NULL, FC_LEGACY, 1)); }
CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) { FC_TRACED(cuMemcpyDtoD_v2_ptds, 1, copy_1d(DV, NULL, d, DV, NULL, s, n, NULL, FC_PTDS, 1)); }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream h) { FC_TRACED(cuMemcpyHtoDAsync_v2, 1, copy_1d(DV, NULL, d, HD, s, 0, n, h, FC_LEGACY, 0)); }
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream h) { FC_TRACED(cuMemcpyHtoDAsync_v2_ptsz, 1, copy_1d(DV, NULL, d, HD, s, 0, n, h, FC_PTDS, 0)); }
CUresult cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream h) { FC_TRACED(cuMemcpyDtoHAsync_v2, 1, copy_1d(HD, d, 0, DV, NULL, s, n, h, FC_LEGACY, 0)); }
CUresult cuMemcpyDtoHAsync_v2_ptsz(void *d, CUdeviceptr s, size_t n, CUstream h) { FC_TRACED(cuMemcpyDtoHAsync_v2_ptsz, 1, copy_1d(HD, d, 0, DV, NULL, s, n, h, FC_PTDS, 0)); }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) { FC_TRACED(cuMemcpyDtoDAsync_v2, 1, copy_1d(DV, NULL, d, DV, NULL, s, n, h, FC_LEGACY, 0)); }
CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) { FC_TRACED(cuMemcpyDtoDAsync_v2_ptsz, 1, copy_1d(DV, NULL, d, DV, NULL, s, n, h, FC_PTDS, 0)); }
CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *p) { FC_TRACED(cuMemcpy2D_v2, 1, copy_2d(p, NULL, FC_LEGACY, 1)); }
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *p) { FC_TRACED(cuMemcpy2D_v2_ptds, 1, copy_2d(p, NULL, FC_PTDS, 1)); }
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *p) { FC_TRACED(cuMemcpy2DUnaligned_v2, 1, copy_2d(p, NULL, FC_LEGACY, 1)); }
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *p) { FC_TRACED(cuMemcpy2DUnaligned_v2_ptds, 1, copy_2d(p, NULL, FC_PTDS, 1)); }
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *p, CUstream h) { FC_TRACED(cuMemcpy2DAsync_v2, 1, copy_2d(p, h, FC_LEGACY, 0)); }
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *p, CUstream h) { FC_TRACED(cuMemcpy2DAsync_v2_ptsz, 1, copy_2d(p, h, FC_PTDS, 0)); }
CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *p) { FC_TRACED(cuMemcpy3D_v2, 1, copy_3d(p, NULL, FC_LEGACY, 1)); }
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *p) { FC_TRACED(cuMemcpy3D_v2_ptds, 1, copy_3d(p, NULL, FC_PTDS, 1)); }
CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *p, CUstream h) { FC_TRACED(cuMemcpy3DAsync_v2, 1, copy_3d(p, h, FC_LEGACY, 0)); }
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *p, CUstream h) { FC_TRACED(cuMemcpy3DAsync_v2_ptsz, 1, copy_3d(p, h, FC_PTDS, 0)); }
CUresult cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) { FC_TRACED(cuMemcpyPeer, 1, copy_peer(d, dc, s, sc, n, NULL, FC_LEGACY, 1)); }
CUresult cuMemcpyPeer_ptds(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) { FC_TRACED(cuMemcpyPeer_ptds, 1, copy_peer(d, dc, s, sc, n, NULL, FC_PTDS, 1)); }
CUresult cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream h) { FC_TRACED(cuMemcpyPeerAsync, 1, copy_peer(d, dc, s, sc, n, h, FC_LEGACY, 0)); }
CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n, CUstream h) { FC_TRACED(cuMemcpyPeerAsync_ptsz, 1, copy_peer(d, dc, s, sc, n, h, FC_PTDS, 0)); }
CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *p) { FC_TRACED(cuMemcpy3DPeer, 1, copy_3dpeer(p, NULL, FC_LEGACY, 1)); }
CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *p) { FC_TRACED(cuMemcpy3DPeer_ptds, 1, copy_3dpeer(p, NULL, FC_PTDS, 1)); }
CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *p, CUstream h) { FC_TRACED(cuMemcpy3DPeerAsync, 1, copy_3dpeer(p, h, FC_LEGACY, 0)); }
CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *p, CUstream h) { FC_TRACED(cuMemcpy3DPeerAsync_ptsz, 1, copy_3dpeer(p, h, FC_PTDS, 0)); }

static CUresult copy_batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                           CUmemcpyAttributes *attrs, size_t *idxs, size_t nattrs, CUstream h, int ptds)
{
    if (!dsts || !srcs || !sizes || count == 0 || !attrs || !idxs || nattrs == 0 || nattrs > count || idxs[0] != 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < nattrs; i++)
        if (attrs[i].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_INVALID) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        CUresult r = copy_1d(UN, NULL, dsts[i], UN, NULL, srcs[i], sizes[i], h, ptds, 0);
        if (r) return r;
    }
    return CUDA_SUCCESS;
}
CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *d, CUdeviceptr *s, size_t *sz, size_t n, CUmemcpyAttributes *a, size_t *ai, size_t na, CUstream h)
{
    FC_TRACED(cuMemcpyBatchAsync_v2, 1, copy_batch(d, s, sz, n, a, ai, na, h, FC_LEGACY));
}
CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *d, CUdeviceptr *s, size_t *sz, size_t n, CUmemcpyAttributes *a, size_t *ai, size_t na, CUstream h)
{
    FC_TRACED(cuMemcpyBatchAsync_v2_ptsz, 1, copy_batch(d, s, sz, n, a, ai, na, h, FC_PTDS));
}

static CUresult copy_3dbatch(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long flags, CUstream h, int ptds)
{
    if (!ops || n == 0 || flags) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        const CUDA_MEMCPY3D_BATCH_OP *o = &ops[i];
        if (o->src.type != CU_MEMCPY_OPERAND_TYPE_POINTER || o->dst.type != CU_MEMCPY_OPERAND_TYPE_POINTER)
            return CUDA_ERROR_NOT_SUPPORTED;
        if (!o->extent.width || !o->extent.height || !o->extent.depth) return CUDA_ERROR_INVALID_VALUE;
        fc_side s = {UN, NULL, o->src.op.ptr.ptr, 0, 0, 0, o->src.op.ptr.rowLength, o->src.op.ptr.layerHeight};
        fc_side d = {UN, NULL, o->dst.op.ptr.ptr, 0, 0, 0, o->dst.op.ptr.rowLength, o->dst.op.ptr.layerHeight};
        fc_copy c;
        CUresult r = copy_build(&s, &d, o->extent.width, o->extent.height, o->extent.depth, &c);
        if (!r) r = fc_copy_submit(&c, h, ptds, 0);
        if (r) return r;
    }
    return CUDA_SUCCESS;
}
CUresult cuMemcpy3DBatchAsync_v2(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long flags, CUstream h) { FC_TRACED(cuMemcpy3DBatchAsync_v2, 1, copy_3dbatch(n, ops, flags, h, FC_LEGACY)); }
CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP *ops, unsigned long long flags, CUstream h) { FC_TRACED(cuMemcpy3DBatchAsync_v2_ptsz, 1, copy_3dbatch(n, ops, flags, h, FC_PTDS)); }

/* CUDA arrays are not emulated; the entry points exist so programs link. */
#define NS(name) FC_TRACED(name, 1, CUDA_ERROR_NOT_SUPPORTED)
CUresult cuMemcpyAtoH_v2(void *d, CUarray s, size_t o, size_t n) { NS(cuMemcpyAtoH_v2); }
CUresult cuMemcpyAtoH_v2_ptds(void *d, CUarray s, size_t o, size_t n) { NS(cuMemcpyAtoH_v2_ptds); }
CUresult cuMemcpyHtoA_v2(CUarray d, size_t o, const void *s, size_t n) { NS(cuMemcpyHtoA_v2); }
CUresult cuMemcpyHtoA_v2_ptds(CUarray d, size_t o, const void *s, size_t n) { NS(cuMemcpyHtoA_v2_ptds); }
CUresult cuMemcpyAtoD_v2(CUdeviceptr d, CUarray s, size_t o, size_t n) { NS(cuMemcpyAtoD_v2); }
CUresult cuMemcpyAtoD_v2_ptds(CUdeviceptr d, CUarray s, size_t o, size_t n) { NS(cuMemcpyAtoD_v2_ptds); }
CUresult cuMemcpyDtoA_v2(CUarray d, size_t o, CUdeviceptr s, size_t n) { NS(cuMemcpyDtoA_v2); }
CUresult cuMemcpyDtoA_v2_ptds(CUarray d, size_t o, CUdeviceptr s, size_t n) { NS(cuMemcpyDtoA_v2_ptds); }
CUresult cuMemcpyAtoA_v2(CUarray d, size_t od, CUarray s, size_t os, size_t n) { NS(cuMemcpyAtoA_v2); }
CUresult cuMemcpyAtoA_v2_ptds(CUarray d, size_t od, CUarray s, size_t os, size_t n) { NS(cuMemcpyAtoA_v2_ptds); }
CUresult cuMemcpyAtoHAsync_v2(void *d, CUarray s, size_t o, size_t n, CUstream h) { NS(cuMemcpyAtoHAsync_v2); }
CUresult cuMemcpyAtoHAsync_v2_ptsz(void *d, CUarray s, size_t o, size_t n, CUstream h) { NS(cuMemcpyAtoHAsync_v2_ptsz); }
CUresult cuMemcpyHtoAAsync_v2(CUarray d, size_t o, const void *s, size_t n, CUstream h) { NS(cuMemcpyHtoAAsync_v2); }
CUresult cuMemcpyHtoAAsync_v2_ptsz(CUarray d, size_t o, const void *s, size_t n, CUstream h) { NS(cuMemcpyHtoAAsync_v2_ptsz); }

/* ---- memsets ---- */
CUresult fc_memset_build(CUdeviceptr dst, size_t pitch, unsigned esize, unsigned value, size_t w,
                         size_t h, fc_memset *out)
{
    memset(out, 0, sizeof(*out));
    if (esize != 1 && esize != 2 && esize != 4) return CUDA_ERROR_INVALID_VALUE;
    if (dst % esize) return CUDA_ERROR_INVALID_VALUE;
    if (h > 1 && pitch < w * esize) return CUDA_ERROR_INVALID_VALUE;
    if (h <= 1) pitch = w * esize;
    out->dst = (unsigned char *)(uintptr_t)dst, out->esize = esize, out->value = value;
    out->width = w, out->height = h, out->pitch = pitch;
    if (!w || !h) return CUDA_SUCCESS;
    int k = fc_ptr_check((uintptr_t)dst, (h - 1) * pitch + w * esize);
    return k == FC_PTR_DEVICE || k == FC_PTR_PINNED ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

void fc_memset_exec(const fc_memset *m)
{
    for (size_t y = 0; y < m->height; y++) {
        unsigned char *row = m->dst + y * m->pitch;
        for (size_t x = 0; x < m->width; x++) {
            if (m->esize == 1) row[x] = (unsigned char)m->value;
            else if (m->esize == 2) { uint16_t v = (uint16_t)m->value; memcpy(row + 2 * x, &v, 2); }
            else { uint32_t v = m->value; memcpy(row + 4 * x, &v, 4); }
        }
    }
}

static CUresult do_memset(CUdeviceptr d, size_t pitch, unsigned es, unsigned v, size_t w, size_t h, CUstream s, int ptds, int sync)
{
    fc_memset m;
    CUresult r = fc_memset_build(d, pitch, es, v, w, h, &m);
    return r ? r : fc_memset_submit(&m, s, ptds, sync);
}
#define L FC_LEGACY
#define P FC_PTDS
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { FC_TRACED(cuMemsetD8_v2, 1, do_memset(d, 0, 1, v, n, 1, NULL, L, 1)); }
CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n) { FC_TRACED(cuMemsetD8_v2_ptds, 1, do_memset(d, 0, 1, v, n, 1, NULL, P, 1)); }
CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) { FC_TRACED(cuMemsetD16_v2, 1, do_memset(d, 0, 2, v, n, 1, NULL, L, 1)); }
CUresult cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n) { FC_TRACED(cuMemsetD16_v2_ptds, 1, do_memset(d, 0, 2, v, n, 1, NULL, P, 1)); }
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) { FC_TRACED(cuMemsetD32_v2, 1, do_memset(d, 0, 4, v, n, 1, NULL, L, 1)); }
CUresult cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n) { FC_TRACED(cuMemsetD32_v2_ptds, 1, do_memset(d, 0, 4, v, n, 1, NULL, P, 1)); }
CUresult cuMemsetD2D8_v2(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h) { FC_TRACED(cuMemsetD2D8_v2, 1, do_memset(d, p, 1, v, w, h, NULL, L, 1)); }
CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h) { FC_TRACED(cuMemsetD2D8_v2_ptds, 1, do_memset(d, p, 1, v, w, h, NULL, P, 1)); }
CUresult cuMemsetD2D16_v2(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h) { FC_TRACED(cuMemsetD2D16_v2, 1, do_memset(d, p, 2, v, w, h, NULL, L, 1)); }
CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h) { FC_TRACED(cuMemsetD2D16_v2_ptds, 1, do_memset(d, p, 2, v, w, h, NULL, P, 1)); }
CUresult cuMemsetD2D32_v2(CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h) { FC_TRACED(cuMemsetD2D32_v2, 1, do_memset(d, p, 4, v, w, h, NULL, L, 1)); }
CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h) { FC_TRACED(cuMemsetD2D32_v2_ptds, 1, do_memset(d, p, 4, v, w, h, NULL, P, 1)); }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { FC_TRACED(cuMemsetD8Async, 1, do_memset(d, 0, 1, v, n, 1, s, L, 0)); }
CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { FC_TRACED(cuMemsetD8Async_ptsz, 1, do_memset(d, 0, 1, v, n, 1, s, P, 0)); }
CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) { FC_TRACED(cuMemsetD16Async, 1, do_memset(d, 0, 2, v, n, 1, s, L, 0)); }
CUresult cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short v, size_t n, CUstream s) { FC_TRACED(cuMemsetD16Async_ptsz, 1, do_memset(d, 0, 2, v, n, 1, s, P, 0)); }
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s) { FC_TRACED(cuMemsetD32Async, 1, do_memset(d, 0, 4, v, n, 1, s, L, 0)); }
CUresult cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream s) { FC_TRACED(cuMemsetD32Async_ptsz, 1, do_memset(d, 0, 4, v, n, 1, s, P, 0)); }
CUresult cuMemsetD2D8Async(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream s) { FC_TRACED(cuMemsetD2D8Async, 1, do_memset(d, p, 1, v, w, h, s, L, 0)); }
CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, CUstream s) { FC_TRACED(cuMemsetD2D8Async_ptsz, 1, do_memset(d, p, 1, v, w, h, s, P, 0)); }
CUresult cuMemsetD2D16Async(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, CUstream s) { FC_TRACED(cuMemsetD2D16Async, 1, do_memset(d, p, 2, v, w, h, s, L, 0)); }
CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, CUstream s) { FC_TRACED(cuMemsetD2D16Async_ptsz, 1, do_memset(d, p, 2, v, w, h, s, P, 0)); }
CUresult cuMemsetD2D32Async(CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h, CUstream s) { FC_TRACED(cuMemsetD2D32Async, 1, do_memset(d, p, 4, v, w, h, s, L, 0)); }
CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr d, size_t p, unsigned int v, size_t w, size_t h, CUstream s) { FC_TRACED(cuMemsetD2D32Async_ptsz, 1, do_memset(d, p, 4, v, w, h, s, P, 0)); }
