/* The replay engine. Deferrable operations (kernel launches, async memsets, async device-to-device
 * copies) are matched against the variants the learner expects next; while one still matches they are
 * held back (their arguments copied into an arena), and when a variant completes, its CUDA graph (built
 * once by re-issuing the operations under stream capture on a private stream) is launched onto the
 * application's stream with the changed arguments patched in. A mismatch, a barrier in the middle of a
 * chunk, or any failure issues the held operations eagerly, in order: deferral stays invisible. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine.h"
#include "pattern.h"

#define MAX_ATTRS 8
/* Streams in one graph, and event records in one chunk; more ends the chunk. */
#define MAX_STREAMS 8
#define MAX_RECORDS 16
/* A blocking device-to-host copy up to this size can end a graph (through a staging buffer). */
#define D2H_STAGING_MAX (1u << 20)
/* Pageable host-to-device sources are snapshotted into pinned staging buffers, used in turn; a buffer is
 * reused only after the work that reads it has run (events recorded after each issue, per stream). */
#define STAGE_BUFS 4
#define STAGE_SIZE E.stg.size /* AUTOGRAPH_STAGING_KB */
#define STAGE_STREAMS 4
#define LAYOUT_SLOTS 8192

/* ---- driver entry points the engine calls besides the hooked ones ---- */
#define AG_DRV(name, params) typedef CUresult(CUDAAPI *drv_##name##_t) params;
#include "driver.def"
#undef AG_DRV
static struct {
#define AG_DRV(name, params) drv_##name##_t name;
#include "driver.def"
#undef AG_DRV
} drv;

#define REAL(name) ((ag_fn_##name##_t)ag_real[AG_ID_##name])

/* ---- kernel argument layouts, per function handle ---- */
typedef struct {
    const void *handle;
    uint32_t nparams;
    uint32_t total;   /* bytes from the first parameter to the end of the last */
    uint8_t no_defer; /* NCCL kernels, or no layout */
    uint32_t *off, *size;
    /* padding between parameters: zeroed on copy so that equal arguments compare equal */
    uint32_t ngaps;
    uint32_t *gap_off, *gap_len;
} layout_t;

typedef enum { OP_KERNEL, OP_MEMSET, OP_COPY, OP_EVREC, OP_EVWAIT, OP_D2H, OP_H2D } op_kind_t;

typedef struct {
    uint8_t kind;
    uint8_t ex; /* from cuLaunchKernelEx */
    uint8_t nattrs;
    ag_id_t id; /* the entry point it came through, for an eager re-issue */
    CUfunction f;
    unsigned grid[3], block[3], smem;
    CUstream stream;
    const layout_t *layout;
    size_t arg_off; /* kernel arguments in the arena */
    /* memset / copy (hdst: the host destination of a blocking device-to-host copy; hsrc: the pinned
     * source of a host-to-device copy, the application's or a staging buffer of ours) */
    CUdeviceptr dst, src;
    void *hdst;
    const void *hsrc;
    int8_t stage; /* staging buffer of a snapshotted pageable source, or -1 */
    size_t n;
    unsigned value, elem;
    /* event record / wait: the event is an argument, not part of the signature; what a wait depends on
     * is (the chunk position of the record it waits for, or -1 for a record made before the chunk) */
    CUevent event;
    unsigned flags;
    int32_t rec_idx;
    /* last, so that copies of an operation without attributes stop before them */
    CUlaunchAttribute attrs[MAX_ATTRS];
} op_t;

static size_t op_size(const op_t *o)
{
    return offsetof(op_t, attrs) + sizeof(CUlaunchAttribute) * o->nattrs;
}

/* A variant's graph: the executable, its nodes in operation order, and what each node holds now. */
typedef struct {
    CUgraph graph;
    CUgraphExec exec;
    uint32_t n;
    CUgraphNode *nodes;
    CUDA_KERNEL_NODE_PARAMS *kp;
    op_t *ops;            /* what each node holds now (kernel arguments in args) */
    unsigned char *args;  /* kernel argument bytes baked into the exec */
    void **d2h_dst;       /* the staging buffer each device-to-host node writes to now */
    uint64_t last_launch; /* for least-recently-used eviction */
    ag_variant_t *owner;
} graph_t;

enum {
    FB_MISMATCH,
    FB_BARRIER,
    FB_STREAM,
    FB_UNDEFERRABLE,
    FB_CAPTURE_FAILED,
    FB_LAUNCH_FAILED,
    FB_PATCH_FAILED,
    FB_CONTEXT,
    FB_COUNT
};
static const char *const fb_names[FB_COUNT] = {"mismatch", "sync_mid_chunk", "other_stream", "undeferrable",
                                               "graph_build_failed", "graph_launch_failed", "graph_patch_failed",
                                               "other_context"};

static struct {
    pthread_mutex_t lock;
    int ready, disabled;
    CUcontext ctx;
    ag_learner_t learner;
    ag_variant_t *cands[AG_MAX_CANDIDATES];
    int ncand;
    ag_variant_t *match[AG_MAX_CANDIDATES];
    int nmatch;
    CUstream cur_stream;
    int have_stream;
    op_t *pending;
    uint32_t npending, cap_pending;
    unsigned char *arena;
    size_t arena_used, arena_cap;
    void **ptrs; /* scratch kernelParams */
    uint32_t cap_ptrs;
    CUstream cap_stream;
    CUstream cap_streams[MAX_STREAMS]; /* [0] is cap_stream; the others join a capture through events */
    CUevent fork_ev, post_ev, join_ev[MAX_STREAMS], pre_ev[MAX_STREAMS], shadow_ev[MAX_RECORDS];
    /* event records of the current chunk: which event, at which position */
    struct {
        CUevent ev;
        uint32_t pos;
    } recs[MAX_RECORDS];
    int nrecs;
    /* the staging buffer of the blocking device-to-host copy that ended the graph just launched (its
     * caller copies out of it after the sync), or NULL */
    const void *copyout;
    struct {
        unsigned char *buf[STAGE_BUFS];
        int cur;
        size_t off;
        CUstream fence_stream[STAGE_BUFS][STAGE_STREAMS];
        CUevent fence_ev[STAGE_BUFS][STAGE_STREAMS];
        int nfence[STAGE_BUFS];
        unsigned pending_mask; /* buffers the pending operations read */
        unsigned retired;      /* buffers that could not be fenced: replaced, never rewritten */
        size_t size;
    } stg;
    layout_t *layouts[LAYOUT_SLOTS];
    graph_t **graphs;
    uint32_t ngraphs, max_graphs;
    uint64_t clock;
    int app_captures;

    /* statistics (under the lock) */
    uint64_t deferred, replayed, graphs_built, graph_launches, nodes_patched, graphs_evicted, copies_out;
    uint64_t fallbacks[FB_COUNT];
    uint64_t match_ns, match_timed, eager_ns, eager_timed, eager_count, replay_host_ns;
} E = {.lock = PTHREAD_MUTEX_INITIALIZER};

atomic_int ag_engine_on;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void disable(const char *why, CUresult r)
{
    E.disabled = 1;
    atomic_store(&ag_engine_on, 0);
    ag_log(AG_LOG_ERROR, "engine disabled (%s, CUDA error %d); the program goes on with plain launches", why, (int)r);
}

/* ---- arena and pending operations ---- */

static int reserve(size_t bytes)
{
    if (E.arena_used + bytes <= E.arena_cap)
        return 0;
    size_t cap = E.arena_cap ? E.arena_cap : 1 << 16;
    while (cap < E.arena_used + bytes)
        cap *= 2;
    unsigned char *a = realloc(E.arena, cap);
    if (!a)
        return -1;
    E.arena = a;
    E.arena_cap = cap;
    return 0;
}

