/* The replay engine's state machine. Deferrable operations (records, record.h) are matched against the
 * variants the learner expects next (pattern.h); while one still matches they are held back (arguments
 * copied into an arena), and when a variant completes its graph (graph.h) is launched with the changed
 * arguments patched in. A mismatch, a barrier in the middle of a chunk, or any failure issues the held
 * operations eagerly, in order: deferral stays invisible. The hooks' entry points are at the end. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "graph.h"
#include "pattern.h"
#include "ptrset.h"
#include "record.h"

enum {
    FB_MISMATCH,
    FB_BARRIER,
    FB_STREAM,
    FB_UNDEFERRABLE,
    FB_CAPTURE_FAILED,
    FB_LAUNCH_FAILED,
    FB_PATCH_FAILED,
    FB_CONTEXT,
    FB_UNHOOKED,
    FB_STALLED,
    FB_WINDOW,
    FB_CACHE_FULL,
    FB_GAVE_WAY,
    FB_COUNT
};
static const char *const fb_names[FB_COUNT] = {"mismatch", "sync_mid_chunk", "other_stream", "undeferrable",
                                               "graph_build_failed", "graph_launch_failed", "graph_patch_failed",
                                               "other_context", "unhooked_call", "stalled",
                                               "other_window", "graph_cache_full", "graph_build_gave_way"};

/* AUTOGRAPH_CUPTI=learn: CUPTI is attached when work repeats that the guard has not watched yet (a
 * chunk seen the second time); a program that never repeats never attaches. Until a first window has
 * closed with nothing caught, only work seen under the guard is deferred; after that the program is
 * trusted (its loop went through the guard cleanly) and work the guard never watched may be deferred
 * too, as the guard would otherwise cost a window per new variant ('guard' mode watches everything). A
 * window ends at the first graph launch (callbacks make it cost 200-365 us) or after ATTACH_WINDOW
 * operations that guarded nothing new. CUPTI's set-up and tear-down cost the host tens of milliseconds on
 * the H200 (19-26 ms a window in a two-GPU process): a new window, for repeating work not watched yet,
 * opens only once ATTACH_BACKOFF times the last window's cost has passed since it closed, in any engine
 * (at most about 3% of the run however many contexts learn). Once the program is trusted a window
 * confirms it and times new segments for their chunk plans, and each one closed doubles that wait, up
 * to ATTACH_TRUSTED times the cost (about 0.4% of the run): a program whose variants keep coming
 * (DataParallel's threads in two contexts) paid 4 windows of 19-26 ms in a 1.1 s loop, and 2 in the whole
 * run since. (Without a cap, a run of 100 programs in a row got too few of them timed to plan.) */
#define ATTACH_WINDOW 1024
#define ATTACH_BACKOFF 32
#define ATTACH_TRUSTED 256
#define UNHOOKED_KIND 0x0b5e7eULL
/* Segments timed while CUPTI was attached, waiting for their kernels' records (delivered at detach). */
#define MAX_TIMING_REQS 8
/* Distinct events remembered as recorded since the last real barrier (E.seg_recs). */
#define SEG_RECORDS 64
/* Destroys of events a segment names that do not end it (E.seg_dead); the next one is a barrier. */
#define DEAD_MAX 256
/* Replay is sampled with CUDA events around graph launches: SAMPLE_LAUNCHES graph launches in a row,
 * the first window after SAMPLE_FIRST graph launches, then every SAMPLE_EVERY (two event records per
 * sampled launch, about 1-2 us each). */
#define SAMPLE_FIRST 64
#define SAMPLE_LAUNCHES 16
#define SAMPLE_EVERY 4096

/* The issuer's job states: none in flight, handed over, being issued (by the thread, or by a thread
 * that took it back), issued (its outcome not folded in yet); JOB_QUIT: the engine's context ended, and
 * its thread ends (a state, not a flag, so that the change itself wakes the sleeping thread). */
enum { JOB_IDLE, JOB_POSTED, JOB_RUNNING, JOB_DONE, JOB_QUIT };
/* A settling thread spins this long for the job's end before it sleeps (the issuer, for the next job:
 * AUTOGRAPH_ISSUER_SPIN_US; neither spins where the process may run on two CPUs or fewer). */
#define SETTLE_SPIN_NS 50000
/* a sampled eager launch's own time over 10 us, and over 1 ms, is counted apart: something it set off */
#define EAGER_OWN_LONG_NS 10000
#define EAGER_OWN_LONGER_NS 1000000

/* The clock reads inside a sampled launch (sample_ts below); the phases lie between them. */
enum { TS_RECORD, TS_LOCKED, TS_MATCHED, TS_COPIED, TS_COUNT };
/* Sleeps while *a is val, until woken (or timeout passes, where not NULL). */
static void futex_wait(atomic_int *a, int val, const struct timespec *timeout)
{
    syscall(SYS_futex, a, FUTEX_WAIT_PRIVATE, val, timeout, NULL, 0);
}

