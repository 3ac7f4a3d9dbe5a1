/* difftest.c: differential test of the shim on fakecuda. Generates a random, race-free CUDA program
 * from each seed, runs it and prints `seed <s> checksum <hex>` over everything the program could
 * observe (device buffers at the end, every value read back, every return code). difftest.sh runs
 * it plain and under LD_PRELOAD=libautograph.so: any difference is a visible deferral. */
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dt_common.h"
#include "fakecuda.h"
#include "fakecuda_prog.h"

/* ---- the kernels: C functions over raw pointers; each covers min(n, grid * block) elements ---- */

enum { K_AXPY, K_STRUCT, K_PHILOX, K_REDUCE, K_MANY, K_TABLE, K_SCALE, K_FMA3, K_MIX, K_CLAMP, K_N };
#define K_REQUIRED 6 /* the first six are in every program */
#define MANY_N 11
#define TABLE_N 700

typedef struct { /* padding after n and after m: their bytes are garbage, as in real argument structs */
    float *a;
    int n;
    float *b;
    float *c;
    short m;
} s3_t;
typedef struct {
    int n, cnt;
    int off[TABLE_N];
} table_t;

static const char *k_names[K_N] = {"dt_axpy", "dt_struct", "dt_philox", "dt_reduce", "dt_many",
                                   "dt_table", "dt_scale", "dt_fma3", "dt_mix", "dt_clamp"};
static const unsigned k_nparams[K_N] = {4, 2, 5, 3, 2 + 2 * MANY_N, 3, 4, 6, 5, 4};
static size_t k_sizes[K_N][2 + 2 * MANY_N] = {
    {8, 8, 4, 4}, {sizeof(s3_t), 4}, {8, 8, 8, 4, 4}, {8, 8, 4}, {0}, {8, 8, sizeof(table_t)},
    {8, 4, 4, 4}, {8, 8, 8, 4, 1, 4}, {8, 8, 4, 1, 4}, {8, 4, 4, 4}};

/* A device word every kernel adds a digest of its output to. The floats contract, so a dropped or
 * stale launch early in a long sync-free program can fade out of the final buffers; a sum of digests
 * keeps it, and addition commutes, so the two streams' legitimate interleavings still agree. */
static uint64_t *g_journal;
static void journal(const float *y, unsigned c)
{
    if (g_journal) *g_journal += dt_fnv(DT_FNV_OFFSET, y, (size_t)c * sizeof(float)) ^ c;
}

#define ARG(T, i) (*(T *)args[i])
static unsigned cover(const fakecuda_dims_t *d, int n)
{
    unsigned long long c = (unsigned long long)d->gx * d->bx;
    return c < (unsigned long long)n ? (unsigned)c : (unsigned)n;
}
static void k_axpy(void **args, const fakecuda_dims_t *d)
{
    float *y = ARG(float *, 0), *x = ARG(float *, 1), a = ARG(float, 2);
    unsigned c = cover(d, ARG(int, 3));
    for (unsigned i = 0; i < c; i++) y[i] = dt_squash(0.5f * y[i] + a * x[i]);
    journal(y, c);
}
static void k_struct(void **args, const fakecuda_dims_t *d)
{
    s3_t s;
    memcpy(&s, args[0], sizeof(s));
    float k = ARG(float, 1);
    unsigned c = cover(d, s.n);
    for (unsigned i = 0; i < c; i++) s.c[i] = dt_squash(s.a[i] * k - s.b[(i + (unsigned)s.m) % c] + 0.125f);
    journal(s.c, c);
}
static void k_philox(void **args, const fakecuda_dims_t *d)
{
    float *y = ARG(float *, 0), p = ARG(float, 3);
    uint64_t seed = ARG(uint64_t, 1), off = ARG(uint64_t, 2);
    unsigned c = cover(d, ARG(int, 4));
    for (unsigned i = 0; i < c; i++) {
        float u = (float)(dt_mix(seed, off + i) >> 40) / (float)(1u << 24);
        y[i] = u < p ? 0.0f : dt_squash(y[i] * 1.25f + u * 0.01f);
    }
    journal(y, c);
}
static void k_reduce(void **args, const fakecuda_dims_t *d)
{
    float *out = ARG(float *, 0), *in = ARG(float *, 1), s = 0;
    unsigned c = cover(d, ARG(int, 2));
    for (unsigned i = 0; i < c; i++) s += in[i];
    out[0] = dt_squash(s);
    journal(out, 1);
}
static void k_many(void **args, const fakecuda_dims_t *d)
{
    float *y = ARG(float *, 0), acc = 0;
    for (int j = 0; j < MANY_N; j++) acc += (float)ARG(int, 1 + j) * ARG(float, 1 + MANY_N + j);
    unsigned c = cover(d, ARG(int, 1 + 2 * MANY_N));
    for (unsigned i = 0; i < c; i++) y[i] = dt_squash(y[i] * 0.75f + acc * 0.001f * (float)(i % 7));
    journal(y, c);
}
static void k_table(void **args, const fakecuda_dims_t *d)
{
    float *y = ARG(float *, 0), *x = ARG(float *, 1);
    const table_t *t = args[2];
    unsigned c = cover(d, t->n);
    for (unsigned i = 0; i < c; i++) y[i] = dt_squash(0.5f * y[i] + 0.5f * x[(unsigned)t->off[i % (unsigned)t->cnt] % c]);
    journal(y, c);
}
static void k_scale(void **args, const fakecuda_dims_t *d)
{
    float *y = ARG(float *, 0), a = ARG(float, 1), b = ARG(float, 2);
    unsigned c = cover(d, ARG(int, 3));
    for (unsigned i = 0; i < c; i++) y[i] = dt_squash(y[i] * a + b);
    journal(y, c);
}
static void k_fma3(void **args, const fakecuda_dims_t *d)
{
    float *o = ARG(float *, 0), *a = ARG(float *, 1), *b = ARG(float *, 2), s = ARG(float, 3);
    char neg = ARG(char, 4);
    unsigned c = cover(d, ARG(int, 5));
    for (unsigned i = 0; i < c; i++) o[i] = dt_squash((neg ? -a[i] : a[i]) * s + b[i] + 0.5f * o[i]);
    journal(o, c);
}
static void k_mix(void **args, const fakecuda_dims_t *d)
{
    float *y = ARG(float *, 0), *x = ARG(float *, 1);
    int shift = ARG(int, 2);
    float w = ARG(unsigned char, 3) / 255.0f;
    unsigned c = cover(d, ARG(int, 4));
    for (unsigned i = 0; i < c; i++) y[i] = dt_squash(w * x[(i + (unsigned)shift) % c] + (1 - w) * y[i]);
    journal(y, c);
}
static void k_clamp(void **args, const fakecuda_dims_t *d)
{
    float *y = ARG(float *, 0), lo = ARG(float, 1), hi = ARG(float, 2);
    unsigned c = cover(d, ARG(int, 3));
    for (unsigned i = 0; i < c; i++) y[i] = y[i] < lo ? lo : y[i] > hi ? hi : y[i] * 1.0625f;
    journal(y, c);
}
static const fakecuda_kernel_fn k_fns[K_N] = {k_axpy, k_struct, k_philox, k_reduce, k_many,
                                             k_table, k_scale, k_fma3, k_mix, k_clamp};

/* ---- a program ---- */

enum { OP_LAUNCH, OP_MEMSET8, OP_MEMSET32, OP_D2D, OP_H2D_SYNC, OP_D2H_SYNC, OP_D2H_PINNED, OP_D2H_PAGEABLE,
       OP_H2D_PAGEABLE, OP_H2D_PINNED, OP_SYNC, OP_FORK, OP_JOIN, OP_HOSTFN, OP_TMPFREE, OP_ASYNCALLOC,
       OP_MEMSET_SYNC, OP_N };
enum { SY_STREAM, SY_CTX, SY_EVENT, SY_EVQUERY, SY_STQUERY, SY_N };
enum { R_PARAMS, R_EXTRA, R_EX };
enum { V_SCALAR = 1, V_SHAPE = 2, V_TABLE = 4 };
enum { ST_LEGACY, ST_BLOCKING, ST_NONBLOCKING };

#define MAX_OPS 220
#define MAX_BUF 8
#define RD 16 /* floats per host read */

typedef struct {
    int kind, kern, route, use_ck, vary, shape_k, side, noise, sync_kind;
    int slot[3];
    unsigned gx, bx;
    int n, off, cnt;
    float f[2];
    int iv[2];
    uint64_t seed, poff;
    int pin_idx; /* H2D_PINNED: index among those ops */
} op_t;

/* About one copy in three goes through the unified cuMemcpyAsync (the direction from the pointers, as
 * cudaMemcpyDefault and CuPy copy), chosen from the operation's own fields: the programs' random draws,
 * and so every seed's program, stay as they were. */
static int unified(const op_t *o) { return (o->off + 7 * o->cnt) % 3 == 0; }