static op_t *pending_slot(void)
{
    if (E.npending == E.cap_pending) {
        uint32_t cap = E.cap_pending ? E.cap_pending * 2 : 256;
        op_t *p = realloc(E.pending, sizeof *p * cap);
        if (!p)
            return NULL;
        E.pending = p;
        E.cap_pending = cap;
    }
    return &E.pending[E.npending];
}

static void **param_ptrs(const layout_t *lay, unsigned char *args)
{
    if (lay->nparams > E.cap_ptrs) {
        void **p = realloc(E.ptrs, sizeof *p * lay->nparams);
        if (!p)
            return NULL;
        E.ptrs = p;
        E.cap_ptrs = lay->nparams;
    }
    for (uint32_t i = 0; i < lay->nparams; i++)
        E.ptrs[i] = args + lay->off[i];
    return E.ptrs;
}

/* ---- layouts ---- */

static int is_nccl(const char *name)
{
    return name && (strstr(name, "ncclKernel") || strstr(name, "ncclDevKernel"));
}

/* Records the bytes no parameter covers. Parameters arrive in offset order from the driver; anything
 * else (overlaps, disorder) is treated as having no usable layout. */
static int find_gaps(layout_t *l)
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

static const layout_t *layout_of(CUfunction f)
{
    uint32_t h = (uint32_t)(((uintptr_t)f >> 4) ^ ((uintptr_t)f >> 20)) % LAYOUT_SLOTS;
    for (uint32_t probe = 0; probe < LAYOUT_SLOTS; probe++, h = (h + 1) % LAYOUT_SLOTS) {
        layout_t *l = E.layouts[h];
        if (!l)
            break;
        if (l->handle == f)
            return l;
    }
    if (E.layouts[h])
        return NULL; /* table full: such a program is not ours to speed up */
    layout_t *l = calloc(1, sizeof *l);
    if (!l)
        return NULL;
    l->handle = f;
    /* PyTorch passes CUkernel handles, on which the CUfunction queries fail with INVALID_HANDLE. */
    int kernel = 0;
    size_t off, size;
    CUresult r = drv.cuFuncGetParamInfo(f, 0, &off, &size);
    if (r == CUDA_ERROR_INVALID_HANDLE && drv.cuKernelGetParamInfo) {
        kernel = 1;
        r = drv.cuKernelGetParamInfo((CUkernel)f, 0, &off, &size);
    }
    const char *name = NULL;
    if (kernel ? !drv.cuKernelGetName || drv.cuKernelGetName(&name, (CUkernel)f) != CUDA_SUCCESS
               : !drv.cuFuncGetName || drv.cuFuncGetName(&name, f) != CUDA_SUCCESS)
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
            r = kernel ? drv.cuKernelGetParamInfo((CUkernel)f, i + 1, &off, &size)
                       : drv.cuFuncGetParamInfo(f, i + 1, &off, &size);
        }
    }
    if (!l->no_defer && find_gaps(l) != 0)
        l->no_defer = 1;
    if (is_nccl(name))
        l->no_defer = 1; /* NCCL kernels wait on other processes: never hold them back */
    E.layouts[h] = l;
    ag_log(AG_LOG_TRACE, "layout of %s (%p): %u parameters, %u bytes%s", name ? name : "?", (void *)f,
           l->nparams, l->total, l->no_defer ? ", never deferred" : "");
    return l;
}

/* ---- signatures ---- */

static uint64_t op_sig(const op_t *o)
{
    uint64_t h = ag_mix(o->kind + 1, (uint64_t)(uintptr_t)o->stream);
    switch (o->kind) {
    case OP_KERNEL:
        h = ag_mix(h, (uint64_t)(uintptr_t)o->f);
        h = ag_mix(h, (uint64_t)o->grid[0] | (uint64_t)o->grid[1] << 32);
        h = ag_mix(h, (uint64_t)o->grid[2] | (uint64_t)o->block[0] << 32);
        h = ag_mix(h, (uint64_t)o->block[1] | (uint64_t)o->block[2] << 32);
        h = ag_mix(h, (uint64_t)o->smem | (uint64_t)o->ex << 32 | (uint64_t)o->nattrs << 40);
        for (unsigned i = 0; i < o->nattrs; i++) {
            const uint64_t *w = (const uint64_t *)&o->attrs[i];
            for (size_t k = 0; k < sizeof o->attrs[i] / 8; k++)
                h = ag_mix(h, w[k]);
        }
        break;
    case OP_MEMSET:
        h = ag_mix(h, (uint64_t)o->n);
        h = ag_mix(h, (uint64_t)o->elem);
        break;
    case OP_COPY:
        h = ag_mix(h, (uint64_t)o->n);
        break;
    case OP_EVREC:
        h = ag_mix(h, (uint64_t)o->id);
        break;
    case OP_EVWAIT:
        h = ag_mix(h, (uint64_t)o->flags | (uint64_t)(uint32_t)o->rec_idx << 32);
        break;
    case OP_D2H:
        h = ag_mix(h, (uint64_t)o->n ^ (uint64_t)o->id << 40);
        break;
    case OP_H2D:
        h = ag_mix(h, (uint64_t)o->n ^ (uint64_t)(o->stage >= 0) << 63);
        break;
    }
    return h;
}

/* ---- issuing operations ---- */

