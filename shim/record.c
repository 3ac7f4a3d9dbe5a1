/* Operation records: argument layouts of kernels (CUfunction via cuFuncGetParamInfo, CUkernel via
 * cuKernelGetParamInfo, which is how PyTorch passes most kernels), signatures, and re-issuing a record
 * exactly as the application made it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "pattern.h"
#include "record.h"

#define LAYOUT_SLOTS 8192

ag_drv_t ag_drv;
static ag_layout_t *layouts[LAYOUT_SLOTS];
static void **ptrs; /* scratch kernelParams */
static uint32_t cap_ptrs;

int ag_record_bind(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    int missing = !h;
#define AG_DRV(name, params)                                                                          \
    if (h && !(ag_drv.name = (ag_drv_##name##_t)ag_real_dlsym(h, #name)))                             \
        missing = 1;
#include "driver.def"
#undef AG_DRV
    return missing || !REAL(cuStreamBeginCapture_v2) || !REAL(cuStreamEndCapture) || !REAL(cuGraphLaunch) ||
                   !REAL(cuStreamGetCaptureInfo_v3) || !REAL(cuMemsetD8Async) || !REAL(cuMemcpyDtoDAsync_v2)
               ? -1
               : 0;
}

size_t ag_op_size(const ag_op_t *o)
{
    return offsetof(ag_op_t, attrs) + sizeof(CUlaunchAttribute) * o->nattrs;
}

void **ag_param_ptrs(const ag_layout_t *lay, unsigned char *args)
{
    if (lay->nparams > cap_ptrs) {
        void **p = realloc(ptrs, sizeof *p * lay->nparams);
        if (!p)
            return NULL;
        ptrs = p;
        cap_ptrs = lay->nparams;
    }
    for (uint32_t i = 0; i < lay->nparams; i++)
        ptrs[i] = args + lay->off[i];
    return ptrs;
}

/* ---- layouts ---- */

static int is_nccl(const char *name)
{
    return name && (strstr(name, "ncclKernel") || strstr(name, "ncclDevKernel"));
}

/* Records the bytes no parameter covers. Parameters arrive in offset order from the driver; anything
 * else (overlaps, disorder) is treated as having no usable layout. */
static int find_gaps(ag_layout_t *l)
{
    uint32_t end = 0;
    for (uint32_t i = 0; i < l->nparams; i++) {
        if (l->off[i] < end)
            return -1;
        if (l->off[i] > end) {
            uint32_t *o = realloc(l->gap_off, sizeof *o * (l->ngaps + 1)), *n;
            if (o)
                l->gap_off = o;
            n = realloc(l->gap_len, sizeof *n * (l->ngaps + 1));
            if (n)
                l->gap_len = n;
            if (!o || !n)
                return -1;
            l->gap_off[l->ngaps] = end;
            l->gap_len[l->ngaps++] = l->off[i] - end;
        }
        end = l->off[i] + l->size[i];
    }
    return 0;
}

const ag_layout_t *ag_layout_of(CUfunction f)
{
    uint32_t h = (uint32_t)(((uintptr_t)f >> 4) ^ ((uintptr_t)f >> 20)) % LAYOUT_SLOTS;
    for (uint32_t probe = 0; probe < LAYOUT_SLOTS; probe++, h = (h + 1) % LAYOUT_SLOTS) {
        ag_layout_t *l = layouts[h];
        if (!l)
            break;
        if (l->handle == f)
            return l;
    }
    if (layouts[h])
        return NULL; /* table full: such a program is not ours to speed up */
    ag_layout_t *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->handle = f;
    /* PyTorch passes CUkernel handles, on which the CUfunction queries fail with INVALID_HANDLE. */
    int kernel = 0;
    size_t off, size;
    CUresult r = ag_drv.cuFuncGetParamInfo(f, 0, &off, &size);
    if (r == CUDA_ERROR_INVALID_HANDLE && ag_drv.cuKernelGetParamInfo) {
        kernel = 1;
        r = ag_drv.cuKernelGetParamInfo((CUkernel)f, 0, &off, &size);
    }
    const char *name = NULL;
    if (kernel ? !ag_drv.cuKernelGetName || ag_drv.cuKernelGetName(&name, (CUkernel)f) != CUDA_SUCCESS
               : !ag_drv.cuFuncGetName || ag_drv.cuFuncGetName(&name, f) != CUDA_SUCCESS)
        name = NULL;
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_VALUE) {
        l->no_defer = 1; /* no way to know the argument bytes */
    } else {
        uint32_t cap = 0;
        for (uint32_t i = 0; r == CUDA_SUCCESS; i++) {
            if (i == cap) {
                cap = cap ? cap * 2 : 16;
                uint32_t *o = realloc(l->off, sizeof *o * cap), *s;
                if (o)
                    l->off = o;
                s = realloc(l->size, sizeof *s * cap);
                if (s)
                    l->size = s;
                if (!o || !s) {
                    l->no_defer = 1;
                    break;
                }
            }
            l->off[i] = (uint32_t)off;
            l->size[i] = (uint32_t)size;
            l->nparams = i + 1;
            if (off + size > l->total)
                l->total = (uint32_t)(off + size);
            r = kernel ? ag_drv.cuKernelGetParamInfo((CUkernel)f, i + 1, &off, &size)
                       : ag_drv.cuFuncGetParamInfo(f, i + 1, &off, &size);
        }
    }
    if (!l->no_defer && find_gaps(l) != 0)
        l->no_defer = 1;
    if (is_nccl(name))
        l->no_defer = 1; /* NCCL kernels wait on other processes: never hold them back */
    layouts[h] = l;
    ag_log(AG_LOG_TRACE, "layout of %s (%p): %u parameters, %u bytes%s", name ? name : "?", (void *)f,
           l->nparams, l->total, l->no_defer ? ", never deferred" : "");
    return l;
}

/* ---- signatures ---- */

/* Folds a word into a signature cheaply; ag_op_sig finishes with one full mix. The same_shape check of
 * graph.c turns a rare collision into a fallback, so speed wins over strength here. */
static inline uint64_t fold(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 29);
}

uint64_t ag_op_sig(const ag_op_t *o)
{
    uint64_t h = fold((uint64_t)o->kind + 1, (uint64_t)(uintptr_t)o->stream);
    switch (o->kind) {
    case OP_KERNEL:
        h = fold(h, (uint64_t)(uintptr_t)o->f);
        h = fold(h, (uint64_t)o->grid[0] | (uint64_t)o->grid[1] << 32);
        h = fold(h, (uint64_t)o->grid[2] | (uint64_t)o->block[0] << 32);
        h = fold(h, (uint64_t)o->block[1] | (uint64_t)o->block[2] << 32);
        h = fold(h, (uint64_t)o->smem | (uint64_t)o->ex << 32 | (uint64_t)o->nattrs << 40);
        for (unsigned i = 0; i < o->nattrs; i++) {
            const uint64_t *w = (const uint64_t *)&o->attrs[i];
            for (size_t k = 0; k < sizeof o->attrs[i] / 8; k++)
                h = fold(h, w[k]);
        }
        break;
    case OP_MEMSET:
        h = fold(h, (uint64_t)o->n ^ (uint64_t)o->elem << 56);
        break;
    case OP_COPY:
        h = fold(h, (uint64_t)o->n);
        break;
    case OP_EVREC:
        h = fold(h, (uint64_t)o->id);
        break;
    case OP_EVWAIT:
        h = fold(h, (uint64_t)o->flags | (uint64_t)(uint32_t)o->rec_idx << 32);
        break;
    case OP_D2H:
        h = fold(h, (uint64_t)o->n ^ (uint64_t)o->id << 40);
        break;
    case OP_H2D:
        h = fold(h, (uint64_t)o->n ^ (uint64_t)(o->stage >= 0) << 63);
        break;
    }
    return ag_mix(h, 0);
}

/* ---- issuing operations ---- */

static CUresult issue_kernel(const ag_op_t *o, CUstream stream, unsigned char *args)
{
    void **params = o->layout->nparams ? ag_param_ptrs(o->layout, args) : NULL;
    if (o->layout->nparams && !params)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (o->ex) {
        CUlaunchConfig cfg = {o->grid[0], o->grid[1], o->grid[2], o->block[0], o->block[1], o->block[2],
                              o->smem, stream, (CUlaunchAttribute *)o->attrs, o->nattrs};
        ag_fn_cuLaunchKernelEx_t fn = (ag_fn_cuLaunchKernelEx_t)ag_real[o->id];
        return fn(&cfg, o->f, params, NULL);
    }
    ag_fn_cuLaunchKernel_t fn = (ag_fn_cuLaunchKernel_t)ag_real[o->id];
    return fn(o->f, o->grid[0], o->grid[1], o->grid[2], o->block[0], o->block[1], o->block[2], o->smem, stream,
              params, NULL);
}

static CUresult issue_memset(const ag_op_t *o, CUstream stream)
{
    switch (o->elem) {
    case 1:
        return REAL(cuMemsetD8Async)(o->dst, (unsigned char)o->value, o->n, stream);
    case 2:
        return REAL(cuMemsetD16Async)(o->dst, (unsigned short)o->value, o->n, stream);
    default:
        return REAL(cuMemsetD32Async)(o->dst, o->value, o->n, stream);
    }
}

/* An event operation exactly as the application made it, through the entry point it used. */
CUresult ag_issue_event(const ag_op_t *o, CUstream stream, CUevent ev)
{
    switch (o->id) {
    case AG_ID_cuEventRecord:
    case AG_ID_cuEventRecord_ptsz:
        return ((ag_fn_cuEventRecord_t)ag_real[o->id])(ev, stream);
    case AG_ID_cuEventRecordWithFlags:
    case AG_ID_cuEventRecordWithFlags_ptsz:
        return ((ag_fn_cuEventRecordWithFlags_t)ag_real[o->id])(ev, stream, o->flags);
    default:
        return ((ag_fn_cuStreamWaitEvent_t)ag_real[o->id])(stream, ev, o->flags);
    }
}

CUresult ag_issue(const ag_op_t *o, CUstream stream, unsigned char *arena)
{
    switch (o->kind) {
    case OP_KERNEL:
        return issue_kernel(o, stream, arena + o->arg_off);
    case OP_MEMSET:
        return issue_memset(o, stream);
    case OP_COPY:
        return REAL(cuMemcpyDtoDAsync_v2)(o->dst, o->src, o->n, stream);
    case OP_D2H:
        if (o->id == AG_ID_cuMemcpyDtoH_v2)
            return REAL(cuMemcpyDtoH_v2)(o->hdst, o->src, o->n);
        return REAL(cuMemcpyDtoHAsync_v2)(o->hdst, o->src, o->n, stream);
    case OP_H2D:
        return REAL(cuMemcpyHtoDAsync_v2)(o->dst, o->hsrc, o->n, stream);
    default:
        return ag_issue_event(o, stream, o->event);
    }
}

/* Bytes of an attribute's value that mean something (the rest of the union may be garbage), or -1 for
 * attributes that make the launch observable (events) or device-updatable: never deferred. */
int ag_attr_value_size(CUlaunchAttributeID id)
{
    switch (id) {
    case CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW:
        return (int)sizeof(CUaccessPolicyWindow);
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_CLUSTER_DIMENSION:
        return 3 * (int)sizeof(unsigned);
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN_MAP:
        return (int)sizeof(CUlaunchMemSyncDomainMap);
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT:
    case CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT:
    case CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE:
        return -1;
    default:
        return (int)sizeof(int);
    }
}
