/* A CPU microbenchmark of the engine's matched path on fakecuda, shaped like an eager PyTorch training
 * step: about 120 cuLaunchKernel per iteration (mostly CUkernel handles, argument blocks mostly 16-200
 * bytes, some 0.6-3.5 KB structs passed by value), about half of them with argument bytes that change
 * every iteration, a few memsets, then one cuMemcpyDtoHAsync into pageable memory and one
 * cuStreamSynchronize (loss.item()). Between launches it can sweep a buffer as an interpreter would
 * (--thrash KB) and run code enough to evict the instruction cache (--ithrash), so that the shim's state
 * and code are cold at every launch, and launch the backward part from a
 * second thread in strict alternation with the main thread (--threads 2), as autograd does.
 * stdout: a checksum of every result the host saw, identical with and without the shim. The shim's cost
 * is in its statistics (replay.host_ns_per_match); match_bench.sh runs it and takes medians.
 * With --novel every launch gets a grid new to the program, so that nothing repeats (the never_repeat
 * sample's case): the engine's time on the launches it learns, and how many it lets pass while it rests.
 * Usage: match_bench [--iters N] [--thrash KB] [--ithrash] [--threads 1|2] [--vary PCT] [--memsets N] [--time]
 *        [--novel] */
#define _POSIX_C_SOURCE 200809L
#include <cuda.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fakecuda.h"
#include "fakecuda_prog.h"


#define MAXP 8
#define ACC_SLOTS 8
#define LAUNCHES 120

/* Kernel shapes after PyTorch's: elementwise kernels with a few pointers and scalars, vectorized ones
 * taking an Array of pointers, reductions (ReduceOp), TensorIterator offset calculators (up to 3.5 KB),
 * philox dropout (seed and a growing offset), cuBLAS GEMMs (CUfunction handles), foreach optimizers. */
typedef struct {
    const char *name;
    unsigned np;
    size_t sz[MAXP];
    int weight;  /* relative frequency in the iteration */
    int cufunc;  /* launched with a CUfunction (cuBLAS) rather than a CUkernel (the runtime's) */
} kind_t;

static const kind_t kinds[] = {
    {"ew_unary", 3, {8, 8, 4}, 14, 0},
    {"ew_scalar", 4, {8, 4, 8, 4}, 12, 0}, /* padding after the float */
    {"ew_binary", 4, {8, 8, 8, 4}, 12, 0},
    {"ew_vec", 2, {8, 136}, 10, 0},
    {"dropout", 5, {8, 8, 8, 8, 4}, 4, 0},
    {"softmax", 5, {8, 8, 4, 4, 4}, 4, 0},
    {"gemm", 7, {8, 8, 8, 4, 4, 4, 4}, 10, 1},
    {"adam", 2, {8, 200}, 4, 0},
    {"reduce", 2, {8, 600}, 4, 0},
    {"offcalc", 2, {8, 1040}, 3, 0},
    {"offcalc_big", 2, {8, 3496}, 2, 0},
};
#define NKINDS (sizeof kinds / sizeof *kinds)

/* Every kernel folds the bytes of its parameters after the first into the accumulator its first
 * parameter points to: results depend on every argument byte and on the order of the launches. */
static void kbody(void **args, int kind)
{
    uint64_t *acc = *(uint64_t **)args[0];
    uint64_t h = acc[0] ^ (uint64_t)kind;
    for (unsigned p = 1; p < kinds[kind].np; p++) {
        const unsigned char *b = args[p];
        size_t n = kinds[kind].sz[p], i = 0;
        for (; i + 8 <= n; i += 8) {
            uint64_t w;
            memcpy(&w, b + i, 8);
            h = (h ^ w) * 0x100000001b3ULL;
        }
        for (; i < n; i++)
            h = (h ^ b[i]) * 0x100000001b3ULL;
    }
    acc[0] = h ^ (h >> 29);
}

#define K(i)                                                                                          \
    static void k##i(void **a, const fakecuda_dims_t *d)                                             \
    {                                                                                                 \
        (void)d;                                                                                      \
        kbody(a, i);                                                                                  \
    }
K(0) K(1) K(2) K(3) K(4) K(5) K(6) K(7) K(8) K(9) K(10)
static const fakecuda_kernel_fn kfns[NKINDS] = {k0, k1, k2, k3, k4, k5, k6, k7, k8, k9, k10};

/* One launch of the iteration. */
typedef struct {
    int kind;
    int vary; /* its argument bytes change every iteration */
    unsigned grid, block;
    CUfunction f;
} slot_t;

static slot_t slots[LAUNCHES];
static int nslots;
static CUdeviceptr accbuf, scratch;
static unsigned char *thrash_buf;
static size_t thrash_bytes;
static volatile uint64_t thrash_sink;
static int timing, novel;
static uint64_t launch_ns, launches_timed;