typedef struct prog {
    uint64_t seed;
    dt_rng_t rng;
    dt_sum_t sum;
    int nbuf, nslots, iters, nops, nosync, threads, npin_in;
    size_t bsize[MAX_BUF];
    int swap[MAX_BUF];
    CUdeviceptr buf[MAX_BUF];
    op_t ops[MAX_OPS];
    int kset[K_N];
    int main_kind, side_kind;
    CUstream streams[3]; /* indexed by ST_*; streams[ST_LEGACY] is NULL */
    CUstream s_main, s_side;
    CUmodule mod;
    CUlibrary lib;
    CUfunction fn[K_N];
    CUkernel kn[K_N];
    size_t poff[K_N][2 + 2 * MANY_N];
    size_t argsize[K_N];
    CUevent ev_fork, ev_join, ev_sync, ev_free;
    /* --farquery: ev_far recorded on the main stream after operation far_rec, queried after far_q */
    CUevent ev_far;
    int far_rec, far_q;
    CUdeviceptr late_free; /* a pool temporary whose free waits for the next one (or the program's end) */
    float *pin_out, *pin_in, *pin_hf;
    int npin_out, nread_pending, pin_out_cap, hf_cap, nhf;
    int pending[4096];
    float *pageable;
    uint64_t hostacc;
    int sab_mode, sab_iter;
    /* two-thread mode: strict turn-taking so the program order stays the same */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    long turn;
    CUcontext ctx;
    int obs_stop; /* --observer: ends the polling thread */
    int cap_stop; /* --capturer: ends the capturing thread */
    /* --twoctx: the side stream is a stream of a second context, with its own module and library */
    CUcontext ctx2;
    CUmodule mod2;
    CUlibrary lib2;
    CUfunction fn2[K_N];
    CUkernel kn2[K_N];
    /* the program's own graph (make_own_graph): launched on the main stream after operations own_at[] */
    CUgraphExec own;
    int own_at[3], nown, own_slot;
    /* handoff (drawn apart from the operations, as make_own_graph): forks and joins order the streams with
     * events made for each and destroyed after their wait, as PyTorch's autograd hands each gradient to
     * another stream (1: the fork's destroyed at once; 2: at the join, after the join's wait) */
    int handoff;
    CUevent fork_ev; /* handoff 2: the fork's event, destroyed at the join */
    /* bigsmem (drawn apart too): a quarter of the launches ask for 64 KiB of dynamic shared memory, the
     * kernel's limit raised just before the launch and put back just after (as libraries do; CUDA, and
     * fakecuda, check the launch against it at the call) */
    int bigsmem;
    /* implicit (drawn apart too; half the programs whose streams are the legacy stream and a blocking one,
     * in one context): forks and joins make no event, the legacy stream's implicit synchronization with
     * blocking streams orders the two (an operation on either waits for the other's earlier work) */
    int implicit;
    /* pauses (drawn apart too; a quarter of the programs, where the shim is loaded): the thread whose turn
     * it is calls autograph_pause before about one operation in 16, pausing the shim or bringing it back
     * in turn (what it holds is issued at a pause, wherever the iteration is); resumed at the end */
    int pauses;
    /* reloads (drawn apart too; a fifth of the programs): every `reloads`-th iteration (1 to 3), before
     * operation reload_idx, the thread whose turn it is unloads the program's module, its library or both
     * and loads them again (at one point of the iteration, so that graphs form between), taking the kernels
     * in a rotated order, so that with FAKECUDA_REUSE_HANDLES=1 a kernel gets a handle another kernel had
     * (other parameters: a layout kept across the unload would copy the wrong bytes), or half the time
     * its own handle with two kernels' code traded (reload_kernels: a graph kept across the unload would
     * launch the old code, which fakecuda refuses). Programs with a graph of their own reload only the
     * library (the graph holds the module's kernel). */
    int reloads, reload_idx;
    int load_rot, swapped; /* the kernels' order at the last load; scaling and clamping trade places */
} prog_t;

static dt_pause_fn_t g_pause_fn; /* the shim's autograph_pause, where it is loaded */

static int g_verbose;
static long g_host_us; /* --host-us: the host's own work after each launch (host-bound programs) */
/* --long: 60-100 iterations (fewer operations each), so that what the engine decides only after many
 * sightings of a segment (a modeled chunk plan's trial: 16 pairs of replayed sightings) comes to pass */
static int g_long;
static int g_sabotage; /* 0 off; else which bug to imitate (DIFFTEST_SABOTAGE) */
static int g_observer; /* --observer: a thread that issues no work polls the program's events and streams */
static int g_capturer; /* --capturer: a thread of a context of its own captures graphs all along */
/* Held by the capturing thread from a capture's start to its end, and by the program's threads around each
 * call that a global capture forbids (allocations, frees, event and stream queries and syncs, a device-wide
 * sync: CUDA would refuse it and invalidate the capture; tests/fakecuda/capture_rules.expected, the GPU's
 * table): the program's calls stay the same, only their timing moves.
 * The calls the library makes of its own must need no such care. */
static pthread_mutex_t g_cap_mu = PTHREAD_MUTEX_INITIALIZER;
static void cap_hold(void)
{
    if (g_capturer) pthread_mutex_lock(&g_cap_mu);
}
static void cap_release(void)
{
    if (g_capturer) pthread_mutex_unlock(&g_cap_mu);
}
static int g_oldquery; /* --oldquery: the program queries events it recorded earlier, now and then */
static int g_farquery; /* --farquery: the program queries an event it recorded 34 or more operations before */
/* --poll: a query that ends a step (SY_EVQUERY, SY_STQUERY) is repeated until it answers done, as a program
 * that busy-waits on an event does; its results are read then. Without it a "not ready" answer leaves them
 * for a later sync, so where the answers follow the times (fakecuda's modeled device) so does the output. */
static int g_poll;

/* A step-ending query of ev_sync (stream 0) or of the main stream (1), repeated with --poll until it
 * answers done; only the last answer is hashed (how many came before it, the times say). */
static CUresult step_query(prog_t *p, int stream)
{
    CUresult q;
    do {
        cap_hold();
        q = stream ? cuStreamQuery(p->s_main) : cuEventQuery(p->ev_sync);
        cap_release();
    } while (g_poll && q == CUDA_ERROR_NOT_READY);
    return q;
}
static int g_twoctx;   /* --twoctx: the side stream belongs to a second context (side_ctx) */
/* --ctxchurn (implies --twoctx): each program's second context is made for it and destroyed at its end, so
 * that a batch makes more contexts than the shim keeps engines for (16) */
static int g_ctxchurn;
/* --buckets N: a launch whose shape varies takes, each iteration, one of N grid sizes, the same bucket for
 * every such launch of the iteration, in an order drawn from the program's seed (a loader that pads each
 * batch to one of N lengths): many variants after the same point of the iteration */
static int g_buckets;

/* --twoctx: the calls on the side stream are made with its context current, then the first one again */
static void side_ctx(prog_t *p, int on)
{
    if (g_twoctx && cuCtxSetCurrent(on ? p->ctx2 : p->ctx) != CUDA_SUCCESS)
        __atomic_add_fetch(&p->sum.errors, 1, __ATOMIC_RELAXED);
}
enum { SAB_DROP = 1, SAB_STALE, SAB_REORDER, SAB_LATE };

static CUdeviceptr phys(const prog_t *p, int slot, int it)
{
    return (p->swap[slot] >= 0 && (it & 1)) ? p->buf[p->swap[slot]] : p->buf[slot];
}
static int slot_n(const prog_t *p, int slot)
{
    size_t n = p->bsize[slot];
    if (p->swap[slot] >= 0 && p->bsize[p->swap[slot]] < n) n = p->bsize[p->swap[slot]];
    return (int)n;
}

static void hash_reads(prog_t *p, const float *v, int n)
{
    p->sum.hash = dt_fnv(p->sum.hash, v, (size_t)n * sizeof(float));
    if (dt_trace_on) fprintf(stderr, "T reads %d data %016llx\n", n, (unsigned long long)dt_fnv(DT_FNV_OFFSET, v, (size_t)n * sizeof(float)));
}

/* The host may read what the stream produced only after a sync that covers it: fold the pinned
 * read-backs and the host-function accumulator then, never earlier. */
static void covered(prog_t *p)
{
    for (int i = 0; i < p->nread_pending; i++) hash_reads(p, p->pin_out + (size_t)p->pending[i] * RD, RD);
    p->nread_pending = 0;
    p->sum.hash = dt_fnv_u64(p->sum.hash, p->hostacc);
}

static void host_fn(void *ud)
{
    float *v = ud;
    prog_t *p = *(prog_t **)(v + RD);
    uint32_t bits;
    memcpy(&bits, v, 4);
    p->hostacc = (p->hostacc ^ bits) * DT_FNV_PRIME + 1;
}

/* ---- generation ---- */

static int pick_slot(prog_t *p, int avoid)
{
    int s;
    do s = (int)dt_below(&p->rng, (unsigned)p->nslots);
    while (s == avoid && p->nslots > 1);
    return s;
}

static void gen_launch(prog_t *p, op_t *o, int avoid, int kern)
{
    dt_rng_t *r = &p->rng;
    o->kind = OP_LAUNCH;
    o->kern = kern;
    if (kern < 0) {
        do o->kern = (int)dt_below(r, K_N);
        while (!p->kset[o->kern]);
    }
    o->route = (int)dt_below(r, 3);
    o->use_ck = dt_chance(r, 40);
    o->vary = (dt_chance(r, 50) ? V_SCALAR : 0) | (dt_chance(r, 15) ? V_SHAPE : 0) | (dt_chance(r, 30) ? V_TABLE : 0);
    o->shape_k = dt_range(r, 1, 4);
    for (int i = 0; i < 3; i++) o->slot[i] = pick_slot(p, avoid);
    if (o->kern == K_STRUCT) { /* c = f(a, b): keep c distinct from the inputs */
        for (int t = 0; t < 32 && (o->slot[2] == o->slot[0] || o->slot[2] == o->slot[1]); t++) o->slot[2] = pick_slot(p, avoid);
    }
    int n = slot_n(p, o->slot[0]);
    for (int i = 1; i < 3; i++) n = slot_n(p, o->slot[i]) < n ? slot_n(p, o->slot[i]) : n;
    o->n = n;
    o->bx = dt_chance(r, 50) ? 128 : 256;
    o->gx = (unsigned)((n + (int)o->bx - 1) / (int)o->bx);
    if (dt_chance(r, 30) && o->gx > 1) o->gx = (unsigned)dt_range(r, 1, (int)o->gx);
    o->f[0] = dt_unit(r) * 2 - 1, o->f[1] = dt_unit(r);
    o->iv[0] = dt_range(r, -50, 50), o->iv[1] = dt_range(r, 0, 255);
    o->seed = dt_next(r), o->poff = dt_next(r) % 100000;
}

