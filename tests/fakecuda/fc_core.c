/* fc_core.c: fakecuda (CPU test double for libcuda.so.1) core: the global lock, handle registry,
 * PRNG, initialization, device and context API, error strings, the kernel registry and the
 * module/library/function API. */
#include "fc_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* A real driver's host costs, about (the H200 hosts: 2-7 us a launch, 3-12 us a graph launch). */
#define FC_LAUNCH_NS 2000
#define FC_GRAPH_NS 3000

fc_state fc_g;
_Thread_local int fc_tl_in_work;
_Thread_local uint64_t fc_tl_wait_until;
_Thread_local CUstreamCaptureMode fc_tl_capmode = CU_STREAM_CAPTURE_MODE_GLOBAL;
static _Thread_local fc_ctx *tl_ctx_stack[32];
static _Thread_local int tl_ctx_depth;
static pthread_once_t fc_once = PTHREAD_ONCE_INIT;

/* The lock must exist before cuInit: kernels are registered before it. */
static void fc_once_init(void)
{
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&fc_g.mu, &a);
    pthread_mutexattr_destroy(&a);
    const char *s = getenv("FAKECUDA_SEED");
    fc_g.rng = s ? strtoull(s, NULL, 0) : 1;
    fc_g.rng = fc_g.rng * 0x9E3779B97F4A7C15ull + 1;
    s = getenv("FAKECUDA_QUERY_NOT_READY");
    fc_g.query_not_ready = s && atoi(s) == 1;
    s = getenv("FAKECUDA_REUSE_HANDLES");
    fc_g.reuse_handles = s && atoi(s) == 1;
    s = getenv("FAKECUDA_NO_OWNER");
    fc_g.no_owner = s && atoi(s) == 1;
    s = getenv("FAKECUDA_REUSE_EVENTS");
    fc_g.reuse_events = s && atoi(s) == 1;
    s = getenv("FAKECUDA_REUSE_STREAMS");
    fc_g.reuse_streams = s && atoi(s) == 1;
    s = getenv("FAKECUDA_STRICT_EVENTS");
    fc_g.strict_events = s && atoi(s) == 1;
    s = getenv("FAKECUDA_REUSE_CONTEXTS");
    fc_g.reuse_contexts = s && atoi(s) == 1;
    s = getenv("FAKECUDA_CTX_DESTROY_RETURN_US");
    fc_g.ctx_destroy_return_ns = s ? strtoull(s, NULL, 0) * 1000u : 0;
    s = getenv("FAKECUDA_JITTER_PCT");
    fc_g.jitter_pct = s ? (unsigned)strtoul(s, NULL, 0) : 0;
    s = getenv("FAKECUDA_STRICT_CONTEXTS");
    fc_g.strict_contexts = !s || atoi(s) != 0;
    s = getenv("FAKECUDA_LAUNCH_NS");
    fc_g.launch_ns = s ? strtoull(s, NULL, 0) : FC_LAUNCH_NS;
    s = getenv("FAKECUDA_GRAPH_NS");
    fc_g.graph_ns = s ? strtoull(s, NULL, 0) : FC_GRAPH_NS;
    s = getenv("FAKECUDA_INSTANTIATE_NS");
    fc_g.instantiate_ns = s ? strtoull(s, NULL, 0) : 0;
    s = getenv("FAKECUDA_HOST_ALLOC_NS");
    fc_g.host_alloc_ns = s ? strtoull(s, NULL, 0) : 0;
    s = getenv("FAKECUDA_DEVICE_NS");
    fc_g.dev_ns = s ? strtoull(s, NULL, 0) : 0;
    s = getenv("FAKECUDA_GRAPH_DEVICE_NS");
    fc_g.dev_graph_ns = s ? strtoull(s, NULL, 0) : 0;
    fc_g.dev_on = fc_g.dev_ns || fc_g.dev_graph_ns;
    s = getenv("FAKECUDA_DEVICE_QUERIES");
    fc_g.dev_queries = fc_g.dev_on && (!s || atoi(s) != 0);
    s = getenv("FAKECUDA_POOL_BYTES");
    fc_g.pool_limit = s ? strtoull(s, NULL, 0) : 0;
}

uint64_t fc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void fc_spend(uint64_t ns)
{
    if (!ns)
        return;
    uint64_t end = fc_now_ns() + ns;
    while (fc_now_ns() < end)
        ;
}

void fc_dev_wait(void)
{
    uint64_t t = fc_tl_wait_until;
    fc_tl_wait_until = 0;
    while (t && fc_now_ns() < t)
        ;
}

/* FAKECUDA_JITTER_PCT=p: a call sleeps 1-64 us, in p% of the calls, before it takes the fake's lock, so that
 * threads' calls interleave as on a host of many cores (a two-CPU machine runs them more in turn). */
static void fc_jitter(void)
{
    static __thread uint64_t x;
    if (!x)
        x = (uint64_t)(uintptr_t)&x ^ fc_now_ns() ^ 0x9e3779b97f4a7c15ULL;
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    if (x % 100 >= fc_g.jitter_pct)
        return;
    struct timespec t = {0, (long)(1000 + (x >> 32) % 64000)};
    nanosleep(&t, NULL);
}

static void fc_lock(void)
{
    pthread_once(&fc_once, fc_once_init);
    if (fc_g.jitter_pct)
        fc_jitter();
    pthread_mutex_lock(&fc_g.mu);
}

