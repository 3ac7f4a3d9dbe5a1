/* fake_cupti.c: TEST DOUBLE, NOT CUPTI. A stand-in libcupti for the CPU tests of the shim's CUPTI
 * observer. fakecuda (tests/fakecuda), the stand-in libcuda, feeds it through two test-only entry points
 * (fake_cupti.h): the driver API calls it sees and the kernels it runs. Nothing here observes a GPU.
 *
 * What a test can rely on:
 * - One subscriber at a time: a second cuptiSubscribe gets CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
 *   as from CUPTI; with FAKE_CUPTI_BUSY=1 even the first does (a profiler already holds CUPTI).
 * - Only the driver domain calls back, per enabled callback id; other domains may be enabled and stay
 *   silent. The callback data carries callbackSite, functionName, correlationId and correlationData;
 *   functionParams, functionReturnValue, symbolName and context are NULL (fakecuda does not pass them).
 * - cuptiGetCallbackName and cuptiGetResultString give the real names, generated from the toolkit's
 *   headers (fake_cupti_*.def in the build folder).
 * - Kernel activity: CUpti_ActivityKernel10 records (kind, start, end, completed, correlationId) fill
 *   buffers from the registered request callback. correlationId is that of the driver call that launched
 *   the kernel (the cuGraphLaunch, for a graph's kernel), as the API callbacks saw it; 0 when fakecuda
 *   ran the kernel with no traced call around its launch. A full buffer is handed back from a worker
 *   thread, as CUPTI does; cuptiActivityFlushAll and cuptiActivityDisable hand back the current buffer
 *   (even an empty one) on the calling thread before returning. Records made while no callbacks are
 *   registered are dropped.
 *   The client's buffer callbacks run under the fake's delivery lock: one of them that waits for a
 *   thread inside cuptiActivityFlushAll deadlocks.
 * - cuptiGetTimestamp is CLOCK_MONOTONIC in nanoseconds, the clock fakecuda times its kernels with.
 * - CUPTI's set-up cost, as a count (no time is spent): the first cuptiSubscribe of a process, and the
 *   first after each cuptiFinalize, sets CUPTI up; on the H200 that costs 11-20 ms once the process has
 *   made driver calls (contexts and modules exist: tests/gpu/cupti_costs.cu), about 4 ms before. Such a
 *   set-up after a traced driver call is counted as "costly". cuptiFinalize ends the subscription,
 *   hands back the current activity buffer, forgets the activity callbacks and kinds, and undoes the
 *   set-up. FAKE_CUPTI_FINALIZE_US=N makes each cuptiFinalize take N us (about 2000-3500 on the H200),
 *   and FAKE_CUPTI_SUBSCRIBE_US=N each cuptiSubscribe (11-26 ms with the set-up there, a few us without);
 *   with FAKE_CUPTI_STRICT=1 a call of the client while a finalize runs aborts the process.
 * - State per thread, as CUPTI keeps it: a pthread key made at each set-up and deleted at the end of
 *   cuptiFinalize, set on a thread when a callback is made on it; its destructor, as a thread ends,
 *   counts an end that came while a finalize ran or saw one begin (CUPTI's own destructor can crash
 *   then: it rereads a global that cuptiFinalize clears), and aborts with FAKE_CUPTI_STRICT=1;
 *   FAKE_CUPTI_END_US=N makes each such destructor take N us.
 * - A graph launched while kernel activity was on, and launched again while a cuptiFinalize runs, is
 *   counted as faulted (aborts with FAKE_CUPTI_STRICT=1): on the H200 such a launch of a graph of the
 *   program's (torch.cuda.graph's) failed, "unspecified launch failure" (tests/gpu/owngraph_diag.sh). Up
 *   to TRACED_GRAPHS graphs are remembered.
 * - With FAKE_CUPTI_REPORT=1 the counts go to stderr at exit, one line: "fake_cupti: subscribes S
 *   set-ups U costly C finalizes F away A overlaps O during D unfinished N ended E faulted G traced T": A
 *   finalizes ran on a thread that made no driver call (the client's own), O calls of the client came
 *   while a finalize ran (CUPTI's API is not for use then), D driver calls began while a finalize ran on
 *   another thread (the program went on meanwhile), N finalizes were still running when the process
 *   ended, E threads that CUPTI had called back ended while a finalize ran, G graph launches faulted
 *   (above), T graphs were launched while kernel activity was on.
 */