/* A fork: the side stream works on one slot while the main stream works on the others; an event
 * on each side orders them, so the program stays race-free. */
static int gen_fork(prog_t *p, int at)
{
    dt_rng_t *r = &p->rng;
    int x = pick_slot(p, -1), n = at;
    op_t *o = &p->ops[n++];
    memset(o, 0, sizeof(*o));
    o->kind = OP_FORK, o->slot[0] = x;
    int nside = dt_range(r, 1, 3), nmain = dt_range(r, 0, 3);
    for (int i = 0; i < nside + nmain && n < MAX_OPS - 1; i++) {
        o = &p->ops[n++];
        memset(o, 0, sizeof(*o));
        if (i < nside) {
            static const int inplace[] = {K_PHILOX, K_SCALE, K_CLAMP, K_MANY};
            int k;
            do k = inplace[dt_below(r, 4)];
            while (!p->kset[k]);
            gen_launch(p, o, -1, k);
            o->slot[0] = o->slot[1] = o->slot[2] = x;
            o->n = slot_n(p, x);
            o->gx = (unsigned)((o->n + (int)o->bx - 1) / (int)o->bx);
            o->side = 1;
        } else if (dt_chance(r, 70) || p->nslots < 3) {
            gen_launch(p, o, x, -1);
        } else {
            o->kind = OP_MEMSET32, o->slot[0] = pick_slot(p, x);
            o->off = dt_range(r, 0, 16), o->cnt = dt_range(r, 1, 64), o->iv[0] = (int)dt_next(r);
            o->vary = dt_chance(r, 50) ? V_SCALAR : 0;
        }
    }
    o = &p->ops[n++];
    memset(o, 0, sizeof(*o));
    o->kind = OP_JOIN;
    return n;
}

static void generate(prog_t *p)
{
    dt_rng_t *r = &p->rng;
    p->nbuf = dt_range(r, 4, MAX_BUF);
    for (int i = 0; i < p->nbuf; i++) p->bsize[i] = (size_t)dt_range(r, 256, 4096);
    int nswap = dt_range(r, 0, p->nbuf >= 6 ? 2 : 1);
    p->nslots = p->nbuf - nswap;
    for (int i = 0; i < MAX_BUF; i++) p->swap[i] = -1;
    for (int i = 0; i < nswap; i++) p->swap[i] = p->nbuf - 1 - i;

    for (int k = 0; k < K_N; k++) p->kset[k] = k < K_REQUIRED || dt_chance(r, 50);
    p->main_kind = (int)dt_below(r, 3);
    p->side_kind = (p->main_kind + 1 + (int)dt_below(r, 2)) % 3;
    p->nosync = dt_chance(r, 20);
    p->threads = dt_chance(r, 20);

    /* size: 10-200 operations, 5-40 iterations (60-100 with --long), bounded work so 1000 programs take a
     * minute */
    p->iters = g_long ? dt_range(r, 60, 100) : dt_range(r, 5, 40);
    int maxops = 8000 / p->iters;
    if (maxops > 200) maxops = 200;
    if (maxops < 10) maxops = 10;
    int want = dt_range(r, 10, maxops);

    /* per-program mix of operations (percent weights) */
    unsigned w[OP_N] = {0};
    w[OP_LAUNCH] = 50;
    w[OP_MEMSET8] = dt_chance(r, 50) ? 4 : 0;
    w[OP_MEMSET32] = dt_chance(r, 50) ? 4 : 0;
    w[OP_D2D] = dt_chance(r, 50) ? 5 : 0;
    w[OP_D2H_PINNED] = dt_chance(r, 60) ? 3 : 0;
    w[OP_H2D_PAGEABLE] = dt_chance(r, 40) ? 3 : 0;
    w[OP_H2D_PINNED] = dt_chance(r, 40) ? 3 : 0;
    w[OP_FORK] = dt_chance(r, 50) ? 4 : 0;
    w[OP_HOSTFN] = dt_chance(r, 30) ? 2 : 0;
    w[OP_TMPFREE] = dt_chance(r, 25) ? 1 : 0;
    w[OP_ASYNCALLOC] = dt_chance(r, 25) ? 2 : 0;
    if (!p->nosync) {
        w[OP_H2D_SYNC] = dt_chance(r, 40) ? 2 : 0;
        w[OP_D2H_SYNC] = dt_chance(r, 50) ? 2 : 0;
        w[OP_D2H_PAGEABLE] = dt_chance(r, 30) ? 2 : 0;
        w[OP_SYNC] = dt_chance(r, 70) ? 3 : 0;
        w[OP_MEMSET_SYNC] = dt_chance(r, 25) ? 1 : 0;
    }
    unsigned wsum = 0;
    for (int k = 0; k < OP_N; k++) wsum += w[k];

    int n = 0;
    while (n < want && n < MAX_OPS - 10) {
        unsigned pick = dt_below(r, wsum), kind = 0;
        while (pick >= w[kind]) pick -= w[kind++];
        if (kind == OP_FORK) {
            n = gen_fork(p, n);
            continue;
        }
        op_t *o = &p->ops[n++];
        memset(o, 0, sizeof(*o));
        if (kind == OP_LAUNCH) {
            gen_launch(p, o, -1, -1);
            o->noise = dt_chance(r, 5); /* runs only in some iterations */
            continue;
        }
        o->kind = (int)kind;
        o->slot[0] = pick_slot(p, -1);
        o->slot[1] = pick_slot(p, o->slot[0]);
        o->vary = dt_chance(r, 50) ? V_SCALAR : 0;
        int n0 = slot_n(p, o->slot[0]), n1 = slot_n(p, o->slot[1]);
        o->off = dt_range(r, 0, 64);
        o->cnt = dt_range(r, 1, RD);
        o->iv[0] = (int)dt_next(r);
        o->n = n0 < n1 ? n0 : n1;
        o->sync_kind = (int)dt_below(r, SY_N);
        if (kind == OP_D2D || kind == OP_TMPFREE || kind == OP_ASYNCALLOC || kind == OP_MEMSET8 || kind == OP_MEMSET32)
            o->cnt = dt_range(r, 1, o->n - o->off);
        o->f[0] = dt_unit(r);
        if (kind == OP_H2D_PINNED) o->pin_idx = p->npin_in++;
    }
    p->nops = n;
}

/* ---- execution ---- */

static CUstream op_stream(const prog_t *p, const op_t *o) { return o->side ? p->s_side : p->s_main; }

