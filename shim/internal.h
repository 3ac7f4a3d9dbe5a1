/* Declarations shared between the shim's files, grouped by the file that owns them. The id enum, the
 * names, kinds and function-pointer types of hooked entry points are generated from hooks.def.
 * Locking: see each group. */
#ifndef AG_INTERNAL_H
#define AG_INTERNAL_H

/* The shim must define deprecated entry points too (old programs still call them). */
#define CUDA_ENABLE_DEPRECATED
#include <cuda.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "log.h"
#include "options.h"

/* cuda.h maps these API names to their newest ABI symbol; hooks.def names the legacy symbols too. */
#undef cuGetProcAddress
#undef cuEventElapsedTime
#undef cuStreamBeginCapture
#undef cuStreamGetCaptureInfo
#undef cuDevicePrimaryCtxRelease
#undef cuDevicePrimaryCtxReset
#undef cuIpcOpenMemHandle
#undef cuMemcpyBatchAsync
#undef cuMemcpy3DBatchAsync
#undef cuStreamBatchMemOp
#undef cuStreamWaitValue32
#undef cuStreamWaitValue64
#undef cuStreamWriteValue32
#undef cuStreamWriteValue64

#define AG_EXPORT __attribute__((visibility("default")))
#define AG_LIKELY(x) __builtin_expect(!!(x), 1)
/* The launch path (pattern.h says why) */
#ifndef AG_HOT
#define AG_HOT __attribute__((hot))
#endif
#define AG_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define AG_TLS __thread __attribute__((tls_model("initial-exec")))
/* For code that runs when a sanitizer runtime preloaded before us (or linked into the program: ThreadSanitizer
 * resolves its interceptors through dlsym) calls dlsym during its own start-up, before it can serve
 * instrumented code. */
#define AG_NO_SANITIZE __attribute__((no_sanitize("address", "undefined", "thread")))

typedef enum {
#define AG_HOOK(kind, name, params, args) AG_ID_##name,
#include "hooks.def"
#undef AG_HOOK
    AG_ID_COUNT
} ag_id_t;

typedef enum {
    AG_KIND_INIT, AG_KIND_PROC, AG_KIND_QUERY, AG_KIND_ALLOC, AG_KIND_SALLOC, AG_KIND_DLAUNCH, AG_KIND_DSET, AG_KIND_DCOPY,
    AG_KIND_DEVENT, AG_KIND_DD2H, AG_KIND_DFREE,
    AG_KIND_LAUNCH, AG_KIND_COPY, AG_KIND_SET, AG_KIND_SYNC, AG_KIND_EVENT, AG_KIND_STREAM, AG_KIND_HOSTFN,
    AG_KIND_MEMOP, AG_KIND_FREE, AG_KIND_GRAPH, AG_KIND_CAPTURE, AG_KIND_MODULE, AG_KIND_CONTEXT, AG_KIND_IPC,
    AG_KIND_FATTR, AG_KIND_LIMIT, AG_KIND_PRIMARY, AG_KIND_CTXEVENT, AG_KIND_CTXSYNC
} ag_kind_t;
#define AG_KIND_IS_LAUNCH(k) ((k) == AG_KIND_DLAUNCH || (k) == AG_KIND_LAUNCH)
/* The kinds the engine may defer (consecutive in the enum above). */
#define AG_KIND_IS_DEFERRABLE(k) ((k) >= AG_KIND_DLAUNCH && (k) <= AG_KIND_DFREE)

#define AG_HOOK(kind, name, params, args) typedef CUresult(CUDAAPI *ag_fn_##name##_t) params;
#include "hooks.def"
#undef AG_HOOK

/* record.c: whether setting attribute a of h (a CUfunction, or a CUkernel on device dev where kernel) to
 * value may invalidate a launch made before: 1 where it changes the value (for the dynamic shared memory
 * limit, where it lowers it), or where the driver does not say what it is now. */
int ag_func_attr_changes(const void *h, int kernel, CUdevice dev, CUfunction_attribute a, int value);

/* ---- hooktab.c: names, kinds and lookup tables of hooked entry points. ---- */
extern const char *const ag_hook_names[AG_ID_COUNT];
extern const unsigned char ag_hook_kinds[AG_ID_COUNT];
/* 1 for the per-thread-default-stream entry points (_ptsz, _ptds), on which stream 0 means the calling
 * thread's own default stream. */