#define _GNU_SOURCE
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_cupti.h"

#define EXPORT __attribute__((visibility("default")))
#define NCBID CUPTI_DRIVER_TRACE_CBID_SIZE
#define MAX_NESTED 32 /* driver calls nested inside callbacks on one thread, with their own correlation */
#define TRACED_GRAPHS 64 /* graphs launched while kernel activity was on, remembered */

EXPORT fakecupti_api_fn fakecupti_api;
EXPORT fakecupti_kernel_fn fakecupti_kernel;
EXPORT fakecupti_graph_fn fakecupti_graph;

#define X(name) [CUPTI_DRIVER_TRACE_CBID_##name] = #name,
static const char *const driver_names[NCBID] = {
#include "fake_cupti_driver.def"
};
#undef X
#define X(name) [CUPTI_RUNTIME_TRACE_CBID_##name] = #name,
static const char *const runtime_names[CUPTI_RUNTIME_TRACE_CBID_SIZE] = {
#include "fake_cupti_runtime.def"
};
#undef X
#define X(name) {name, #name},
static const struct {
    CUptiResult code;
    const char *name;
} result_names[] = {
#include "fake_cupti_result.def"
};
#undef X

static struct {
    pthread_mutex_t mu; /* a leaf lock: never held while calling the client */
    pthread_cond_t wake; /* kernel records wait for the worker */
    uintptr_t subscriber; /* the handle given out; 0: none */
    uintptr_t generation; /* every subscription gets a new handle, so a stale one is refused */
    CUpti_CallbackFunc callback;
    void *userdata;
    unsigned char enabled[NCBID];
    uint32_t correlation;
    CUpti_BuffersCallbackRequestFunc requested;
    CUpti_BuffersCallbackCompleteFunc completed;
    int kernel_on, concurrent_on; /* CUPTI_ACTIVITY_KIND_KERNEL, _CONCURRENT_KERNEL */
    int worker_started;
    CUpti_ActivityKernel10 *pending;
    size_t npending, cap;
    int set_up; /* subscribed since the start or the last cuptiFinalize */
    int finalizing; /* a cuptiFinalize is running */
    unsigned subscribes, setups, costly, finalizes;
    unsigned away;     /* finalizes on a thread that made no driver call (the client's own thread) */
    unsigned overlaps; /* client calls (this file's API) made while a finalize ran */
    unsigned during;   /* driver calls that began while a finalize ran on another thread */
    unsigned ended;    /* threads called back that ended while a finalize ran */
    unsigned faulted;  /* launches of a graph launched under kernel activity, while a finalize ran */
    const void *traced[TRACED_GRAPHS]; /* graphs launched while kernel activity was on */
    unsigned ntraced;
    unsigned finalize_starts;
    pthread_key_t key; /* the state per thread (when key_gen is odd: made and not deleted) */
    unsigned key_gen;
} fk = {.mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

/* The buffer being filled; only touched under deliver_mu, which orders deliveries from the worker
 * and from flushes so that records reach the client in the order the kernels ran. */
static pthread_mutex_t deliver_mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *cur;
static size_t cur_size, cur_used, cur_max, cur_count;

/* Entry and exit of one driver call share a correlation id and the correlationData slot. */
static _Thread_local struct {
    uint32_t id;
    uint64_t data;
} tl_calls[MAX_NESTED];
static _Thread_local int tl_depth;
static _Thread_local int tl_driver; /* this thread made a driver call */
static _Thread_local unsigned tl_key_gen; /* the key generation this thread's state was set under */

static void sleep_us(const char *var);

/* A thread with state ends (the key's destructor, which takes FAKE_CUPTI_END_US): counted where a
 * finalize ran at its start or began before its end. */
static void thread_ends(void *v)
{
    (void)v;
    pthread_mutex_lock(&fk.mu);
    unsigned began = fk.finalize_starts;
    int during = fk.finalizing != 0;
    pthread_mutex_unlock(&fk.mu);
    sleep_us("FAKE_CUPTI_END_US");
    pthread_mutex_lock(&fk.mu);
    during |= fk.finalizing != 0 || fk.finalize_starts != began;
    fk.ended += during;
    const char *strict = during ? getenv("FAKE_CUPTI_STRICT") : NULL;
    if (strict && strcmp(strict, "1") == 0) {
        fprintf(stderr, "fake_cupti: a thread's state ended while cuptiFinalize runs (FAKE_CUPTI_STRICT=1)\n");
        abort();
    }
    pthread_mutex_unlock(&fk.mu);
}

/* Under fk.mu, at the start of each call of a client: one made while a finalize runs is counted. */
static void client_call(void)
{
    fk.overlaps += fk.finalizing != 0;
    const char *strict = fk.finalizing ? getenv("FAKE_CUPTI_STRICT") : NULL;
    if (strict && strcmp(strict, "1") == 0) {
        fprintf(stderr, "fake_cupti: a CUPTI call while cuptiFinalize runs (FAKE_CUPTI_STRICT=1)\n");
        abort();
    }
}

static uintptr_t handle_of(uintptr_t generation)
{
    return 0x5000 + 16 * generation; /* never dereferenced: an opaque token */
}

/* Sleeps as many microseconds as the variable var says (none where it is unset or not positive). */
static void sleep_us(const char *var)
{
    const char *us = getenv(var);
    if (us && atol(us) > 0) {
        struct timespec d = {atol(us) / 1000000, atol(us) % 1000000 * 1000};
        nanosleep(&d, NULL);
    }
}

CUptiResult EXPORT cuptiSubscribe(CUpti_SubscriberHandle *subscriber, CUpti_CallbackFunc callback, void *userdata)
{
    if (!subscriber)
        return CUPTI_ERROR_INVALID_PARAMETER;
    const char *busy = getenv("FAKE_CUPTI_BUSY");
    if (busy && strcmp(busy, "1") == 0)
        return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    CUptiResult r = CUPTI_SUCCESS;
    sleep_us("FAKE_CUPTI_SUBSCRIBE_US");
    pthread_mutex_lock(&fk.mu);
    client_call();
    if (fk.subscriber) {
        r = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    } else {
        fk.subscribes++;
        if (!fk.set_up) {
            fk.set_up = 1;
            fk.setups++;
            if (fk.key_gen % 2 == 0 && pthread_key_create(&fk.key, thread_ends) == 0)
                fk.key_gen++;
            fk.costly += fk.correlation > 0; /* traced driver calls came first: contexts exist */
        }
        fk.subscriber = handle_of(++fk.generation);
        fk.callback = callback;
        fk.userdata = userdata;
        memset(fk.enabled, 0, sizeof fk.enabled);
        *subscriber = (CUpti_SubscriberHandle)fk.subscriber;
    }
    pthread_mutex_unlock(&fk.mu);
    return r;
}

CUptiResult EXPORT cuptiUnsubscribe(CUpti_SubscriberHandle subscriber)
{
    CUptiResult r = CUPTI_ERROR_INVALID_PARAMETER;
    pthread_mutex_lock(&fk.mu);
    client_call();
    if (fk.subscriber && (uintptr_t)subscriber == fk.subscriber) {
        fk.subscriber = 0;
        fk.callback = NULL;
        fk.userdata = NULL;
        memset(fk.enabled, 0, sizeof fk.enabled);
        r = CUPTI_SUCCESS;
    }
    pthread_mutex_unlock(&fk.mu);
    return r;
}

/* Callers hold fk.mu. All ids of the driver domain, or one; other domains are accepted and silent. */
static CUptiResult set_enabled(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain,
                               long cbid)
{
    if (!fk.subscriber || (uintptr_t)subscriber != fk.subscriber)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (domain <= CUPTI_CB_DOMAIN_INVALID || domain >= CUPTI_CB_DOMAIN_SIZE)
        return CUPTI_ERROR_INVALID_PARAMETER;
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API)
        return CUPTI_SUCCESS;
    if (cbid < 0) {
        memset(fk.enabled + 1, enable != 0, sizeof fk.enabled - 1);
        return CUPTI_SUCCESS;
    }
    if (cbid <= CUPTI_DRIVER_TRACE_CBID_INVALID || cbid >= NCBID)
        return CUPTI_ERROR_INVALID_PARAMETER;
    fk.enabled[cbid] = enable != 0;
    return CUPTI_SUCCESS;
}

