/* The CUPTI observer. libcupti is opened at run time (AUTOGRAPH_CUPTI_LIB, a copy already loaded, the one
 * beside a PyTorch installation's NVIDIA wheels, the toolkit's); without it the observer is off and one
 * info line says why. While attached it
 *  - counts the kernel launches the driver reports (coverage: hooked = CUPTI + replayed),
 *  - is the coverage guard: a launch, copy, memset, sync, query, event or graph launch that reaches the
 *    driver with no hook of ours on the stack (ag_hook_depth == 0) is "unhooked": the engine issues its
 *    deferred work before the call runs (we are in the API-entry callback) and stops deferring,
 *  - records kernel start and end through the activity API (GPU busy fraction while learning), and
 *    the GPU time of each kernel the engine issued eagerly (ag_timing_op: the correlation id of the
 *    launch's API callback ties the kernel's record to the engine's operation), from which the engine
 *    judges whether a segment's graph can pay and where its chunk plan's tail stops shrinking.
 * AUTOGRAPH_CUPTI=learn attaches only while the engine learns (ag_cupti_learning): with callbacks enabled
 * a graph launch costs 200-365 us. Its set-up is paid before the program's loop: at cuInit, before any
 * context exists, libcupti is opened and subscribed to once, then unsubscribed ("warm"). CUPTI's first
 * subscription costs about 4 ms there, and 11-20 ms once contexts and modules exist; after it, until
 * cuptiFinalize, a subscription costs microseconds, so the first learning window no longer pays it
 * inside the loop. A warm CUPTI costs each graph launch about 5 us (tests/gpu/cupti_costs.cu) and each
 * kernel launch about 100 ns (never_repeat, 3-4% on an H100 host): the first window's detach finalizes
 * it, and so do the program's first graph capture or graph launch of its own and the engine's first rest
 * if no window came first. Later windows subscribe afresh
 * (11-20 ms each). A profiler that subscribes later gets CUPTI: the exported cuptiSubscribe /
 * cuptiActivityRegisterCallbacks below release ours first.
 * Locking: started once under a pthread_once; attach and detach under O.lock (the engine calls them under
 * its own lock; the callbacks never take O.lock, only the activity buffer handler does, briefly); a
 * thread's end and a finalize exclude each other under X.mu, a leaf lock (see "a thread's end"). */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "observer.h"