extern unsigned char ag_hook_per_thread[AG_ID_COUNT];
void ag_hooktab_init(void);
/* Records the driver's address for an id (while binding). */
void ag_hooktab_add_real(ag_id_t id, void *real);
/* Id of a hooked ABI name, or -1. Cheap; usable before binding. */
int ag_hook_by_name(const char *name);
/* Id whose real driver address is `real`, or -1. */
int ag_hook_by_real(const void *real);
/* 1 when `symbol` names an API family we hook (any version or stream variant of it). */
int ag_hook_family_known(const char *symbol);

/* CLOCK_MONOTONIC in nanoseconds: the one clock of the engine's and the observer's timings. */
static inline uint64_t ag_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- The state every hooked kernel launch reads, in as few cache lines as it fits. ----
 * Between two launches an interpreter evicts the shim's lines, and a cold launch pays for each one, and
 * more for one it can only find through another (shim/engine.c, prefetch_hot). Each variable of a
 * library's initial-exec TLS is found through a GOT entry of its own (its offset, 8 bytes), so 24 of
 * them took three GOT lines before the TLS lines themselves; and the process-wide flags every launch
 * checks lay in five lines of .bss. Grouped here: one GOT entry and one TLS line per thread, one line of
 * globals with the launch entry points' driver pointers (ag_real[2..4]: hooks.def lists the launches
 * first). The usual names are macros for the members. */
struct engine;
struct ag_tcount;
typedef struct {
    _Alignas(64) struct engine *eng; /* engine.c: the engine this thread works for now (E) */
    CUcontext ctx;                   /* engine.c: the context the thread's engine lookup last found */
    struct engine *ctx_eng;          /* and its engine (NULL: none) */
    struct engine *hold_eng;         /* engine.c: where this thread last held an operation back */
    uint64_t holds;                  /* and that engine's drains + 1 then */
    struct ag_tcount *tc;            /* stats.c: this thread's call counters */
    int guard, hook_depth;           /* core.c: ag_guard, ag_hook_depth (below) */
    unsigned sample_tick;            /* engine.c: operations of this thread, for the sampled timings */
    int sample_phased;               /* engine.c: the sampled launch now in the engine is timed by phase */
} ag_tl_t;
extern AG_TLS ag_tl_t ag_tl; /* engine.c */
typedef struct {
    /* engine.c: the driver's cuCtxGetCurrent, once found */
    _Alignas(64) _Atomic(CUresult(CUDAAPI *)(CUcontext *)) ctx_query;
    atomic_int bound;             /* core.c: ag_bound */
    atomic_int engine_on;         /* engine.c: ag_engine_on */
    int app_captures;             /* engine.c: the program's own stream captures under way */
    int pausing;                  /* engine.c: autograph_pause stepping aside, until ag_engine_on is 0 */
    void *real[AG_ID_COUNT];      /* core.c: ag_real */
} ag_hot_t;
extern ag_hot_t ag_hot; /* core.c */
/* What the grouping is for, kept true as members come and go: the thread's state is one line, and the
 * flags and the common launch entry points' driver pointers are the globals' first line. */
_Static_assert(sizeof(ag_tl_t) == 64, "ag_tl_t must stay one cache line");
_Static_assert(offsetof(ag_hot_t, real) + sizeof(void *) * (AG_ID_cuLaunchKernelEx + 1) <= 64 &&
                   AG_ID_cuLaunchKernel < AG_ID_cuLaunchKernelEx &&
                   AG_ID_cuLaunchKernel_ptsz < AG_ID_cuLaunchKernelEx,
               "the launch entry points' driver pointers must stay in ag_hot's first line");

/* ---- core.c: start-up, binding to the real driver, fork. ----
 * ag_real[] is written once under a pthread_once before ag_bound is released; read-only after. */
#define ag_real (ag_hot.real)
#define ag_bound (ag_hot.bound)
/* Depth of the shim's own calls into CUDA or CUPTI on this thread: hooks reached from there pass
 * straight through, uncounted. */
#define ag_guard (ag_tl.guard)
/* Inside a barrier or deferrable hook on this thread (driver calls made now were seen by a hook). */
#define ag_hook_depth (ag_tl.hook_depth)
/* The engine operation (its number + 1) whose kernel this thread is launching eagerly now, or 0: the
 * CUPTI observer ties the kernel's timing record to it. */
extern AG_TLS uint64_t ag_timing_op;

void ag_bind_cuda(void);
/* For a thread of the shim's own (record.c): its driver calls, and those CUPTI makes on it, are made in the
 * relaxed capture mode from now on (ag_relaxed_begin in record.h). */