static uint64_t rng = 0x853c49e6748fea9bULL;
static uint32_t rnd(void)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (uint32_t)(rng >> 33);
}

/* What an interpreter does between two launches: it walks through megabytes of objects. */
static void thrash(void)
{
    uint64_t s = 0;
    for (size_t i = 0; i < thrash_bytes; i += 64) {
        thrash_buf[i]++;
        s += thrash_buf[i];
    }
    thrash_sink += s;
}

/* What an interpreter's own code does to the instruction cache between two launches (--ithrash): about
 * 64 KB of straight-line code (4096 distinct multiply-adds through memory), twice the L1i of the
 * machines measured, runs before each launch. */
static volatile uint64_t icode_sink;
#define IC1 icode_sink = icode_sink * 0x9e3779b97f4a7c15ULL + (uint64_t)__COUNTER__;
#define IC4 IC1 IC1 IC1 IC1
#define IC16 IC4 IC4 IC4 IC4
#define IC64 IC16 IC16 IC16 IC16
#define IC256 IC64 IC64 IC64 IC64
#define IC1024 IC256 IC256 IC256 IC256
static int ithrash_on;
__attribute__((noinline)) static void ithrash(void)
{
    IC1024 IC1024 IC1024 IC1024
}

/* Builds slot i's arguments for iteration `it` into one reused buffer (the caller's stack frame in
 * PyTorch) and launches it. */
static void launch(int i, int it)
{
    const slot_t *s = &slots[i];
    const kind_t *k = &kinds[s->kind];
    if (thrash_bytes)
        thrash();
    if (ithrash_on)
        ithrash();
    static _Thread_local _Alignas(16) unsigned char b[4096]; /* reused at once: the shim must copy */
    void *p[MAXP];
    size_t off = 0;
    uint64_t v = (uint64_t)i * 0x9e3779b97f4a7c15ULL ^ (s->vary ? (uint64_t)it * 0xbf58476d1ce4e5b9ULL : 0);
    for (unsigned q = 0; q < k->np; q++) {
        p[q] = b + off;
        if (q == 0) {
            /* the output: a caching allocator hands out another block every iteration */
            CUdeviceptr a = accbuf + 64 * (CUdeviceptr)((i + (s->vary ? it : 0)) % ACC_SLOTS);
            memcpy(b + off, &a, 8);
        } else if (k->sz[q] <= 8) {
            uint64_t w = v + q;
            memcpy(b + off, &w, k->sz[q]);
        } else {
            /* a struct: constant sizes and strides, with data pointers that move */
            for (size_t w = 0; w < k->sz[q]; w += 8) {
                uint64_t x = (uint64_t)i << 32 | w;
                if (w % 256 == 0)
                    x ^= v;
                memcpy(b + off + w, &x, k->sz[q] - w < 8 ? k->sz[q] - w : 8);
            }
        }
        off += (k->sz[q] + 7) & ~(size_t)7;
    }
    uint64_t t0 = timing ? fc_prog_now_ns() : 0;
    /* --novel: a grid new for every launch of every iteration, as in the never_repeat sample (nothing
     * repeats: the engine learns and then rests, the launches go to the driver) */
    unsigned grid = novel ? 1 + (unsigned)(((uint64_t)(it + 1) * 0x9e3779b97f4a7c15ULL ^ (uint64_t)i * 0xbf58476d1ce4e5b9ULL) >> 40) % 4096
                          : s->grid;
    CK(cuLaunchKernel(s->f, grid, 1, 1, s->block, 1, 1, 0, NULL, p, NULL));
    if (timing) {
        launch_ns += fc_prog_now_ns() - t0;
        launches_timed++;
    }
}

/* The backward part of the iteration, [nslots / 3, 3 * nslots / 4): from a second thread with
 * --threads 2, the main thread waiting meanwhile (as in loss.backward()). */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int turn, worker_it, quit; /* turn: 1 while the worker runs */
static CUcontext ctx;

static void backward(int it)
{
    for (int i = nslots / 3; i < 3 * nslots / 4; i++)
        launch(i, it);
}