typedef CUptiResult (*subscribe_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
typedef CUptiResult (*unsubscribe_fn)(CUpti_SubscriberHandle);
typedef CUptiResult (*enable_fn)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
typedef CUptiResult (*result_string_fn)(CUptiResult, const char **);
typedef CUptiResult (*cb_name_fn)(CUpti_CallbackDomain, uint32_t, const char **);
typedef CUptiResult (*act_register_fn)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
typedef CUptiResult (*act_kind_fn)(CUpti_ActivityKind);
typedef CUptiResult (*act_flush_fn)(uint32_t);
typedef CUptiResult (*act_next_fn)(uint8_t *, size_t, CUpti_Activity **);
typedef CUptiResult (*finalize_fn)(void);

/* Driver calls the guard watches: whatever can run work or observe it. */
static const char *const watched_prefixes[] = {
    "cuLaunch",        "cuMemcpy",      "cuMemset",           "cuStreamSynchronize", "cuCtxSynchronize",
    "cuEventSynchronize", "cuStreamQuery", "cuEventQuery",     "cuStreamWaitEvent",   "cuEventRecord",
    "cuGraphLaunch",   "cuStreamBeginCapture", "cuStreamEndCapture",
};

static const char *const search_paths[] = {
    "libcupti.so.13",
    "libcupti.so",
    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
    "/usr/local/cuda/lib64/libcupti.so",
    "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so",
};

#define MAX_CBIDS 2048
#define MAX_NAMES 16
#define ACT_BUF_SIZE (1u << 20)
/* launches whose correlation id maps to an engine operation, and kernel times per operation: both
 * cover far more than one learning window (ATTACH_WINDOW operations in engine.c) plus the GPU's lag */
#define CORR_RING 8192
#define OP_RING 16384

/* ST_WARM: subscribed once at cuInit and unsubscribed, not finalized (see the top of this file). */
enum { ST_UNAVAILABLE, ST_ATTACHED, ST_DETACHED, ST_RELEASED, ST_REFUSED, ST_IDLE, ST_WARM };
static const char *const state_names[] = {"unavailable", "attached", "detached", "released", "refused", "idle",
                                          "warm"};

static struct {
    pthread_mutex_t lock;
    int mode, state;
    char library[512];
    void *h;
    CUpti_SubscriberHandle sub;
    subscribe_fn subscribe;
    unsubscribe_fn unsubscribe;
    finalize_fn finalize;
    act_register_fn act_register;
    enable_fn enable;
    act_kind_fn act_enable, act_disable;
    act_flush_fn act_flush;
    act_next_fn act_next;
    int activity; /* the activity API was set up */
    int timing;   /* kernel activity enabled now */
    uint32_t watched[MAX_CBIDS];
    int nwatched;
    unsigned char is_launch[MAX_CBIDS];
    unsigned attaches, detaches, released_to_profiler;
    int warming;        /* start() subscribes and unsubscribes (at cuInit) instead of attaching */
    int warmed;         /* it did */
    unsigned finalizes; /* cuptiFinalize calls: each makes the next subscription pay the set-up again */
    uint64_t warm_ns;   /* host time of opening libcupti and the subscription at cuInit */
    /* guard */
    atomic_llong launches;
    atomic_llong unhooked;
    pthread_mutex_t names_lock;
    char names[MAX_NAMES][48];
    int nnames;
    /* timings, while learning: busy time (union of kernel intervals) within the windows' spans */
    uint64_t kernels, kernel_ns, busy_ns, span_ns;
    uint64_t win_first, win_last, merged_end;
    /* correlation id << 32 | low 32 bits of the engine operation (written on the launching thread) */
    atomic_ullong corr[CORR_RING];
    /* GPU time of the kernel of an engine operation, tagged 1 << 32 | its low 32 bits (under names_lock) */
    struct {
        uint64_t tag, ns;
    } op_ns[OP_RING];
    uint64_t kernels_attributed;
    uint64_t setup_ns; /* host time spent opening, attaching and detaching CUPTI */
    /* how long the windows were open (the program's calls went through CUPTI's callbacks meanwhile, and
     * its kernels through the activity API): attached_at, the open one's attach (0: none open) */
    uint64_t attached_ns, attached_at;
    int app_graphs; /* the program captured or launched a graph of its own */
    int finalized_resting; /* a warm CUPTI was finalized when an engine began to rest */
} O = {.lock = PTHREAD_MUTEX_INITIALIZER, .names_lock = PTHREAD_MUTEX_INITIALIZER, .launches = -1, .state = ST_IDLE};

static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static void start(void);
static void finalize_join(void);
static void end_arm(void);

/* Graph launches (GR below) the calling thread is inside; a CUPTI callback counts as one. */
static AG_TLS int tl_graph_depth;

static void note_name(const char *name)
{
    pthread_mutex_lock(&O.names_lock);
    int known = 0;
    for (int i = 0; i < O.nnames && !known; i++)
        known = strcmp(O.names[i], name) == 0;
    if (!known && O.nnames < MAX_NAMES) {
        snprintf(O.names[O.nnames++], sizeof O.names[0], "%s", name);
        ag_log(AG_LOG_WARN, "%s reached the driver past every hook (CUPTI saw it); deferred work was issued "
                            "before it", name);
    }
    pthread_mutex_unlock(&O.names_lock);
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *data)
{
    (void)userdata;
    const CUpti_CallbackData *cb = data;
    end_arm();
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cb->callbackSite != CUPTI_API_ENTER || ag_guard)
        return;
    if (cbid < MAX_CBIDS && O.is_launch[cbid]) {
        atomic_fetch_add_explicit(&O.launches, 1, memory_order_relaxed);
        if (ag_timing_op && ag_hook_depth)
            atomic_store_explicit(&O.corr[cb->correlationId % CORR_RING],
                                  (unsigned long long)cb->correlationId << 32 | (uint32_t)(ag_timing_op - 1),
                                  memory_order_relaxed);
    }
    if (ag_hook_depth)
        return;
    /* No hook of ours is on this thread's stack: a route we do not intercept. Held work goes first. */
    atomic_fetch_add_explicit(&O.unhooked, 1, memory_order_relaxed);
    note_name(cb->functionName ? cb->functionName : "?");
    ag_hook_depth++;
    /* Held work issued here may launch a graph: it takes no read side inside CUPTI's callback (a finalize
     * holding the write side might wait for the callback to return). */
    tl_graph_depth++;
    ag_engine_unhooked();
    tl_graph_depth--;
    ag_hook_depth--;
}

/* ---- kernel timings (activity API) ---- */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
    *buffer = aligned_alloc(8, ACT_BUF_SIZE);
    *size = *buffer ? ACT_BUF_SIZE : 0;
    *max_records = 0;
}

typedef struct {
    uint64_t start, end;
    uint32_t correlation;
} span_t;

