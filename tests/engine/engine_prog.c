/* Directed workloads for the replay engine on fakecuda: each --case runs a loop the engine should learn
 * and replay, and prints a checksum of every result the host saw. tests/engine/engine.sh runs it plain
 * and under the shim: outputs must be identical and the statistics must show replays (none for the
 * per-thread default stream cases: ptds launches into CU_STREAM_PER_THREAD, ptsz into stream 0 through
 * the per-thread entry point cuLaunchKernel_ptsz; work that only its own thread could launch is not held
 * back). */
#define _GNU_SOURCE /* clock_gettime (internal.h, fakecuda_prog.h) under -std=c11 */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fakecuda.h"
#include "fakecuda_prog.h"


#define N 1024

/* The unified copy (cuMemcpyAsync) in the shapes of the three directional ones. */
static CUresult u_dd(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) { return cuMemcpyAsync(d, s, n, st); }
static CUresult u_hd(CUdeviceptr d, const void *s, size_t n, CUstream st)
{
    return cuMemcpyAsync(d, (CUdeviceptr)(uintptr_t)s, n, st);
}
static CUresult u_dh(void *d, CUdeviceptr s, size_t n, CUstream st)
{
    return cuMemcpyAsync((CUdeviceptr)(uintptr_t)d, s, n, st);
}

/* The GPU time of each axpb kernel (ENGINE_KERNEL_US, default 0): the fake runs queued work when a sync
 * asks for it, so a sync waits for it there, as for a GPU that sets the pace. */
static uint64_t axpb_ns;

/* y[i] = a * x[i] + b */
static void k_axpb(void **args, const fakecuda_dims_t *d)
{
    float *y = *(float **)args[0];
    const float *x = *(float *const *)args[1];
    float a = *(float *)args[2], b = *(float *)args[3];
    int n = *(int *)args[4];
    (void)d;
    for (int i = 0; i < n; i++)
        y[i] = a * x[i] + b;
    fc_prog_spin(axpb_ns);
}

/* y[i] += x[i] */
static void k_acc(void **args, const fakecuda_dims_t *d)
{
    float *y = *(float **)args[0];
    const float *x = *(float *const *)args[1];
    int n = *(int *)args[2];
    (void)d;
    for (int i = 0; i < n; i++)
        y[i] += x[i] * 1e-3f;
}

/* A philox-like kernel: the offset grows every iteration, passed by value. */
static void k_noise(void **args, const fakecuda_dims_t *d)
{
    float *y = *(float **)args[0];
    uint64_t seed = *(uint64_t *)args[1], off = *(uint64_t *)args[2];
    int n = *(int *)args[3];
    (void)d;
    for (int i = 0; i < n; i++) {
        uint64_t z = seed ^ (off * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)i * 0xbf58476d1ce4e5b9ULL;
        z ^= z >> 31;
        y[i] += (float)(z % 1000) * 1e-4f;
    }
}

/* s[0] = sum(x) over the grid size given in the launch (gx*bx elements). */
static void k_sum(void **args, const fakecuda_dims_t *d)
{
    float *s = *(float **)args[0];
    const float *x = *(float *const *)args[1];
    unsigned n = d->gx * d->bx;
    float acc = 0;
    for (unsigned i = 0; i < n; i++)
        acc += x[i];
    s[0] = acc;
}

/* An argument block like PyTorch's TensorIterator offset calculators: 3.5 KB by value. */
typedef struct {
    int dims;
    int sizes[25];
    long long strides[25][16];
} bigarg_t;

static void k_big(void **args, const fakecuda_dims_t *d)
{
    float *y = *(float **)args[0];
    const bigarg_t *b = args[1];
    int n = *(int *)args[2];
    (void)d;
    for (int i = 0; i < n; i++)
        y[i] = y[i] * 0.5f + (float)(b->strides[i % 25][i % 16] % 7) + (float)b->sizes[i % 25];
}

/* m[0] = v, published to a host thread reading m directly (fakecuda's device memory is host memory) */
static void k_mark(void **args, const fakecuda_dims_t *d)
{
    int *m = *(int **)args[0];
    int v = *(int *)args[1];
    (void)d;
    __atomic_store_n(m, v, __ATOMIC_RELEASE);
}

/* dst[i] = *src (an int another kernel wrote), read when the kernel runs */
static void k_take(void **args, const fakecuda_dims_t *d)
{
    int *dst = *(int **)args[0];
    const int *src = *(const int *const *)args[1];
    int i = *(int *)args[2];
    (void)d;
    dst[i] = __atomic_load_n(src, __ATOMIC_ACQUIRE);
}

/* ctxwait's other thread: in its own context, for each request n, its stream waits for the event and
 * copies the mark into seen[n - 1]; then the fake runs the queued work (fakecuda_run_all, as a GPU would:
 * no sync the shim could see, so nothing tells it to issue what it holds) until the copy has run, which
 * the thread sees in seen[n - 1] (device memory the host can read, in the fake), and n is reported done.
 * The copy's graph may reach the driver a little after the launch returns (the shim's issuer launches
 * it): a GPU runs it then, as the fake does here. */
typedef struct {
    CUcontext ctx;
    CUfunction take;
    CUevent ev;
    CUdeviceptr mark, seen;
    int request, done, errors;
} waiter_t;

static void *waiter_main(void *arg)
{
    waiter_t *w = arg;
    if (cuCtxSetCurrent(w->ctx) != CUDA_SUCCESS)
        w->errors++;
    for (int n = 1;; n++) {
        int r;
        while ((r = __atomic_load_n(&w->request, __ATOMIC_ACQUIRE)) != -1 && r < n)
            ;
        if (r == -1)
            return NULL;
        int i = n - 1;
        void *t[] = {&w->seen, &w->mark, &i};
        if (cuStreamWaitEvent(NULL, w->ev, 0) != CUDA_SUCCESS ||
            cuLaunchKernel(w->take, 1, 1, 1, 1, 1, 1, 0, NULL, t, NULL) != CUDA_SUCCESS)
            w->errors++;
        do
            fakecuda_run_all();
        while (__atomic_load_n((const int *)(uintptr_t)w->seen + i, __ATOMIC_ACQUIRE) == 0);
        __atomic_store_n(&w->done, n, __ATOMIC_RELEASE);
    }
}

/* The observer cases: a thread that issues no work polls the event of an iteration's mark, as a
 * watchdog polls the events of collective operations. The main thread records marks[it % 3] after the
 * kernel that writes it + 1 into *mark, then publishes it + 1. An event found complete must have its
 * mark written: a poll answered from an earlier record while the new one is held back would find an
 * older mark (a violation). "observer" polls the previous iteration's event (recorded before the work
 * held now: the poll need not issue anything), "observer_held" the current one (held back while its
 * chunk is: a few polls are answered "not ready", then one issues it). After each record the main thread
 * waits until the observer has polled once ("observer"), or OBS_POLLS times, more than the shim answers
 * "not ready" without issuing the held work, so that every iteration has polls while work is held back,
 * whatever the scheduler does; the observer's other polls land anywhere in the iteration. A poller that
 * the program waits for would otherwise wait for the stall watcher. "observer_once" queries the current
 * record once an iteration and then waits for the next, as PyTorch's page-locked host allocator queries,
 * at each allocation of the DataLoader's pin-memory thread, the event it recorded when an earlier batch's
 * block was freed (the shim answers "not ready" while the record is held, instead of issuing it there);
 * "observer_few" six times (a pin-memory thread two batches ahead). "observer_alt" is observer_held with
 * a second event recorded beside the mark's, the polls alternating between the two held records. */
