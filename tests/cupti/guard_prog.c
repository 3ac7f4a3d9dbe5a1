/* guard_prog: the workload of the CUPTI coverage-guard tests (guard.sh) on fakecuda. Every iteration
 * launches kernels the shim can defer and, in the middle, one launch that no hook sees
 * (fakecuda_unhooked_launch) on the same buffer, whose result depends on running after the kernels
 * launched before it; then syncs and folds the buffer into a checksum, printed at the end.
 * Usage: guard_prog [--iters N] [--no-unhooked | --unhooked-from K] [--profiler] [--spin-us U] [--never-repeat]
 *                   [--novel-until K] [--sync-until K] [--segments K] [--own-graph | --own-capture]
 *                   [--host-us U] [--before N] [--after N] [--drift K] [--contexts 2] [--slow-iter K:U]
 *                   [--no-copy] [--side-threads MS] [--graph-thread US]
 *   --no-unhooked  no unhooked launch: a loop the shim may replay with CUPTI detached
 *   --unhooked-from K  the unhooked launch only from iteration K on: it first appears while the shim
 *                  already holds work back (replaying), not while it learns
 *   --profiler     half-way, the program subscribes to CUPTI itself (a profiler attaching late); the
 *                  library is AUTOGRAPH_CUPTI_LIB, its functions are looked up as a program linked
 *                  against libcupti would bind them (global scope, where a preloaded shim comes first)
 *   --spin-us U    each deferrable kernel also runs U microseconds on the fake GPU: a GPU-bound loop
 *   --never-repeat every launch has a grid of its own (same results): nothing ever repeats
 *   --novel-until K  the same in the first K iterations only: the loop repeats from iteration K on
 *   --sync-until K   only the first K iterations (and the last) end with a sync and a copy to the host:
 *                  a loop that stops syncing
 *   --segments K   each iteration first runs K segments of 4 launches and a sync, each segment with
 *                  grids of its own (the same in every iteration): K distinct syncing segments
 *   --own-graph    the program launches a graph of its own (one empty node) at the end of every iteration
 *   --own-capture  before its loop the program captures a graph of its own (never launched)
 *   --host-us U    the host works U microseconds after the fourth launch of every iteration (as a program
 *                  that prepares its next input there): a graph launched before that gap runs during it
 *   --before N     deferrable launches before the unhooked one in every iteration (default 9)
 *   --after N      deferrable launches after it (default 6; those past the fifteenth launch with grids of
 *                  their own)
 *   --drift K      the loop's grids change every K iterations: a new variant that repeats K times, then
 *                  the next (work the guard has not watched keeps coming, all run long)
 *   --contexts 2   each iteration runs twice, in the primary context and then in a second one (on a buffer
 *                  of its own, folded into the checksum too): two engines learn the same loop
 *   --slow-iter K:U  in iteration K only, the host works U microseconds after every launch: one sighting
 *                  whose host time is inflated (as CUPTI's first launches inflate an iteration on the H200)
 *                  while the iterations around it are not
 *   --no-copy      iterations end with the sync alone (the buffer is read back after the loop): one segment
 *                  per iteration, as launch_bound's
 *   --side-threads MS  each iteration starts a thread that queries a stream of a context of its own (a
 *                  call CUPTI calls back), waits MS milliseconds and ends: threads keep ending all run long,
 *                  some while the shim finalizes CUPTI
 *   --graph-thread US  a thread of the program launches a graph of its own (one empty node) on a stream of
 *                  its own in the primary context, then waits US microseconds, again and again until the
 *                  loop ends: graph launches on one thread while the loop's engine opens and closes
 *                  learning windows on another */
#define _GNU_SOURCE
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fakecuda.h"
#include "fakecuda_prog.h"


#define N 256
#define BEFORE 9 /* deferrable launches before the unhooked one (--before): not a chunk size the shim would pick */
#define AFTER 6 /* deferrable launches after it (--after) */

static long spin_us, host_us;