static int by_start(const void *a, const void *b)
{
    const span_t *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The low 32 bits of the engine operation whose launch had this correlation id, if the ring still
 * remembers it (operations are told apart by their low bits: the rings cover far fewer than 2^32). */
static int op_of(uint32_t correlation, uint32_t *op)
{
    unsigned long long e = atomic_load_explicit(&O.corr[correlation % CORR_RING], memory_order_relaxed);
    if (!correlation || (uint32_t)(e >> 32) != correlation)
        return 0;
    *op = (uint32_t)e;
    return 1;
}

/* Folds kernel intervals into the learning-time figures: the GPU is busy while any kernel runs. */
static void fold_kernels(span_t *s, size_t n)
{
    qsort(s, n, sizeof *s, by_start);
    for (size_t i = 0; i < n; i++) {
        if (s[i].end <= s[i].start)
            continue;
        uint32_t op;
        if (op_of(s[i].correlation, &op)) {
            O.op_ns[op % OP_RING].tag = 1ULL << 32 | op;
            O.op_ns[op % OP_RING].ns = s[i].end - s[i].start;
            O.kernels_attributed++;
        }
        O.kernels++;
        O.kernel_ns += s[i].end - s[i].start;
        if (!O.win_first || s[i].start < O.win_first)
            O.win_first = s[i].start;
        if (s[i].end > O.win_last)
            O.win_last = s[i].end;
        uint64_t from = s[i].start > O.merged_end ? s[i].start : O.merged_end;
        if (s[i].end > from)
            O.busy_ns += s[i].end - from;
        if (s[i].end > O.merged_end)
            O.merged_end = s[i].end;
    }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    (void)ctx;
    (void)stream;
    (void)size;
    size_t cap = valid / sizeof(CUpti_ActivityKernel10) + 1, n = 0;
    span_t *s = malloc(sizeof *s * cap);
    CUpti_Activity *rec = NULL;
    while (s && n < cap && O.act_next && O.act_next(buffer, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
            s[n].start = k->start;
            s[n].end = k->end;
            s[n].correlation = k->correlationId;
            n++;
        }
    }
    if (s) {
        pthread_mutex_lock(&O.names_lock);
        fold_kernels(s, n);
        pthread_mutex_unlock(&O.names_lock);
    }
    free(s);
    free(buffer);
}

/* ---- graph launches against cuptiFinalize ----
 * On the H200 a graph launched while CUPTI's kernel activity was on, then launched again while
 * cuptiFinalize ran on another thread, faulted ("unspecified launch failure": torch.cuda.graph's whole
 * step, tests/gpu/owngraph_diag.sh). Graphs that never ran under the activity are launched during
 * finalizes in every run, and so are graphs captured and instantiated under it (the shim's own: a chunk's
 * first graph is built before its window closes, then launched while the finalize runs on the shim's
 * thread). So every graph launch, the shim's and the program's, holds the read side of GR.rw around its
 * driver call and counts whether the activity was on (traced); the activity is turned on under the write
 * side, so a launch either saw it on or came before it. Once any launch was traced, every finalize holds
 * the write side while it runs and graph launches wait for it (2-3.5 ms on the H200); before that the
 * write side is only passed through (the launches in flight end first) and finalizes run beside graph
 * launches. A launch is traced only where a window opens on another thread between the engine's check and
 * the driver call (the engine closes a window before a graph launch, its own or the program's, and runs a
 * chunk eagerly while another engine's is open), or in AUTOGRAPH_CUPTI=always. Writers first: launches
 * back to back from several threads could keep a finalize waiting otherwise (no thread takes the read
 * side twice: tl_graph_depth). */
static struct {
    pthread_rwlock_t rw;
    atomic_uint traced;    /* graph launches made while the kernel activity was on (never reset) */
    atomic_uint exclusive; /* finalizes that held graph launches off */
} GR = {.rw = PTHREAD_RWLOCK_WRITER_NONRECURSIVE_INITIALIZER_NP};

void ag_cupti_graph_enter(void)
{
    if (!tl_graph_depth++)
        pthread_rwlock_rdlock(&GR.rw);
    if (__atomic_load_n(&O.timing, __ATOMIC_RELAXED))
        atomic_fetch_add_explicit(&GR.traced, 1, memory_order_relaxed);
}

void ag_cupti_graph_leave(void)
{
    if (--tl_graph_depth == 0)
        pthread_rwlock_unlock(&GR.rw);
}

/* The write side (graph launches in flight end first): 1, or 0 on a thread inside a graph launch of its
 * own (cannot be: CUPTI is only attached and finalized outside them; taking it there would never return). */
static int graphs_hold(void)
{
    if (tl_graph_depth)
        return 0;
    pthread_rwlock_wrlock(&GR.rw);
    return 1;
}

static void graphs_release(void)
{
    if (!tl_graph_depth)
        pthread_rwlock_unlock(&GR.rw);
}

/* ---- attach / detach (under O.lock) ---- */

static void set_callbacks(int on)
{
    for (int i = 0; i < O.nwatched; i++)
        O.enable((uint32_t)on, O.sub, CUPTI_CB_DOMAIN_DRIVER_API, O.watched[i]);
}

static void set_timing(int on)
{
    if (!O.activity || O.timing == on)
        return;
    if (on) {
        graphs_hold(); /* a graph launch in flight came before the activity, the next ones see it on */
        O.timing = O.act_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
        graphs_release();
    } else {
        O.act_disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        O.timing = 0;
        O.act_flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        /* A window ends: idle time until the next one is not the program's. */
        pthread_mutex_lock(&O.names_lock);
        if (O.win_last > O.win_first)
            O.span_ns += O.win_last - O.win_first;
        O.win_first = O.win_last = 0;
        pthread_mutex_unlock(&O.names_lock);
    }
}

static double ms_since(uint64_t *t)
{
    uint64_t now = ag_now_ns(), d = now - *t;
    *t = now;
    return (double)d / 1e6;
}

/* Subscribes, enables the watched callbacks and (but in guard mode) the kernel timings. The cost of
 * each step is logged at debug level: they are the fixed cost of a learning window. */
static CUptiResult attach(void)
{
    finalize_join(); /* CUPTI is not for use while it finalizes */
    uint64_t t = ag_now_ns();
    CUptiResult r = O.subscribe(&O.sub, on_callback, NULL);
    if (r != CUPTI_SUCCESS)
        return r;
    double sub = ms_since(&t);
    set_callbacks(1);
    double cbs = ms_since(&t), act = 0;
    if (O.mode != AG_CUPTI_GUARD && ag_opt(AG_OPT_CUPTI_TIMING)->num == AG_CUPTI_TIMING_ON && O.act_register &&
        O.act_enable && O.act_disable && O.act_flush && O.act_next) {
        O.activity = O.act_register(buffer_requested, buffer_completed) == CUPTI_SUCCESS;
        set_timing(1);
        act = ms_since(&t);
    }
    ag_log(AG_LOG_DEBUG, "CUPTI attached: subscribe %.3f ms, %d callbacks %.3f ms, kernel activity %.3f ms", sub,
           O.nwatched, cbs, act);
    return CUPTI_SUCCESS;
}

/* ---- a thread's end against cuptiFinalize ----
 * CUPTI keeps state per thread under a pthread key whose destructor, run as a thread ends, checks a global
 * that cuptiFinalize clears, locks, and reads it again without checking it (CUDA 13.0's libcupti, the
 * function at 0x90600): a thread that ends while a finalize runs can die there (a segfault in 1 run of
 * 77-100 of driver_api in three threaded contexts under load on the H200, tests/gpu/ctx_stress.sh). So
 * the two exclude each other. The shim's own key, made before CUPTI first makes its own (glibc runs a
 * thread's key destructors in the keys' order), is set on every thread CUPTI calls back (and the one
 * that subscribes), so at such a thread's end its destructor runs first: it waits while a finalize
 * runs, counts the thread as ending, and sets itself again, which runs it once more after CUPTI's
 * destructor, where it uncounts the thread. A finalize waits while threads are ending, up to
 * END_WAIT_MS (a destructor between the two rounds that waits for a lock the finalizing thread holds
 * would otherwise stall it). */
#define END_WAIT_MS 100
#define END_ARMED ((void *)1)
#define END_ENDING ((void *)2)
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_key_t key;
    int key_made;
    int ending;      /* threads between their two rounds of destructors (under mu) */
    int finalizing;  /* a cuptiFinalize runs (under mu) */
    atomic_uint ends_waited;      /* thread ends that waited for a finalize */
    atomic_uint finalizes_waited; /* finalizes that waited for thread ends */
} X = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
static _Thread_local int end_armed;