void ag_thread_relaxed(void);
static inline void *ag_real_get(ag_id_t id)
{
    if (AG_UNLIKELY(!atomic_load_explicit(&ag_bound, memory_order_acquire)))
        ag_bind_cuda();
    return ag_real[id];
}
/* The hook's own address for an id (interpose.c). */
void *ag_hook_addr(ag_id_t id);
/* Symbols whose cuGetProcAddress answer the shim could not map to a hook (interpose.c). */
int ag_unmatched_names(const char *const **names);
/* Real dlsym, resolved in the constructor or earlier by the first dlsym call (ag_resolve_real_dlsym,
 * which returns it). */
extern void *(*ag_real_dlsym)(void *, const char *);
void *ag_resolve_real_dlsym(void);

/* ---- stats.c: per-thread call counters and the JSON report. ----
 * Each thread writes only its own block (relaxed atomics, no contention); blocks of exited threads are
 * folded into the global totals under a mutex taken once per thread lifetime. */
typedef struct ag_tcount {
    _Atomic uint64_t n[AG_ID_COUNT];
    struct ag_tcount *next;
} ag_tcount_t;
#define ag_tc (ag_tl.tc)
ag_tcount_t *ag_tcount_attach(void);
static inline void ag_count(ag_id_t id)
{
    ag_tcount_t *t = ag_tc;
    if (AG_UNLIKELY(!t))
        t = ag_tcount_attach();
    if (AG_LIKELY(t != NULL))
        atomic_store_explicit(&t->n[id], atomic_load_explicit(&t->n[id], memory_order_relaxed) + 1,
                              memory_order_relaxed);
}
/* Room for one more element in arr, an array of n used of *cap, of elem bytes each: arr itself while there is
 * room, else arr grown to twice *cap (first where *cap is 0) and *cap with it, or NULL where there is no
 * memory (arr and *cap then unchanged). Not for the launch path: it may allocate. */
static inline void *ag_grow(void *arr, uint32_t n, uint32_t *cap, size_t elem, uint32_t first)
{
    if (n < *cap)
        return arr;
    uint32_t c = *cap ? 2 * *cap : first;
    void *p = realloc(arr, elem * c);
    if (p)
        *cap = c;
    return p;
}
/* A thread that gets a per-thread buffer of the shim's (record.c, graph.c) without having made a hooked call
 * (one that only calls autograph_pause, say) is registered here, so that its exit frees the buffer. */
static inline void ag_thread_exit_arm(void)
{
    if (AG_UNLIKELY(!ag_tc))
        (void)ag_tcount_attach();
}
/* Host times (ns) of sampled calls: their count, sum, and the last AG_SAMPLER_RING of them for a median
 * that a few slow ones (a kernel's first launch loading its module, hundreds of us) do not move.
 * Lock-free: concurrent adds may interleave in the ring, which only reorders samples. */
#define AG_SAMPLER_RING 4096
typedef struct {
    _Atomic uint32_t ns[AG_SAMPLER_RING];
    atomic_ullong n, sum;
} ag_sampler_t;
void ag_sampler_add(ag_sampler_t *s, uint64_t ns);
/* The median of the samples in the ring (0 when none); not for the launch path (sorts a copy). */
double ag_sampler_median(ag_sampler_t *s);
/* The same for a plain ring of AG_SAMPLER_RING values that n samples were written to in turn (a writer
 * that holds a lock the reader takes too). */
double ag_median_u32(const uint32_t *ring, uint64_t n);
/* Kernel launches that went straight to the driver (the engine off: AUTOGRAPH_SCOPE=off, paused,
 * resting): every 16th of a thread is timed, the driver call alone (interpose.c). And, counted apart,
 * every 16th memset, copy and event record or wait the engine could have held back (not a device-to-host
 * copy, whose time is the wait for the GPU): together, the driver time that replay can take away. */
extern ag_sampler_t ag_passthru_launches, ag_passthru_memops;
extern AG_TLS unsigned ag_passthru_tick, ag_passthru_mtick;
/* Writes s as a JSON string literal. */
void ag_put_json_string(FILE *f, const char *s);
extern atomic_ulong ag_unmatched_proc;
/* kernel attribute sets (FATTR hooks) that passed [0] and that were barriers [1] (ag_func_attr_changes) */
extern atomic_ulong ag_fattr_sets[2];
void ag_stats_totals(uint64_t out[AG_ID_COUNT]);
void ag_stats_fork_child(void);
void ag_stats_fork_prepare(void);
void ag_stats_fork_parent(void);
/* Writes AUTOGRAPH_STATS and the info summary; called once at exit. */
void ag_stats_report(int forked_child);