CUresult fc_enter(int need_ctx)
{
    fc_lock();
    if (fc_tl_in_work) return CUDA_ERROR_NOT_PERMITTED;
    if (need_ctx >= 0 && !fc_g.inited) return CUDA_ERROR_NOT_INITIALIZED;
    if (need_ctx > 0 && !fc_cur_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
    return CUDA_SUCCESS;
}

void fc_leave(void) { pthread_mutex_unlock(&fc_g.mu); }

void fc_spend_instantiate(void)
{
    pthread_once(&fc_once, fc_once_init);
    fc_spend(fc_g.instantiate_ns);
}

void fc_host_alloc_wait(void)
{
    pthread_once(&fc_once, fc_once_init);
    uint64_t ns = fc_g.host_alloc_ns;
    struct timespec t = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (ns && nanosleep(&t, &t) != 0)
        ;
}

/* Parsed once (under the fake's lock): up to 8 entries of FAKECUDA_FAIL. */
static struct {
    char name[64];
    unsigned long from, to, calls;
} fc_fail[8];
static int fc_nfail = -1;

int fc_inject(const char *func)
{
    if (fc_nfail < 0) {
        fc_nfail = 0;
        const char *s = getenv("FAKECUDA_FAIL");
        while (s && *s && fc_nfail < 8) {
            size_t len = strcspn(s, ",");
            char item[96];
            snprintf(item, sizeof item, "%.*s", (int)len, s);
            char *colon = strchr(item, ':'), *dash = NULL;
            fc_fail[fc_nfail].from = colon ? strtoul(colon + 1, &dash, 10) : 1;
            fc_fail[fc_nfail].to = dash && *dash == '-' ? strtoul(dash + 1, NULL, 10) : ULONG_MAX;
            if (colon)
                *colon = '\0';
            snprintf(fc_fail[fc_nfail].name, sizeof fc_fail[0].name, "%.63s", item);
            fc_nfail++;
            s += len + (s[len] == ',');
        }
    }
    for (int i = 0; i < fc_nfail; i++)
        if (strcmp(fc_fail[i].name, func) == 0)
            return ++fc_fail[i].calls >= fc_fail[i].from && fc_fail[i].calls <= fc_fail[i].to;
    return 0;
}

uint64_t fc_rand(void)
{
    uint64_t x = fc_g.rng; /* xorshift64* */
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    fc_g.rng = x;
    return x * 0x2545F4914F6CDD1Dull;
}

int fc_vec_push(void **arr, size_t *n, size_t elem, const void *item)
{
    /* Capacity is the next power of two: no separate capacity field to keep in sync. */
    size_t cap = 1;
    while (cap < *n) cap <<= 1;
    if (*n == 0 || *n == cap) {
        void *p = realloc(*arr, (*n ? cap * 2 : 4) * elem);
        if (!p) return -ENOMEM;
        *arr = p;
    }
    memcpy((char *)*arr + *n * elem, item, elem);
    (*n)++;
    return 0;
}

void fc_vec_remove(void **arr, size_t *n, const void *item)
{
    for (size_t i = 0; i < *n; i++)
        if (arr[i] == item) {
            memmove(&arr[i], &arr[i + 1], (*n - i - 1) * sizeof(*arr));
            (*n)--;
            return;
        }
}

/* ---- handle registry: open-addressing set of pointers ---- */
static uintptr_t *reg_slots;
static size_t reg_cap, reg_n;

static size_t reg_hash(uintptr_t p) { return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull); }

int fc_obj_register(void *obj, int kind)
{
    if ((reg_n + 1) * 2 > reg_cap) {
        size_t ncap = reg_cap ? reg_cap * 2 : 1024;
        uintptr_t *ns = calloc(ncap, sizeof(*ns));
        if (!ns) return -ENOMEM;
        for (size_t i = 0; i < reg_cap; i++)
            if (reg_slots[i]) {
                size_t j = reg_hash(reg_slots[i]) & (ncap - 1);
                while (ns[j]) j = (j + 1) & (ncap - 1);
                ns[j] = reg_slots[i];
            }
        free(reg_slots);
        reg_slots = ns;
        reg_cap = ncap;
    }
    size_t j = reg_hash((uintptr_t)obj) & (reg_cap - 1);
    while (reg_slots[j]) j = (j + 1) & (reg_cap - 1);
    reg_slots[j] = (uintptr_t)obj;
    reg_n++;
    ((fc_obj *)obj)->kind = kind;
    ((fc_obj *)obj)->dead = 0;
    return 0;
}

int fc_obj_valid(const void *obj, int kind)
{
    if (!obj || !reg_cap) return 0;
    size_t j = reg_hash((uintptr_t)obj) & (reg_cap - 1);
    while (reg_slots[j]) {
        if (reg_slots[j] == (uintptr_t)obj) {
            const fc_obj *o = obj;
            if (o->kind == kind && o->dead == FC_DIED_WITH_CTX && fc_g.strict_contexts) {
                fprintf(stderr, "fakecuda: handle %p (kind %d) is of a destroyed context (FAKECUDA_STRICT_CONTEXTS)\n",
                        obj, kind);
                abort();
            }
            return o->kind == kind && !o->dead;
        }
        j = (j + 1) & (reg_cap - 1);
    }
    return 0;
}

/* An event handle given to an entry point: valid, or (FAKECUDA_STRICT_EVENTS=1) one destroyed and not
 * handed out again aborts the process (`call` names the entry point): a plain program never passes one, so
 * a shim that issues a held record or wait after the program's destroy is caught at once. */
int fc_event_valid(const void *e, const char *call)
{
    if (fc_obj_valid(e, FC_OBJ_EVENT)) return 1;
    if (!fc_g.strict_events || !e || !reg_cap) return 0;
    size_t j = reg_hash((uintptr_t)e) & (reg_cap - 1);
    while (reg_slots[j]) {
        if (reg_slots[j] == (uintptr_t)e) {
            const fc_obj *o = e;
            if (o->kind == FC_OBJ_EVENT && o->dead) {
                fprintf(stderr, "fakecuda: %s: event %p was destroyed (FAKECUDA_STRICT_EVENTS)\n", call, e);
                abort();
            }
            return 0;
        }
        j = (j + 1) & (reg_cap - 1);
    }
    return 0;
}

