/* CUDA graphs of chunks: captured once by re-issuing the chunk's operations on private non-blocking
 * streams (several application streams fork and join through private events), patched where arguments
 * changed, launched ordered with the application's streams; a bounded least-recently-used cache; and the
 * pinned staging buffers that host copies in graphs read from or write to. Locking: under the engine lock
 * (engine.c), or on the engine's issuer thread while it holds a job (the engine's other threads leave
 * the graphs alone until the job is settled); nothing here waits for the GPU. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph.h"

/* The capture fence. CUDA fails a context-wide event record or wait, and breaks the capture, wherever a
 * stream of the context captures, whatever the capture's mode (cuda.h), and calls a sync of a context or
 * device invalid while any of its streams captures (the programming guide). While such a call of the program
 * is in the driver (between ag_capture_fence_enter and _leave), no build of ours begins a capture: it gives
 * way and its chunk runs eagerly (a build never waits for such a call, which may itself wait for the GPU,
 * and that for a thread the build would hold up); the call first waits for the captures under way to end
 * (a build's capture takes tens of microseconds to a few milliseconds, and waits for nothing of the
 * program's). Each side counts itself in before it looks at the other's count (sequentially consistent),
 * so one of the two always sees the other. Process-wide: the fake driver breaks every context's captures
 * at such a call, and CUDA is said to break those of the whole device. */
static atomic_uint fence_calls; /* the program's context-wide calls in the driver */
static atomic_uint fence_captures; /* our captures under way (and builds about to begin one) */
static pthread_mutex_t fence_mu = PTHREAD_MUTEX_INITIALIZER; /* a leaf: only for the calls' wait */
static pthread_cond_t fence_cv = PTHREAD_COND_INITIALIZER;
static atomic_ullong fence_waits; /* calls that waited for a capture of ours to end */

void ag_capture_fence_enter(void)
{
    atomic_fetch_add(&fence_calls, 1);
    if (!atomic_load(&fence_captures))
        return;
    atomic_fetch_add_explicit(&fence_waits, 1, memory_order_relaxed);
    pthread_mutex_lock(&fence_mu);
    while (atomic_load(&fence_captures))
        pthread_cond_wait(&fence_cv, &fence_mu);
    pthread_mutex_unlock(&fence_mu);
}

void ag_capture_fence_leave(void)
{
    atomic_fetch_sub(&fence_calls, 1);
}

/* A capture of ours ends (or gives way before it began): a call waiting for it is woken. */
static void fence_capture_end(void)
{
    if (atomic_fetch_sub(&fence_captures, 1) == 1 && atomic_load(&fence_calls)) {
        pthread_mutex_lock(&fence_mu);
        pthread_cond_broadcast(&fence_cv);
        pthread_mutex_unlock(&fence_mu);
    }
}

/* 1: a capture may begin (fence_capture_end after it); 0: a context-wide call is in the driver. */
static int fence_capture_begin(void)
{
    atomic_fetch_add(&fence_captures, 1);
    if (!atomic_load(&fence_calls))
        return 1;
    fence_capture_end();
    return 0;
}

void ag_capture_fence_fork_child(void)
{
    atomic_store(&fence_calls, 0);
    atomic_store(&fence_captures, 0);
    pthread_mutex_init(&fence_mu, NULL);
    pthread_cond_init(&fence_cv, NULL);
}

uint64_t ag_capture_fence_waits(void)
{
    return atomic_load_explicit(&fence_waits, memory_order_relaxed);
}

/* Pageable host-to-device sources are snapshotted into pinned staging buffers, used in turn; a buffer is
 * reused only after the work that reads it has run (events recorded after each issue, per stream). */
#define STAGE_BUFS 4
#define STAGE_SIZE G.stg.size /* AUTOGRAPH_STAGING_KB */
#define STAGE_STREAMS 4

/* A copy node's ends: device or host, source and destination (one of each pair is 0). */
typedef struct {
    CUdeviceptr sdev, ddev;
    const void *shost;
    void *dhost;
} copy_ends_t;

/* The ends of copy operation o: device to device, host to device (the application's pinned source or a
 * snapshot of ours), device to the application's page-locked buffer, or, for a blocking read, device to
 * `stage` (this thread's staging buffer, copied out after the sync). */
static copy_ends_t copy_ends(const ag_op_t *o, void *stage)
{
    copy_ends_t e = {0, 0, NULL, NULL};
    if (o->kind == OP_H2D) {
        e.shost = o->hsrc;
        e.ddev = o->dst;
    } else if (o->kind == OP_D2H) {
        e.sdev = o->src;
        e.dhost = o->stage >= 0 ? stage : o->hdst;
    } else { /* OP_COPY */
        e.sdev = o->src;
        e.ddev = o->dst;
    }
    return e;
}

static int is_copy(const ag_op_t *o)
{
    return o->kind == OP_COPY || o->kind == OP_H2D || o->kind == OP_D2H;
}

/* A variant's graph: the executable, its nodes in operation order, and what each node holds now. */
struct ag_graph {
    CUgraph graph;
    CUgraphExec exec;
    uint32_t n;
    CUgraphNode *nodes;
    CUDA_KERNEL_NODE_PARAMS *kp;
    ag_op_t *ops;            /* what each node holds now (kernel arguments in args) */
    unsigned char *args;  /* kernel argument bytes baked into the exec */
    copy_ends_t *ends;    /* each copy node's ends as the exec holds them */
    uint64_t last_launch; /* the cache's uses when it was last launched (or built): recency, staleness */
    uint32_t score, score_epoch; /* launches, halved every admission epoch since score_epoch (ag_graph_admit) */
    size_t mem;           /* device memory the driver took for the exec (estimated at instantiation) */
    ag_variant_t *owner;
    /* The chunk's streams in order of first use (a variant's chunks have the same), the index of the
     * legacy stream among them (-1: none), and the created ones that were blocking when it was captured
     * (bits by index): the graph holds the legacy stream's implicit order with those. */
    CUstream streams[AG_MAX_STREAMS];
    int nstreams, legacy;
    uint32_t blocking;
    uint32_t implied; /* of those, the ones the driver said are blocking: a launch on the legacy stream
                       * waits for their earlier work (the others, unknown, are waited for through events) */
};