static void launch(prog_t *p, const op_t *o, int idx, int it)
{
    dt_sum_t *S = &p->sum;
    int vit = (p->sab_mode == SAB_STALE && it == p->sab_iter && it > 0) ? it - 1 : it; /* a missed patch */
    int sc = (o->vary & V_SCALAR) ? vit : 0;
    unsigned gx = o->gx;
    if ((o->vary & V_SHAPE) && g_buckets) {
        uint64_t h = p->seed * 0x9e3779b97f4a7c15ULL + (uint64_t)it * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
        unsigned b = (unsigned)(h % (uint64_t)g_buckets);
        gx = gx * (b + 1) / (unsigned)g_buckets;
        gx = gx ? gx : 1;
    } else if ((o->vary & V_SHAPE) && ((it / o->shape_k) & 1)) {
        gx = gx > 1 ? gx / 2 : 1;
    }
    CUdeviceptr b0 = phys(p, o->slot[0], vit), b1 = phys(p, o->slot[1], vit), b2 = phys(p, o->slot[2], vit);
    int n = o->n;
    float f0 = o->f[0] + 0.01f * (float)sc, f1 = o->f[1] * (sc & 1 ? 0.5f : 1.0f);
    void *kp[2 + 2 * MANY_N];
    s3_t s3;
    static _Thread_local table_t tbl;
    int many_i[MANY_N];
    float many_f[MANY_N];
    uint64_t pseed = o->seed, poff = o->poff + (uint64_t)vit * 32; /* dropout's offset grows every step */
    char neg = (char)(o->iv[0] & 1);
    unsigned char wq = (unsigned char)(o->iv[1] + sc);
    int shift = o->iv[0] + sc;
    switch (o->kern) {
    case K_AXPY: case K_SCALE: case K_CLAMP:
        kp[0] = &b0, kp[1] = o->kern == K_AXPY ? (void *)&b1 : (void *)&f0;
        kp[2] = o->kern == K_AXPY ? &f0 : &f1, kp[3] = &n;
        if (o->kern == K_CLAMP) f0 = -1.0f - o->f[1], f1 = 1.0f + 0.01f * (float)sc;
        break;
    case K_STRUCT:
        memset(&s3, (int)(dt_mix(p->seed, (uint64_t)(it * 1000 + idx)) & 0xff), sizeof(s3)); /* garbage padding */
        s3.a = (float *)(uintptr_t)b0, s3.b = (float *)(uintptr_t)b1, s3.c = (float *)(uintptr_t)b2;
        s3.n = n, s3.m = (short)(o->iv[1] + sc);
        kp[0] = &s3, kp[1] = &f0;
        break;
    case K_PHILOX: kp[0] = &b0, kp[1] = &pseed, kp[2] = &poff, kp[3] = &f1, kp[4] = &n; f1 *= 0.2f; break;
    case K_REDUCE: kp[0] = &b0, kp[1] = &b1, kp[2] = &n; break;
    case K_MANY:
        kp[0] = &b0;
        for (int j = 0; j < MANY_N; j++) {
            many_i[j] = o->iv[0] + j * 3 + ((o->vary & V_SCALAR) && j == 5 ? sc : 0);
            many_f[j] = o->f[0] * (float)(j + 1) * 0.1f;
            kp[1 + j] = &many_i[j], kp[1 + MANY_N + j] = &many_f[j];
        }
        kp[1 + 2 * MANY_N] = &n;
        break;
    case K_TABLE:
        memset(&tbl, 0, sizeof(tbl));
        tbl.n = n, tbl.cnt = 1 + (o->iv[1] % TABLE_N);
        for (int j = 0; j < TABLE_N; j++) tbl.off[j] = (int)(dt_mix(o->seed, (uint64_t)j) % 4096);
        if (o->vary & V_TABLE) tbl.off[(unsigned)(o->iv[1] + vit) % (unsigned)tbl.cnt] = vit * 7; /* one entry moves */
        kp[0] = &b0, kp[1] = &b1, kp[2] = &tbl;
        break;
    case K_FMA3: kp[0] = &b0, kp[1] = &b1, kp[2] = &b2, kp[3] = &f0, kp[4] = &neg, kp[5] = &n; break;
    case K_MIX: kp[0] = &b0, kp[1] = &b1, kp[2] = &shift, kp[3] = &wq, kp[4] = &n; break;
    }
    CUfunction f = o->use_ck ? (CUfunction)p->kn[o->kern] : p->fn[o->kern];
    if (g_twoctx && o->side) f = o->use_ck ? (CUfunction)p->kn2[o->kern] : p->fn2[o->kern];
    CUstream s = op_stream(p, o);
    side_ctx(p, o->side);
    unsigned smem = p->bigsmem && o->seed % 4 == 0 ? 65536u : 0u;
    CUdevice dev = 0;
    if (smem && o->use_ck) DT_CK(S, cuCtxGetDevice(&dev));
    if (smem && o->use_ck)
        DT_CK(S, cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem, (CUkernel)f, dev));
    else if (smem)
        DT_CK(S, cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)smem));
    if (o->route == R_PARAMS) {
        DT_CK(S, cuLaunchKernel(f, gx, 1, 1, o->bx, 1, 1, smem, s, kp, NULL));
    } else if (o->route == R_EXTRA) {
        static _Thread_local unsigned char packed[sizeof(table_t) + 64];
        size_t size = p->argsize[o->kern];
        memset(packed, (int)((unsigned)it * 37u + 11u) & 0xff, size); /* padding differs every time */
        for (unsigned j = 0; j < k_nparams[o->kern]; j++) memcpy(packed + p->poff[o->kern][j], kp[j], k_sizes[o->kern][j]);
        void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
        DT_CK(S, cuLaunchKernel(f, gx, 1, 1, o->bx, 1, 1, smem, s, NULL, extra));
    } else {
        CUlaunchAttribute attr;
        memset(&attr, 0, sizeof(attr));
        attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
        attr.value.priority = o->iv[1] & 1;
        CUlaunchConfig cfg;
        memset(&cfg, 0, sizeof(cfg));
        cfg.gridDimX = gx, cfg.gridDimY = 1, cfg.gridDimZ = 1;
        cfg.blockDimX = o->bx, cfg.blockDimY = 1, cfg.blockDimZ = 1;
        cfg.hStream = s, cfg.attrs = &attr, cfg.numAttrs = 1, cfg.sharedMemBytes = smem;
        DT_CK(S, cuLaunchKernelEx(&cfg, f, kp, NULL));
    }
    if (smem && o->use_ck)
        DT_CK(S, cuKernelSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0, (CUkernel)f, dev));
    else if (smem)
        DT_CK(S, cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, 0));
    if (o->side) side_ctx(p, 0);
}

static void sync_main(prog_t *p) /* used before legacy-ordered sync calls when main is non-blocking */
{
    if (p->main_kind != ST_NONBLOCKING)
        return;
    cap_hold();
    DT_CK(&p->sum, cuStreamSynchronize(p->s_main));
    cap_release();
}