void *fc_obj_new(size_t size, int kind)
{
    void *p = calloc(1, size);
    if (p && fc_obj_register(p, kind)) {
        free(p);
        return NULL;
    }
    return p;
}

/* ---- init, device, contexts ---- */
fc_ctx *fc_cur_ctx(void)
{
    if (!tl_ctx_depth) return NULL;
    fc_ctx *c = tl_ctx_stack[tl_ctx_depth - 1];
    /* (read without the lock by cuCtxGetCurrent: another thread may destroy it meanwhile) */
    return c && !__atomic_load_n(&c->hdr.dead, __ATOMIC_ACQUIRE) ? c : NULL;
}

static CUresult fc_init(unsigned flags)
{
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    if (fc_g.inited) return CUDA_SUCCESS;
    if (fc_mem_init()) return CUDA_ERROR_OUT_OF_MEMORY;
    fc_g.primary = fc_obj_new(sizeof(fc_ctx), FC_OBJ_CTX);
    fc_g.legacy = fc_obj_new(sizeof(fc_stream), FC_OBJ_STREAM);
    if (!fc_g.primary || !fc_g.legacy) return CUDA_ERROR_OUT_OF_MEMORY;
    fc_g.primary->primary = 1;
    fc_g.legacy->legacy = 1;
    fc_g.legacy->ctx = fc_g.primary;
    fc_g.legacy->id = ++fc_g.next_stream_id;
    fc_g.legacy->hdr.dead = 1; /* never valid as a handle: only 0 / CU_STREAM_LEGACY name it */
    if (fc_vec_push((void **)&fc_g.streams, &fc_g.nstreams, sizeof(fc_stream *), &fc_g.legacy))
        return CUDA_ERROR_OUT_OF_MEMORY;
    __atomic_store_n(&fc_g.inited, 1, __ATOMIC_RELEASE); /* read without the lock by cuCtxGetCurrent */
    return CUDA_SUCCESS;
}

CUresult cuInit(unsigned int Flags) { FC_API(-1, fc_init(Flags)); }

CUresult cuDriverGetVersion(int *v)
{
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    *v = 13000;
    return CUDA_SUCCESS;
}

static CUresult fc_dev_check(CUdevice d) { return d == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE; }

static CUresult fc_device_get(CUdevice *d, int ord)
{
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    if (ord != 0) return CUDA_ERROR_INVALID_DEVICE;
    *d = 0;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGet(CUdevice *d, int ord) { FC_API(0, fc_device_get(d, ord)); }

static CUresult fc_device_count(int *n)
{
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    *n = 1;
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetCount(int *n) { FC_API(0, fc_device_count(n)); }

static CUresult fc_device_name(char *name, int len, CUdevice d)
{
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "fakecuda CPU test double");
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetName(char *name, int len, CUdevice d) { FC_API(0, fc_device_name(name, len, d)); }

static CUresult fc_device_attr(int *pi, CUdevice_attribute a, CUdevice d)
{
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *pi = 64; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *pi = 2147483647; break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *pi = 65535; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *pi = 49152; break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *pi = 232448; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 4; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: *pi = 1000000; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: case CU_DEVICE_ATTRIBUTE_INTEGRATED:
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: *pi = 2; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: *pi = 65536; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: *pi = 2048; break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: *pi = 4 << 20; break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: *pi = 65536; break;
    default:
        if ((int)a <= 0 || a >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
        *pi = 0;
    }
    return CUDA_SUCCESS;
}
CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute a, CUdevice d) { FC_API(0, fc_device_attr(pi, a, d)); }

static CUresult fc_primary_retain(CUcontext *pctx, CUdevice d)
{
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    fc_g.primary_refs++;
    *pctx = (CUcontext)fc_g.primary;
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice d) { FC_API(0, fc_primary_retain(pctx, d)); }

static CUresult fc_primary_release(CUdevice d)
{
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    if (fc_g.primary_refs <= 0) return CUDA_ERROR_INVALID_CONTEXT;
    fc_g.primary_refs--; /* the fake keeps the primary context's state alive: it has no cost */
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) { FC_API(0, fc_primary_release(d)); }

/* Active while retained; a reset waits for its work and leaves it inactive (the fake keeps its state). */
static CUresult fc_primary_state(CUdevice d, unsigned *flags, int *active)
{
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    *flags = 0;
    *active = fc_g.primary_refs > 0;
    return CUDA_SUCCESS;
}
CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned int *flags, int *active)
{
    FC_API(0, fc_primary_state(d, flags, active));
}

static CUresult fc_primary_reset(CUdevice d)
{
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    CUresult r = fc_sync_all();
    fc_g.primary_refs = 0;
    return r;
}
CUresult cuDevicePrimaryCtxReset_v2(CUdevice d) { FC_API(0, fc_primary_reset(d)); }

/* Created context c was destroyed (its work has run): what it made goes with it, as in CUDA. Its streams,
 * events, graphs and execs become handles of a destroyed context (FAKECUDA_STRICT_CONTEXTS: using one
 * aborts), its memory is freed (fc_mem_ctx_gone). A primary context's reset keeps its state in the fake. */
static void fc_module_gone(fc_module *m);
static void fc_ctx_gone(const fc_ctx *c)
{
    for (size_t j = 0; j < reg_cap; j++) {
        fc_obj *o = (fc_obj *)reg_slots[j];
        if (!o || o->dead) continue;
        const fc_ctx *owner = NULL;
        switch (o->kind) {
        case FC_OBJ_STREAM: owner = ((fc_stream *)o)->ctx; break;
        case FC_OBJ_EVENT: owner = ((fc_event *)o)->ctx; break;
        case FC_OBJ_GRAPH:
        case FC_OBJ_EXEC: owner = ((fc_graph *)o)->ctx; break;
        case FC_OBJ_NODE: owner = ((fc_node *)o)->g ? ((fc_node *)o)->g->ctx : NULL; break;
        case FC_OBJ_MODULE: /* a module it loaded (not a library's, which outlives contexts) */
            if (((fc_module *)o)->library == 0 && ((fc_module *)o)->ctx == c) fc_module_gone((fc_module *)o);
            continue;
        default: continue;
        }
        if (owner != c) continue;
        o->dead = FC_DIED_WITH_CTX;
        if (o->kind == FC_OBJ_STREAM) { /* its work ran: it leaves fc_g.streams */
            fc_stream *s = (fc_stream *)o;
            s->destroyed = 1;
            if (!s->head) fc_vec_remove((void **)fc_g.streams, &fc_g.nstreams, s);
        }
    }
    fc_mem_ctx_gone(c);
}