static void thread_ends(void *v)
{
    pthread_mutex_lock(&X.mu);
    if (v == END_ARMED) {
        if (X.finalizing)
            atomic_fetch_add(&X.ends_waited, 1);
        while (X.finalizing)
            pthread_cond_wait(&X.cv, &X.mu);
        X.ending++;
        pthread_mutex_unlock(&X.mu);
        if (pthread_setspecific(X.key, END_ENDING) == 0)
            return; /* called again after the keys made later, CUPTI's among them */
        pthread_mutex_lock(&X.mu);
    }
    if (--X.ending == 0)
        pthread_cond_broadcast(&X.cv);
    pthread_mutex_unlock(&X.mu);
}

/* A child of fork has only the thread that forked: none is ending, no finalize runs there. */
static void end_fork_child(void)
{
    pthread_mutex_init(&X.mu, NULL);
    pthread_cond_init(&X.cv, NULL);
    X.ending = X.finalizing = 0;
}

/* Once, before libcupti is opened (CUPTI makes its key at its set-up, or earlier). */
static void end_key_make(void)
{
    if (X.key_made)
        return;
    X.key_made = pthread_key_create(&X.key, thread_ends) == 0;
    if (X.key_made)
        pthread_atfork(NULL, NULL, end_fork_child);
}

/* This thread's end will wait for a running finalize (a thread CUPTI has seen). */
static void end_arm(void)
{
    if (!end_armed && X.key_made) {
        end_armed = 1;
        (void)pthread_setspecific(X.key, END_ARMED);
    }
}

/* cuptiFinalize, with no thread ending meanwhile. */
static void finalize_excluding_ends(void)
{
    pthread_mutex_lock(&X.mu);
    if (X.ending) {
        atomic_fetch_add(&X.finalizes_waited, 1);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += END_WAIT_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        while (X.ending && pthread_cond_timedwait(&X.cv, &X.mu, &until) == 0)
            ;
    }
    X.finalizing = 1;
    pthread_mutex_unlock(&X.mu);
    int excluding = graphs_hold();
    if (excluding && !atomic_load(&GR.traced)) {
        graphs_release(); /* no graph ran under the activity: graph launches go on beside the finalize */
        excluding = 0;
    }
    atomic_fetch_add(&GR.exclusive, (unsigned)excluding);
    O.finalize();
    if (excluding)
        graphs_release();
    pthread_mutex_lock(&X.mu);
    X.finalizing = 0;
    pthread_cond_broadcast(&X.cv);
    pthread_mutex_unlock(&X.mu);
}

/* A finalize on the shim's own thread (AUTOGRAPH_CUPTI_DETACH=background): started under O.lock, and
 * waited for (joined) under it before anything else touches CUPTI again. The thread takes no lock of
 * ours; CUPTI's activity buffer handler may run on it (names_lock only). */
static struct {
    pthread_t thread;
    int running;          /* started and not yet joined (under O.lock) */
    atomic_ullong ns;     /* host time of the finalizes run there */
    atomic_uint joins_waited; /* joins that found it still running */
} F;

static void *finalize_main(void *arg)
{
    (void)arg;
    ag_guard++; /* CUDA calls CUPTI makes from here are its own, not the program's */
    ag_thread_relaxed(); /* it may run while the program captures a graph of its own */
    uint64_t t = ag_now_ns();
    finalize_excluding_ends();
    atomic_fetch_add(&F.ns, ag_now_ns() - t);
    ag_guard--;
    return NULL;
}

/* Waits for a background finalize to end (under O.lock). */
static void finalize_join(void)
{
    if (!F.running)
        return;
    if (pthread_tryjoin_np(F.thread, NULL) != 0) {
        atomic_fetch_add(&F.joins_waited, 1);
        pthread_join(F.thread, NULL);
    }
    F.running = 0;
}

/* cuptiFinalize (when libcupti has it), counted: the next subscription pays CUPTI's set-up again. It
 * takes 2-3.5 ms on the H200 host; in the background (the default) the program's thread goes on with its
 * launches meanwhile (tests/gpu/cupti_costs.cu first both background). Callbacks, kernel activity and
 * the subscription are off before it starts, and the activity records flushed, as cuptiFinalize asks
 * of a caller outside a callback. Where the thread cannot be started it runs here. */