CUptiResult EXPORT cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                       CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
    pthread_mutex_lock(&fk.mu);
    client_call();
    CUptiResult r = set_enabled(enable, subscriber, domain, (long)cbid);
    pthread_mutex_unlock(&fk.mu);
    return r;
}

CUptiResult EXPORT cuptiEnableDomain(uint32_t enable, CUpti_SubscriberHandle subscriber, CUpti_CallbackDomain domain)
{
    pthread_mutex_lock(&fk.mu);
    client_call();
    CUptiResult r = set_enabled(enable, subscriber, domain, -1);
    pthread_mutex_unlock(&fk.mu);
    return r;
}

CUptiResult EXPORT cuptiGetCallbackName(CUpti_CallbackDomain domain, uint32_t cbid, const char **name)
{
    if (!name)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *name = NULL;
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < NCBID)
        *name = driver_names[cbid];
    else if (domain == CUPTI_CB_DOMAIN_RUNTIME_API && cbid < CUPTI_RUNTIME_TRACE_CBID_SIZE)
        *name = runtime_names[cbid];
    return *name ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult EXPORT cuptiGetResultString(CUptiResult result, const char **str)
{
    if (!str)
        return CUPTI_ERROR_INVALID_PARAMETER;
    *str = NULL;
    for (size_t i = 0; i < sizeof result_names / sizeof *result_names; i++)
        if (result_names[i].code == result) {
            *str = result_names[i].name;
            return CUPTI_SUCCESS;
        }
    return CUPTI_ERROR_INVALID_PARAMETER;
}