static CUresult fc_ctx_create(CUcontext *pctx, unsigned flags, CUdevice d)
{
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (fc_dev_check(d)) return CUDA_ERROR_INVALID_DEVICE;
    fc_ctx *c = fc_g.recycled_ctxs;
    if (c) { /* FAKECUDA_REUSE_CONTEXTS: a destroyed context's handle, now a new context's */
        fc_g.recycled_ctxs = c->next_recycled;
        c->next_recycled = NULL;
        c->hdr.dead = 0;
    } else {
        c = fc_obj_new(sizeof(*c), FC_OBJ_CTX);
    }
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    if (tl_ctx_depth >= 32) return CUDA_ERROR_INVALID_VALUE;
    tl_ctx_stack[tl_ctx_depth++] = c; /* cuCtxCreate pushes the new context */
    *pctx = (CUcontext)c;
    return CUDA_SUCCESS;
}
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) { FC_API(0, fc_ctx_create(pctx, flags, dev)); }
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *p, int n, unsigned int flags, CUdevice dev)
{
    FC_API(0, fc_ctx_create(pctx, flags, dev));
}
CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *p, unsigned int flags, CUdevice dev)
{
    FC_API(0, fc_ctx_create(pctx, flags, dev));
}

static CUresult fc_ctx_destroy(CUcontext h)
{
    fc_ctx *c = (fc_ctx *)h;
    if (!fc_obj_valid(c, FC_OBJ_CTX) || c->primary) return CUDA_ERROR_INVALID_CONTEXT;
    CUresult r = fc_sync_all();
    __atomic_store_n(&c->hdr.dead, 1, __ATOMIC_RELEASE);
    /* current on the calling thread: popped, as by cuCtxPopCurrent (the one below is current again) */
    if (tl_ctx_depth && tl_ctx_stack[tl_ctx_depth - 1] == c) tl_ctx_depth--;
    for (int i = 0; i < tl_ctx_depth; i++)
        if (tl_ctx_stack[i] == c) tl_ctx_stack[i] = NULL;
    fc_ctx_gone(c);
    if (fc_g.reuse_contexts) c->next_recycled = fc_g.recycled_ctxs, fc_g.recycled_ctxs = c;
    return r;
}
static CUresult fc_ctx_destroy_api(CUcontext c) { FC_API_FOR("cuCtxDestroy_v2", 0, fc_ctx_destroy(c)); }
CUresult cuCtxDestroy_v2(CUcontext c)
{
    CUresult r = fc_ctx_destroy_api(c);
    if (r == CUDA_SUCCESS && fc_g.ctx_destroy_return_ns) { /* asleep: other threads run meanwhile */
        struct timespec ts = {(time_t)(fc_g.ctx_destroy_return_ns / 1000000000u),
                              (long)(fc_g.ctx_destroy_return_ns % 1000000000u)};
        nanosleep(&ts, NULL);
    }
    return r;
}

static CUresult fc_ctx_set(CUcontext h)
{
    if (h && !fc_obj_valid(h, FC_OBJ_CTX)) return CUDA_ERROR_INVALID_CONTEXT;
    if (!h) {
        if (tl_ctx_depth) tl_ctx_depth--;
        return CUDA_SUCCESS;
    }
    if (!tl_ctx_depth) tl_ctx_depth = 1;
    tl_ctx_stack[tl_ctx_depth - 1] = (fc_ctx *)h;
    return CUDA_SUCCESS;
}
CUresult cuCtxSetCurrent(CUcontext c) { FC_API(0, fc_ctx_set(c)); }

static CUresult fc_ctx_get(CUcontext *pc)
{
    if (!pc) return CUDA_ERROR_INVALID_VALUE;
    *pc = (CUcontext)fc_cur_ctx();
    return CUDA_SUCCESS;
}
/* Without the fake's lock, as the driver's own is (a read of the thread's context stack): the shim asks
 * at every launch, and behind the lock it would wait for whatever another thread runs there (an issuer
 * thread's graph launch with its kernels' work), serializing what a real driver runs side by side. A call
 * from inside a kernel's work, before cuInit, or with FAKECUDA_FAIL set takes the locked path. */
static int fc_fail_set = -1;
__attribute__((constructor)) static void fc_fail_env(void) { fc_fail_set = getenv("FAKECUDA_FAIL") != NULL; }
CUresult cuCtxGetCurrent(CUcontext *pc)
{
    if (pc && !fc_fail_set && !fc_tl_in_work && __atomic_load_n(&fc_g.inited, __ATOMIC_ACQUIRE)) {
        *pc = (CUcontext)fc_cur_ctx();
        return CUDA_SUCCESS;
    }
    FC_API(0, fc_ctx_get(pc));
}

static CUresult fc_ctx_push(CUcontext h)
{
    if (!fc_obj_valid(h, FC_OBJ_CTX)) return CUDA_ERROR_INVALID_CONTEXT;
    if (tl_ctx_depth >= 32) return CUDA_ERROR_INVALID_VALUE;
    tl_ctx_stack[tl_ctx_depth++] = (fc_ctx *)h;
    return CUDA_SUCCESS;
}
CUresult cuCtxPushCurrent_v2(CUcontext c) { FC_API(0, fc_ctx_push(c)); }