static void host_work(long us)
{
    for (uint64_t end = fc_prog_now_ns() + (uint64_t)us * 1000u; us && fc_prog_now_ns() < end;)
        ; /* the host's own work */
}


/* x[i] = x[i] * a + b: affine maps of different coefficients do not commute, so any reordering
 * around the unhooked kernel changes the result. */
static void k_affine(void **args, const fakecuda_dims_t *d)
{
    uint32_t *x = *(uint32_t **)args[0];
    uint32_t a = *(uint32_t *)args[1], b = *(uint32_t *)args[2];
    (void)d;
    for (int i = 0; i < N; i++)
        x[i] = x[i] * a + b;
    for (uint64_t end = fc_prog_now_ns() + (uint64_t)spin_us * 1000u; spin_us && fc_prog_now_ns() < end;)
        ; /* a long kernel: the fake GPU is busy */
}

/* The unhooked kernel: a non-affine mix with the iteration number. */
static void k_mix(void **args, const fakecuda_dims_t *d)
{
    uint32_t *x = *(uint32_t **)args[0];
    uint32_t it = *(uint32_t *)args[1];
    (void)d;
    for (int i = 0; i < N; i++)
        x[i] = (x[i] ^ (x[i] >> 13) ^ 0x5bd1e995u) * 2654435761u + it;
}

/* ---- the late profiler ---- */
static unsigned long long prof_callbacks, prof_records;

static void CUPTIAPI prof_callback(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *data)
{
    const CUpti_CallbackData *cb = data;
    (void)ud;
    if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel &&
        cb->callbackSite == CUPTI_API_ENTER)
        __atomic_fetch_add(&prof_callbacks, 1, __ATOMIC_RELAXED);
}

static void CUPTIAPI prof_request(uint8_t **buffer, size_t *size, size_t *max)
{
    *size = 16 * 1024;
    *buffer = aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, *size);
    *max = 0;
}

typedef CUptiResult (*next_fn)(uint8_t *, size_t, CUpti_Activity **);
static next_fn prof_next;

static void CUPTIAPI prof_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    CUpti_Activity *rec = NULL;
    (void)ctx, (void)stream, (void)size;
    while (prof_next(buffer, valid, &rec) == CUPTI_SUCCESS)
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
            __atomic_fetch_add(&prof_records, 1, __ATOMIC_RELAXED);
    free(buffer);
}

static void *prof_sym(const char *name)
{
    void *p = dlsym(RTLD_DEFAULT, name);
    if (!p) {
        fprintf(stderr, "guard_prog: profiler: %s not found\n", name);
        exit(2);
    }
    return p;
}

static void prof_check(const char *what, CUptiResult r)
{
    if (r != CUPTI_SUCCESS) {
        fprintf(stderr, "guard_prog: profiler: %s failed: CUPTI error %d\n", what, (int)r);
        exit(2);
    }
}