static void finalize(void)
{
    if (!O.finalize)
        return;
    finalize_join();
    O.finalizes++;
    if (ag_opt(AG_OPT_CUPTI_DETACH)->num == AG_CUPTI_DETACH_BACKGROUND) {
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old); /* the program's signals are not for this thread */
        int r = pthread_create(&F.thread, NULL, finalize_main, NULL);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r == 0) {
            F.running = 1;
            static int at_exit_set;
            if (!at_exit_set) /* registered now, after the CUDA runtime's: runs before its teardown */
                at_exit_set = atexit(ag_cupti_quiesce) == 0;
            return;
        }
        ag_log(AG_LOG_DEBUG, "no thread for cuptiFinalize (%s): finalized on the program's thread", strerror(r));
    }
    finalize_excluding_ends();
}

/* Before the process exits or forks: a background finalize ends first. */
void ag_cupti_quiesce(void)
{
    if (!__atomic_load_n(&F.running, __ATOMIC_RELAXED))
        return;
    pthread_mutex_lock(&O.lock);
    finalize_join();
    pthread_mutex_unlock(&O.lock);
}

/* Everything off, and CUPTI detached from the process: a subscriber with every callback disabled, or
 * the activity API set up with no kind enabled, still made each graph launch cost 15-25 us more on the
 * H200. Kernel records still in flight are lost (their kernels ran before the first replay). */
static void detach(void)
{
    if (O.attached_at) {
        O.attached_ns += ag_now_ns() - O.attached_at;
        O.attached_at = 0;
    }
    uint64_t t = ag_now_ns();
    set_callbacks(0);
    double cbs = ms_since(&t);
    set_timing(0);
    double act = ms_since(&t);
    if (O.unsubscribe)
        O.unsubscribe(O.sub);
    double unsub = ms_since(&t);
    finalize();
    double fin = ms_since(&t);
    O.activity = 0;
    ag_log(AG_LOG_DEBUG, "CUPTI detached: callbacks off %.3f ms, activity off and flush %.3f ms, unsubscribe "
                         "%.3f ms, finalize %.3f ms%s", cbs, act, unsub, fin, F.running ? " (to start it in the background)" : "");
}

void ag_cupti_learning(int learning)
{
    if (ag_opt(AG_OPT_CUPTI)->num != AG_CUPTI_LEARN)
        return;
    pthread_mutex_lock(&O.lock);
    ag_guard++;
    uint64_t t0 = ag_now_ns();
    if (learning && O.state == ST_IDLE)
        pthread_once(&start_once, start); /* opens libcupti and attaches, or says why not */
    if (learning && (O.state == ST_DETACHED || O.state == ST_WARM)) {
        CUptiResult r = attach();
        if (r == CUPTI_SUCCESS) {
            O.state = ST_ATTACHED;
            O.attaches++;
            O.attached_at = ag_now_ns();
        } else {
            /* Someone else holds CUPTI now (a profiler that did not come through our cuptiSubscribe). */
            O.state = r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? ST_REFUSED : ST_UNAVAILABLE;
            ag_log(AG_LOG_INFO, "CUPTI cannot be attached again (error %d): the observer is off", (int)r);
        }
    } else if (!learning && O.state == ST_ATTACHED) {
        detach();
        O.state = ST_DETACHED;
        O.detaches++;
    }
    O.setup_ns += ag_now_ns() - t0;
    ag_guard--;
    pthread_mutex_unlock(&O.lock);
}

/* A profiler wants CUPTI: everything of ours goes, for good. */
static void release(const char *why)
{
    pthread_mutex_lock(&O.lock);
    int released = 0;
    int mine = O.state == ST_ATTACHED || O.state == ST_DETACHED || O.state == ST_WARM ||
               (O.state == ST_IDLE && ag_opt(AG_OPT_CUPTI)->num == AG_CUPTI_LEARN);
    if (mine) {
        ag_guard++;
        if (O.state == ST_ATTACHED)
            detach();
        finalize_join(); /* the profiler's subscription comes after our finalize */
        ag_guard--;
        O.state = ST_RELEASED;
        O.released_to_profiler = 1;
        released = 1;
        ag_log(AG_LOG_WARN, "%s: the CUPTI observer steps aside (no coverage guard from now on)", why);
    }
    pthread_mutex_unlock(&O.lock);
    if (released)
        ag_engine_guard_lost();
}

static void *next_cupti_symbol(const char *name)
{
    void *p = ag_real_dlsym(RTLD_NEXT, name);
    if (!p && O.h)
        p = ag_real_dlsym(O.h, name);
    return p;
}

AG_EXPORT CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback,
                                              void *userdata)
{
    release("a profiler subscribed to CUPTI");
    subscribe_fn next = (subscribe_fn)next_cupti_symbol("cuptiSubscribe");
    return next ? next(subscriber, callback, userdata) : CUPTI_ERROR_NOT_INITIALIZED;
}

AG_EXPORT CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                              CUpti_BuffersCallbackCompleteFunc completed)
{
    release("a profiler registered for CUPTI activity records");
    act_register_fn next = (act_register_fn)next_cupti_symbol("cuptiActivityRegisterCallbacks");
    return next ? next(requested, completed) : CUPTI_ERROR_NOT_INITIALIZED;
}