static CUresult fc_ctx_pop(CUcontext *pc)
{
    if (!tl_ctx_depth) return CUDA_ERROR_INVALID_CONTEXT;
    fc_ctx *c = tl_ctx_stack[--tl_ctx_depth];
    if (pc) *pc = (CUcontext)c;
    return CUDA_SUCCESS;
}
CUresult cuCtxPopCurrent_v2(CUcontext *pc) { FC_API(0, fc_ctx_pop(pc)); }

static CUresult fc_ctx_device(CUdevice *d)
{
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    *d = 0;
    return CUDA_SUCCESS;
}
CUresult cuCtxGetDevice(CUdevice *d) { FC_API(1, fc_ctx_device(d)); }

static CUresult fc_ctx_sync(void)
{
    fc_g.stats.syncs++;
    /* Synchronizing the device while anything captures breaks the capture, as in CUDA. */
    CUresult r = fc_captures_break();
    return r ? r : fc_sync_all();
}

CUresult fc_captures_break(void)
{
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < fc_g.ncaps; i++)
        if (fc_g.caps[i]->active) {
            fc_capture_invalidate(fc_g.caps[i]);
            r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    return r;
}
static CUresult fc_ctx_sync_api(void) { FC_TRACED_FOR(cuCtxSynchronize, 1, fc_ctx_sync()); }
CUresult cuCtxSynchronize(void) { FC_CTX_WIDE(fc_ctx_sync_api()); }

static CUresult fc_ctx_sync2(CUcontext c)
{
    if (c && !fc_obj_valid(c, FC_OBJ_CTX)) return CUDA_ERROR_INVALID_CONTEXT;
    if (!c && !fc_cur_ctx()) return CUDA_ERROR_INVALID_CONTEXT;
    return fc_ctx_sync();
}
static CUresult fc_ctx_sync2_api(CUcontext c) { FC_TRACED_FOR(cuCtxSynchronize_v2, 0, fc_ctx_sync2(c)); }
CUresult cuCtxSynchronize_v2(CUcontext c) { FC_CTX_WIDE(fc_ctx_sync2_api(c)); }

/* ---- errors ---- */
#define FC_ERRS(X)                                                                                 \
    X(CUDA_SUCCESS, "no error") X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                   \
    X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                                   \
    X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                                          \
    X(CUDA_ERROR_DEINITIALIZED, "driver shutting down")                                            \
    X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")                                  \
    X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                                         \
    X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid")                                  \
    X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                                        \
    X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                                        \
    X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                                              \
    X(CUDA_ERROR_NOT_READY, "device not ready")                                                    \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")                      \
    X(CUDA_ERROR_LAUNCH_FAILED, "unspecified launch failure")                                      \
    X(CUDA_ERROR_LAUNCH_TIMEOUT, "the launch timed out and was terminated")                        \
    X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")                                         \
    X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                                         \
    X(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "part or all of the requested memory range is already mapped") \
    X(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a registered memory region") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing")  \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "operation failed due to a previous error during capture") \
    X(CUDA_ERROR_STREAM_CAPTURE_MERGE, "operation would result in a merge of separate capture sequences") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "capture was not ended in the same stream as it began") \
    X(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "capturing stream has unjoined work")                    \
    X(CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "dependency created on uncaptured work in another stream") \
    X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "operation would make the legacy stream depend on a capturing blocking stream") \
    X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "attempt to terminate a thread-local capture sequence from another thread") \
    X(CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "the graph update was not performed because it included changes which violated constraints specific to instantiated graph update") \
    X(CUDA_ERROR_ILLEGAL_STATE, "the operation is not permitted in the current state")             \
    X(CUDA_ERROR_UNKNOWN, "unknown error")

static CUresult fc_err_lookup(CUresult e, const char **name, const char **str)
{
#define X(code, s)                                                                                 \
    if (e == code) {                                                                               \
        if (name) *name = #code;                                                                   \
        if (str) *str = s;                                                                         \
        return CUDA_SUCCESS;                                                                       \
    }
    FC_ERRS(X)
#undef X
    if (name) *name = NULL;
    if (str) *str = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}
CUresult cuGetErrorName(CUresult e, const char **p)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    return fc_err_lookup(e, p, NULL);
}
CUresult cuGetErrorString(CUresult e, const char **p)
{
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    return fc_err_lookup(e, NULL, p);
}

/* ---- test API ---- */
int fakecuda_register_kernel(const char *name, fakecuda_kernel_fn fn, unsigned nparams,
                             const size_t *param_sizes)
{
    if (!name || !*name || !fn || (nparams && !param_sizes)) return -EINVAL;
    for (unsigned i = 0; i < nparams; i++)
        if (param_sizes[i] == 0) return -EINVAL;
    fc_kernel k = {0};
    k.name = strdup(name);
    k.fn = fn;
    k.nparams = nparams;
    k.sizes = calloc(nparams + 1, sizeof(size_t));
    k.offsets = calloc(nparams + 1, sizeof(size_t));
    if (!k.name || !k.sizes || !k.offsets) {
        free(k.name), free(k.sizes), free(k.offsets);
        return -ENOMEM;
    }
    size_t off = 0;
    for (unsigned i = 0; i < nparams; i++) {
        size_t al = param_sizes[i] >= 8 ? 8 : param_sizes[i] >= 4 ? 4 : param_sizes[i] >= 2 ? 2 : 1;
        while (al > 1 && param_sizes[i] % al) al >>= 1; /* natural alignment of the size */
        off = (off + al - 1) / al * al;
        k.sizes[i] = param_sizes[i];
        k.offsets[i] = off;
        off += param_sizes[i];
    }
    k.argsize = off;
    fc_lock();
    int rc = 0;
    for (size_t i = 0; i < fc_g.nkernels; i++)
        if (!strcmp(fc_g.kernels[i].name, name)) {
            free(fc_g.kernels[i].name), free(fc_g.kernels[i].sizes), free(fc_g.kernels[i].offsets);
            fc_g.kernels[i] = k;
            goto out;
        }
    rc = fc_vec_push((void **)&fc_g.kernels, &fc_g.nkernels, sizeof(k), &k);
out:
    fc_leave();
    return rc;
}