/* A thread's blocking-read buffer and the event it waits on (a CUevent; either may be NULL until made) */
struct thread_stage {
    void *buf;
    CUevent ev;
};
static struct {
    CUcontext ctx;
    CUstream cap_stream;
    CUstream cap_streams[AG_MAX_STREAMS]; /* [0] is cap_stream; the others join a capture through events */
    CUevent fork_ev, post_ev, imp_ev, join_ev[AG_MAX_STREAMS], pre_ev[AG_MAX_STREAMS], shadow_ev[AG_MAX_RECORDS];
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
    ag_graph_t **graphs;
    uint32_t ngraphs, max_graphs;
    /* uses (graph launches and builds a full cache refused) so far: the cache's clock; the admission
     * epoch (ag_graph_admit), which moves on every admit_period() uses, and the uses it has left */
    uint64_t uses, epoch_left;
    uint32_t epoch;
    uint64_t graphs_built, nodes_patched, graphs_evicted, graphs_released, builds_refused;
    /* patched nodes by kind (kernel, memset, copy), and the host time of their driver calls (ns) */
    uint64_t patched_by[3], patch_drv_ns[3];
    size_t mem; /* device memory of the live execs, as far as cuMemGetInfo shows it */
    /* blocking-read buffers and events of exited threads, for the next thread (under spare_lock), and how
     * many buffers this engine ever allocated */
    struct thread_stage *spare;
    uint32_t nspare, cap_spare;
    uint64_t thread_stages;
    uint64_t mixing_legacy; /* graphs built over the legacy stream and created streams */
    /* the slot's lives: moves on where a later context takes the engine over (ag_graph_retire; under the
     * engine lock and spare_lock), so that a thread's buffer of an earlier life is known gone */
    unsigned gen;
} Gs[AG_MAX_ENGINES];
/* The state of the engine this thread works for now (ag_graph_use): each engine has its own context,
 * capture streams, staging buffers and cache. */
static AG_TLS __typeof__(Gs[0]) *gcur = &Gs[0];
#define G (*gcur)

void ag_graph_use(unsigned engine)
{
    gcur = &Gs[engine];
}

/* The distinct application streams of the chunk's operations, in order of first use; sidx[i] is the
 * index of operation i's stream. Returns their number, or -1 past AG_MAX_STREAMS. */
static int chunk_streams(const ag_chunk_t *c, CUstream *streams, uint8_t *sidx)
{
    int n = 0;
    for (uint32_t i = 0; i < c->n; i++) {
        int k = 0;
        while (k < n && streams[k] != c->ops[i].stream)
            k++;
        if (k == n) {
            if (n == AG_MAX_STREAMS)
                return -1;
            streams[n++] = c->ops[i].stream;
        }
        if (sidx)
            sidx[i] = (uint8_t)k;
    }
    return n;
}

static int make_event(CUevent *ev)
{
    if (*ev)
        return 0;
    CUstreamCaptureMode mode = ag_relaxed_begin();
    CUresult r = ag_drv.cuEventCreate(ev, CU_EVENT_DISABLE_TIMING);
    ag_relaxed_end(mode);
    return r == CUDA_SUCCESS ? 0 : -1;
}