static void profiler_attach(void)
{
    const char *lib = getenv("AUTOGRAPH_CUPTI_LIB");
    if (!lib || !dlopen(lib, RTLD_NOW | RTLD_GLOBAL)) {
        fprintf(stderr, "guard_prog: profiler: cannot open AUTOGRAPH_CUPTI_LIB=%s\n", lib ? lib : "(unset)");
        exit(2);
    }
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *) = prof_sym("cuptiSubscribe");
    CUptiResult (*enable)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId) =
        prof_sym("cuptiEnableCallback");
    CUptiResult (*reg)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) =
        prof_sym("cuptiActivityRegisterCallbacks");
    CUptiResult (*activity)(CUpti_ActivityKind) = prof_sym("cuptiActivityEnable");
    prof_next = (next_fn)prof_sym("cuptiActivityGetNextRecord");
    CUpti_SubscriberHandle sub;
    prof_check("cuptiSubscribe", subscribe(&sub, prof_callback, NULL));
    prof_check("cuptiEnableCallback", enable(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
    prof_check("cuptiActivityRegisterCallbacks", reg(prof_request, prof_complete));
    prof_check("cuptiActivityEnable", activity(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    fprintf(stderr, "guard_prog: profiler attached\n");
}

/* The profiler must have seen the launches and kernels after it attached: its session works. */
static void profiler_detach(void)
{
    CUptiResult (*flush)(uint32_t) = prof_sym("cuptiActivityFlushAll");
    prof_check("cuptiActivityFlushAll", flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    unsigned long long cbs = __atomic_load_n(&prof_callbacks, __ATOMIC_RELAXED);
    unsigned long long recs = __atomic_load_n(&prof_records, __ATOMIC_RELAXED);
    fprintf(stderr, "guard_prog: profiler saw %llu cuLaunchKernel callbacks, %llu kernel records\n", cbs, recs);
    if (!cbs || !recs) {
        fprintf(stderr, "guard_prog: profiler: its CUPTI session saw nothing\n");
        exit(3);
    }
}

/* --side-threads: a query in the side context, a wait, the end */
static CUcontext side_ctx;
static long side_ms = -1;

static void *side_main(void *arg)
{
    (void)arg;
    CK(cuCtxSetCurrent(side_ctx));
    CUresult r = cuStreamQuery(NULL);
    if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_READY)
        CK(r);
    struct timespec d = {side_ms / 1000, side_ms % 1000 * 1000000L};
    nanosleep(&d, NULL);
    return NULL;
}

/* --graph-thread: the program's graph launched on a thread of its own until the loop ends */
static long graph_thread_us = -1;
static CUgraphExec graph_thread_exec;
static CUcontext graph_thread_ctx;
static int graph_thread_stop;
static unsigned long graph_thread_launches;

static void *graph_main(void *arg)
{
    (void)arg;
    CUstream s;
    CK(cuCtxSetCurrent(graph_thread_ctx));
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    struct timespec d = {graph_thread_us / 1000000, graph_thread_us % 1000000 * 1000L};
    while (!__atomic_load_n(&graph_thread_stop, __ATOMIC_ACQUIRE)) {
        CK(cuGraphLaunch(graph_thread_exec, s));
        graph_thread_launches++;
        nanosleep(&d, NULL);
    }
    CK(cuStreamSynchronize(s));
    CK(cuStreamDestroy(s));
    return NULL;
}

int main(int argc, char **argv)
{
    int iters = 40, before = BEFORE, after = AFTER, unhooked = 1, unhooked_from = 0, profiler = 0, never_repeat = 0, own_graph = 0, own_capture = 0;
    int novel_until = 0, sync_until = -1, segments = 0, drift = 0, contexts = 1, slow_iter = -1;
    long slow_us = 0;
    int copy = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
            iters = atoi(argv[++i]);
        else if (strcmp(argv[i], "--no-unhooked") == 0)
            unhooked = 0;
        else if (strcmp(argv[i], "--unhooked-from") == 0 && i + 1 < argc)
            unhooked_from = atoi(argv[++i]);
        else if (strcmp(argv[i], "--profiler") == 0)
            profiler = 1;
        else if (strcmp(argv[i], "--spin-us") == 0 && i + 1 < argc)
            spin_us = atol(argv[++i]);
        else if (strcmp(argv[i], "--host-us") == 0 && i + 1 < argc)
            host_us = atol(argv[++i]);
        else if (strcmp(argv[i], "--before") == 0 && i + 1 < argc)
            before = atoi(argv[++i]);
        else if (strcmp(argv[i], "--after") == 0 && i + 1 < argc)
            after = atoi(argv[++i]);
        else if (strcmp(argv[i], "--never-repeat") == 0)
            never_repeat = 1;
        else if (strcmp(argv[i], "--novel-until") == 0 && i + 1 < argc)
            novel_until = atoi(argv[++i]);
        else if (strcmp(argv[i], "--sync-until") == 0 && i + 1 < argc)
            sync_until = atoi(argv[++i]);
        else if (strcmp(argv[i], "--segments") == 0 && i + 1 < argc)
            segments = atoi(argv[++i]);
        else if (strcmp(argv[i], "--drift") == 0 && i + 1 < argc)
            drift = atoi(argv[++i]);
        else if (strcmp(argv[i], "--contexts") == 0 && i + 1 < argc && strcmp(argv[i + 1], "2") == 0)
            contexts = 2, i++;
        else if (strcmp(argv[i], "--own-graph") == 0)
            own_graph = 1;
        else if (strcmp(argv[i], "--own-capture") == 0)
            own_capture = 1;
        else if (strcmp(argv[i], "--slow-iter") == 0 && i + 1 < argc && sscanf(argv[i + 1], "%d:%ld", &slow_iter, &slow_us) == 2)
            i++;
        else if (strcmp(argv[i], "--side-threads") == 0 && i + 1 < argc)
            side_ms = atol(argv[++i]);
        else if (strcmp(argv[i], "--no-copy") == 0)
            copy = 0;
        else if (strcmp(argv[i], "--graph-thread") == 0 && i + 1 < argc)
            graph_thread_us = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: guard_prog [--iters N] [--no-unhooked | --unhooked-from K] [--profiler] "
                            "[--spin-us U] [--never-repeat] [--novel-until K] [--sync-until K] [--segments K] "
                            "[--own-graph | --own-capture] "
                            "[--host-us U] [--before N] [--after N] [--drift K] [--contexts 2] [--slow-iter K:U] [--no-copy] "
                            "[--side-threads MS] [--graph-thread US]\n");
            return 2;
        }
    }
    size_t s_affine[] = {8, 4, 4}, s_mix[] = {8, 4};
    if (fakecuda_register_kernel("affine", k_affine, 3, s_affine) || fakecuda_register_kernel("mix", k_mix, 2, s_mix)) {
        fprintf(stderr, "guard_prog: cannot register the kernels\n");
        return 1;
    }
    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    /* per context (--contexts 2: the second one made here): its module's functions and its buffer */
    CUcontext ctxs[2];
    CUfunction affines[2], mixes[2];
    CUdeviceptr xs[2];
    uint32_t host[N];
    for (int c = 0; c < contexts; c++) {
        if (c == 0) {
            CK(cuDevicePrimaryCtxRetain(&ctxs[0], dev));
            CK(cuCtxSetCurrent(ctxs[0]));
        } else {
            CK(cuCtxCreate(&ctxs[1], NULL, 0, dev)); /* current now */
        }
        CUmodule mod;
        CK(cuModuleLoadData(&mod, "fakecuda-module guard"));
        CK(cuModuleGetFunction(&affines[c], mod, "affine"));
        CK(cuModuleGetFunction(&mixes[c], mod, "mix"));
        for (int i = 0; i < N; i++)
            host[i] = (uint32_t)i * 7919u + (uint32_t)c;
        CK(cuMemAlloc(&xs[c], sizeof host));
        CK(cuMemcpyHtoD(xs[c], host, sizeof host));
    }
    pthread_t *sides = NULL;
    if (side_ms >= 0) {
        CK(cuCtxCreate(&side_ctx, NULL, 0, dev));
        sides = calloc((size_t)iters, sizeof *sides);
        if (!sides)
            return 1;
    }
    CK(cuCtxSetCurrent(ctxs[0]));
    CUfunction affine = affines[0], mix = mixes[0];
    CUdeviceptr x = xs[0];
    CUgraphExec own = NULL;
    for (int k = 0; k < 2; k++) {
        if (!(k == 0 ? own_graph : graph_thread_us >= 0))
            continue;
        CUgraph g;
        CUgraphNode node;
        CK(cuGraphCreate(&g, 0));
        CK(cuGraphAddEmptyNode(&node, g, NULL, 0));
        CK(cuGraphInstantiateWithFlags(k == 0 ? &own : &graph_thread_exec, g, 0));
        CK(cuGraphDestroy(g));
    }
    pthread_t graph_thread;
    graph_thread_ctx = ctxs[0];
    if (graph_thread_us >= 0 && pthread_create(&graph_thread, NULL, graph_main, NULL) != 0) {
        fprintf(stderr, "guard_prog: cannot start a thread\n");
        return 1;
    }
    if (own_capture) {
        CUstream cs;
        CUgraph g;
        CUgraphExec e;
        CK(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
        CK(cuStreamBeginCapture_v2(cs, CU_STREAM_CAPTURE_MODE_RELAXED));
        CK(cuStreamEndCapture(cs, &g));
        CK(cuGraphInstantiateWithFlags(&e, g, 0));
        CK(cuGraphExecDestroy(e));
        CK(cuGraphDestroy(g));
        CK(cuStreamDestroy(cs));
    }
    uint64_t sum = 1469598103934665603ULL;
    for (int it = 0; it < iters; it++) {
        if (sides && pthread_create(&sides[it], NULL, side_main, NULL) != 0) {
            fprintf(stderr, "guard_prog: cannot start a thread\n");
            return 1;
        }
        for (int c = 0; c < contexts; c++) {
            if (contexts > 1) {
                CK(cuCtxSetCurrent(ctxs[c]));
                affine = affines[c], mix = mixes[c], x = xs[c];
            }
            for (int seg = 0; seg < segments; seg++) {
                for (int k = 0; k < 4; k++) {
                    uint32_t a = 3u, b = (uint32_t)(seg * 4 + k);
                    void *p[] = {&x, &a, &b};
                    CK(cuLaunchKernel(affine, (unsigned)(seg * 4 + k + 2), 1, 1, 32, 1, 1, 0, NULL, p, NULL));
                }
                CK(cuStreamSynchronize(NULL));
            }
            if (profiler && it == iters / 2 && c == 0)
                profiler_attach();
            for (int k = 0; k < before + after; k++) {
                if (k == before && unhooked && it >= unhooked_from) {
                    uint32_t u = (uint32_t)it;
                    void *p[] = {&x, &u};
                    CK(fakecuda_unhooked_launch(mix, 1, 1, 1, 32, 1, 1, 0, NULL, p, NULL));
                }
                uint32_t a = 2u * (uint32_t)k + 3u, b = (uint32_t)k + 1u;
                void *p[] = {&x, &a, &b};
                /* (launches past the default count get grids of their own: a long run of one signature would be
                 * found periodic, and replayed inside the first iteration) */
                unsigned grid = never_repeat || it < novel_until ? (unsigned)(it * (before + after) + k + 1)
                                : k >= BEFORE + AFTER                 ? (unsigned)k
                                : drift > 0                           ? 1u + (unsigned)(it / drift) * 100u
                                                                      : 1u;
                CK(cuLaunchKernel(affine, grid, 1, 1, 32, 1, 1, 0, NULL, p, NULL));
                if (k == 3)
                    host_work(host_us);
                if (it == slow_iter)
                    host_work(slow_us);
            }
            if (own && c == 0) /* (made in the primary context) */
                CK(cuGraphLaunch(own, NULL));
            if (sync_until >= 0 && it >= sync_until && it < iters - 1)
                continue;
            CK(cuStreamSynchronize(NULL));
            if (copy || it == iters - 1) {
                CK(cuMemcpyDtoH(host, x, sizeof host));
                sum = fc_prog_fnv(sum, host, sizeof host);
            }
        }
    }
    if (graph_thread_us >= 0) {
        __atomic_store_n(&graph_thread_stop, 1, __ATOMIC_RELEASE);
        pthread_join(graph_thread, NULL);
        fprintf(stderr, "guard_prog: the graph thread launched its graph %lu times\n", graph_thread_launches);
    }
    for (int it = 0; sides && it < iters; it++)
        pthread_join(sides[it], NULL);
    free(sides);
    if (profiler)
        profiler_detach();
    printf("iterations %d unhooked %d checksum %016llx first %08x last %08x\n", iters, unhooked,
           (unsigned long long)sum, host[0], host[N - 1]);
    for (int c = contexts - 1; c >= 0; c--) {
        CK(cuCtxSetCurrent(ctxs[c]));
        CK(cuMemFree(xs[c]));
    }
    return 0;
}