void fakecuda_set_seed(unsigned seed)
{
    fc_lock();
    fc_g.rng = (uint64_t)seed * 0x9E3779B97F4A7C15ull + 1;
    fc_leave();
}

void fakecuda_set_query_not_ready(int on)
{
    fc_lock();
    fc_g.query_not_ready = on != 0;
    fc_leave();
}

void fakecuda_run_all(void)
{
    fc_lock();
    (void)fc_sync_all();
    fc_leave();
}

void fakecuda_set_host_costs(unsigned long long launch_ns, unsigned long long graph_ns)
{
    fc_lock();
    fc_g.launch_ns = launch_ns;
    fc_g.graph_ns = graph_ns;
    fc_leave();
}

void fakecuda_get_host_costs(unsigned long long *launch_ns, unsigned long long *graph_ns)
{
    fc_lock();
    *launch_ns = fc_g.launch_ns;
    *graph_ns = fc_g.graph_ns;
    fc_leave();
}

void fakecuda_stats(fakecuda_stats_t *out)
{
    fc_lock();
    if (out) {
        *out = fc_g.stats;
        out->streams_listed = fc_g.nstreams;
        out->captures_listed = fc_g.ncaps;
    }
    fc_leave();
}

void fakecuda_reset_stats(void)
{
    fc_lock();
    memset(&fc_g.stats, 0, sizeof(fc_g.stats));
    fc_leave();
}

/* ---- modules, libraries, functions ---- */
static CUresult fc_module_new(CUmodule *out, const void *image, int library)
{
    if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
    if (strncmp((const char *)image, "fakecuda-module", 15)) return CUDA_ERROR_INVALID_IMAGE;
    fc_module *m = fc_obj_new(sizeof(*m), FC_OBJ_MODULE);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    m->library = library;
    m->ctx = fc_cur_ctx();
    *out = (CUmodule)m;
    return CUDA_SUCCESS;
}
CUresult cuModuleLoadData(CUmodule *m, const void *image) { FC_API(1, fc_module_new(m, image, 0)); }
CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned int n, CUjit_option *o, void **v)
{
    FC_API(1, fc_module_new(m, image, 0));
}
CUresult cuModuleLoadFatBinary(CUmodule *m, const void *image) { FC_API(1, fc_module_new(m, image, 0)); }

static CUresult fc_module_load_file(CUmodule *m, const char *path)
{
    if (!m || !path) return CUDA_ERROR_INVALID_VALUE;
    FILE *f = fopen(path, "rb");
    if (!f) return CUDA_ERROR_FILE_NOT_FOUND;
    char buf[64] = {0};
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    (void)n;
    return fc_module_new(m, buf, 0);
}
CUresult cuModuleLoad(CUmodule *m, const char *path) { FC_API(1, fc_module_load_file(m, path)); }

static CUresult fc_module_unload(fc_module *m, int library)
{
    if (!fc_obj_valid(m, FC_OBJ_MODULE) || m->library != library)
        return library ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_sync_all(); /* pending launches of its kernels must run first */
    fc_module_gone(m);
    return r;
}

/* Module m is unloaded, its work done: it and its functions are dead handles (FAKECUDA_REUSE_HANDLES: the
 * functions' handles go to later kernels). */
static void fc_module_gone(fc_module *m)
{
    m->hdr.dead = 1;
    for (fc_func *f = m->funcs, *next; f; f = next) {
        next = f->next;
        f->hdr.dead = 1;
        if (fc_g.reuse_handles) f->next = fc_g.recycled, fc_g.recycled = f;
    }
    m->funcs = NULL;
    for (fc_module *cm = m->ctxmods; cm; cm = cm->next) cm->hdr.dead = 1;
    m->ctxmods = NULL;
}
CUresult cuModuleUnload(CUmodule m) { FC_API(1, fc_module_unload((fc_module *)m, 0)); }

static int fc_kernel_index(const char *name)
{
    for (size_t i = 0; i < fc_g.nkernels; i++)
        if (!strcmp(fc_g.kernels[i].name, name)) return (int)i;
    return -1;
}

/* A new function or kernel handle of module m (FAKECUDA_REUSE_HANDLES: an unloaded one's). */
static fc_func *fc_func_alloc(fc_module *m, int kidx, int kind)
{
    fc_func *f = fc_g.recycled;
    if (f) { /* FAKECUDA_REUSE_HANDLES: an unloaded kernel's handle, now another kernel's */
        fc_g.recycled = f->next;
        unsigned gen = f->gen;
        memset((char *)f + sizeof(f->hdr), 0, sizeof(*f) - sizeof(f->hdr));
        f->gen = gen + 1;
        f->hdr.kind = kind;
        f->hdr.dead = 0;
    } else {
        f = fc_obj_new(sizeof(*f), kind);
    }
    if (!f) return NULL;
    f->mod = m;
    f->kidx = kidx;
    f->next = m->funcs;
    m->funcs = f;
    return f;
}

/* One handle per (module, kernel, kind), so repeated lookups give equal handles, as in CUDA. */
static fc_func *fc_func_get(fc_module *m, int kidx, int kind)
{
    for (fc_func *f = m->funcs; f; f = f->next)
        if (f->kidx == kidx && f->hdr.kind == kind) return f;
    return fc_func_alloc(m, kidx, kind);
}