/* Private streams and events for a capture over `n` streams. */
static int capture_resources(int n)
{
    for (int k = 1; k < n; k++)
        if (!G.cap_streams[k] && ag_drv.cuStreamCreate(&G.cap_streams[k], CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
            return -1;
    if (n > 1 && (make_event(&G.fork_ev) || make_event(&G.imp_ev)))
        return -1;
    for (int k = 0; n > 1 && k < n; k++)
        if (make_event(&G.join_ev[k]) || make_event(&G.pre_ev[k]))
            return -1;
    for (int i = 0; i < AG_MAX_RECORDS; i++)
        if (make_event(&G.shadow_ev[i]))
            return -1;
    return make_event(&G.post_ev);
}

/* The calling thread's pinned buffer for a blocking device-to-host copy that ends a graph: the thread
 * waits for that copy itself, outside the engine lock, so the buffer is never shared; and the event it
 * waits on. Kept while the thread lives; at its exit they go to
 * the engine's spares, for the next thread that needs them (a program that starts a thread per step or per
 * request holds as many as it has such threads at once, not one per thread it ever started). */
static AG_TLS struct thread_stage tls_stage[AG_MAX_ENGINES]; /* per engine: made in its context, gone with it */
static AG_TLS unsigned tls_stage_gen[AG_MAX_ENGINES]; /* the engine's life (G.gen) they were made in */
static pthread_mutex_t spare_lock = PTHREAD_MUTEX_INITIALIZER; /* a leaf: taken under no other lock but E's */

static struct thread_stage *thread_stage(void)
{
    size_t i = (size_t)(gcur - Gs);
    struct thread_stage *st = &tls_stage[i];
    if (tls_stage_gen[i] != G.gen)
        *st = (struct thread_stage){NULL, NULL}; /* an earlier context's, gone with it */
    tls_stage_gen[i] = G.gen;
    if (!st->buf && !st->ev) {
        ag_thread_exit_arm(); /* ag_graph_thread_exit hands them back */
        pthread_mutex_lock(&spare_lock);
        if (G.nspare)
            *st = G.spare[--G.nspare];
        pthread_mutex_unlock(&spare_lock);
    }
    return st;
}

void *ag_thread_staging(void)
{
    struct thread_stage *st = thread_stage();
    if (!st->buf) {
        CUstreamCaptureMode mode = ag_relaxed_begin();
        if (REAL(cuMemAllocHost_v2)(&st->buf, AG_D2H_STAGING_MAX) == CUDA_SUCCESS)
            G.thread_stages++;
        else
            st->buf = NULL;
        ag_relaxed_end(mode);
    }
    return st->buf;
}

CUevent ag_thread_wait_event(void)
{
    struct thread_stage *st = thread_stage();
    if (!st->ev && make_event(&st->ev) != 0)
        st->ev = NULL;
    return st->ev;
}

/* Only the pointers move: an engine whose context ended (its buffers freed with it) hands out no spares
 * again (a later context that takes it over starts with none), and a buffer of an earlier context the
 * engine served is dropped. One that cannot be kept (no memory for the list) is left allocated, as before
 * there were spares. */
void ag_graph_thread_exit(void)
{
    for (int i = 0; i < AG_MAX_ENGINES; i++) {
        if (!tls_stage[i].buf && !tls_stage[i].ev)
            continue;
        pthread_mutex_lock(&spare_lock);
        if (tls_stage_gen[i] == Gs[i].gen) { /* else freed with its context */
            struct thread_stage *p = ag_grow(Gs[i].spare, Gs[i].nspare, &Gs[i].cap_spare, sizeof *p, 4);
            if (p) {
                Gs[i].spare = p;
                Gs[i].spare[Gs[i].nspare++] = tls_stage[i];
            }
        }
        pthread_mutex_unlock(&spare_lock);
        tls_stage[i] = (struct thread_stage){NULL, NULL};
    }
}

/* Records that staging buffer b is read by work issued on stream s up to now. Nothing here waits: the
 * engine lock is held (another thread the GPU work depends on may need it). A buffer that cannot be
 * fenced is retired: never written again. */
static void stage_fence(int b, CUstream s)
{
    int k = 0;
    while (k < G.stg.nfence[b] && G.stg.fence_stream[b][k] != s)
        k++;
    if (k == STAGE_STREAMS || (k == G.stg.nfence[b] && make_event(&G.stg.fence_ev[b][k]) != 0)) {
        G.stg.retired |= 1u << b;
        return;
    }
    if (k == G.stg.nfence[b])
        G.stg.nfence[b]++;
    G.stg.fence_stream[b][k] = s;
    REAL(cuEventRecord)(G.stg.fence_ev[b][k], s);
}

int ag_stage_held(void)
{
    return G.stg.pending_mask != 0;
}

void ag_stage_done(void)
{
    G.stg.pending_mask = 0;
}

void ag_stage_issued(const ag_chunk_t *c, CUstream s)
{
    for (uint32_t i = 0; i < c->n && G.stg.pending_mask; i++)
        if (c->ops[i].kind == OP_H2D && c->ops[i].stage >= 0)
            stage_fence(c->ops[i].stage, s);
    ag_stage_done();
}

void ag_stage_issued_op(const ag_op_t *o)
{
    if (o->kind == OP_H2D && o->stage >= 0)
        stage_fence(o->stage, o->stream);
}

/* Staging moves to the next buffer, allocated where it is not yet: -1 where that one cannot be written yet.
 * Its fence queries and its allocation are both calls CUDA may refuse beside a capture: the caller makes
 * them in the relaxed mode. */
static int stage_next(void)
{
    int next = G.stg.buf[G.stg.cur] ? (G.stg.cur + 1) % STAGE_BUFS : G.stg.cur;
    if (G.stg.pending_mask & (1u << next))
        return -1; /* the held work still reads it */
    if (G.stg.retired & (1u << next)) {
        AG_LOG_CAPPED(AG_LOG_DEBUG, "a staging buffer could not be fenced; it is replaced (and kept)");
        G.stg.buf[next] = NULL; /* leaked on purpose: work issued earlier may still read it */
        G.stg.retired &= ~(1u << next);
    } else {
        /* Copies issued earlier still read it unless their fences passed; no waiting here. */
        for (int k = 0; k < G.stg.nfence[next]; k++)
            if (REAL(cuEventQuery)(G.stg.fence_ev[next][k]) != CUDA_SUCCESS)
                return -1;
    }
    G.stg.nfence[next] = 0;
    if (!G.stg.buf[next]) {
        void *made = NULL; /* through its own type: the buffer's pointer is not a void * */
        if (REAL(cuMemAllocHost_v2)(&made, STAGE_SIZE) != CUDA_SUCCESS)
            return -1;
        G.stg.buf[next] = made;
    }
    G.stg.cur = next;
    G.stg.off = 0;
    return 0;
}

/* A pinned copy of n bytes of a pageable source, valid until the work that reads it has run. */
void *ag_stage_copy(const void *src, size_t n, int8_t *which)
{
    size_t need = (n + 255) & ~(size_t)255;
    if (need > STAGE_SIZE)
        return NULL;
    if (G.stg.off + need > STAGE_SIZE || !G.stg.buf[G.stg.cur]) {
        CUstreamCaptureMode mode = ag_relaxed_begin();
        int r = stage_next();
        ag_relaxed_end(mode);
        if (r)
            return NULL;
    }
    unsigned char *p = G.stg.buf[G.stg.cur] + G.stg.off;
    G.stg.off += need;
    memcpy(p, src, n);
    *which = (int8_t)G.stg.cur;
    G.stg.pending_mask |= 1u << G.stg.cur;
    return p;
}

/* ---- graphs ---- */

static void graph_free(ag_graph_t *g)
{
    if (g && g->mem <= G.mem)
        G.mem -= g->mem;
    if (!g)
        return;
    if (g->exec || g->graph) { /* (none where its context ended: ag_graph_retire) */
        CUstreamCaptureMode mode = ag_relaxed_begin();
        if (g->exec)
            ag_drv.cuGraphExecDestroy(g->exec);
        if (g->graph)
            ag_drv.cuGraphDestroy(g->graph);
        ag_relaxed_end(mode);
    }
    free(g->nodes);
    free(g->kp);
    free(g->ops);
    free(g->args);
    free(g->ends);
    free(g);
}

static void graph_forget(ag_graph_t *g)
{
    for (uint32_t i = 0; i < G.ngraphs; i++)
        if (G.graphs[i] == g) {
            G.graphs[i] = G.graphs[--G.ngraphs];
            break;
        }
}

void ag_graph_release(ag_variant_t *v, void *ctx)
{
    (void)ctx;
    ag_graph_t *g = v->graph;
    graph_forget(g);
    graph_free(g);
    v->graph = NULL;
}

/* Stream s is destroyed: its handle may come back as a stream with other flags, so the graphs whose edges
 * were drawn from its flags (those that hold the legacy stream's implicit order with it) are released, and
 * built anew from the work their variants next hold. */
void ag_graph_release_stream(CUstream s)
{
    for (uint32_t i = G.ngraphs; i-- > 0;) { /* ag_graph_release moves the last graph into i */
        const ag_graph_t *g = G.graphs[i];
        for (int k = 0; g->legacy >= 0 && k < g->nstreams; k++)
            if (g->streams[k] == s) {
                ag_graph_release(g->owner, NULL);
                G.graphs_released++;
                break;
            }
    }
}

static void release_all(void)
{
    for (uint32_t i = 0; i < G.ngraphs; i++) {
        G.graphs[i]->owner->graph = NULL;
        graph_free(G.graphs[i]);
    }
    G.graphs_released += G.ngraphs;
    G.ngraphs = 0;
}

void ag_graph_retire(void)
{
    for (uint32_t i = 0; i < G.ngraphs; i++) {
        ag_graph_t *g = G.graphs[i];
        g->owner->graph = NULL;
        g->exec = NULL, g->graph = NULL; /* destroyed with the context */
        graph_free(g);
    }
    free(G.graphs);
    pthread_mutex_lock(&spare_lock);
    free(G.spare); /* (the buffers and events went with the context) */
    unsigned gen = G.gen + 1;
    memset(gcur, 0, sizeof *gcur);
    G.gen = gen;
    pthread_mutex_unlock(&spare_lock);
}

/* Kernels were unloaded (u): the graphs holding one of them are released (every graph where u->all). */
void ag_graph_release_kernels(const ag_unload_t *u)
{
    if (u->all) {
        release_all();
        return;
    }
    for (uint32_t i = G.ngraphs; i-- > 0;) { /* ag_graph_release moves the last graph into i */
        const ag_graph_t *g = G.graphs[i];
        for (uint32_t k = 0; k < g->n; k++)
            if (g->ops[k].kind == OP_KERNEL && ag_unload_has(u, g->ops[k].f)) {
                ag_graph_release(g->owner, NULL);
                G.graphs_released++;
                break;
            }
    }
}

static void evict_graph(uint32_t i)
{
    ag_graph_t *g = G.graphs[i];
    g->owner->graph = NULL;
    graph_forget(g);
    graph_free(g);
    G.graphs_evicted++;
}

static void evict_lru_graph(void)
{
    uint32_t oldest = 0;
    for (uint32_t i = 1; i < G.ngraphs; i++)
        if (G.graphs[i]->last_launch < G.graphs[oldest]->last_launch)
            oldest = i;
    evict_graph(oldest);
}

/* ---- admission to a full cache ----
 * A program whose variants outnumber the cache (AUTOGRAPH_MAX_GRAPHS) would, with plain least-recently-
 * used eviction, evict for each new graph one that is launched again soon, and build again what it
 * evicted: on fakecuda, 8 batch sizes in a random order (56 graphs' worth) with room for 16 built 1932
 * graphs for 2657 graph launches, a build (0.1-2 ms on the H200) for most launches, each of which saves a
 * few microseconds an operation. So once the cache is full, a new graph replaces
 *   - one not launched for an epoch (ADMIT_PERIOD uses per graph the cache holds; uses are graph launches
 *     and refused builds): work the program no longer runs, or
 *   - the graph launched least, where the new variant asked for a graph more than twice as often (each
 *     graph counts its launches, each variant the builds it was refused, both halved every epoch; an
 *     admitted graph starts with its variant's count);
 * else the build is refused and the chunk is issued as it is (fallback graph_cache_full): the same work,
 * eagerly. With that, those 8 sizes built 27 graphs for 827 graph launches (engine.cache_full). */
#define ADMIT_PERIOD 16u
#define SCORE_MAX 1024u

static uint64_t admit_period(void)
{
    return (uint64_t)ADMIT_PERIOD * G.max_graphs;
}

static uint32_t aged(uint32_t score, uint32_t epoch)
{
    uint32_t d = G.epoch - epoch;
    return d >= 32 ? 0 : score >> d;
}

/* One more use of the cache (a graph launch, a refused build); a countdown, not a division, on the replay
 * path. */
static void used(void)
{
    G.uses++;
    if (G.epoch_left-- <= 1) {
        G.epoch++;
        G.epoch_left = admit_period();
    }
}

int ag_graph_admit(ag_variant_t *v)
{
    if (G.ngraphs < G.max_graphs)
        return 1;
    uint32_t victim = 0, low = UINT32_MAX;
    for (uint32_t i = 0; i < G.ngraphs; i++) {
        const ag_graph_t *g = G.graphs[i];
        uint32_t sc = G.uses - g->last_launch >= admit_period() ? 0 : aged(g->score, g->score_epoch);
        if (sc < low || (sc == low && g->last_launch < G.graphs[victim]->last_launch))
            victim = i, low = sc;
    }
    uint32_t asks = aged(v->asks, v->asks_epoch);
    if (low == 0 || asks > 2 * low) {
        evict_graph(victim);
        v->asks = asks, v->asks_epoch = G.epoch; /* its graph starts with them (ag_graph_build) */
        return 1;
    }
    v->asks = asks < SCORE_MAX ? asks + 1 : asks;
    v->asks_epoch = G.epoch;
    G.builds_refused++;
    used();
    return 0;
}

/* Created stream s is blocking (synchronizes with the legacy stream); where the driver cannot say, *known
 * is 0 and it counts as blocking. */
static int stream_blocking(CUstream s, int *known)
{
    unsigned flags = 0;
    *known = ag_drv.cuStreamGetFlags(s, &flags) == CUDA_SUCCESS;
    return !*known || !(flags & CU_STREAM_NON_BLOCKING);
}

/* Where capture stream `to` goes on only after what capture stream `from` has captured so far. */
static CUresult capture_edge(int from, int to)
{
    CUresult r = REAL(cuEventRecord)(G.imp_ev, G.cap_streams[from]);
    return r == CUDA_SUCCESS ? REAL(cuStreamWaitEvent)(G.cap_streams[to], G.imp_ev, 0) : r;
}

/* Before operation i of a chunk that mixes the legacy stream (index g->legacy) with created streams is
 * captured on stream k: the legacy stream's implicit order made explicit. An operation on the legacy stream
 * follows everything the blocking streams did before it, and one on a blocking stream follows what the
 * legacy stream did before it (event records and waits count: conservatively, more order). *dirty: the
 * blocking streams with operations the legacy stream has not followed yet; *behind: those that have not
 * followed the legacy stream's latest operations. */
static CUresult legacy_edges(const ag_graph_t *g, int k, uint32_t *dirty, uint32_t *behind)
{
    CUresult r = CUDA_SUCCESS;
    if (k == g->legacy) {
        for (int j = 0; r == CUDA_SUCCESS && j < g->nstreams; j++)
            if (*dirty & (1u << j))
                r = capture_edge(j, k);
        *dirty = 0;
        *behind = g->blocking;
    } else if (g->blocking & (1u << k)) {
        if (*behind & (1u << k))
            r = capture_edge(g->legacy, k);
        *behind &= ~(1u << k);
        *dirty |= 1u << k;
    }
    return r;
}

/* Captures the pending operations into a graph on the private stream (ag_graph_build, in the relaxed
 * capture mode): *out, 0; -EAGAIN where it gave way to a context-wide call (the capture fence), -EIO where
 * CUDA refused it or memory ran out. */
static int build(const ag_chunk_t *c, ag_variant_t *v, ag_graph_t **out)
{
    int err = -EIO;
    ag_graph_t *g = calloc(1, sizeof *g);
    if (!g)
        return err;
    uint32_t n = c->n;
    g->n = n;
    g->owner = v;
    g->nodes = calloc(n, sizeof *g->nodes);
    g->kp = calloc(n, sizeof *g->kp);
    g->ops = malloc(sizeof *g->ops * n);
    g->args = malloc(c->arena_used ? c->arena_used : 1);
    g->ends = calloc(n, sizeof *g->ends);
    if (!g->nodes || !g->kp || !g->ops || !g->args || !g->ends)
        goto fail;
    for (uint32_t i = 0; i < n; i++) {
        const ag_op_t *o = &c->ops[i];
        void *stage = NULL;
        if (o->kind == OP_D2H && o->stage >= 0 && !(stage = ag_thread_staging()))
            goto fail;
        if (is_copy(o))
            g->ends[i] = copy_ends(o, stage);
        for (unsigned k = 0; o->kind == OP_KERNEL && k < o->nattrs; k++)
            ag_attr_seen(o->attrs[k].id);
    }
    memcpy(g->ops, c->ops, sizeof *g->ops * n);
    if (c->arena_used) /* a chunk without kernels may have no arena at all */
        memcpy(g->args, c->arena, c->arena_used);

    CUstream streams[AG_MAX_STREAMS];
    uint8_t *sidx = malloc(n ? n : 1);
    int ns = sidx ? chunk_streams(c, streams, sidx) : -1;
    if (ns < 1 || capture_resources(ns) != 0) {
        free(sidx);
        goto fail;
    }
    G.cap_streams[0] = G.cap_stream;
    memcpy(g->streams, streams, sizeof *streams * (size_t)ns);
    g->nstreams = ns;
    g->legacy = -1;
    for (int k = 0; k < ns; k++)
        if (streams[k] == CU_STREAM_LEGACY)
            g->legacy = k;
    for (int k = 0, known; g->legacy >= 0 && k < ns; k++)
        if (k != g->legacy && stream_blocking(streams[k], &known)) {
            g->blocking |= 1u << k;
            g->implied |= known ? 1u << k : 0;
        }
    uint32_t dirty = 0, behind = 0;

    /* Each application stream gets a capture stream; the others fork from the first at the start and
     * join it at the end. Event records become private events inside the capture, so a wait on a
     * record of this chunk is an edge of the graph. */
    int timed = AG_LOG_ON(AG_LOG_DEBUG); /* the build's phases, at debug level */
    uint64_t t_cap = timed ? ag_now_ns() : 0, t_mem = 0, t_inst = 0, t_params = 0;
    if (!fence_capture_begin()) { /* a context-wide call of the program is in the driver */
        free(sidx);
        err = -EAGAIN;
        goto fail;
    }
    ag_guard++; /* the re-issued launches are not the application's: CUPTI must not count them */
    CUresult r = REAL(cuStreamBeginCapture_v2)(G.cap_stream, CU_STREAM_CAPTURE_MODE_RELAXED);
    int began = r == CUDA_SUCCESS, ok = began;
    if (ok && ns > 1) {
        r = REAL(cuEventRecord)(G.fork_ev, G.cap_stream);
        for (int k = 1; r == CUDA_SUCCESS && k < ns; k++)
            r = REAL(cuStreamWaitEvent)(G.cap_streams[k], G.fork_ev, 0);
        ok = r == CUDA_SUCCESS;
    }
    int records = 0;
    int32_t *rec_no = calloc(n ? n : 1, sizeof *rec_no); /* record number of each record operation */
    ok = ok && rec_no;
    for (uint32_t i = 0; ok && i < n; i++) {
        const ag_op_t *o = &c->ops[i];
        CUstream cs = G.cap_streams[sidx[i]];
        if (g->blocking && (r = legacy_edges(g, sidx[i], &dirty, &behind)) != CUDA_SUCCESS) {
            ok = 0;
            break;
        }
        if (o->kind == OP_EVREC) {
            rec_no[i] = records;
            r = REAL(cuEventRecord)(G.shadow_ev[records++], cs);
            ok = r == CUDA_SUCCESS;
            continue;
        }
        if (o->kind == OP_EVWAIT) {
            /* A wait for a record made before the chunk is done before the graph's launch. */
            if (o->rec_idx >= 0)
                r = REAL(cuStreamWaitEvent)(cs, G.shadow_ev[rec_no[o->rec_idx]], 0);
            ok = r == CUDA_SUCCESS;
            continue;
        }
        if (o->kind == OP_D2H && o->stage >= 0)
            r = REAL(cuMemcpyDtoHAsync_v2)(g->ends[i].dhost, o->src, o->n, cs);
        else
            r = ag_issue(o, cs, c->arena);
        CUstreamCaptureStatus st;
        const CUgraphNode *deps = NULL;
        size_t ndeps = 0;
        if (r == CUDA_SUCCESS)
            r = REAL(cuStreamGetCaptureInfo_v3)(cs, &st, NULL, NULL, &deps, NULL, &ndeps);
        ok = r == CUDA_SUCCESS && ndeps == 1;
        if (ok)
            g->nodes[i] = deps[0];
        else if (AG_LOG_ON(AG_LOG_DEBUG)) {
            char d[512];
            ag_log(AG_LOG_DEBUG, "capturing operation %u of a chunk of %u failed (CUDA error %d, %zu nodes after it): "
                   "%s", i, n, (int)r, ndeps, ag_op_describe(o, d, sizeof d));
        }
    }
    for (int k = 1; ok && k < ns; k++) {
        r = REAL(cuEventRecord)(G.join_ev[k], G.cap_streams[k]);
        if (r == CUDA_SUCCESS)
            r = REAL(cuStreamWaitEvent)(G.cap_stream, G.join_ev[k], 0);
        ok = r == CUDA_SUCCESS;
    }
    free(rec_no);
    free(sidx);
    if (began) {
        CUgraph graph = NULL;
        CUresult re = REAL(cuStreamEndCapture)(G.cap_stream, &graph);
        g->graph = graph;
        if (re != CUDA_SUCCESS) {
            ok = 0;
            r = re;
        }
    }
    fence_capture_end();
    ag_guard--;
    if (!ok || !g->graph) {
        ag_log(AG_LOG_DEBUG, "capturing a chunk of %u operations failed (CUDA error %d)", n, (int)r);
        goto fail;
    }
    /* The driver says nothing of what an exec costs on the device: the free-memory difference across
     * instantiation estimates it (other threads' allocations in between can blur it). */
    size_t free0 = 0, free1 = 0, total = 0;
    t_mem = timed ? ag_now_ns() : 0;
    int measured = ag_drv.cuMemGetInfo_v2 && ag_drv.cuMemGetInfo_v2(&free0, &total) == CUDA_SUCCESS;
    t_inst = timed ? ag_now_ns() : 0;
    r = ag_drv.cuGraphInstantiateWithFlags(&g->exec, g->graph, 0);
    t_params = timed ? ag_now_ns() : 0;
    if (r == CUDA_SUCCESS && measured && ag_drv.cuMemGetInfo_v2(&free1, &total) == CUDA_SUCCESS && free1 < free0)
        g->mem = free0 - free1;
    if (r != CUDA_SUCCESS) {
        ag_log(AG_LOG_DEBUG, "instantiating a graph of %u operations failed (CUDA error %d)", n, (int)r);
        goto fail;
    }
    for (uint32_t i = 0; i < n; i++)
        if (g->ops[i].kind == OP_KERNEL && ag_drv.cuGraphKernelNodeGetParams_v2(g->nodes[i], &g->kp[i]) != CUDA_SUCCESS)
            goto fail;
    if (timed) {
        uint64_t t_end = ag_now_ns();
        ag_log(AG_LOG_DEBUG, "graph of %u operations built in %.1f us: capture %.1f, memory query %.1f, "
                             "instantiate %.1f, memory query and node parameters %.1f", n,
               (double)(t_end - t_cap) / 1e3, (double)(t_mem - t_cap) / 1e3, (double)(t_inst - t_mem) / 1e3,
               (double)(t_params - t_inst) / 1e3, (double)(t_end - t_params) / 1e3);
    }
    if (G.ngraphs >= G.max_graphs)
        evict_lru_graph();
    /* a graph admitted to a full cache starts with the requests its variant made (ag_graph_admit): else
     * it would be the first to go at the next one */
    g->score = aged(v->asks, v->asks_epoch), g->score_epoch = G.epoch, g->last_launch = G.uses;
    v->asks = 0;
    G.graphs[G.ngraphs++] = g;
    G.mem += g->mem;
    G.graphs_built++;
    G.mixing_legacy += g->legacy >= 0 && g->nstreams > 1;
    *out = g;
    return 0;
fail:
    g->mem = 0; /* (never counted in the cache's) */
    graph_free(g);
    return err;
}

int ag_graph_build(const ag_chunk_t *c, ag_variant_t *v, ag_graph_t **out)
{
    CUstreamCaptureMode mode = ag_relaxed_begin();
    *out = NULL;
    int err = build(c, v, out);
    ag_relaxed_end(mode);
    return err;
}

/* New addresses for a 1D copy node: a host side is given by its pointer (non-NULL), a device side by
 * its address. */
static CUresult set_copy_node(ag_graph_t *g, uint32_t i, const copy_ends_t *e, size_t n)
{
    CUDA_MEMCPY3D cp;
    memset(&cp, 0, sizeof cp);
    cp.srcMemoryType = e->shost ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    cp.srcDevice = e->sdev;
    cp.srcHost = e->shost;
    cp.dstMemoryType = e->dhost ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
    cp.dstDevice = e->ddev;
    cp.dstHost = e->dhost;
    cp.WidthInBytes = n;
    cp.Height = 1;
    cp.Depth = 1;
    return ag_drv.cuGraphExecMemcpyNodeSetParams(g->exec, g->nodes[i], &cp, G.ctx);
}

/* Writes into the exec what changed since its last launch: kernel arguments, memset targets and values,
 * copy addresses. Returns 0, or -1 when the driver refused a patch. */
/* The signature fields of two records agree (what the graph fixed and patching cannot change). The
 * learner matches 64-bit signatures; this check makes a hash collision a fallback, not a wrong launch. */
static int same_shape(const ag_op_t *a, const ag_op_t *b)
{
    if (a->kind != b->kind || a->stream != b->stream || a->id != b->id)
        return 0;
    switch (a->kind) {
    case OP_KERNEL:
        return a->f == b->f && a->layout == b->layout && a->smem == b->smem && a->ex == b->ex &&
               a->nattrs == b->nattrs && memcmp(a->grid, b->grid, sizeof a->grid) == 0 &&
               memcmp(a->block, b->block, sizeof a->block) == 0 &&
               memcmp(a->attrs, b->attrs, sizeof *a->attrs * a->nattrs) == 0;
    case OP_MEMSET:
        return a->n == b->n && a->elem == b->elem;
    case OP_EVREC:
        return 1;
    case OP_EVWAIT:
        return a->rec_idx == b->rec_idx && a->flags == b->flags;
    case OP_H2D:
    case OP_D2H:
        return a->n == b->n && (a->stage >= 0) == (b->stage >= 0);
    default: /* OP_COPY */
        return a->n == b->n;
    }
}

/* AUTOGRAPH_LOG=trace: one line per patched kernel node (the graph, the node, the kernel, the bytes that
 * changed and a hash of the new ones), to see which arguments change from replay to replay and how
 * (ever new, or taking turns among a few values). */
static void trace_patch(const ag_graph_t *g, uint32_t i, const ag_op_t *o, const unsigned char *a,
                        const unsigned char *b, uint32_t total)
{
    uint32_t first = 0, last = total - 1, nb = 0;
    while (a[first] == b[first])
        first++;
    while (a[last] == b[last])
        last--;
    for (uint32_t k = first; k <= last; k++)
        nb += a[k] != b[k];
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (uint32_t k = 0; k < total; k++)
        h = (h ^ a[k]) * 1099511628211ULL;
    char was[40], now[40]; /* the changed span's first 16 bytes, old and new, in hex */
    for (uint32_t k = 0; k < 16 && first + k <= last; k++) {
        snprintf(was + 2 * k, 3, "%02x", b[first + k]);
        snprintf(now + 2 * k, 3, "%02x", a[first + k]);
    }
    ag_log(AG_LOG_TRACE,
           "patch graph %p node %u kernel %p: %u of %u bytes changed in [%u, %u], new bytes %016llx (%s -> %s)",
           (const void *)g, i, (void *)o->f, nb, total, first, last, (unsigned long long)h, was, now);
}

int ag_graph_patch(ag_graph_t *g, const ag_chunk_t *c)
{
    if (c->n != g->n)
        return -1;
    for (uint32_t i = 0; i < g->n; i++) {
        ag_op_t *now = &c->ops[i], *was = &g->ops[i];
        if (!same_shape(now, was))
            return -1;
        CUresult r = CUDA_SUCCESS;
        uint64_t t0 = 0; /* read just before the driver call of a node that changed */
        int kind = now->kind == OP_KERNEL ? 0 : now->kind == OP_MEMSET ? 1 : 2;
        switch (now->kind) {
        case OP_KERNEL: {
            uint32_t total = now->layout->total;
            unsigned char *a = c->arena + now->arg_off, *b = g->args + was->arg_off;
            if (!total || memcmp(a, b, total) == 0)
                continue;
            if (AG_UNLIKELY(AG_LOG_ON(AG_LOG_TRACE)))
                trace_patch(g, i, now, a, b, total);
            CUDA_KERNEL_NODE_PARAMS kp = g->kp[i];
            kp.kernelParams = ag_param_ptrs(now->layout, a);
            kp.extra = NULL;
            t0 = ag_now_ns();
            r = ag_drv.cuGraphExecKernelNodeSetParams_v2(g->exec, g->nodes[i], &kp);
            if (r == CUDA_SUCCESS)
                memcpy(b, a, total);
            break;
        }
        case OP_MEMSET: {
            if (now->dst == was->dst && now->value == was->value)
                continue;
            CUDA_MEMSET_NODE_PARAMS mp = {now->dst, 0, now->value, now->elem, now->n, 1};
            t0 = ag_now_ns();
            r = ag_drv.cuGraphExecMemsetNodeSetParams(g->exec, g->nodes[i], &mp, G.ctx);
            if (r == CUDA_SUCCESS) {
                was->dst = now->dst;
                was->value = now->value;
            }
            break;
        }
        case OP_EVREC:
        case OP_EVWAIT:
            continue; /* not nodes: the events are handled around the launch */
        case OP_H2D:
        case OP_D2H:
        case OP_COPY: {
            void *stage = NULL; /* a blocking read writes this thread's staging buffer */
            if (now->kind == OP_D2H && now->stage >= 0 && !(stage = ag_thread_staging()))
                return -1;
            copy_ends_t e = copy_ends(now, stage);
            if (memcmp(&e, &g->ends[i], sizeof e) == 0)
                continue;
            t0 = ag_now_ns();
            r = set_copy_node(g, i, &e, now->n);
            if (r == CUDA_SUCCESS)
                g->ends[i] = e;
            break;
        }
        }
        if (r != CUDA_SUCCESS) {
            AG_LOG_CAPPED(AG_LOG_DEBUG, "patching node %u failed (CUDA error %d)", i, (int)r);
            return -1;
        }
        G.nodes_patched++;
        G.patched_by[kind]++;
        G.patch_drv_ns[kind] += ag_now_ns() - t0;
    }
    return 0;
}

int ag_graph_chunk_streams(const ag_chunk_t *c)
{
    CUstream streams[AG_MAX_STREAMS];
    return chunk_streams(c, streams, NULL);
}

const ag_op_t *ag_graph_op(const ag_graph_t *g, uint32_t i)
{
    return g && i < g->n ? &g->ops[i] : NULL;
}

CUstream ag_graph_stream(const ag_graph_t *g)
{
    return g->streams[g->legacy >= 0 ? g->legacy : 0];
}

/* Launches the graph on its stream (ag_graph_stream), ordered with the chunk's other streams (the graph's:
 * the chunk's operations are the graph's, stream for stream, which matching and patching check): the graph
 * waits for their earlier work (a launch on the legacy stream does for the blocking ones) and for the
 * records made before the chunk that it waits on, they all wait for the graph, and the application's
 * events are recorded after it. Later than CUDA would complete them, never earlier. */
CUresult ag_graph_launch(ag_graph_t *g, const ag_chunk_t *c)
{
    const CUstream *streams = g->streams;
    int ns = g->nstreams, s0i = g->legacy >= 0 ? g->legacy : 0;
    CUstream s0 = streams[s0i];
    CUresult r = CUDA_SUCCESS;
    for (int k = 0; r == CUDA_SUCCESS && k < ns; k++) {
        if (k == s0i || (g->implied & (1u << k)))
            continue;
        r = REAL(cuEventRecord)(G.pre_ev[k], streams[k]);
        if (r == CUDA_SUCCESS)
            r = REAL(cuStreamWaitEvent)(s0, G.pre_ev[k], 0);
    }
    for (uint32_t i = 0; r == CUDA_SUCCESS && i < c->n; i++)
        if (c->ops[i].kind == OP_EVWAIT && c->ops[i].rec_idx < 0)
            r = ag_issue_event(&c->ops[i], s0, c->ops[i].event);
    if (r == CUDA_SUCCESS) {
        ag_cupti_graph_enter();
        r = REAL(cuGraphLaunch)(g->exec, s0);
        ag_cupti_graph_leave();
    }
    if (r != CUDA_SUCCESS)
        return r;
    /* From here on the graph's work is issued: what follows cannot be undone by an eager re-issue, so
     * a failure is only logged (the next sync reports a sticky error if there is one). Every other stream
     * waits for the graph, the blocking ones too: a sync of one right after must cover it. */
    CUresult rr = CUDA_SUCCESS;
    if (ns > 1) {
        rr = REAL(cuEventRecord)(G.post_ev, s0);
        for (int k = 0; rr == CUDA_SUCCESS && k < ns; k++)
            if (k != s0i)
                rr = REAL(cuStreamWaitEvent)(streams[k], G.post_ev, 0);
    }
    if (rr != CUDA_SUCCESS)
        AG_LOG_CAPPED(AG_LOG_WARN, "ordering a graph with its streams failed (CUDA error %d)", (int)rr);
    uint32_t sc = aged(g->score, g->score_epoch);
    g->score = sc < SCORE_MAX ? sc + 1 : sc;
    g->score_epoch = G.epoch;
    used();
    g->last_launch = G.uses;
    return CUDA_SUCCESS;
}

CUresult ag_graph_init(CUcontext ctx, uint32_t max_graphs, size_t staging_size)
{
    G.ctx = ctx;
    G.max_graphs = max_graphs;
    G.epoch_left = admit_period();
    G.stg.size = staging_size;
    G.graphs = calloc(max_graphs, sizeof *G.graphs);
    if (!G.graphs)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUstreamCaptureMode mode = ag_relaxed_begin();
    CUresult r = ag_drv.cuStreamCreate(&G.cap_stream, CU_STREAM_NON_BLOCKING);
    ag_relaxed_end(mode);
    return r;
}

const void *ag_graph_d2h_dst(const ag_graph_t *g, uint32_t i)
{
    return g->ends[i].dhost;
}

void ag_graph_stats(ag_graph_stats_t *out)
{
    out->built = G.graphs_built;
    out->evicted = G.graphs_evicted;
    out->patched = G.nodes_patched;
    memcpy(out->patched_by, G.patched_by, sizeof out->patched_by);
    memcpy(out->patch_drv_ns, G.patch_drv_ns, sizeof out->patch_drv_ns);
    out->live = G.ngraphs;
    out->mem = G.mem;
    out->thread_stages = G.thread_stages;
    out->mixing_legacy = G.mixing_legacy;
    out->released = G.graphs_released;
    out->refused = G.builds_refused;
}
