/* Operation records: argument layouts of kernels (CUfunction via cuFuncGetParamInfo, CUkernel via
 * cuKernelGetParamInfo, which is how PyTorch passes most kernels), signatures, and re-issuing a record
 * exactly as the application made it. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pattern.h"
#include "record.h"

ag_drv_t ag_drv;
ag_layout_t *ag_layouts[AG_LAYOUT_SLOTS];
/* scratch kernelParams, per thread: engines of two contexts issue on two threads at once */
static AG_TLS void **ptrs;
static AG_TLS uint32_t cap_ptrs;
/* New layouts are inserted, and all of them forgotten, under this lock. Lookups take none: a slot is
 * set once, or cleared with all the others at a module unload (a lookup racing with that finds the old
 * layout, of a kernel the program may no longer launch, or none and asks again). */
static pthread_mutex_t layouts_lock = PTHREAD_MUTEX_INITIALIZER;

int ag_record_bind(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    int missing = !h;
#define AG_DRV(name, params)                                                                          \
    if (h && !(ag_drv.name = (ag_drv_##name##_t)ag_real_dlsym(h, #name)))                             \
        missing = 1;
#define AG_DRV_OPT(name, params)                                                                      \
    if (h)                                                                                            \
        ag_drv.name = (ag_drv_##name##_t)ag_real_dlsym(h, #name);
#include "driver.def"
#undef AG_DRV
#undef AG_DRV_OPT
    return missing || !REAL(cuStreamBeginCapture_v2) || !REAL(cuStreamEndCapture) || !REAL(cuGraphLaunch) ||
                   !REAL(cuStreamGetCaptureInfo_v3) || !REAL(cuMemsetD8Async) || !REAL(cuMemcpyDtoDAsync_v2)
               ? -1
               : 0;
}

void ag_thread_relaxed(void)
{
    (void)ag_relaxed_begin();
}

void **ag_param_ptrs(const ag_layout_t *lay, unsigned char *args)
{
    if (lay->nparams > cap_ptrs) {
        void **p = realloc(ptrs, sizeof *p * lay->nparams);
        if (!p)
            return NULL;
        ptrs = p;
        cap_ptrs = lay->nparams;
        ag_thread_exit_arm(); /* ag_record_thread_exit frees it */
    }
    for (uint32_t i = 0; i < lay->nparams; i++)
        ptrs[i] = args + lay->p[i].off;
    return ptrs;
}

void ag_record_thread_exit(void)
{
    free(ptrs);
    ptrs = NULL;
    cap_ptrs = 0;
}

/* ---- layouts ---- */

static int is_nccl(const char *name)
{
    return name && (strstr(name, "ncclKernel") || strstr(name, "ncclDevKernel"));
}

/* Parameters arrive in offset order from the driver; anything else (overlaps, disorder) is treated as
 * having no usable layout (ag_args_copy relies on the order). */
static int params_ordered(const uint32_t *off, const uint32_t *size, uint32_t n)
{
    uint32_t end = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (off[i] < end)
            return 0;
        end = off[i] + size[i];
    }
    return 1;
}

const char *ag_func_name(CUfunction f, int kernel)
{
    const char *name = NULL;
    if (kernel <= 0 && ag_drv.cuFuncGetName && ag_drv.cuFuncGetName(&name, f) == CUDA_SUCCESS)
        return name;
    if (kernel != 0 && ag_drv.cuKernelGetName && ag_drv.cuKernelGetName(&name, (CUkernel)f) == CUDA_SUCCESS)
        return name;
    return NULL;
}

/* Attribute a of h into *v: a CUfunction (kernel 0), a CUkernel on device dev (kernel 1), or either (kernel
 * -1: the CUfunction query first, then the CUkernel one on the current context's device). */
static CUresult get_attr(const void *h, int kernel, CUdevice dev, CUfunction_attribute a, int *v)
{
    CUresult r = CUDA_ERROR_INVALID_HANDLE;
    if (kernel <= 0)
        r = ag_drv.cuFuncGetAttribute ? ag_drv.cuFuncGetAttribute(v, a, (CUfunction)h) : CUDA_ERROR_NOT_FOUND;
    if (r != CUDA_SUCCESS && kernel < 0 && !(ag_drv.cuCtxGetDevice && ag_drv.cuCtxGetDevice(&dev) == CUDA_SUCCESS))
        return r;
    if (r != CUDA_SUCCESS && kernel != 0)
        r = ag_drv.cuKernelGetAttribute ? ag_drv.cuKernelGetAttribute(v, a, (CUkernel)h, dev) : CUDA_ERROR_NOT_FOUND;
    return r;
}

/* For a log line: attribute a of f (either handle), or -1 where the driver gives none. */
static int func_attr(CUfunction f, CUfunction_attribute a)
{
    int v;
    return get_attr(f, -1, 0, a, &v) == CUDA_SUCCESS ? v : -1;
}

int ag_func_attr_changes(const void *h, int kernel, CUdevice dev, CUfunction_attribute a, int value)
{
    int v;
    CUresult r = get_attr(h, kernel, dev, a, &v);
    /* a higher dynamic shared memory limit leaves every launch made under the old one valid */
    int bars = r != CUDA_SUCCESS || (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ? value < v : value != v);
    atomic_fetch_add_explicit(&ag_fattr_sets[bars], 1, memory_order_relaxed);
    return bars;
}

const char *ag_op_describe(const ag_op_t *o, char *buf, size_t n)
{
    static const char *const kinds[] = {"kernel", "memset", "device copy", "event record", "event wait",
                                        "device-to-host copy", "host-to-device copy"};
    const char *kind = o->kind < sizeof kinds / sizeof kinds[0] ? kinds[o->kind] : "?";
    if (o->kind == OP_EVREC || o->kind == OP_EVWAIT) {
        snprintf(buf, n, "%s of event %p on stream %p (entry point %d)", kind, (void *)o->event, (void *)o->stream,
                 (int)o->id);
        return buf;
    }
    if (o->kind != OP_KERNEL) {
        snprintf(buf, n, "%s of %zu bytes on stream %p (entry point %d)", kind, (size_t)o->n, (void *)o->stream,
                 (int)o->id);
        return buf;
    }
    const char *name = ag_func_name(o->f, -1);
    uint32_t nparams = o->layout ? o->layout->nparams : 0, total = o->layout ? o->layout->total : 0;
    int shared = func_attr(o->f, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    int dyn = func_attr(o->f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
    int threads = func_attr(o->f, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    size_t used = (size_t)snprintf(
        buf, n, "%s %.80s (%p) grid %u,%u,%u block %u,%u,%u shared %u%s, %u parameters of %u bytes; function: "
                "static shared %d, most dynamic shared %d, most threads %d; attributes:",
        kind, name ? name : "?", (void *)o->f, o->grid[0], o->grid[1], o->grid[2], o->block[0], o->block[1],
        o->block[2], o->smem, o->ex ? " (Ex)" : "", nparams, total, shared, dyn, threads);
    for (unsigned i = 0; i < o->nattrs && used < n; i++) {
        uint64_t v[2]; /* the value's first 16 bytes */
        memcpy(v, &o->attrs[i].value, sizeof v);
        used += (size_t)snprintf(buf + used, n - used, " %d=%llx:%llx", (int)o->attrs[i].id,
                                 (unsigned long long)v[0], (unsigned long long)v[1]);
    }
    if (!o->nattrs && used < n)
        snprintf(buf + used, n - used, " none");
    return buf;
}

/* The new layout of f, its parameter table queried from the driver (no_defer when that fails). */
static ag_layout_t *layout_new(CUfunction f, unsigned engine)
{
    /* PyTorch passes CUkernel handles, on which the CUfunction queries fail with INVALID_HANDLE. */
    int kernel = 0;
    size_t off, size;
    CUresult r = ag_drv.cuFuncGetParamInfo(f, 0, &off, &size);
    if (r == CUDA_ERROR_INVALID_HANDLE && ag_drv.cuKernelGetParamInfo) {
        kernel = 1;
        r = ag_drv.cuKernelGetParamInfo((CUkernel)f, 0, &off, &size);
    }
    const char *name = ag_func_name(f, kernel);
    int no_defer = 0;
    uint32_t n = 0, cap = 0, total = 0, *offs = NULL, *sizes = NULL;
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_VALUE) {
        no_defer = 1; /* no way to know the argument bytes */
    } else {
        for (uint32_t i = 0; r == CUDA_SUCCESS; i++) {
            if (i == cap) {
                cap = cap ? cap * 2 : 16;
                uint32_t *o = realloc(offs, sizeof *o * cap), *s;
                if (o)
                    offs = o;
                s = realloc(sizes, sizeof *s * cap);
                if (s)
                    sizes = s;
                if (!o || !s) {
                    no_defer = 1;
                    break;
                }
            }
            offs[i] = (uint32_t)off;
            sizes[i] = (uint32_t)size;
            n = i + 1;
            if (off + size > total)
                total = (uint32_t)(off + size);
            r = kernel ? ag_drv.cuKernelGetParamInfo((CUkernel)f, i + 1, &off, &size)
                       : ag_drv.cuFuncGetParamInfo(f, i + 1, &off, &size);
        }
    }
    if (!no_defer && !params_ordered(offs, sizes, n))
        no_defer = 1;
    if (is_nccl(name))
        no_defer = 1; /* NCCL kernels wait on other processes: never hold them back */
    ag_layout_t *l = calloc(1, sizeof *l + sizeof l->p[0] * n);
    if (l) {
        l->handle = f;
        l->nparams = n;
        l->total = total;
        l->no_defer = (uint8_t)no_defer;
        l->kernel = (uint8_t)kernel;
        l->engine = (uint8_t)(engine < AG_LAYOUT_NO_ENGINE ? engine : AG_LAYOUT_NO_ENGINE);
        l->family = name ? ag_name_family(name) : ag_mix(0x6e6f6e616d65ULL, (uint64_t)(uintptr_t)f) | 1;
        for (uint32_t i = 0; i < n; i++) {
            l->p[i].off = offs[i];
            l->p[i].size = sizes[i];
        }
        if (AG_LOG_ON(AG_LOG_TRACE)) {
            char list[256]; /* the parameters' offsets and sizes, as many as fit */
            size_t used = 0;
            list[0] = 0;
            for (uint32_t i = 0; i < n && used + 24 < sizeof list; i++)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%u:%u", i ? " " : "", offs[i], sizes[i]);
            ag_log(AG_LOG_TRACE, "layout of %s (%p): %u parameters, %u bytes (offset:size %s)%s%s", name ? name : "?",
                   (void *)f, l->nparams, l->total, list, l->no_defer ? ", never deferred" : "",
                   l->family ? "" : ", picked by size");
        }
    }
    free(offs);
    free(sizes);
    return l;
}

/* Probes from f's slot: a layout is kept within LAYOUT_PROBES slots of its own, so that a kernel not in
 * a crowded table costs that many probes, not the whole table. *slot: the first free slot met, or
 * UINT32_MAX where there is none in reach. */
#define LAYOUT_PROBES 64
static const ag_layout_t *layout_probe(CUfunction f, uint32_t *slot)
{
    uint32_t h = ag_layout_slot(f);
    *slot = UINT32_MAX;
    for (uint32_t probe = 0; probe < LAYOUT_PROBES; probe++, h = (h + 1) % AG_LAYOUT_SLOTS) {
        const ag_layout_t *l = __atomic_load_n(&ag_layouts[h], __ATOMIC_ACQUIRE);
        if (!l) {
            *slot = h;
            return NULL;
        }
        if (l->handle == f)
            return l;
    }
    return NULL;
}

const ag_layout_t *ag_layout_find(CUfunction f, unsigned engine)
{
    uint32_t h;
    const ag_layout_t *l = layout_probe(f, &h);
    if (l || h == UINT32_MAX)
        return l; /* found, or no room near its slot: such a program is not ours to speed up */
    /* The engines of two contexts may meet a new kernel at once: one inserts, the other finds it. */
    pthread_mutex_lock(&layouts_lock);
    l = layout_probe(f, &h);
    if (!l && h != UINT32_MAX) {
        ag_layout_t *n = layout_new(f, engine);
        __atomic_store_n(&ag_layouts[h], n, __ATOMIC_RELEASE);
        l = n;
    }
    pthread_mutex_unlock(&layouts_lock);
    return l;
}

/* ---- unloads ---- */

static int cmp_handle(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)*(const void *const *)a, y = (uintptr_t)*(const void *const *)b;
    return (x > y) - (x < y);
}

/* Whether the kernel of layout l belongs to the module or library being unloaded. A query that fails says
 * yes: forgetting a kernel that stays costs a query at its next launch and a graph build, keeping one that
 * goes could copy another kernel's arguments by its layout. lib_mod: the library's module in the calling
 * thread's context (its CUfunctions there), lib_mod_ok: 1 where that query answered (0: no module there,
 * -1: no answer). */
static int unloaded_with(const ag_layout_t *l, int library, const void *handle, CUmodule lib_mod, int lib_mod_ok,
                         int one_context)
{
    if (l->kernel) { /* a CUkernel: a library's, in every context */
        CUlibrary lib;
        if (!library)
            return 0; /* a module unload leaves libraries alone */
        return !ag_drv.cuKernelGetLibrary || ag_drv.cuKernelGetLibrary(&lib, (CUkernel)l->handle) != CUDA_SUCCESS ||
               (const void *)lib == handle;
    }
    CUmodule m;
    if (!ag_drv.cuFuncGetModule || ag_drv.cuFuncGetModule(&m, (CUfunction)l->handle) != CUDA_SUCCESS)
        return 1;
    if (!library)
        return (const void *)m == handle;
    /* A CUfunction of a library is its module's in one context: known only for the calling thread's, so
     * only a process of one context can tell the library's CUfunctions from the others. */
    if (lib_mod_ok > 0 && m == lib_mod)
        return 1;
    return lib_mod_ok < 0 || !one_context;
}

/* Adds handle h to u (cap: its room); where there is no memory for it, u names every kernel (all). */
static void unload_add(ag_unload_t *u, uint32_t *cap, const void *h)
{
    const void **p = ag_grow(u->h, u->n, cap, sizeof *p, 64);
    if (!p) {
        u->all = 1; /* no room to say which: all */
        return;
    }
    u->h = p;
    u->h[u->n++] = h;
}

void ag_unload_collect(ag_unload_t *u, int library, const void *handle, int one_context)
{
    memset(u, 0, sizeof *u);
    CUmodule lib_mod = NULL;
    int lib_mod_ok = -1;
    if (library && ag_drv.cuLibraryGetModule) {
        CUresult r = ag_drv.cuLibraryGetModule(&lib_mod, (CUlibrary)handle);
        lib_mod_ok = r == CUDA_SUCCESS ? 1 : r == CUDA_ERROR_NOT_FOUND ? 0 : -1;
    }
    pthread_mutex_lock(&layouts_lock);
    uint32_t cap = 0, seen = 0;
    for (uint32_t i = 0; i < AG_LAYOUT_SLOTS && !u->all; i++) {
        const ag_layout_t *l = __atomic_load_n(&ag_layouts[i], __ATOMIC_ACQUIRE);
        seen += l != NULL;
        if (!l || !unloaded_with(l, library, handle, lib_mod, lib_mod_ok, one_context))
            continue;
        unload_add(u, &cap, l->handle);
    }
    pthread_mutex_unlock(&layouts_lock);
    if (u->n > 1)
        qsort(u->h, u->n, sizeof *u->h, cmp_handle);
    if (u->all)
        ag_log(AG_LOG_DEBUG, "unload of %s %p: every cached kernel is forgotten (no room to list its own)",
               library ? "library" : "module", handle);
    else
        ag_log(AG_LOG_DEBUG, "unload of %s %p: %u of the %u cached kernels go with it", library ? "library" : "module",
               handle, u->n, seen);
}

int ag_unload_has(const ag_unload_t *u, const void *f)
{
    return u->all || (u->n && bsearch(&f, u->h, u->n, sizeof *u->h, cmp_handle));
}

void ag_unload_free(ag_unload_t *u)
{
    free(u->h);
    memset(u, 0, sizeof *u);
}

/* A module or library was unloaded: its kernels' handles may be given to other kernels from now on, whose
 * parameters differ, so their layouts are asked for again at each such kernel's next launch; the others
 * stay. The table is laid out anew without them (a layout sits within LAYOUT_PROBES slots of its own, with
 * no gap before it): a lookup meanwhile finds its layout or none, and then waits for the lock and looks
 * again. The old layouts stay allocated (held operations and graphs point to them; an unload is rare), on a
 * list of their own. */
static ag_layout_t **forgotten; /* the old layouts, listed (under layouts_lock) so that none is lost */
static uint32_t nforgotten, cap_forgotten;

static void forget_one(ag_layout_t *l)
{
    ag_layout_t **p = ag_grow(forgotten, nforgotten, &cap_forgotten, sizeof *p, 64);
    if (!p)
        return; /* it stays allocated, unlisted */
    forgotten = p;
    forgotten[nforgotten++] = l;
}

void ag_layouts_forget(const ag_unload_t *u)
{
    pthread_mutex_lock(&layouts_lock);
    ag_layout_t **keep = u->all ? NULL : malloc(sizeof *keep * AG_LAYOUT_SLOTS);
    uint32_t n = 0;
    for (uint32_t i = 0; i < AG_LAYOUT_SLOTS; i++) {
        ag_layout_t *l = __atomic_load_n(&ag_layouts[i], __ATOMIC_ACQUIRE);
        if (l && keep && !ag_unload_has(u, l->handle))
            keep[n++] = l;
        else if (l)
            forget_one(l);
        __atomic_store_n(&ag_layouts[i], NULL, __ATOMIC_RELEASE);
    }
    /* each back where a lookup meets it first (where none is left in reach, its kernel is not held back,
     * as a new kernel is not in a crowded table) */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t h = ag_layout_slot((CUfunction)keep[i]->handle), probe = 0;
        for (; probe < LAYOUT_PROBES; probe++, h = (h + 1) % AG_LAYOUT_SLOTS)
            if (!ag_layouts[h]) {
                __atomic_store_n(&ag_layouts[h], keep[i], __ATOMIC_RELEASE);
                break;
            }
        if (probe == LAYOUT_PROBES)
            forget_one(keep[i]);
    }
    free(keep);
    pthread_mutex_unlock(&layouts_lock);
}

void ag_layouts_forget_engine(unsigned engine)
{
    ag_unload_t u;
    memset(&u, 0, sizeof u);
    uint32_t cap = 0;
    pthread_mutex_lock(&layouts_lock);
    for (uint32_t i = 0; i < AG_LAYOUT_SLOTS && !u.all; i++) {
        const ag_layout_t *l = __atomic_load_n(&ag_layouts[i], __ATOMIC_ACQUIRE);
        if (!l || l->kernel || (l->engine != engine && l->engine != AG_LAYOUT_NO_ENGINE))
            continue;
        unload_add(&u, &cap, l->handle);
    }
    pthread_mutex_unlock(&layouts_lock);
    if (u.n > 1)
        qsort(u.h, u.n, sizeof *u.h, cmp_handle);
    if (u.n || u.all) {
        ag_log(AG_LOG_DEBUG, "the context of engine %u ended: %s of its kernels' layouts are forgotten", engine,
               u.all ? "every one" : "each");
        ag_layouts_forget(&u);
    }
    ag_unload_free(&u);
}

/* ---- signatures ---- */

/* Folds a word into a signature cheaply; ag_op_sig finishes with one full mix. The same_shape check of
 * graph.c turns a rare collision into a fallback, so speed wins over strength here. */
static inline uint64_t fold(uint64_t h, uint64_t v)
{
    h = (h ^ v) * 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 29);
}

uint64_t ag_op_sig(const ag_op_t *o, uint64_t *shape_free)
{
    uint64_t h = fold((uint64_t)o->kind + 1, (uint64_t)(uintptr_t)o->stream);
    /* Kernels outside the switch: its jump table would be one more cold line at every launch. */
    if (o->kind == OP_KERNEL) {
        *shape_free = h;
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
        return ag_mix(h, 0);
    }
    *shape_free = fold(h, (uint64_t)o->id);
    switch (o->kind) {
    case OP_MEMSET:
        h = fold(h, (uint64_t)o->n ^ (uint64_t)o->elem << 56);
        break;
    case OP_COPY: /* the entry point too: a graph checks it (a device-to-device or a unified copy) */
        h = fold(h, (uint64_t)o->n ^ (uint64_t)o->id << 40);
        break;
    case OP_EVREC:
        h = fold(h, (uint64_t)o->id);
        break;
    case OP_EVWAIT:
        h = fold(h, (uint64_t)o->flags | (uint64_t)(uint32_t)o->rec_idx << 32);
        break;
    case OP_D2H:
        h = fold(h, (uint64_t)o->n ^ (uint64_t)o->id << 40 ^ (uint64_t)(o->stage >= 0) << 63);
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
    case CU_LAUNCH_ATTRIBUTE_IGNORE:
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
    case CU_LAUNCH_ATTRIBUTE_SYNCHRONIZATION_POLICY:
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE:
    case CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION:
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
    case CU_LAUNCH_ATTRIBUTE_MEM_SYNC_DOMAIN:
    case CU_LAUNCH_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
    case CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING:
        return (int)sizeof(int);
    default:
        /* one this header does not name (a newer driver's, or a library's private one): all of it, since
         * which of its bytes the driver reads is not known here (unused bytes that differ between launches
         * only make them mismatch) */
        return (int)sizeof(CUlaunchAttributeValue);
    }
}

uint64_t ag_attr_ids_seen; /* (through __atomic builtins only: clang takes no _Atomic object there) */