static CUresult fc_get_function(void **out, fc_module *m, const char *name, int library)
{
    if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
    if (!fc_obj_valid(m, FC_OBJ_MODULE) || m->library != library) return CUDA_ERROR_INVALID_HANDLE;
    int k = fc_kernel_index(name);
    if (k < 0) return CUDA_ERROR_NOT_FOUND;
    fc_func *f = fc_func_get(m, k, library ? FC_OBJ_KERN : FC_OBJ_FUNC);
    if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
    *out = f;
    return CUDA_SUCCESS;
}
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name)
{
    FC_API(1, fc_get_function((void **)f, (fc_module *)m, name, 0));
}

static CUresult fc_module_global(CUdeviceptr *dptr, size_t *bytes, CUmodule m, const char *name)
{
    if (!fc_obj_valid(m, FC_OBJ_MODULE)) return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_ERROR_NOT_FOUND; /* fake modules have no globals */
}
CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule m, const char *name)
{
    FC_API(1, fc_module_global(dptr, bytes, m, name));
}

static CUresult fc_library_load(CUlibrary *lib, const void *code)
{
    return fc_module_new((CUmodule *)lib, code, 1);
}
CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jo, void **jv,
                           unsigned int nj, CUlibraryOption *lo, void **lv, unsigned int nl)
{
    FC_API(0, fc_library_load(library, code)); /* libraries are context-independent */
}
CUresult cuLibraryUnload(CUlibrary l) { FC_API(0, fc_module_unload((fc_module *)l, 1)); }
CUresult cuLibraryGetKernel(CUkernel *k, CUlibrary l, const char *name)
{
    FC_API(0, fc_get_function((void **)k, (fc_module *)l, name, 1));
}

/* The library's module in context c (made at its first use there). */
static fc_module *fc_lib_ctxmod(fc_module *lib, fc_ctx *c)
{
    for (fc_module *cm = lib->ctxmods; cm; cm = cm->next)
        if (cm->ctx == c) return cm;
    fc_module *cm = fc_obj_new(sizeof(*cm), FC_OBJ_MODULE);
    if (!cm) return NULL;
    cm->library = 2;
    cm->ctx = c;
    cm->next = lib->ctxmods;
    lib->ctxmods = cm;
    return cm;
}

static CUresult fc_kernel_get_function(CUfunction *out, CUkernel k)
{
    fc_func *kf = (fc_func *)k;
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    if (!fc_obj_valid(kf, FC_OBJ_KERN)) return CUDA_ERROR_INVALID_HANDLE;
    fc_ctx *c = fc_cur_ctx();
    fc_func *f = kf->mod->funcs;
    while (f && !(f->kern == kf && f->ctx == c)) f = f->next;
    if (!f) {
        f = fc_func_alloc(kf->mod, kf->kidx, FC_OBJ_FUNC);
        if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
        f->kern = kf;
        f->ctx = c;
        f->max_dyn = kf->max_dyn;
    }
    *out = (CUfunction)f;
    return CUDA_SUCCESS;
}
CUresult cuKernelGetFunction(CUfunction *f, CUkernel k) { FC_API(1, fc_kernel_get_function(f, k)); }

/* Whose a kernel is. A library has a module of its own in each context (made at its first use there):
 * cuLibraryGetModule names the one of the calling thread's context, cuFuncGetModule that of the
 * function's context for a library kernel's function. FAKECUDA_NO_OWNER=1: all three fail, as on a
 * driver that cannot say. */