CUptiResult EXPORT cuptiGetTimestamp(uint64_t *timestamp)
{
    struct timespec ts;
    if (!timestamp)
        return CUPTI_ERROR_INVALID_PARAMETER;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    *timestamp = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    return CUPTI_SUCCESS;
}

uint32_t fakecupti_api(uint32_t cbid, const char *name, int site)
{
    uint64_t scratch = 0, *data = &scratch;
    uint32_t id = 0;
    CUpti_CallbackFunc callback = NULL;
    void *userdata = NULL;
    pthread_mutex_lock(&fk.mu);
    /* Entry and exit always pair up on the thread, enabled or not, so that a callback id enabled or
     * disabled between them cannot shift the correlation of the calls around it. */
    if (site == 0) {
        tl_driver = 1;
        fk.during += fk.finalizing != 0;
        id = ++fk.correlation;
        if (tl_depth < MAX_NESTED) {
            tl_calls[tl_depth].id = id;
            tl_calls[tl_depth].data = 0;
            data = &tl_calls[tl_depth].data;
        }
        tl_depth++;
    } else if (tl_depth > 0 && --tl_depth < MAX_NESTED) {
        id = tl_calls[tl_depth].id;
        data = &tl_calls[tl_depth].data;
    }
    if (fk.subscriber && cbid < NCBID && fk.enabled[cbid]) {
        callback = fk.callback;
        userdata = fk.userdata;
        if (fk.key_gen % 2 && tl_key_gen != fk.key_gen && pthread_setspecific(fk.key, &tl_key_gen) == 0)
            tl_key_gen = fk.key_gen;
    }
    pthread_mutex_unlock(&fk.mu);
    if (!callback)
        return id;
    CUpti_CallbackData cb = {
        .callbackSite = site == 0 ? CUPTI_API_ENTER : CUPTI_API_EXIT,
        .functionName = name,
        .correlationData = data,
        .correlationId = id,
    };
    callback(userdata, CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb);
    return id;
}

/* ---- activity ---- */

/* Hands the current buffer back to the client. Called under deliver_mu. */
static void give_back(CUpti_BuffersCallbackCompleteFunc completed)
{
    uint8_t *b = cur;
    size_t size = cur_size, used = cur_used;
    cur = NULL;
    cur_size = cur_used = cur_max = cur_count = 0;
    if (completed)
        completed(NULL, 0, b, size, used);
}

/* Moves the pending records into client buffers, handing back each one that fills, and the last one
 * too when hand_back is set. Records that find no usable buffer are dropped, as CUPTI drops them. */