static void exec_op(prog_t *p, int idx, int it)
{
    dt_sum_t *S = &p->sum;
    const op_t *o = &p->ops[idx];
    dt_rng_t vr = {dt_mix(p->seed, (uint64_t)it * 7919 + (uint64_t)idx)};
    int sc = (o->vary & V_SCALAR) ? it : 0;
    CUdeviceptr a = phys(p, o->slot[0], it), b = phys(p, o->slot[1], it);
    float tmpf[RD];
    switch (o->kind) {
    case OP_LAUNCH:
        if (o->noise && dt_below(&vr, 4)) break; /* extra kernel in a quarter of the iterations */
        launch(p, o, idx, it);
        for (uint64_t end = fc_prog_now_ns() + (uint64_t)g_host_us * 1000u; g_host_us && fc_prog_now_ns() < end;)
            ;
        break;
    case OP_MEMSET8:
        DT_CK(S, cuMemsetD8Async(a + (CUdeviceptr)o->off * 4, (unsigned char)(o->iv[0] + sc), (size_t)o->cnt * 4, p->s_main));
        break;
    case OP_MEMSET32: {
        float v = o->f[0] + (float)sc * 0.125f;
        unsigned u;
        memcpy(&u, &v, 4);
        DT_CK(S, cuMemsetD32Async(a + (CUdeviceptr)o->off * 4, u, (size_t)o->cnt, op_stream(p, o)));
        break;
    }
    case OP_D2D:
        if (unified(o))
            DT_CK(S, cuMemcpyAsync(b + (CUdeviceptr)o->off * 4, a, (size_t)o->cnt * 4, p->s_main));
        else
            DT_CK(S, cuMemcpyDtoDAsync(b + (CUdeviceptr)o->off * 4, a, (size_t)o->cnt * 4, p->s_main));
        break;
    case OP_H2D_SYNC:
        for (int i = 0; i < RD; i++) tmpf[i] = o->f[0] * (float)i + (float)sc * 0.25f;
        sync_main(p);
        DT_CK(S, cuMemcpyHtoD(a + (CUdeviceptr)o->off * 4, tmpf, (size_t)o->cnt * 4));
        break;
    case OP_D2H_SYNC:
        memset(tmpf, 0, sizeof(tmpf));
        sync_main(p);
        DT_CK(S, cuMemcpyDtoH(tmpf, a + (CUdeviceptr)o->off * 4, (size_t)o->cnt * 4));
        covered(p);
        hash_reads(p, tmpf, o->cnt);
        break;
    case OP_MEMSET_SYNC:
        sync_main(p);
        DT_CK(S, cuMemsetD32(a + (CUdeviceptr)o->off * 4, (unsigned)o->iv[0] + (unsigned)sc, (size_t)o->cnt));
        break;
    case OP_D2H_PAGEABLE: /* CUDA makes this one blocking: the value may be read at once */
        memset(tmpf, 0, sizeof(tmpf));
        if (unified(o))
            DT_CK(S, cuMemcpyAsync((CUdeviceptr)(uintptr_t)tmpf, a + (CUdeviceptr)o->off * 4, (size_t)o->cnt * 4, p->s_main));
        else
            DT_CK(S, cuMemcpyDtoHAsync(tmpf, a + (CUdeviceptr)o->off * 4, (size_t)o->cnt * 4, p->s_main));
        covered(p);
        hash_reads(p, tmpf, o->cnt);
        break;
    case OP_D2H_PINNED: {
        if (p->npin_out >= p->pin_out_cap || p->nread_pending >= 4096) break;
        int slot = p->npin_out++;
        float *dst = p->pin_out + (size_t)slot * RD;
        if (unified(o))
            DT_CK(S, cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, a + (CUdeviceptr)o->off * 4, (size_t)RD * 4, p->s_main));
        else
            DT_CK(S, cuMemcpyDtoHAsync(dst, a + (CUdeviceptr)o->off * 4, (size_t)RD * 4, p->s_main));
        p->pending[p->nread_pending++] = slot;
        break;
    }
    case OP_H2D_PAGEABLE:
        for (int i = 0; i < RD; i++) p->pageable[i] = o->f[0] - (float)i * 0.0625f + (float)sc;
        if (unified(o))
            DT_CK(S, cuMemcpyAsync(a + (CUdeviceptr)o->off * 4, (CUdeviceptr)(uintptr_t)p->pageable, (size_t)o->cnt * 4, p->s_main));
        else
            DT_CK(S, cuMemcpyHtoDAsync(a + (CUdeviceptr)o->off * 4, p->pageable, (size_t)o->cnt * 4, p->s_main));
        for (int i = 0; i < RD; i++) p->pageable[i] = -1234.5f; /* legal: CUDA staged the source */
        break;
    case OP_H2D_PINNED: { /* a slot per iteration: never rewritten while a copy may read it */
        float *src = p->pin_in + ((size_t)it * (size_t)p->npin_in + (size_t)o->pin_idx) * RD;
        for (int i = 0; i < RD; i++) src[i] = o->f[0] * 0.5f + (float)(i + sc);
        if (unified(o))
            DT_CK(S, cuMemcpyAsync(a + (CUdeviceptr)o->off * 4, (CUdeviceptr)(uintptr_t)src, (size_t)o->cnt * 4, p->s_main));
        else
            DT_CK(S, cuMemcpyHtoDAsync(a + (CUdeviceptr)o->off * 4, src, (size_t)o->cnt * 4, p->s_main));
        break;
    }
    case OP_SYNC:
        switch (o->sync_kind) {
        case SY_STREAM:
            cap_hold();
            DT_CK(S, cuStreamSynchronize(p->s_main));
            cap_release();
            covered(p);
            break;
        case SY_CTX:
            cap_hold();
            DT_CK(S, cuCtxSynchronize());
            cap_release();
            covered(p);
            break;
        case SY_EVENT:
            /* a quarter of these syncs record the event for the whole context instead (cuCtxRecordEvent,
             * after the stream's work and the side stream's alike), drawn from the program's seed and the
             * operation's place, without the generator's draws (the programs stay as they were otherwise) */
            if ((dt_mix(p->seed, (uint64_t)idx * 131 + 17) & 3) == 0) {
                cap_hold(); /* like the device-wide sync, it breaks a capture under way */
                DT_CK(S, cuCtxRecordEvent(p->ctx, p->ev_sync));
            } else {
                DT_CK(S, cuEventRecord(p->ev_sync, p->s_main));
                cap_hold();
            }
            DT_CK(S, cuEventSynchronize(p->ev_sync));
            cap_release();
            covered(p);
            break;
        case SY_EVQUERY:
            DT_CK(S, cuEventRecord(p->ev_sync, p->s_main));
            if (DT_CKQ(S, step_query(p, 0)) == CUDA_SUCCESS) covered(p);
            break;
        case SY_STQUERY:
            if (DT_CKQ(S, step_query(p, 1)) == CUDA_SUCCESS) covered(p);
            break;
        }
        break;
    case OP_FORK: {
        if (p->implicit) break;
        CUevent ev = p->ev_fork;
        if (p->handoff) DT_CK(S, cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
        DT_CK(S, cuEventRecord(ev, p->s_main));
        side_ctx(p, 1);
        DT_CK(S, cuStreamWaitEvent(p->s_side, ev, 0));
        side_ctx(p, 0);
        if (p->handoff == 1) DT_CK(S, cuEventDestroy(ev)); /* the wait may be held: the event must outlive it */
        if (p->handoff == 2) p->fork_ev = ev;
        break;
    }
    case OP_JOIN: {
        if (p->implicit) break;
        CUevent ev = p->ev_join;
        side_ctx(p, 1);
        if (p->handoff) DT_CK(S, cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING)); /* in the side stream's context */
        DT_CK(S, cuEventRecord(ev, p->s_side));
        side_ctx(p, 0);
        if ((dt_mix(p->seed, (uint64_t)idx * 131 + 29) & 7) == 0) {
            /* an eighth of the joins make the whole context wait (cuCtxWaitEvent: the side stream's later
             * work too), drawn as the context-wide records are */
            cap_hold(); /* it breaks a capture under way */
            DT_CK(S, cuCtxWaitEvent(p->ctx, ev));
            cap_release();
        } else {
            DT_CK(S, cuStreamWaitEvent(p->s_main, ev, 0));
        }
        if (p->handoff) DT_CK(S, cuEventDestroy(ev));
        if (p->fork_ev) DT_CK(S, cuEventDestroy(p->fork_ev)); /* handoff 2 */
        p->fork_ev = NULL;
        break;
    }
    case OP_HOSTFN: { /* the host function reads a value the stream copied just before it */
        if (p->nhf >= p->hf_cap) break;
        float *slot = p->pin_hf + (size_t)p->nhf++ * (RD + 2);
        *(prog_t **)(slot + RD) = p;
        DT_CK(S, cuMemcpyDtoHAsync(slot, a + (CUdeviceptr)o->off * 4, 4, p->s_main));
        DT_CK(S, cuLaunchHostFunc(p->s_main, host_fn, slot));
        break;
    }
    case OP_TMPFREE: case OP_ASYNCALLOC: {
        /* a temporary that gets a new address every iteration, freed mid-iteration */
        CUdeviceptr t = 0;
        int n = o->cnt;
        unsigned bx = 128, gx = (unsigned)((n + 127) / 128);
        float w1 = 0.5f + (float)sc * 0.01f, w2 = -0.25f;
        void *k1[] = {&t, &a, &w1, &n}, *k2[] = {&b, &t, &w2, &n};
        if (o->kind == OP_TMPFREE) {
            cap_hold();
            DT_CK(S, cuMemAlloc(&t, (size_t)n * 4));
            cap_release();
        } else {
            cap_hold();
            if (p->late_free) DT_CK(S, cuMemFreeAsync(p->late_free, p->s_main));
            p->late_free = 0;
            DT_CK(S, cuMemAllocAsync(&t, (size_t)n * 4, p->s_main));
            cap_release();
        }
        DT_CK(S, cuMemsetD32Async(t, 0, (size_t)n, p->s_main));
        DT_CK(S, cuLaunchKernel(p->fn[K_AXPY], gx, 1, 1, bx, 1, 1, 0, p->s_main, k1, NULL));
        DT_CK(S, cuLaunchKernel(p->fn[K_AXPY], gx, 1, 1, bx, 1, 1, 0, p->s_main, k2, NULL));
        /* where a pool temporary is freed (from bits of a value drawn anyway): on the main stream at once;
         * at the next such operation (more work in between, maybe a sync); or on the side stream once an
         * event says the main stream's kernels are done with it (another context's stream: at once) */
        unsigned how = ((unsigned)o->iv[0] >> 29) & 3;
        if (o->kind == OP_TMPFREE) {
            cap_hold();
            DT_CK(S, cuMemFree(t));
            cap_release();
        } else if (how == 2) {
            p->late_free = t;
        } else if (how == 3 && !g_twoctx) {
            DT_CK(S, cuEventRecord(p->ev_free, p->s_main));
            DT_CK(S, cuStreamWaitEvent(p->s_side, p->ev_free, 0));
            cap_hold();
            DT_CK(S, cuMemFreeAsync(t, p->s_side));
            cap_release();
        } else {
            cap_hold();
            DT_CK(S, cuMemFreeAsync(t, p->s_main));
            cap_release();
        }
        break;
    }
    }
    for (int j = 0; j < p->nown; j++)
        if (p->own_at[j] == idx) DT_CK(S, cuGraphLaunch(p->own, p->s_main));
    /* --oldquery: now and then a query of an event recorded earlier (ev_sync: always before a barrier,
     * its own sync or query; ev_join: maybe in this segment), its answer not part of the output */
    dt_rng_t qr = {dt_mix(p->seed ^ 0x01dull, (uint64_t)it * 7919 + (uint64_t)idx)};
    if (g_oldquery && dt_below(&qr, 6) == 0) {
        cap_hold();
        (void)cuEventQuery(dt_below(&qr, 2) ? p->ev_sync : p->ev_join);
        cap_release();
    }
    /* --farquery: an event recorded early in the iteration, queried once far later in two iterations of
     * three (as PyTorch's page-locked host allocator queries, at loss.item(), the events of the step's
     * batches as far as another thread has not), its answer not part of the output: no barrier where the
     * record came 32 operations before or more (held still: answered "not ready") */
    if (g_farquery && idx == p->far_rec) DT_CK(&p->sum, cuEventRecord(p->ev_far, p->s_main));
    if (g_farquery && idx == p->far_q && dt_below(&qr, 3) != 0) {
        cap_hold();
        (void)cuEventQuery(p->ev_far);
        cap_release();
    }
}

/* Runs one (iteration, op) step, applying a sabotage if one is armed: the bugs a broken shim would
 * have (a dropped launch, a missed patch, two launches swapped, a launch issued too late). */
static int late_idx = -1;
static void step(prog_t *p, int idx, int it)
{
    const op_t *o = &p->ops[idx];
    if (it == p->sab_iter && o->kind == OP_LAUNCH && !o->noise) {
        if (p->sab_mode == SAB_DROP && late_idx == -1) { /* a shim would still have returned success */
            p->sum.hash = dt_fnv_u64(p->sum.hash, CUDA_SUCCESS);
            return (void)(late_idx = idx);
        }
        if (p->sab_mode == SAB_LATE && late_idx == -1) return (void)(late_idx = idx);
        if (p->sab_mode == SAB_REORDER && late_idx == -1 && idx + 1 < p->nops && p->ops[idx + 1].kind == OP_LAUNCH &&
            !p->ops[idx + 1].noise && p->ops[idx + 1].side == o->side) {
            late_idx = idx;
            exec_op(p, idx + 1, it);
            exec_op(p, idx, it);
            return;
        }
        if (p->sab_mode == SAB_REORDER && late_idx == idx) return; /* already issued, swapped */
    }
    exec_op(p, idx, it);
}

static int owner(int idx) { return idx & 1; }

static const char fake_image[] = "fakecuda-module difftest";

/* The module (which 0), the library (1) or both (2) unloaded and loaded again. Without swap their kernels
 * are taken from kernel `rot` on (a rotated order: the handles a driver reuses go to other kernels than
 * before, with other parameters). With swap, in the order of the last load (each kernel gets its own
 * handle back where the driver reuses them), but the scaling and clamping kernels (the same parameters)
 * trade places: a launch of one under the same handle as before runs the other's code from now on (the
 * program's results change, with and without the shim alike). In the program's own context. */