static void *worker(void *arg)
{
    (void)arg;
    CK(cuCtxSetCurrent(ctx));
    pthread_mutex_lock(&mu);
    for (;;) {
        while (!turn && !quit)
            pthread_cond_wait(&cv, &mu);
        if (quit)
            break;
        pthread_mutex_unlock(&mu);
        backward(worker_it);
        pthread_mutex_lock(&mu);
        turn = 0;
        pthread_cond_broadcast(&cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

int main(int argc, char **argv)
{
    int iters = 300, threads = 1, vary_pct = 50, memsets = 4;
    size_t thrash_kb = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--iters") && a + 1 < argc)
            iters = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--thrash") && a + 1 < argc)
            thrash_kb = (size_t)atol(argv[++a]);
        else if (!strcmp(argv[a], "--threads") && a + 1 < argc)
            threads = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--vary") && a + 1 < argc)
            vary_pct = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--memsets") && a + 1 < argc)
            memsets = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--time"))
            timing = 1;
        else if (!strcmp(argv[a], "--ithrash"))
            ithrash_on = 1;
        else if (!strcmp(argv[a], "--novel"))
            novel = 1;
        else {
            fprintf(stderr, "usage: %s [--iters N] [--thrash KB] [--ithrash] [--threads 1|2] [--vary PCT] [--memsets N] "
                            "[--time] [--novel]\n",
                    argv[0]);
            return 2;
        }
    }
    thrash_bytes = thrash_kb << 10;
    if (thrash_bytes && !(thrash_buf = calloc(1, thrash_bytes)))
        return 1;

    for (unsigned i = 0; i < NKINDS; i++)
        fakecuda_register_kernel(kinds[i].name, kfns[i], kinds[i].np, kinds[i].sz);
    CK(cuInit(0));
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CUmodule mod;
    CUlibrary lib;
    CK(cuModuleLoadData(&mod, "fakecuda-module cublas"));
    CK(cuLibraryLoadData(&lib, "fakecuda-module torch", NULL, NULL, 0, NULL, NULL, 0));
    CUfunction fn[NKINDS];
    int wsum = 0;
    for (unsigned i = 0; i < NKINDS; i++) {
        if (kinds[i].cufunc)
            CK(cuModuleGetFunction(&fn[i], mod, kinds[i].name));
        else
            CK(cuLibraryGetKernel((CUkernel *)&fn[i], lib, kinds[i].name));
        wsum += kinds[i].weight;
    }
    nslots = LAUNCHES;
    for (int i = 0; i < nslots; i++) {
        int w = (int)(rnd() % (uint32_t)wsum), k = 0;
        while (w >= kinds[k].weight)
            w -= kinds[k++].weight;
        slots[i].kind = k;
        slots[i].vary = (int)(rnd() % 100) < vary_pct || k == 4; /* dropout's offset always grows */
        slots[i].grid = 1 + rnd() % 512;
        slots[i].block = 32u << (rnd() % 6);
        slots[i].f = fn[k];
    }
    CK(cuMemAlloc(&accbuf, 64 * ACC_SLOTS));
    CK(cuMemsetD8(accbuf, 0, 64 * ACC_SLOTS));
    CK(cuMemAlloc(&scratch, 4096));

    pthread_t th;
    if (threads > 1 && pthread_create(&th, NULL, worker, NULL) != 0)
        return 1;
    uint64_t h = 1469598103934665603ULL;
    uint64_t t0 = fc_prog_now_ns();
    for (int it = 0; it < iters; it++) {
        for (int m = 0; m < memsets; m++) /* zeroing gradients and reduction buffers */
            CK(cuMemsetD8Async(scratch + 512 * (CUdeviceptr)m, (unsigned char)m, 256, NULL));
        for (int i = 0; i < nslots / 3; i++)
            launch(i, it);
        if (threads > 1) {
            pthread_mutex_lock(&mu);
            worker_it = it;
            turn = 1;
            pthread_cond_broadcast(&cv);
            while (turn)
                pthread_cond_wait(&cv, &mu);
            pthread_mutex_unlock(&mu);
        } else {
            backward(it);
        }
        for (int i = 3 * nslots / 4; i < nslots; i++)
            launch(i, it);
        uint64_t host[ACC_SLOTS];
        CK(cuMemcpyDtoHAsync(host, accbuf, sizeof host, NULL));
        CK(cuStreamSynchronize(NULL));
        for (int q = 0; q < ACC_SLOTS; q++)
            h = (h ^ host[q]) * 0x100000001b3ULL;
    }
    uint64_t t1 = fc_prog_now_ns();
    if (threads > 1) {
        pthread_mutex_lock(&mu);
        quit = 1;
        pthread_cond_broadcast(&cv);
        pthread_mutex_unlock(&mu);
        pthread_join(th, NULL);
    }
    CK(cuCtxSynchronize());
    printf("match_bench iters %d launches %d checksum %016llx\n", iters, nslots, (unsigned long long)h);
    if (timing)
        fprintf(stderr, "match_bench: %.1f ns per cuLaunchKernel call, %.1f us per iteration\n",
                launches_timed ? (double)launch_ns / (double)launches_timed : 0.0,
                (double)(t1 - t0) / 1e3 / (iters ? iters : 1));
    return 0;
}