static void deliver(int hand_back)
{
    static int said_misaligned;
    pthread_mutex_lock(&deliver_mu);
    pthread_mutex_lock(&fk.mu);
    CUpti_ActivityKernel10 *recs = fk.pending;
    size_t n = fk.npending;
    CUpti_BuffersCallbackRequestFunc requested = fk.requested;
    CUpti_BuffersCallbackCompleteFunc completed = fk.completed;
    fk.pending = NULL;
    fk.npending = fk.cap = 0;
    pthread_mutex_unlock(&fk.mu);
    const size_t rec = sizeof(CUpti_ActivityKernel10);
    for (size_t i = 0; i < n && requested; i++) {
        if (!cur) {
            uint8_t *b = NULL;
            size_t size = 0, max = 0;
            requested(&b, &size, &max);
            if (!b)
                continue;
            cur = b, cur_size = size, cur_max = max, cur_used = cur_count = 0;
            /* CUPTI writes records at ACTIVITY_RECORD_ALIGNMENT: a misaligned buffer is a client bug. */
            if ((uintptr_t)b % ACTIVITY_RECORD_ALIGNMENT || size < rec) {
                if (!said_misaligned++)
                    fprintf(stderr, "fake_cupti: activity buffer %p of %zu bytes is unusable (misaligned or too "
                                    "small): records dropped\n", (void *)b, size);
                give_back(completed);
                continue;
            }
        }
        memcpy(cur + cur_used, &recs[i], rec);
        cur_used += rec;
        cur_count++;
        if (cur_size - cur_used < rec || (cur_max && cur_count >= cur_max))
            give_back(completed);
    }
    if (hand_back && cur)
        give_back(completed);
    pthread_mutex_unlock(&deliver_mu);
    free(recs);
}

/* Hands full buffers back off the application's threads, as CUPTI's own worker does. */
static void *worker(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&fk.mu);
        while (!fk.npending)
            pthread_cond_wait(&fk.wake, &fk.mu);
        pthread_mutex_unlock(&fk.mu);
        deliver(0);
    }
    return NULL;
}

CUptiResult EXPORT cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                  CUpti_BuffersCallbackCompleteFunc completed)
{
    if (!requested || !completed)
        return CUPTI_ERROR_INVALID_PARAMETER;
    /* A buffer of the previous client goes back to it, with the records made for it. */
    deliver(1);
    pthread_mutex_lock(&fk.mu);
    client_call();
    fk.requested = requested;
    fk.completed = completed;
    pthread_mutex_unlock(&fk.mu);
    return CUPTI_SUCCESS;
}

static CUptiResult set_activity(CUpti_ActivityKind kind, int on)
{
    if (kind <= CUPTI_ACTIVITY_KIND_INVALID || kind >= CUPTI_ACTIVITY_KIND_COUNT)
        return CUPTI_ERROR_INVALID_KIND;
    CUptiResult r = CUPTI_SUCCESS;
    pthread_mutex_lock(&fk.mu);
    client_call();
    if (kind == CUPTI_ACTIVITY_KIND_KERNEL)
        fk.kernel_on = on;
    else if (kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
        fk.concurrent_on = on;
    if (on && (fk.kernel_on || fk.concurrent_on) && !fk.worker_started) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &a, worker, NULL) == 0)
            fk.worker_started = 1;
        else
            fk.kernel_on = fk.concurrent_on = 0, r = CUPTI_ERROR_UNKNOWN;
        pthread_attr_destroy(&a);
    }
    pthread_mutex_unlock(&fk.mu);
    return r;
}

CUptiResult EXPORT cuptiActivityEnable(CUpti_ActivityKind kind)
{
    return set_activity(kind, 1);
}

CUptiResult EXPORT cuptiActivityDisable(CUpti_ActivityKind kind)
{
    CUptiResult r = set_activity(kind, 0);
    if (r == CUPTI_SUCCESS)
        deliver(1);
    return r;
}

CUptiResult EXPORT cuptiActivityFlushAll(uint32_t flag)
{
    (void)flag; /* every record is complete as soon as it exists: forced or not, the same */
    pthread_mutex_lock(&fk.mu);
    client_call();
    int registered = fk.requested != NULL;
    pthread_mutex_unlock(&fk.mu);
    if (!registered)
        return CUPTI_ERROR_INVALID_OPERATION;
    deliver(1);
    return CUPTI_SUCCESS;
}

CUptiResult EXPORT cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, CUpti_Activity **record)
{
    if (!buffer || !record)
        return CUPTI_ERROR_INVALID_PARAMETER;
    /* Every record this fake writes is a kernel record, so the next one is one record further. */
    size_t off = *record ? (size_t)((uint8_t *)*record - buffer) + sizeof(CUpti_ActivityKernel10) : 0;
    if (off >= valid)
        return CUPTI_ERROR_MAX_LIMIT_REACHED;
    CUpti_Activity *a = (CUpti_Activity *)(buffer + off);
    if ((a->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && a->kind != CUPTI_ACTIVITY_KIND_KERNEL) ||
        valid - off < sizeof(CUpti_ActivityKernel10))
        return CUPTI_ERROR_INVALID_KIND;
    *record = a;
    return CUPTI_SUCCESS;
}