/* ---- engine.c: deferral and replay (see engine.h). ---- */
/* AG_ENGINE_ACTIVE while the engine may learn and defer (AUTOGRAPH_SCOPE is not off and nothing
 * disabled it); AG_ENGINE_RESTING while it rests (AUTOGRAPH_REST): deferrable calls go straight to the
 * driver (counted by ag_engine_rested), barriers still reach the engine, which counts the segments. */
enum { AG_ENGINE_OFF, AG_ENGINE_ACTIVE, AG_ENGINE_RESTING };
#define ag_engine_on (ag_hot.engine_on)
/* Operations this thread passed while the engine rests, since it last told the engine (every
 * AG_REST_TICK): a rest ends after so many operations too, in a loop that stops reaching barriers. */
#define AG_REST_TICK 256
extern AG_TLS unsigned ag_rest_ops;
void ag_engine_rest_tick(void);
static inline void ag_engine_rested(void)
{
    if (AG_UNLIKELY(++ag_rest_ops >= AG_REST_TICK))
        ag_engine_rest_tick();
}
void ag_engine_start(void);
CUresult ag_engine_launch(ag_id_t id, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned smem, CUstream s, void **params, void **extra);
CUresult ag_engine_launch_ex(ag_id_t id, const CUlaunchConfig *cfg, CUfunction f, void **params, void **extra);
CUresult ag_engine_memset8(ag_id_t id, CUdeviceptr dst, unsigned char value, size_t n, CUstream s);
CUresult ag_engine_memset16(ag_id_t id, CUdeviceptr dst, unsigned short value, size_t n, CUstream s);
CUresult ag_engine_memset32(ag_id_t id, CUdeviceptr dst, unsigned int value, size_t n, CUstream s);
CUresult ag_engine_copy(ag_id_t id, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult ag_engine_event_record(ag_id_t id, CUevent ev, CUstream s);
CUresult ag_engine_event_record_flags(ag_id_t id, CUevent ev, CUstream s, unsigned flags);
CUresult ag_engine_stream_wait_event(ag_id_t id, CUstream s, CUevent ev, unsigned flags);
CUresult ag_engine_h2d_async(ag_id_t id, CUdeviceptr dst, const void *src, size_t n, CUstream s);
/* Before cuCtxDestroy (ctx) or a primary context's reset (dev), after its barrier: the argument layouts of
 * the kernels of the engines that end are forgotten, as after the call (the driver may give their handles
 * to another thread's new kernels as soon as the context is gone, before the call returns). */
void ag_engine_context_ending(ag_id_t id, CUcontext ctx, CUdevice dev);
/* After a successful cuCtxDestroy (ctx) or primary context release or reset (dev): where the engine's
 * context ended, the engine stops. */
void ag_engine_context_end(ag_id_t id, CUcontext ctx, CUdevice dev);
/* After a successful cuDevicePrimaryCtxRetain: ctx is device dev's primary context. */
void ag_engine_primary_retained(CUdevice dev, CUcontext ctx);
/* cuEventDestroy: the event is forgotten (timed events); where a held record or wait may name it, a barrier,
 * or (AUTOGRAPH_EVENT_DESTROY=defer) the engine keeps it and destroys it after that work (1: the hook returns
 * success without the driver's call). */
int ag_engine_event_destroy(ag_id_t id, CUevent ev);
CUresult ag_engine_copy_unified(ag_id_t id, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
CUresult ag_engine_d2h(ag_id_t id, void *dst, CUdeviceptr src, size_t n);
CUresult ag_engine_d2h_async(ag_id_t id, void *dst, CUdeviceptr src, size_t n, CUstream s);
/* A stream-ordered free (cuMemFreeAsync): of an allocation noted by ag_engine_alloced, on the stream of
 * the held work, it is held back with that work and issued right after it (a later free in the stream's
 * order, invisible but to the pool's reuse); any other one is a barrier. */
CUresult ag_engine_free_async(ag_id_t id, CUdeviceptr p, CUstream s);
/* A stream-ordered allocation succeeded: its free may be held back. */
void ag_engine_alloced(CUdeviceptr p);
/* A stream-ordered allocation ran out of memory: 1 if frees were held back (they are issued now, with
 * the work before them, and the allocation is worth retrying), else 0. */
int ag_engine_frees_release(void);
/* Before a call through which deferred work could be observed: issues it (graph or eager). */
void ag_engine_barrier(ag_id_t id);
/* cuStreamDestroy's, before the driver's call, whether the engine runs or not: the graphs built on the
 * stream's flags are released (its handle may come back with other flags). */
void ag_engine_stream_gone(CUstream s);
/* The kernels a module or library unload takes with it: the handles of the cached layouts that are its
 * (sorted; a kernel the driver could not say whose it is counts as its), or all (no room to list them). */
typedef struct {
    const void **h;
    uint32_t n;
    int all;
} ag_unload_t;
/* A module or library unload (library: 1 for cuLibraryUnload), engine running or paused: before the driver
 * call (after the barrier), which cached kernels are its, and their layouts go (another thread may get
 * their handles for new kernels before the call returns); after the call, their layouts go again (a
 * launch of theirs meanwhile cached them), and so does every graph holding one of them. */
void ag_engine_unload_begin(ag_unload_t *u, int library, const void *handle);
void ag_engine_kernels_gone(ag_unload_t *u);
/* Before a sync or query of events a and b (both NULL: of a stream or the context): on a thread that
 * issues work a barrier, but for events whose latest records all came before the last barrier (which
 * issued them), and for a query of an event recorded since then DISTANT_OPS (engine.c) operations before
 * or more (the driver answers, or, where the record is still held, "not ready" as below); on any other
 * thread one only where it could observe held work (a record of a or b held back, or for a stream or the
 * context any held work), and otherwise nothing at all, so that a thread that polls at times of its own
 * does not cut the segments of the threads that issue work. Such a thread's query of an event whose
 * latest record is held back is answered "not ready" a few times (returns CUDA_ERROR_NOT_READY: the hook
 * returns it without calling the driver), then issues it first. Otherwise CUDA_SUCCESS: the call goes to
 * the driver. */
CUresult ag_engine_observe(ag_id_t id, CUevent a, CUevent b, CUstream s);
/* Set by a barrier on this thread whose call's time the engine weighs (a replayed segment ended there and
 * its pace is not known yet): the hook calls ag_engine_waited once the driver's call returned. */
extern AG_TLS void *ag_wait_engine;
void ag_engine_waited(void);
static inline void ag_wait_done(void)
{
    if (AG_UNLIKELY(ag_wait_engine != NULL))
        ag_engine_waited();
}
/* Barrier hooks' host time, engine on or off (interpose.c times every call but the shim's own): the
 * engine's part (the held work issued first, a replay's wait weighed after) and the driver's (for a sync,
 * the wait for the GPU), by class: syncs, queries, the program's graph launches and captures, the rest.
 * A run with AUTOGRAPH_SCOPE=off gives the same program's driver waits without deferral beside it. */
enum { AG_BAR_SYNC, AG_BAR_QUERY, AG_BAR_GRAPH, AG_BAR_OTHER, AG_BAR_CLASSES };
typedef struct {
    atomic_ullong calls, engine_ns, driver_ns;
} ag_bar_time_t;
extern ag_bar_time_t ag_bar_times[AG_BAR_CLASSES];
extern unsigned char ag_bar_class[AG_ID_COUNT];
static inline void ag_bar_timed(ag_id_t id, uint64_t engine_ns, uint64_t driver_ns)
{
    ag_bar_time_t *b = &ag_bar_times[ag_bar_class[id]];
    atomic_fetch_add_explicit(&b->calls, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->engine_ns, engine_ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->driver_ns, driver_ns, memory_order_relaxed);
}
/* The application's capture begins (a capture hook's call, before the engines' barrier and the driver
 * call): counted whether the engines run or are paused, as every engine must pass its calls while one
 * lasts, whenever it began. 1 where the count moved (a begin); an end is counted once it returned
 * (ag_engine_capture_done). */
int ag_engine_capture_counted(ag_id_t id);
/* The capture hook's driver call returned r: a begin counted (counted) that began nothing goes back, an end
 * that ended a capture is counted now. */
void ag_engine_capture_done(ag_id_t id, CUresult r, int counted);
/* At exit: issues what is still deferred and stops deferring. */
void ag_engine_exit(void);
/* The CUPTI guard saw a driver call that no hook saw (on this thread, now, before it runs): deferred
 * work is issued first, and deferral stops for good (AUTOGRAPH_CUPTI=learn) or the learner cuts the
 * segment there (guard, always: CUPTI sees the call every time). */
void ag_engine_unhooked(void);
/* The CUPTI observer was released (a profiler took CUPTI): after calls past every hook, deferral stops. */
void ag_engine_guard_lost(void);
/* The calling thread exits (stats.c's thread destructor): what the shim keeps per thread is given back
 * or freed. */
void ag_engine_thread_exit(void);
void ag_engine_fork_prepare(void);
void ag_engine_fork_parent(void);
void ag_engine_fork_child(void);
/* Launches replayed from graphs, and graphs built, for the summary line. */
void ag_engine_summary(uint64_t *replayed, uint64_t *graphs);
/* Writes the "replay" member of the statistics JSON (launches: every kernel launch the hooks counted). */
void ag_engine_stats(FILE *f, uint64_t launches);

/* ---- shim/graph.c: the capture fence. ---- */
/* A context-wide sync, event record or event wait (cuCtxSynchronize and its _v2, cuCtxRecordEvent,
 * cuCtxWaitEvent, the green-context forms) breaks a capture under way in its context and fails, whatever the
 * capture's mode: around its driver call no graph build of ours captures (a build about to begin gives way,
 * its chunk runs eagerly; the call waits for the captures under way to end). Paired on the calling thread. */
void ag_capture_fence_enter(void);
void ag_capture_fence_leave(void);
/* Context-wide calls that waited for a capture of ours to end (the statistics). */
uint64_t ag_capture_fence_waits(void);
/* In a forked child: no capture of ours, nor any call, is under way there (their threads are the parent's),
 * so the counts start from zero; else a context-wide call of the child would wait for ever for a capture
 * the parent had under way at the fork. */
void ag_capture_fence_fork_child(void);

/* ---- cupti/observer.c: the CUPTI launch observer. ---- */
/* Subscribes if AUTOGRAPH_CUPTI asks for it ('learn': warms CUPTI, see observer.c); called after a
 * successful cuInit. Returns 0 or -errno. */
int ag_cupti_start(void);
/* The program captures or launches a graph of its own: a CUPTI still warm from cuInit is finalized. */
void ag_cupti_app_graph(void);
/* An engine begins to rest (no work repeated lately): a CUPTI still warm from cuInit is finalized. */
void ag_cupti_resting(void);
/* Around a graph launch's driver call, the shim's or the program's: no cuptiFinalize runs meanwhile once
 * a graph was launched under the kernel activity (observer.c, GR). Paired on the calling thread; nested
 * calls take nothing more. */
void ag_cupti_graph_enter(void);
void ag_cupti_graph_leave(void);
/* Launches CUPTI saw on API entry; -1 when the observer is not running. */
long long ag_cupti_launches(void);
/* AUTOGRAPH_CUPTI=learn: the engine learns (1: callbacks and timings on) or replays graphs (0: off). */
void ag_cupti_learning(int learning);
/* AUTOGRAPH_CUPTI as an AG_CUPTI_* value. */
int ag_cupti_mode(void);
/* CUPTI callbacks (the guard) are on now. */
int ag_cupti_attached(void);
/* CUPTI times kernels now: attached, in a mode that times (not guard), with AUTOGRAPH_CUPTI_TIMING=on and
 * the activity API enabled. */
int ag_cupti_timing(void);
/* The guard can watch work before it is deferred: 'learn' until CUPTI turned out unusable or went to a
 * profiler, 'guard' and 'always' while attached. The engine then defers only work seen under it. */
int ag_cupti_can_guard(void);
/* GPU time of the kernels of engine operations [op0, op1) from their timing records: 1 when at least
 * `kernels` records are in (sum in *ns), 0 when some are missing (lost, or not delivered yet). */
int ag_cupti_gpu_ns(uint64_t op0, uint64_t op1, uint32_t kernels, uint64_t *ns);
/* GPU time of the kernel of engine operation op: 1 with it in *ns, 0 when its record is not in. */
int ag_cupti_op_gpu_ns(uint64_t op, uint64_t *ns);
/* Hands over the kernel timing records CUPTI holds now (when timings are on). */
void ag_cupti_flush(void);
/* Before a fork: waits for a cuptiFinalize running in the background (AUTOGRAPH_CUPTI_DETACH). */
void ag_cupti_quiesce(void);
/* Writes the "cupti" member of the statistics JSON (the last member: no trailing comma). */
void ag_cupti_stats(FILE *f);

#endif