static CUresult issue_kernel(const op_t *o, CUstream stream, unsigned char *args)
{
    void **params = o->layout->nparams ? param_ptrs(o->layout, args) : NULL;
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

static CUresult issue_memset(const op_t *o, CUstream stream)
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
static CUresult issue_event(const op_t *o, CUstream stream, CUevent ev)
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

static CUresult issue(const op_t *o, CUstream stream)
{
    switch (o->kind) {
    case OP_KERNEL:
        return issue_kernel(o, stream, E.arena + o->arg_off);
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
        return issue_event(o, stream, o->event);
    }
}

/* The distinct application streams of the pending operations, in order of first use; sidx[i] is the
 * index of operation i's stream. Returns their number, or -1 past MAX_STREAMS. */
static int chunk_streams(CUstream *streams, uint8_t *sidx)
{
    int n = 0;
    for (uint32_t i = 0; i < E.npending; i++) {
        int k = 0;
        while (k < n && streams[k] != E.pending[i].stream)
            k++;
        if (k == n) {
            if (n == MAX_STREAMS)
                return -1;
            streams[n++] = E.pending[i].stream;
        }
        if (sidx)
            sidx[i] = (uint8_t)k;
    }
    return n;
}

static int make_event(CUevent *ev)
{
    return *ev || drv.cuEventCreate(ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS ? 0 : -1;
}

/* Private streams and events for a capture over `n` streams. */
static int capture_resources(int n)
{
    for (int k = 1; k < n; k++)
        if (!E.cap_streams[k] && drv.cuStreamCreate(&E.cap_streams[k], CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
            return -1;
    if (n > 1 && make_event(&E.fork_ev))
        return -1;
    for (int k = 1; k < n; k++)
        if (make_event(&E.join_ev[k]) || make_event(&E.pre_ev[k]))
            return -1;
    for (int i = 0; i < MAX_RECORDS; i++)
        if (make_event(&E.shadow_ev[i]))
            return -1;
    return make_event(&E.post_ev);
}

/* The calling thread's pinned buffer for a blocking device-to-host copy that ends a graph: the thread
 * waits for that copy itself, outside the engine lock, so the buffer is never shared. Kept for the
 * thread's lifetime. */
static AG_TLS void *tls_stage;

static void *thread_staging(void)
{
    if (!tls_stage && REAL(cuMemAllocHost_v2)(&tls_stage, D2H_STAGING_MAX) != CUDA_SUCCESS)
        tls_stage = NULL;
    return tls_stage;
}

/* Records that staging buffer b is read by work issued on stream s up to now. Nothing here waits: the
 * engine lock is held (another thread the GPU work depends on may need it). A buffer that cannot be
 * fenced is retired: never written again. */
static void stage_fence(int b, CUstream s)
{
    int k = 0;
    while (k < E.stg.nfence[b] && E.stg.fence_stream[b][k] != s)
        k++;
    if (k == STAGE_STREAMS || (k == E.stg.nfence[b] && make_event(&E.stg.fence_ev[b][k]) != 0)) {
        E.stg.retired |= 1u << b;
        return;
    }
    if (k == E.stg.nfence[b])
        E.stg.nfence[b]++;
    E.stg.fence_stream[b][k] = s;
    REAL(cuEventRecord)(E.stg.fence_ev[b][k], s);
}

/* Fences the staging buffers the pending operations read, once they are issued (on `s`, or on each
 * operation's own stream when s is NULL). */
static void stage_issued(CUstream s)
{
    for (uint32_t i = 0; i < E.npending && E.stg.pending_mask; i++)
        if (E.pending[i].kind == OP_H2D && E.pending[i].stage >= 0)
            stage_fence(E.pending[i].stage, s ? s : E.pending[i].stream);
    E.stg.pending_mask = 0;
}

/* A pinned copy of n bytes of a pageable source, valid until the work that reads it has run. */
static void *stage_copy(const void *src, size_t n, int8_t *which)
{
    size_t need = (n + 255) & ~(size_t)255;
    if (need > STAGE_SIZE)
        return NULL;
    if (E.stg.off + need > STAGE_SIZE || !E.stg.buf[E.stg.cur]) {
        int next = E.stg.buf[E.stg.cur] ? (E.stg.cur + 1) % STAGE_BUFS : E.stg.cur;
        if (E.stg.pending_mask & (1u << next))
            return NULL; /* the held work still reads it */
        if (E.stg.retired & (1u << next)) {
            AG_LOG_CAPPED(AG_LOG_DEBUG, "a staging buffer could not be fenced; it is replaced (and kept)");
            E.stg.buf[next] = NULL; /* leaked on purpose: work issued earlier may still read it */
            E.stg.retired &= ~(1u << next);
        } else {
            /* Copies issued earlier still read it unless their fences passed; no waiting here. */
            for (int k = 0; k < E.stg.nfence[next]; k++)
                if (REAL(cuEventQuery)(E.stg.fence_ev[next][k]) != CUDA_SUCCESS)
                    return NULL;
        }
        E.stg.nfence[next] = 0;
        if (!E.stg.buf[next] && REAL(cuMemAllocHost_v2)((void **)&E.stg.buf[next], STAGE_SIZE) != CUDA_SUCCESS) {
            E.stg.buf[next] = NULL;
            return NULL;
        }
        E.stg.cur = next;
        E.stg.off = 0;
    }
    unsigned char *p = E.stg.buf[E.stg.cur] + E.stg.off;
    E.stg.off += need;
    memcpy(p, src, n);
    *which = (int8_t)E.stg.cur;
    E.stg.pending_mask |= 1u << E.stg.cur;
    return p;
}

/* Issues the held operations eagerly, in order. They were validated by earlier eager runs; an error
 * now is one CUDA would report asynchronously, at the next sync, so it is logged and the next sync
 * reports the sticky error if there is one. */
static void flush_eager(int reason)
{
    if (!E.npending)
        return;
    if (reason >= 0)
        E.fallbacks[reason]++;
    for (uint32_t i = 0; i < E.npending; i++) {
        if (E.pending[i].kind == OP_D2H)
            continue; /* blocking, and always the last: its caller issues it after leaving the lock */
        CUresult r = issue(&E.pending[i], E.pending[i].stream);
        if (r != CUDA_SUCCESS)
            AG_LOG_CAPPED(AG_LOG_WARN, "re-issuing a deferred operation failed (CUDA error %d)", (int)r);
    }
    stage_issued(NULL);
    E.npending = 0;
    E.arena_used = 0;
}

/* ---- graphs ---- */

static void graph_free(graph_t *g)
{
    if (!g)
        return;
    if (g->exec)
        drv.cuGraphExecDestroy(g->exec);
    if (g->graph)
        drv.cuGraphDestroy(g->graph);
    free(g->nodes);
    free(g->kp);
    free(g->ops);
    free(g->args);
    free(g->d2h_dst);
    free(g);
}

static void graph_forget(graph_t *g)
{
    for (uint32_t i = 0; i < E.ngraphs; i++)
        if (E.graphs[i] == g) {
            E.graphs[i] = E.graphs[--E.ngraphs];
            break;
        }
}

static void release_variant(ag_variant_t *v, void *ctx)
{
    (void)ctx;
    graph_t *g = v->graph;
    graph_forget(g);
    graph_free(g);
    v->graph = NULL;
}

static void evict_lru_graph(void)
{
    uint32_t oldest = 0;
    for (uint32_t i = 1; i < E.ngraphs; i++)
        if (E.graphs[i]->last_launch < E.graphs[oldest]->last_launch)
            oldest = i;
    graph_t *g = E.graphs[oldest];
    g->owner->graph = NULL;
    graph_forget(g);
    graph_free(g);
    E.graphs_evicted++;
}

/* Captures the pending operations into a graph on the private stream. */
static graph_t *graph_build(ag_variant_t *v)
{
    graph_t *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    uint32_t n = E.npending;
    g->n = n;
    g->owner = v;
    g->nodes = calloc(n, sizeof *g->nodes);
    g->kp = calloc(n, sizeof *g->kp);
    g->ops = malloc(sizeof *g->ops * n);
    g->args = malloc(E.arena_used ? E.arena_used : 1);
    g->d2h_dst = calloc(n, sizeof *g->d2h_dst);
    if (!g->nodes || !g->kp || !g->ops || !g->args || !g->d2h_dst)
        goto fail;
    for (uint32_t i = 0; i < n; i++)
        if (E.pending[i].kind == OP_D2H && !(g->d2h_dst[i] = thread_staging()))
            goto fail;
    memcpy(g->ops, E.pending, sizeof *g->ops * n);
    memcpy(g->args, E.arena, E.arena_used);

    CUstream streams[MAX_STREAMS];
    uint8_t *sidx = malloc(n ? n : 1);
    int ns = sidx ? chunk_streams(streams, sidx) : -1;
    if (ns < 1 || capture_resources(ns) != 0) {
        free(sidx);
        goto fail;
    }
    E.cap_streams[0] = E.cap_stream;

    /* Each application stream gets a capture stream; the others fork from the first at the start and
     * join it at the end. Event records become private events inside the capture, so a wait on a
     * record of this chunk is an edge of the graph. */
    ag_guard++; /* the re-issued launches are not the application's: CUPTI must not count them */
    CUresult r = REAL(cuStreamBeginCapture_v2)(E.cap_stream, CU_STREAM_CAPTURE_MODE_RELAXED);
    int began = r == CUDA_SUCCESS, ok = began;
    if (ok && ns > 1) {
        r = REAL(cuEventRecord)(E.fork_ev, E.cap_stream);
        for (int k = 1; r == CUDA_SUCCESS && k < ns; k++)
            r = REAL(cuStreamWaitEvent)(E.cap_streams[k], E.fork_ev, 0);
        ok = r == CUDA_SUCCESS;
    }
    int records = 0;
    int32_t *rec_no = calloc(n ? n : 1, sizeof *rec_no); /* record number of each record operation */
    ok = ok && rec_no;
    for (uint32_t i = 0; ok && i < n; i++) {
        const op_t *o = &E.pending[i];
        CUstream cs = E.cap_streams[sidx[i]];
        if (o->kind == OP_EVREC) {
            rec_no[i] = records;
            r = REAL(cuEventRecord)(E.shadow_ev[records++], cs);
            ok = r == CUDA_SUCCESS;
            continue;
        }
        if (o->kind == OP_EVWAIT) {
            /* A wait for a record made before the chunk is done before the graph's launch. */
            if (o->rec_idx >= 0)
                r = REAL(cuStreamWaitEvent)(cs, E.shadow_ev[rec_no[o->rec_idx]], 0);
            ok = r == CUDA_SUCCESS;
            continue;
        }
        if (o->kind == OP_D2H)
            r = REAL(cuMemcpyDtoHAsync_v2)(g->d2h_dst[i], o->src, o->n, cs);
        else
            r = issue(o, cs);
        CUstreamCaptureStatus st;
        const CUgraphNode *deps = NULL;
        size_t ndeps = 0;
        if (r == CUDA_SUCCESS)
            r = REAL(cuStreamGetCaptureInfo_v3)(cs, &st, NULL, NULL, &deps, NULL, &ndeps);
        ok = r == CUDA_SUCCESS && ndeps == 1;
        if (ok)
            g->nodes[i] = deps[0];
    }
    for (int k = 1; ok && k < ns; k++) {
        r = REAL(cuEventRecord)(E.join_ev[k], E.cap_streams[k]);
        if (r == CUDA_SUCCESS)
            r = REAL(cuStreamWaitEvent)(E.cap_stream, E.join_ev[k], 0);
        ok = r == CUDA_SUCCESS;
    }
    free(rec_no);
    free(sidx);
    if (began) {
        CUgraph graph = NULL;
        CUresult re = REAL(cuStreamEndCapture)(E.cap_stream, &graph);
        g->graph = graph;
        if (re != CUDA_SUCCESS) {
            ok = 0;
            r = re;
        }
    }
    ag_guard--;
    if (!ok || !g->graph) {
        ag_log(AG_LOG_DEBUG, "capturing a chunk of %u operations failed (CUDA error %d)", n, (int)r);
        goto fail;
    }
    r = drv.cuGraphInstantiateWithFlags(&g->exec, g->graph, 0);
    if (r != CUDA_SUCCESS) {
        ag_log(AG_LOG_DEBUG, "instantiating a graph of %u operations failed (CUDA error %d)", n, (int)r);
        goto fail;
    }
    for (uint32_t i = 0; i < n; i++)
        if (g->ops[i].kind == OP_KERNEL && drv.cuGraphKernelNodeGetParams_v2(g->nodes[i], &g->kp[i]) != CUDA_SUCCESS)
            goto fail;
    if (E.ngraphs >= E.max_graphs)
        evict_lru_graph();
    E.graphs[E.ngraphs++] = g;
    E.graphs_built++;
    return g;
fail:
    graph_free(g);
    return NULL;
}

/* New addresses for a 1D copy node: a host side is given by its pointer (non-NULL), a device side by
 * its address. */
static CUresult set_copy_node(graph_t *g, uint32_t i, CUdeviceptr sdev, const void *shost, CUdeviceptr ddev,
                              void *dhost, size_t n)
{
    CUDA_MEMCPY3D cp;
    memset(&cp, 0, sizeof cp);
    cp.srcMemoryType = shost ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    cp.srcDevice = sdev;
    cp.srcHost = shost;
    cp.dstMemoryType = dhost ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    cp.dstDevice = ddev;
    cp.dstHost = dhost;
    cp.WidthInBytes = n;
    cp.Height = 1;
    cp.Depth = 1;
    return drv.cuGraphExecMemcpyNodeSetParams(g->exec, g->nodes[i], &cp, E.ctx);
}

/* Writes into the exec what changed since its last launch: kernel arguments, memset targets and values,
 * copy addresses. Returns 0, or -1 when the driver refused a patch. */
static int graph_patch(graph_t *g)
{
    for (uint32_t i = 0; i < g->n; i++) {
        op_t *now = &E.pending[i], *was = &g->ops[i];
        CUresult r = CUDA_SUCCESS;
        switch (now->kind) {
        case OP_KERNEL: {
            uint32_t total = now->layout->total;
            unsigned char *a = E.arena + now->arg_off, *b = g->args + was->arg_off;
            if (!total || memcmp(a, b, total) == 0)
                continue;
            CUDA_KERNEL_NODE_PARAMS kp = g->kp[i];
            kp.kernelParams = param_ptrs(now->layout, a);
            kp.extra = NULL;
            r = drv.cuGraphExecKernelNodeSetParams_v2(g->exec, g->nodes[i], &kp);
            if (r == CUDA_SUCCESS)
                memcpy(b, a, total);
            break;
        }
        case OP_MEMSET: {
            if (now->dst == was->dst && now->value == was->value)
                continue;
            CUDA_MEMSET_NODE_PARAMS mp = {now->dst, 0, now->value, now->elem, now->n, 1};
            r = drv.cuGraphExecMemsetNodeSetParams(g->exec, g->nodes[i], &mp, E.ctx);
            if (r == CUDA_SUCCESS) {
                was->dst = now->dst;
                was->value = now->value;
            }
            break;
        }
        case OP_EVREC:
        case OP_EVWAIT:
            continue; /* not nodes: the events are handled around the launch */
        case OP_H2D: {
            if (now->dst == was->dst && now->hsrc == was->hsrc)
                continue;
            r = set_copy_node(g, i, 0, now->hsrc, now->dst, NULL, now->n);
            if (r == CUDA_SUCCESS) {
                was->dst = now->dst;
                was->hsrc = now->hsrc;
            }
            break;
        }
        case OP_D2H: {
            void *stage = thread_staging();
            if (!stage)
                return -1;
            if (now->src == was->src && g->d2h_dst[i] == stage)
                continue;
            r = set_copy_node(g, i, now->src, NULL, 0, stage, now->n);
            if (r == CUDA_SUCCESS) {
                was->src = now->src;
                g->d2h_dst[i] = stage;
            }
            break;
        }
        case OP_COPY: {
            if (now->dst == was->dst && now->src == was->src)
                continue;
            r = set_copy_node(g, i, now->src, NULL, now->dst, NULL, now->n);
            if (r == CUDA_SUCCESS) {
                was->dst = now->dst;
                was->src = now->src;
            }
            break;
        }
        }
        if (r != CUDA_SUCCESS) {
            AG_LOG_CAPPED(AG_LOG_DEBUG, "patching node %u failed (CUDA error %d)", i, (int)r);
            return -1;
        }
        E.nodes_patched++;
    }
    return 0;
}

/* Launches the graph on the chunk's first stream, ordered with the chunk's other streams: the graph
 * waits for their earlier work and for the records made before the chunk that it waits on, they wait
 * for the graph, and the application's events are recorded after it. Later than CUDA would complete
 * them, never earlier. */
static CUresult launch_around(graph_t *g)
{
    CUstream streams[MAX_STREAMS];
    int ns = chunk_streams(streams, NULL);
    if (ns < 1)
        return CUDA_ERROR_INVALID_VALUE; /* cannot be: the graph was built from these operations */
    CUstream s0 = streams[0];
    CUresult r = CUDA_SUCCESS;
    for (int k = 1; r == CUDA_SUCCESS && k < ns; k++) {
        r = REAL(cuEventRecord)(E.pre_ev[k], streams[k]);
        if (r == CUDA_SUCCESS)
            r = REAL(cuStreamWaitEvent)(s0, E.pre_ev[k], 0);
    }
    for (uint32_t i = 0; r == CUDA_SUCCESS && i < E.npending; i++)
        if (E.pending[i].kind == OP_EVWAIT && E.pending[i].rec_idx < 0)
            r = issue_event(&E.pending[i], s0, E.pending[i].event);
    if (r == CUDA_SUCCESS)
        r = REAL(cuGraphLaunch)(g->exec, s0);
    if (r != CUDA_SUCCESS)
        return r;
    /* From here on the graph's work is issued: what follows cannot be undone by an eager re-issue, so
     * a failure is only logged (the next sync reports a sticky error if there is one). */
    CUresult rr = CUDA_SUCCESS;
    if (ns > 1) {
        rr = REAL(cuEventRecord)(E.post_ev, s0);
        for (int k = 1; rr == CUDA_SUCCESS && k < ns; k++)
            rr = REAL(cuStreamWaitEvent)(streams[k], E.post_ev, 0);
    }
    for (uint32_t i = 0; rr == CUDA_SUCCESS && i < E.npending; i++)
        if (E.pending[i].kind == OP_EVREC)
            rr = issue(&E.pending[i], E.pending[i].stream);
    if (rr != CUDA_SUCCESS)
        AG_LOG_CAPPED(AG_LOG_WARN, "ordering a graph with its streams failed (CUDA error %d)", (int)rr);
    return CUDA_SUCCESS;
}

/* The pending operations are exactly variant v: launch its graph (built now if it has none). */
static void complete(ag_variant_t *v)
{
    uint64_t t0 = now_ns();
    graph_t *g = v->graph;
    int fresh = 0;
    if (!g) {
        g = graph_build(v);
        if (!g) {
            v->ungraphable = 1;
            flush_eager(FB_CAPTURE_FAILED);
            return;
        }
        v->graph = g;
        fresh = 1;
    }
    if (!fresh && graph_patch(g) != 0) {
        /* The exec may hold a mix of old and new arguments now: it cannot be trusted again. */
        release_variant(v, NULL);
        flush_eager(FB_PATCH_FAILED);
        return;
    }
    CUresult r = launch_around(g);
    if (r != CUDA_SUCCESS) {
        AG_LOG_CAPPED(AG_LOG_WARN, "launching a graph failed (CUDA error %d); issuing its work eagerly", (int)r);
        release_variant(v, NULL);
        v->ungraphable = 1;
        flush_eager(FB_LAUNCH_FAILED);
        return;
    }
    stage_issued(E.pending[0].stream); /* other streams of the chunk wait for the graph on this one */
    g->last_launch = ++E.clock;
    E.graph_launches++;
    for (uint32_t i = 0; i < E.npending; i++) {
        E.replayed += E.pending[i].kind == OP_KERNEL;
        if (E.pending[i].kind == OP_D2H)
            E.copyout = g->d2h_dst[i];
    }
    E.npending = 0;
    E.arena_used = 0;
    ag_learner_succeeded(v);
    E.replay_host_ns += now_ns() - t0;
}

/* ---- the state machine ---- */

static void refresh_candidates(void)
{
    E.ncand = ag_learner_candidates(&E.learner, E.cands);
    memcpy(E.match, E.cands, sizeof E.cands);
    E.nmatch = E.ncand;
}

/* The candidate that the pending operations complete when the chunk ends now (at a barrier or at its
 * planned size), or NULL. Decided before the learner closes the chunk: closing may evict variants, so
 * the candidates' pointers are used only before it. */
static ag_variant_t *completing(int at_barrier)
{
    for (int i = 0; i < E.nmatch; i++)
        if (E.match[i]->len == E.npending && E.match[i]->ends_at_barrier == at_barrier)
            return E.match[i];
    return NULL;
}

/* What was expected did not come. Counted whenever candidates were expected, also when nothing was
 * held back yet (a new shape at a chunk's start). */
static void fallback(int reason)
{
    if (E.ncand)
        E.fallbacks[reason]++;
    flush_eager(-1);
    ag_learner_failed(&E.learner, E.cands, E.ncand);
    if (E.learner.period)
        ag_learner_unlock_period(&E.learner);
    E.nmatch = E.ncand = 0;
}

/* A barrier: an observing call, a stream switch, or an undeferrable operation. */
static void barrier(uint64_t kind, int reason)
{
    ag_variant_t *c = E.npending ? completing(1) : NULL;
    if (!c && E.ncand)
        fallback(reason); /* operations were expected (held back or not yet), a barrier came */
    ag_variant_t *v = ag_learner_barrier(&E.learner, kind, 0);
    E.nrecs = 0;
    if (c) {
        if (v == c)
            complete(c);
        else
            flush_eager(reason); /* the learner saw other work than the candidate: cannot be */
    }
    refresh_candidates();
}

static int init_engine(CUcontext ctx)
{
    E.ready = 1;
    E.ctx = ctx;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    int missing = !h;
#define AG_DRV(name, params)                                                                          \
    if (h && !(drv.name = (drv_##name##_t)ag_real_dlsym(h, #name)))                                   \
        missing = 1;
#include "driver.def"
#undef AG_DRV
    if (missing || !REAL(cuStreamBeginCapture_v2) || !REAL(cuStreamEndCapture) || !REAL(cuGraphLaunch) ||
        !REAL(cuStreamGetCaptureInfo_v3) || !REAL(cuMemsetD8Async) || !REAL(cuMemcpyDtoDAsync_v2)) {
        disable("the driver lacks an entry point the engine needs", CUDA_ERROR_NOT_FOUND);
        return -1;
    }
    E.max_graphs = (uint32_t)ag_opt(AG_OPT_MAX_GRAPHS)->num;
    E.stg.size = (size_t)ag_opt(AG_OPT_STAGING_KB)->num << 10;
    E.graphs = calloc(E.max_graphs, sizeof *E.graphs);
    if (!E.graphs || ag_learner_init(&E.learner, (uint32_t)ag_opt(AG_OPT_CHUNK)->num,
                                     (uint32_t)ag_opt(AG_OPT_WARMUP)->num, 4096, release_variant, NULL) != 0) {
        disable("out of memory", CUDA_ERROR_OUT_OF_MEMORY);
        return -1;
    }
    CUresult r = drv.cuStreamCreate(&E.cap_stream, CU_STREAM_NON_BLOCKING);
    if (r != CUDA_SUCCESS) {
        disable("cannot create the capture stream", r);
        return -1;
    }
    refresh_candidates();
    return 0;
}

/* Common entry for a deferrable operation, under the lock. `eager` issues it as the application asked.
 * Returns what the application gets back. */
static CUresult op_arrive(op_t *o, const void *const *kparams, void **extra, CUresult (*eager)(const void *),
                          const void *call, uint64_t t0)
{
    /* Created streams may share a chunk (their order is kept with events around the graph); the legacy
     * stream synchronizes implicitly with blocking streams, so a switch to or from it ends the chunk. */
    if (E.have_stream && o->stream != E.cur_stream &&
        (o->stream == CU_STREAM_LEGACY || E.cur_stream == CU_STREAM_LEGACY))
        barrier(0x5717ea3ULL ^ (uint64_t)(uintptr_t)o->stream, FB_STREAM);
    E.cur_stream = o->stream;
    E.have_stream = 1;
    if (o->kind == OP_EVREC && E.nrecs == MAX_RECORDS)
        barrier(0x7ec5ULL, FB_UNDEFERRABLE);
    if (o->kind == OP_EVWAIT) {
        o->rec_idx = -1;
        for (int i = E.nrecs - 1; i >= 0 && o->rec_idx < 0; i--)
            if (E.recs[i].ev == o->event)
                o->rec_idx = (int32_t)E.recs[i].pos;
    }
    uint32_t pos0 = E.learner.chunk_pos;
    uint64_t sig = op_sig(o);
    int deferred = 0;
    if (E.nmatch) {
        uint32_t pos = E.learner.chunk_pos;
        int k = 0;
        for (int i = 0; i < E.nmatch; i++)
            if (E.match[i]->len > pos && E.match[i]->sigs[pos] == sig)
                E.match[k++] = E.match[i];
        E.nmatch = k;
        if (!k) {
            fallback(FB_MISMATCH);
        } else {
            op_t *slot = pending_slot();
            int ok = slot != NULL;
            if (ok && o->kind == OP_H2D && o->stage >= 0) {
                /* A pageable source may be reused as soon as the call returns: copy it now. */
                const void *st = stage_copy(o->hsrc, o->n, &o->stage);
                ok = st != NULL;
                if (ok)
                    o->hsrc = st;
            }
            if (ok && o->kind == OP_KERNEL) {
                uint32_t total = o->layout->total;
                ok = reserve(total) == 0;
                if (ok) {
                    unsigned char *a = E.arena + E.arena_used;
                    if (kparams) {
                        const layout_t *lay = o->layout;
                        for (uint32_t i = 0; i < lay->ngaps; i++)
                            memset(a + lay->gap_off[i], 0, lay->gap_len[i]);
                        for (uint32_t i = 0; i < lay->nparams; i++)
                            memcpy(a + lay->off[i], kparams[i], lay->size[i]);
                    } else {
                        const void *buf = NULL;
                        size_t size = 0;
                        for (void **e = extra; e && *e != CU_LAUNCH_PARAM_END; e += 2) {
                            if (*e == CU_LAUNCH_PARAM_BUFFER_POINTER)
                                buf = e[1];
                            else if (*e == CU_LAUNCH_PARAM_BUFFER_SIZE)
                                size = *(const size_t *)e[1];
                        }
                        ok = buf && size >= total;
                        if (ok)
                            memcpy(a, buf, total);
                    }
                    o->arg_off = E.arena_used;
                    if (ok)
                        E.arena_used += total;
                }
            }
            if (ok) {
                memcpy(slot, o, op_size(o));
                E.npending++;
                E.deferred++;
                deferred = 1;
                if (t0) {
                    E.match_ns += now_ns() - t0;
                    E.match_timed++;
                }
            } else {
                fallback(FB_UNDEFERRABLE);
            }
        }
    }
    CUresult r = CUDA_SUCCESS;
    if (!deferred) {
        int timed = (E.eager_count++ & 15) == 0 && o->kind == OP_KERNEL;
        uint64_t te = timed ? now_ns() : 0;
        r = eager(call);
        if (timed) {
            E.eager_ns += now_ns() - te;
            E.eager_timed++;
        }
        if (r != CUDA_SUCCESS) {
            /* A failed launch did nothing: it is no part of the pattern. */
            return r;
        }
    }
    if (o->kind == OP_EVREC) {
        E.recs[E.nrecs].ev = o->event;
        E.recs[E.nrecs++].pos = pos0;
    }
    int step = ag_learner_push(&E.learner, sig);
    if (step) {
        ag_variant_t *c = E.npending ? completing(step == 2) : NULL;
        if (E.npending && !c)
            fallback(FB_MISMATCH);
        ag_variant_t *v = step == 1 ? ag_learner_close(&E.learner) : ag_learner_barrier(&E.learner, 0, 1);
        E.nrecs = 0; /* a record of an earlier chunk is one the next chunk's graph waits for at launch */
        if (c) {
            if (v == c)
                complete(c);
            else
                flush_eager(FB_MISMATCH);
        }
        refresh_candidates();
    }
    return r;
}

/* Takes the engine lock and checks that the engine may handle a call now. */
static int enter(void)
{
    pthread_mutex_lock(&E.lock);
    if (E.disabled || E.app_captures > 0 || !atomic_load_explicit(&ag_engine_on, memory_order_relaxed))
        return 0;
    CUcontext ctx = NULL;
    if (!drv.cuCtxGetCurrent && !E.ready) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        drv.cuCtxGetCurrent = h ? (drv_cuCtxGetCurrent_t)ag_real_dlsym(h, "cuCtxGetCurrent") : NULL;
    }
    if (!drv.cuCtxGetCurrent || drv.cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx)
        return 0;
    if (!E.ready)
        return init_engine(ctx) == 0;
    if (ctx != E.ctx) {
        /* Work for another context: everything held back goes first, and this call passes. */
        if (E.npending)
            barrier(0xc0ffee, FB_CONTEXT);
        return 0;
    }
    return 1;
}

static void leave(void)
{
    pthread_mutex_unlock(&E.lock);
}

typedef struct {
    ag_id_t id;
    CUfunction f;
    unsigned gx, gy, gz, bx, by, bz, smem;
    CUstream stream;
    void **params, **extra;
    const CUlaunchConfig *cfg;
} kcall_t;

static CUresult eager_kernel(const void *p)
{
    const kcall_t *c = p;
    if (c->cfg)
        return ((ag_fn_cuLaunchKernelEx_t)ag_real[c->id])(c->cfg, c->f, c->params, c->extra);
    return ((ag_fn_cuLaunchKernel_t)ag_real[c->id])(c->f, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->smem,
                                                     c->stream, c->params, c->extra);
}

static int per_thread(ag_id_t id, CUstream s)
{
    return s == CU_STREAM_PER_THREAD || (s == NULL && ag_hook_per_thread[id]);
}

static CUstream norm_stream(CUstream s)
{
    return s == NULL ? CU_STREAM_LEGACY : s;
}

/* Bytes of an attribute's value that mean something (the rest of the union may be garbage), or -1 for
 * attributes that make the launch observable (events) or device-updatable: never deferred. */
static int attr_value_size(CUlaunchAttributeID id)
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

/* Every 16th operation of a thread is timed from hook entry to return, for host_ns_per_match. */
static AG_TLS unsigned sample_tick;

static CUresult kernel_common(kcall_t *c)
{
    uint64_t t0 = (sample_tick++ & 15) == 0 ? now_ns() : 0;
    if (!enter()) {
        leave();
        return eager_kernel(c);
    }
    op_t o;
    o.kind = OP_KERNEL;
    o.ex = c->cfg != NULL;
    o.nattrs = 0;
    o.id = c->id;
    o.f = c->f;
    o.grid[0] = c->gx, o.grid[1] = c->gy, o.grid[2] = c->gz;
    o.block[0] = c->bx, o.block[1] = c->by, o.block[2] = c->bz;
    o.smem = c->smem;
    o.stream = norm_stream(c->stream);
    o.layout = layout_of(c->f);
    int ok = o.layout && !o.layout->no_defer && !per_thread(c->id, c->stream) && (!c->params || !c->extra);
    if (ok && c->cfg) {
        if (c->cfg->numAttrs > MAX_ATTRS)
            ok = 0;
        else if (c->cfg->numAttrs) {
            o.nattrs = (uint8_t)c->cfg->numAttrs;
            memset(o.attrs, 0, sizeof *o.attrs * o.nattrs);
            for (unsigned i = 0; ok && i < o.nattrs; i++) {
                int vs = attr_value_size(c->cfg->attrs[i].id);
                ok = vs >= 0 && (size_t)vs <= sizeof o.attrs[i].value;
                if (ok) {
                    o.attrs[i].id = c->cfg->attrs[i].id;
                    memcpy(&o.attrs[i].value, &c->cfg->attrs[i].value, (size_t)vs);
                }
            }
        }
    }
    CUresult r;
    if (!ok) {
        barrier(0xdefe4ULL, FB_UNDEFERRABLE);
        leave(); /* held work is issued; this one needs no lock */
        return eager_kernel(c);
    } else {
        r = op_arrive(&o, (const void *const *)c->params, c->extra, eager_kernel, c, t0);
    }
    leave();
    return r;
}

CUresult ag_engine_launch(ag_id_t id, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned smem, CUstream s, void **params, void **extra)
{
    kcall_t c = {id, f, gx, gy, gz, bx, by, bz, smem, s, params, extra, NULL};
    return kernel_common(&c);
}

CUresult ag_engine_launch_ex(ag_id_t id, const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra)
{
    if (!cfg)
        return ((ag_fn_cuLaunchKernelEx_t)ag_real[id])(cfg, f, params, extra);
    kcall_t c = {id, f, cfg->gridDimX, cfg->gridDimY, cfg->gridDimZ, cfg->blockDimX, cfg->blockDimY, cfg->blockDimZ,
                 cfg->sharedMemBytes, cfg->hStream, params, extra, cfg};
    return kernel_common(&c);
}

typedef struct {
    ag_id_t id;
    CUdeviceptr dst, src;
    unsigned value;
    size_t n;
    CUstream stream;
} mcall_t;

static CUresult eager_memset(const void *p)
{
    const mcall_t *c = p;
    switch (ag_hook_kinds[c->id] == AG_KIND_DSET ? c->id : AG_ID_COUNT) {
    case AG_ID_cuMemsetD8Async:
    case AG_ID_cuMemsetD8Async_ptsz:
        return ((ag_fn_cuMemsetD8Async_t)ag_real[c->id])(c->dst, (unsigned char)c->value, c->n, c->stream);
    case AG_ID_cuMemsetD16Async:
    case AG_ID_cuMemsetD16Async_ptsz:
        return ((ag_fn_cuMemsetD16Async_t)ag_real[c->id])(c->dst, (unsigned short)c->value, c->n, c->stream);
    default:
        return ((ag_fn_cuMemsetD32Async_t)ag_real[c->id])(c->dst, c->value, c->n, c->stream);
    }
}

static CUresult eager_copy(const void *p)
{
    const mcall_t *c = p;
    return ((ag_fn_cuMemcpyDtoDAsync_v2_t)ag_real[c->id])(c->dst, c->src, c->n, c->stream);
}

static CUresult mem_common(const mcall_t *c, unsigned elem)
{
    CUresult (*eager)(const void *) = elem ? eager_memset : eager_copy;
    if (!enter()) {
        leave();
        return eager(c);
    }
    op_t o;
    memset(&o, 0, sizeof o);
    o.kind = elem ? OP_MEMSET : OP_COPY;
    o.id = c->id;
    o.stream = norm_stream(c->stream);
    o.dst = c->dst;
    o.src = c->src;
    o.n = c->n;
    o.value = c->value;
    o.elem = elem;
    CUresult r;
    if (per_thread(c->id, c->stream)) {
        barrier(0xdefe4ULL, FB_UNDEFERRABLE);
        leave();
        return eager(c);
    } else {
        r = op_arrive(&o, NULL, NULL, eager, c, 0);
    }
    leave();
    return r;
}

CUresult ag_engine_memset8(ag_id_t id, CUdeviceptr dst, unsigned char value, size_t n, CUstream s)
{
    mcall_t c = {id, dst, 0, value, n, s};
    return mem_common(&c, 1);
}

CUresult ag_engine_memset16(ag_id_t id, CUdeviceptr dst, unsigned short value, size_t n, CUstream s)
{
    mcall_t c = {id, dst, 0, value, n, s};
    return mem_common(&c, 2);
}

CUresult ag_engine_memset32(ag_id_t id, CUdeviceptr dst, unsigned int value, size_t n, CUstream s)
{
    mcall_t c = {id, dst, 0, value, n, s};
    return mem_common(&c, 4);
}

CUresult ag_engine_copy(ag_id_t id, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    mcall_t c = {id, dst, src, 0, n, s};
    return mem_common(&c, 0);
}

typedef struct {
    ag_id_t id;
    CUevent ev;
    CUstream stream;
    unsigned flags;
} ecall_t;

static CUresult eager_event(const void *p)
{
    const ecall_t *c = p;
    op_t o;
    o.id = c->id;
    o.flags = c->flags;
    return issue_event(&o, c->stream, c->ev);
}

static CUresult event_common(const ecall_t *c, op_kind_t kind)
{
    if (!enter()) {
        leave();
        return eager_event(c);
    }
    op_t o;
    memset(&o, 0, offsetof(op_t, attrs));
    o.kind = (uint8_t)kind;
    o.id = c->id;
    o.stream = norm_stream(c->stream);
    o.event = c->ev;
    o.flags = c->flags;
    CUresult r;
    /* External records and waits with flags are for other processes or graphs: not ours to hold. */
    if (per_thread(c->id, c->stream) || c->flags != 0 || !c->ev) {
        barrier(0xdefe4ULL, FB_UNDEFERRABLE);
        leave();
        return eager_event(c);
    } else {
        r = op_arrive(&o, NULL, NULL, eager_event, c, 0);
    }
    leave();
    return r;
}

CUresult ag_engine_event_record(ag_id_t id, CUevent ev, CUstream s)
{
    ecall_t c = {id, ev, s, 0};
    return event_common(&c, OP_EVREC);
}

CUresult ag_engine_event_record_flags(ag_id_t id, CUevent ev, CUstream s, unsigned flags)
{
    ecall_t c = {id, ev, s, flags};
    return event_common(&c, OP_EVREC);
}

CUresult ag_engine_stream_wait_event(ag_id_t id, CUstream s, CUevent ev, unsigned flags)
{
    ecall_t c = {id, ev, s, flags};
    return event_common(&c, OP_EVWAIT);
}

typedef struct {
    ag_id_t id;
    void *dst;
    CUdeviceptr src;
    size_t n;
    CUstream stream;
} dcall_t;

static CUresult eager_d2h(const void *p)
{
    const dcall_t *c = p;
    if (c->id == AG_ID_cuMemcpyDtoH_v2 || c->id == AG_ID_cuMemcpyDtoH_v2_ptds)
        return ((ag_fn_cuMemcpyDtoH_v2_t)ag_real[c->id])(c->dst, c->src, c->n);
    return ((ag_fn_cuMemcpyDtoHAsync_v2_t)ag_real[c->id])(c->dst, c->src, c->n, c->stream);
}

static CUresult no_eager(const void *p)
{
    (void)p;
    return CUDA_SUCCESS;
}

/* A device-to-host copy CUDA makes blocking (the synchronous form, or the asynchronous form into
 * pageable memory) may be the last node of a graph: the graph copies into a staging buffer of ours,
 * and the call returns after the stream is synchronized and the bytes are copied out, as CUDA would. */
static CUresult d2h_common(const dcall_t *c, int async)
{
    if (!enter()) {
        leave();
        return eager_d2h(c);
    }
    int ok = !per_thread(c->id, c->stream) && c->n > 0 && c->n <= D2H_STAGING_MAX;
    if (ok && async) { /* into pinned memory the copy is truly asynchronous: not ours to end a graph */
        unsigned type = 0;
        ok = !drv.cuPointerGetAttribute ||
             drv.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)c->dst) !=
                 CUDA_SUCCESS;
    }
    if (!ok) {
        barrier(0xba77ULL + (uint64_t)c->id, FB_BARRIER);
        leave();
        return eager_d2h(c); /* blocking: never under the lock */
    }
    op_t o;
    memset(&o, 0, offsetof(op_t, attrs));
    o.kind = OP_D2H;
    o.id = async ? AG_ID_cuMemcpyDtoHAsync_v2 : AG_ID_cuMemcpyDtoH_v2;
    o.stream = async ? norm_stream(c->stream) : CU_STREAM_LEGACY;
    o.hdst = c->dst;
    o.src = c->src;
    o.n = c->n;
    E.copyout = NULL;
    /* Not held back: issued below, after the lock is left (it blocks until the GPU is done). */
    op_arrive(&o, NULL, NULL, no_eager, c, 0);
    barrier(0xd2b0ULL, FB_BARRIER); /* the copy is observed by the host: it ends the segment */
    const void *stage = E.copyout;
    E.copyout = NULL;
    if (stage)
        E.copies_out++;
    leave();
    if (!stage)
        return eager_d2h(c);
    /* The graph copied into this thread's staging buffer; CUDA would have returned once the bytes are
     * in the destination, and so do we. */
    CUresult r = REAL(cuStreamSynchronize)(o.stream);
    if (r == CUDA_SUCCESS)
        memcpy(c->dst, stage, c->n);
    return r;
}

typedef struct {
    ag_id_t id;
    CUdeviceptr dst;
    const void *src;
    size_t n;
    CUstream stream;
} hcall_t;

static CUresult eager_h2d(const void *p)
{
    const hcall_t *c = p;
    return ((ag_fn_cuMemcpyHtoDAsync_v2_t)ag_real[c->id])(c->dst, c->src, c->n, c->stream);
}

/* An asynchronous host-to-device copy is deferrable: from pinned memory the graph reads the
 * application's buffer when it runs (as CUDA would), from pageable memory a snapshot taken at the call. */
CUresult ag_engine_h2d_async(ag_id_t id, CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    hcall_t c = {id, dst, src, n, s};
    if (!enter()) {
        leave();
        return eager_h2d(&c);
    }
    unsigned type = 0;
    CUresult pr = drv.cuPointerGetAttribute
                      ? drv.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)src)
                      : CUDA_ERROR_NOT_SUPPORTED;
    int pinned = pr == CUDA_SUCCESS && type == CU_MEMORYTYPE_HOST;
    int pageable = pr == CUDA_ERROR_INVALID_VALUE;
    CUresult r;
    if (per_thread(id, s) || n == 0 || n > STAGE_SIZE || (!pinned && !pageable)) {
        barrier(0xba77ULL + (uint64_t)id, FB_UNDEFERRABLE);
        leave(); /* a pageable copy may block: never under the lock */
        return eager_h2d(&c);
    } else {
        op_t o;
        memset(&o, 0, offsetof(op_t, attrs));
        o.kind = OP_H2D;
        o.id = AG_ID_cuMemcpyHtoDAsync_v2;
        o.stream = norm_stream(s);
        o.dst = dst;
        o.hsrc = src;
        o.n = n;
        o.stage = pageable ? 0 : -1; /* the buffer is chosen when the copy is held back */
        r = op_arrive(&o, NULL, NULL, eager_h2d, &c, 0);
    }
    leave();
    return r;
}

CUresult ag_engine_d2h(ag_id_t id, void *dst, CUdeviceptr src, size_t n)
{
    dcall_t c = {id, dst, src, n, NULL};
    return d2h_common(&c, 0);
}

CUresult ag_engine_d2h_async(ag_id_t id, void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    dcall_t c = {id, dst, src, n, s};
    return d2h_common(&c, 1);
}

void ag_engine_barrier(ag_id_t id)
{
    pthread_mutex_lock(&E.lock);
    if (E.ready && !E.disabled)
        barrier(0xba77ULL + (uint64_t)id, FB_BARRIER);
    /* The application's own capture: nothing of ours may enter its graph, and its launches go
     * straight to the capturing stream. */
    if (ag_hook_kinds[id] == AG_KIND_CAPTURE) {
        const char *n = ag_hook_names[id];
        if (strstr(n, "BeginCapture"))
            E.app_captures++;
        else if (strstr(n, "EndCapture") && E.app_captures > 0)
            E.app_captures--;
    }
    pthread_mutex_unlock(&E.lock);
}

void ag_engine_capture_failed(ag_id_t id)
{
    pthread_mutex_lock(&E.lock);
    if (strstr(ag_hook_names[id], "BeginCapture") && E.app_captures > 0)
        E.app_captures--;
    pthread_mutex_unlock(&E.lock);
}

void ag_engine_exit(void)
{
    pthread_mutex_lock(&E.lock);
    if (E.ready && !E.disabled)
        barrier(0xe817ULL, FB_BARRIER);
    atomic_store(&ag_engine_on, 0);
    E.disabled = 1;
    pthread_mutex_unlock(&E.lock);
}

void ag_engine_fork_child(void)
{
    /* CUDA cannot be used in a forked child; the child's calls go straight to the driver. */
    pthread_mutex_init(&E.lock, NULL);
    E.disabled = 1;
    atomic_store(&ag_engine_on, 0);
}

void ag_engine_fork_prepare(void)
{
    pthread_mutex_lock(&E.lock);
}

void ag_engine_fork_parent(void)
{
    pthread_mutex_unlock(&E.lock);
}

void ag_engine_start(void)
{
    if (ag_opt(AG_OPT_SCOPE)->num != AG_SCOPE_OFF)
        atomic_store(&ag_engine_on, 1);
}

void ag_engine_stats(FILE *f)
{
    pthread_mutex_lock(&E.lock);
    double per_match = E.match_timed ? (double)E.match_ns / (double)E.match_timed : 0;
    double per_eager = E.eager_timed ? (double)E.eager_ns / (double)E.eager_timed : 0;
    double saved_ms = ((double)E.replayed * per_eager - (double)E.replay_host_ns -
                       (double)E.deferred * per_match) / 1e6;
    fprintf(f, "  \"replay\": {\n    \"launches_deferred\": %llu,\n    \"launches_replayed\": %llu,\n"
               "    \"graphs_built\": %llu,\n    \"graphs_live\": %u,\n    \"graphs_evicted\": %llu,\n"
               "    \"graph_launches\": %llu,\n    \"nodes_patched\": %llu,\n"
               "    \"host_ns_per_match\": %.1f,\n    \"host_ns_per_eager_launch\": %.1f,\n"
               "    \"host_ms_saved_estimate\": %.3f,\n    \"variants\": %zu,\n"
               "    \"blocking_copies_in_graphs\": %llu,\n    \"fallbacks\": {",
            (unsigned long long)E.deferred, (unsigned long long)E.replayed, (unsigned long long)E.graphs_built,
            E.ngraphs, (unsigned long long)E.graphs_evicted, (unsigned long long)E.graph_launches,
            (unsigned long long)E.nodes_patched, per_match, per_eager, saved_ms, E.learner.table.count,
            (unsigned long long)E.copies_out);
    for (int i = 0; i < FB_COUNT; i++)
        fprintf(f, "%s\"%s\": %llu", i ? ", " : "", fb_names[i], (unsigned long long)E.fallbacks[i]);
    fprintf(f, "}\n  },\n");
    pthread_mutex_unlock(&E.lock);
}