static CUresult fc_owner(void **out, void *h, int kind, int lib)
{
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    if (fc_g.no_owner) return CUDA_ERROR_NOT_SUPPORTED;
    if (lib) {
        fc_module *m = h;
        if (!fc_obj_valid(m, FC_OBJ_MODULE) || m->library != 1) return CUDA_ERROR_INVALID_HANDLE;
        *out = fc_lib_ctxmod(m, fc_cur_ctx());
        return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    fc_func *f = h;
    if (!fc_obj_valid(f, kind) || f->mod->hdr.dead) return CUDA_ERROR_INVALID_HANDLE;
    *out = f->kern ? (void *)fc_lib_ctxmod(f->mod, f->ctx) : (void *)f->mod;
    return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}
CUresult cuFuncGetModule(CUmodule *m, CUfunction f) { FC_API(0, fc_owner((void **)m, f, FC_OBJ_FUNC, 0)); }
CUresult cuKernelGetLibrary(CUlibrary *l, CUkernel k) { FC_API(0, fc_owner((void **)l, k, FC_OBJ_KERN, 0)); }
CUresult cuLibraryGetModule(CUmodule *m, CUlibrary l) { FC_API(1, fc_owner((void **)m, l, 0, 1)); }

const fc_kernel *fc_func_kernel(const fc_func *f) { return &fc_g.kernels[f->kidx]; }

/* Launches accept CUfunction or CUkernel (the runtime passes CUkernels cast to CUfunction). */
CUresult fc_func_resolve(CUfunction h, fc_func **out)
{
    fc_func *f = (fc_func *)h;
    if (!fc_obj_valid(f, FC_OBJ_FUNC) && !fc_obj_valid(f, FC_OBJ_KERN)) return CUDA_ERROR_INVALID_HANDLE;
    if (f->mod->hdr.dead) return CUDA_ERROR_INVALID_HANDLE;
    *out = f;
    return CUDA_SUCCESS;
}

static CUresult fc_name(const char **name, const void *h, int kind)
{
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    if (!fc_obj_valid(h, kind)) return CUDA_ERROR_INVALID_HANDLE;
    *name = fc_func_kernel(h)->name;
    return CUDA_SUCCESS;
}
CUresult cuFuncGetName(const char **name, CUfunction f) { FC_API(0, fc_name(name, f, FC_OBJ_FUNC)); }
CUresult cuKernelGetName(const char **name, CUkernel k) { FC_API(0, fc_name(name, k, FC_OBJ_KERN)); }

static CUresult fc_param_info(const void *h, int kind, size_t i, size_t *off, size_t *size)
{
    if (!fc_obj_valid(h, kind)) return CUDA_ERROR_INVALID_HANDLE;
    const fc_kernel *k = fc_func_kernel(h);
    if (i >= k->nparams) return CUDA_ERROR_INVALID_VALUE;
    if (off) *off = k->offsets[i];
    if (size) *size = k->sizes[i];
    return CUDA_SUCCESS;
}
CUresult cuFuncGetParamInfo(CUfunction f, size_t i, size_t *off, size_t *size)
{
    FC_API(0, fc_param_info(f, FC_OBJ_FUNC, i, off, size));
}
CUresult cuKernelGetParamInfo(CUkernel k, size_t i, size_t *off, size_t *size)
{
    FC_API(0, fc_param_info(k, FC_OBJ_KERN, i, off, size));
}

/* The most dynamic shared memory a launch of f may ask for: 48 KiB unless the program raised it (or lowered
 * it again) with cuFuncSetAttribute / cuKernelSetAttribute, as CUDA rules. */
int fc_max_dyn(const void *h)
{
    const fc_func *f = h;
    return f->max_dyn < 0 ? 0 : f->max_dyn ? f->max_dyn : 49152;
}

static CUresult fc_func_attr(int *pi, CUfunction_attribute a, const void *h, int kind)
{
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    if (!fc_obj_valid(h, kind)) return CUDA_ERROR_INVALID_HANDLE;
    switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS: *pi = 32; break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION: case CU_FUNC_ATTRIBUTE_BINARY_VERSION: *pi = 90; break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES: *pi = fc_max_dyn(h); break;
    default:
        if ((int)a < 0 || a >= CU_FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
        *pi = 0;
    }
    return CUDA_SUCCESS;
}
CUresult cuFuncGetAttribute(int *pi, CUfunction_attribute a, CUfunction f)
{
    FC_API(1, fc_func_attr(pi, a, f, FC_OBJ_FUNC));
}
CUresult cuKernelGetAttribute(int *pi, CUfunction_attribute a, CUkernel k, CUdevice d)
{
    FC_API(0, d != 0 ? CUDA_ERROR_INVALID_DEVICE : fc_func_attr(pi, a, k, FC_OBJ_KERN));
}

static CUresult fc_func_set_attr(CUfunction_attribute a, int v, const void *h, int kind)
{
    if (!fc_obj_valid(h, kind)) return CUDA_ERROR_INVALID_HANDLE;
    if (a != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES &&
        a != CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT &&
        a != CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH && a != CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED &&
        a != CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE)
        return CUDA_ERROR_INVALID_VALUE;
    if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && (v < 0 || v > 232448))
        return CUDA_ERROR_INVALID_VALUE;
    if (a == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) {
        fc_func *f = (fc_func *)h;
        f->max_dyn = v ? v : -1; /* -1: set to 0 (no dynamic shared memory at all) */
        if (kind == FC_OBJ_KERN) /* its functions share it */
            for (fc_func *t = f->mod->funcs; t; t = t->next)
                if (t->kern == f) t->max_dyn = f->max_dyn;
    }
    return CUDA_SUCCESS;
}
/* The context limits (one set for the process: the fake's contexts share a device): kept, not enforced. */
static size_t fc_limits[CU_LIMIT_MAX];
static CUresult fc_set_limit(CUlimit l, size_t v)
{
    if ((unsigned)l >= CU_LIMIT_MAX) return CUDA_ERROR_UNSUPPORTED_LIMIT;
    fc_limits[l] = v;
    return CUDA_SUCCESS;
}
static CUresult fc_get_limit(size_t *v, CUlimit l)
{
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    if ((unsigned)l >= CU_LIMIT_MAX) return CUDA_ERROR_UNSUPPORTED_LIMIT;
    *v = fc_limits[l];
    return CUDA_SUCCESS;
}
CUresult cuCtxSetLimit(CUlimit l, size_t v) { FC_API(1, fc_set_limit(l, v)); }
CUresult cuCtxGetLimit(size_t *v, CUlimit l) { FC_API(1, fc_get_limit(v, l)); }

CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v)
{
    FC_API(1, fc_func_set_attr(a, v, f, FC_OBJ_FUNC));
}
CUresult fakecuda_unhooked_func_set_attribute(CUfunction f, CUfunction_attribute a, int v)
{
    FC_API(1, fc_func_set_attr(a, v, f, FC_OBJ_FUNC));
}
CUresult cuKernelSetAttribute(CUfunction_attribute a, int v, CUkernel k, CUdevice d)
{
    FC_API(0, d != 0 ? CUDA_ERROR_INVALID_DEVICE : fc_func_set_attr(a, v, k, FC_OBJ_KERN));
}

/* Packs arguments at the param-info offsets; kernelParams and extra are exclusive. */
int fc_kernel_pack(const fc_kernel *k, void **kernelParams, void **extra, fc_launch *out, CUresult *err)
{
    *err = CUDA_ERROR_INVALID_VALUE;
    if (kernelParams && extra) return -EINVAL;
    out->bufsize = k->argsize;
    out->buf = calloc(1, k->argsize ? k->argsize : 1);
    if (!out->buf) return *err = CUDA_ERROR_OUT_OF_MEMORY, -ENOMEM;
    if (extra) {
        void *p = NULL;
        size_t *sz = NULL;
        for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
            if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) p = extra[i + 1];
            else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) sz = extra[i + 1];
            else goto bad;
        }
        if (!p || !sz || *sz < k->argsize) goto bad;
        memcpy(out->buf, p, k->argsize);
    } else if (k->nparams) {
        if (!kernelParams) goto bad;
        for (unsigned i = 0; i < k->nparams; i++) {
            if (!kernelParams[i]) goto bad;
            memcpy(out->buf + k->offsets[i], kernelParams[i], k->sizes[i]);
        }
    }
    *err = CUDA_SUCCESS;
    return 0;
bad:
    free(out->buf);
    out->buf = NULL;
    return -EINVAL;
}