void fakecupti_kernel(uint64_t start_ns, uint64_t end_ns, uint32_t correlation)
{
    pthread_mutex_lock(&fk.mu);
    if ((fk.kernel_on || fk.concurrent_on) && fk.requested) {
        if (fk.npending == fk.cap) {
            size_t cap = fk.cap ? 2 * fk.cap : 64;
            CUpti_ActivityKernel10 *p = realloc(fk.pending, cap * sizeof *p);
            if (!p)
                goto out; /* dropped, as CUPTI drops records it has no room for */
            fk.pending = p;
            fk.cap = cap;
        }
        CUpti_ActivityKernel10 *k = &fk.pending[fk.npending++];
        memset(k, 0, sizeof *k);
        k->kind = fk.concurrent_on ? CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL : CUPTI_ACTIVITY_KIND_KERNEL;
        k->start = start_ns;
        k->end = end_ns;
        k->completed = end_ns;
        k->correlationId = correlation;
        k->contextId = 1;
        k->gridX = k->gridY = k->gridZ = k->blockX = k->blockY = k->blockZ = 1;
        k->name = "fakecuda_kernel";
        pthread_cond_signal(&fk.wake);
    }
out:
    pthread_mutex_unlock(&fk.mu);
}

void fakecupti_graph(const void *exec)
{
    pthread_mutex_lock(&fk.mu);
    int traced = 0;
    for (unsigned i = 0; i < fk.ntraced && !traced; i++)
        traced = fk.traced[i] == exec;
    if (traced && fk.finalizing) {
        fk.faulted++;
        const char *strict = getenv("FAKE_CUPTI_STRICT");
        if (strict && strcmp(strict, "1") == 0) {
            fprintf(stderr, "fake_cupti: a graph launched under kernel activity, launched again while cuptiFinalize "
                            "runs (FAKE_CUPTI_STRICT=1; the H200 faulted there)\n");
            abort();
        }
    }
    if (!traced && (fk.kernel_on || fk.concurrent_on) && fk.ntraced < TRACED_GRAPHS)
        fk.traced[fk.ntraced++] = exec;
    pthread_mutex_unlock(&fk.mu);
}

/* Everything ends: the subscription, the activity callbacks and kinds (the current buffer goes back to
 * the client first), and the set-up, which the next cuptiSubscribe pays again. */
CUptiResult EXPORT cuptiFinalize(void)
{
    pthread_mutex_lock(&fk.mu);
    client_call();
    fk.finalizing++;
    fk.finalize_starts++;
    fk.away += !tl_driver;
    pthread_mutex_unlock(&fk.mu);
    sleep_us("FAKE_CUPTI_FINALIZE_US");
    deliver(1);
    pthread_mutex_lock(&fk.mu);
    fk.finalizing--;
    fk.subscriber = 0;
    fk.callback = NULL;
    fk.userdata = NULL;
    memset(fk.enabled, 0, sizeof fk.enabled);
    fk.requested = NULL;
    fk.completed = NULL;
    fk.kernel_on = fk.concurrent_on = 0;
    fk.set_up = 0;
    fk.finalizes++;
    if (fk.key_gen % 2 && pthread_key_delete(fk.key) == 0)
        fk.key_gen++;
    pthread_mutex_unlock(&fk.mu);
    return CUPTI_SUCCESS;
}

__attribute__((destructor)) static void report(void)
{
    const char *r = getenv("FAKE_CUPTI_REPORT");
    if (!r || strcmp(r, "1") != 0)
        return;
    pthread_mutex_lock(&fk.mu);
    fprintf(stderr, "fake_cupti: subscribes %u set-ups %u costly %u finalizes %u away %u overlaps %u during %u "
                    "unfinished %d ended %u faulted %u traced %u\n", fk.subscribes, fk.setups, fk.costly, fk.finalizes,
            fk.away, fk.overlaps, fk.during, fk.finalizing, fk.ended, fk.faulted, fk.ntraced);
    pthread_mutex_unlock(&fk.mu);
}