/* ---- loading ---- */

/* dl_iterate_phdr callback: for a loaded object under site-packages/nvidia/ or site-packages/torch/lib/,
 * tries the libcupti of the NVIDIA wheels beside it. Stops at the first that opens. */
static int find_wheel_cupti(struct dl_phdr_info *info, size_t size, void *out)
{
    static const char *const markers[] = {"site-packages/nvidia/", "site-packages/torch/lib/",
                                          "dist-packages/nvidia/", "dist-packages/torch/lib/"};
    static const char *const tails[] = {"nvidia/cu13/lib/libcupti.so.13", "nvidia/cuda_cupti/lib/libcupti.so.13",
                                        "nvidia/cuda_cupti/lib/libcupti.so.12"};
    (void)size;
    const char *path = info->dlpi_name;
    for (size_t m = 0; path && m < sizeof markers / sizeof *markers; m++) {
        const char *at = strstr(path, markers[m]);
        if (!at)
            continue;
        /* keep ".../site-packages/" */
        size_t base = (size_t)(at - path) + (size_t)(strchr(markers[m], '/') - markers[m]) + 1;
        for (size_t t = 0; t < sizeof tails / sizeof *tails; t++) {
            char cand[sizeof O.library];
            if (snprintf(cand, sizeof cand, "%.*s%s", (int)base, path, tails[t]) >= (int)sizeof cand)
                continue;
            void *h = dlopen(cand, RTLD_NOW | RTLD_LOCAL);
            if (h) {
                snprintf(O.library, sizeof O.library, "%s", cand);
                *(void **)out = h;
                return 1;
            }
        }
    }
    return 0;
}