static void futex_wake(atomic_int *a, int n)
{
    syscall(SYS_futex, a, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* An engine's lock: a futex word (0 free, 1 taken, 2 taken with sleepers) taken by one compare-and-swap
 * inline. A launch held back takes and gives it once, and pthread_mutex_lock and _unlock cost it two
 * procedure-linkage lines, the C library's code and the thread's own descriptor line, all cold in an
 * interpreter's program (shim/internal.h, ag_hot). No holder waits on a condition, and none takes two. */
typedef struct {
    atomic_int v;
} ag_lock_t;

static __attribute__((noinline, cold)) void lock_wait(ag_lock_t *l, int c)
{
    if (c != 2)
        c = atomic_exchange_explicit(&l->v, 2, memory_order_acquire);
    while (c != 0) {
        futex_wait(&l->v, 2, NULL);
        c = atomic_exchange_explicit(&l->v, 2, memory_order_acquire);
    }
}

static inline void lock_take(ag_lock_t *l)
{
    int c = 0;
    if (AG_UNLIKELY(!atomic_compare_exchange_strong_explicit(&l->v, &c, 1, memory_order_acquire,
                                                             memory_order_relaxed)))
        lock_wait(l, c);
}

static inline void lock_give(ag_lock_t *l)
{
    if (AG_UNLIKELY(atomic_exchange_explicit(&l->v, 0, memory_order_release) == 2))
        futex_wake(&l->v, 1);
}

/* One engine per CUDA context (at most AG_MAX_ENGINES; a context past them runs eagerly): each has its
 * own lock, learner, held work and graphs (graph.c keeps its part per engine too). A thread works for
 * the engine of its current context (E below); calls that concern every context (a sync from a thread
 * with no context, a pause, the exit) visit the engines one at a time, never holding two locks. */
struct engine {
    _Alignas(64) ag_lock_t lock; /* the struct starts a line (see the hot fields) */
    int ready, disabled;
    int failed; /* disabled by an internal failure (disable), not by its context's end or the process's */
    /* more variants may follow the current chunk's start than are matched at once: its first operation
     * chooses the candidates (choose_by_first); read by every operation, so in the lock's line */
    int wide;
    CUcontext ctx;
    /* What every launch held back reads or writes, in the lock's line and the three after it:
     * prefetch_hot asks for them at once (an interpreter running between launches evicts them every
     * time). */
    int idx; /* in engines[] */
    int nmatch;
    int ntainted;
    int cupti_learning; /* CUPTI attached for learning (AUTOGRAPH_CUPTI=learn, see the guard below) */
    CUstream cur_stream; /* of the last operation; NULL before the first (records are never NULL) */
    ag_op_t *pending;
    uint32_t npending, cap_pending;
    unsigned char *arena;
    size_t arena_used, arena_cap;
    /* the candidates still matching the current chunk, with their signatures and lengths: matching a
     * launch reads no variant */
    ag_variant_t *match[AG_MAX_CANDIDATES];
    const uint64_t *msigs[AG_MAX_CANDIDATES];
    uint32_t mlen[AG_MAX_CANDIDATES];
    uint64_t ops, deferred, match_ns, match_timed, match_lock_ns;
    /* a sampled held-back launch by phase (ns): the record, the context query and lock, the candidates'
     * match, the copy into the pending list, the learner; each less one clock read */
    uint64_t match_phase_ns[TS_COUNT + 1], match_phased;
    /* how many times the pending list was issued (written under the lock, read without it) */
    uint64_t drains;
    /* the host clock at the current real segment's first operation (0: none yet), which also ends the
     * timing of the segment before it (profit_close) */
    uint64_t pf_t0;
    int seg_timed; /* the current segment is timed (see its other fields below) */
    /* end of the hot fields */
    ag_learner_t learner;
    ag_variant_t *cands[AG_MAX_CANDIDATES];
    int ncand;
    /* event records of the current chunk: which event, at which position (all of them held back while
     * npending > 0: a chunk defers from its start while it matches, and a fallback issues everything) */
    struct {
        CUevent ev;
        uint32_t pos;
    } recs[AG_MAX_RECORDS];
    int nrecs;
    /* events recorded since the last real barrier (every one of them issued there): a query or sync of
     * another event on a thread that issues work observes nothing held (ag_engine_observe); more than
     * SEG_RECORDS of them, and every query and sync is a barrier again until the next one */
    CUevent seg_recs[SEG_RECORDS];
    uint64_t seg_rec_ops[SEG_RECORDS]; /* E.ops at each one's latest record */
    int nseg_recs;
    /* events waited for since the last real barrier, the same way: a held wait refers to its event */
    CUevent seg_waits[SEG_RECORDS];
    int nseg_waits;
    /* the streams of the operations since the last real barrier (a graph holds AG_MAX_STREAMS at most) */
    CUstream seg_streams[AG_MAX_STREAMS];
    int nseg_streams;
    /* Events the program destroyed while held operations might name them (ag_engine_event_destroy),
     * destroyed by the engine once nothing is held (reap); seg_dead: destroys of events the segment named,
     * which do not end it (by the program's order, as every barrier, so learning and replay cut alike) */
    CUevent dead[DEAD_MAX];
    uint32_t ndead, seg_dead;
    /* the staging buffer of the blocking device-to-host copy that ended the graph just launched (its
     * caller copies out of it after the sync), or NULL */
    const void *copyout;

    /* Stream-ordered allocations the program holds (noted while the engine is on), and the frees of such
     * allocations held back with the pending work: each is issued right after the operations before it
     * (pos: how many were pending when it came), in order. */
    ag_ptrset_t async_ptrs;
    struct held_free {
        CUdeviceptr p;
        CUstream stream; /* as the program gave it */
        ag_id_t id;
        uint32_t pos;
    } *frees;
    uint32_t nfrees, cap_frees;
    uint64_t frees_held, frees_oom_released;
    /* The issuer (AUTOGRAPH_ISSUER=thread): a chunk completed by a launch has its graph patched and
     * launched by a thread of the engine's own, while the program's thread goes on. One job at a time,
     * with the buffers it holds (swapped with the engine's at the hand-over: the next chunk fills the
     * previous job's). Until it is issued it is held work: every path that could observe it, issue
     * anything after it or touch the graphs settles it first (settle), taking it back where the thread
     * has not begun it. */
    struct job {
        _Alignas(64) atomic_int state; /* JOB_* */
        atomic_int sleeping;           /* the thread waits on state (a post wakes it) */
        atomic_int waiters;            /* settling threads wait on state (the end wakes them) */
        ag_variant_t *v;
        ag_graph_t *g; /* where build: NULL until the job built it */
        int patch;  /* 0: a graph just built, nothing to patch */
        int build;  /* the job builds v's graph first (its chunk's second sighting), then launches it */
        int failed; /* its outcome: FB_CAPTURE_FAILED, FB_GAVE_WAY, FB_PATCH_FAILED or FB_LAUNCH_FAILED
                     * (issued eagerly), or 0 */
        uint32_t lost;     /* of those issued eagerly, the operations the driver refused (issue_graph) */
        CUresult lost_err; /* the first one's error */
        uint32_t kernels;
        ag_op_t *ops;
        uint32_t n, cap;
        unsigned char *arena;
        size_t arena_used, arena_cap;
        struct held_free *frees;
        uint32_t nfrees, cap_frees;
        uint64_t build_ns, patch_ns, launch_ns, host_ns; /* the issuer's time on it */
        uint64_t posted_t, start_ns; /* when it was handed over; how long until the issuer began it (0:
                                      * taken back) */
    } job;
    /* 1: the thread runs; -1: it could not start (inline from then on); -2: it ended with the context
     * (issuer_quit waits for issuer_gone, which the thread sets as it leaves) */
    int issuer;
    atomic_int issuer_gone;
    uint64_t jobs, jobs_taken_back, jobs_waited, job_wait_ns, issuer_ns, jobs_begun, job_start_ns, job_builds;
    /* Events the program has timed (given to cuEventElapsedTime): a record of one is a barrier, issued
     * at its place in the stream, not after the chunk's graph as the other held records are (which
     * would time the graph's end). Destroying an event forgets it. */
    ag_ptrset_t timed_events;
    uint64_t timed_records, event_destroys_passed;
    /* destroys of an event the segment named (no barrier since DEAD_MAX came): all, and those whose event
     * the engine destroyed later, after the held work that named it */
    uint64_t event_destroys_in_segment, event_destroys_after_issue;
    uint64_t chunks_without_nodes; /* chunks of event records and waits only, issued without a graph */
    uint64_t reissue_failures;     /* held operations the driver refused when they were re-issued */
    uint64_t stalls; /* held work the stall watcher issued (AUTOGRAPH_STALL_MS) */

    /* statistics (under the lock; deferred, match_ns and match_timed are with the hot fields) */
    uint64_t replayed, graph_launches, copies_out, d2h_pinned_held;
    /* pageable host-to-device sources snapshotted into the staging buffers, and their bytes */
    uint64_t staged_h2d, staged_h2d_bytes;
    /* syncs and queries of threads that issue no work (ag_engine_observe): passed untouched, and those
     * that had to issue held work first */
    uint64_t observer_passed, observer_flushes;
    /* of those threads' event queries, answered "not ready" while the record they ask about is held
     * (observer_not_ready) */
    uint64_t observer_not_ready;
    /* queries of threads that issue work, of events recorded since the last barrier DISTANT_OPS operations
     * ago or more: passed to the driver (the record was issued), and answered "not ready" (still held) */
    uint64_t distant_passed, distant_not_ready;
    /* "not ready" answers (either kind) given while the pending list is the one of drain nr_drains */
    uint64_t nr_drains;
    uint32_t nr_asked;
    /* event queries and syncs of threads that issue work, of events recorded before the last barrier */
    uint64_t old_event_passed;
    uint64_t fallbacks[FB_COUNT];
    uint64_t replay_host_ns;
    /* what a sampled interval measures of its own clock reads, subtracted from each sample (written once,
     * at init) */
    uint64_t timer_ns;
    /* host time by phase (ns): building graphs, patching, launching them, eager re-issue of held
     * operations, waiting for a graph that ends with a blocking copy */
    uint64_t build_ns, patch_ns, launch_ns, reissue_ns;
    atomic_ullong copy_wait_ns; /* measured outside the lock */
    atomic_ullong staged_d2h_bytes; /* copied out of a staging buffer after a blocking copy's wait (outside it) */
    ag_sampler_t eager_launches; /* the driver's time of sampled eager launches (outside the lock) */
    /* the last timed held-back launches (host_ns_per_match's samples, the match_timed-th at
     * match_timed % AG_SAMPLER_RING; under the lock), for their median: a mean that one preempted launch
     * in a hundred moves by its share of the time slice */
    uint32_t matched_ns[AG_SAMPLER_RING];
    /* the engine's own time for a launch it does not hold back, from its entry to the driver call
     * (sampled as host_ns_per_match is): what a program that never repeats pays per launch. Its mean
     * takes in what such a launch may set off (held work issued, a graph built, a CUPTI window opened:
     * milliseconds, once): the median, and the samples over EAGER_OWN_LONG_NS and EAGER_OWN_LONGER_NS
     * apart, tell the kinds apart (a sampled attach alone could move a mean over 148 samples by 56 us) */
    ag_sampler_t eager_own;
    atomic_ullong eager_own_long[2], eager_own_long_ns[2], eager_own_max;
    /* the CUPTI guard: attached while learning (AUTOGRAPH_CUPTI=learn; cupti_learning is with the hot
     * fields); deferral stops for good after a call no hook saw, in learn mode (detached during replay,
     * CUPTI could not see it again). guarded_at: operation count when the window last guarded new work;
     * guarded_seen: the learner's guarded_total then; window_from: its guarded_total when the window
     * opened; setup_ns: the attach and detach of its window (process-wide: g_window_*); windows: how
     * many this engine opened */
    uint64_t guarded_at, guarded_seen, window_from, setup_ns, windows;
    /* the engine's context ended (destroyed, or its device's primary context released or reset; the
     * runtime's release at exit counts too): its streams, events, graphs and staging buffers went with
     * it, and a later context may get its handle; the engine stops for good. dev: the context's device. */
    int ctx_ended;
    CUdevice dev;
    int guard_stopped;
    /* the current segment's timing: operations from seg_op0, host time from the first one, eager
     * kernels; timed (seg_timed, with the hot fields) while CUPTI was attached throughout and nothing in
     * it was deferred */
    uint64_t seg_op0, seg_t0;
    uint32_t seg_kernels;
    /* kernels issued eagerly through the engine (the rested ones never reach it); beside seg_kernels,
     * which the same launches write */
    uint64_t eager_kernels;
    /* seg_whole: the timed segment started at a barrier (not when CUPTI attached mid-segment);
     * window_whole: segments timed whole since the window opened (see hold_for_timing); window_early:
     * the window opened at a chunk's first sighting (AUTOGRAPH_WARMUP=1), in the program's first
     * iteration or so */
    int seg_whole, window_whole, window_early;
    struct {
        uint64_t seed, op0, op1, host_ns, t_end;
        uint32_t kernels;
    } treq[MAX_TIMING_REQS];
    int ntreq;
    /* replay sampling: events around SAMPLE_LAUNCHES graph launches (ev[2k] before, ev[2k+1] after) */
    struct {
        CUevent ev[2 * SAMPLE_LAUNCHES];
        int n, full, broken;
        uint64_t next_at, windows, launches;
        double busy_ms, span_ms;
    } S;
    /* signatures of operations that failed when issued: never held back */
    uint64_t tainted[16]; /* ntainted is with the hot fields */
    /* Resting (AUTOGRAPH_REST, ag_rest_segment): the current real segment (from the last real barrier;
     * virtual barriers do not end it) from operation rseg_op0, and how many of its operations were in
     * chunks seen before; while resting, the segments still to sit out (0: not resting) and the
     * operations left before the rest ends anyway (counted by the hooks) */
    uint64_t rseg_op0, rseg_repeated;
    uint32_t rest_after, rest_left;
    ag_rest_t rest;
    uint64_t rest_ended_by_ops, rested_segments;
    /* graphs built at a chunk's second sighting (a chunk a new plan cut, pattern.c) */
    uint64_t graphs_at_second;
    /* chunk starts where more variants could follow than are matched at once, and of them those whose
     * first operation began some (choose_by_first) */
    uint64_t wide_starts, wide_chosen;
    /* mismatches at a chunk's start, with nothing held: its first operation began none of the candidates */
    uint64_t starts_unmatched;
    atomic_llong rest_ops_left;
    /* Does the graph pay (AUTOGRAPH_PROBE, ag_profit_*): the current real segment's seed, operation and
     * deferral counts at its start, whether it runs eager by the verdict's choice (forced), and whether
     * anything made its time say nothing about graphs (a fallback, CUPTI, a virtual barrier, a rest);
     * the segment that ended last, timed at the next operation (pp_*). Statistics: probes started,
     * verdicts that left a segment eager or kept its graphs, sightings run eager by a verdict, kernels
     * launched by probes (pf_probing: the current segment is a probe). */
    int pf_on, pf_forced, pf_probing, pf_other;
    uint64_t pf_seed, pf_op0, pf_def0;
    int pp_open, pp_forced;
    ag_run_t pp_how;
    uint64_t pp_seed, pp_t0;
    /* ... and, for a modeled plan's trial (ag_learner_trial_time), its entry's seed, which plan it ran (-1:
     * no trial) and its operations */
    uint64_t pp_trial_seed, pp_ops;
    int pp_side;
    uint64_t pf_probes, pf_left_eager, pf_kept, pf_held, pf_probe_kernels;
    /* The pace of a replayed segment no timing planned (ag_learner_waited): the segment that ended at
     * this engine's last barrier, replayed whole, is weighed when the barrier's call returns (wt_armed;
     * no operation may have come since: pf_op0 is still the operation count then), from its seed and
     * operations, the host's time from its first operation to the barrier, and when the call went to the
     * driver. Barriers armed. */
    int wt_armed;
    uint64_t wt_seed, wt_ops, wt_host, wt_t;
    uint64_t wt_arms;
    /* model plans weighed against the default, with the graph launch cost assumed ([0]: too few timed
     * yet) or measured ([1]) */
    uint64_t plans_weighed[2];
};

/* Zero until made (engine_of sets each one up; all-zero is a free lock, for the fork handlers that lock
 * every slot): the array stays out of the library's file (about 80 KB each). */
static struct engine engines[AG_MAX_ENGINES];
/* engines made so far (each with its context set before it is counted) */
static atomic_int n_engines;
static pthread_mutex_t engines_lock = PTHREAD_MUTEX_INITIALIZER;
/* The engine this thread works for now: every entry selects it (use) before it reads E. */
AG_TLS ag_tl_t ag_tl = {.eng = &engines[0]};
#define eng (ag_tl.eng)
#define E (*eng)

static int engine_count(void)
{
    return atomic_load_explicit(&n_engines, memory_order_acquire);
}

/* Selects engine e for this thread (and the graph module's part of it); returns the one selected before. */
static struct engine *use(struct engine *e)
{
    struct engine *prev = eng;
    eng = e;
    ag_graph_use((unsigned)e->idx);
    return prev;
}

/* Process-wide, whichever engine set them: the program's own captures under way (every engine passes
 * its calls then), the CUPTI guard's findings (a call past every hook, a window that closed with none:
 * properties of the program, not of a context), and the engine whose segments CUPTI times (the one
 * that opened the learning window; in the modes that keep CUPTI attached, the first engine): kernel
 * records are tied to one engine's operation numbers. */
#define g_app_captures (ag_hot.app_captures)
#define g_pausing (ag_hot.pausing)
static int g_unhooked_seen, g_trusted;
static struct engine *g_timer;
static int g_window_close; /* another engine launched a graph while g_timer's window was open */
/* The host time (ns) from which a learning window may open (set as the last one, any engine's, closed),
 * and that wait in windows' costs (doubled at each window closed once the program is trusted, up to
 * ATTACH_TRUSTED) */
static uint64_t g_window_next, g_window_factor = ATTACH_BACKOFF;
static atomic_int g_watcher_started;

AG_TLS unsigned ag_rest_ops;

/* Clock reads of the sampled launch now in the engine: the lock held (host_ns_per_match_to_lock) and,
 * for one sampled launch in 4 (sample_phased, left out of host_ns_per_match: its four more clock reads
 * would weigh on it), its record made, its candidates matched, its copy made. */
static AG_TLS uint64_t sample_ts[TS_COUNT];
#define sample_phased (ag_tl.sample_phased)

/* E.drains + 1 of engine tl_hold_eng when this thread last held an operation back there: while its
 * drains has not moved on, that operation is still pending. */
#define tl_holds (ag_tl.holds)
#define tl_hold_eng (ag_tl.hold_eng)

static void note_hold(void)
{
    tl_holds = E.drains + 1;
    tl_hold_eng = eng;
}

/* Operations of timed segments one by one, for the modeled chunk plan (ag_plan_best): when each reached
 * the engine, how long its eager driver call took, and for all but kernels (whose GPU time CUPTI gives)
 * an estimate of its GPU time. Indexed by operation number; tag = number + 1. Written by the thread that
 * issues the operation (arrival under the lock, driver time just after it), read at resolve_timings. */
#define OPT_RING 4096
_Static_assert(OPT_RING >= AG_PLAN_MAX_OPS, "the ring holds every operation of a segment the model plans");
#define OPT_KERNEL UINT32_MAX
static struct {
    uint64_t tag, t;
    uint32_t drv_ns, est_ns;
} optimes[OPT_RING];
/* the timed operation this thread is about to issue (number + 1), 0 if none */
static AG_TLS uint64_t tl_timed_op;

/* Host time from operation r's arrival to `next` (the next operation's arrival, or the barrier's) outside
 * its eager driver call: the program's own work, the runtime's and the shim's. */
static uint64_t outside_driver_ns(const __typeof__(optimes[0]) *r, uint64_t next)
{
    return next > r->t + r->drv_ns ? next - r->t - r->drv_ns : 0;
}

/* A rough GPU time for a memory operation or event of a timed segment (ns): a few us to start, then the
 * bytes at H200 rates (device memory about 1-2 TB/s each way, the host link about 20 GB/s). */
static uint32_t est_gpu_ns(const ag_op_t *o)
{
    switch (o->kind) {
    case OP_KERNEL:
        return OPT_KERNEL;
    case OP_MEMSET:
        return (uint32_t)(1500 + (uint64_t)o->n * o->elem / 2000);
    case OP_COPY:
        return (uint32_t)(2000 + (uint64_t)o->n / 1000);
    case OP_H2D:
    case OP_D2H:
        return (uint32_t)(2000 + (uint64_t)o->n / 20);
    default:
        return 0;
    }
}

/* An internal failure: this context's engine stops (everything does where the driver itself lacks what
 * the engine needs, `all`), and the program goes on with plain launches. */
static void disable(const char *why, CUresult r, int all)
{
    E.disabled = 1;
    E.failed = 1;
    if (all)
        atomic_store(&ag_engine_on, 0);
    ag_log(AG_LOG_ERROR, "engine disabled%s (%s, CUDA error %d); the program goes on with plain launches",
           all ? "" : " for one context", why, (int)r);
}

#define LAUNCH_COST_SAMPLES 16 /* graph launches timed before their mean is the plan's graph launch cost */
static int launch_cost_measured(void)
{
    return E.graph_launches >= LAUNCH_COST_SAMPLES;
}

/* Timing request i operation by operation, as replay would take it (each operation's host time less its
 * eager driver call, plus what a matched launch costs), with the plan's parameters from this run's
 * measurements where there are enough (the H200's typical costs until then). NULL where an operation is
 * missing (the ring moved on, a kernel's record was lost) or the segment is too long to plan. */
static ag_optime_t *op_times(int i, ag_plan_params_t *p)
{
    uint64_t op0 = E.treq[i].op0, n = E.treq[i].op1 - op0;
    p->launch_ns = launch_cost_measured() ? (uint32_t)(E.launch_ns / E.graph_launches) : 6000;
    p->start_ns = 3000;
    p->graph_gpu_ns = 2000;
    p->chunk_max = E.learner.chunk_max;
    uint64_t match = E.match_timed >= 16 ? E.match_ns / E.match_timed : 300;
    if (!E.learner.model_plans || !n || n > AG_PLAN_MAX_OPS)
        return NULL;
    ag_optime_t *t = malloc(sizeof *t * n);
    for (uint64_t k = 0; t && k < n; k++) {
        uint64_t op = op0 + k;
        const __typeof__(optimes[0]) *r = &optimes[op % OPT_RING];
        uint64_t next = k + 1 < n ? optimes[(op + 1) % OPT_RING].t : E.treq[i].t_end, gpu = r->est_ns;
        if (r->tag != op + 1 || next < r->t || (r->est_ns == OPT_KERNEL && !ag_cupti_op_gpu_ns(op, &gpu))) {
            free(t);
            return NULL;
        }
        uint64_t own = outside_driver_ns(r, next) + match;
        t[k].host_ns = own > UINT32_MAX ? UINT32_MAX : (uint32_t)own;
        t[k].gpu_ns = gpu > UINT32_MAX ? UINT32_MAX : (uint32_t)gpu;
    }
    return t;
}

/* The modeled plan a segment just got, at debug level: "modeled plan for N operations: K chunks, ends
 * E1 E2 ... N". */
static void log_plan(uint64_t seed)
{
    if (!AG_LOG_ON(AG_LOG_DEBUG))
        return;
    const ag_seglen_t *sl = ag_learner_seglen(&E.learner, seed);
    if (!sl || !sl->nends)
        return;
    char ends[256];
    size_t o = 0;
    for (uint32_t k = 0; k < sl->nends && o + 12 < sizeof ends; k++)
        o += (size_t)snprintf(ends + o, sizeof ends - o, " %u", sl->ends[k]);
    ag_log(AG_LOG_DEBUG, "chunk plan for %u operations: %u chunks, ends%s%s%s", sl->plan_len, sl->nends, ends,
           o + 12 >= sizeof ends ? " ..." : "", sl->trial ? " (on trial against the default plan)" : "");
}

/* Kernel times of the segments timed while attached are in once CUPTI flushed its records: each one
 * tells the learner whether the segment's graph can pay, how far its chunk plan's tail shrinks, and, one
 * by one, where the modeled plan cuts it. */
static void resolve_timings(void)
{
    /* each request's kernel time (if its records are in), and its host time as replay takes it
     * (UINT64_MAX: not timed operation by operation) */
    uint64_t kgpu[MAX_TIMING_REQS], replay_host[MAX_TIMING_REQS];
    int known[MAX_TIMING_REQS];
    ag_optime_t *ts[MAX_TIMING_REQS];
    ag_plan_params_t ps[MAX_TIMING_REQS];
    for (int i = 0; i < E.ntreq; i++) {
        known[i] = ag_cupti_gpu_ns(E.treq[i].op0, E.treq[i].op1, E.treq[i].kernels, &kgpu[i]);
        ts[i] = known[i] ? op_times(i, &ps[i]) : NULL;
        replay_host[i] = ts[i] ? 0 : UINT64_MAX;
        for (uint64_t k = 0; ts[i] && k < E.treq[i].op1 - E.treq[i].op0; k++)
            replay_host[i] += ts[i][k].host_ns;
    }
    for (int i = 0; i < E.ntreq; i++) {
        /* a segment timed more than once (see hold_for_timing) is planned from its cheapest sighting: what
         * makes one dearer (CUPTI's first launches, a page fault, a preempted thread) is not replay's */
        int dearer = 0;
        for (int j = 0; j < E.ntreq && !dearer; j++)
            dearer = j != i && known[j] && E.treq[j].seed == E.treq[i].seed &&
                     E.treq[j].op1 - E.treq[j].op0 == E.treq[i].op1 - E.treq[i].op0 &&
                     (replay_host[j] < replay_host[i] || (replay_host[j] == replay_host[i] && j > i));
        if (!known[i] || dearer)
            continue;
        const ag_optime_t *t = ts[i];
        if (t && AG_LOG_ON(AG_LOG_DEBUG)) {
            uint64_t n = E.treq[i].op1 - E.treq[i].op0, host = 0, gpu = 0, big = 0, at = 0;
            for (uint64_t k = 0; k < n; k++) {
                host += t[k].host_ns, gpu += t[k].gpu_ns;
                if (t[k].host_ns > big)
                    big = t[k].host_ns, at = k;
            }
            ag_log(AG_LOG_DEBUG, "segment of %llu operations timed: host %.1f us (%.1f us as replay takes it, the "
                                 "most %.1f us at operation %llu), GPU %.1f us",
                   (unsigned long long)n, (double)E.treq[i].host_ns / 1e3, (double)host / 1e3, (double)big / 1e3,
                   (unsigned long long)at, (double)gpu / 1e3);
        }
        uint64_t planned = E.learner.segments_planned;
        ag_learner_timing(&E.learner, E.treq[i].seed, (uint32_t)(E.treq[i].op1 - E.treq[i].op0), kgpu[i],
                          E.treq[i].host_ns, t, &ps[i]);
        if (t && E.learner.model_chunks) {
            int measured = launch_cost_measured();
            E.plans_weighed[measured]++;
            ag_log(AG_LOG_DEBUG, "plans compared: modeled %u chunks %.1f us, default %u chunks %.1f us, margin %.1f us "
                                 "(a graph launch %.1f us, %s)",
                   E.learner.model_chunks, (double)E.learner.model_ns / 1e3, E.learner.default_chunks,
                   (double)E.learner.default_ns / 1e3, (double)E.learner.model_margin_ns / 1e3,
                   (double)ps[i].launch_ns / 1e3, measured ? "as measured" : "assumed: too few graph launches timed yet");
        }
        if (E.learner.segments_planned != planned)
            log_plan(E.treq[i].seed);
    }
    for (int i = 0; i < E.ntreq; i++)
        free(ts[i]);
    E.ntreq = 0;
}

/* Variants found guarded since the last look (here, or while the learner picked candidates): an open
 * window goes on while it guards new work. */
static void note_guarded(void)
{
    if (E.learner.guarded_total == E.guarded_seen)
        return;
    E.guarded_seen = E.learner.guarded_total;
    if (E.cupti_learning)
        E.guarded_at = E.ops;
}

/* This engine's segments are the ones CUPTI times now (g_timer; none where the window times no kernels:
 * AUTOGRAPH_CUPTI_TIMING=off, guard mode, a libcupti without the activity API). */
static int timing_here(void)
{
    return __atomic_load_n(&g_timer, __ATOMIC_RELAXED) == eng && ag_cupti_timing();
}

/* A new segment starts (after a barrier, real or virtual): timed if CUPTI is attached for this engine. */
static void segment_begin(void)
{
    E.seg_op0 = E.ops;
    E.seg_t0 = 0;
    E.seg_kernels = 0;
    E.seg_timed = timing_here();
    E.seg_whole = 1;
}

/* This engine's window closed at now (g_timer is still this engine's: one writer at a time): the next may
 * open g_window_factor times this window's cost later, a factor that doubles at each window closed once
 * the program is trusted, up to ATTACH_TRUSTED. */
static void window_closed(uint64_t now)
{
    uint64_t factor = __atomic_load_n(&g_window_factor, __ATOMIC_RELAXED);
    __atomic_store_n(&g_window_next, now + factor * E.setup_ns, __ATOMIC_RELAXED);
    if (g_trusted && factor < ATTACH_TRUSTED)
        __atomic_store_n(&g_window_factor, 2 * factor, __ATOMIC_RELAXED);
}

/* Attaches CUPTI (learning) or detaches it, and keeps the window bookkeeping. A window is one engine's
 * (g_timer): it opens only where no other engine's is open. */
static void cupti_learning(int on)
{
    if (on) {
        struct engine *none = NULL;
        if (!__atomic_compare_exchange_n(&g_timer, &none, eng, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            return;
    }
    uint64_t t0 = ag_now_ns();
    ag_cupti_learning(on);
    uint64_t t1 = ag_now_ns();
    E.pf_other = 1; /* attaching and detaching take milliseconds */
    E.setup_ns = on ? t1 - t0 : E.setup_ns + (t1 - t0);
    if (!on) {
        /* a window that made work deferrable and caught nothing: the program is trusted */
        if (!g_unhooked_seen && E.learner.guarded_total > E.window_from)
            g_trusted = 1;
        window_closed(t1);
        __atomic_store_n(&g_window_close, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&g_timer, NULL, __ATOMIC_RELEASE);
    }
    E.cupti_learning = on;
    ag_learner_watch(&E.learner, ag_cupti_attached());
    if (on) {
        E.windows++;
        E.guarded_at = E.ops;
        E.guarded_seen = E.window_from = E.learner.guarded_total; /* earlier ones are not this window's */
        segment_begin(); /* the segment is timed from here on (the part before was not watched) */
        E.seg_whole = 0;
        E.window_whole = 0;
    } else {
        E.seg_timed = 0;
        resolve_timings(); /* detaching delivered every record CUPTI had */
    }
}

/* At debug level, a timed segment (or its part after CUPTI attached) as the host spent it: in the driver's
 * calls and outside them (the program's own work, the runtime's and the shim's learning), the dearest
 * driver call, and the host time outside the driver from each operation to the next: the median and the
 * largest (whether the time outside is spread over every operation or spent at a few; the median of the
 * first 512). */
static void log_timed_segment(uint64_t now)
{
    enum { OUT_MAX = 512 };
    uint32_t out[OUT_MAX];
    uint64_t n = E.ops - E.seg_op0, drv = 0, big = 0, at = 0, known = 0, obig = 0, oat = 0, nout = 0;
    for (uint64_t op = E.seg_op0; op < E.ops; op++) {
        const __typeof__(optimes[0]) *r = &optimes[op % OPT_RING];
        if (r->tag != op + 1)
            continue;
        known++;
        drv += r->drv_ns;
        if (r->drv_ns > big)
            big = r->drv_ns, at = op - E.seg_op0;
        uint64_t next = op + 1 < E.ops ? optimes[(op + 1) % OPT_RING].t : now;
        if (op + 1 < E.ops && optimes[(op + 1) % OPT_RING].tag != op + 2)
            continue;
        uint64_t o = outside_driver_ns(r, next);
        if (o > obig)
            obig = o, oat = op - E.seg_op0;
        if (nout < OUT_MAX)
            out[nout++] = o > UINT32_MAX ? UINT32_MAX : (uint32_t)o;
    }
    ag_log(AG_LOG_DEBUG, "%s of %llu operations timed: host %.1f us, %.1f us of it in %llu driver calls (the "
                         "dearest %.1f us at operation %llu); outside them per operation: median %.2f us, the "
                         "most %.1f us at operation %llu", E.seg_whole ? "segment" : "segment's part",
           (unsigned long long)n, (double)(now - E.seg_t0) / 1e3, (double)drv / 1e3, (unsigned long long)known,
           (double)big / 1e3, (unsigned long long)at, (double)ag_median_u32(out, (uint32_t)nout) / 1e3,
           (double)obig / 1e3, (unsigned long long)oat);
}

/* A real barrier ends the segment: if it was timed, its kernels' records are asked for. */
static void segment_end(void)
{
    if (E.seg_timed && E.seg_t0 && AG_LOG_ON(AG_LOG_DEBUG))
        log_timed_segment(ag_now_ns());
    /* Only whole segments: the part after CUPTI attached mid-segment may be all GPU work (an optimizer's
     * kernels at the end of a step, say) and would judge a host-bound segment GPU-bound. */
    if (!E.seg_timed || !E.seg_kernels || !E.seg_t0 || !E.seg_whole)
        return;
    E.window_whole++;
    if (E.ntreq == MAX_TIMING_REQS) {
        memmove(&E.treq[0], &E.treq[1], sizeof E.treq[0] * (MAX_TIMING_REQS - 1)); /* the oldest goes */
        E.ntreq--;
    }
    E.treq[E.ntreq].seed = E.learner.seg_seed;
    E.treq[E.ntreq].op0 = E.seg_op0;
    E.treq[E.ntreq].op1 = E.ops;
    E.treq[E.ntreq].t_end = ag_now_ns();
    E.treq[E.ntreq].host_ns = E.treq[E.ntreq].t_end - E.seg_t0;
    E.treq[E.ntreq].kernels = E.seg_kernels;
    E.ntreq++;
    if (ag_cupti_mode() == AG_CUPTI_ALWAYS && E.ntreq == MAX_TIMING_REQS) {
        ag_cupti_flush(); /* never detached in this mode: ask for the records now and then */
        resolve_timings();
    }
}

/* A learning window may open now: learn mode, no window open in any engine, CUPTI able to guard, and the
 * wait after the last window over. */
static int window_may_open(void)
{
    return !E.cupti_learning && ag_cupti_mode() == AG_CUPTI_LEARN && !__atomic_load_n(&g_timer, __ATOMIC_RELAXED) &&
           ag_cupti_can_guard() && ag_now_ns() >= __atomic_load_n(&g_window_next, __ATOMIC_RELAXED);
}

/* A chunk closed as variant v (learned or seen again): watched whole by the guard it becomes
 * deferrable; seen again before the guard watched it, the guard is attached for its next sighting. */
static void sighted(ag_variant_t *v)
{
    if (!v)
        return;
    if (v->seen >= 2)
        E.rseg_repeated += v->len;
    int guarded = ag_learner_guarded(&E.learner, v);
    note_guarded();
    if (!guarded && (v->seen >= 2 || E.learner.warmup <= 1) && window_may_open()) {
        cupti_learning(1);
        E.window_early = E.cupti_learning && v->seen < 2;
    }
}

/* Right after a barrier (real or virtual), before the next segment's first operation: where that
 * segment's first chunk comes to its warm-up-th sighting unwatched, the window opens now rather than
 * after that chunk (sighted), so that the sighting is watched whole and the work can be held back at its
 * next one. That segment is left untimed: CUPTI's first launches after it attaches cost the host several
 * times a later one's (launch_bound's first iteration under it on the H200: 3.1 ms of host time, 1.1 ms
 * as replay would take it, against 0.19-0.37 ms in the next), which made its replay look host-paced and gave it a
 * plan of three chunks (1.33x slower a step than its ramp). A segment never timed is held and timed at
 * its next sighting instead (hold_for_timing), as with the window opened after the chunk; without the
 * timing (AUTOGRAPH_CUPTI_TIMING=off), or where the segment was timed before, that next sighting is
 * replayed (launch_bound's learning on the H200: 1.6 ms less). */
static void window_ahead(void)
{
    if (!window_may_open() || !ag_learner_expects_unguarded(&E.learner))
        return;
    cupti_learning(1); /* (its segment_begin: no operation of the segment came yet) */
    E.window_early = 0;
    E.seg_timed = 0;
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

/* Line-aligned: records are a multiple of 64 bytes long (with CUDA 12 and 13 headers), so that a
 * kernel's (AG_OP_KERNEL_SIZE, what is written when it is held back) fills one line. */
static void watcher_start(void);

static ag_op_t *pending_slot(void)
{
    if (E.npending == E.cap_pending) {
        if (!atomic_exchange(&g_watcher_started, 1))
            watcher_start(); /* the first operation held back (the list grows from nothing) */
        uint32_t cap = E.cap_pending ? E.cap_pending * 2 : 256;
        ag_op_t *p = aligned_alloc(64, (sizeof *p * cap + 63) & ~(size_t)63);
        if (!p)
            return NULL;
        if (E.npending)
            memcpy(p, E.pending, sizeof *p * E.npending);
        free(E.pending);
        E.pending = p;
        E.cap_pending = cap;
    }
    return &E.pending[E.npending];
}

/* The held operations, as the graph module sees them. */
static ag_chunk_t chunk(void)
{
    ag_chunk_t c = {E.pending, E.npending, E.arena, E.arena_used};
    return c;
}

/* Issues the held frees that came before held operation `upto` (all of them: the count of operations),
 * from *next on. A failure is logged: the allocation was the program's and live when its free came. In
 * the relaxed capture mode: later than the program's call, a free may meet another thread's global-mode
 * capture that the call did not (held just before that capture began, issued after: the GPU's
 * capture_rules table refuses cuMemFreeAsync there, and breaks that capture). */
static void issue_frees(const struct held_free *frees, uint32_t nfrees, uint32_t *next, uint32_t upto)
{
    if (*next >= nfrees || frees[*next].pos > upto)
        return;
    CUstreamCaptureMode mode = ag_relaxed_begin();
    for (; *next < nfrees && frees[*next].pos <= upto; (*next)++) {
        const struct held_free *h = &frees[*next];
        CUresult r = ((ag_fn_cuMemFreeAsync_t)ag_real[h->id])(h->p, h->stream);
        if (r != CUDA_SUCCESS)
            AG_LOG_CAPPED(AG_LOG_WARN, "issuing a held-back stream-ordered free failed (CUDA error %d)", (int)r);
    }
    ag_relaxed_end(mode);
}

/* Under the lock, where nothing is held (no operation pending, no job in flight): the events the program
 * destroyed while held work named them are destroyed now, after that work reached the driver. */
static void reap(void)
{
    if (AG_LIKELY(!E.ndead) || E.npending || atomic_load_explicit(&E.job.state, memory_order_acquire) != JOB_IDLE)
        return;
    /* later than the program's call: maybe beside a capture that call did not meet */
    CUstreamCaptureMode mode = ag_relaxed_begin();
    for (uint32_t i = 0; i < E.ndead; i++) {
        CUresult r = REAL(cuEventDestroy_v2)(E.dead[i]);
        if (r != CUDA_SUCCESS)
            AG_LOG_CAPPED(AG_LOG_WARN, "destroying an event after the held work that named it failed (CUDA error %d)",
                          (int)r);
    }
    ag_relaxed_end(mode);
    E.ndead = 0;
}

/* The pending list was issued (or handed to the issuer): empty it, and count one more drain (enter's
 * lock-free test). */
static void drained(void)
{
    E.nfrees = 0;
    E.npending = 0;
    E.arena_used = 0;
    __atomic_store_n(&E.drains, E.drains + 1, __ATOMIC_RELEASE);
}

/* The pending list reached the driver (not handed to the issuer: post_job drains alone, and its job's
 * fold reaps): emptied, and the events kept for it destroyed. */
static void issued(void)
{
    drained();
    reap();
}

/* Issues held operations (with their held frees) eagerly, in order. The number of them the driver refused
 * (the program was told each succeeded: its work is lost), the first one's error in *err. */
static uint32_t reissue(const ag_op_t *ops, uint32_t n, unsigned char *arena, const struct held_free *frees,
                        uint32_t nfrees, CUresult *err)
{
    uint32_t f = 0, lost = 0;
    for (uint32_t i = 0; i < n; i++) {
        issue_frees(frees, nfrees, &f, i);
        if (ops[i].kind == OP_D2H && ops[i].stage >= 0)
            continue; /* blocking, and always the last: its caller issues it after leaving the lock */
        CUresult r = ag_issue(&ops[i], ops[i].stream, arena);
        if (r != CUDA_SUCCESS) {
            char d[512];
            AG_LOG_CAPPED(AG_LOG_ERROR, "re-issuing a held operation failed (CUDA error %d), its work is lost: %s",
                          (int)r, ag_op_describe(&ops[i], d, sizeof d));
            if (!lost++)
                *err = r;
        }
        ag_stage_issued_op(&ops[i]); /* before the application's next operations on the stream */
    }
    issue_frees(frees, nfrees, &f, n);
    return lost;
}

/* Under the lock, after held work was re-issued: where the driver refused some of it, the program's results
 * may already differ from a plain run's, and this engine holds nothing back from now on. */
static void reissued(uint32_t lost, CUresult err)
{
    if (!lost)
        return;
    E.reissue_failures += lost;
    disable("held work failed when it was re-issued", err, 0);
}

/* Under the lock: the pending list issued eagerly, in order (reissue), emptied, and any refusal acted on. */
static void reissue_pending(void)
{
    CUresult err = CUDA_SUCCESS;
    uint32_t lost = reissue(E.pending, E.npending, E.arena, E.frees, E.nfrees, &err);
    ag_stage_done();
    issued();
    reissued(lost, err);
}

static void settle(void);

/* Issues the held operations eagerly, in order. They were validated by earlier eager runs; an error
 * now is one CUDA would report asynchronously, at the next sync, so it is logged and the next sync
 * reports the sticky error if there is one. */
static void flush_eager(int reason)
{
    settle(); /* a job in flight goes first, even where nothing is held */
    if (!E.npending)
        return;
    if (reason >= 0)
        E.fallbacks[reason]++;
    E.pf_other = 1;
    uint64_t t0 = ag_now_ns();
    reissue_pending();
    E.reissue_ns += ag_now_ns() - t0;
}

/* ---- replay sampling ---- */

/* Folds a completed window into the sums once its last event is done (never waits for it). */
static void sample_collect(void)
{
    if (!E.S.full)
        return;
    ag_guard++;
    CUstreamCaptureMode mode = ag_relaxed_begin(); /* a query CUDA may refuse beside a capture */
    float span = 0;
    CUresult r = REAL(cuEventQuery)(E.S.ev[2 * SAMPLE_LAUNCHES - 1]);
    if (r == CUDA_SUCCESS)
        r = REAL(cuEventElapsedTime_v2)(&span, E.S.ev[0], E.S.ev[2 * SAMPLE_LAUNCHES - 1]);
    double busy = 0;
    for (int i = 0; r == CUDA_SUCCESS && i < SAMPLE_LAUNCHES; i++) {
        float ms = 0;
        r = REAL(cuEventElapsedTime_v2)(&ms, E.S.ev[2 * i], E.S.ev[2 * i + 1]);
        busy += ms;
    }
    ag_relaxed_end(mode);
    ag_guard--;
    if (r == CUDA_ERROR_NOT_READY)
        return; /* asked again at the next graph launch */
    if (r == CUDA_SUCCESS && span > 0) {
        E.S.windows++;
        E.S.launches += SAMPLE_LAUNCHES;
        E.S.busy_ms += busy < span ? busy : span;
        E.S.span_ms += span;
    }
    E.S.full = 0;
    E.S.next_at = E.graph_launches + SAMPLE_EVERY;
}

/* Before a graph launch onto `s`: the slot of this launch in the sample window (its start event
 * recorded), or -1 when this launch is not sampled. */
static int sample_begin(CUstream s)
{
    sample_collect();
    if (E.S.broken || E.S.full || E.graph_launches < E.S.next_at)
        return -1;
    ag_guard++;
    CUresult r = CUDA_SUCCESS;
    if (!E.S.ev[0]) {
        CUstreamCaptureMode mode = ag_relaxed_begin();
        for (int i = 0; r == CUDA_SUCCESS && i < 2 * SAMPLE_LAUNCHES; i++)
            r = ag_drv.cuEventCreate(&E.S.ev[i], CU_EVENT_DEFAULT);
        ag_relaxed_end(mode);
    }
    if (r == CUDA_SUCCESS)
        r = REAL(cuEventRecord)(E.S.ev[2 * E.S.n], s);
    ag_guard--;
    if (r != CUDA_SUCCESS) {
        E.S.broken = 1; /* sampling is only for the statistics: never tried again */
        return -1;
    }
    return E.S.n;
}

static void sample_end(int k, CUstream s, CUresult launched)
{
    if (k < 0)
        return;
    ag_guard++;
    CUresult r = launched == CUDA_SUCCESS ? REAL(cuEventRecord)(E.S.ev[2 * k + 1], s) : launched;
    ag_guard--;
    if (r != CUDA_SUCCESS) {
        E.S.n = 0; /* this window starts over */
        return;
    }
    if (++E.S.n == SAMPLE_LAUNCHES) {
        E.S.n = 0;
        E.S.full = 1;
    }
}

static void post_job(ag_variant_t *v, ag_graph_t *g, int patch);
static int issuer_ready(void);

/* A graph launch now would be one of the replay sampling's (or collect a window): made by the program's
 * thread, where the sample's events are. */
static int sampling(void)
{
    return !E.S.broken && (E.S.n > 0 || E.S.full || E.graph_launches >= E.S.next_at);
}

/* The current segment, replayed, keeps the GPU busy (its timed sighting said so, model_plan): a graph
 * handed to the issuer would reach the GPU later than one the program's thread launches now, and the
 * GPU would wait for it. */
static int gpu_paced(void)
{
    const ag_seglen_t *sl = ag_learner_seglen(&E.learner, E.learner.seg_seed);
    return sl && sl->gpu_paced;
}

/* The pending operations read or write one of the shim's staging buffers: a pageable source's snapshot
 * (the graph module keeps which buffers held copies read), or this thread's buffer for a blocking read,
 * which is always the last operation. */
static int staged(void)
{
    const ag_op_t *last = E.npending ? &E.pending[E.npending - 1] : NULL;
    return ag_stage_held() || (last && last->kind == OP_D2H && last->stage >= 0);
}

/* Before a graph launch: this engine's learning window closes (callbacks make a graph launch cost
 * 200-365 us, counted in setup_ns); another engine's closes at that engine's next operation, and while
 * its kernel activity is on the chunk runs eagerly (1): a graph launched under the activity must not be
 * launched again during the window's cuptiFinalize (observer.c, GR), which would then hold every graph
 * launch off while it runs (2-3.5 ms on the H200). */
static int window_before_graph(void)
{
    if (E.cupti_learning)
        cupti_learning(0);
    else if (__atomic_load_n(&g_timer, __ATOMIC_RELAXED) && ag_cupti_mode() == AG_CUPTI_LEARN) {
        __atomic_store_n(&g_window_close, 1, __ATOMIC_RELAXED);
        return ag_cupti_timing();
    }
    return 0;
}

/* Patches graph g with chunk c's arguments (where patch) and launches it, then records the chunk's events
 * after it and issues its held frees; where the patch or the launch fails, issues the chunk's operations
 * eagerly instead, in order. own: on the program's thread (the issuer's jobs are never sampled nor
 * staged): the launch may be sampled, and the staging buffers it read are fenced. took: the time spent
 * patching, launching, and on the rest (ns). 0, or the fallback reason (FB_PATCH_FAILED or
 * FB_LAUNCH_FAILED) that graph_failed takes; *lost: the operations re-issued in vain (reissue), the first's error in
 * *err. */
static int issue_graph(ag_graph_t *g, const ag_chunk_t *c, const struct held_free *frees, uint32_t nfrees,
                       int patch, int own, uint64_t took[3], uint32_t *lost, CUresult *err)
{
    uint64_t t0 = ag_now_ns();
    int failed = patch && ag_graph_patch(g, c) != 0 ? FB_PATCH_FAILED : 0;
    uint64_t t1 = ag_now_ns();
    CUstream s = ag_graph_stream(g);
    if (!failed) {
        int k = own ? sample_begin(s) : -1;
        CUresult r = ag_graph_launch(g, c);
        sample_end(k, s, r);
        if (r != CUDA_SUCCESS) {
            AG_LOG_CAPPED(AG_LOG_WARN, "launching a graph failed (CUDA error %d); issuing its work eagerly", (int)r);
            failed = FB_LAUNCH_FAILED;
        }
    }
    uint64_t t2 = ag_now_ns();
    *lost = 0;
    if (failed) {
        *lost = reissue(c->ops, c->n, c->arena, frees, nfrees, err);
    } else {
        if (own)
            ag_stage_issued(c, s); /* the chunk's other streams wait for the graph on this one */
        /* The application's event records last, after our own sample event and staging fences, and its held
         * frees among them in its order (on the graph's streams, which follow it: ag_graph_launch): a sync on
         * a record, then a query of its stream, must find the stream done, as without the shim. A free
         * issued after a record it came before left work behind that record (found by a random program
         * whose stream query after its event's then answered "not ready" on fakecuda only under the shim). */
        CUresult rr = CUDA_SUCCESS;
        uint32_t f = 0;
        for (uint32_t i = 0; i < c->n; i++)
            if (c->ops[i].kind == OP_EVREC) {
                issue_frees(frees, nfrees, &f, i);
                if (rr == CUDA_SUCCESS)
                    rr = ag_issue(&c->ops[i], c->ops[i].stream, c->arena);
            }
        issue_frees(frees, nfrees, &f, c->n);
        if (rr != CUDA_SUCCESS)
            AG_LOG_CAPPED(AG_LOG_WARN, "recording the application's events after a graph failed (CUDA error %d)", (int)rr);
    }
    took[0] = t1 - t0;
    took[1] = t2 - t1;
    took[2] = ag_now_ns() - t2;
    return failed;
}

/* The fallback of a build that failed (ag_graph_build's error): one that gave way to a context-wide call, or
 * one CUDA refused. */
static int build_fallback(int err)
{
    return err == -EAGAIN ? FB_GAVE_WAY : FB_CAPTURE_FAILED;
}

/* Under the lock: variant v's graph failed (issue_graph's reason, or an issuer's build: FB_CAPTURE_FAILED,
 * or FB_GAVE_WAY where it gave way to a context-wide call) and its work ran eagerly. Its exec may hold a mix
 * of old and new arguments now: it is released (a variant whose launch or build failed is never graphed
 * again; one whose build gave way is built at a later sighting). */
static void graph_failed(ag_variant_t *v, int reason)
{
    E.fallbacks[reason]++;
    E.pf_other = 1;
    ag_graph_release(v, NULL);
    if (reason == FB_LAUNCH_FAILED || reason == FB_CAPTURE_FAILED)
        v->ungraphable = 1;
}

/* The pending operations are exactly variant v: launch its graph (built now if it has none). may_post:
 * the chunk was completed by an operation (not at a barrier, where the host is about to observe it): the
 * issuer may patch and launch it (AUTOGRAPH_ISSUER), unless the replay is sampled, the chunk uses staging
 * buffers, or the GPU sets the segment's pace. Called settled (its callers, barrier and op_arrive's chunk
 * end, settle first: the job before, and the graphs it uses, are the issuer's until then). */
static void complete(ag_variant_t *v, int may_post)
{
    uint64_t t0 = ag_now_ns();
    uint32_t nodes = 0;
    for (uint32_t i = 0; i < E.npending && !nodes; i++)
        nodes = E.pending[i].kind != OP_EVREC && E.pending[i].kind != OP_EVWAIT;
    if (!nodes) {
        /* Event records and waits only: their graph would hold no node (the waits are issued before it,
         * the records after it), and its launch would only add a graph's host and GPU cost. They are issued
         * as they are, in order (PyTorch's autograd: a record per gradient on one stream, then a wait for
         * each on another, two such chunks a step in the model whose forward and backward it graphs). */
        if (AG_UNLIKELY(AG_LOG_ON(AG_LOG_TRACE)))
            ag_log(AG_LOG_TRACE, "engine %d: chunk of %u event operations complete%s: issued without a graph", E.idx,
                   E.npending, may_post ? "" : " at a barrier");
        reissue_pending();
        E.chunks_without_nodes++;
        ag_learner_succeeded(v);
        E.replay_host_ns += ag_now_ns() - t0;
        return;
    }
    ag_graph_t *g = v->graph;
    ag_chunk_t c = chunk();
    int fresh = 0;
    int mode = ag_opt(AG_OPT_ISSUER)->num;
    int post = may_post && mode != AG_ISSUER_INLINE && !sampling() && !staged() && !gpu_paced() && issuer_ready();
    if (!g && !ag_graph_admit(v)) {
        flush_eager(FB_CACHE_FULL); /* the cache is full of graphs in use: this one waits its turn */
        return;
    }
    int window = window_before_graph(); /* (a learning window closes before the graph is built) */
    /* A graph to build is built by the issuer where it takes the chunk (then launched there), while the
     * program goes on to the next chunk: a build costs 50-300 us on the H200, several times what issuing
     * the chunk's launches costs, and a program whose shapes come back only now and then (text generation,
     * batches of many sizes) builds a graph for many of its sightings. */
    if (!g && (window || !post || mode == AG_ISSUER_LAUNCH)) {
        int err = ag_graph_build(&c, v, &g);
        if (err) {
            if (err != -EAGAIN) /* (one that gave way is built at a later sighting) */
                v->ungraphable = 1;
            flush_eager(build_fallback(err));
            return;
        }
        v->graph = g;
        fresh = 1;
        E.build_ns += ag_now_ns() - t0;
    }
    E.graphs_at_second += (fresh || !g) && v->seen <= 2;
    if (window) {
        flush_eager(FB_WINDOW); /* (its graph stays, for the next sighting) */
        return;
    }
    if (AG_UNLIKELY(AG_LOG_ON(AG_LOG_TRACE))) {
        uint32_t k = 0;
        for (uint32_t i = 0; i < E.npending; i++)
            k += E.pending[i].kind == OP_KERNEL;
        ag_log(AG_LOG_TRACE, "engine %d: chunk of %u operations (%u kernels, %d streams) complete%s: its graph %s",
               E.idx, E.npending, k, ag_graph_chunk_streams(&c), may_post ? "" : " at a barrier",
               !g ? "to be built and launched by the issuer" : fresh ? "built and launched" : "launched");
    }
    if (post) {
        post_job(v, g, g && !fresh);
        ag_learner_succeeded(v);
        E.replay_host_ns += ag_now_ns() - t0;
        return;
    }
    uint64_t took[3];
    uint32_t lost;
    CUresult err = CUDA_SUCCESS;
    int failed = issue_graph(g, &c, E.frees, E.nfrees, !fresh, 1, took, &lost, &err);
    E.patch_ns += took[0];
    E.launch_ns += took[1];
    if (failed) {
        graph_failed(v, failed);
        E.reissue_ns += took[2];
        ag_stage_done();
        issued();
        reissued(lost, err);
        return;
    }
    E.graph_launches++;
    for (uint32_t i = 0; i < E.npending; i++) {
        E.replayed += E.pending[i].kind == OP_KERNEL;
        if (E.pending[i].kind == OP_D2H && E.pending[i].stage >= 0)
            E.copyout = ag_graph_d2h_dst(g, i);
    }
    issued();
    ag_learner_succeeded(v);
    E.replay_host_ns += ag_now_ns() - t0;
}

/* A detached thread of the shim's running fn(arg), with none of the program's signals (stack: its size, 0
 * for the default). pthread_create's result. */
static int start_thread(void *(*fn)(void *), void *arg, size_t stack)
{
    pthread_t t;
    pthread_attr_t attr;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the program's signals are not for this thread */
    int r = pthread_attr_init(&attr);
    if (r == 0) {
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (stack)
            pthread_attr_setstacksize(&attr, stack);
        r = pthread_create(&t, &attr, fn, arg);
        pthread_attr_destroy(&attr);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}

/* ---- the issuer (AUTOGRAPH_ISSUER=thread) ---- */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

/* Spinning pays only where another CPU is free to run the other side (set once, at the first issuer's
 * start, from the CPUs the process may run on); issuer_spin_ns: AUTOGRAPH_ISSUER_SPIN_US. */
static int spin_ok = -1;
static uint64_t issuer_spin_ns;
static pthread_once_t spin_once = PTHREAD_ONCE_INIT;

static void spin_init(void)
{
    cpu_set_t cpus;
    long n = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : sysconf(_SC_NPROCESSORS_ONLN);
    issuer_spin_ns = (uint64_t)ag_opt(AG_OPT_ISSUER_SPIN_US)->num * 1000;
    spin_ok = n > 2;
}

/* Builds job j's graph where it has none yet, then patches and launches it (issue_graph; the rest is folded
 * in by settle). Reads and writes only j, its variant's graph fields (ag_graph_build) and the engine's graph
 * state, which the program's threads leave alone until the job is settled. A build that fails issues the
 * chunk's operations as they are, in order, as complete does. */
static void run_job(struct job *j)
{
    ag_chunk_t c = {j->ops, j->n, j->arena, j->arena_used};
    uint64_t took[3] = {0, 0, 0};
    j->build_ns = 0;
    if (j->build) {
        uint64_t t0 = ag_now_ns();
        int err = ag_graph_build(&c, j->v, &j->g);
        j->build_ns = ag_now_ns() - t0;
        if (err) {
            j->failed = build_fallback(err);
            j->lost = reissue(j->ops, j->n, j->arena, j->frees, j->nfrees, &j->lost_err);
            took[2] = ag_now_ns() - t0 - j->build_ns;
        }
    }
    if (j->g)
        j->failed = issue_graph(j->g, &c, j->frees, j->nfrees, j->patch, 0, took, &j->lost, &j->lost_err);
    j->patch_ns = took[0];
    j->launch_ns = took[1];
    j->host_ns = j->build_ns + took[0] + took[1] + took[2];
}

/* Under the lock, the job issued (JOB_DONE): its outcome into the engine's counts; a failed one's graph
 * released (its exec may hold a mix of old and new arguments) and, where the launch failed, its variant
 * never graphed again, as complete does. */
static void fold_job(void)
{
    struct job *j = &E.job;
    E.build_ns += j->build_ns;
    E.patch_ns += j->patch_ns;
    E.launch_ns += j->launch_ns;
    E.issuer_ns += j->host_ns;
    if (j->build && j->g) /* the variant's graph from now on (one that could not be built: graph_failed) */
        j->v->graph = j->g;
    j->build = 0;
    if (j->start_ns) {
        E.jobs_begun++;
        E.job_start_ns += j->start_ns;
        j->start_ns = 0;
    }
    if (j->failed) {
        E.graph_launches--;
        E.replayed -= j->kernels;
        graph_failed(j->v, j->failed);
        reissued(j->lost, j->lost_err);
        j->lost = 0;
    }
    j->v = NULL;
    j->g = NULL;
    atomic_store_explicit(&j->state, JOB_IDLE, memory_order_relaxed);
    reap();
}

static void settle_slow(int st)
{
    struct job *j = &E.job;
    CUcontext cur = NULL;
    if (st == JOB_QUIT)
        return; /* nothing in flight, nor ever again */
    if (st == JOB_POSTED && ag_drv.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == E.ctx &&
        atomic_compare_exchange_strong(&j->state, &st, JOB_RUNNING)) {
        /* not begun: taken back, and issued here as complete would have */
        ag_hook_depth++; /* the work is the program's, seen by our hooks */
        run_job(j);
        ag_hook_depth--;
        E.jobs_taken_back++;
    } else if (st != JOB_DONE) {
        uint64_t t0 = ag_now_ns();
        atomic_fetch_add(&j->waiters, 1);
        while ((st = atomic_load(&j->state)) != JOB_DONE) {
            if (spin_ok > 0 && ag_now_ns() - t0 < SETTLE_SPIN_NS)
                cpu_relax();
            else
                futex_wait(&j->state, st, NULL);
        }
        atomic_fetch_sub(&j->waiters, 1);
        E.jobs_waited++;
        E.job_wait_ns += ag_now_ns() - t0;
    }
    fold_job();
}

/* Under the lock: the job in flight, if any, is issued when this returns and its outcome folded in.
 * Where the issuer has not begun it and the calling thread's context is the engine's, the calling thread
 * takes it back and issues it; otherwise it waits for the issuer. */
static void settle(void)
{
    int st = atomic_load_explicit(&E.job.state, memory_order_acquire);
    if (AG_UNLIKELY(st != JOB_IDLE))
        settle_slow(st);
}

/* Engine e holds work: operations held back, or a job not yet settled (read without its lock). */
static int holding(const struct engine *e)
{
    int st = atomic_load_explicit(&e->job.state, memory_order_relaxed);
    return __atomic_load_n(&e->npending, __ATOMIC_RELAXED) > 0 || (st != JOB_IDLE && st != JOB_QUIT);
}

static void *issuer_main(void *arg)
{
    struct engine *e = arg;
    use(e);
    ag_hook_depth++; /* what it issues is the program's work, seen by our hooks (the CUPTI guard) */
    ag_thread_relaxed(); /* every call of this thread is the shim's own */
    struct job *j = &e->job;
    uint64_t last = ag_now_ns();
    int in_ctx = 0;
    for (;;) {
        int st = atomic_load(&j->state);
        if (st == JOB_QUIT)
            break;
        if (st != JOB_POSTED) {
            if (spin_ok > 0 && ag_now_ns() - last < issuer_spin_ns) {
                cpu_relax();
                continue;
            }
            atomic_store(&j->sleeping, 1);
            st = atomic_load(&j->state);
            if (st != JOB_POSTED)
                futex_wait(&j->state, st, NULL);
            atomic_store(&j->sleeping, 0);
            continue;
        }
        if (!atomic_compare_exchange_strong(&j->state, &st, JOB_RUNNING))
            continue; /* taken back */
        uint64_t begun = ag_now_ns();
        j->start_ns = begun > j->posted_t ? begun - j->posted_t : 1;
        /* Made current at the first job, when the context is certainly alive: one ends only after the
         * barrier before its destroy, which settles the job. */
        if (!in_ctx && !(in_ctx = ag_drv.cuCtxPushCurrent_v2(e->ctx) == CUDA_SUCCESS))
            AG_LOG_CAPPED(AG_LOG_WARN, "the issuer thread cannot make its context current: its graph launches fail "
                                       "(and their work runs eagerly)");
        run_job(j);
        atomic_store(&j->state, JOB_DONE);
        if (atomic_load(&j->waiters))
            futex_wake(&j->state, INT32_MAX);
        last = ag_now_ns();
    }
    /* its context ended (whatever it had current is gone with it; the thread's exit drops the rest) */
    ag_hook_depth--;
    atomic_store(&e->issuer_gone, 1);
    futex_wake(&e->issuer_gone, 1);
    return NULL;
}

/* Under the lock, settled, the engine's context ended: its issuer thread, if any, has left when this
 * returns (it leaves at once, polling or asleep, and needs no lock to; waited for 100 ms at most). */
static void issuer_quit(void)
{
    int idle = JOB_IDLE;
    if (E.issuer <= 0 || !atomic_compare_exchange_strong(&E.job.state, &idle, JOB_QUIT))
        return;
    futex_wake(&E.job.state, INT32_MAX);
    E.issuer = -2;
    struct timespec ms = {0, 1000000};
    for (int w = 0; w < 100 && !atomic_load(&E.issuer_gone); w++)
        futex_wait(&E.issuer_gone, 0, &ms);
}

/* Under the lock: the engine's issuer thread, started in its context (1), or -1 where it cannot be (the
 * program's thread issues its graphs from then on). */
static int issuer_start(void)
{
    pthread_once(&spin_once, spin_init);
    int r = start_thread(issuer_main, eng, 0);
    if (r != 0)
        AG_LOG_CAPPED(AG_LOG_WARN, "cannot start the issuer thread (error %d): graphs are launched inline", r);
    return r == 0 ? 1 : -1;
}

/* Under the lock: the engine's issuer thread runs (started at the first hand-over); 0 where it cannot be
 * started, or its context ended (the program's thread issues its graphs from then on). */
static int issuer_ready(void)
{
    if (!E.issuer)
        E.issuer = issuer_start();
    return E.issuer > 0;
}

/* Hands the held chunk, variant v with graph g (patch: g needs the chunk's arguments; NULL: the issuer
 * builds it first), to the issuer (issuer_ready), and empties the pending list into the previous job's
 * buffers. Called settled (no job in flight). */
static void post_job(ag_variant_t *v, ag_graph_t *g, int patch)
{
    struct job *j = &E.job;
    uint32_t kernels = 0;
    for (uint32_t i = 0; i < E.npending; i++)
        kernels += E.pending[i].kind == OP_KERNEL;
#define SWAP(a, b)                                                                                     \
    do {                                                                                               \
        __typeof__(a) t_ = (a);                                                                        \
        (a) = (b);                                                                                     \
        (b) = t_;                                                                                      \
    } while (0)
    SWAP(j->ops, E.pending);
    SWAP(j->cap, E.cap_pending);
    SWAP(j->arena, E.arena);
    SWAP(j->arena_cap, E.arena_cap);
    SWAP(j->frees, E.frees);
    SWAP(j->cap_frees, E.cap_frees);
#undef SWAP
    j->n = E.npending, j->arena_used = E.arena_used, j->nfrees = E.nfrees; /* drained() empties the engine's */
    j->v = v, j->g = g, j->patch = patch, j->build = g == NULL, j->failed = 0, j->kernels = kernels;
    E.job_builds += g == NULL;
    E.graph_launches++;
    E.replayed += kernels;
    E.jobs++;
    drained();
    j->posted_t = ag_now_ns();
    atomic_store(&j->state, JOB_POSTED);
    if (atomic_load(&j->sleeping))
        futex_wake(&j->state, 1);
}

/* ---- the state machine ---- */

/* A learning window's first whole segment, if that segment was never timed, runs eager to its end: a
 * graph would stop its timing (the window closes at the first graph launch), and only whole segments are
 * timed (segment_end); the modeled plan needs one whole sighting timed operation by operation. A window
 * opened at a chunk's first sighting (AUTOGRAPH_WARMUP=1) holds its first two: the program's second
 * iteration, the first one whole under it, can cost several times a later one's host time as replay
 * takes it (launch_bound on the H200: 896 us against 217; 2.4 ms against 1.4 in all), which judged its
 * replay host-paced and cut it 1.47x slower than the plan of a later sighting; resolve_timings plans
 * from the cheaper one. */
static int hold_for_timing(void)
{
    if (!E.cupti_learning || !E.seg_timed || !E.seg_whole || E.window_whole >= (E.window_early ? 2 : 1))
        return 0;
    const ag_seglen_t *sl = ag_learner_seglen(&E.learner, E.learner.seg_seed);
    /* the length its point's plan expects can be planned, and nothing was timed there yet */
    return sl && sl->expect_real && sl->expect <= AG_PLAN_MAX_OPS && !sl->gpu_ns_per_op;
}

/* E.cands' first n are the chunk's candidates, all still matching. */
static void set_candidates(int n)
{
    E.ncand = n;
    memcpy(E.match, E.cands, sizeof E.cands);
    for (int i = 0; i < n; i++) {
        E.msigs[i] = E.cands[i]->sigs;
        E.mlen[i] = E.cands[i]->len;
    }
    E.nmatch = n;
}

static void refresh_candidates(void)
{
    E.learner.require_guard = (uint8_t)(ag_cupti_can_guard() && !g_trusted);
    int n = E.guard_stopped || E.pf_forced || hold_for_timing() ? 0 : ag_learner_candidates(&E.learner, E.cands);
    E.wide = n < 0;
    set_candidates(n < 0 ? 0 : n);
}

/* The chunk's first operation (signature sig) arrives where more variants may follow its start than are
 * matched at once (a batch padded to one of many sizes): those that begin with it are the candidates.
 * Until then none were expected, and nothing was held back. */
static void choose_by_first(uint64_t sig)
{
    E.wide = 0;
    if (E.learner.chunk_pos == 0 && !E.npending) {
        set_candidates(ag_learner_candidates_first(&E.learner, E.cands, sig));
        E.wide_starts++;
        E.wide_chosen += E.ncand > 0;
    }
}

/* At a chunk's start, its candidates chosen (choose_by_first): whether one begins with an operation of
 * signature sig. */
static int expected_first(uint64_t sig)
{
    for (int i = 0; i < E.nmatch; i++)
        if (E.mlen[i] && E.msigs[i][0] == sig)
            return 1;
    return 0;
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

/* AUTOGRAPH_LOG=trace: what broke the match (where, against how many candidates, which operation came
 * and which one the first candidate's graph holds there). */
static void describe_op(const ag_op_t *o, char *buf, size_t cap)
{
    if (!o) {
        snprintf(buf, cap, "a barrier");
        return;
    }
    const char *name = NULL;
    if (o->kind == OP_KERNEL) {
        ag_guard++;
        name = ag_func_name(o->f, -1);
        ag_guard--;
    }
    const char *hook = o->id < AG_ID_COUNT ? ag_hook_names[o->id] : "?";
    if (o->kind == OP_KERNEL)
        snprintf(buf, cap, "%s %.60s grid %u,%u,%u block %u,%u,%u on stream %p", hook, name ? name : "", o->grid[0],
                 o->grid[1], o->grid[2], o->block[0], o->block[1], o->block[2], (void *)o->stream);
    else
        snprintf(buf, cap, "%s (kind %d) of %zu bytes on stream %p", hook, (int)o->kind, (size_t)o->n,
                 (void *)o->stream);
}

static void trace_mismatch(const ag_op_t *o, const ag_variant_t *first, uint32_t pos, int ncand, const char *what)
{
    char came[224], expected[224];
    describe_op(o, came, sizeof came);
    const ag_op_t *x = first ? ag_graph_op(first->graph, pos) : NULL;
    if (x)
        describe_op(x, expected, sizeof expected);
    else
        snprintf(expected, sizeof expected, "%s", first && first->graph ? "its end" : "(no graph)");
    ag_log(AG_LOG_TRACE, "engine %d: %s at chunk position %u (%d candidates, the first %u long, seen %u), segment "
                         "operation %llu: came %s; expected %s", E.idx, what, pos, ncand, first ? first->len : 0,
           first ? (unsigned)first->seen : 0, (unsigned long long)(E.ops - E.seg_op0), came, expected);
}

/* What was expected did not come. Counted whenever candidates were expected, also when nothing was
 * held back yet (a new shape at a chunk's start). */
static void fallback(int reason)
{
    if (E.ncand)
        E.fallbacks[reason]++;
    E.pf_other = 1;
    flush_eager(-1);
    ag_learner_failed(&E.learner, E.cands, E.ncand);
    if (E.learner.period)
        ag_learner_unlock_period(&E.learner);
    E.nmatch = E.ncand = E.wide = 0;
}

/* ---- the stall watcher ---- */

static int own_ctx(void);
static void own_ctx_end(int pushed);

/* Held work waits for the program's next call. A program that waits for a kernel's write to memory it
 * reads directly (zero-copy, a flag a kernel sets), making no CUDA call until it sees it, would wait
 * forever. A thread of the shim's looks at every engine every half period: held work, and no operation
 * (E.ops) and no drain (E.drains) since its last look, means nothing came for at least half a period,
 * and at its next such look a whole one: then the held work is issued as at any fallback. It reads
 * those counters without the lock (a stale value only delays it by a look) and decides again under it. */
static void *watcher_main(void *arg)
{
    (void)arg;
    ag_thread_relaxed(); /* what it issues is held work, later than the program's calls (record.h) */
    uint64_t period_ns = (uint64_t)ag_opt(AG_OPT_STALL_MS)->num * 1000000ull / 2;
    struct {
        uint64_t ops, drains;
        int quiet;
    } seen[AG_MAX_ENGINES];
    for (int i = 0; i < AG_MAX_ENGINES; i++)
        seen[i].ops = seen[i].drains = UINT64_MAX, seen[i].quiet = 0;
    for (;;) {
        struct timespec ts = {(time_t)(period_ns / 1000000000ull), (long)(period_ns % 1000000000ull)};
        while (nanosleep(&ts, &ts) != 0)
            ;
        if (!atomic_load_explicit(&ag_engine_on, memory_order_relaxed) && engines[0].disabled)
            return NULL; /* the shim is off for good */
        for (int i = 0, n = engine_count(); i < n; i++) {
            struct engine *e = &engines[i];
            uint64_t ops = __atomic_load_n(&e->ops, __ATOMIC_RELAXED), drains = __atomic_load_n(&e->drains, __ATOMIC_ACQUIRE);
            int held = holding(e);
            seen[i].quiet = held && ops == seen[i].ops && drains == seen[i].drains ? seen[i].quiet + 1 : 0;
            seen[i].ops = ops, seen[i].drains = drains;
            if (seen[i].quiet < 2)
                continue;
            seen[i].quiet = 0;
            use(e);
            lock_take(&E.lock);
            settle(); /* the issuer's job, at least, is issued then */
            if (!E.disabled && E.npending && E.ops == ops && E.drains == drains) {
                ag_hook_depth++; /* the held work is the program's: not calls past every hook */
                int pushed = own_ctx();
                E.stalls++;
                AG_LOG_CAPPED(AG_LOG_INFO, "held work waited %lld ms with no call of the program: issued",
                              (long long)ag_opt(AG_OPT_STALL_MS)->num);
                /* the program waits at this point by other means: its candidates back off (2, 4, 8 ...
                 * times the warm-up before they are held again), so a wait that recurs costs a stall now
                 * and then, not every time */
                ag_learner_stalled(&E.learner, E.match, E.nmatch);
                fallback(FB_STALLED);
                own_ctx_end(pushed);
                ag_hook_depth--;
            }
            lock_give(&E.lock);
        }
    }
}

/* Under the lock. Where no thread can be started, held work waits for the program's next call, as before
 * the watcher existed. */
static void watcher_start(void)
{
    if (ag_opt(AG_OPT_STALL_MS)->num <= 0)
        return;
    int r = start_thread(watcher_main, NULL, 256 * 1024);
    if (r != 0)
        AG_LOG_CAPPED(AG_LOG_WARN, "cannot start the stall watcher (error %d): held work waits for the next call", r);
}

/* ---- resting ---- */

#define REST_MIN_OPS 4

/* Under the lock, nothing pending, at a barrier: the next n segments (or n times twice the operations
 * of the one just ended, in all, if barriers stop coming) go straight to the driver. */
static void rest_begin(uint32_t n, uint64_t seg_ops)
{
    E.rest_left = n;
    /* nothing is held back while resting: no segment is renamed (ops reaching the engine then would be matched
     * against the new name's candidates while the calls passing it overtook them) */
    E.learner.rename_to[0] = E.learner.rename_to[1] = 0;
    uint64_t per = seg_ops > 64 ? seg_ops : 64;
    atomic_store_explicit(&E.rest_ops_left, (long long)(2 * per * n), memory_order_relaxed);
    E.nmatch = E.ncand = E.wide = 0;
    E.seg_timed = 0;
    E.pp_open = 0; /* the segments sat out would be timed with the one before them */
    /* A learning window would watch nothing the engine sees, while CUPTI's kernel records slow the rested
     * kernels (by about a third on the H200); the next window waits as usual. */
    if (E.cupti_learning)
        cupti_learning(0);
    ag_cupti_resting(); /* a CUPTI still warm is finalized (it slows each kernel launch a little) */
    atomic_store(&ag_engine_on, AG_ENGINE_RESTING);
    AG_LOG_CAPPED(AG_LOG_DEBUG, "no work repeated lately: resting for %u segments (rest %llu)", n,
                  (unsigned long long)E.rest.rests);
}

static void rest_end(void)
{
    E.rest_left = 0;
    E.pf_other = 1; /* a segment partly sat out */
    int resting = AG_ENGINE_RESTING;
    atomic_compare_exchange_strong(&ag_engine_on, &resting, AG_ENGINE_ACTIVE); /* unless disabled since */
}

/* A hook passed AG_REST_TICK operations while resting: the rest ends once its operations are used up. */
void ag_engine_rest_tick(void)
{
    ag_rest_ops = 0;
    struct engine *e = &engines[0]; /* the one that rests (only a single engine does) */
    if (atomic_fetch_sub_explicit(&e->rest_ops_left, AG_REST_TICK, memory_order_relaxed) > AG_REST_TICK)
        return;
    struct engine *prev = use(e);
    lock_take(&E.lock);
    if (E.rest_left) {
        rest_end(); /* learning goes on from here, mid-segment */
        E.rest_ended_by_ops++;
    }
    lock_give(&E.lock);
    use(prev);
}

/* ---- does the graph pay (AUTOGRAPH_PROBE) ---- */

/* A replayed sighting of a segment whose modeled plan is on trial took ns (AUTOGRAPH_CHUNK_PLAN=model). */
static void trial_time(uint64_t ns)
{
    uint32_t ratio = 0;
    int v = ag_learner_trial_time(&E.learner, E.pp_trial_seed, (uint32_t)E.pp_ops, E.pp_side, ns, &ratio);
    if (v)
        ag_log(AG_LOG_DEBUG, "the modeled chunk plan of the segment of %llu operations, tried against the default "
               "plan over %d pairs of replayed sightings, took %.1f%% of the default's time (median): %s",
               (unsigned long long)E.pp_ops, AG_TRIAL_PAIRS, ratio * 100.0 / 1024,
               v > 0 ? "kept" : "dropped, the default plan from its next sighting on");
}

/* The segment that ended last is timed up to now (the first operation after its barrier). */
static void profit_close(uint64_t now)
{
    E.pp_open = 0;
    if (E.pp_side >= 0 && E.pp_how == AG_RUN_REPLAYED && !E.pp_forced)
        trial_time(now - E.pp_t0);
    if (!E.pf_on)
        return;
    ag_profit_t *p = ag_learner_profit(&E.learner, E.pp_seed);
    if (!p)
        return; /* its entry went to another segment meanwhile */
    int probe = E.pp_forced && E.pp_how == AG_RUN_EAGER && !p->eager && p->probe_out;
    uint32_t plain = p->plain;
    int verdict = ag_profit_end(p, E.pp_how, E.pp_forced, now - E.pp_t0);
    if (probe && !verdict && AG_LOG_ON(AG_LOG_DEBUG)) {
        uint64_t e, r;
        ag_profit_medians(p, &e, &r);
        ag_log(AG_LOG_DEBUG, "a probe ran %.1f us plain against %.1f us replayed (median; %.1f us plain before the "
               "first replay): %s", (double)(now - E.pp_t0) / 1e3, (double)r / 1e3, (double)plain / 1e3,
               p->series ? "the series goes on" : "the graphs pay, the next series after a quiet stretch");
    }
    if (verdict && AG_LOG_ON(AG_LOG_DEBUG)) {
        const ag_seglen_t *s = ag_learner_seglen(&E.learner, E.pp_seed); /* the entry p belongs to */
        uint64_t e, r;
        ag_profit_medians(p, &e, &r);
        ag_log(AG_LOG_DEBUG, "the segment of %u operations (ending at a %s barrier) ran %.1f us plain and %.1f us "
               "replayed (medians): %s", s->length, s->real_end ? "real" : "virtual", (double)e / 1e3,
               (double)r / 1e3, verdict > 0 ? "plain from now on, for a hold" : "its graphs kept");
    }
    if (verdict > 0)
        E.pf_left_eager++;
    else if (verdict < 0)
        E.pf_kept++;
}

/* At a barrier, after the segment's last chunk went: how it ran, timed at the next operation. */
static void profit_end(void)
{
    uint64_t ops = E.ops - E.pf_op0;
    int side = E.learner.ended_side;
    if (!E.pf_on && side < 0)
        return;
    if (!ops) {
        /* Nothing ran: the segment before it stays open (its host wait may be at this barrier); a probe
         * spent on nothing is asked for again. */
        ag_profit_t *p = E.pf_forced ? ag_learner_profit(&E.learner, E.pf_seed) : NULL;
        if (p)
            ag_profit_end(p, AG_RUN_OTHER, 1, 0);
        return;
    }
    uint64_t deferred = E.deferred - E.pf_def0;
    E.pp_how = E.pf_other || ag_cupti_attached() ? AG_RUN_OTHER
               : deferred == ops                ? AG_RUN_REPLAYED
               : !deferred                      ? AG_RUN_EAGER
                                                : AG_RUN_OTHER;
    E.pp_open = 1;
    E.pp_seed = E.pf_seed;
    E.pp_t0 = E.pf_t0;
    E.pp_forced = E.pf_forced;
    E.pp_trial_seed = E.learner.ended_seed;
    E.pp_side = side;
    E.pp_ops = ops;
}

/* A real segment starts: whether it runs eager (a probe, or the verdict's hold). */
static void profit_begin(void)
{
    /* also without probes: the segment's replay is weighed at its barrier (arm_wait) */
    E.pf_seed = E.learner.seg_seed;
    E.pf_op0 = E.ops;
    E.pf_def0 = E.deferred;
    E.pf_t0 = 0; /* read at its first operation */
    E.pf_other = ag_cupti_mode() == AG_CUPTI_LEARN && ag_cupti_attached(); /* a window: attached now */
    E.pf_forced = E.pf_probing = 0;
    if (!E.pf_on)
        return;
    ag_profit_t *p = E.pf_other || E.guard_stopped ? NULL : ag_learner_profit(&E.learner, E.pf_seed);
    if (p && ag_profit_start(p)) {
        E.pf_forced = 1;
        E.pf_probing = !p->eager;
        if (p->eager)
            E.pf_held++;
        else
            E.pf_probes++;
    }
}

/* Held work is issued in the engine's context: a barrier can come from a thread where another one is
 * current, or none (a polling thread, a wait from another context, a thread that switched device while
 * holding work). Returns 1 where the engine's context was pushed (own_ctx_end pops it). */
static int own_ctx(void)
{
    CUcontext cur = NULL;
    if (!E.npending || (ag_drv.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == E.ctx))
        return 0;
    return ag_drv.cuCtxPushCurrent_v2(E.ctx) == CUDA_SUCCESS;
}

static void own_ctx_end(int pushed)
{
    CUcontext popped;
    if (pushed)
        (void)ag_drv.cuCtxPopCurrent_v2(&popped);
}

/* ---- the pace of a replayed segment (ag_learner_waited) ---- */

AG_TLS void *ag_wait_engine;
static AG_TLS uint64_t tl_wait_t; /* the wt_t this thread armed */
/* The barrier under way on this thread is a hook's whose call is timed when it returns (ag_engine_barrier,
 * ag_engine_observe, a blocking device-to-host copy): no other barrier arms the wait. */
static AG_TLS int tl_may_wait;

/* At a barrier, once the segment that ends there (it started at seed, its first operation at t0) has
 * all gone to the GPU: replayed whole (every operation held back and launched from graphs, nothing
 * eager, no CUPTI window), with its pace still to be weighed, the call that follows is timed. */
static void arm_wait(uint64_t seed, uint64_t t0)
{
    uint64_t ops = E.ops - E.pf_op0;
    E.wt_armed = 0;
    if (!tl_may_wait || !ops || !t0 || E.deferred - E.pf_def0 != ops || E.pf_other ||
        !ag_learner_weighs_wait(&E.learner, seed, (uint32_t)ops))
        return;
    E.wt_armed = 1;
    E.wt_arms++;
    E.wt_seed = seed;
    E.wt_ops = ops;
    E.wt_t = tl_wait_t = ag_now_ns();
    E.wt_host = E.wt_t - t0;
    ag_wait_engine = eng;
}

/* The barrier's call armed by this thread returned: how long it blocked is weighed (unless an operation
 * came since, or another thread's barrier armed the engine anew; profit_begin set pf_op0 right after the
 * arming, and every barrier since re-armed or disarmed). */
void ag_engine_waited(void)
{
    uint64_t now = ag_now_ns();
    struct engine *e = ag_wait_engine, *prev = use(e);
    ag_wait_engine = NULL;
    lock_take(&E.lock);
    if (E.wt_armed && E.wt_t == tl_wait_t) {
        E.wt_armed = 0;
        if (E.ready && !E.disabled && E.pf_op0 == E.ops) {
            ag_log(AG_LOG_DEBUG, "the segment of %llu operations, replayed: %.1f us of host work, then %.1f us "
                   "waited at its barrier", (unsigned long long)E.wt_ops, (double)E.wt_host / 1e3,
                   (double)(now - E.wt_t) / 1e3);
            if (ag_learner_waited(&E.learner, E.wt_seed, (uint32_t)E.wt_ops, E.wt_host, now - E.wt_t)) {
                ag_log(AG_LOG_DEBUG, "%d such waits in a row: the GPU sets its pace (the ramp, no tail)",
                       AG_PACED_WAITS);
                log_plan(E.wt_seed);
            }
        }
    }
    lock_give(&E.lock);
    use(prev);
}

/* A barrier: an observing call, a stream switch, or an undeferrable operation. Called where the thread's
 * current context is the engine's (the entries that took enter()); barrier_in_ctx from anywhere else. */
static void barrier(uint64_t kind, int reason)
{
    settle();
    if (E.rest_left) {
        E.rested_segments++;
        if (--E.rest_left)
            return; /* this segment was sat out too */
        rest_end(); /* the next one is learned */
    }
    uint64_t content = E.learner.content; /* of the segment ending here (since a virtual barrier, if any) */
    uint64_t seed = E.learner.seg_seed, seg_t0 = E.pf_t0; /* its start */
    E.nseg_recs = E.nseg_waits = E.nseg_streams = 0; /* everything recorded or waited for so far is issued below */
    E.seg_dead = 0;
    ag_variant_t *c = E.npending ? completing(1) : NULL;
    if (!c && E.ncand)
        fallback(reason); /* operations were expected (held back or not yet), a barrier came */
    segment_end();
    ag_variant_t *v = ag_learner_barrier(&E.learner, kind, 0);
    if (AG_UNLIKELY(AG_LOG_ON(AG_LOG_TRACE)))
        ag_log(AG_LOG_TRACE, "engine %d: barrier %llx (%s) after segment operation %llu: point %016llx", E.idx,
               (unsigned long long)kind,
               kind >= 0xba77ULL && kind < 0xba77ULL + AG_ID_COUNT ? ag_hook_names[kind - 0xba77ULL] : "-",
               (unsigned long long)(E.ops - E.seg_op0), (unsigned long long)E.learner.seg_seed);
    E.nrecs = 0;
    sighted(v);
    segment_begin();
    if (c) {
        if (v == c)
            complete(c, 0);
        else
            flush_eager(reason); /* the learner saw other work than the candidate: cannot be */
    }
    profit_end();
    /* after the segment that ended was judged (an attached CUPTI makes it one that cannot be compared),
     * and where no chunk completed here (its graph launch would close the window); a window opened here
     * leaves the barrier's wait unweighed (arm_wait: attaching took host time before its call) */
    if (!c)
        window_ahead();
    arm_wait(seed, seg_t0);
    profit_begin();
    refresh_candidates();
    /* A segment of a few operations says nothing either way (graphs of so few could not pay); one
     * repeated where chunks of REST_MIN_OPS operations or more were seen before (a deferred chunk was). */
    uint64_t seg_ops = E.ops - E.rseg_op0;
    int repeated = E.rseg_repeated >= REST_MIN_OPS;
    E.rseg_op0 = E.ops;
    E.rseg_repeated = 0;
    /* Resting sends every context's calls to the driver: only while there is one engine (with more, the
     * segments are not even weighed for it), and no other is made while it rests (engine_of), so that
     * none can hold work the resting calls would pass; checked again under the list's lock, against a
     * context made meanwhile. */
    uint32_t n = seg_ops >= REST_MIN_OPS && engine_count() == 1
                     ? ag_rest_segment(&E.rest, repeated, content, E.rest_after)
                     : 0;
    if (n && !E.npending) {
        pthread_mutex_lock(&engines_lock);
        if (engine_count() == 1)
            rest_begin(n, seg_ops);
        pthread_mutex_unlock(&engines_lock);
    }
}

/* A barrier from a thread whose current context may be another one, or none. */
static void barrier_in_ctx(uint64_t kind, int reason)
{
    int pushed = own_ctx();
    barrier(kind, reason);
    own_ctx_end(pushed);
}

/* A sampled interval contains about one clock read of its own (the end of the one that starts it, the
 * start of the one that ends it): the least of a few back-to-back pairs, subtracted from every sample,
 * so that host_ns_per_match is what the launches that are not sampled cost. */
static uint64_t timer_cost(void)
{
    uint64_t least = UINT64_MAX;
    for (int i = 0; i < 32; i++) {
        uint64_t a = ag_now_ns(), b = ag_now_ns();
        if (b - a < least)
            least = b - a;
    }
    return least;
}

/* The driver's entry points, bound once for every engine. */
static pthread_once_t bind_once = PTHREAD_ONCE_INIT;
static int bind_result;
static void bind_driver(void)
{
    bind_result = ag_record_bind();
}

static int init_engine(CUcontext ctx)
{
    E.ready = 1; /* (E.ctx is ctx already) */
    E.dev = -1;
    pthread_once(&bind_once, bind_driver);
    if (bind_result != 0) {
        disable("the driver lacks an entry point the engine needs", CUDA_ERROR_NOT_FOUND, 1);
        return -1;
    }
    if (ag_drv.cuCtxGetDevice(&E.dev) != CUDA_SUCCESS) /* ctx is current */
        E.dev = -1;
    if (ag_learner_init(&E.learner, (uint32_t)ag_opt(AG_OPT_CHUNK)->num, (uint32_t)ag_opt(AG_OPT_CHUNK_FIRST)->num,
                        (uint32_t)ag_opt(AG_OPT_WARMUP)->num,
                        4096, ag_graph_release, NULL) != 0) {
        disable("out of memory", CUDA_ERROR_OUT_OF_MEMORY, 0);
        return -1;
    }
    CUresult r = ag_graph_init(ctx, (uint32_t)ag_opt(AG_OPT_MAX_GRAPHS)->num,
                               (size_t)ag_opt(AG_OPT_STAGING_KB)->num << 10);
    if (r != CUDA_SUCCESS) {
        disable("cannot set up graph capture", r, 0);
        return -1;
    }
    E.learner.bound_ratio = (uint32_t)ag_opt(AG_OPT_GPU_BOUND)->num;
    E.learner.model_plans = ag_opt(AG_OPT_CHUNK_PLAN)->num != AG_PLAN_HALVING;
    /* a trial times replayed sightings with CUPTI detached, as probes do: the modes that keep it attached
     * keep the modeled plan untried (its trial would alternate for good) */
    E.learner.plan_trials = ag_opt(AG_OPT_CHUNK_PLAN)->num == AG_PLAN_MODEL &&
                            (ag_cupti_mode() == AG_CUPTI_OFF || ag_cupti_mode() == AG_CUPTI_LEARN);
    E.learner.shape_free_seeds = ag_opt(AG_OPT_SEGMENT_KEY)->num == AG_SEGKEY_SHAPE_FREE;
    E.learner.renames = ag_opt(AG_OPT_RENAME)->num == AG_RENAME_ON;
    E.rest_after = (uint32_t)ag_opt(AG_OPT_REST)->num;
    E.timer_ns = timer_cost();
    /* guard and always modes: attached from the start (the first engine's segments are timed); in learn
     * mode CUPTI may be attached now for another engine's window, which does not watch this one's work */
    int always = ag_cupti_attached() && ag_cupti_mode() != AG_CUPTI_LEARN;
    ag_learner_watch(&E.learner, always);
    struct engine *none = NULL;
    if (always)
        __atomic_compare_exchange_n(&g_timer, &none, eng, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
    /* Probes time segments with CUPTI detached: in the modes that keep it attached they never could. */
    E.pf_on = ag_opt(AG_OPT_PROBE)->num == AG_PROBE_ON &&
              (ag_cupti_mode() == AG_CUPTI_OFF || ag_cupti_mode() == AG_CUPTI_LEARN);
    segment_begin();
    profit_begin();
    refresh_candidates();
    return 0;
}

static int seg_has(const CUevent *list, int n, CUevent ev)
{
    if (n > SEG_RECORDS)
        return 1;
    for (int i = 0; i < n; i++)
        if (list[i] == ev)
            return 1;
    return 0;
}

/* Notes ev in a segment's list (SEG_RECORDS + 1 entries: full, every event counts as in it). */
static void seg_add(CUevent *list, int *n, CUevent ev)
{
    if (seg_has(list, *n, ev))
        return;
    if (*n < SEG_RECORDS)
        list[*n] = ev;
    (*n)++;
}

static int seg_recorded(CUevent ev)
{
    return seg_has(E.seg_recs, E.nseg_recs, ev);
}

/* Event ev was recorded in this segment, now (operation E.ops). */
static void seg_record(CUevent ev)
{
    int n = E.nseg_recs;
    if (n > SEG_RECORDS)
        return; /* overflowed: every event counts as recorded in it */
    for (int i = 0; i < n; i++)
        if (E.seg_recs[i] == ev) {
            E.seg_rec_ops[i] = E.ops;
            return;
        }
    if (n < SEG_RECORDS)
        E.seg_recs[n] = ev, E.seg_rec_ops[n] = E.ops;
    E.nseg_recs = n + 1; /* SEG_RECORDS + 1: full */
}

/* Operations since ev's latest record in this segment; 0 where that is not known (not recorded in it, or
 * more events were than the list holds). */
static uint64_t seg_record_age(CUevent ev)
{
    for (int i = 0; E.nseg_recs <= SEG_RECORDS && i < E.nseg_recs; i++)
        if (E.seg_recs[i] == ev)
            return E.ops - E.seg_rec_ops[i];
    return 0;
}

/* Notes stream s among the segment's streams; 1 where it is not among them and there is no room left. */
static int seg_stream_full(CUstream s)
{
    for (int i = 0; i < E.nseg_streams; i++)
        if (E.seg_streams[i] == s)
            return 0;
    if (E.nseg_streams == AG_MAX_STREAMS)
        return 1;
    E.seg_streams[E.nseg_streams++] = s;
    return 0;
}

/* An operation with this signature failed when it was issued once (issue_now): CUDA reports such an
 * error at the call, so it is never held back. */
static int tainted(uint64_t sig)
{
    for (int i = 0; i < E.ntainted; i++)
        if (E.tainted[i] == sig)
            return 1;
    return 0;
}

/* *sig_out: the operation's signature; for a kernel, computed by the caller before the lock and given
 * on entry, with its shape-free signature (kernel_shape_free, ag_op_sig's by-product; 0 for the others). */
AG_HOT static int op_arrive(ag_op_t *o, const void *const *kparams, void **extra, uint64_t t0,
                            uint64_t *sig_out, uint64_t kernel_shape_free, uint64_t *op_out)
{
    /* Streams may share a chunk, the legacy stream too: their order is kept with events around the graph,
     * and the legacy stream's implicit order with the blocking streams inside it (graph.c). A stream past
     * AG_MAX_STREAMS since the last barrier ends the segment (decided by the program's order alone). */
    if ((o->stream != E.cur_stream || !E.nseg_streams) && seg_stream_full(o->stream)) {
        barrier(0x5717ea3ULL ^ (uint64_t)(uintptr_t)o->stream, FB_STREAM);
        seg_stream_full(o->stream);
    }
    E.cur_stream = o->stream;
    if (o->kind == OP_EVREC && E.nrecs == AG_MAX_RECORDS)
        barrier(0x7ec5ULL, FB_UNDEFERRABLE);
    int seg_first = !E.pf_t0;
    if (seg_first) { /* a real segment's first operation: the one before it is timed up to here */
        uint64_t now = ag_now_ns();
        if (E.pp_open)
            profit_close(now);
        E.pf_t0 = now;
    }
    if (o->kind == OP_EVWAIT) {
        o->rec_idx = -1;
        for (int i = E.nrecs - 1; i >= 0 && o->rec_idx < 0; i--)
            if (E.recs[i].ev == o->event)
                o->rec_idx = (int32_t)E.recs[i].pos;
    }
    uint32_t pos0 = E.learner.chunk_pos;
    uint64_t shape_free = kernel_shape_free;
    uint64_t sig = o->kind == OP_KERNEL ? *sig_out : ag_op_sig(o, &shape_free);
    *sig_out = sig;
    if (AG_UNLIKELY(AG_LOG_ON(AG_LOG_TRACE))) {
        char d[224];
        describe_op(o, d, sizeof d);
        ag_log(AG_LOG_TRACE,
               "engine %d: operation %llu, segment operation %llu at point %016llx (%d candidates): %s", E.idx,
               (unsigned long long)E.ops, (unsigned long long)(E.ops - E.seg_op0),
               (unsigned long long)E.learner.seg_seed, E.nmatch, d);
    }
    if (op_out)
        *op_out = E.ops;
    if (E.seg_timed) {
        uint64_t now = ag_now_ns();
        if (!E.seg_t0)
            E.seg_t0 = now;
        optimes[E.ops % OPT_RING].tag = E.ops + 1;
        optimes[E.ops % OPT_RING].t = now;
        optimes[E.ops % OPT_RING].drv_ns = 0;
        optimes[E.ops % OPT_RING].est_ns = est_gpu_ns(o);
        tl_timed_op = E.ops + 1;
    }
    int deferred = 0;
    if (AG_UNLIKELY(E.wide))
        choose_by_first(sig);
    /* a real segment's first operation that nothing expected at its point begins with: renamed after a known
     * point whose work does (ag_learner_rename; never while resting: rest_begin drops the names offered) */
    if (AG_UNLIKELY(seg_first) && (E.learner.rename_to[0] | E.learner.rename_to[1]) && !E.npending &&
        !expected_first(sig) && ag_learner_rename(&E.learner, sig)) {
        refresh_candidates();
        if (E.wide)
            choose_by_first(sig);
    }
    if (E.nmatch) {
        uint32_t pos = E.learner.chunk_pos;
        int k = 0, had = E.nmatch;
        for (int i = 0; i < E.nmatch; i++)
            if (E.mlen[i] > pos && E.msigs[i][pos] == sig) {
                E.match[k] = E.match[i];
                E.msigs[k] = E.msigs[i];
                E.mlen[k++] = E.mlen[i];
            }
        E.nmatch = k;
        if (t0 && sample_phased)
            sample_ts[TS_MATCHED] = ag_now_ns();
        if (!k) {
            if (AG_UNLIKELY(AG_LOG_ON(AG_LOG_TRACE)))
                trace_mismatch(o, E.match[0], pos, had, "no candidate goes on with this"); /* (unmoved) */
            /* Counted apart too where it is a chunk's start with nothing held: other work came than the
             * candidates, nothing is issued again (and the learner judges it at the chunk's close: known work
             * is another variant, no failure). While an event's destroy ended the segment, PyTorch's
             * autograd (a wait on another stream for each gradient's event, then its destroy) made 15 such
             * one-operation segments a step in the MLP whose forward and backward the program graphs. */
            E.starts_unmatched += pos == 0 && !E.npending && E.ncand;
            fallback(FB_MISMATCH);
        } else if (E.ntainted && tainted(sig)) {
            fallback(FB_UNDEFERRABLE); /* failed when issued once: CUDA must report it again, at the call */
        } else {
            ag_op_t *slot = pending_slot();
            int ok = slot != NULL;
            if (ok && o->kind == OP_H2D && o->stage >= 0) {
                /* A pageable source may be reused as soon as the call returns: copy it now (into
                 * buffers the issuer's job does not use, once it is settled). */
                settle();
                const void *st = ag_stage_copy(o->hsrc, o->n, &o->stage);
                ok = st != NULL;
                if (ok) {
                    o->hsrc = st;
                    E.staged_h2d++;
                    E.staged_h2d_bytes += o->n;
                }
            }
            if (ok && o->kind == OP_KERNEL) {
                uint32_t total = o->layout->total;
                ok = E.arena_used + total <= UINT32_MAX && reserve(total) == 0; /* arg_off is 32 bits */
                if (ok) {
                    unsigned char *a = E.arena + E.arena_used;
                    if (kparams) {
                        ag_args_copy(o->layout, a, kparams);
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
                    o->arg_off = (uint32_t)E.arena_used;
                    if (ok)
                        E.arena_used += total;
                }
            }
            if (ok) {
                ag_op_copy(slot, o);
                note_hold();
                if (t0 && sample_phased)
                    sample_ts[TS_COPIED] = ag_now_ns();
                E.npending++;
                E.deferred++;
                deferred = 1;
            } else {
                fallback(FB_UNDEFERRABLE);
            }
        }
    }
    /* An operation not held back is learned now and issued by the caller after it leaves the lock
     * (nothing is pending then, so the order within the thread is kept): a launch can block when the
     * queue is full, and the GPU may be waiting for a thread that needs this lock. */
    if (o->kind == OP_EVREC) {
        E.recs[E.nrecs].ev = o->event;
        E.recs[E.nrecs++].pos = pos0;
        seg_record(o->event);
    }
    if (deferred) {
        if (E.seg_timed) /* a graph runs part of it: its kernels are not timed one by one */
            E.seg_timed = 0, tl_timed_op = 0;
    } else {
        E.seg_kernels += o->kind == OP_KERNEL;
        E.eager_kernels += o->kind == OP_KERNEL;
        E.pf_probe_kernels += E.pf_probing && o->kind == OP_KERNEL;
    }
    E.ops++;
    if (E.cupti_learning &&
        (E.ops - E.guarded_at >= ATTACH_WINDOW || __atomic_load_n(&g_window_close, __ATOMIC_RELAXED)))
        cupti_learning(0); /* the window guarded nothing new for a while, or another engine launches graphs */
    /* a kernel by its family, xored in (the chain's mix follows; a library's kernel picked by size leaves no
     * trace: another batch size may bring another one, or one more) */
    if (E.learner.shape_free_seeds && (o->kind != OP_KERNEL || o->layout->family))
        ag_learner_push_shape_free(&E.learner, o->kind == OP_KERNEL ? shape_free ^ o->layout->family : shape_free);
    int step = ag_learner_push(&E.learner, sig);
    if (deferred && t0 && !step) {
        /* a held-back launch, from the engine's entry to here (the learner included; one that completes
         * a chunk is counted in the replay's host time instead) */
        uint64_t end = ag_now_ns();
        if (sample_phased) {
            uint64_t t[TS_COUNT + 2] = {t0, sample_ts[TS_RECORD], sample_ts[TS_LOCKED], sample_ts[TS_MATCHED],
                                        sample_ts[TS_COPIED], end};
            /* each interval holds about one clock read of its own */
            for (int i = 0; i < TS_COUNT + 1; i++) {
                uint64_t d = t[i + 1] > t[i] ? t[i + 1] - t[i] : 0;
                E.match_phase_ns[i] += d > E.timer_ns ? d - E.timer_ns : 0;
            }
            E.match_phased++;
        } else {
            uint64_t ns = end - t0, to_lock = sample_ts[TS_LOCKED] > t0 ? sample_ts[TS_LOCKED] - t0 : 0;
            /* each interval holds about one clock read of its own, and the whole one also the read between */
            ns = ns > 2 * E.timer_ns ? ns - 2 * E.timer_ns : 0;
            E.match_ns += ns;
            E.matched_ns[E.match_timed % AG_SAMPLER_RING] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
            E.match_lock_ns += to_lock > E.timer_ns ? to_lock - E.timer_ns : 0;
            E.match_timed++;
        }
    }
    if (step) {
        settle(); /* closing a chunk may evict variants and their graphs */
        ag_variant_t *c = E.npending ? completing(step == 2) : NULL;
        if (E.npending && !c) {
            if (AG_UNLIKELY(AG_LOG_ON(AG_LOG_TRACE)))
                trace_mismatch(step == 2 ? NULL : o, E.nmatch ? E.match[0] : NULL, E.learner.chunk_pos, E.nmatch,
                               "no candidate ends here");
            fallback(FB_MISMATCH);
        }
        ag_variant_t *v = step == 1 ? ag_learner_close(&E.learner) : ag_learner_barrier(&E.learner, 0, 1);
        E.nrecs = 0; /* a record of an earlier chunk is one the next chunk's graph waits for at launch */
        sighted(v);
        if (step == 2) {
            segment_begin(); /* a virtual barrier: the host did not wait there, nothing to time */
            if (!c)
                window_ahead();
            E.pf_other = 1;  /* nor to compare with plain launches */
        }
        if (c) {
            if (v == c)
                complete(c, 1);
            else
                flush_eager(FB_MISMATCH);
        }
        refresh_candidates();
    }
    if (!deferred)
        settle(); /* the caller issues the operation: after the job in flight */
    return deferred;
}

/* Issues an operation that was not held back, outside the lock. One that fails is never held back
 * later: CUDA reports such errors at the call. t0: the clock when the call starts on a kernel launch
 * the engine samples (kernel_common's every 16th), for host_ns_per_eager_launch; 0 on the others. */
AG_HOT static CUresult issue_now(CUresult (*fn)(const void *), const void *call, uint64_t sig, int kernel,
                                 uint64_t op, uint64_t t0)
{
    /* CUPTI ties the kernel's timing record to the operation (of the engine it times only: the records
     * keep 32 bits of the operation number) */
    ag_timing_op = kernel && __atomic_load_n(&g_timer, __ATOMIC_RELAXED) == eng ? op + 1 : 0;
    uint64_t timed = tl_timed_op, ts = t0;
    if (timed) {
        tl_timed_op = 0;
        ts = t0 ? t0 : ag_now_ns();
    }
    CUresult r = fn(call);
    ag_timing_op = 0;
    if (timed && optimes[(timed - 1) % OPT_RING].tag == timed) {
        uint64_t d = ag_now_ns() - ts;
        optimes[(timed - 1) % OPT_RING].drv_ns = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
    }
    if (t0) {
        uint64_t ns = ag_now_ns() - t0;
        ag_sampler_add(&E.eager_launches, ns > E.timer_ns ? ns - E.timer_ns : 0);
    }
    if (r != CUDA_SUCCESS) {
        lock_take(&E.lock);
        E.tainted[E.ntainted < (int)(sizeof E.tainted / sizeof *E.tainted) ? E.ntainted++ : 0] = sig;
        lock_give(&E.lock);
    }
    return r;
}

/* cuCtxGetCurrent, published once found: enter calls it before taking any lock. */
#define ctx_query (ag_hot.ctx_query)

static ag_drv_cuCtxGetCurrent_t find_ctx_query(void)
{
    ag_drv_cuCtxGetCurrent_t q = atomic_load_explicit(&ctx_query, memory_order_acquire);
    if (q)
        return q;
    if (!ag_drv.cuCtxGetCurrent) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
        q = h ? (ag_drv_cuCtxGetCurrent_t)ag_real_dlsym(h, "cuCtxGetCurrent") : NULL;
    } else {
        q = ag_drv.cuCtxGetCurrent;
    }
    if (q)
        atomic_store_explicit(&ctx_query, q, memory_order_release);
    return q;
}

static int reclaim(void);

/* Taking over engines whose contexts ended (take_over, reclaim), one thread at a time: taken under no
 * engine lock, and an engine's taken under it (engines_lock is taken under an engine's, and the fork
 * handlers take every engine's lock first). */
static pthread_mutex_t reclaim_lock = PTHREAD_MUTEX_INITIALIZER;

/* Every engine was made: the first one whose context ended is made over for context ctx (reclaim), unless
 * another thread of ctx's has done so meanwhile. NULL where none can be. Selects nothing. */
static struct engine *take_over(CUcontext ctx)
{
    struct engine *prev = eng, *e = NULL;
    pthread_mutex_lock(&reclaim_lock);
    for (int i = 0; i < AG_MAX_ENGINES && !e; i++)
        if (__atomic_load_n(&engines[i].ctx, __ATOMIC_RELAXED) == ctx)
            e = &engines[i];
    for (int i = 0; i < AG_MAX_ENGINES && !e; i++) {
        if (!__atomic_load_n(&engines[i].ctx_ended, __ATOMIC_RELAXED))
            continue;
        use(&engines[i]);
        lock_take(&E.lock);
        if (reclaim()) {
            __atomic_store_n(&E.ctx, ctx, __ATOMIC_RELAXED);
            e = eng;
        }
        lock_give(&E.lock);
    }
    pthread_mutex_unlock(&reclaim_lock);
    use(prev);
    if (e)
        ag_log(AG_LOG_DEBUG, "engine %d, whose context ended, serves a new one", e->idx);
    else
        AG_LOG_CAPPED(AG_LOG_WARN, "more than %d CUDA contexts at once: the others run with plain launches",
                      AG_MAX_ENGINES);
    return e;
}

/* The engine of context ctx: found, or (create) made; NULL where every one is taken. An engine whose
 * context ended is never found again (its ctx is cleared): a later context may get its handle, and gets
 * a new engine, the first never made yet, else one whose context ended (reclaim). Slots are never freed:
 * a thread may still hold a pointer to one. */
static struct engine *engine_of(CUcontext ctx, int create)
{
    int n = atomic_load_explicit(&n_engines, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (__atomic_load_n(&engines[i].ctx, __ATOMIC_RELAXED) == ctx)
            return &engines[i];
    if (!create)
        return NULL;
    struct engine *e = NULL;
    int full = 0;
    pthread_mutex_lock(&engines_lock);
    int m = atomic_load_explicit(&n_engines, memory_order_relaxed);
    for (int i = 0; i < m && !e; i++) /* made or taken over meanwhile by another thread */
        if (__atomic_load_n(&engines[i].ctx, __ATOMIC_RELAXED) == ctx)
            e = &engines[i];
    if (!e && m && atomic_load(&ag_engine_on) == AG_ENGINE_RESTING) {
        /* the first engine rests: this context waits for its end (the calls pass meanwhile) */
    } else if (!e && m < AG_MAX_ENGINES) {
        e = &engines[m];
        atomic_store_explicit(&e->lock.v, 0, memory_order_relaxed);
        if (e->idx != m) /* (engine 0's is 0 already: a thread that selected none reads it meanwhile) */
            e->idx = m;
        __atomic_store_n(&e->ctx, ctx, __ATOMIC_RELAXED);
        e->S.next_at = SAMPLE_FIRST;
        atomic_store_explicit(&n_engines, m + 1, memory_order_release);
        if (m == 1)
            ag_log(AG_LOG_INFO, "a second CUDA context: each context gets an engine of its own");
    } else if (!e) {
        full = 1;
    }
    pthread_mutex_unlock(&engines_lock);
    return full ? take_over(ctx) : e;
}

/* The context the thread's engine lookup last found, and its engine (NULL: none). */
#define tl_ctx (ag_tl.ctx)
#define tl_eng (ag_tl.ctx_eng)

/* Contexts ended so far (ag_engine_context_end), and this thread's count when its lookup last found no
 * engine: an engine may be free for it since. */
static unsigned g_ctx_ends;
static AG_TLS unsigned tl_ends;

/* current_engine past the thread's cache: looks ctx up (makes its engine if create) and caches it. */
static struct engine *lookup_engine(CUcontext ctx, int create)
{
    tl_ends = __atomic_load_n(&g_ctx_ends, __ATOMIC_ACQUIRE);
    struct engine *e = engine_of(ctx, create);
    /* not found is kept only where one was asked for and every engine is taken, none of them by an ended
     * context (resting, or a lookup that makes none, a barrier's: the next call looks again, and may
     * take over an engine) */
    tl_ctx = e || (create && engine_count() == AG_MAX_ENGINES) ? ctx : NULL;
    tl_eng = e;
    return e;
}

/* The engine of the calling thread's current context, made if need be (create); NULL where there is
 * no context, or no engine for it. Selects nothing. The driver's lines are as cold as ours: asked
 * before any lock, the current context costs misses that overlap the lock's and prefetch_hot's. */
AG_HOT static inline struct engine *current_engine(int create)
{
    ag_drv_cuCtxGetCurrent_t query = atomic_load_explicit(&ctx_query, memory_order_acquire);
    if (AG_UNLIKELY(!query) && !(query = find_ctx_query()))
        return NULL;
    CUcontext ctx = NULL;
    if (query(&ctx) != CUDA_SUCCESS || !ctx)
        return NULL;
    /* Only this thread changes its current context; the engine found still serves it (a context's end
     * clears its engine's, whose slot a later context may take over: the handle may be that context's
     * and its engine another), or none was found and no context has ended since. */
    struct engine *e = tl_eng;
    if (AG_LIKELY(ctx == tl_ctx) && AG_LIKELY(e ? __atomic_load_n(&e->ctx, __ATOMIC_RELAXED) == ctx
                                                : tl_ends == __atomic_load_n(&g_ctx_ends, __ATOMIC_RELAXED)))
        return e;
    return lookup_engine(ctx, create);
}

/* Work this thread held back in engine h is issued (and the segment ends there): the thread goes on
 * in another context, or none. Locks h alone; restores the selected engine. */
static void release_holds(struct engine *h)
{
    struct engine *prev = use(h);
    lock_take(&E.lock);
    if (E.ready && !E.disabled && E.npending && tl_holds == E.drains + 1)
        barrier_in_ctx(0xc0ffee, FB_CONTEXT);
    lock_give(&E.lock);
    use(prev);
}

/* Checks that the engine may handle a call now: 1 with the engine lock held (leave() releases it), 0
 * without it (the call passes to CUDA). */
AG_HOT static int enter_locked(void)
{
    /* the pause flag before the engine's (autograph_pause clears the one after it has cleared the other:
     * a call that finds the flag clear then finds the engine as the pause left it) */
    int pausing = __atomic_load_n(&g_pausing, __ATOMIC_ACQUIRE);
    if (E.disabled || __atomic_load_n(&g_app_captures, __ATOMIC_RELAXED) > 0 || AG_UNLIKELY(pausing) ||
        !atomic_load_explicit(&ag_engine_on, memory_order_relaxed)) {
        if (E.ctx_ended)
            tl_ctx = NULL; /* its handle may be another context's now: looked up again */
        settle(); /* the call passes to CUDA: after the job in flight */
        /* A call passed to the driver goes after what this engine still holds, whatever the reason: held
         * work is left only where another thread is changing the engine's state (autograph_pause stepping
         * aside before it has issued it; a launch held before the count of the program's own capture, whose
         * barrier the capture's thread makes next: difftest.directed.capture_race; the exit). */
        if (E.npending && !E.disabled)
            barrier_in_ctx(pausing ? 0x9a05eULL : 0xca97ULL, FB_BARRIER);
        return 0;
    }
    if (!E.ready && init_engine(E.ctx) != 0)
        return 0;
    return 1;
}

/* enter for engine e, the calling thread's current context's (current_engine(1)), or NULL. */
AG_HOT static int enter_engine(struct engine *e)
{
    /* Work this thread held back in another engine goes first (in its order), as at any barrier: CUDA
     * orders two contexts' work only through a sync or an event, and those take the locked paths. */
    struct engine *h = tl_hold_eng;
    if (AG_UNLIKELY(h && h != e) && tl_holds == __atomic_load_n(&h->drains, __ATOMIC_ACQUIRE) + 1)
        release_holds(h);
    if (!e)
        return 0;
    if (AG_UNLIKELY(e != eng))
        use(e);
    lock_take(&E.lock);
    if (AG_UNLIKELY(E.ctx != tl_ctx)) { /* its context ended meanwhile (another thread's destroy) */
        tl_ctx = NULL;
        lock_give(&E.lock);
        return 0;
    }
    if (enter_locked())
        return 1;
    lock_give(&E.lock);
    return 0;
}

/* enter for a call that may be held back (op_arrive settles the issuer's job where it is not). */
AG_HOT static int enter_hold(void)
{
    return enter_engine(current_engine(1));
}

/* enter for any other call: the issuer's job is settled first. */
static int enter(void)
{
    if (!enter_hold())
        return 0;
    settle();
    return 1;
}

AG_HOT static void leave(void)
{
    lock_give(&E.lock);
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

/* Every 16th operation of a thread is timed from the engine's entry on, for host_ns_per_match (every 64th
 * phase by phase instead). */
#define sample_tick (ag_tl.sample_tick)

/* Between two launches an interpreter evicts the engine's state from the caches, and the lock's atomic
 * orders the loads after it: unasked, each line the launch needs would be missed only once the one before
 * it arrived. These lines' addresses are known before the lock (asking for them reads nothing), so they
 * are asked for together, and arrive while the lock is taken. */
static inline void prefetch_hot(const kcall_t *c)
{
    for (const char *p = (const char *)&E; p <= (const char *)&E.seg_timed; p += 64)
        __builtin_prefetch(p); /* for reading: a thread holding the lock keeps its lines */
    __builtin_prefetch(&E.learner); /* the fields every push uses: two lines (pattern.h) */
    __builtin_prefetch((const char *)&E.learner + 64);
    ag_layout_prefetch(c->f);
}

/* Before the lock, once the hot fields asked for by prefetch_hot have arrived: the lines found through
 * them that a held-back launch goes on to (the candidates' next signatures, the kernel's layout, the
 * first arena lines, the pending record it fills, the learner's slots it writes), asked for now so that
 * they arrive while the context is queried and the lock taken. Read without the lock (relaxed atomic
 * loads of fields written under it: a race by the letter of C11, on values used only as prefetch
 * addresses): a value another thread changes meanwhile only makes a useless prefetch (prefetches never
 * fault; layouts are never freed). */
static inline void prefetch_early(CUfunction f)
{
    int n = __atomic_load_n(&E.nmatch, __ATOMIC_RELAXED);
    if (n <= 0)
        return; /* nothing expected: the launch goes on eagerly */
    /* addresses computed as integers: a stale position or fill may point past an allocation */
    uintptr_t pos = __atomic_load_n(&E.learner.chunk_pos, __ATOMIC_RELAXED);
    for (int i = 0; i < n && i < AG_MAX_CANDIDATES; i++) {
        uintptr_t m = (uintptr_t)__atomic_load_n(&E.msigs[i], __ATOMIC_RELAXED);
        if (m)
            __builtin_prefetch((const void *)(m + pos * sizeof(uint64_t)));
    }
    const ag_layout_t *l = __atomic_load_n(&ag_layouts[ag_layout_slot(f)], __ATOMIC_RELAXED);
    if (l)
        __builtin_prefetch(l);
    uintptr_t a = (uintptr_t)__atomic_load_n(&E.arena, __ATOMIC_RELAXED);
    uintptr_t used = __atomic_load_n(&E.arena_used, __ATOMIC_RELAXED);
    if (a) {
        __builtin_prefetch((const void *)(a + used), 1);
        __builtin_prefetch((const void *)(a + used + 64), 1);
    }
    uintptr_t p = (uintptr_t)__atomic_load_n(&E.pending, __ATOMIC_RELAXED);
    if (p) /* the pending record this launch will fill (AG_OP_KERNEL_SIZE: two lines at most) */
        __builtin_prefetch((const void *)(p + __atomic_load_n(&E.npending, __ATOMIC_RELAXED) * sizeof(ag_op_t)), 1);
    uintptr_t cs = (uintptr_t)__atomic_load_n(&E.learner.chunk_sigs, __ATOMIC_RELAXED);
    uintptr_t ring = (uintptr_t)__atomic_load_n(&E.learner.ring, __ATOMIC_RELAXED);
    uint64_t total = __atomic_load_n(&E.learner.ring_total, __ATOMIC_RELAXED);
    if (cs)
        __builtin_prefetch((const void *)(cs + pos * sizeof(uint64_t)), 1);
    if (ring)
        __builtin_prefetch((const void *)(ring + (total % AG_PERIOD_WINDOW) * sizeof(uint64_t)), 1);
}

/* Under the lock, where the launch's argument block is longer than the two arena lines prefetch_early
 * asked for: the rest of the lines it will be written to (args bytes). */
static inline void prefetch_arrive(uint32_t args)
{
    /* this launch's arguments, for writing (up to 4 KB: AdamW's multi-tensor blocks) */
    size_t end = E.arena_used + (args < 4096 ? args : 4096);
    for (size_t off = (E.arena_used & ~(size_t)63) + 128; off < E.arena_cap && off < end; off += 64)
        __builtin_prefetch(E.arena + off, 1);
}

/* A sampled launch the engine did not hold back: its own time, up to the driver's call. */
static void eager_own_timed(uint64_t ns)
{
    ag_sampler_add(&E.eager_own, ns);
    if (ns > EAGER_OWN_LONG_NS) {
        /* (the log's clock places it among the builds, windows and probes logged beside it) */
        AG_LOG_CAPPED(AG_LOG_DEBUG, "engine %d: a sampled launch not held back spent %.1f us in the engine", E.idx,
                      (double)ns / 1e3);
        int k = ns > EAGER_OWN_LONGER_NS;
        atomic_fetch_add_explicit(&E.eager_own_long[k], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&E.eager_own_long_ns[k], ns, memory_order_relaxed);
        unsigned long long m = atomic_load_explicit(&E.eager_own_max, memory_order_relaxed);
        while (ns > m && !atomic_compare_exchange_weak_explicit(&E.eager_own_max, &m, ns, memory_order_relaxed,
                                                                memory_order_relaxed))
            ;
    }
}

AG_HOT static CUresult kernel_common(kcall_t *c)
{
    unsigned tick = sample_tick++;
    uint64_t t0 = 0;
    if ((tick & 15) == 0) { /* sample_phased is read only where t0 is set */
        t0 = ag_now_ns();
        sample_phased = (tick & 63) == 0;
    }
    prefetch_hot(c);
    /* The record and its signature need no lock: made before it, while the lines asked for arrive (and
     * not while another thread waits for the lock). */
    ag_op_t o;
    o.kind = OP_KERNEL;
    o.ex = c->cfg != NULL;
    o.nattrs = 0;
    o.id = c->id;
    o.f = c->f;
    o.grid[0] = c->gx, o.grid[1] = c->gy, o.grid[2] = c->gz;
    o.block[0] = c->bx, o.block[1] = c->by, o.block[2] = c->bz;
    o.smem = c->smem;
    o.stream = norm_stream(c->stream);
    /* the per-thread default stream, by its handle or by stream 0 through a per-thread entry point (the
     * two _ptsz launch ids: constants, where per_thread would read a table line) */
    int ok = c->stream != CU_STREAM_PER_THREAD &&
             !(c->stream == NULL && (c->id == AG_ID_cuLaunchKernel_ptsz || c->id == AG_ID_cuLaunchKernelEx_ptsz)) &&
             (!c->params || !c->extra);
    if (ok && c->cfg) {
        if (c->cfg->numAttrs > AG_MAX_ATTRS)
            ok = 0;
        else if (c->cfg->numAttrs) {
            o.nattrs = (uint8_t)c->cfg->numAttrs;
            memset(o.attrs, 0, sizeof *o.attrs * o.nattrs);
            for (unsigned i = 0; ok && i < o.nattrs; i++) {
                int vs = ag_attr_value_size(c->cfg->attrs[i].id);
                ok = vs >= 0 && (size_t)vs <= sizeof o.attrs[i].value;
                if (ok) {
                    o.attrs[i].id = c->cfg->attrs[i].id;
                    memcpy(&o.attrs[i].value, &c->cfg->attrs[i].value, (size_t)vs);
                }
            }
        }
    }
    uint64_t shape_free = 0, sig = ok ? ag_op_sig(&o, &shape_free) : 0;
    prefetch_early(c->f);
    if (t0 && sample_phased)
        sample_ts[TS_RECORD] = ag_now_ns();
    if (!enter_hold())
        return eager_kernel(c);
    if (t0)
        sample_ts[TS_LOCKED] = ag_now_ns();
    o.layout = ag_layout_of(c->f, (unsigned)E.idx);
    ok = ok && o.layout && !o.layout->no_defer;
    if (E.nmatch && ok)
        prefetch_arrive(o.layout->total);
    CUresult r;
    if (!ok) {
        barrier(0xdefe4ULL, FB_UNDEFERRABLE);
        leave(); /* held work is issued; this one needs no lock */
        return eager_kernel(c);
    } else {
        uint64_t op;
        if (!op_arrive(&o, (const void *const *)c->params, c->extra, t0, &sig, shape_free, &op)) {
            leave();
            uint64_t t1 = 0; /* on a sampled launch: the end of the engine's part, the driver's start */
            if (t0) {
                t1 = ag_now_ns();
                eager_own_timed(t1 - t0 > E.timer_ns ? t1 - t0 - E.timer_ns : 0);
            }
            return issue_now(eager_kernel, c, sig, 1, op, t1);
        }
        r = CUDA_SUCCESS;
    }
    leave();
    return r;
}

AG_HOT CUresult ag_engine_launch(ag_id_t id, CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                 unsigned by, unsigned bz, unsigned smem, CUstream s, void **params, void **extra)
{
    kcall_t c = {id, f, gx, gy, gz, bx, by, bz, smem, s, params, extra, NULL};
    return kernel_common(&c);
}

AG_HOT CUresult ag_engine_launch_ex(ag_id_t id, const CUlaunchConfig *cfg, CUfunction f, void **params,
                                    void **extra)
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
    unsigned value, elem; /* elem: memset element size, 0 for a copy */
    size_t n;
    CUstream stream;
} mcall_t;

static CUresult eager_memset(const void *p)
{
    const mcall_t *c = p;
    switch (c->elem) {
    case 1:
        return ((ag_fn_cuMemsetD8Async_t)ag_real[c->id])(c->dst, (unsigned char)c->value, c->n, c->stream);
    case 2:
        return ((ag_fn_cuMemsetD16Async_t)ag_real[c->id])(c->dst, (unsigned short)c->value, c->n, c->stream);
    default:
        return ((ag_fn_cuMemsetD32Async_t)ag_real[c->id])(c->dst, c->value, c->n, c->stream);
    }
}

/* cuMemcpyAsync, the unified form (below): its eager issue goes back through it, whatever the direction. */
static int unified_copy(ag_id_t id)
{
    return id == AG_ID_cuMemcpyAsync || id == AG_ID_cuMemcpyAsync_ptsz;
}

static CUresult eager_unified(ag_id_t id, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return ((ag_fn_cuMemcpyAsync_t)ag_real[id])(dst, src, n, s);
}

static CUresult eager_copy(const void *p)
{
    const mcall_t *c = p;
    if (unified_copy(c->id))
        return eager_unified(c->id, c->dst, c->src, c->n, c->stream);
    return ((ag_fn_cuMemcpyDtoDAsync_v2_t)ag_real[c->id])(c->dst, c->src, c->n, c->stream);
}

static CUresult mem_common(const mcall_t *c)
{
    unsigned elem = c->elem;
    CUresult (*eager)(const void *) = elem ? eager_memset : eager_copy;
    if (!enter_hold())
        return eager(c);
    ag_op_t o;
    memset(&o, 0, offsetof(ag_op_t, attrs)); /* no attributes: the rest stays unread */
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
        uint64_t sig;
        if (!op_arrive(&o, NULL, NULL, 0, &sig, 0, NULL)) {
            leave();
            return issue_now(eager, c, sig, 0, 0, 0);
        }
        r = CUDA_SUCCESS;
    }
    leave();
    return r;
}

CUresult ag_engine_memset8(ag_id_t id, CUdeviceptr dst, unsigned char value, size_t n, CUstream s)
{
    mcall_t c = {id, dst, 0, value, 1, n, s};
    return mem_common(&c);
}

CUresult ag_engine_memset16(ag_id_t id, CUdeviceptr dst, unsigned short value, size_t n, CUstream s)
{
    mcall_t c = {id, dst, 0, value, 2, n, s};
    return mem_common(&c);
}

CUresult ag_engine_memset32(ag_id_t id, CUdeviceptr dst, unsigned int value, size_t n, CUstream s)
{
    mcall_t c = {id, dst, 0, value, 4, n, s};
    return mem_common(&c);
}

CUresult ag_engine_copy(ag_id_t id, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    mcall_t c = {id, dst, src, 0, 0, n, s};
    return mem_common(&c);
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
    ag_op_t o;
    o.id = c->id;
    o.flags = c->flags;
    return ag_issue_event(&o, c->stream, c->ev);
}

/* ---- visiting the engines ---- */

/* Locks engine i and selects it: 1 where it runs (set up, not disabled); unvisit() unlocks it. */
static int visit(int i)
{
    use(&engines[i]);
    lock_take(&E.lock);
    settle();
    return E.ready && !E.disabled;
}

static void unvisit(void)
{
    lock_give(&E.lock);
}

/* Every engine, one at a time, locked and selected, with fn called on those that run; the selected
 * engine is restored after. */
static void each_engine(void (*fn)(void *), void *arg)
{
    struct engine *prev = eng;
    for (int i = 0, n = engine_count(); i < n; i++) {
        if (visit(i))
            fn(arg);
        unvisit();
    }
    use(prev);
}

/* A call that may observe held work and names no event (a sync of a stream or the context, any other
 * barrier): the engine of the calling thread's context (home) ends its segment, and every other engine
 * that holds work issues it (a thread of the program may have ordered that work before this call), one
 * lock at a time. */
static void barrier_engines_(struct engine *home, uint64_t kind, int reason, int every)
{
    struct engine *prev = eng;
    /* A context without an engine while the only one rests (none is made then): the resting engine
     * counts the process's barriers as its segments, as it always did, so that the rest ends. */
    if (!home && engine_count() == 1 && __atomic_load_n(&engines[0].rest_left, __ATOMIC_RELAXED))
        home = &engines[0];
    for (int i = 0, n = engine_count(); i < n; i++) {
        struct engine *e = &engines[i];
        if (e != home && !every && !holding(e))
            continue; /* holds nothing: its segment goes on */
        if (visit(i) && (e == home || E.npending))
            barrier_in_ctx(kind, reason);
        unvisit();
    }
    use(prev);
}

static void barrier_engines(struct engine *home, uint64_t kind, int reason)
{
    barrier_engines_(home, kind, reason, 0);
}

/* Event ev is recorded or waited for in engine `home` (NULL: in a context without one), or observed:
 * every other engine where it was recorded or waited for since its last barrier ends its segment
 * first (a held record there is what a wait here must see; a held wait there must see the record
 * before this one). Decided by the program's order, as every barrier, so that learning and replay cut
 * the same segments. Returns how many engines it ended. */
static int foreign_event(CUevent ev, struct engine *home, uint64_t kind, int reason)
{
    struct engine *prev = eng;
    int ended = 0;
    for (int i = 0, n = engine_count(); i < n; i++) {
        if (&engines[i] == home)
            continue;
        if (visit(i) && (seg_recorded(ev) || seg_has(E.seg_waits, E.nseg_waits, ev))) {
            barrier_in_ctx(kind, reason);
            ended++;
        }
        unvisit();
    }
    use(prev);
    return ended;
}

static CUresult event_common(const ecall_t *c, ag_op_kind_t kind)
{
    struct engine *home = current_engine(1);
    if (c->ev)
        foreign_event(c->ev, home, 0xc0ffeeULL, FB_CONTEXT);
    if (!enter_engine(home))
        return eager_event(c);
    ag_op_t o;
    memset(&o, 0, offsetof(ag_op_t, attrs));
    o.kind = (uint8_t)kind;
    o.id = c->id;
    o.stream = norm_stream(c->stream);
    o.event = c->ev;
    o.flags = c->flags;
    CUresult r;
    /* External records and waits with flags are for other processes or graphs: not ours to hold. A
     * record of an event the program times is issued at its place (the held work first). */
    int timed = kind == OP_EVREC && c->ev && ag_ptrset_has(&E.timed_events, (uint64_t)(uintptr_t)c->ev);
    E.timed_records += (uint64_t)timed;
    if (per_thread(c->id, c->stream) || c->flags != 0 || !c->ev || timed) {
        barrier(timed ? 0x7173dULL : 0xdefe4ULL, FB_UNDEFERRABLE);
        if (kind == OP_EVREC && c->ev)
            seg_record(c->ev);
        leave();
        return eager_event(c);
    } else {
        uint64_t sig;
        int held = op_arrive(&o, NULL, NULL, 0, &sig, 0, NULL);
        if (kind == OP_EVWAIT) /* in the program's order, held or not (ag_engine_event_destroy) */
            seg_add(E.seg_waits, &E.nseg_waits, c->ev);
        if (!held) {
            leave();
            return issue_now(eager_event, c, sig, 0, 0, 0);
        }
        r = CUDA_SUCCESS;
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
    if (unified_copy(c->id))
        return eager_unified(c->id, (CUdeviceptr)(uintptr_t)c->dst, c->src, c->n, c->stream);
    if (c->id == AG_ID_cuMemcpyDtoH_v2 || c->id == AG_ID_cuMemcpyDtoH_v2_ptds)
        return ((ag_fn_cuMemcpyDtoH_v2_t)ag_real[c->id])(c->dst, c->src, c->n);
    return ((ag_fn_cuMemcpyDtoHAsync_v2_t)ag_real[c->id])(c->dst, c->src, c->n, c->stream);
}

/* A device-to-host copy CUDA makes blocking (the synchronous form, or the asynchronous form into
 * pageable memory) may be the last node of a graph: the graph copies into a staging buffer of ours,
 * and the call returns after the stream is synchronized and the bytes are copied out, as CUDA would. */
#define D2H_KIND 0xd2b0ULL /* the barrier a blocking device-to-host copy makes */

/* Where a pointer a copy names lies (MEM_UNKNOWN: not asked yet). MEM_OTHER: anything the engine does not
 * hold a copy for (managed memory, a pointer the driver cannot place, NULL, which CUDA refuses at the
 * call: never copied through). */
enum { MEM_UNKNOWN = -1, MEM_OTHER, MEM_PAGEABLE, MEM_PINNED, MEM_DEVICE };

static int mem_kind(CUdeviceptr p)
{
    if (!p || !ag_drv.cuPointerGetAttribute)
        return MEM_OTHER;
    unsigned type = 0;
    CUresult r = ag_drv.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
    if (r == CUDA_ERROR_INVALID_VALUE)
        return MEM_PAGEABLE; /* the driver knows nothing of it */
    if (r != CUDA_SUCCESS)
        return MEM_OTHER;
    if (type == CU_MEMORYTYPE_HOST)
        return MEM_PINNED;
    if (type != CU_MEMORYTYPE_DEVICE)
        return MEM_OTHER;
    uint64_t managed = 0; /* a boolean the driver writes as an int; room for more all the same */
    r = ag_drv.cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p);
    return r == CUDA_SUCCESS && !managed ? MEM_DEVICE : MEM_OTHER;
}

/* into: where the destination lies (mem_kind), MEM_UNKNOWN where the caller did not ask. */
static CUresult d2h_common(const dcall_t *c, int async, int into)
{
    if (!enter_hold())
        return eager_d2h(c);
    /* Into page-locked memory an asynchronous copy is truly asynchronous: the host may read the bytes
     * only after a sync, query or host function that covers it (each a barrier here), so it is held back
     * like any other operation, and the graph writes the application's buffer itself. Into pageable
     * memory CUDA makes it blocking (below), and the synchronous form whatever the memory. Managed or
     * device memory: a barrier. */
    if (into == MEM_UNKNOWN)
        into = async ? mem_kind((CUdeviceptr)(uintptr_t)c->dst) : c->dst ? MEM_PAGEABLE : MEM_OTHER;
    int pinned = into == MEM_PINNED;
    if (E.rest_left) { /* resting: a blocking copy is the end of a segment, maybe; a pinned one is none */
        if (!pinned)
            barrier(D2H_KIND, FB_BARRIER);
        leave();
        if (pinned)
            ag_engine_rested();
        return eager_d2h(c);
    }
    int ok = !per_thread(c->id, c->stream) && c->n > 0 &&
             (pinned || (into == MEM_PAGEABLE && c->n <= AG_D2H_STAGING_MAX));
    if (ok && pinned) {
        ag_op_t o;
        memset(&o, 0, offsetof(ag_op_t, attrs));
        o.kind = OP_D2H;
        o.id = AG_ID_cuMemcpyDtoHAsync_v2;
        o.stage = -1; /* the graph writes the application's page-locked buffer */
        o.stream = norm_stream(c->stream);
        o.hdst = c->dst;
        o.src = c->src;
        o.n = c->n;
        uint64_t sig;
        if (!op_arrive(&o, NULL, NULL, 0, &sig, 0, NULL)) {
            leave();
            return issue_now(eager_d2h, c, sig, 0, 0, 0);
        }
        E.d2h_pinned_held++;
        leave();
        return CUDA_SUCCESS;
    }
    if (!ok) {
        tl_may_wait = 1;
        barrier(0xba77ULL + (uint64_t)c->id, FB_BARRIER);
        tl_may_wait = 0;
        leave();
        CUresult r = eager_d2h(c); /* blocking: never under the lock */
        ag_wait_done();
        return r;
    }
    ag_op_t o;
    memset(&o, 0, offsetof(ag_op_t, attrs));
    o.kind = OP_D2H;
    o.id = async ? AG_ID_cuMemcpyDtoHAsync_v2 : AG_ID_cuMemcpyDtoH_v2;
    o.stream = async ? norm_stream(c->stream) : CU_STREAM_LEGACY;
    o.hdst = c->dst;
    o.src = c->src;
    o.n = c->n;
    E.copyout = NULL;
    /* Not held back: issued below, after the lock is left (it blocks until the GPU is done). */
    uint64_t sig;
    op_arrive(&o, NULL, NULL, 0, &sig, 0, NULL);
    tl_timed_op = 0; /* issued below, not through issue_now: its driver time (the GPU's wait) is not timed */
    tl_may_wait = 1;
    barrier(D2H_KIND, FB_BARRIER); /* the copy is observed by the host: it ends the segment */
    tl_may_wait = 0;
    const void *stage = E.copyout;
    E.copyout = NULL;
    /* The wait is for an event recorded here, under the lock (the stream's work up to the copy, no later):
     * a capture of a blocking stream that another thread begins once the lock is left would refuse a
     * sync of the legacy stream, in every mode, and break (capture_rules.expected, blk-*), where the
     * program's copy, made before it, succeeds; an event sync is no stream's work
     * (difftest.directed.d2h_blocking_capture). Without an event, the stream is synced. */
    CUevent wait_ev = NULL;
    if (stage) {
        E.copies_out++;
        if ((wait_ev = ag_thread_wait_event()) != NULL && REAL(cuEventRecord)(wait_ev, o.stream) != CUDA_SUCCESS)
            wait_ev = NULL;
    }
    leave();
    CUresult r;
    if (!stage) {
        r = eager_d2h(c);
    } else {
        /* The graph copied into this thread's staging buffer; CUDA would have returned once the bytes
         * are in the destination, and so do we. The sync is ours, not the program's: made in the relaxed
         * mode, since CUDA refuses a stream or event sync (and breaks the capture) where another thread
         * captures in the global mode, as it does not refuse the program's blocking copy
         * (capture_rules.expected). */
        uint64_t t0 = ag_now_ns();
        CUstreamCaptureMode mode = ag_relaxed_begin();
        r = wait_ev ? REAL(cuEventSynchronize)(wait_ev) : REAL(cuStreamSynchronize)(o.stream);
        ag_relaxed_end(mode);
        if (r == CUDA_SUCCESS) {
            memcpy(c->dst, stage, c->n);
            atomic_fetch_add_explicit(&E.staged_d2h_bytes, c->n, memory_order_relaxed);
        }
        atomic_fetch_add_explicit(&E.copy_wait_ns, ag_now_ns() - t0, memory_order_relaxed);
    }
    ag_wait_done();
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
    if (unified_copy(c->id))
        return eager_unified(c->id, c->dst, (CUdeviceptr)(uintptr_t)c->src, c->n, c->stream);
    return ((ag_fn_cuMemcpyHtoDAsync_v2_t)ag_real[c->id])(c->dst, c->src, c->n, c->stream);
}

/* An asynchronous host-to-device copy is deferrable: from pinned memory the graph reads the
 * application's buffer when it runs (as CUDA would), from pageable memory a snapshot taken at the call. */
/* from: where the source lies (mem_kind), MEM_UNKNOWN where the caller did not ask. */
static CUresult h2d_common(const hcall_t *c, int from)
{
    if (!enter_hold())
        return eager_h2d(c);
    if (from == MEM_UNKNOWN)
        from = mem_kind((CUdeviceptr)(uintptr_t)c->src);
    int pinned = from == MEM_PINNED, pageable = from == MEM_PAGEABLE;
    /* a pageable source is snapshotted into a staging buffer: one that fits; a page-locked one, any size */
    if (per_thread(c->id, c->stream) || c->n == 0 || (!pinned && !pageable) ||
        (pageable && c->n > ((size_t)ag_opt(AG_OPT_STAGING_KB)->num << 10))) {
        barrier(0xba77ULL + (uint64_t)c->id, FB_UNDEFERRABLE);
        leave(); /* a pageable copy may block: never under the lock */
        return eager_h2d(c);
    }
    ag_op_t o;
    memset(&o, 0, offsetof(ag_op_t, attrs));
    o.kind = OP_H2D;
    o.id = AG_ID_cuMemcpyHtoDAsync_v2;
    o.stream = norm_stream(c->stream);
    o.dst = c->dst;
    o.hsrc = c->src;
    o.n = c->n;
    o.stage = pageable ? 0 : -1; /* the buffer is chosen when the copy is held back */
    uint64_t sig;
    if (!op_arrive(&o, NULL, NULL, 0, &sig, 0, NULL)) {
        leave();
        return issue_now(eager_h2d, c, sig, 0, 0, 0);
    }
    leave();
    return CUDA_SUCCESS;
}

CUresult ag_engine_h2d_async(ag_id_t id, CUdeviceptr dst, const void *src, size_t n, CUstream s)
{
    hcall_t c = {id, dst, src, n, s};
    return h2d_common(&c, MEM_UNKNOWN);
}

CUresult ag_engine_d2h(ag_id_t id, void *dst, CUdeviceptr src, size_t n)
{
    dcall_t c = {id, dst, src, n, NULL};
    return d2h_common(&c, 0, MEM_UNKNOWN);
}

CUresult ag_engine_d2h_async(ag_id_t id, void *dst, CUdeviceptr src, size_t n, CUstream s)
{
    dcall_t c = {id, dst, src, n, s};
    return d2h_common(&c, 1, MEM_UNKNOWN);
}

/* cuMemcpyAsync, the unified form: CUDA tells the direction from the pointers (cudaMemcpyAsync with
 * cudaMemcpyDefault, as CuPy copies), and so does the engine, which then takes it as the form of that
 * direction: device to device, host to device (from page-locked or pageable memory), device to host
 * (into page-locked memory held back, into pageable memory blocking). Managed memory, host to host, or
 * a pointer the driver cannot place: a barrier. Issued eagerly, it goes back through cuMemcpyAsync. */
CUresult ag_engine_copy_unified(ag_id_t id, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    int to = mem_kind(dst), from = mem_kind(src);
    int host_to = to == MEM_PINNED || to == MEM_PAGEABLE, host_from = from == MEM_PINNED || from == MEM_PAGEABLE;
    if (from == MEM_DEVICE && host_to) {
        dcall_t c = {id, (void *)(uintptr_t)dst, src, n, s};
        return d2h_common(&c, 1, to); /* resting too: a blocking copy may end a segment */
    }
    int kind = from == MEM_DEVICE && to == MEM_DEVICE ? 1 : to == MEM_DEVICE && host_from ? 2 : 0;
    if (atomic_load_explicit(&ag_engine_on, memory_order_relaxed) != AG_ENGINE_ACTIVE && kind) {
        ag_engine_rested(); /* resting: as the other deferrable calls, straight to the driver */
        return eager_unified(id, dst, src, n, s);
    }
    if (kind == 1) {
        mcall_t c = {id, dst, src, 0, 0, n, s};
        return mem_common(&c);
    }
    if (kind == 2) {
        hcall_t c = {id, dst, (const void *)(uintptr_t)src, n, s};
        return h2d_common(&c, from);
    }
    if (!enter())
        return eager_unified(id, dst, src, n, s);
    barrier(0xba77ULL + (uint64_t)id, FB_BARRIER);
    leave();
    return eager_unified(id, dst, src, n, s);
}

static void engine_barrier(ag_id_t id);

static void alloc_forget(void *p)
{
    ag_ptrset_remove(&E.async_ptrs, (uint64_t)*(CUdeviceptr *)p);
}

CUresult ag_engine_free_async(ag_id_t id, CUdeviceptr p, CUstream s)
{
    ag_fn_cuMemFreeAsync_t real = (ag_fn_cuMemFreeAsync_t)ag_real[id];
    if (!enter()) {
        /* a context without an engine, the program's own capture, or the engine off: a barrier, as before
         * it tracked anything (and the allocation is forgotten) */
        each_engine(alloc_forget, &p);
        engine_barrier(id);
        return real(p, s);
    }
    /* A barrier or not is decided by the program's order alone (the allocation, the stream of the operation
     * before), so that learning and replay cut the same segments. Only a live allocation of ours is held
     * back: a free CUDA would refuse (a double free, a foreign pointer) must fail at the call. */
    int known = ag_ptrset_remove(&E.async_ptrs, (uint64_t)p);
    CUstream ns = norm_stream(s);
    int plain = known && !per_thread(id, s) && (!E.cur_stream || ns == E.cur_stream);
    if (plain && E.npending && atomic_load_explicit(&ag_engine_on, memory_order_relaxed) == AG_ENGINE_ACTIVE) {
        struct held_free *f = ag_grow(E.frees, E.nfrees, &E.cap_frees, sizeof *f, 64);
        if (f) {
            E.frees = f;
            E.frees[E.nfrees++] = (struct held_free){p, s, id, E.npending};
            E.frees_held++;
            note_hold();
            leave();
            return CUDA_SUCCESS;
        }
    }
    if (!plain)
        barrier(0xba77ULL + (uint64_t)id, FB_BARRIER); /* as ag_engine_barrier's */
    else if (E.npending)
        fallback(FB_UNDEFERRABLE); /* no room to hold it: what it follows goes first */
    leave();
    return real(p, s);
}

/* The allocation is the current context's: noted by its engine (made if need be, so that its free, the
 * first call it sees, may be held back). */
void ag_engine_alloced(CUdeviceptr p)
{
    struct engine *e = current_engine(1), *prev = eng;
    if (!e)
        return;
    use(e);
    lock_take(&E.lock);
    /* Not in the program's own capture: that memory is the graph's, freed with it as well as by a call. */
    if (!E.disabled && __atomic_load_n(&g_app_captures, __ATOMIC_RELAXED) == 0 &&
        ag_ptrset_add(&E.async_ptrs, (uint64_t)p) != 0)
        AG_LOG_CAPPED(AG_LOG_WARN, "out of memory noting a stream-ordered allocation; its free will be a barrier");
    lock_give(&E.lock);
    use(prev);
}

int ag_engine_frees_release(void)
{
    struct engine *prev = eng;
    int held = 0;
    for (int i = 0, n = engine_count(); i < n; i++) {
        use(&engines[i]);
        lock_take(&E.lock);
        /* frees in the issuer's job count too: settled here, they are issued */
        int in_job = atomic_load(&E.job.state) != JOB_IDLE && E.job.nfrees > 0;
        settle();
        if (E.ready && !E.disabled && (E.nfrees > 0 || in_job)) {
            held = 1;
            E.frees_oom_released++;
            if (E.nfrees > 0)
                barrier_in_ctx(0x00beefULL, FB_BARRIER);
        }
        unvisit();
    }
    use(prev);
    return held;
}

/* The program's own captures going: process-wide, nothing of ours may enter their graphs, and their
 * launches go straight to the capturing stream (each engine passes every call meanwhile). A capture hook
 * begins one (its name says so) or ends one; an end with none counted leaves the count at 0. */
static int capture_begins(ag_id_t id)
{
    return strstr(ag_hook_names[id], "BeginCapture") != NULL;
}

static void capture_ended(void)
{
    int c = __atomic_load_n(&g_app_captures, __ATOMIC_ACQUIRE);
    while (c > 0 && !__atomic_compare_exchange_n(&g_app_captures, &c, c - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
}

static void release_graphs(void *u)
{
    ag_graph_release_kernels(u);
}

static void release_stream_graphs(void *s)
{
    ag_graph_release_stream((CUstream)s);
}

/* A stream is destroyed (its held work was issued just before, where the engine runs): paused or not, every
 * engine's graphs drawn from its flags go (ag_graph_release_stream). */
void ag_engine_stream_gone(CUstream s)
{
    each_engine(release_stream_graphs, (void *)s);
}

void ag_engine_unload_begin(ag_unload_t *u, int library, const void *handle)
{
    /* a library's CUfunctions are told apart in the calling thread's context, and only where that is the
     * one context any engine serves (layouts are made by engines only) */
    CUcontext cur = NULL;
    int one = engine_count() == 1 && ag_drv.cuCtxGetCurrent && ag_drv.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur &&
              cur == engines[0].ctx;
    ag_unload_collect(u, library, handle, one);
    ag_layouts_forget(u);
}

/* A module or library was unloaded (the held work that used its kernels was issued by the barrier before
 * the call), the engine running or paused: the driver may give their handles to other kernels from now on,
 * with other parameters and code, so those kernels' layouts are asked for again and every graph that holds
 * one of them is built anew from the work it next holds (a graph or layout kept through a pause would meet
 * the new kernel once the program resumes); the other kernels' layouts and graphs stay. After the driver
 * call, not before: a launch of the old kernels in between would cache their layouts again. */
void ag_engine_kernels_gone(ag_unload_t *u)
{
    ag_layouts_forget(u);
    each_engine(release_graphs, u);
    ag_unload_free(u);
}

/* The program's own capture or graph launch comes next: a learning window open in any engine closes
 * first. A window's callbacks make each graph launch cost 200-365 us on the H200, and a graph launched under
 * its kernel activity must not be launched again while cuptiFinalize runs (observer.c, GR: the driver call
 * itself holds finalizes off; this keeps the program's graphs from being traced at all, but for a window
 * another thread opens before the call). A CUPTI still warm from cuInit is finalized at the first one. */
static void app_graph(ag_id_t id)
{
    AG_LOG_CAPPED(AG_LOG_DEBUG, "the program's own %s (CUPTI %s; captures under way: %d)", ag_hook_names[id],
                  ag_cupti_attached() ? "attached" : "not attached",
                  __atomic_load_n(&g_app_captures, __ATOMIC_RELAXED));
    ag_cupti_app_graph();
    struct engine *t = __atomic_load_n(&g_timer, __ATOMIC_ACQUIRE);
    if (!t || ag_cupti_mode() != AG_CUPTI_LEARN)
        return;
    struct engine *prev = eng;
    visit(t->idx);
    if (E.cupti_learning)
        cupti_learning(0);
    unvisit();
    use(prev);
}

static void engine_barrier(ag_id_t id)
{
    int kind = ag_hook_kinds[id];
    /* The program's capture visits every engine under its lock, not only those seen holding work: a thread
     * of another engine that took its lock before the capture was counted may be about to hold a call, which
     * must reach the driver before the capture begins (the capture's stream may be that engine's context's,
     * begun from another context: difftest.directed.legacy_capture). */
    barrier_engines_(current_engine(0), 0xba77ULL + (uint64_t)id, FB_BARRIER, kind == AG_KIND_CAPTURE);
    if (kind == AG_KIND_GRAPH || kind == AG_KIND_CAPTURE)
        app_graph(id);
}

/* A barrier hook's: its call goes to the driver next, timed where the engine asks (arm_wait). */
void ag_engine_barrier(ag_id_t id)
{
    tl_may_wait = 1;
    engine_barrier(id);
    tl_may_wait = 0;
}

/* This thread has called a hook that may defer work (a launch, memset, copy, event record or wait): its
 * syncs and queries belong to the order of the work the engine learns. A thread that never did (a
 * watchdog polling events) only observes. Read from the thread's own call counts (found once, kept). */
static AG_TLS int tl_issuer;
static int issuer(void)
{
    const ag_tcount_t *t = ag_tc;
    for (int i = 0; !tl_issuer && t && i < AG_ID_COUNT; i++) {
        unsigned k = ag_hook_kinds[i];
        tl_issuer = AG_KIND_IS_DEFERRABLE(k) && atomic_load_explicit(&t->n[i], memory_order_relaxed) > 0;
    }
    return tl_issuer;
}

static void timed_add(void *ev)
{
    ag_ptrset_add(&E.timed_events, (uint64_t)(uintptr_t)ev); /* out of memory: it stays held */
}

/* A stream sync or query of stream s (NULL: a sync of the current context) from a thread that issues
 * work: it observes the work of its own context's engine (home), where it ends the segment, and of no
 * other context but through events
 * (handled where they are recorded and waited for), unless s is a created stream of another context
 * with work held there (a stream handle names its context). Without a home engine (no context, or none
 * for it): as any barrier. Other engines' segments go on: a thread per GPU that syncs its own stream
 * does not cut the chunks of the others. */
static void stream_barrier(struct engine *home, CUstream s, uint64_t kind)
{
    if (!home) {
        barrier_engines(NULL, kind, FB_BARRIER);
        return;
    }
    int created = s && s != CU_STREAM_LEGACY && s != CU_STREAM_PER_THREAD;
    struct engine *prev = eng;
    for (int i = 0, n = engine_count(); i < n; i++) {
        struct engine *e = &engines[i];
        if (e != home && (!created || !holding(e)))
            continue;
        if (visit(i)) {
            int on_s = e == home;
            for (uint32_t k = 0; k < E.npending && !on_s; k++)
                on_s = E.pending[k].stream == s;
            if (on_s)
                barrier_in_ctx(kind, FB_BARRIER);
        }
        unvisit();
    }
    use(prev);
}

/* How many queries of held records are answered "not ready" while the same work is held (one pending
 * list, whatever events they ask about) before the held work is issued for the next one instead: a
 * thread that polls in a loop gets its answer after a few microseconds, as it would from a busy GPU, not
 * after the stall watcher's period. 16, not fewer: PyTorch's page-locked host allocator queries the oldest
 * event it waits for at each allocation, and a DataLoader's pin-memory thread that pins two batches ahead
 * makes four such allocations, the program's own loss.item() one more, while one record is held (with a
 * limit of 4 per record, 15-19 of 200 steps had their chunk cut there on the H200). */
#define NOT_READY_MAX 16

/* A query of a held record (an observer's, or a distant one of a thread that issues work): 1 where it is
 * answered "not ready" (what CUDA could answer of a record it had just been given: the work before it has
 * not run), 0 where the held work is to be issued first. PyTorch's page-locked host allocator queries, at
 * each allocation (from a DataLoader's pin-memory thread), the event recorded when an earlier batch's
 * block was freed; a flush there cut the training step's chunk at a random point. */
static int answer_not_ready(void)
{
    if (E.nr_drains != E.drains)
        E.nr_drains = E.drains, E.nr_asked = 0;
    if (E.nr_asked + 1 > NOT_READY_MAX)
        return 0;
    E.nr_asked++;
    return 1;
}

/* ev's latest record is held back (a record of the pending list) */
static int record_held(CUevent ev)
{
    for (int k = 0; E.npending && k < E.nrecs; k++)
        if (E.recs[k].ev == ev)
            return 1;
    return 0;
}

/* A query, from a thread that issues work, of an event recorded since the last barrier at least this many
 * operations before (in the engine's order) is no barrier: the record was issued since, and the driver
 * answers, or it is still held, and it is answered "not ready" as an observer's is. PyTorch's page-locked
 * host allocator, at an allocation of the program's own thread (loss.item() copies the loss through such
 * memory), queries the events recorded when the step's batches, copied from page-locked memory at the
 * step's start, were freed, as far as the DataLoader's pin-memory thread has not: a barrier there came
 * at a point that varies with the threads' timing, in the middle of the step's last chunk. A query right
 * after its record (a program polling the event it has just recorded, as its own sync point) stays a
 * barrier. */
#define DISTANT_OPS 32

static CUresult observe(ag_id_t id, CUevent a, CUevent b, CUstream s)
{
    if ((id == AG_ID_cuEventElapsedTime || id == AG_ID_cuEventElapsedTime_v2) && a && b) {
        /* timed events: their records are issued where they are made from now on (a record held in
         * a chunk is made after the chunk's graph); whichever engine records them */
        each_engine(timed_add, a);
        each_engine(timed_add, b);
    }
    struct engine *home = current_engine(0), *prev = eng;
    uint64_t kind = 0xba77ULL + (uint64_t)id;
    if (issuer()) {
        /* Events recorded before an engine's last barrier were issued there: a barrier only in the
         * engines where one was recorded since (decided by the program's order alone, so learning and
         * replay see the same segments). A stream or the context: as any barrier. */
        if (!a && !b) {
            if (id == AG_ID_cuStreamSynchronize || id == AG_ID_cuStreamSynchronize_ptsz ||
                id == AG_ID_cuStreamQuery || id == AG_ID_cuStreamQuery_ptsz)
                stream_barrier(home, s, kind);
            else if (id == AG_ID_cuCtxSynchronize && home)
                stream_barrier(home, NULL, kind); /* the current context's work only */
            else
                barrier_engines(home, kind, FB_BARRIER);
            return CUDA_SUCCESS;
        }
        int ended = 0, distant = 0;
        CUresult answer = CUDA_SUCCESS;
        for (int i = 0, n = engine_count(); i < n; i++) {
            if (visit(i) && ((a && seg_recorded(a)) || (b && seg_recorded(b)))) {
                int far = id == AG_ID_cuEventQuery && seg_record_age(a) >= DISTANT_OPS;
                int held = far && record_held(a);
                if (far && (!held || answer_not_ready())) {
                    distant++;
                    if (held)
                        answer = CUDA_ERROR_NOT_READY, E.distant_not_ready++;
                    else
                        E.distant_passed++;
                } else {
                    barrier_in_ctx(kind, FB_BARRIER);
                    ended++;
                }
            }
            unvisit();
        }
        if (!ended && !distant && home) {
            use(home);
            lock_take(&E.lock);
            E.old_event_passed++;
            lock_give(&E.lock);
        }
        use(prev);
        return answer;
    }
    /* A thread that issues no work: a barrier only in the engines whose held work it may observe. */
    CUresult answer = CUDA_SUCCESS;
    for (int i = 0, n = engine_count(); i < n; i++) {
        if (visit(i)) {
            /* a stream or the context: any held work may be in it */
            int held = (!a && !b) ? E.npending > 0 : (a && record_held(a)) || (b && record_held(b));
            if (held && id == AG_ID_cuEventQuery && answer_not_ready()) {
                answer = CUDA_ERROR_NOT_READY;
                E.observer_not_ready++;
            } else if (held) {
                E.observer_flushes++;
                barrier_in_ctx(kind, FB_BARRIER);
            } else if (&engines[i] == home || (!home && i == 0)) {
                E.observer_passed++;
            }
        }
        unvisit();
    }
    use(prev);
    return answer;
}

/* A sync or query hook's: its call goes to the driver next, timed where the engine asks (arm_wait), unless
 * the engine answers it (not CUDA_SUCCESS: the hook returns that). */
CUresult ag_engine_observe(ag_id_t id, CUevent a, CUevent b, CUstream s)
{
    tl_may_wait = 1;
    CUresult r = observe(id, a, b, s);
    tl_may_wait = 0;
    return r;
}

/* cuEventDestroy. A held record or wait of the event must reach the driver before the destroy does. It
 * matters in each engine whose segment recorded or waited for the event since its last barrier (decided by
 * the program's order, as every barrier, so that learning and replay cut the same segments):
 *   - AUTOGRAPH_EVENT_DESTROY=barrier (the default): the destroy is a barrier there (the held work first);
 *   - 'defer': it does not end the segment. The event leaves the segment's lists (a later event the driver
 *     gives the same handle is another one), and where operations are held back the engine keeps it and
 *     destroys it once they are issued (reap); the call returns success at once, as CUDA's would (a destroy
 *     never waits for the event's work). PyTorch's autograd hands each gradient to another stream that way,
 *     an event recorded, waited for and destroyed per gradient, and the waits replay with the work around
 *     them. Past DEAD_MAX such destroys in a segment, or where several engines name the event, it is a
 *     barrier there as with 'barrier'.
 * In engines that do not name it, no held operation does (they all came since that barrier) and it passes:
 * an event made and dropped every step (PyTorch frees a torch.cuda.Event when its last reference goes, and
 * makes two for every copy between GPUs) does not end the segment. Returns 1 where the engine keeps the
 * event. */
static void timed_forget(void *ev)
{
    ag_ptrset_remove(&E.timed_events, (uint64_t)(uintptr_t)ev);
}

static int seg_names(CUevent ev)
{
    return seg_recorded(ev) || seg_has(E.seg_waits, E.nseg_waits, ev);
}

/* ev out of a segment list (one that overflowed keeps counting every event as in it), and out of ops
 * (the records' operations, NULL for the waits' list) */
static void seg_forget(CUevent *list, uint64_t *ops, int *n, CUevent ev)
{
    for (int i = 0; *n <= SEG_RECORDS && i < *n; i++)
        if (list[i] == ev) {
            list[i] = list[--*n];
            if (ops)
                ops[i] = ops[*n];
            return;
        }
}

/* Under the lock of the one engine whose segment names ev: 1 where it keeps ev to destroy later. */
static int destroy_named(CUevent ev, uint64_t kind)
{
    if (!seg_names(ev))
        return 0; /* its segment ended meanwhile: the work that named it is issued */
    if (E.seg_dead >= DEAD_MAX || E.ndead >= DEAD_MAX) {
        barrier_in_ctx(kind, FB_BARRIER);
        return 0;
    }
    E.seg_dead++;
    E.event_destroys_in_segment++;
    seg_forget(E.seg_recs, E.seg_rec_ops, &E.nseg_recs, ev);
    seg_forget(E.seg_waits, NULL, &E.nseg_waits, ev);
    for (int k = 0; k < E.nrecs; k++)
        if (E.recs[k].ev == ev)
            E.recs[k].ev = NULL; /* a later wait for the handle is not a wait for this record */
    if (!E.npending)
        return 0; /* nothing held (the job was settled by visit): the driver destroys it now */
    E.dead[E.ndead++] = ev;
    E.event_destroys_after_issue++;
    return 1;
}

int ag_engine_event_destroy(ag_id_t id, CUevent ev)
{
    uint64_t kind = 0xba77ULL + (uint64_t)id;
    if (!ev || __atomic_load_n(&g_app_captures, __ATOMIC_RELAXED) > 0) {
        engine_barrier(id);
        return 0;
    }
    int n = engine_count(), named = -1, several = 0, kept = 0;
    if (!n)
        return 0;
    struct engine *prev = eng;
    if (ag_opt(AG_OPT_EVENT_DESTROY)->num == AG_EVDESTROY_BARRIER) {
        each_engine(timed_forget, ev);
        several = foreign_event(ev, NULL, kind, FB_BARRIER) > 0; /* a barrier in each engine that names it */
    } else {
        for (int i = 0; i < n; i++) { /* one visit each: forgotten as timed, and which engines name it */
            if (visit(i)) {
                timed_forget(ev);
                if (seg_names(ev)) {
                    several |= named >= 0;
                    named = i;
                }
            }
            unvisit();
        }
        if (several)
            foreign_event(ev, NULL, kind, FB_BARRIER);
    }
    if (!several && named >= 0) {
        if (visit(named))
            kept = destroy_named(ev, kind);
        unvisit();
    } else if (!several) {
        /* the engines that do not name it go on: a thread's event destroyed does not cut another GPU's chunks */
        struct engine *home = current_engine(0);
        use(home ? home : &engines[0]);
        lock_take(&E.lock);
        E.event_destroys_passed++;
        lock_give(&E.lock);
    }
    use(prev);
    return kept;
}

/* Each device's primary context, as the last successful cuDevicePrimaryCtxRetain returned it (NULL where
 * none was seen): a reset or last release of a device ends that context, and leaves the contexts the
 * program made on the device alone. */
#define PRIMARY_DEVICES 64
static CUcontext g_primary[PRIMARY_DEVICES];

void ag_engine_primary_retained(CUdevice dev, CUcontext ctx)
{
    if (dev >= 0 && dev < PRIMARY_DEVICES)
        __atomic_store_n(&g_primary[dev], ctx, __ATOMIC_RELEASE);
}

/* Whether a primary context's reset or release on device dev may end the context of the engine in use:
 * it is on dev, and its context is dev's primary one or, where no retain of that was seen, may be. (A
 * reset stopped the engine of a context made on the device too: that engine was replaced by a new one,
 * which learned everything again, and the old one's streams, graphs and buffers, still the live
 * context's, were never freed.) */
static int on_primary(CUdevice dev)
{
    if (dev != E.dev)
        return 0;
    CUcontext p = dev >= 0 && dev < PRIMARY_DEVICES ? __atomic_load_n(&g_primary[dev], __ATOMIC_ACQUIRE) : NULL;
    return !p || p == E.ctx;
}

/* visit for a context's end: the engines that run, and those a failure of their own disabled (the end
 * frees their slot and their context's handle: a later context given that handle found the failed
 * engine, and ran plain, before). Not those already ended, nor those the exit or a fork disabled. */
static int visit_live(int i)
{
    (void)visit(i);
    return E.ready && !E.ctx_ended && (!E.disabled || E.failed);
}

/* Whether the context call id names (cuCtxDestroy: ctx; a primary context's reset: that of device dev)
 * may be the context of the engine in use, asked before the call. */
static int names_context(ag_id_t id, CUcontext ctx, CUdevice dev)
{
    return id == AG_ID_cuCtxDestroy_v2 ? ctx == E.ctx : on_primary(dev);
}

/* The engine in use (visited) stops: its context ended, or is ending (id names the call). */
static void stop_engine(ag_id_t id)
{
    if (E.npending && !E.disabled) /* another thread's (the caller's went at its barrier): before the end */
        barrier_in_ctx(0xc7e0dULL, FB_CONTEXT);
    E.disabled = 1;
    __atomic_store_n(&E.ctx_ended, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&E.ctx, NULL, __ATOMIC_RELAXED); /* never found again */
    issuer_quit();
    /* its learning window closes (no other engine could open one while it stayed open); in the modes
     * that keep CUPTI attached, the next engine made times its segments instead */
    if (__atomic_load_n(&g_timer, __ATOMIC_ACQUIRE) == eng) {
        if (E.cupti_learning)
            cupti_learning(0);
        else
            __atomic_store_n(&g_timer, NULL, __ATOMIC_RELEASE);
    }
    /* its modules went with it: their CUfunction handles may be other kernels' from now on */
    ag_layouts_forget_engine((unsigned)E.idx);
    __atomic_add_fetch(&g_ctx_ends, 1, __ATOMIC_RELEASE);
    ag_log(AG_LOG_DEBUG, "the context of engine %d %s (%s): the engine stops", E.idx,
           id == AG_ID_cuCtxDestroy_v2 ? "is being destroyed"
           : id == AG_ID_cuDevicePrimaryCtxReset_v2 || id == AG_ID_cuDevicePrimaryCtxReset ? "is being reset"
                                                                                             : "ended",
           ag_hook_names[id]);
}

/* Before a context's destroy or a primary context's reset: the engine of that context stops now, not
 * after the call. During the call the driver frees what the engine made in the context (its page-locked
 * staging buffers, streams, graphs) and may hand the context's handle out again before the call returns:
 * another thread's new context then found the old engine by that handle, and copied a pageable source
 * into a staging buffer the driver had freed (a crash in about 1 of 30 runs of
 * difftest.directed.ctx_cycle_threads_reuse on a loaded two-CPU machine). Where the call fails after all
 * (an application's error), the engine has stopped anyway: the context's next call gets a new one. (Not
 * before a release, which ends the context only where it was the last reference: a program may retain
 * and release it around each use, and would pay every kernel's layout query, and learn everything, again.) */
void ag_engine_context_ending(ag_id_t id, CUcontext ctx, CUdevice dev)
{
    if (id != AG_ID_cuCtxDestroy_v2 && id != AG_ID_cuDevicePrimaryCtxReset_v2 && id != AG_ID_cuDevicePrimaryCtxReset)
        return;
    struct engine *prev = eng;
    for (int i = 0, n = engine_count(); i < n; i++) {
        if (visit_live(i) && names_context(id, ctx, dev))
            stop_engine(id);
        unvisit();
    }
    use(prev);
}

/* After a primary context's release (the call succeeded): the engine of the device's primary context
 * (on_primary) stops where the release left that context inactive. What it made in that context is left
 * alone: destroying it now could only fail. (A destroy's and a reset's engine stopped before the call,
 * ag_engine_context_ending: an engine found by the handle now is a new context's, made during the call
 * where the driver gave the handle out again; stopping it here dropped the work it held for that
 * context, and difftest.directed.ctx_cycle_threads_reuse read wrong results.) */
void ag_engine_context_end(ag_id_t id, CUcontext ctx, CUdevice dev)
{
    (void)ctx;
    if (id != AG_ID_cuDevicePrimaryCtxRelease_v2 && id != AG_ID_cuDevicePrimaryCtxRelease)
        return;
    struct engine *prev = eng;
    int active = -1; /* the primary context's state, asked once */
    for (int i = 0, n = engine_count(); i < n; i++) {
        if (visit_live(i) && on_primary(dev)) {
            unsigned flags = 0;
            if (active < 0 && ag_drv.cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS)
                active = 0; /* cannot tell: as if it ended */
            if (!active)
                stop_engine(id);
        }
        unvisit();
    }
    use(prev);
}

int ag_engine_capture_counted(ag_id_t id)
{
    /* A begin is counted before its barrier: from then on every engine passes its calls to the driver (each
     * after what it held, enter_locked), and the barrier issues what was held before the count, so no work
     * is held between the barrier and the capture and issued into it, where CUDA could refuse it (work of
     * the legacy stream beside a blocking stream's capture, in every capture mode: capture_rules.expected's
     * blk-* rows; relaxed frees do not help there). */
    if (!capture_begins(id))
        return 0;
    __atomic_add_fetch(&g_app_captures, 1, __ATOMIC_ACQ_REL);
    return 1;
}

void ag_engine_capture_done(ag_id_t id, CUresult r, int counted)
{
    if (capture_begins(id)) {
        if (counted && r != CUDA_SUCCESS)
            capture_ended(); /* undone */
        return;
    }
    /* An end once the driver call returned: a call held meanwhile could be issued before the capture
     * ended. Counted where it ended one (an error other than these: the wrong stream or thread, the
     * capture goes on, invalidated or not; or none going) */
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED ||
        r == CUDA_ERROR_STREAM_CAPTURE_UNJOINED)
        capture_ended();
}

static void exit_one(void *arg)
{
    (void)arg;
    barrier_in_ctx(0xe817ULL, FB_BARRIER);
    E.disabled = 1;
}

void ag_engine_exit(void)
{
    ag_hook_depth++; /* the held work issued now is the application's, seen by our hooks */
    atomic_store(&ag_engine_on, 0);
    each_engine(exit_one, NULL);
    ag_hook_depth--;
}

/* Under the lock: everything held is issued, and nothing is deferred again. */
static void stop_deferring(void *why)
{
    if (E.guard_stopped)
        return;
    int pushed = own_ctx();
    flush_eager(-1);
    own_ctx_end(pushed);
    E.guard_stopped = 1;
    refresh_candidates();
    if (E.idx == 0 || !engines[0].ready)
        ag_log(AG_LOG_WARN, "%s: the shim stops deferring work", (const char *)why);
}

void ag_engine_unhooked(void)
{
    /* Held work runs before the call (we are in CUPTI's API-entry callback), and the call ends the
     * segment: with the guard attached it is seen every time, so the learner cuts there. A call before
     * the engines' first operation still counts. */
    barrier_engines(current_engine(0), UNHOOKED_KIND, FB_UNHOOKED);
    __atomic_store_n(&g_unhooked_seen, 1, __ATOMIC_RELAXED);
    /* During replay CUPTI is detached and would not see it again: defer nothing from now on. */
    if (ag_cupti_mode() == AG_CUPTI_LEARN)
        each_engine(stop_deferring, "a call reached the driver past every hook (the CUPTI mode 'guard' keeps "
                                    "graphs around such calls, with slower graph launches)");
}

static void unwatch(void *arg)
{
    (void)arg;
    ag_learner_watch(&E.learner, 0);
    if (g_unhooked_seen)
        stop_deferring("the CUPTI guard was released to a profiler after it had seen calls past every hook");
}

void ag_engine_guard_lost(void)
{
    each_engine(unwatch, NULL);
}

void ag_engine_fork_child(void)
{
    /* CUDA cannot be used in a forked child; the child's calls go straight to the driver. */
    for (int i = 0; i < AG_MAX_ENGINES; i++) {
        atomic_store_explicit(&engines[i].lock.v, 0, memory_order_relaxed);
        engines[i].disabled = 1;
        /* no issuer thread here: a job it had is the parent's (settle finds none to wait for) */
        atomic_store(&engines[i].job.state, JOB_IDLE);
        engines[i].issuer = -1;
    }
    pthread_mutex_init(&engines_lock, NULL);
    pthread_mutex_init(&reclaim_lock, NULL);
    ag_capture_fence_fork_child();
    atomic_store(&ctx_query, NULL);
    atomic_store(&ag_engine_on, 0);
}

/* Every engine lock, in index order (no path holds two of them otherwise), then the list's lock (taken
 * under an engine's at a barrier, never the other way round). */
void ag_engine_thread_exit(void)
{
    ag_graph_thread_exit();
    ag_record_thread_exit();
}

void ag_engine_fork_prepare(void)
{
    for (int i = 0; i < AG_MAX_ENGINES; i++)
        lock_take(&engines[i].lock);
    pthread_mutex_lock(&engines_lock);
}

void ag_engine_fork_parent(void)
{
    pthread_mutex_unlock(&engines_lock);
    for (int i = AG_MAX_ENGINES - 1; i >= 0; i--)
        lock_give(&engines[i].lock);
}

void ag_engine_start(void)
{
    if (ag_opt(AG_OPT_SCOPE)->num != AG_SCOPE_OFF)
        atomic_store(&ag_engine_on, 1);
}

/* autograph_pause (exported): the engine steps aside (pause != 0) or comes back (pause == 0). Paused, every
 * call goes to the driver as with AUTOGRAPH_SCOPE=off; what was held back is issued first, and a learning
 * window closes. What was learned stays: a program that comes back at the point of its loop where it
 * paused (after a step's sync, with nothing held) is replayed again from there; one that comes back
 * elsewhere meets a mismatch and learns again. For comparisons inside one process (tests/python/torch_mlp.py --ab).
 * Returns whether it was paused before, or -1 where the engine does not run (AUTOGRAPH_SCOPE=off,
 * disabled, a forked child). */
static int paused_from; /* ag_engine_on when paused (AG_ENGINE_ACTIVE or AG_ENGINE_RESTING), 0: not paused */
static pthread_mutex_t pause_lock = PTHREAD_MUTEX_INITIALIZER;

static void pause_one(void *arg)
{
    (void)arg;
    /* Only held work is issued: a barrier where none is held would start the next segment from a point
     * of its own, and the program, coming back where it paused, would be learned anew. */
    if (E.npending)
        barrier_in_ctx(0x9a05eULL, FB_BARRIER);
    if (E.cupti_learning)
        cupti_learning(0);
    /* frees while paused go straight to the driver, unseen: the allocations noted so far are forgotten */
    ag_ptrset_free(&E.async_ptrs);
}

static void resume_one(void *arg)
{
    (void)arg;
    E.pf_other = 1; /* the sighting under way spans the pause: not one to judge the graphs by */
}

AG_EXPORT int autograph_pause(int pause)
{
    ag_hook_depth++; /* the held work issued now is the application's, seen by our hooks */
    pthread_mutex_lock(&pause_lock);
    int was = paused_from != 0, r = was, live = 0;
    for (int i = 0, n = engine_count(); i < n; i++)
        live += !__atomic_load_n(&engines[i].disabled, __ATOMIC_RELAXED);
    if ((engine_count() && !live) || (!was && !atomic_load(&ag_engine_on))) {
        r = -1;
    } else if (pause && !was) {
        /* Another thread's call may be on its way into an engine: from here on none holds anything back,
         * and each issues what its engine holds first (enter_locked). A call that sees the engine off
         * passes it unlocked, so that happens only once every engine's held work is issued. */
        __atomic_store_n(&g_pausing, 1, __ATOMIC_RELEASE);
        each_engine(pause_one, NULL);
        paused_from = atomic_exchange(&ag_engine_on, 0);
        __atomic_store_n(&g_pausing, 0, __ATOMIC_RELEASE);
    } else if (!pause && was) {
        each_engine(resume_one, NULL);
        atomic_store(&ag_engine_on, paused_from);
        paused_from = 0;
    }
    pthread_mutex_unlock(&pause_lock);
    ag_hook_depth--;
    return r;
}

/* Statistics over every engine: the counts summed, the graph module's with them. */
typedef struct {
    uint64_t deferred, replayed, graph_launches, match_ns, match_timed, match_lock_ns, eager_kernels;
    uint64_t replay_host_ns, rests, rested_segments, rest_ended_by_ops, copies_out, d2h_pinned_held;
    uint64_t staged_h2d, staged_h2d_bytes, staged_d2h_bytes;
    uint64_t timed_records, event_destroys_passed, event_destroys_in_segment, event_destroys_after_issue;
    uint64_t chunks_without_nodes, reissue_failures, engines_disabled;
    uint64_t segments_timed, segments_gpu_bound, segments_planned;
    uint64_t segments_gpu_paced, segments_paced_by_wait, wt_arms, wt_weighed, wt_long, graphs_at_second;
    uint64_t plans_weighed[2];
    uint64_t trials_begun, trials_kept, trials_dropped, trial_pairs, models_refused;
    uint64_t wide_starts, wide_chosen, renamed, renames_wrong, starts_unmatched;
    uint64_t observer_passed, observer_flushes, observer_not_ready, old_event_passed, distant_passed, distant_not_ready;
    uint64_t frees_held, frees_oom_released, stalls, build_ns, patch_ns, launch_ns, reissue_ns, copy_wait_ns;
    uint64_t eager_own_ns, eager_own_timed, eager_own_long[2], eager_own_long_ns[2], eager_own_max, eager_own_best_n;
    uint64_t timer_ns; /* the most any engine measured for a clock read */
    double eager_own_median;
    uint64_t match_phase_ns[TS_COUNT + 1], match_phased, fallbacks[FB_COUNT];
    uint64_t pf_probes, pf_left_eager, pf_kept, pf_held, pf_probe_kernels, s_windows, s_launches;
    uint64_t jobs, jobs_taken_back, jobs_waited, job_wait_ns, issuer_ns, jobs_begun, job_start_ns, job_builds;
    double s_busy_ms, s_span_ms, eager_median, match_median;
    size_t variants, async_ptrs;
    int guard_stopped, ctx_ended;
    unsigned long long eager_n, eager_sum, eager_best_n, match_best_n;
    ag_graph_stats_t gs;
} totals_t;

static void add_totals(void *arg)
{
    totals_t *t = arg;
    ag_graph_stats_t gs;
    ag_graph_stats(&gs);
    t->gs.built += gs.built, t->gs.evicted += gs.evicted, t->gs.patched += gs.patched;
    for (int i = 0; i < 3; i++)
        t->gs.patched_by[i] += gs.patched_by[i], t->gs.patch_drv_ns[i] += gs.patch_drv_ns[i];
    t->gs.live += gs.live, t->gs.mem += gs.mem, t->gs.thread_stages += gs.thread_stages;
    t->gs.mixing_legacy += gs.mixing_legacy, t->gs.released += gs.released, t->gs.refused += gs.refused;
    t->deferred += E.deferred, t->replayed += E.replayed, t->graph_launches += E.graph_launches;
    t->match_ns += E.match_ns, t->match_timed += E.match_timed, t->match_lock_ns += E.match_lock_ns;
    t->eager_kernels += E.eager_kernels, t->replay_host_ns += E.replay_host_ns;
    t->rests += E.rest.rests, t->rested_segments += E.rested_segments, t->rest_ended_by_ops += E.rest_ended_by_ops;
    t->copies_out += E.copies_out, t->d2h_pinned_held += E.d2h_pinned_held;
    t->staged_h2d += E.staged_h2d, t->staged_h2d_bytes += E.staged_h2d_bytes;
    t->staged_d2h_bytes += atomic_load(&E.staged_d2h_bytes);
    t->timed_records += E.timed_records, t->event_destroys_passed += E.event_destroys_passed;
    t->event_destroys_in_segment += E.event_destroys_in_segment;
    t->event_destroys_after_issue += E.event_destroys_after_issue;
    t->chunks_without_nodes += E.chunks_without_nodes;
    t->reissue_failures += E.reissue_failures;
    t->segments_timed += E.learner.segments_timed, t->segments_gpu_bound += E.learner.segments_gpu_bound;
    t->segments_planned += E.learner.segments_planned, t->segments_gpu_paced += E.learner.segments_gpu_paced;
    t->segments_paced_by_wait += E.learner.segments_paced_by_wait;
    t->wt_arms += E.wt_arms, t->wt_weighed += E.learner.waits_weighed, t->wt_long += E.learner.waits_long;
    t->plans_weighed[0] += E.plans_weighed[0], t->plans_weighed[1] += E.plans_weighed[1];
    t->trials_begun += E.learner.trials_begun, t->trials_kept += E.learner.trials_kept;
    t->trials_dropped += E.learner.trials_dropped, t->trial_pairs += E.learner.trial_pairs;
    t->models_refused += E.learner.models_refused;
    t->graphs_at_second += E.graphs_at_second, t->observer_passed += E.observer_passed;
    t->wide_starts += E.wide_starts, t->wide_chosen += E.wide_chosen;
    t->starts_unmatched += E.starts_unmatched;
    t->renamed += E.learner.renamed, t->renames_wrong += E.learner.renames_wrong;
    t->observer_flushes += E.observer_flushes, t->old_event_passed += E.old_event_passed;
    t->observer_not_ready += E.observer_not_ready;
    t->distant_passed += E.distant_passed, t->distant_not_ready += E.distant_not_ready;
    t->frees_held += E.frees_held, t->frees_oom_released += E.frees_oom_released, t->stalls += E.stalls;
    t->build_ns += E.build_ns, t->patch_ns += E.patch_ns, t->launch_ns += E.launch_ns;
    t->reissue_ns += E.reissue_ns, t->copy_wait_ns += atomic_load(&E.copy_wait_ns);
    uint64_t own_n = atomic_load(&E.eager_own.n);
    t->eager_own_ns += atomic_load(&E.eager_own.sum), t->eager_own_timed += own_n;
    if (E.timer_ns > t->timer_ns)
        t->timer_ns = E.timer_ns;
    for (int k = 0; k < 2; k++) {
        t->eager_own_long[k] += atomic_load(&E.eager_own_long[k]);
        t->eager_own_long_ns[k] += atomic_load(&E.eager_own_long_ns[k]);
    }
    if (atomic_load(&E.eager_own_max) > t->eager_own_max)
        t->eager_own_max = atomic_load(&E.eager_own_max);
    if (own_n > t->eager_own_best_n) { /* as eager_median below */
        t->eager_own_best_n = own_n;
        t->eager_own_median = ag_sampler_median(&E.eager_own);
    }
    for (int i = 0; i < TS_COUNT + 1; i++)
        t->match_phase_ns[i] += E.match_phase_ns[i];
    t->match_phased += E.match_phased;
    for (int i = 0; i < FB_COUNT; i++)
        t->fallbacks[i] += E.fallbacks[i];
    t->pf_probes += E.pf_probes, t->pf_left_eager += E.pf_left_eager, t->pf_kept += E.pf_kept;
    t->pf_held += E.pf_held, t->pf_probe_kernels += E.pf_probe_kernels;
    t->s_windows += E.S.windows, t->s_launches += E.S.launches;
    t->jobs += E.jobs, t->jobs_taken_back += E.jobs_taken_back, t->jobs_waited += E.jobs_waited;
    t->job_builds += E.job_builds;
    t->job_wait_ns += E.job_wait_ns, t->issuer_ns += E.issuer_ns;
    t->jobs_begun += E.jobs_begun, t->job_start_ns += E.job_start_ns;
    t->s_busy_ms += E.S.busy_ms, t->s_span_ms += E.S.span_ms;
    t->variants += E.learner.table.count, t->async_ptrs += E.async_ptrs.n;
    t->guard_stopped |= E.guard_stopped;
    unsigned long long n = atomic_load(&E.eager_launches.n);
    t->eager_n += n, t->eager_sum += atomic_load(&E.eager_launches.sum);
    if (n > t->eager_best_n) { /* the median of the engine with the most samples */
        t->eager_best_n = n;
        t->eager_median = ag_sampler_median(&E.eager_launches);
    }
    if (E.match_timed > t->match_best_n) { /* the same for the held-back launches */
        t->match_best_n = E.match_timed;
        t->match_median = ag_median_u32(E.matched_ns, E.match_timed);
    }
}

/* The totals of the engines whose slots later contexts took over (reclaim), and how many (under
 * reclaim_lock). */
static totals_t g_retired;
static uint64_t g_nretired;

/* Under the engine's lock (selected): zeroes it but for its lock and index (use() reads it unlocked). The
 * other fields other threads read without the lock are stored to atomically instead, so that such a
 * reader never meets a plain write. */
static void engine_zero(void)
{
#define UNLOCKED(f) {offsetof(struct engine, f), sizeof(((struct engine *)0)->f)}
    size_t keep[][2] = {UNLOCKED(lock),      UNLOCKED(idx), UNLOCKED(disabled),  UNLOCKED(ctx),
                        UNLOCKED(npending),  UNLOCKED(ops), UNLOCKED(drains),    UNLOCKED(job.state),
                        UNLOCKED(ctx_ended), UNLOCKED(rest_left)};
#undef UNLOCKED
    const size_t n = sizeof keep / sizeof keep[0];
    for (size_t i = 1; i < n; i++) /* by offset */
        for (size_t j = i; j > 0 && keep[j][0] < keep[j - 1][0]; j--) {
            size_t t0 = keep[j][0], t1 = keep[j][1];
            keep[j][0] = keep[j - 1][0], keep[j][1] = keep[j - 1][1];
            keep[j - 1][0] = t0, keep[j - 1][1] = t1;
        }
    size_t from = 0;
    for (size_t i = 0; i <= n; i++) {
        size_t to = i < n ? keep[i][0] : sizeof E;
        if (to > from)
            memset((char *)eng + from, 0, to - from);
        if (i < n)
            from = keep[i][0] + keep[i][1];
    }
    __atomic_store_n(&E.disabled, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&E.ctx, NULL, __ATOMIC_RELAXED);
    __atomic_store_n(&E.npending, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&E.ops, 0, __ATOMIC_RELAXED);
    atomic_store(&E.job.state, JOB_IDLE);
    __atomic_store_n(&E.ctx_ended, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&E.rest_left, 0, __ATOMIC_RELAXED);
}

/* Under reclaim_lock and the engine's lock (selected): an engine whose context ended is made over for
 * another context, where nothing of the old one can still run. Its counts join g_retired; its graphs,
 * learner and held-work buffers are freed without any CUDA call (what it made in the old context went
 * with it), and it starts again as if never made, but for its lock, its index, and its drain count,
 * which goes on (a thread that held work in the old one finds nothing of its own held there). Returns 0
 * where it cannot be taken yet: its issuer thread has not left. */
static int reclaim(void)
{
    int st = atomic_load(&E.job.state);
    if (!E.ctx_ended || (st != JOB_IDLE && st != JOB_QUIT) ||
        !(E.issuer == 0 || E.issuer == -1 || (E.issuer == -2 && atomic_load(&E.issuer_gone))))
        return 0;
    if (E.ready) {
        ag_graph_stats_t gs;
        ag_graph_stats(&gs);
        add_totals(&g_retired);
        /* what it held then, gone now */
        g_retired.gs.live -= gs.live, g_retired.gs.mem -= gs.mem;
        g_retired.variants -= E.learner.table.count, g_retired.async_ptrs -= E.async_ptrs.n;
    }
    g_retired.ctx_ended = 1;
    g_retired.engines_disabled += (uint64_t)E.failed;
    g_nretired++;
    ag_graph_retire(); /* first: the learner's variants then hold no graph to release */
    ag_learner_destroy(&E.learner);
    ag_ptrset_free(&E.async_ptrs);
    ag_ptrset_free(&E.timed_events);
    free(E.pending);
    free(E.arena);
    free(E.frees);
    free(E.job.ops);
    free(E.job.arena);
    free(E.job.frees);
    uint64_t drains = E.drains + 1;
    engine_zero();
    __atomic_store_n(&E.drains, drains, __ATOMIC_RELEASE);
    E.S.next_at = SAMPLE_FIRST;
    return 1;
}

/* Every engine's totals; the ended ones too (visit skips disabled engines), those whose slots later
 * contexts took over among them. */
static void gather(totals_t *t)
{
    pthread_mutex_lock(&reclaim_lock);
    *t = g_retired;
    pthread_mutex_unlock(&reclaim_lock);
    struct engine *prev = eng;
    for (int i = 0, n = engine_count(); i < n; i++) {
        use(&engines[i]);
        lock_take(&E.lock);
        settle(); /* its outcome in the counts */
        if (E.ready)
            add_totals(t);
        t->ctx_ended |= E.ctx_ended;
        t->engines_disabled += E.failed;
        lock_give(&E.lock);
    }
    use(prev);
}

void ag_engine_summary(uint64_t *replayed, uint64_t *graphs)
{
    totals_t t;
    gather(&t);
    *replayed = t.replayed;
    *graphs = t.gs.built;
}

/* One member of the "replay" object: "key": {"name": value, ...}, each value with `decimals` digits
 * after the point (counts with 0). */
static void json_object(FILE *f, const char *key, const char *const *names, const double *v, int n, int decimals)
{
    fprintf(f, "    \"%s\": {", key);
    for (int i = 0; i < n; i++)
        fprintf(f, "%s\"%s\": %.*f", i ? ", " : "", names[i], decimals, v[i]);
    fputs("},\n", f);
}

void ag_engine_stats(FILE *f, uint64_t launches)
{
    totals_t t;
    gather(&t);
    const ag_graph_stats_t gs = t.gs;
    double per_match = t.match_timed ? (double)t.match_ns / (double)t.match_timed : 0;
    double per_match_lock = t.match_timed ? (double)t.match_lock_ns / (double)t.match_timed : 0;
    double per_eager = t.eager_n ? (double)t.eager_sum / (double)t.eager_n : 0;
    double per_own = t.eager_own_timed ? (double)t.eager_own_ns / (double)t.eager_own_timed : 0;
    /* over every launch: the ones passed while resting cost the engine nothing */
    double per_launch = launches ? per_own * (double)t.eager_kernels / (double)launches : 0;
    /* the median, not the mean: a kernel's first launch (loading its module) can take a millisecond,
     * and the replayed launches are the steady ones */
    double eager_median = t.eager_median;
    double saved_ms = ((double)t.replayed * eager_median - (double)t.replay_host_ns -
                       (double)t.deferred * per_match) / 1e6;
    fprintf(f, "  \"replay\": {\n    \"launches_deferred\": %llu,\n    \"launches_replayed\": %llu,\n"
               "    \"graphs_built\": %llu,\n    \"graphs_live\": %u,\n    \"graphs_device_bytes\": %zu,\n    \"graphs_evicted\": %llu,\n"
               "    \"graph_builds_refused\": %llu,\n"
               "    \"graphs_mixing_legacy\": %llu,\n    \"graphs_released\": %llu,\n"
               "    \"graph_launches\": %llu,\n    \"nodes_patched\": %llu,\n"
               "    \"host_ns_per_match\": %.1f,\n    \"host_ns_per_match_median\": %.1f,\n"
               "    \"host_ns_per_match_to_lock\": %.1f,\n    \"host_ns_clock_read\": %llu,\n"
               "    \"host_ns_per_eager_launch\": %.1f,\n    \"host_ns_per_eager_launch_median\": %.1f,\n"
               "    \"host_ns_engine_per_eager_launch\": %.1f,\n"
               "    \"host_ns_engine_per_eager_launch_median\": %.1f,\n"
               "    \"eager_launches_engine_long\": {\"sampled\": %llu, \"10us_1ms\": %llu, \"10us_1ms_ms\": %.3f, \"over_1ms\": %llu, \"over_1ms_ms\": %.3f, \"max_us\": %.1f},\n"
               "    \"launches_eager_through_engine\": %llu,\n    \"host_ns_engine_per_launch\": %.1f,\n"
               "    \"rests\": %llu,\n    \"segments_rested\": %llu,\n    \"rests_ended_by_operations\": %llu,\n"
               "    \"host_ms_saved_estimate\": %.3f,\n    \"variants\": %zu,\n"
               "    \"blocking_copies_in_graphs\": %llu,\n    \"blocking_copy_buffers\": %llu,\n"
               "    \"pinned_d2h_copies_held\": %llu,\n"
               "    \"timed_event_records\": %llu,\n    \"event_destroys_passed\": %llu,\n"
               "    \"event_destroys_in_segment\": {\"all\": %llu, \"after_held_work\": %llu},\n"
               "    \"event_chunks_without_graph\": %llu,\n"
               "    \"reissue_failures\": %llu,\n    \"engines_disabled\": %llu,\n"
               "    \"stopped_by_guard\": %s,\n"
               "    \"guard_trusted\": %s,\n    \"context_ended\": %s,\n"
               "    \"segments_timed\": %llu,\n    \"segments_gpu_bound\": %llu,\n    \"segments_planned\": %llu,\n"
               "    \"segments_gpu_paced\": %llu,\n    \"segments_paced_by_wait\": %llu,\n"
               "    \"pace_waits\": {\"armed\": %llu, \"weighed\": %llu, \"over_half_host\": %llu},\n"
               "    \"plans_weighed\": {\"launch_cost_assumed\": %llu, \"launch_cost_measured\": %llu},\n"
               "    \"plan_trials\": {\"begun\": %llu, \"kept\": %llu, \"dropped\": %llu, \"pairs\": %llu, "
               "\"models_refused\": %llu},\n"
               "    \"graphs_at_second_sighting\": %llu,\n"
               "    \"chunks_chosen_by_first_op\": {\"starts\": %llu, \"chosen\": %llu},\n"
               "    \"chunk_starts_unmatched\": %llu,\n"
               "    \"segments_renamed\": {\"renamed\": %llu, \"wrong\": %llu},\n"
               "    \"observer_syncs_passed\": %llu,\n    \"observer_syncs_flushed\": %llu,\n"
               "    \"observer_queries_not_ready\": %llu,\n"
               "    \"old_event_syncs_passed\": %llu,\n"
               "    \"distant_event_queries\": {\"passed\": %llu, \"not_ready\": %llu},\n"
               "    \"async_frees_held\": %llu,\n    \"async_frees_released_for_memory\": %llu,\n"
               "    \"async_allocations_tracked\": %zu,\n    \"stall_flushes\": %llu,\n"
               "    \"capture_fence_waits\": %llu,\n"
               "    \"host_ms\": {\"graph_build\": %.3f, \"patch\": %.3f, \"graph_launch\": %.3f, "
               "\"eager_reissue\": %.3f, \"blocking_copy_wait\": %.3f},\n",
            (unsigned long long)t.deferred, (unsigned long long)t.replayed, (unsigned long long)gs.built, gs.live, gs.mem,
            (unsigned long long)gs.evicted, (unsigned long long)gs.refused, (unsigned long long)gs.mixing_legacy,
            (unsigned long long)gs.released,
            (unsigned long long)t.graph_launches,
            (unsigned long long)gs.patched,
            per_match, t.match_median, per_match_lock, (unsigned long long)t.timer_ns, per_eager, eager_median, per_own, t.eager_own_median,
            (unsigned long long)t.eager_own_timed, (unsigned long long)t.eager_own_long[0], (double)t.eager_own_long_ns[0] / 1e6,
            (unsigned long long)t.eager_own_long[1], (double)t.eager_own_long_ns[1] / 1e6,
            (double)t.eager_own_max / 1e3, (unsigned long long)t.eager_kernels, per_launch,
            (unsigned long long)t.rests, (unsigned long long)t.rested_segments,
            (unsigned long long)t.rest_ended_by_ops, saved_ms, t.variants,
            (unsigned long long)t.copies_out, (unsigned long long)gs.thread_stages,
            (unsigned long long)t.d2h_pinned_held,
            (unsigned long long)t.timed_records, (unsigned long long)t.event_destroys_passed,
            (unsigned long long)t.event_destroys_in_segment, (unsigned long long)t.event_destroys_after_issue,
            (unsigned long long)t.chunks_without_nodes,
            (unsigned long long)t.reissue_failures, (unsigned long long)t.engines_disabled,
            t.guard_stopped ? "true" : "false", g_trusted ? "true" : "false", t.ctx_ended ? "true" : "false",
            (unsigned long long)t.segments_timed, (unsigned long long)t.segments_gpu_bound,
            (unsigned long long)t.segments_planned, (unsigned long long)t.segments_gpu_paced,
            (unsigned long long)t.segments_paced_by_wait, (unsigned long long)t.wt_arms,
            (unsigned long long)t.wt_weighed, (unsigned long long)t.wt_long,
            (unsigned long long)t.plans_weighed[0], (unsigned long long)t.plans_weighed[1],
            (unsigned long long)t.trials_begun, (unsigned long long)t.trials_kept,
            (unsigned long long)t.trials_dropped, (unsigned long long)t.trial_pairs,
            (unsigned long long)t.models_refused,
            (unsigned long long)t.graphs_at_second,
            (unsigned long long)t.wide_starts, (unsigned long long)t.wide_chosen,
            (unsigned long long)t.starts_unmatched, (unsigned long long)t.renamed,
            (unsigned long long)t.renames_wrong,
            (unsigned long long)t.observer_passed, (unsigned long long)t.observer_flushes,
            (unsigned long long)t.observer_not_ready,
            (unsigned long long)t.old_event_passed, (unsigned long long)t.distant_passed,
            (unsigned long long)t.distant_not_ready,
            (unsigned long long)t.frees_held, (unsigned long long)t.frees_oom_released, t.async_ptrs,
            (unsigned long long)t.stalls, (unsigned long long)ag_capture_fence_waits(),
            (double)t.build_ns / 1e6, (double)t.patch_ns / 1e6,
            (double)t.launch_ns / 1e6, (double)t.reissue_ns / 1e6, (double)t.copy_wait_ns / 1e6);
    /* where a held-back launch's time goes (from other samples than host_ns_per_match: compare their sum) */
    static const char *const phase_names[TS_COUNT + 1] = {"record", "enter", "match", "copy", "learn"};
    double phases[TS_COUNT + 1], by_kind[3], drv_ms[3], fb[FB_COUNT];
    for (int i = 0; i < TS_COUNT + 1; i++)
        phases[i] = t.match_phased ? (double)t.match_phase_ns[i] / (double)t.match_phased : 0.0;
    for (int i = 0; i < 3; i++)
        by_kind[i] = (double)gs.patched_by[i], drv_ms[i] = (double)gs.patch_drv_ns[i] / 1e6;
    for (int i = 0; i < FB_COUNT; i++)
        fb[i] = (double)t.fallbacks[i];
    static const char *const kind_names[3] = {"kernel", "memset", "copy"};
    json_object(f, "host_ns_per_match_phases", phase_names, phases, TS_COUNT + 1, 1);
    json_object(f, "nodes_patched_by_kind", kind_names, by_kind, 3, 0);
    json_object(f, "host_ms_patch_driver_by_kind", kind_names, drv_ms, 3, 3);
    json_object(f, "fallbacks", fb_names, fb, FB_COUNT, 0);
    /* through the shim's page-locked staging buffers: pageable sources snapshotted at the call, and the
     * bytes of blocking copies to pageable memory copied out after the wait */
    static const char *const dir_names[2] = {"h2d", "d2h"};
    const double staged_n[2] = {(double)t.staged_h2d, (double)t.copies_out};
    const double staged_b[2] = {(double)t.staged_h2d_bytes, (double)t.staged_d2h_bytes};
    json_object(f, "copies_staged", dir_names, staged_n, 2, 0);
    json_object(f, "bytes_staged", dir_names, staged_b, 2, 0);
    static const char *const probe_names[5] = {"probes", "left_eager", "graphs_kept", "sightings_eager",
                                               "launches_probed"};
    const double probe[5] = {(double)t.pf_probes, (double)t.pf_left_eager, (double)t.pf_kept, (double)t.pf_held,
                             (double)t.pf_probe_kernels};
    json_object(f, "profit", probe_names, probe, 5, 0);
    /* graphs patched and launched by the issuer threads (builds: of those, graphs it built first): taken
     * back by the program's thread before the issuer began them, waited for by a thread that had to observe
     * them, and the issuers' own time; of those the issuer began, the mean time from the hand-over to its
     * start (its wake-up, where it slept) */
    static const char *const issuer_names[7] = {"jobs", "builds", "taken_back", "waited", "wait_ms", "issuer_ms",
                                                "start_us"};
    const double iss[7] = {(double)t.jobs, (double)t.job_builds, (double)t.jobs_taken_back, (double)t.jobs_waited,
                           (double)t.job_wait_ns / 1e6, (double)t.issuer_ns / 1e6,
                           t.jobs_begun ? (double)t.job_start_ns / 1e3 / (double)t.jobs_begun : 0};
    json_object(f, "issuer", issuer_names, iss, 7, 3);
    /* (a window still in flight at exit is not waited for: the driver may be shutting down) GPU time inside our graphs over the span of the sampled windows of replay */
    fprintf(f, "    \"replay_sampled\": {\"windows\": %llu, \"graph_launches\": %llu, \"graph_busy\": ",
            (unsigned long long)t.s_windows, (unsigned long long)t.s_launches);
    if (t.s_span_ms > 0)
        fprintf(f, "%.4f", t.s_busy_ms / t.s_span_ms);
    else
        fputs("null", f);
    /* each context's engine: its device, and what it held back and replayed (those of ended contexts
     * whose engines later ones took over are in the totals, and counted) */
    pthread_mutex_lock(&reclaim_lock);
    unsigned long long retired = (unsigned long long)g_nretired;
    pthread_mutex_unlock(&reclaim_lock);
    fprintf(f, "},\n    \"contexts_retired\": %llu,\n    \"contexts\": [", retired);
    struct engine *prev = eng;
    for (int i = 0, n = engine_count(); i < n; i++) {
        use(&engines[i]);
        lock_take(&E.lock);
        /* its issuer thread: never started, running, ended with the context (still leaving: the 100 ms
         * issuer_quit waits were not enough), or unable to start */
        const char *iss_state = E.issuer == 0                ? "none"
                                : E.issuer > 0               ? "running"
                                : E.issuer == -1             ? "failed"
                                : atomic_load(&E.issuer_gone) ? "ended"
                                                              : "ending";
        fprintf(f, "%s{\"device\": %d, \"launches_deferred\": %llu, \"launches_replayed\": %llu, "
                   "\"graph_launches\": %llu, \"ended\": %s, \"issuer\": \"%s\", \"issuer_jobs\": %llu, "
                   "\"learning_windows\": %llu}",
                i ? ", " : "", E.ready ? (int)E.dev : -1, (unsigned long long)E.deferred,
                (unsigned long long)E.replayed, (unsigned long long)E.graph_launches, E.ctx_ended ? "true" : "false",
                iss_state, (unsigned long long)E.jobs, (unsigned long long)E.windows);
        lock_give(&E.lock);
    }
    use(prev);
    fputs("]\n  },\n", f);
}