static void reload_kernels(prog_t *p, int which, int rot, int swap)
{
    dt_sum_t *S = &p->sum;
    swap = swap && p->kset[K_SCALE] && p->kset[K_CLAMP];
    if (!swap) p->load_rot = rot;
    if (swap) p->swapped = !p->swapped;
    /* the library first: the fake reuses the handles last unloaded first, so the module's come back first */
    if (which != 0) DT_CK(S, cuLibraryUnload(p->lib));
    if (which != 1) DT_CK(S, cuModuleUnload(p->mod));
    if (which != 1) DT_CK(S, cuModuleLoadData(&p->mod, fake_image));
    if (which != 0) DT_CK(S, cuLibraryLoadData(&p->lib, fake_image, NULL, NULL, 0, NULL, NULL, 0));
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 0 ? which == 1 : which == 0) continue; /* module, then library */
        for (int j = 0; j < K_N; j++) {
            int k = (p->load_rot + j) % K_N;
            if (!p->kset[k]) continue;
            const char *name = k_names[!p->swapped ? k : k == K_SCALE ? K_CLAMP : k == K_CLAMP ? K_SCALE : k];
            if (pass == 0) DT_CK(S, cuModuleGetFunction(&p->fn[k], p->mod, name));
            else DT_CK(S, cuLibraryGetKernel(&p->kn[k], p->lib, name));
        }
    }
}

static void run_iterations(prog_t *p, int me)
{
    for (int it = 0; it < p->iters; it++) {
        if (p->sab_mode == SAB_REORDER && it == p->sab_iter) late_idx = -1;
        for (int idx = 0; idx < p->nops; idx++) {
            if (p->threads) {
                long t = (long)it * p->nops + idx;
                if (owner(idx) != me) continue;
                pthread_mutex_lock(&p->mu);
                while (p->turn != t) pthread_cond_wait(&p->cv, &p->mu);
                pthread_mutex_unlock(&p->mu);
            }
            if (p->pauses && g_pause_fn && dt_mix(p->seed ^ 0x9a05eULL, (uint64_t)it * 4099 + (uint64_t)idx) % 16 == 0)
                p->pauses += g_pause_fn(p->pauses % 2) >= 0; /* odd: running, so pause; even: paused */
            if (p->reloads && idx == p->reload_idx && it % p->reloads == p->reloads - 1) {
                uint64_t h = dt_mix(p->seed ^ 0x7e10adULL, (uint64_t)it) >> 8; /* what, the order, a swap */
                reload_kernels(p, p->own ? 1 : (int)(h % 3), (int)((h >> 4) % K_N), (h >> 12) % 2 == 0);
            }
            if (!(p->sab_mode == SAB_REORDER && it == p->sab_iter && late_idx >= 0 && idx == late_idx + 1))
                step(p, idx, it);
            if (p->threads) {
                pthread_mutex_lock(&p->mu);
                p->turn++;
                pthread_cond_broadcast(&p->cv);
                pthread_mutex_unlock(&p->mu);
            }
        }
        if (p->sab_mode == SAB_LATE && it == p->sab_iter && late_idx >= 0 && me == owner(late_idx))
            exec_op(p, late_idx, it); /* issued after the rest of the iteration */
    }
}

static void *worker(void *arg)
{
    prog_t *p = arg;
    /* not folded into the checksum: it runs concurrently with the main thread's first step */
    if (cuCtxSetCurrent(p->ctx) != CUDA_SUCCESS) __atomic_add_fetch(&p->sum.errors, 1, __ATOMIC_RELAXED);
    run_iterations(p, 1);
    return NULL;
}

/* --observer: a thread that issues no work, as a watchdog polling events, queries (and, but with
 * FAKECUDA_QUERY_NOT_READY, syncs) the program's events and streams at times of its own while it runs.
 * Its answers are not part of the output (they depend on timing); the program's own results must stay
 * the same with and without the shim, whether a poll passes untouched or has to issue held work first.
 * Its queries are passive on the fake (they run no work: a query that ran the program's work, or took
 * the NOT_READY answer that FAKECUDA_QUERY_NOT_READY gives a record's first query, would change what the
 * program's own queries answer, which a GPU's progress, not another thread's query, decides); its syncs
 * run the work, so with FAKECUDA_QUERY_NOT_READY it makes none. A device-wide sync of its that fails for a
 * capture under way is an error of the program's (no capture is, but the library's builds). */