static void *open_cupti(void)
{
    const char *lib = ag_opt(AG_OPT_CUPTI_LIB)->text;
    void *h;
    if (lib && *lib) {
        h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            ag_log(AG_LOG_WARN, "AUTOGRAPH_CUPTI_LIB=%s cannot be opened: %s", lib, dlerror());
        snprintf(O.library, sizeof O.library, "%s", lib);
        return h;
    }
    /* A copy the process already has, then the one beside the CUDA libraries of a PyTorch
     * installation's wheels (same CUDA release as what the program runs), then the toolkit's. */
    for (size_t i = 0; i < 2; i++) {
        h = dlopen(search_paths[i], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (h) {
            snprintf(O.library, sizeof O.library, "%s", search_paths[i]);
            return h;
        }
    }
    h = NULL;
    dl_iterate_phdr(find_wheel_cupti, &h);
    if (h)
        return h;
    for (size_t i = 0; i < sizeof search_paths / sizeof *search_paths; i++) {
        h = dlopen(search_paths[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            snprintf(O.library, sizeof O.library, "%s", search_paths[i]);
            return h;
        }
    }
    return NULL;
}

static int watched_name(const char *name)
{
    for (size_t i = 0; i < sizeof watched_prefixes / sizeof *watched_prefixes; i++)
        if (strncmp(name, watched_prefixes[i], strlen(watched_prefixes[i])) == 0)
            return 1;
    return 0;
}

/* The callback ids to enable: every driver entry point whose name the guard watches. */
static void choose_cbids(cb_name_fn cb_name)
{
    for (uint32_t id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE && id < MAX_CBIDS; id++) {
        const char *name = NULL;
        if (cb_name(CUPTI_CB_DOMAIN_DRIVER_API, id, &name) != CUPTI_SUCCESS || !name || !watched_name(name))
            continue;
        O.watched[O.nwatched++] = id;
        O.is_launch[id] = strncmp(name, "cuLaunch", 8) == 0 && strncmp(name, "cuLaunchHostFunc", 16) != 0;
    }
}

static void start(void)
{
    ag_guard++;
    O.mode = (int)ag_opt(AG_OPT_CUPTI)->num;
    O.state = ST_UNAVAILABLE;
    end_key_make(); /* before libcupti makes its own key, whenever that is */
    uint64_t t_open = ag_now_ns();
    O.h = open_cupti();
    ag_log(AG_LOG_DEBUG, "opening libcupti took %.3f ms", (double)(ag_now_ns() - t_open) / 1e6);
    if (!O.h) {
        ag_log(AG_LOG_INFO, "libcupti not found: the CUPTI observer is off (set AUTOGRAPH_CUPTI_LIB)");
        goto out;
    }
    O.subscribe = (subscribe_fn)ag_real_dlsym(O.h, "cuptiSubscribe");
    O.enable = (enable_fn)ag_real_dlsym(O.h, "cuptiEnableCallback");
    O.unsubscribe = (unsubscribe_fn)ag_real_dlsym(O.h, "cuptiUnsubscribe");
    O.finalize = (finalize_fn)ag_real_dlsym(O.h, "cuptiFinalize");
    O.act_register = (act_register_fn)ag_real_dlsym(O.h, "cuptiActivityRegisterCallbacks");
    O.act_enable = (act_kind_fn)ag_real_dlsym(O.h, "cuptiActivityEnable");
    O.act_disable = (act_kind_fn)ag_real_dlsym(O.h, "cuptiActivityDisable");
    O.act_flush = (act_flush_fn)ag_real_dlsym(O.h, "cuptiActivityFlushAll");
    O.act_next = (act_next_fn)ag_real_dlsym(O.h, "cuptiActivityGetNextRecord");
    cb_name_fn cb_name = (cb_name_fn)ag_real_dlsym(O.h, "cuptiGetCallbackName");
    result_string_fn result_string = (result_string_fn)ag_real_dlsym(O.h, "cuptiGetResultString");
    if (!O.subscribe || !O.enable || !cb_name || (O.warming && !O.unsubscribe)) {
        ag_log(AG_LOG_WARN, "%s lacks cuptiSubscribe/cuptiEnableCallback/cuptiGetCallbackName: the CUPTI "
                            "observer is off", O.library);
        goto out;
    }
    choose_cbids(cb_name);
    end_arm();
    CUptiResult r = O.warming ? O.subscribe(&O.sub, on_callback, NULL) : attach();
    if (r != CUPTI_SUCCESS) {
        const char *s = "?";
        if (result_string)
            result_string(r, &s);
        /* CUPTI takes one subscriber per process: a profiler got there first (said once, as a warning).
         * Any other refusal (no GPU CUPTI can use, a driver it does not know) is only information. */
        if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
            ag_log(AG_LOG_WARN, "CUPTI subscription refused (%s): going on without the observer", s);
            O.state = ST_REFUSED;
        } else {
            ag_log(AG_LOG_INFO, "CUPTI cannot be used here (%s): the CUPTI observer is off", s);
        }
        goto out;
    }
    atomic_store(&O.launches, 0);
    if (O.warming) {
        O.unsubscribe(O.sub);
        O.state = ST_WARM;
        O.warmed = 1;
        ag_log(AG_LOG_DEBUG, "CUPTI warmed at cuInit (%s, %d callback ids): opened, subscribed and unsubscribed "
                             "in %.3f ms", O.library, O.nwatched, ms_since(&t_open));
        goto out;
    }
    O.state = ST_ATTACHED;
    O.attaches = 1;
    ag_log(AG_LOG_DEBUG, "CUPTI observer attached (%s, %d callback ids)", O.library, O.nwatched);
out:
    ag_guard--;
}

int ag_cupti_start(void)
{
    /* 'learn' warms CUPTI here (at cuInit, before any context exists) and attaches when the engine
     * learns work that repeats (ag_cupti_learning); with AUTOGRAPH_SCOPE=off it never starts. 'guard'
     * and 'always' observe from the start, also for coverage checks with the scope off. */
    long mode = ag_opt(AG_OPT_CUPTI)->num;
    if (mode == AG_CUPTI_OFF)
        return 0;
    if (mode == AG_CUPTI_LEARN) {
        if (ag_opt(AG_OPT_SCOPE)->num == AG_SCOPE_OFF)
            return 0;
        pthread_mutex_lock(&O.lock);
        uint64_t t0 = ag_now_ns();
        if (O.state == ST_IDLE) {
            O.warming = 1;
            pthread_once(&start_once, start);
            O.warming = 0;
        }
        O.warm_ns += ag_now_ns() - t0;
        pthread_mutex_unlock(&O.lock);
        return 0;
    }
    pthread_once(&start_once, start);
    return atomic_load(&O.launches) >= 0 ? 0 : -ENOENT;
}

/* Under O.lock: a CUPTI still warm from cuInit is finalized (about 2 ms, once, in the background by
 * default); the next learning window sets it up again (11-20 ms), as every window after the first does.
 * Returns whether it was warm. */
static int cool(const char *when)
{
    if (O.state != ST_WARM)
        return 0;
    ag_guard++;
    uint64_t t0 = ag_now_ns();
    finalize();
    O.state = ST_DETACHED;
    O.setup_ns += ag_now_ns() - t0;
    ag_log(AG_LOG_DEBUG, "CUPTI finalized %s (%.3f ms)", when, (double)(ag_now_ns() - t0) / 1e6);
    ag_guard--;
    return 1;
}

/* The program captures or launches a graph of its own (the first time). A warm CUPTI would cost each of
 * its graph launches about 5 us until a learning window's detach, which may never come: it is finalized
 * now (a program that captures its graphs before its loop pays it there). What keeps its graphs away from
 * a finalize is GR, as for the shim's own. */
void ag_cupti_app_graph(void)
{
    if (__atomic_load_n(&O.app_graphs, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&O.lock);
    __atomic_store_n(&O.app_graphs, 1, __ATOMIC_RELEASE);
    cool("at the program's first graph capture or launch");
    pthread_mutex_unlock(&O.lock);
}

/* An engine rests (no work repeated lately). A program whose work never repeats opens no learning window,
 * so its CUPTI stayed warm to the end: on an H100 host its kernel launches then cost 3-4% more than with
 * AUTOGRAPH_CUPTI=off (never_repeat: 335.0 against 320.8 ms, medians of 9; the engine's own time was 2.0%
 * of the driver's), about 100 ns a launch. It is finalized at the first rest. */
void ag_cupti_resting(void)
{
    if (__atomic_load_n(&O.state, __ATOMIC_RELAXED) != ST_WARM) /* (only 'learn' warms it) */
        return;
    pthread_mutex_lock(&O.lock);
    O.finalized_resting |= cool("at the engine's first rest: no work repeated, no window came");
    pthread_mutex_unlock(&O.lock);
}

int ag_cupti_attached(void)
{
    return __atomic_load_n(&O.state, __ATOMIC_RELAXED) == ST_ATTACHED;
}

int ag_cupti_timing(void)
{
    return __atomic_load_n(&O.timing, __ATOMIC_RELAXED);
}

int ag_cupti_can_guard(void)
{
    int st = __atomic_load_n(&O.state, __ATOMIC_RELAXED);
    switch (ag_opt(AG_OPT_CUPTI)->num) {
    case AG_CUPTI_LEARN:
        return st == ST_IDLE || st == ST_WARM || st == ST_ATTACHED || st == ST_DETACHED;
    case AG_CUPTI_GUARD:
    case AG_CUPTI_ALWAYS:
        return st == ST_ATTACHED;
    default:
        return 0;
    }
}

/* Under O.names_lock: the GPU time of operation op's kernel into *ns, if its record is in. */
static int op_kernel_ns(uint64_t op, uint64_t *ns)
{
    uint32_t lo = (uint32_t)op;
    if (O.op_ns[lo % OP_RING].tag != (1ULL << 32 | lo))
        return 0;
    *ns = O.op_ns[lo % OP_RING].ns;
    return 1;
}

int ag_cupti_gpu_ns(uint64_t op0, uint64_t op1, uint32_t kernels, uint64_t *ns)
{
    uint64_t sum = 0, one;
    uint32_t found = 0;
    if (!kernels || op1 <= op0 || op1 - op0 > OP_RING)
        return 0;
    pthread_mutex_lock(&O.names_lock);
    for (uint64_t op = op0; op < op1; op++)
        if (op_kernel_ns(op, &one)) {
            sum += one;
            found++;
        }
    pthread_mutex_unlock(&O.names_lock);
    *ns = sum;
    return found >= kernels;
}

int ag_cupti_op_gpu_ns(uint64_t op, uint64_t *ns)
{
    pthread_mutex_lock(&O.names_lock);
    int found = op_kernel_ns(op, ns);
    pthread_mutex_unlock(&O.names_lock);
    return found;
}

long long ag_cupti_launches(void)
{
    return atomic_load_explicit(&O.launches, memory_order_relaxed);
}

int ag_cupti_mode(void)
{
    return (int)ag_opt(AG_OPT_CUPTI)->num;
}

/* Under O.lock: the kernel records CUPTI holds are delivered (buffer_completed) now. */
static void flush_records(void)
{
    if (O.timing) {
        ag_guard++;
        O.act_flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        ag_guard--;
    }
}

void ag_cupti_flush(void)
{
    pthread_mutex_lock(&O.lock);
    flush_records();
    pthread_mutex_unlock(&O.lock);
}

/* Pending activity records are delivered first, so that the figures are complete. */
void ag_cupti_stats(FILE *f)
{
    pthread_mutex_lock(&O.lock);
    flush_records();
    pthread_mutex_lock(&O.names_lock);
    uint64_t span = O.span_ns + (O.win_last > O.win_first ? O.win_last - O.win_first : 0);
    fprintf(f, "  \"cupti\": {\"mode\": \"%s\", \"enabled\": %s, \"state\": \"%s\", \"library\": ",
            ag_opt(AG_OPT_CUPTI)->text, atomic_load(&O.launches) >= 0 ? "true" : "false",
            ag_opt(AG_OPT_CUPTI)->num == AG_CUPTI_OFF ? "off" : state_names[O.state]);
    ag_put_json_string(f, O.library);
    fprintf(f, ",\n    \"launches\": %lld, \"unhooked\": %lld, \"unhooked_names\": [",
            atomic_load(&O.launches) >= 0 ? atomic_load(&O.launches) : 0, atomic_load(&O.unhooked));
    for (int i = 0; i < O.nnames; i++) {
        fputs(i ? ", " : "", f);
        ag_put_json_string(f, O.names[i]);
    }
    fprintf(f, "],\n    \"callback_ids\": %d, \"attaches\": %u, \"detaches\": %u, \"released_to_profiler\": %s,\n"
               "    \"warmed\": %s, \"warm_ms\": %.3f, \"finalizes\": %u, \"finalize_background_ms\": %.3f, "
               "\"finalize_joins_waited\": %u, \"thread_ends_waited\": %u, \"finalizes_waited_for_ends\": %u,\n"
               "    \"app_graphs\": %s, \"finalized_resting\": %s, \"graph_launches_traced\": %u, "
               "\"finalizes_holding_graphs\": %u,\n"
               "    \"setup_ms\": %.3f, \"attached_ms\": %.3f, \"kernels_timed\": %llu, \"kernels_attributed\": %llu, "
               "\"kernel_us_mean\": ",
            O.nwatched, O.attaches, O.detaches, O.released_to_profiler ? "true" : "false", O.warmed ? "true" : "false",
            (double)O.warm_ns / 1e6, O.finalizes, (double)atomic_load(&F.ns) / 1e6, atomic_load(&F.joins_waited),
            atomic_load(&X.ends_waited), atomic_load(&X.finalizes_waited),
            O.app_graphs ? "true" : "false", O.finalized_resting ? "true" : "false", atomic_load(&GR.traced), atomic_load(&GR.exclusive),
            (double)O.setup_ns / 1e6,
            (double)(O.attached_ns + (O.attached_at ? ag_now_ns() - O.attached_at : 0)) / 1e6,
            (unsigned long long)O.kernels, (unsigned long long)O.kernels_attributed);
    if (O.kernels)
        fprintf(f, "%.3f", (double)O.kernel_ns / (double)O.kernels / 1e3);
    else
        fputs("null", f);
    fputs(", \"gpu_busy_learning\": ", f);
    if (span)
        fprintf(f, "%.4f", (double)O.busy_ns / (double)span);
    else
        fputs("null", f);
    fputs("}\n", f);
    pthread_mutex_unlock(&O.names_lock);
    pthread_mutex_unlock(&O.lock);
}