typedef struct {
    CUcontext ctx;
    CUevent marks[3]; /* iteration it records marks[it % 3] */
    const int *mark;
    int held;  /* poll the current iteration's event */
    int noctx; /* with no context current (the fake's query then fails: the shim issues held work first) */
    int per;   /* this many queries of each iteration's record (held), none in between (0: no limit) */
    int alt;   /* alternate the polls between marks[] and alts[] (recorded at the same point) */
    CUevent alts[3];
    int ready, done, published, polled, violations;
    int polls; /* of the record polled last (polled), at most OBS_POLLS */
} observer_t;
#define OBS_POLLS 24 /* more than the shim's "not ready" answers while the same work is held (16) */

static void *observer_main(void *arg)
{
    observer_t *o = arg;
    if (!o->noctx && cuCtxSetCurrent(o->ctx) != CUDA_SUCCESS) {
        __atomic_store_n(&o->violations, -1, __ATOMIC_RELEASE);
        __atomic_store_n(&o->ready, 1, __ATOMIC_RELEASE);
        return NULL;
    }
    __atomic_store_n(&o->ready, 1, __ATOMIC_RELEASE);
    while (!__atomic_load_n(&o->done, __ATOMIC_ACQUIRE)) {
        int p = __atomic_load_n(&o->published, __ATOMIC_ACQUIRE);
        int want = o->held ? p : p - 1; /* the iteration + 1 whose mark the polled record follows */
        int same = __atomic_load_n(&o->polled, __ATOMIC_ACQUIRE) == want;
        if (want < 1 || (o->per && same && __atomic_load_n(&o->polls, __ATOMIC_ACQUIRE) >= o->per))
            continue;
        int which = o->alt && same ? __atomic_load_n(&o->polls, __ATOMIC_ACQUIRE) % 2 : 0;
        CUresult r = cuEventQuery(which ? o->alts[(want - 1) % 3] : o->marks[(want - 1) % 3]);
        /* the event may have been recorded again since (for iteration want + 3): then it is later still */
        if (r == CUDA_SUCCESS && __atomic_load_n(o->mark, __ATOMIC_ACQUIRE) < want)
            __atomic_add_fetch(&o->violations, 1, __ATOMIC_RELAXED);
        int n = __atomic_load_n(&o->polled, __ATOMIC_RELAXED) == want ? o->polls : 0;
        __atomic_store_n(&o->polls, n < OBS_POLLS ? n + 1 : n, __ATOMIC_RELEASE);
        __atomic_store_n(&o->polled, want, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* buckets_gemm: the step's GEMM as a library picks it: the small tile and a split-K reduction for the
 * smaller half of the buckets, the large tile for the others (on the H200 cuBLAS's choice of kernel moves
 * with the batch's size), and a template with smaller tiles for the smallest third (as PyTorch instantiates
 * LayerNorm's backward). Out of main's loop, whose code the other cases' timings depend on (with this
 * inline there, engine.replan's one timed sighting met a 12 ms stall on a loaded machine most times). */
__attribute__((noinline)) static CUresult gemm_step(const CUfunction *f, unsigned bucket, unsigned nbuckets,
                                                    unsigned grid, CUdeviceptr y, CUdeviceptr x, int len,
                                                    CUstream stream)
{
    int small = bucket < nbuckets / 2;
    float a = 1.0f, b = 0.0f;
    void *p[] = {&y, &x, &a, &b, &len};
    CUresult r = cuLaunchKernel(small ? f[0] : f[1], grid, 1, 1, 32, 1, 1, 0, stream, p, NULL);
    if (r == CUDA_SUCCESS && small)
        r = cuLaunchKernel(f[2], 1, 1, 1, 32, 1, 1, 0, stream, p, NULL);
    if (r == CUDA_SUCCESS)
        r = cuLaunchKernel(bucket < nbuckets / 3 ? f[3] : f[4], grid, 1, 1, 32, 1, 1, 0, stream, p, NULL);
    return r;
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "sync";
    int iters = argc > 2 ? atoi(argv[2]) : 30;
    const char *kus = getenv("ENGINE_KERNEL_US");
    axpb_ns = kus ? strtoull(kus, NULL, 10) * 1000 : 0;
    /* ENGINE_HOST_US: the program's own host work after each launch of the main loop (an interpreter's),
     * spun; ENGINE_TIME=1: the loop's wall time on stderr ("loop_ms: "), for comparisons by hand */
    const char *hus = getenv("ENGINE_HOST_US");
    uint64_t host_ns = hus ? strtoull(hus, NULL, 10) * 1000 : 0;
    uint64_t loop_t0 = 0;
    /* ENGINE_LATE_FROM (20): tokens' launches from this one of the 40 on have the token's own grid */
    const char *lf = getenv("ENGINE_LATE_FROM");
    int late_from = lf ? atoi(lf) : 20;
    size_t s2[] = {8, 8, 4, 4, 4}, s3[] = {8, 8, 8, 4}, s4[] = {8, 8};
    fakecuda_register_kernel("axpb", k_axpb, 5, s2);
    fakecuda_register_kernel("noise", k_noise, 4, s3);
    fakecuda_register_kernel("sum", k_sum, 2, s4);
    size_t s6[] = {8, 8, 4};
    fakecuda_register_kernel("acc", k_acc, 3, s6);
    size_t s5[] = {8, sizeof(bigarg_t), 4};
    fakecuda_register_kernel("big", k_big, 3, s5);
    size_t s7[] = {8, 4};
    fakecuda_register_kernel("mark", k_mark, 2, s7);
    size_t s8[] = {8, 8, 4};
    fakecuda_register_kernel("take", k_take, 3, s8);
    /* buckets_gemm: a library's GEMM kernels, named as cuBLAS names them, picked by the batch's size */
    fakecuda_register_kernel("sm90_xmma_gemm_f32f32_tile64", k_axpb, 5, s2);
    fakecuda_register_kernel("sm90_xmma_gemm_f32f32_tile128", k_axpb, 5, s2);
    fakecuda_register_kernel("splitKreduce_kernel", k_axpb, 5, s2);
    /* ... and a template instantiated with other tile sizes for smaller batches, its names mangled as the
     * driver gives them (engine::(anonymous namespace)::norm_grad<float, 32u, 256u> and <float, 16u, 128u>) */
    fakecuda_register_kernel("_ZN6engine12_GLOBAL__N_19norm_gradIfLj32ELj256EEEvPfPKfffi", k_axpb, 5, s2);
    fakecuda_register_kernel("_ZN6engine12_GLOBAL__N_19norm_gradIfLj16ELj128EEEvPfPKfffi", k_axpb, 5, s2);
    CK(cuInit(0));
    CUdevice dev;
    CUcontext ctx;
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CUmodule mod;
    CK(cuModuleLoadData(&mod, "fakecuda-module engine"));
    CUfunction axpb, noise, sum, big, acc, markf;
    CK(cuModuleGetFunction(&axpb, mod, "axpb"));
    CK(cuModuleGetFunction(&noise, mod, "noise"));
    CK(cuModuleGetFunction(&sum, mod, "sum"));
    CK(cuModuleGetFunction(&big, mod, "big"));
    CK(cuModuleGetFunction(&acc, mod, "acc"));
    CK(cuModuleGetFunction(&markf, mod, "mark"));
    CUfunction gemm64, gemm128, splitk;
    CK(cuModuleGetFunction(&gemm64, mod, "sm90_xmma_gemm_f32f32_tile64"));
    CK(cuModuleGetFunction(&gemm128, mod, "sm90_xmma_gemm_f32f32_tile128"));
    CK(cuModuleGetFunction(&splitk, mod, "splitKreduce_kernel"));
    CUfunction norm256, norm128;
    CK(cuModuleGetFunction(&norm256, mod, "_ZN6engine12_GLOBAL__N_19norm_gradIfLj32ELj256EEEvPfPKfffi"));
    CK(cuModuleGetFunction(&norm128, mod, "_ZN6engine12_GLOBAL__N_19norm_gradIfLj16ELj128EEEvPfPKfffi"));
    const CUfunction gemms[] = {gemm64, gemm128, splitk, norm128, norm256};
    CUdeviceptr land;
    CK(cuMemAlloc(&land, 8 * N * sizeof(float)));
    CUdeviceptr buf[4], s;
    for (int i = 0; i < 4; i++) {
        CK(cuMemAlloc(&buf[i], N * sizeof(float)));
        CK(cuMemsetD32(buf[i], 0, N));
    }
    CK(cuMemAlloc(&s, 64));
    /* the observer, oldquery and ctxwait cases' mark: a kernel writes the iteration + 1 into it before
     * their event records */
    CUdeviceptr mark;
    CK(cuMemAlloc(&mark, sizeof(int)));
    CK(cuMemsetD32(mark, 0, 1));
    float host[N];
    for (int i = 0; i < N; i++)
        host[i] = (float)i / N;
    CK(cuMemcpyHtoD(buf[0], host, sizeof host));
    uint64_t h = 1469598103934665603ULL;
    int n = N;
    uint64_t seed = 1234, off = 0;
    CUstream stream = NULL, side = NULL;
    typedef CUresult (*launch_fn_t)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    CUstream, void **, void **);
    typedef CUresult (*launch_ex_fn_t)(const CUlaunchConfig *, CUfunction, void **, void **);
    typedef CUresult (*memset8_fn_t)(CUdeviceptr, unsigned char, size_t, CUstream);
    typedef CUresult (*copy_dd_fn_t)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    typedef CUresult (*copy_hd_fn_t)(CUdeviceptr, const void *, size_t, CUstream);
    typedef CUresult (*copy_dh_fn_t)(void *, CUdeviceptr, size_t, CUstream);
    typedef CUresult (*evrec_fn_t)(CUevent, CUstream);
    launch_fn_t launch = cuLaunchKernel;
    launch_ex_fn_t launch_ex = cuLaunchKernelEx;
    memset8_fn_t memset8 = cuMemsetD8Async;
    copy_dd_fn_t copy_dd = cuMemcpyDtoDAsync;
    copy_hd_fn_t copy_hd = cuMemcpyHtoDAsync;
    copy_dh_fn_t copy_dh = cuMemcpyDtoHAsync;
    evrec_fn_t evrec = cuEventRecord;
    /* unified: every copy of the h2d, memops and d2hpinned cases, and the step's read of its loss, through
     * the unified cuMemcpyAsync (the direction from the pointers) */
    int uni = strcmp(which, "unified") == 0;
    if (uni) {
        copy_dd = u_dd;
        copy_hd = u_hd;
        copy_dh = u_dh;
    }
    /* the per-thread default stream cases also make every other kind of operation the engine could hold */
    int pt = strcmp(which, "ptds") == 0 || strcmp(which, "ptsz") == 0;
    if (strcmp(which, "ptds") == 0)
        stream = CU_STREAM_PER_THREAD;
    if (strcmp(which, "ptsz") == 0) {
        launch = (launch_fn_t)dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz");
        launch_ex = (launch_ex_fn_t)dlsym(RTLD_DEFAULT, "cuLaunchKernelEx_ptsz");
        memset8 = (memset8_fn_t)dlsym(RTLD_DEFAULT, "cuMemsetD8Async_ptsz");
        copy_dd = (copy_dd_fn_t)dlsym(RTLD_DEFAULT, "cuMemcpyDtoDAsync_v2_ptsz");
        copy_hd = (copy_hd_fn_t)dlsym(RTLD_DEFAULT, "cuMemcpyHtoDAsync_v2_ptsz");
        copy_dh = (copy_dh_fn_t)dlsym(RTLD_DEFAULT, "cuMemcpyDtoHAsync_v2_ptsz");
        evrec = (evrec_fn_t)dlsym(RTLD_DEFAULT, "cuEventRecord_ptsz");
        if (!launch || !launch_ex || !memset8 || !copy_dd || !copy_hd || !copy_dh || !evrec) {
            fprintf(stderr, "engine_prog: a per-thread (_ptsz) entry point is missing\n");
            return 1;
        }
    }
    CUevent pt_ev = NULL;
    if (pt)
        CK(cuEventCreate(&pt_ev, CU_EVENT_DISABLE_TIMING));
    CUevent fork, join;
    int two = strcmp(which, "twostreams") == 0, legacyside = strcmp(which, "legacyside") == 0;
    /* From half-way on, in the middle of the learned loop, one launch in another context (ctxswitch), or
     * on the legacy stream (streamswitch), into a buffer of its own: the held work must go first, and the
     * fallback is counted (other_stream, other_context). streamswitch's loop launches on 15 more created
     * streams each iteration, there, into slices of that buffer: with the program's stream, as many as a
     * segment may span (AG_MAX_STREAMS), and the legacy stream is one more. */
    int streamswitch = strcmp(which, "streamswitch") == 0, ctxswitch = strcmp(which, "ctxswitch") == 0;
    /* ctxwait: in the middle of every iteration the held work's stream records an event after a kernel
     * that writes the iteration + 1 into a mark; another thread, in another context, makes its stream
     * wait for that event and copies the mark: the record must be issued before that wait goes to the
     * driver (the thread that holds the work issues it at its own call into another context; this is
     * another thread) */
    int ctxwait = strcmp(which, "ctxwait") == 0;
    waiter_t cw;
    memset(&cw, 0, sizeof cw);
    pthread_t cw_thread;
    if (strcmp(which, "stream") == 0 || two || streamswitch)
        CK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUcontext ctx2 = NULL;
    CUfunction axpb2 = NULL;
    CUdeviceptr own = 0;
    if (ctxswitch || ctxwait) {
        CUmodule mod2;
        CK(cuCtxCreate(&ctx2, NULL, 0, dev)); /* current until set back */
        CK(cuModuleLoadData(&mod2, "fakecuda-module engine"));
        CK(cuModuleGetFunction(&axpb2, mod2, "axpb"));
        CK(cuModuleGetFunction(&cw.take, mod2, "take"));
    }
    if (ctxwait) {
        CK(cuMemAlloc(&cw.seen, (size_t)iters * sizeof(int)));
        CK(cuMemsetD32(cw.seen, 0, (size_t)iters));
        CK(cuCtxSynchronize());
        CK(cuCtxSetCurrent(ctx));
        CK(cuEventCreate(&cw.ev, CU_EVENT_DISABLE_TIMING));
        CK(cuCtxSynchronize());
        cw.ctx = ctx2;
        cw.mark = mark;
        if (pthread_create(&cw_thread, NULL, waiter_main, &cw) != 0) {
            fprintf(stderr, "engine_prog: no waiter thread\n");
            return 1;
        }
    }
    CUstream more[15];
    for (int j = 0; streamswitch && j < 15; j++)
        CK(cuStreamCreate(&more[j], CU_STREAM_NON_BLOCKING));
    if (ctxswitch || streamswitch) {
        CK(cuMemAlloc(&own, N * sizeof(float)));
        CK(cuMemsetD32(own, 0, N));
        CK(cuCtxSynchronize());
    }
    if (ctxswitch)
        CK(cuCtxSetCurrent(ctx));
    if (legacyside) /* a blocking main stream, the legacy stream as the side stream */
        CK(cuStreamCreate(&stream, CU_STREAM_DEFAULT));
    if (two || legacyside) {
        if (two)
            CK(cuStreamCreate(&side, CU_STREAM_DEFAULT));
        CK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
        CK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    }
    /* autograd: as PyTorch's autograd engine hands each gradient to the stream that consumes it, every
     * iteration records a new event per gradient on the main stream, then waits for each on a side stream
     * and destroys it (while the wait may be held back), and the side stream reads the result */
    int autograd = strcmp(which, "autograd") == 0 || strcmp(which, "autograd_step") == 0;
    /* autograd_step: the step of a model whose forward and backward the program graphs itself (PyTorch's
     * make_graphed_callables), in outline: the backward a graph of the program's launched after the loss's
     * kernels, the hand-off above, the side stream's record of its end made with a new event each time,
     * waited for by the main stream and destroyed, then the optimizer's kernels before the loss is read */
    int agstep = strcmp(which, "autograd_step") == 0;
    CUgraphExec backward = NULL;
    if (agstep) {
        CUgraph g;
        CUgraphNode node;
        CK(cuGraphCreate(&g, 0));
        CK(cuGraphAddEmptyNode(&node, g, NULL, 0));
        CK(cuGraphInstantiateWithFlags(&backward, g, 0));
        CK(cuGraphDestroy(g));
    }
    /* decode: text generation with a static cache whose forward pass the program graphs itself (Hugging
     * Face's generate() compiles it with cudagraphs), in outline: each token copies its inputs into the
     * graph's static buffer, launches the program's graph, copies the result out, then runs the token's
     * eager work (logits processing, sampling) and reads the token back (a sync per token); every token has
     * the same shapes */
    int decode = strcmp(which, "decode") == 0;
    CUgraphExec fwd = NULL;
    CUdeviceptr stat_in = 0;
    if (decode) {
        CUstream cs;
        CUgraph g;
        CK(cuMemAlloc(&stat_in, N * sizeof(float)));
        CK(cuMemsetD32(stat_in, 0, N));
        CK(cuCtxSynchronize());
        CK(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
        CK(cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_GLOBAL));
        float a = 0.75f, b = 0.125f;
        int nn = N;
        void *p[] = {&stat_in, &stat_in, &a, &b, &nn};
        for (int k = 0; k < 4; k++)
            CK(launch(axpb, 1, 1, 1, 32, 1, 1, 0, cs, p, NULL));
        CK(cuStreamEndCapture(cs, &g));
        CK(cuGraphInstantiateWithFlags(&fwd, g, 0));
        CK(cuGraphDestroy(g));
        CK(cuStreamDestroy(cs));
    }
    CUdeviceptr agz = 0;
    if (autograd) {
        CK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
        CK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
        CK(cuMemAlloc(&agz, N * sizeof(float)));
        CK(cuMemsetD8(agz, 0, N * sizeof(float)));
    }

    int flip = strcmp(which, "flip") == 0;
    int observe = strcmp(which, "observer") == 0 || strcmp(which, "observer_held") == 0 ||
                  strcmp(which, "observer_noctx") == 0 || strcmp(which, "observer_once") == 0 ||
                  strcmp(which, "observer_few") == 0 || strcmp(which, "observer_alt") == 0;
    /* oldquery: the main thread queries the event it has just recorded once (a barrier: it ends the
     * segment at the same point every time), and later polls, a varying number of times, the one
     * recorded in the iteration before (before the last barrier: it observes nothing held, no
     * barrier). Each record follows a kernel that writes the iteration + 1 into *mark: an event found
     * complete whose mark is older is counted (a query answered while its record was still held back). */
    int oldquery = strcmp(which, "oldquery") == 0, qviolations = 0;
    /* farquery: PyTorch's page-locked host allocator at loss.item() in outline. The main thread records
     * two events early in the iteration (each after a kernel that writes the iteration + 1 into *mark)
     * and queries each once 36 or more operations later (one near the end, one in the middle), in some
     * iterations only (where the allocator gets to them depends on another thread's progress). Such a
     * query is no barrier: the driver answers where the record was issued, "not ready" where it is still
     * held (the middle one, with chunks of a whole half iteration); an event found complete whose mark is
     * older is counted, as in oldquery. The answers are not hashed (a held record's is "not ready", the
     * fake's own query of an issued one runs the work). */
    int farquery = strcmp(which, "farquery") == 0;
    CUevent far_ev[2] = {NULL, NULL};
    int spin = strcmp(which, "spin") == 0, spin_stuck = 0;
    int fattr = strcmp(which, "fattr") == 0, fattr_unhooked = strcmp(which, "fattr_unhooked") == 0;
    CUdeviceptr fab = 0; /* fattr: what its launches add up, read at the end */
    CUkernel kacc = NULL; /* fattr: acc as a library's kernel, its limit set through cuKernelSetAttribute */
    if (fattr || fattr_unhooked) {
        CK(cuMemAlloc(&fab, N * sizeof(float)));
        CK(cuMemsetD32(fab, 0, N));
        CUlibrary flib;
        CK(cuLibraryLoadData(&flib, "fakecuda-module engine", NULL, NULL, 0, NULL, NULL, 0));
        CK(cuLibraryGetKernel(&kacc, flib, "acc"));
    }
    /* d2hpinned: device-to-host copies into page-locked memory, held back with the launches */
    int d2hpinned = strcmp(which, "d2hpinned") == 0 || uni;
    float *pin_out = NULL;
    CUevent d2h_ev = NULL;
    if (d2hpinned || pt) {
        CK(cuMemAllocHost((void **)&pin_out, 3 * 8 * 64 * sizeof(float)));
        CK(cuEventCreate(&d2h_ev, CU_EVENT_DISABLE_TIMING));
    }
    CUevent qev[2] = {NULL, NULL};
    if (farquery) {
        CK(cuEventCreate(&far_ev[0], CU_EVENT_DISABLE_TIMING));
        CK(cuEventCreate(&far_ev[1], CU_EVENT_DISABLE_TIMING));
    }
    if (oldquery) {
        CK(cuEventCreate(&qev[0], CU_EVENT_DISABLE_TIMING));
        CK(cuEventCreate(&qev[1], CU_EVENT_DISABLE_TIMING));
    }
    observer_t obs;
    memset(&obs, 0, sizeof obs);
    pthread_t obs_thread;
    if (observe) {
        for (int e = 0; e < 3; e++) {
            CK(cuEventCreate(&obs.marks[e], CU_EVENT_DISABLE_TIMING));
            CK(cuEventCreate(&obs.alts[e], CU_EVENT_DISABLE_TIMING));
        }
        CK(cuCtxSynchronize());
        obs.ctx = ctx;
        obs.mark = (const int *)(uintptr_t)mark;
        obs.noctx = strcmp(which, "observer_noctx") == 0;
        obs.per = strcmp(which, "observer_once") == 0 ? 1 : strcmp(which, "observer_few") == 0 ? 6 : 0;
        obs.alt = strcmp(which, "observer_alt") == 0;
        obs.held = strcmp(which, "observer_held") == 0 || obs.noctx || obs.per || obs.alt;
        if (pthread_create(&obs_thread, NULL, observer_main, &obs) != 0) {
            fprintf(stderr, "engine_prog: no observer thread\n");
            return 1;
        }
        while (!__atomic_load_n(&obs.ready, __ATOMIC_ACQUIRE))
            ;
    }
    /* amp: tests/python/torch_amp.py's step in outline. Two micro-batches, each of one of six sizes in a
     * seeded random order (a forward and a backward of 6 layers: a GEMM as cuBLAS picks it by size, the
     * LayerNorm backward's template as PyTorch instantiates it by size, elementwise kernels; the second
     * micro-batch accumulates its gradients with other kernels), each ending with its loss read through
     * page-locked memory and a sync (loss.item()); then the optimizer step: the gradients unscaled and
     * checked, the result read (found_inf), the update unless the step is skipped (one in seven), the
     * learning rate by value, the scale read; an evaluation every 10 steps. */
    int amp = strcmp(which, "amp") == 0, gemm_case = strcmp(which, "buckets_gemm") == 0;
    for (int it = 0; amp && it < iters; it++) {
        static float *pin;
        static unsigned rng = 777u;
        if (!pin)
            CK(cuMemAllocHost((void **)&pin, 8 * sizeof *pin));
        float a = 0.999f, b = 0.001f;
        for (int mb = 0; mb < 2; mb++) {
            rng = rng * 1103515245u + 12345u;
            unsigned bk = (rng >> 16) % 6, grid = 1 + bk;
            int len = (int)((unsigned)N * (bk + 1) / 6), gl = N;
            CUdeviceptr x = buf[0], y = buf[1], g = buf[2], t = buf[3];
            for (int l = 0; l < 6; l++) { /* forward */
                void *p[] = {&y, &x, &a, &b, &len}, *q[] = {&x, &y, &a, &b, &len};
                CK(launch(bk < 3 ? gemm64 : gemm128, grid, 1, 1, 32, 1, 1, 0, stream, p, NULL));
                CK(launch(axpb, grid, 1, 1, 32, 1, 1, 0, stream, q, NULL));
                CK(launch(axpb, grid, 1, 1, 32, 1, 1, 0, stream, p, NULL));
            }
            for (int l = 0; l < 6; l++) { /* backward */
                void *p[] = {&t, &y, &a, &b, &len}, *q[] = {&y, &t, &a, &b, &len};
                CK(launch(bk < 3 ? gemm64 : gemm128, grid, 1, 1, 32, 1, 1, 0, stream, p, NULL));
                CK(launch(bk < 2 ? norm128 : norm256, grid, 1, 1, 32, 1, 1, 0, stream, q, NULL));
                CK(launch(bk < 3 ? gemm64 : gemm128, grid, 1, 1, 32, 1, 1, 0, stream, p, NULL));
                if (mb == 0) { /* fresh gradients */
                    void *w[] = {&g, &t, &a, &b, &gl};
                    CK(launch(axpb, 1, 1, 1, 32, 1, 1, 0, stream, w, NULL));
                } else { /* accumulated */
                    void *w[] = {&g, &t, &gl};
                    CK(launch(acc, 1, 1, 1, 32, 1, 1, 0, stream, w, NULL));
                }
            }
            CK(copy_dh(&pin[mb], y, sizeof *pin, stream));
            CK(cuStreamSynchronize(stream));
            h = fc_prog_fnv(h, &pin[mb], sizeof *pin);
        }
        CUdeviceptr g = buf[2], w = buf[3];
        int gl = N;
        for (int k = 0; k < 4; k++) { /* unscale, the overflow check */
            void *p[] = {&g, &g, &a, &b, &gl};
            CK(launch(axpb, 1, 1, 1, 32, 1, 1, 0, stream, p, NULL));
        }
        CK(copy_dh(&pin[2], g, sizeof *pin, stream));
        CK(cuStreamSynchronize(stream));
        h = fc_prog_fnv(h, &pin[2], sizeof *pin);
        if (it % 7 != 3) { /* the update, the learning rate by value */
            float lr = 1e-3f * (float)(1 + it % 5);
            for (int k = 0; k < 12; k++) {
                void *p[] = {&w, &g, &a, &lr, &gl};
                CK(launch(axpb, 1, 1, 1, 32, 1, 1, 0, stream, p, NULL));
            }
        }
        void *u[] = {&g, &g, &a, &b, &gl};
        CK(launch(axpb, 1, 1, 1, 32, 1, 1, 0, stream, u, NULL));
        CK(copy_dh(&pin[3], g, sizeof *pin, stream));
        CK(cuStreamSynchronize(stream));
        h = fc_prog_fnv(h, &pin[3], sizeof *pin);
        if ((it + 1) % 10 == 0) { /* evaluation, the largest size */
            CUdeviceptr x = buf[0], y = buf[1];
            int len = N;
            for (int l = 0; l < 6; l++) {
                void *p[] = {&y, &x, &a, &b, &len}, *q[] = {&x, &y, &a, &b, &len};
                CK(launch(gemm128, 6, 1, 1, 32, 1, 1, 0, stream, p, NULL));
                CK(launch(axpb, 6, 1, 1, 32, 1, 1, 0, stream, q, NULL));
            }
            CK(copy_dh(&pin[4], x, sizeof *pin, stream));
            CK(cuStreamSynchronize(stream));
            h = fc_prog_fnv(h, &pin[4], sizeof *pin);
        }
    }
    /* pause: the shim's autograph_pause, where the shim is loaded (plain, the program runs as "sync") */
    int (*pause_fn)(int) = NULL, pause_state = 0;
    if (strcmp(which, "pause") == 0)
        *(void **)&pause_fn = dlsym(RTLD_DEFAULT, "autograph_pause");
    loop_t0 = fc_prog_now_ns();
    for (int it = 0; it < (amp ? 0 : iters); it++) {
        /* flip: graph launches cost 200 us in the first half (plain launches win), and in the second
         * the fake's 3 us against launches of 10 us (the graphs win clearly: at the fake's 2 us a launch
         * they won by 5-35% with the issuer on two CPUs, and now and then the third verdict, the one
         * after the flip, lost within the noise, leaving the segment plain to the end) */
        if (flip && it == 0)
            fakecuda_set_host_costs(2000, 200000);
        if (flip && it == iters / 2)
            fakecuda_set_host_costs(10000, 3000);
        /* Swapping buffers each iteration: arguments change, as with a caching allocator. */
        CUdeviceptr x = buf[it % 2], y = buf[2 + it % 2];
        int len = n;
        unsigned grid = 1, bucket = 0, nbuckets = 1;
        if (strcmp(which, "random") == 0) /* shapes that never repeat: nothing to replay */
            grid = 1 + (unsigned)((it * 7919u) % 61u) + (unsigned)it * 64u;
        if (strcmp(which, "shape") == 0) { /* the batch changes every 4 iterations, back and forth */
            len = (it / 4) % 2 ? N / 2 : N;
            grid = (it / 4) % 2 ? 1 : 2;
        }
        if (strncmp(which, "buckets", 7) == 0) {
            /* the batch's size from a few buckets (ENGINE_BUCKETS, default 8) in a seeded random order,
             * as a loader that pads each batch to one of a few lengths hands them out (buckets_pinned:
             * the loss read through page-locked memory, as PyTorch's loss.item() reads it) */
            static unsigned nb, rng = 12345u;
            if (!nb) {
                const char *e = getenv("ENGINE_BUCKETS");
                nb = e && atoi(e) > 0 && atoi(e) <= 64 ? (unsigned)atoi(e) : 8u;
            }
            rng = rng * 1103515245u + 12345u;
            unsigned bk = (rng >> 16) % nb;
            /* ENGINE_PHASES=1: the first half of the iterations from the first half of the sizes, the rest
             * from the other half (a program that moves on to other work for good) */
            if (getenv("ENGINE_PHASES") && nb >= 2)
                bk = (rng >> 16) % (nb / 2) + (it < iters / 2 ? 0 : nb / 2);
            grid = 1 + bk;
            len = (int)((unsigned)N * (bk + 1) / nb);
            bucket = bk, nbuckets = nb;
        }
        /* tokens: text generation in outline, one token an iteration: ENGINE_BUCKETS (24) tokens a round, in
         * order, round after round; the first half of the step is the same for every token, the second
         * half's grids grow with the token (attention over a cache one position longer each time) */
        unsigned late_grid = 0;
        if (strcmp(which, "tokens") == 0) {
            const char *e = getenv("ENGINE_BUCKETS");
            unsigned nt = e && atoi(e) > 0 && atoi(e) <= 256 ? (unsigned)atoi(e) : 24u;
            late_grid = 1 + (unsigned)it % nt;
        }
        if (gemm_case) /* the step's GEMM as a library picks it by size (gemm_step) */
            CK(gemm_step(gemms, bucket, nbuckets, grid, y, x, len, stream));
        if (two || legacyside) { /* fork: the side stream scales buffer 3 while the main stream works on x and y */
            CK(cuEventRecord(fork, stream));
            CK(cuStreamWaitEvent(side, fork, 0));
            CUdeviceptr z = buf[2 + (it + 1) % 2];
            float a = 0.5f, b = 0.25f;
            int zl = n;
            for (int k = 0; k < 10; k++) {
                void *p[] = {&z, &z, &a, &b, &zl};
                CK(launch(axpb, 1, 1, 1, 32, 1, 1, 0, side, p, NULL));
            }
            CK(cuEventRecord(join, side));
        }
        if (decode) {
            CK(copy_dd(stat_in, x, N * sizeof(float), stream));
            CK(cuGraphLaunch(fwd, stream));
            CK(copy_dd(x, stat_in, N * sizeof(float), stream));
        }
        for (int k = 0; k < 40; k++) {
            float a = 1.0f + 0.001f * (float)k, b = (strcmp(which, "args") == 0) ? 0.01f * (float)it : 0.5f;
            void *p[] = {&y, &x, &a, &b, &len};
            CK(launch(axpb, late_grid && k >= late_from ? late_grid : grid, 1, 1, 32, 1, 1, 0, stream, p, NULL));
            void *q[] = {&x, &y, &a, &b, &len};
            CK(launch(axpb, 1, 1, 1, 32, 1, 1, 0, stream, q, NULL));
            fc_prog_spin(2 * host_ns);
            if (ctxwait && k == 20) {
                int v = it + 1;
                void *m[] = {&mark, &v};
                CK(launch(markf, 1, 1, 1, 1, 1, 1, 0, stream, m, NULL));
                CK(cuEventRecord(cw.ev, stream));
                for (int e = 0; e < 3; e++) /* more work in the record's chunk: it is still held below */
                    CK(launch(axpb, 1, 1, 1, 32, 1, 1, 0, stream, q, NULL));
                __atomic_store_n(&cw.request, it + 1, __ATOMIC_RELEASE);
                while (__atomic_load_n(&cw.done, __ATOMIC_ACQUIRE) < it + 1)
                    ; /* until the other thread's copy ran */
            }
            if (farquery && (k == 1 || k == 2)) {
                int v = it + 1;
                void *m[] = {&mark, &v};
                CK(launch(markf, 1, 1, 1, 1, 1, 1, 0, stream, m, NULL));
                CK(cuEventRecord(far_ev[k == 1], stream));
            }
            if (farquery && ((k == 38 && it % 3 != 0) || (k == 17 && it % 4 != 1))) {
                CUresult r = cuEventQuery(far_ev[k == 17]);
                if (r == CUDA_SUCCESS && __atomic_load_n((const int *)(uintptr_t)mark, __ATOMIC_ACQUIRE) < it + 1)
                    qviolations++;
            }
            if (oldquery && k == 10) {
                int v = it + 1;
                void *m[] = {&mark, &v};
                CK(launch(markf, 1, 1, 1, 1, 1, 1, 0, stream, m, NULL));
                CK(cuEventRecord(qev[it % 2], stream));
            }
            if (oldquery && (k == 20 || k == 10) && (k == 10 || it > 0)) {
                int cur = k == 10; /* this iteration's record (held back, if its chunk is), or the one before */
                for (int q = 0; q <= (cur ? 0 : it % 3); q++) {
                    CUresult r = cuEventQuery(qev[(it + (cur ? 0 : 1)) % 2]);
                    h = fc_prog_fnv(h, &r, sizeof r);
                    if (r == CUDA_SUCCESS &&
                        __atomic_load_n((const int *)(uintptr_t)mark, __ATOMIC_ACQUIRE) < (cur ? it + 1 : it))
                        qviolations++;
                }
            }
            if (spin && k == 20) {
                /* the host waits for a kernel's write to memory it reads directly (zero-copy), with no CUDA
                 * call until it sees it: the GPU runs what it was given meanwhile (fakecuda_run_all) */
                int v = it + 1;
                void *m[] = {&mark, &v};
                CK(launch(markf, 1, 1, 1, 1, 1, 1, 0, stream, m, NULL));
                uint64_t t0 = fc_prog_now_ns();
                while (__atomic_load_n((const int *)(uintptr_t)mark, __ATOMIC_ACQUIRE) < it + 1) {
                    fakecuda_run_all();
                    if (fc_prog_now_ns() - t0 > 3000000000ull) { /* 3 s: stuck, the write never came */
                        spin_stuck++;
                        break;
                    }
                }
            }
            if (observe && k == 20) {
                int v = it + 1;
                void *m[] = {&mark, &v};
                CK(launch(markf, 1, 1, 1, 1, 1, 1, 0, stream, m, NULL));
                CK(cuEventRecord(obs.marks[it % 3], stream));
                if (obs.alt)
                    CK(cuEventRecord(obs.alts[it % 3], stream));
                __atomic_store_n(&obs.published, it + 1, __ATOMIC_RELEASE);
                /* until the observer polled this record (observer_held, observer_alt: OBS_POLLS times;
                 * observer_once, observer_few: as often as it will) or the previous one (observer), while
                 * this chunk's work is held back; it polls freely too */
                int polls = !obs.held ? 1 : obs.per ? obs.per : OBS_POLLS;
                while (__atomic_load_n(&obs.polled, __ATOMIC_ACQUIRE) < (obs.held ? it + 1 : it) ||
                       (obs.held && __atomic_load_n(&obs.polls, __ATOMIC_ACQUIRE) < polls))
                    ;
            }
            for (int j = 0; streamswitch && k == 20 && j < 15; j++) { /* a slice each, after the first */
                CUdeviceptr sl = own + (CUdeviceptr)(j + 1) * (N / 32) * sizeof(float);
                float sa = 0.5f, sb = (float)j;
                int sn = N / 32;
                void *q[] = {&sl, &sl, &sa, &sb, &sn};
                CK(launch(axpb, 1, 1, 1, 32, 1, 1, 0, more[j], q, NULL));
            }
            if ((streamswitch || ctxswitch) && k == 20 && it >= iters / 2) {
                float oa = 0.5f, ob = (float)it;
                int on = streamswitch ? N / 32 : len; /* streamswitch: the first slice */
                void *o[] = {&own, &own, &oa, &ob, &on};
                if (ctxswitch)
                    CK(cuCtxSetCurrent(ctx2));
                CK(launch(ctxswitch ? axpb2 : axpb, 1, 1, 1, 32, 1, 1, 0, NULL, o, NULL));
                if (ctxswitch) {
                    CK(cuCtxSynchronize());
                    CK(cuCtxSetCurrent(ctx));
                }
            }
            if (fattr_unhooked && k == 20) {
                /* the same, the limit put back where the shim cannot see it: the held launch fails when it
                 * is issued; its work is left out of the checksum, and the shim must say so and stop
                 * holding work back (AUTOGRAPH_STATS: reissue_failures, engines_disabled) */
                CK(cuFuncSetAttribute(acc, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
                void *ap[] = {&fab, &y, &len};
                CK(launch(acc, 1, 1, 1, 32, 1, 1, 65536, stream, ap, NULL));
                CK(fakecuda_unhooked_func_set_attribute(acc, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0));
            }
            if (fattr && k == 20) {
                /* a library's launch with more than 48 KiB of dynamic shared memory: the function's limit
                 * raised for it and put back right after (CUDA checks it at the launch): the launch, held
                 * back, must reach the driver before the limit goes down again */
                CK(cuFuncSetAttribute(acc, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536));
                void *ap[] = {&fab, &y, &len};
                CK(launch(acc, 1, 1, 1, 32, 1, 1, 65536, stream, ap, NULL));
                CK(cuFuncSetAttribute(acc, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0));
                /* the same limit set again (no change): no barrier is needed there */
                CK(cuFuncSetAttribute(acc, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0));
                /* the same through a library's kernel handle, as PyTorch launches its kernels */
                CK(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 65536, kacc, dev));
                CK(launch((CUfunction)kacc, 1, 1, 1, 32, 1, 1, 65536, stream, ap, NULL));
                CK(cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0, kacc, dev));
            }
            if (strcmp(which, "bigargs") == 0) {
                bigarg_t ba;
                memset(&ba, 0, sizeof ba);
                ba.dims = 2;
                for (int q = 0; q < 25; q++) {
                    ba.sizes[q] = q + it % 3;
                    for (int w = 0; w < 16; w++)
                        ba.strides[q][w] = q * w + k;
                }
                void *bp[] = {&y, &ba, &len};
                CK(launch(big, 1, 1, 1, 32, 1, 1, 0, stream, bp, NULL));
            }
            if (k % 4 == 1 && strcmp(which, "asyncfree") == 0) {
                /* a temporary from the stream-ordered pool, as PyTorch's cudaMallocAsync backend makes
                 * them: written, read, freed while the launches that use it may still be held back (its
                 * address differs every time: the fake never reuses one) */
                CUdeviceptr t;
                CK(cuMemAllocAsync(&t, (size_t)N * sizeof(float), stream));
                CK(cuMemsetD32Async(t, 0x3f000000u, N, stream));
                float a = 0.75f, b = 0.125f * (float)(k % 3);
                void *w[] = {&t, &x, &a, &b, &len}, *u[] = {&y, &t, &a, &b, &len};
                CK(launch(axpb, 1, 1, 1, 32, 1, 1, 0, stream, w, NULL));
                CK(launch(axpb, 1, 1, 1, 32, 1, 1, 0, stream, u, NULL));
                CK(cuMemFreeAsync(t, stream));
            }
            if (k % 10 == 3) {
                off += 4;
                void *r[] = {&x, &seed, &off, &len};
                CK(launch(noise, 1, 1, 1, 64, 1, 1, 0, stream, r, NULL));
            }
            if (k % 5 == 2 && (pt || uni || strcmp(which, "h2d") == 0)) {
                /* pageable source rewritten right after the call (legal: CUDA stages it), and a pinned one */
                static float pageable[1024];
                for (int q = 0; q < 1024; q++)
                    pageable[q] = (float)(it * 40 + k + q);
                /* each copy lands in its own slot and is accumulated into x: every snapshot counts */
                CUdeviceptr slot = land + (CUdeviceptr)(k / 5) * N * sizeof(float);
                CK(copy_hd(slot, pageable, sizeof pageable, stream));
                for (int q = 0; q < 1024; q++)
                    pageable[q] = -1.0f;
                int nn = N;
                void *ap[] = {&x, &slot, &nn};
                CK(launch(acc, 1, 1, 1, 32, 1, 1, 0, stream, ap, NULL));
                static float *pinned; /* written once: a pinned source is read when the copy runs */
                if (!pinned) {
                    CK(cuMemAllocHost((void **)&pinned, 64 * sizeof(float)));
                    for (int q = 0; q < 64; q++)
                        pinned[q] = (float)q;
                }
                CK(copy_hd(buf[2 + (it + 1) % 2], pinned, 64 * sizeof(float), stream));
            }
            if (k == 21 && (pt || uni || strcmp(which, "h2d") == 0)) {
                /* a page-locked source of 16 KB (larger than engine.h2d_small_staging's staging buffers,
                 * which only pageable sources need), written once, read when the copy runs */
                static float *pinned_big;
                static CUdeviceptr big;
                if (!pinned_big) {
                    CK(cuMemAllocHost((void **)&pinned_big, 4 * N * sizeof(float)));
                    for (int q = 0; q < 4 * N; q++)
                        pinned_big[q] = (float)(q % 97) * 0.25f;
                    CK(cuMemAlloc(&big, 4 * N * sizeof(float)));
                }
                CK(copy_hd(big, pinned_big, 4 * N * sizeof(float), stream));
                CUdeviceptr part = big + (CUdeviceptr)(it % 4) * N * sizeof(float);
                int nn = N;
                void *ap[] = {&x, &part, &nn};
                CK(launch(acc, 1, 1, 1, 32, 1, 1, 0, stream, ap, NULL));
            }
            if (k % 5 == 4 && (pt || d2hpinned)) {
                /* an asynchronous copy into page-locked memory, of y, which the next launches overwrite:
                 * held back with them, it must still read the y of its place in the stream; the host
                 * reads it only after a sync that covers it. The destination moves: three sets of slots
                 * in turn, one per iteration. */
                CK(copy_dh(pin_out + ((size_t)(it % 3) * 8 + (size_t)(k / 5)) * 64, y, 64 * sizeof(float), stream));
            }
            if (d2hpinned && k == 30) {
                /* the slots written so far, after an event sync (odd iterations) or a query that answers
                 * ready (even: the fake runs the work meanwhile) */
                CK(cuEventRecord(d2h_ev, stream));
                if (it % 2)
                    CK(cuEventSynchronize(d2h_ev));
                else
                    while (cuEventQuery(d2h_ev) == CUDA_ERROR_NOT_READY)
                        fakecuda_run_all();
                h = fc_prog_fnv(h, pin_out + (size_t)(it % 3) * 8 * 64, 6 * 64 * sizeof(float));
            }
            if (k % 10 == 5 && (pt || uni || strcmp(which, "memops") == 0)) {
                CK(memset8(buf[2 + (it + 1) % 2], (unsigned char)(it & 1), 16, stream));
                CK(copy_dd(buf[(it + 1) % 2], x, 64, stream));
            }
        }
        if (two || legacyside)
            CK(cuStreamWaitEvent(stream, join, 0));
        if (agstep)
            CK(cuGraphLaunch(backward, stream));
        if (autograd) {
            CUevent grads[8];
            for (int g = 0; g < 8; g++) {
                CK(cuEventCreate(&grads[g], CU_EVENT_DISABLE_TIMING));
                CK(cuEventRecord(grads[g], stream));
            }
            for (int g = 0; g < 8; g++) {
                CK(cuStreamWaitEvent(side, grads[g], 0));
                CK(cuEventDestroy(grads[g]));
            }
            float a = 0.5f, b = 0.25f;
            int zl = n;
            void *p[] = {&agz, &y, &a, &b, &zl};
            CK(launch(axpb, 1, 1, 1, 32, 1, 1, 0, side, p, NULL));
            CUevent end = join;
            if (agstep)
                CK(cuEventCreate(&end, CU_EVENT_DISABLE_TIMING));
            CK(cuEventRecord(end, side));
            CK(cuStreamWaitEvent(stream, end, 0));
            if (agstep) {
                CK(cuEventDestroy(end));
                for (int k = 0; k < 24; k++) { /* the optimizer */
                    float oa = 0.999f, ob = 0.001f * (float)k;
                    void *o[] = {&y, &y, &oa, &ob, &len};
                    CK(launch(axpb, 4, 1, 1, 256, 1, 1, 0, stream, o, NULL));
                }
            }
        }
        if (strcmp(which, "badlaunch") == 0) {
            /* the same invalid launch (too many threads) in every iteration, between valid ones: CUDA
             * reports it at the call, every time, and so must the shim once the loop is learned */
            int nn = N;
            float a = 1.0f, b = 0.0f;
            void *p[] = {&x, &x, &a, &b, &nn};
            CUresult bad = cuLaunchKernel(axpb, 1, 1, 1, 2048, 1, 1, 0, stream, p, NULL);
            h = fc_prog_fnv(h, &bad, sizeof bad);
            CK(launch(axpb, 1, 1, 1, 32, 1, 1, 0, stream, p, NULL));
        }
        if (strcmp(which, "extra") == 0) {
            struct {
                CUdeviceptr s, x;
            } packed = {s, x};
            size_t sz = sizeof packed;
            void *e[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &sz, CU_LAUNCH_PARAM_END};
            CK(launch(sum, 4, 1, 1, 256, 1, 1, 0, stream, NULL, e));
        } else {
            void *p[] = {&s, &x};
            CUlaunchAttribute attr[2];
            memset(attr, 0xee, sizeof attr); /* garbage in the unused part of the union */
            attr[0].id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
            attr[0].value.priority = 0;
            /* attr_private: an attribute cuda.h does not name, whose value the fake reads 8 bytes of */
            uint32_t w[2] = {0x1234u + (uint32_t)it % 2, ~(0x1234u + (uint32_t)it % 2)};
            attr[1].id = (CUlaunchAttributeID)15;
            memset(&attr[1].value, 0, sizeof attr[1].value);
            memcpy(&attr[1].value, w, sizeof w);
            CUlaunchConfig cfg = {4, 1, 1, 256, 1, 1, 0, stream, attr, strcmp(which, "attr_private") == 0 ? 2 : 1};
            CK(launch_ex(&cfg, sum, p, NULL));
        }
        if (strcmp(which, "nosync") != 0) {
            float loss;
            if (pt)
                CK(evrec(pt_ev, stream));
            static float *ploss; /* buckets_pinned, buckets_gemm: a page-locked copy, held back with the launches */
            if (!ploss && (gemm_case || strcmp(which, "buckets_pinned") == 0))
                CK(cuMemAllocHost((void **)&ploss, sizeof *ploss));
            CK(copy_dh(ploss ? ploss : &loss, s, sizeof loss, stream));
            CK(cuStreamSynchronize(stream));
            if (ploss)
                loss = *ploss;
            h = fc_prog_fnv(h, &loss, sizeof loss);
            if (d2hpinned || pt) /* the slots not read at k == 30 */
                h = fc_prog_fnv(h, pin_out + ((size_t)(it % 3) * 8 + (d2hpinned ? 6 : 0)) * 64,
                                (d2hpinned ? 2 : 8) * 64 * sizeof(float));
        }
        if (pause_fn) { /* after the step's sync: five iterations with the shim, five paused, and so on */
            int want = (it + 1) % 10 >= 5, was = pause_fn(want);
            /* it answers whether it was paused (asked twice, the second time the state just set), or -1
             * every time where the engine does not run (AUTOGRAPH_SCOPE=off) */
            int again = pause_fn(want);
            if (was == -1 ? again != -1 : was != pause_state || again != want) {
                fprintf(stderr, "engine_prog: autograph_pause(%d) answered %d then %d (paused: %d)\n", want, was,
                        again, pause_state);
                return 3;
            }
            pause_state = want;
        }
    }
    CK(cuCtxSynchronize());
    if (getenv("ENGINE_TIME"))
        fprintf(stderr, "loop_ms: %.3f\n", (double)(fc_prog_now_ns() - loop_t0) / 1e6);
    if (oldquery || farquery)
        printf("%s violations %d\n", which, qviolations);
    if (spin)
        printf("spin waits stuck %d\n", spin_stuck);
    if (ctxwait) { /* every iteration's copy saw its own mark */
        __atomic_store_n(&cw.request, -1, __ATOMIC_RELEASE);
        pthread_join(cw_thread, NULL);
        int late = cw.errors;
        const int *seen = (const int *)(uintptr_t)cw.seen;
        for (int i = 0; i < iters; i++)
            late += seen[i] != i + 1;
        printf("ctxwait copies of an older mark %d\n", late);
    }
    if (observe) {
        __atomic_store_n(&obs.done, 1, __ATOMIC_RELEASE);
        pthread_join(obs_thread, NULL);
        printf("observer violations %d\n", obs.violations);
    }
    for (int i = 0; i < 4; i++) {
        CK(cuMemcpyDtoH(host, buf[i], sizeof host));
        h = fc_prog_fnv(h, host, sizeof host);
    }
    if (fab && fattr) {
        CK(cuMemcpyDtoH(host, fab, sizeof host));
        h = fc_prog_fnv(h, host, sizeof host);
    }
    if (agz) {
        CK(cuMemcpyDtoH(host, agz, sizeof host));
        h = fc_prog_fnv(h, host, sizeof host);
    }
    if (own) {
        if (ctxswitch)
            CK(cuCtxSetCurrent(ctx2));
        CK(cuCtxSynchronize());
        CK(cuMemcpyDtoH(host, own, sizeof host));
        h = fc_prog_fnv(h, host, sizeof host);
        if (ctxswitch)
            CK(cuCtxSetCurrent(ctx));
    }
    printf("case %s iters %d checksum %016llx\n", which, iters, (unsigned long long)h);
    return 0;
}