static void *observer(void *arg)
{
    prog_t *p = arg;
    if (cuCtxSetCurrent(p->ctx) != CUDA_SUCCESS) {
        __atomic_add_fetch(&p->sum.errors, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    fakecuda_thread_passive(1);
    const char *qnr = getenv("FAKECUDA_QUERY_NOT_READY");
    unsigned kinds = qnr && atoi(qnr) == 1 ? 5 : 10; /* cases 5-9 sync (9 only yields) */
    uint64_t r = p->seed ^ 0x0b5e7e;
    while (!__atomic_load_n(&p->obs_stop, __ATOMIC_ACQUIRE)) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        cap_hold();
        switch ((unsigned)((r >> 33) % kinds)) {
        case 0: (void)cuEventQuery(p->ev_sync); break;
        case 1: (void)cuEventQuery(p->ev_join); break;
        case 2: (void)cuEventQuery(p->ev_fork); break;
        case 3: (void)(((r >> 40) & 1) ? cuStreamQuery(p->s_main) : cuStreamQuery(p->s_side)); break;
        case 4: {
            float ms;
            (void)cuEventElapsedTime(&ms, p->ev_join, p->ev_sync);
            break;
        }
        case 5: (void)cuEventSynchronize(p->ev_join); break;
        case 6: (void)cuStreamSynchronize(p->s_side); break;
        case 7: (void)cuStreamSynchronize(p->s_main); break;
        case 8: /* a device-wide sync, which CUDA fails beside any capture of the context: beside the library's
                 * builds too, where they capture meanwhile (the capture fence) */
            if (cuCtxSynchronize() == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) {
                fprintf(stderr, "difftest: seed %llu: the observer's cuCtxSynchronize met a capture\n",
                        (unsigned long long)p->seed);
                __atomic_add_fetch(&p->sum.errors, 1, __ATOMIC_RELAXED);
            }
            break;
        default: sched_yield(); break;
        }
        cap_release();
    }
    return NULL;
}

/* --capturer's kernel, dt_cap(y, n): y += 1, and nothing else (the other kernels add to the journal, which the
 * output reads; this one's count of runs is the threads' timing's). */
static void k_cap(void **args, const fakecuda_dims_t *d)
{
    float *y = ARG(float *, 0);
    unsigned c = cover(d, ARG(int, 1));
    for (unsigned i = 0; i < c; i++) y[i] += 1.0f;
}
static const size_t k_cap_sizes[2] = {8, 4};

/* --capturer: a thread in a context of its own (made once, kept for every program of the process) captures a
 * graph of one launch on a stream of its own, every 0.3-3 ms while the program runs, then instantiates,
 * launches, syncs and destroys it. Each capture's start is a barrier for every engine that holds work, and
 * while a capture lasts every engine passes every call to the driver: the program's engines go between
 * holding and passing at points the threads' timing decides, in the middle of chunks, with held work to issue
 * first. Global mode, PyTorch's default: the program's calls it forbids wait for its end (g_cap_mu), and a
 * call of the library's own that it forbids (an allocation, a query of its own event) would fail here and
 * invalidate the capture (fakecuda's rule, as CUDA's). What it computes, and how many captures it makes,
 * are not part of the output; its errors are. */
static struct {
    CUcontext ctx;
    CUfunction f;
    CUstream s;
    CUdeviceptr y;
} g_cap;
static void *capturer(void *arg)
{
    prog_t *p = arg;
    dt_sum_t sum = {DT_FNV_OFFSET, 0, 0, "capturer"};
    int n = 256;
    if (!g_cap.ctx) {
        CUdevice dev;
        CUmodule mod;
        CUcontext ctx = NULL;
        if (DT_CK(&sum, cuDeviceGet(&dev, 0)) || DT_CK(&sum, cuCtxCreate(&ctx, NULL, 0, dev)) ||
            DT_CK(&sum, cuModuleLoadData(&mod, fake_image)) || DT_CK(&sum, cuModuleGetFunction(&g_cap.f, mod, "dt_cap")) ||
            DT_CK(&sum, cuStreamCreate(&g_cap.s, CU_STREAM_NON_BLOCKING)) || DT_CK(&sum, cuMemAlloc(&g_cap.y, (size_t)n * 4))) {
            __atomic_add_fetch(&p->sum.errors, sum.errors, __ATOMIC_RELAXED);
            return NULL;
        }
        g_cap.ctx = ctx;
    }
    DT_CK(&sum, cuCtxSetCurrent(g_cap.ctx));
    void *args[] = {&g_cap.y, &n};
    uint64_t r = p->seed * 0x9E3779B97F4A7C15ull + 1;
    while (!__atomic_load_n(&p->cap_stop, __ATOMIC_ACQUIRE) && !sum.errors) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        struct timespec gap = {0, (long)(300000 + (r >> 33) % 2700000)};
        nanosleep(&gap, NULL);
        CUgraph g = NULL;
        CUgraphExec ge = NULL;
        pthread_mutex_lock(&g_cap_mu);
        DT_CK(&sum, cuStreamBeginCapture(g_cap.s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        DT_CK(&sum, cuLaunchKernel(g_cap.f, 1, 1, 1, 256, 1, 1, 0, g_cap.s, args, NULL));
        sched_yield(); /* the program's thread goes on while the capture lasts */
        CUresult e = DT_CK(&sum, cuStreamEndCapture(g_cap.s, &g));
        pthread_mutex_unlock(&g_cap_mu);
        if (e != CUDA_SUCCESS || !g) break;
        DT_CK(&sum, cuGraphInstantiateWithFlags(&ge, g, 0));
        DT_CK(&sum, cuGraphLaunch(ge, g_cap.s));
        DT_CK(&sum, cuStreamSynchronize(g_cap.s));
        DT_CK(&sum, cuGraphExecDestroy(ge));
        DT_CK(&sum, cuGraphDestroy(g));
    }
    __atomic_add_fetch(&p->sum.errors, sum.errors, __ATOMIC_RELAXED);
    return NULL;
}

/* The program's kernels, as functions of a module and as kernels of a library, in the current context. */
static void load_kernels(prog_t *p, CUmodule *mod, CUlibrary *lib, CUfunction *fn, CUkernel *kn)
{
    dt_sum_t *S = &p->sum;
    DT_CK(S, cuModuleLoadData(mod, fake_image));
    DT_CK(S, cuLibraryLoadData(lib, fake_image, NULL, NULL, 0, NULL, NULL, 0));
    for (int k = 0; k < K_N; k++) {
        if (!p->kset[k]) continue;
        DT_CK(S, cuModuleGetFunction(&fn[k], *mod, k_names[k]));
        DT_CK(S, cuLibraryGetKernel(&kn[k], *lib, k_names[k]));
    }
}

static void describe(const prog_t *p)
{
    static const char *kn[OP_N] = {"launch", "memset8", "memset32", "d2d", "h2d_sync", "d2h_sync", "d2h_pinned",
                                   "d2h_pageable", "h2d_pageable", "h2d_pinned", "sync", "fork", "join",
                                   "hostfn", "tmpfree", "asyncalloc", "memset_sync"};
    static const char *st[3] = {"legacy", "blocking", "nonblocking"};
    fprintf(stderr, "seed %llu: %d buffers (%d slots), %d ops x %d iterations, main %s, side %s%s%s\n",
            (unsigned long long)p->seed, p->nbuf, p->nslots, p->nops, p->iters, st[p->main_kind], st[p->side_kind],
            p->nosync ? ", no sync in loop" : "", p->threads ? ", two threads" : "");
    if (p->handoff)
        fprintf(stderr, "  forks and joins through events made and destroyed each time (hand-off %d)\n", p->handoff);
    if (p->bigsmem)
        fprintf(stderr, "  a quarter of the launches with 64 KiB of dynamic shared memory, the limit raised for each\n");
    if (p->implicit)
        fprintf(stderr, "  forks and joins without events: the legacy stream's implicit order only\n");
    if (p->pauses)
        fprintf(stderr, "  autograph_pause toggled before about one operation in 16 (where the shim is loaded)\n");
    if (p->reloads)
        fprintf(stderr, "  its module, library or both unloaded and loaded again before operation %d of every %s\n",
                p->reload_idx, p->reloads == 1 ? "iteration" : p->reloads == 2 ? "second iteration" : "third iteration");
    for (int i = 0; i < p->nops; i++) {
        const op_t *o = &p->ops[i];
        fprintf(stderr, "  %3d %-12s", i, kn[o->kind]);
        if (o->kind == OP_LAUNCH)
            fprintf(stderr, " %s route=%d ck=%d vary=%d grid=%ux%u n=%d slots=%d,%d,%d%s%s", k_names[o->kern],
                    o->route, o->use_ck, o->vary, o->gx, o->bx, o->n, o->slot[0], o->slot[1], o->slot[2],
                    o->side ? " side" : "", o->noise ? " noise" : "");
        else fprintf(stderr, " slots=%d,%d off=%d cnt=%d", o->slot[0], o->slot[1], o->off, o->cnt);
        fputc('\n', stderr);
    }
}

/* A quarter of the programs that load the scaling kernel make a graph of their own before the loop (drawn
 * apart from the operations, so that every seed's operations stay as they were): one kernel node scaling a
 * slot that no swap moves, in place, launched on the main stream after one to three of the operations
 * outside a fork, in every iteration. For the
 * shim each launch is a barrier (what it holds is issued first: the result depends on the order); with
 * the stand-in CUPTI's strict mode, a graph of the program's launched under a learning window's kernel
 * activity and again during a finalize aborts (the H200 faulted there). */
static void make_own_graph(prog_t *p)
{
    dt_rng_t gr = {dt_mix(p->seed, 0x0a11c0de)};
    int slot = p->nslots - 1;
    if (dt_below(&gr, 4) != 0 || p->swap[slot] >= 0 || !p->kset[K_SCALE]) return;
    dt_sum_t *S = &p->sum;
    float a = 0.75f, b = 0.125f; /* copied when the node is added, as n is */
    int n = slot_n(p, slot);
    void *args[] = {&p->buf[slot], &a, &b, &n};
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof(kp));
    kp.func = p->fn[K_SCALE];
    kp.gridDimX = (unsigned)((n + 127) / 128), kp.gridDimY = kp.gridDimZ = 1;
    kp.blockDimX = 128, kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;
    CUgraph g;
    CUgraphNode node;
    DT_CK(S, cuGraphCreate(&g, 0));
    DT_CK(S, cuGraphAddKernelNode(&node, g, NULL, 0, &kp));
    DT_CK(S, cuGraphInstantiateWithFlags(&p->own, g, 0));
    DT_CK(S, cuGraphDestroy(g));
    p->own_slot = slot;
    p->nown = dt_range(&gr, 1, 3);
    /* never between a fork and its join, where the side stream may work on that slot */
    int forked = 0;
    unsigned char outside[MAX_OPS];
    for (int i = 0; i < p->nops; i++) {
        forked = p->ops[i].kind == OP_FORK ? 1 : p->ops[i].kind == OP_JOIN ? 0 : forked;
        outside[i] = !forked;
    }
    for (int j = 0; j < p->nown; j++) {
        int at = (int)dt_below(&gr, (unsigned)p->nops);
        while (!outside[at]) at = (at + 1) % p->nops; /* the last operation is never a fork's */
        p->own_at[j] = at;
    }
}

static int run_program(uint64_t seed)
{
    prog_t *p = calloc(1, sizeof(*p));
    if (!p) return -1;
    p->seed = seed;
    dt_trace_on = getenv("DT_TRACE_SEED") && strtoull(getenv("DT_TRACE_SEED"), NULL, 0) == seed;
    p->rng.s = seed * 0x9e3779b97f4a7c15ull + 12345;
    p->sum.hash = DT_FNV_OFFSET;
    p->sum.who = "difftest";
    generate(p);
    p->handoff = (int)(dt_mix(seed, 0x4a4d0ffULL) % 6); /* a third of the programs: 1 or 2 */
    p->handoff = p->handoff <= 2 ? p->handoff : 0;
    p->bigsmem = dt_mix(seed, 0x5b16e3ULL) % 6 == 0; /* a sixth of the programs */
    p->implicit = !g_twoctx && p->main_kind + p->side_kind == ST_LEGACY + ST_BLOCKING &&
                  dt_mix(seed, 0x1e6ac7ULL) % 2 == 0;
    if (p->implicit) p->handoff = 0;
    p->pauses = dt_mix(seed, 0x9a05e5ULL) % 4 == 0;
    uint64_t rd = dt_mix(seed, 0x7e10adULL);
    p->reloads = rd % 5 == 0 ? 1 + (int)(rd >> 8) % 3 : 0;
    p->reload_idx = (int)((rd >> 16) % (uint64_t)p->nops);
    if (g_verbose) describe(p);
    if (g_sabotage) p->sab_mode = g_sabotage, p->sab_iter = p->iters > 7 ? 7 : p->iters - 1;
    late_idx = -1;
    dt_sum_t *S = &p->sum;

    DT_CK(S, cuCtxGetCurrent(&p->ctx));
    p->streams[ST_LEGACY] = NULL;
    DT_CK(S, cuStreamCreate(&p->streams[ST_BLOCKING], CU_STREAM_DEFAULT));
    DT_CK(S, cuStreamCreate(&p->streams[ST_NONBLOCKING], CU_STREAM_NON_BLOCKING));
    p->s_main = p->streams[p->main_kind], p->s_side = p->streams[p->side_kind];
    DT_CK(S, cuEventCreate(&p->ev_fork, CU_EVENT_DISABLE_TIMING));
    DT_CK(S, cuEventCreate(&p->ev_join, CU_EVENT_DEFAULT));
    DT_CK(S, cuEventCreate(&p->ev_sync, (seed & 1) ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING));
    DT_CK(S, cuEventCreate(&p->ev_free, CU_EVENT_DISABLE_TIMING));
    if (g_farquery) {
        DT_CK(S, cuEventCreate(&p->ev_far, CU_EVENT_DISABLE_TIMING));
        dt_rng_t fr = {dt_mix(seed ^ 0xfa4ull, 1)};
        p->far_rec = (int)dt_below(&fr, (uint64_t)(p->nops / 4 + 1));
        p->far_q = p->far_rec + 34 + (int)dt_below(&fr, 64);
        if (p->far_q >= p->nops)
            p->far_q = p->nops - 1;
    }
    load_kernels(p, &p->mod, &p->lib, p->fn, p->kn);
    for (int k = 0; k < K_N; k++) {
        if (!p->kset[k]) continue;
        size_t end = 0;
        for (unsigned j = 0; j < k_nparams[k]; j++) {
            size_t off = 0, size = 0, off2 = 0, size2 = 0;
            DT_CK(S, cuFuncGetParamInfo(p->fn[k], j, &off, &size));
            DT_CK(S, cuKernelGetParamInfo(p->kn[k], j, &off2, &size2));
            if (off != off2 || size != size2 || size != k_sizes[k][j]) S->errors++;
            p->poff[k][j] = off;
            if (off + size > end) end = off + size;
        }
        p->argsize[k] = end;
    }
    if (g_twoctx) {
        CUdevice dev;
        DT_CK(S, cuCtxGetDevice(&dev));
        static CUcontext ctx2; /* one for the process, but with --ctxchurn */
        if (!ctx2 || g_ctxchurn) {
            CUcontext pushed;
            DT_CK(S, cuCtxCreate(&ctx2, NULL, 0, dev));
            DT_CK(S, cuCtxPopCurrent(&pushed)); /* made current by a push: the thread's stack as it was */
        }
        p->ctx2 = ctx2;
        DT_CK(S, cuCtxSetCurrent(p->ctx2)); /* current until set back */
        load_kernels(p, &p->mod2, &p->lib2, p->fn2, p->kn2);
        DT_CK(S, cuStreamCreate(&p->s_side, CU_STREAM_NON_BLOCKING));
        DT_CK(S, cuCtxSetCurrent(p->ctx));
    }
    for (int i = 0; i < p->nbuf; i++) {
        DT_CK(S, cuMemAlloc(&p->buf[i], p->bsize[i] * 4));
        float *init = malloc(p->bsize[i] * 4);
        for (size_t j = 0; j < p->bsize[i]; j++) init[j] = (float)((j * 31 + (size_t)i * 7 + seed) % 101) / 50.0f - 1.0f;
        DT_CK(S, cuMemcpyHtoD(p->buf[i], init, p->bsize[i] * 4));
        free(init);
    }
    p->pin_out_cap = p->iters * p->nops + 1;
    p->hf_cap = p->iters * p->nops + 1;
    DT_CK(S, cuMemAllocHost((void **)&p->pin_out, (size_t)p->pin_out_cap * RD * 4));
    DT_CK(S, cuMemAllocHost((void **)&p->pin_hf, (size_t)p->hf_cap * (RD + 2) * 4));
    DT_CK(S, cuMemAllocHost((void **)&p->pin_in, ((size_t)p->iters * (size_t)p->npin_in + 1) * RD * 4));
    p->pageable = malloc(RD * 4);
    CUdeviceptr jd;
    DT_CK(S, cuMemAlloc(&jd, 8));
    DT_CK(S, cuMemsetD32(jd, 0, 2));
    g_journal = (uint64_t *)(uintptr_t)jd; /* fakecuda's device memory is directly addressable */

    make_own_graph(p);
    if (g_verbose && p->nown)
        fprintf(stderr, "  its own graph: scales slot %d, launched after operations %d %d %d (the first %d)\n",
                p->own_slot, p->own_at[0], p->own_at[1], p->own_at[2], p->nown);

    pthread_t obs_th;
    int obs = g_observer && pthread_create(&obs_th, NULL, observer, p) == 0;
    if (g_observer && !obs) S->errors++;
    pthread_t cap_th;
    int cap = g_capturer && pthread_create(&cap_th, NULL, capturer, p) == 0;
    if (g_capturer && !cap) S->errors++;
    if (p->threads) {
        pthread_t th;
        pthread_mutex_init(&p->mu, NULL);
        pthread_cond_init(&p->cv, NULL);
        pthread_create(&th, NULL, worker, p);
        run_iterations(p, 0);
        pthread_join(th, NULL);
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
    } else {
        run_iterations(p, 0);
    }
    if (obs) {
        __atomic_store_n(&p->obs_stop, 1, __ATOMIC_RELEASE);
        pthread_join(obs_th, NULL);
    }
    if (cap) {
        __atomic_store_n(&p->cap_stop, 1, __ATOMIC_RELEASE);
        pthread_join(cap_th, NULL);
    }
    if (p->pauses && p->pauses % 2 == 0 && g_pause_fn) g_pause_fn(0); /* paused at the end: back for the next program */

    if (p->late_free) DT_CK(S, cuMemFreeAsync(p->late_free, p->s_main));
    DT_CK(S, cuCtxSynchronize());
    covered(p);
    for (int i = 0; i < p->nbuf; i++) {
        float *out = malloc(p->bsize[i] * 4);
        DT_CK(S, cuMemcpyDtoH(out, p->buf[i], p->bsize[i] * 4));
        hash_reads(p, out, (int)p->bsize[i]);
        free(out);
        DT_CK(S, cuMemFree(p->buf[i]));
    }
    uint64_t jv = 0;
    DT_CK(S, cuMemcpyDtoH(&jv, jd, 8));
    p->sum.hash = dt_fnv_u64(p->sum.hash, jv);
    g_journal = NULL;
    DT_CK(S, cuMemFree(jd));
    DT_CK(S, cuMemFreeHost(p->pin_out));
    DT_CK(S, cuMemFreeHost(p->pin_hf));
    DT_CK(S, cuMemFreeHost(p->pin_in));
    free(p->pageable);
    if (p->own) DT_CK(S, cuGraphExecDestroy(p->own));
    if (p->fork_ev) DT_CK(S, cuEventDestroy(p->fork_ev));
    DT_CK(S, cuEventDestroy(p->ev_fork));
    DT_CK(S, cuEventDestroy(p->ev_join));
    DT_CK(S, cuEventDestroy(p->ev_sync));
    DT_CK(S, cuEventDestroy(p->ev_free));
    if (p->ev_far) DT_CK(S, cuEventDestroy(p->ev_far));
    DT_CK(S, cuStreamDestroy(p->streams[ST_BLOCKING]));
    DT_CK(S, cuStreamDestroy(p->streams[ST_NONBLOCKING]));
    DT_CK(S, cuModuleUnload(p->mod));
    DT_CK(S, cuLibraryUnload(p->lib));
    if (g_twoctx) {
        DT_CK(S, cuCtxSetCurrent(p->ctx2));
        DT_CK(S, cuStreamDestroy(p->s_side));
        DT_CK(S, cuModuleUnload(p->mod2));
        DT_CK(S, cuLibraryUnload(p->lib2));
        DT_CK(S, cuCtxSetCurrent(p->ctx));
        if (g_ctxchurn) DT_CK(S, cuCtxDestroy(p->ctx2));
    }

    printf("seed %llu checksum %016llx\n", (unsigned long long)seed, (unsigned long long)S->hash);
    fflush(stdout);
    int bad = S->errors;
    if (bad) fprintf(stderr, "difftest: seed %llu: %d unexpected results (the generated program is invalid)\n",
                     (unsigned long long)seed, bad);
    free(p);
    return bad ? 1 : 0;
}

int main(int argc, char **argv)
{
    unsigned long long first = 0, count = 1;
    int sabotage_flag = 0;
    g_pause_fn = dt_pause_fn();
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--first") && i + 1 < argc) first = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--count") && i + 1 < argc) count = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--verbose")) g_verbose = 1;
        else if (!strcmp(argv[i], "--host-us") && i + 1 < argc) g_host_us = atol(argv[++i]);
        else if (!strcmp(argv[i], "--observer")) g_observer = 1;
        else if (!strcmp(argv[i], "--capturer")) g_capturer = 1;
        else if (!strcmp(argv[i], "--oldquery")) g_oldquery = 1;
        else if (!strcmp(argv[i], "--farquery")) g_farquery = 1;
        else if (!strcmp(argv[i], "--twoctx")) g_twoctx = 1;
        else if (!strcmp(argv[i], "--ctxchurn")) g_ctxchurn = g_twoctx = 1;
        else if (!strcmp(argv[i], "--poll")) g_poll = 1;
        else if (!strcmp(argv[i], "--long")) g_long = 1;
        else if (!strcmp(argv[i], "--buckets") && i + 1 < argc) g_buckets = atoi(argv[++i]) > 0 ? atoi(argv[i]) : 0;
        else if (!strcmp(argv[i], "--sabotage")) sabotage_flag = 1; /* hidden: for the self-check only */
        else {
            fprintf(stderr, "usage: %s --first S --count N [--verbose] [--host-us U] [--observer] [--capturer] [--oldquery] [--farquery] [--twoctx] [--ctxchurn] [--buckets N] [--poll] [--long]\n", argv[0]);
            return 2;
        }
    }
    if (sabotage_flag) {
        const char *m = getenv("DIFFTEST_SABOTAGE");
        if (m && *m) {
            g_sabotage = !strcmp(m, "stale") ? SAB_STALE : !strcmp(m, "reorder") ? SAB_REORDER
                       : !strcmp(m, "late") ? SAB_LATE : SAB_DROP;
        }
    }
    for (int k = 0; k < K_N; k++) {
        if (k == K_MANY) {
            k_sizes[k][0] = 8;
            for (int j = 1; j < 1 + 2 * MANY_N + 1; j++) k_sizes[k][j] = 4;
        }
        if (fakecuda_register_kernel(k_names[k], k_fns[k], k_nparams[k], k_sizes[k])) {
            fprintf(stderr, "difftest: cannot register %s\n", k_names[k]);
            return 2;
        }
    }
    const char *qnr = getenv("FAKECUDA_QUERY_NOT_READY");
    if (g_capturer && qnr && atoi(qnr) == 1) {
        /* its syncs run the program's work too, at times of its own: a query's first answer would be the
         * threads' timing's, in a plain run as much as under the shim */
        fprintf(stderr, "difftest: --capturer cannot be combined with FAKECUDA_QUERY_NOT_READY=1\n");
        return 2;
    }
    if (g_capturer && fakecuda_register_kernel("dt_cap", k_cap, 2, k_cap_sizes)) {
        fprintf(stderr, "difftest: cannot register dt_cap\n");
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "difftest: no CUDA context\n");
        return 2;
    }
    int rc = 0;
    for (unsigned long long s = first; s < first + count; s++) rc |= run_program(s);
    return rc;
}
