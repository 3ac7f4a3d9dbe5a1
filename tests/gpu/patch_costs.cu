/* patch_costs: what the replay engine pays to change kernel arguments of an instantiated graph between
 * launches, so it can pick the cheapest way. Host us per iteration (patch + cuGraphLaunch: the time the
 * issuing thread spends), median of 5. Not a test, but every result is checked: exit 1 on a wrong one.
 *   build: nvcc -O2 -arch=sm_90 -rdc=true -o /tmp/patch_costs tests/gpu/patch_costs.cu -lcuda -lcudadevrt
 *   run:   /tmp/patch_costs [iterations per cell, default 2000; fewer where a rep would pass 40 ms]
 * Setup: a graph of N tiny kernel nodes (1 block of 32 threads; N = 32, 128) captured on a non-blocking
 * stream. Each node hashes its whole argument block, stores the hash in slot[node] of the buffer its pointer
 * argument names (one of 4) and adds it to a per-node sum, so the host can check what each launch saw.
 * Arguments "small": a pointer, an int, a 64-bit offset (24 bytes); "large": a 4 KB struct by value (like
 * multi_tensor_apply's metadata) of which two 8-byte words change. Per iteration k nodes (1, 8, N/2, N; the
 * set rotates) get a new pointer and a new 64-bit offset (an allocator address, a philox offset).
 *   per-node     cuGraphExecKernelNodeSetParams (_v2) on each changed node, then cuGraphLaunch
 *   whole-graph  cuGraphKernelNodeSetParams on the source graph's changed nodes, cuGraphExecUpdate, launch
 *   dev-updater  the graph's nodes are device-updatable (launch attribute at capture); an updater kernel,
 *                launched on the stream just before cuGraphLaunch, gets (device node, offset, size) + bytes
 *                by value (__grid_constant__, up to 32 KB: no staging buffer) and applies them with
 *                cudaGraphKernelNodeSetParam; it is launched again when they don't fit
 *   node@dev     per-node host patches on the device-updatable graph (what a strategy switch costs)
 *   s16 / s1     a stream sync every 16 iterations / every iteration, included in the time
 *   updater GPU  GPU us per updater launch ("set": cudaGraphKernelNodeSetParam from 32 threads, "apply":
 *                cudaGraphKernelNodeUpdatesApply by 32), and of updater + device-updatable graph
 * Baselines: the graph and the device-updatable graph without patches, the N kernels launched eagerly,
 * and the GPU us per launch of both graphs. GPU times: R launches queued behind a spin kernel, so the
 * GPU runs them back to back, between two events; '?' marks one where the host may not have kept ahead.
 * Checks: per strategy and k, 64 iterations (a sync every 16) whose buffers are cleared before and copied
 * back after each launch, every slot compared with that iteration's arguments; the same with the updates
 * split over several updater launches, and across switches device <-> host patches; every timed loop
 * through the per-node sums. Any wrong result: a MISMATCH line and exit 1. A strategy the driver refuses
 * (an error code): "refused" in its cells and the error below the table.
 * Lines "finding:" say what the driver did with device-side updates (host patch of one node, upload,
 * host patch while an updater is queued, cuGraphExecUpdate, node attribute set after capture). */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_bench.h"

#define CKD(x) CK_NAMED(CUresult, CUDA_SUCCESS, cuGetErrorName, x)

#define MAXN 128      /* nodes per graph at most (a power of two: kernels mask the node index) */
#define NBUF 4        /* buffers the pointer argument moves between */
#define BIG_WORDS 512 /* the large argument block: 4 KB */
#define W_PTR 0       /* its words that change: the pointer ... */
#define W_NODE 1
#define W_OFF 300     /* ... and the offset */
#define REPS 5
#define WIN 16        /* sync interval of s16, and the window of the checked loops */
#define UPD_MAXCAP 1360 /* updates in one updater launch: sizeof(UpdBatch<1360>) = 32648 <= 32764 */

/* ---------------------------------------------------------------- device side */

__device__ unsigned long long g_sum[MAXN]; /* per node: sum of the hashes of all its launches */
__device__ int g_upd_err;                  /* first device runtime error an updater saw, 0: none */

/* splitmix64 finalizer of (word index, word): the host computes the same hash */
__host__ __device__ static inline unsigned long long mix(unsigned long long i, unsigned long long v) {
  unsigned long long z = v + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__global__ void k_small(unsigned long long *p, int node, unsigned long long off) {
  if (threadIdx.x) return;
  unsigned long long h = mix(0, (unsigned long long)p) ^ mix(1, (unsigned int)node) ^ mix(2, off);
  p[node & (MAXN - 1)] = h;
  atomicAdd(&g_sum[node & (MAXN - 1)], h);
}

struct Big {
  unsigned long long w[BIG_WORDS];
};

__global__ void k_big(const __grid_constant__ Big a) {
  unsigned long long h = 0;
  for (int i = threadIdx.x; i < BIG_WORDS; i += 32) h ^= mix(i, a.w[i]);
  for (int d = 16; d; d >>= 1) h ^= __shfl_xor_sync(0xffffffffu, h, d);
  if (threadIdx.x == 0) {
    unsigned long long *p = (unsigned long long *)a.w[W_PTR];
    int node = (int)(a.w[W_NODE] & (MAXN - 1));
    p[node] = h;
    atomicAdd(&g_sum[node], h);
  }
}

/* holds the stream back for ns nanoseconds, so that launches queue up behind it */
__global__ void k_spin(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  while (t - t0 < ns);
}

/* the updates of one updater launch, passed by value: entry i writes size[i] bytes from data[at[i]...]
 * at byte offset[i] of the argument block of device node node[i] */
template <int CAP> struct UpdBatch {
  unsigned int count, words;
  unsigned long long node[CAP]; /* cudaGraphDeviceNode_t */
  unsigned int offset[CAP];
  unsigned short size[CAP], at[CAP];
  unsigned long long data[CAP];
};

template <int CAP, int APPLY> __global__ void k_updater(const __grid_constant__ UpdBatch<CAP> b) {
  if (!APPLY) {
    for (unsigned int i = threadIdx.x; i < b.count; i += 32) {
      cudaError_t e = cudaGraphKernelNodeSetParam((cudaGraphDeviceNode_t)b.node[i], b.offset[i],
                                                  &b.data[b.at[i]], b.size[i]);
      if (e != cudaSuccess) atomicCAS(&g_upd_err, 0, (int)e);
    }
    return;
  }
  __shared__ __align__(16) unsigned char raw[32 * sizeof(cudaGraphKernelNodeUpdate)];
  cudaGraphKernelNodeUpdate *u = (cudaGraphKernelNodeUpdate *)raw;
  for (unsigned int base = 0; base < b.count; base += 32) {
    unsigned int i = base + threadIdx.x;
    if (i < b.count) {
      u[threadIdx.x].node = (cudaGraphDeviceNode_t)b.node[i];
      u[threadIdx.x].field = cudaGraphKernelNodeFieldParam;
      u[threadIdx.x].updateData.param.pValue = &b.data[b.at[i]];
      u[threadIdx.x].updateData.param.offset = b.offset[i];
      u[threadIdx.x].updateData.param.size = b.size[i];
    }
    __syncwarp();
    if (threadIdx.x == 0) {
      cudaError_t e = cudaGraphKernelNodeUpdatesApply(u, b.count - base < 32 ? b.count - base : 32);
      if (e != cudaSuccess) atomicCAS(&g_upd_err, 0, (int)e);
    }
    __syncwarp();
  }
}

/* ---------------------------------------------------------------- host side */

static double median(double *v) {
  qsort(v, REPS, sizeof(double), cmp);
  return v[REPS / 2];
}

enum { S_NODE, S_WHOLE, S_DEV, S_DEVAPPLY, S_NODEDEV, S_GRAPH, S_DGRAPH, S_EAGER, NSTRAT };
static const char *sname[NSTRAT] = {"per-node", "whole-graph", "dev-updater(set)", "dev-updater(apply)",
                                    "node@dev", "graph", "dev graph", "eager"};
enum { T_GRAPH, T_DEV, T_EAGER }; /* whose arguments a strategy changes */
static int target(int st) {
  return st == S_NODE || st == S_WHOLE || st == S_GRAPH ? T_GRAPH : st == S_EAGER ? T_EAGER : T_DEV;
}

typedef struct {
  int b[MAXN];                /* buffer the node's pointer names */
  unsigned long long off[MAXN]; /* its 64-bit offset */
} Model;

typedef struct {
  CUgraphDeviceNode node;
  unsigned int offset, size;
  const void *src;
} Upd;

typedef struct {
  int big, n;
  const char *aname;
  CUfunction f;
  size_t o_ptr, o_off;            /* byte offsets of the changing words in the argument block */
  CUgraph g, dg;                  /* the graph, the graph of device-updatable nodes */
  CUgraphExec e, de;              /* de is NULL where the driver refused device-updatable nodes */
  CUgraphNode node[MAXN], dnode[MAXN];
  CUgraphDeviceNode devnode[MAXN];
  CUDA_KERNEL_NODE_PARAMS kp[MAXN]; /* kernelParams points at the node's argument storage */
  unsigned long long sp[MAXN];      /* argument storage: what the host passed last for the node */
  int sid[MAXN];
  unsigned long long soff[MAXN];
  void *sargs[MAXN][3];
  Big *bg;
  void *bargs[MAXN][1];
  unsigned long long hconst[MAXN]; /* large: hash of the words that never change */
  Model mg, md, me;                /* arguments the graph, the dev graph, eager launches have now */
  int reverts;                     /* a host patch of one dev node undid device updates of others */
} Ctx;

static CUstream s, cs; /* launch stream, capture stream: both non-blocking */
static unsigned long long *dbuf, *d_sum, *hlog;
static int *d_upd_err;
static CUfunction f_small, f_big;
static cudaEvent_t ev0, ev1;
static unsigned int g_it = 1; /* iteration number, never reused: every offset is new */
static int g_iters = 2000, g_upd_limit = 1 << 30, g_fail;
static char g_err[256], refused[NSTRAT][256];
static int wrong[NSTRAT]; /* a checked loop of the strategy saw wrong arguments */

static unsigned long long *bufp(int b) { return dbuf + (size_t)b * MAXN; }
static Model *model(Ctx *c, int t) { return t == T_GRAPH ? &c->mg : t == T_DEV ? &c->md : &c->me; }

static int fail_drv(CUresult r, const char *what) {
  const char *n = "?";
  cuGetErrorName(r, &n);
  snprintf(g_err, sizeof g_err, "%s: %s", what, n);
  return 1;
}
#define TRY(x, what)                                                                               \
  do {                                                                                             \
    CUresult r_ = (x);                                                                             \
    if (r_ != CUDA_SUCCESS) return fail_drv(r_, what);                                             \
  } while (0)

static unsigned long long expect_h(const Ctx *c, int v, int b, unsigned long long off) {
  unsigned long long p = (unsigned long long)bufp(b);
  if (!c->big) return mix(0, p) ^ mix(1, (unsigned int)v) ^ mix(2, off);
  return c->hconst[v] ^ mix(W_PTR, p) ^ mix(W_OFF, off);
}

/* fills node v's argument storage (what kp[v].kernelParams points at) */
static void fill_args(Ctx *c, int v, int b, unsigned long long off) {
  if (c->big) {
    c->bg[v].w[W_PTR] = (unsigned long long)bufp(b);
    c->bg[v].w[W_OFF] = off;
  } else {
    c->sp[v] = (unsigned long long)bufp(b);
    c->soff[v] = off;
  }
}
static void **args_of(Ctx *c, int v) { return c->big ? c->bargs[v] : c->sargs[v]; }

/* the k nodes that change in iteration it (a rotating set) and their new arguments */
static int plan(unsigned int it, int k, int n, int *nodes) {
  if (k <= 0) return 0;
  if (k > n) k = n;
  int stride = n / k, start = (int)((it * 5u) % (unsigned int)n);
  for (int j = 0; j < k; j++) nodes[j] = (start + j * stride) % n;
  return k;
}
static int new_b(unsigned int it, int v) { return (int)((it * 3u + (unsigned int)v) % NBUF); }
static unsigned long long new_off(unsigned int it, int v) {
  return 0x5eed000000000000ull | ((unsigned long long)it << 8) | (unsigned int)v;
}
/* node v's arguments in iteration it, into model m */
static void model_set(Model *m, unsigned int it, int v) {
  m->b[v] = new_b(it, v);
  m->off[v] = new_off(it, v);
}

/* ---- device-side updates: pack (node, offset, size, bytes) into batches passed by value */

template <int CAP, int APPLY> static int send_updates(const Upd *u, int n) {
  static UpdBatch<CAP> b;
  static CUfunction f;
  if (!f) CK(cudaGetFuncBySymbol((cudaFunction_t *)&f, (const void *)k_updater<CAP, APPLY>));
  int i = 0;
  do {
    b.count = b.words = 0;
    while (i < n && (int)b.count < g_upd_limit && b.count < CAP) {
      unsigned int w = (u[i].size + 7) / 8;
      if (b.words + w > CAP) break;
      b.node[b.count] = (unsigned long long)u[i].node;
      b.offset[b.count] = u[i].offset;
      b.size[b.count] = (unsigned short)u[i].size;
      b.at[b.count] = (unsigned short)b.words;
      memcpy(&b.data[b.words], u[i].src, u[i].size);
      b.words += w;
      b.count++;
      i++;
    }
    if (b.count == 0 && i < n) {
      snprintf(g_err, sizeof g_err, "an update of %u bytes does not fit one updater launch", u[i].size);
      return 1;
    }
    void *args[1] = {&b}; /* the driver copies the parameters at launch: b is free again at once */
    TRY(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, args, NULL), "cuLaunchKernel(updater)");
  } while (i < n);
  return 0;
}

/* the smallest updater whose parameters hold n updates (n = 0: a launch that changes nothing) */
static int dev_updates(const Upd *u, int n, int apply) {
  if (n <= 8) return apply ? send_updates<8, 1>(u, n) : send_updates<8, 0>(u, n);
  if (n <= 64) return apply ? send_updates<64, 1>(u, n) : send_updates<64, 0>(u, n);
  if (n <= 256) return apply ? send_updates<256, 1>(u, n) : send_updates<256, 0>(u, n);
  return apply ? send_updates<UPD_MAXCAP, 1>(u, n) : send_updates<UPD_MAXCAP, 0>(u, n);
}

static int dev_patch(Ctx *c, unsigned int it, int k, int apply) {
  static Upd u[2 * MAXN];
  static unsigned long long ptrv[MAXN];
  int nodes[MAXN], n = plan(it, k, c->n, nodes);
  for (int j = 0; j < n; j++) {
    int v = nodes[j];
    model_set(&c->md, it, v);
    ptrv[v] = (unsigned long long)bufp(c->md.b[v]);
    u[2 * j] = Upd{c->devnode[v], (unsigned int)c->o_ptr, 8, &ptrv[v]};
    u[2 * j + 1] = Upd{c->devnode[v], (unsigned int)c->o_off, 8, &c->md.off[v]};
  }
  return n ? dev_updates(u, 2 * n, apply) : 0;
}

/* one iteration of a strategy: patch the k nodes of plan(it), launch. 0, or 1 with g_err set */
static int step(Ctx *c, int st, unsigned int it, int k) {
  int nodes[MAXN], n = plan(it, k, c->n, nodes);
  switch (st) {
  case S_NODE:
  case S_NODEDEV: {
    Model *m = st == S_NODE ? &c->mg : &c->md;
    CUgraphExec e = st == S_NODE ? c->e : c->de;
    const CUgraphNode *gn = st == S_NODE ? c->node : c->dnode;
    for (int j = 0; j < n; j++) {
      int v = nodes[j];
      model_set(m, it, v);
      fill_args(c, v, m->b[v], m->off[v]);
      TRY(cuGraphExecKernelNodeSetParams(e, gn[v], &c->kp[v]), "cuGraphExecKernelNodeSetParams");
    }
    TRY(cuGraphLaunch(e, s), "cuGraphLaunch");
    return 0;
  }
  case S_WHOLE: {
    for (int j = 0; j < n; j++) {
      int v = nodes[j];
      model_set(&c->mg, it, v);
      fill_args(c, v, c->mg.b[v], c->mg.off[v]);
      TRY(cuGraphKernelNodeSetParams(c->node[v], &c->kp[v]), "cuGraphKernelNodeSetParams");
    }
    CUgraphExecUpdateResultInfo info;
    CUresult r = cuGraphExecUpdate(c->e, c->g, &info);
    if (r != CUDA_SUCCESS || info.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
      fail_drv(r, "cuGraphExecUpdate");
      snprintf(g_err + strlen(g_err), sizeof g_err - strlen(g_err), " (update result %d)", (int)info.result);
      return 1;
    }
    TRY(cuGraphLaunch(c->e, s), "cuGraphLaunch");
    return 0;
  }
  case S_DEV:
  case S_DEVAPPLY:
    if (dev_patch(c, it, k, st == S_DEVAPPLY)) return 1;
    TRY(cuGraphLaunch(c->de, s), "cuGraphLaunch");
    return 0;
  case S_GRAPH:
    TRY(cuGraphLaunch(c->e, s), "cuGraphLaunch");
    return 0;
  case S_DGRAPH:
    TRY(cuGraphLaunch(c->de, s), "cuGraphLaunch");
    return 0;
  case S_EAGER: {
    for (int j = 0; j < n; j++) {
      int v = nodes[j];
      model_set(&c->me, it, v);
    }
    for (int v = 0; v < c->n; v++) {
      if (c->big) {
        fill_args(c, v, c->me.b[v], c->me.off[v]);
        k_big<<<1, 32, 0, (cudaStream_t)s>>>(c->bg[v]);
      } else {
        k_small<<<1, 32, 0, (cudaStream_t)s>>>(bufp(c->me.b[v]), v, c->me.off[v]);
      }
    }
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
      snprintf(g_err, sizeof g_err, "eager launch: %s", cudaGetErrorName(e));
      return 1;
    }
    return 0;
  }
  }
  return 0;
}

/* the host's copy of every node (graph: exec and source graph; dev graph: exec) set to the model */
static int host_sync(Ctx *c, int t) {
  for (int v = 0; v < c->n; v++) {
    Model *m = model(c, t);
    fill_args(c, v, m->b[v], m->off[v]);
    if (t == T_GRAPH) {
      TRY(cuGraphKernelNodeSetParams(c->node[v], &c->kp[v]), "cuGraphKernelNodeSetParams");
      TRY(cuGraphExecKernelNodeSetParams(c->e, c->node[v], &c->kp[v]), "cuGraphExecKernelNodeSetParams");
    } else if (t == T_DEV && c->de) {
      TRY(cuGraphExecKernelNodeSetParams(c->de, c->dnode[v], &c->kp[v]), "cuGraphExecKernelNodeSetParams");
    }
  }
  return 0;
}

/* a device runtime error an updater saw since the last call, as a refusal message; 0: none */
static int upd_error(void) {
  int e = 0;
  CK(cudaStreamSynchronize((cudaStream_t)s));
  CK(cudaMemcpy(&e, d_upd_err, sizeof e, cudaMemcpyDeviceToHost));
  if (!e) return 0;
  CK(cudaMemsetAsync(d_upd_err, 0, sizeof e, (cudaStream_t)s));
  CK(cudaStreamSynchronize((cudaStream_t)s));
  snprintf(g_err, sizeof g_err, "device runtime, in the updater: %s", cudaGetErrorName((cudaError_t)e));
  return 1;
}

static void refuse(Ctx *c, int st) {
  if (!refused[st][0]) {
    snprintf(refused[st], sizeof refused[st], "%s", g_err);
    printf("refused: %s (%s N=%d): %s\n", sname[st], c->aname, c->n, g_err);
  }
  CK(cudaStreamSynchronize((cudaStream_t)s));
  if (host_sync(c, target(st))) { /* the model is the truth again: the next strategies start clean */
    fprintf(stderr, "patch_costs: cannot restore the graph after a refusal: %s\n", g_err);
    exit(1);
  }
}

/* ---- tallies: what g_sum must hold after a run of iterations, replayed on the host */

typedef struct {
  int t;
  Model m;
  unsigned long long exp[MAXN];
} Tally;

static void tally_begin(Tally *y, Ctx *c, int t) {
  y->t = t;
  y->m = *model(c, t);
  memset(y->exp, 0, sizeof y->exp);
  CK(cudaMemsetAsync(d_sum, 0, MAXN * sizeof(unsigned long long), (cudaStream_t)s));
  CK(cudaStreamSynchronize((cudaStream_t)s));
}

static void tally_run(Tally *y, const Ctx *c, unsigned int it0, int iters, int k, int launched) {
  int nodes[MAXN];
  for (int i = 0; i < iters; i++) {
    int n = plan(it0 + i, k, c->n, nodes);
    for (int j = 0; j < n; j++) {
      model_set(&y->m, it0 + i, nodes[j]);
    }
    if (launched)
      for (int v = 0; v < c->n; v++) y->exp[v] += expect_h(c, v, y->m.b[v], y->m.off[v]);
  }
}

/* 0 if every launch since tally_begin saw the arguments it should have */
static int tally_end(Tally *y, Ctx *c, const char *what, int k) {
  unsigned long long got[MAXN];
  CK(cudaStreamSynchronize((cudaStream_t)s));
  CK(cudaMemcpy(got, d_sum, sizeof got, cudaMemcpyDeviceToHost));
  if (memcmp(&y->m, model(c, y->t), sizeof(Model))) {
    fprintf(stderr, "patch_costs: internal: model replay differs (%s)\n", what);
    exit(1);
  }
  for (int v = 0; v < c->n; v++)
    if (got[v] != y->exp[v]) {
      printf("MISMATCH %s (%s N=%d k=%d): the sum of node %d's results over the timed launches is %016llx, "
             "want %016llx: some launch saw wrong arguments\n",
             what, c->aname, c->n, k, v, got[v], y->exp[v]);
      g_fail++;
      return 1;
    }
  return 0;
}

/* ---- timed cells */

static double timed(Ctx *c, int st, int k, int sync_every, int iters, Tally *y) {
  CK(cudaStreamSynchronize((cudaStream_t)s));
  unsigned int it0 = g_it;
  double t0 = ag_now_ms();
  for (int i = 0; i < iters; i++) {
    if (step(c, st, it0 + i, k)) {
      g_it += iters;
      return -1;
    }
    if ((i + 1) % sync_every == 0) {
      CUresult r = cuStreamSynchronize(s);
      if (r != CUDA_SUCCESS) {
        fail_drv(r, "cuStreamSynchronize");
        g_it += iters;
        return -1;
      }
    }
  }
  double us = (ag_now_ms() - t0) * 1e3 / iters;
  g_it += iters;
  tally_run(y, c, it0, iters, k, 1);
  return us;
}

#define V_REFUSED -1.0
#define V_WRONG -2.0

/* host us per iteration of strategy st, median of 5; or V_REFUSED / V_WRONG */
static double cell(Ctx *c, int st, int k, int sync_every) {
  if (refused[st][0]) return V_REFUSED;
  if (host_sync(c, target(st))) {
    refuse(c, st);
    return V_REFUSED;
  }
  Tally y;
  tally_begin(&y, c, target(st));
  double r[REPS], est = timed(c, st, k, sync_every, 2 * WIN, &y); /* warm-up, sizes the reps */
  int n = g_iters;
  if (est > 0) {
    double budget_us = sync_every == 1 ? 20e3 : 40e3;
    if (n * est > budget_us) n = (int)(budget_us / est) / WIN * WIN;
    if (n < 4 * WIN) n = 4 * WIN;
  }
  for (int rep = 0; rep < REPS && est >= 0; rep++) est = r[rep] = timed(c, st, k, sync_every, n, &y);
  if (est < 0 || ((st == S_DEV || st == S_DEVAPPLY) && upd_error())) {
    refuse(c, st);
    return V_REFUSED;
  }
  char what[64];
  snprintf(what, sizeof what, "%s s%d", sname[st], sync_every);
  if (tally_end(&y, c, what, k)) {
    wrong[st] = 1;
    return V_WRONG;
  }
  return median(r);
}

/* ---- GPU time: R launches queued behind a spin kernel, between two events */

enum { G_GRAPH, G_DGRAPH, G_UPD, G_UPDAPPLY, G_DUPD, G_DUPDAPPLY };

static double gpu_time(Ctx *c, int what, int k, int *gap) {
  const int R = 200;
  const unsigned long long hold_ns = 10000000ull;
  int st = what == G_GRAPH    ? S_GRAPH
           : what == G_DGRAPH ? S_DGRAPH
           : what == G_UPDAPPLY || what == G_DUPDAPPLY ? S_DEVAPPLY
                                                       : S_DEV;
  if (refused[st][0]) return V_REFUSED;
  int kk = what == G_GRAPH || what == G_DGRAPH ? 0 : k;
  double r[REPS];
  Tally y;
  tally_begin(&y, c, target(st));
  *gap = 0;
  for (int rep = 0; rep < REPS; rep++) {
    CK(cudaStreamSynchronize((cudaStream_t)s));
    k_spin<<<1, 1, 0, (cudaStream_t)s>>>(hold_ns);
    CK(cudaEventRecord(ev0, (cudaStream_t)s));
    unsigned int it0 = g_it;
    double h0 = ag_now_ms();
    for (int i = 0; i < R; i++) {
      int bad = what == G_UPD || what == G_UPDAPPLY ? dev_patch(c, it0 + i, kk, what == G_UPDAPPLY)
                                                    : step(c, st, it0 + i, kk);
      if (bad) {
        g_it += R;
        refuse(c, st);
        return V_REFUSED;
      }
    }
    double h1 = ag_now_ms();
    CK(cudaEventRecord(ev1, (cudaStream_t)s));
    CK(cudaEventSynchronize(ev1));
    float ms;
    CK(cudaEventElapsedTime(&ms, ev0, ev1));
    r[rep] = ms * 1e3 / R;
    if (h1 - h0 > 0.7 * hold_ns / 1e6) *gap = 1; /* the GPU may have waited for the host */
    g_it += R;
    tally_run(&y, c, it0, R, kk, what != G_UPD && what != G_UPDAPPLY);
  }
  if ((st == S_DEV || st == S_DEVAPPLY) && upd_error()) {
    refuse(c, st);
    return V_REFUSED;
  }
  if (tally_end(&y, c, "GPU-time loop", kk)) return V_WRONG;
  return median(r);
}

/* ---- checked loops: each iteration clears the buffers, patches, launches and copies the buffers back;
 * after every 16 the host compares every slot of every buffer with what that iteration's arguments say */

static int checked(Ctx *c, int st, int k, int windows, int resync) {
  static int eb[WIN][MAXN];
  static unsigned long long eh[WIN][MAXN];
  const size_t bytes = (size_t)NBUF * MAXN * sizeof(unsigned long long);
  if (refused[st][0]) return 0;
  if (resync && host_sync(c, target(st))) {
    refuse(c, st);
    return 0;
  }
  Model *m = model(c, target(st));
  for (int w = 0; w < windows; w++) {
    unsigned int it0 = g_it;
    for (int j = 0; j < WIN; j++) {
      CK(cudaMemsetAsync(dbuf, 0, bytes, (cudaStream_t)s));
      if (step(c, st, g_it++, k)) {
        refuse(c, st);
        return 0;
      }
      CK(cudaMemcpyAsync(hlog + (size_t)j * NBUF * MAXN, dbuf, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)s));
      for (int v = 0; v < c->n; v++) {
        eb[j][v] = m->b[v];
        eh[j][v] = expect_h(c, v, m->b[v], m->off[v]);
      }
    }
    CK(cudaStreamSynchronize((cudaStream_t)s));
    if ((st == S_DEV || st == S_DEVAPPLY) && upd_error()) {
      refuse(c, st);
      return 0;
    }
    int bad = 0;
    for (int j = 0; j < WIN; j++)
      for (int v = 0; v < c->n; v++)
        for (int b = 0; b < NBUF; b++) {
          unsigned long long got = hlog[((size_t)j * NBUF + b) * MAXN + v];
          unsigned long long want = b == eb[j][v] ? eh[j][v] : 0;
          if (got == want) continue;
          const char *why = "garbage";
          if (b != eb[j][v]) why = "written through a pointer this launch should not have had";
          else if (!got) why = "nothing written where this launch's pointer points";
          else if (j && got == eh[j - 1][v]) why = "the previous iteration's arguments";
          printf("MISMATCH %s (%s N=%d k=%d), iteration %u, node %d, buffer %d: got %016llx want %016llx (%s)\n",
                 sname[st], c->aname, c->n, k, it0 + j, v, b, got, want, why);
          if (++bad == 5) goto out;
        }
  out:
    if (bad) {
      g_fail++;
      wrong[st] = 1;
      if (host_sync(c, target(st))) exit(1);
      return 1;
    }
  }
  return 0;
}

/* ---- building the graphs */

static int capture(Ctx *c, int dev, CUgraph *g, CUgraphNode *nodes) {
  TRY(cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_RELAXED), "cuStreamBeginCapture");
  Model *m = dev ? &c->md : &c->mg;
  for (int v = 0; v < c->n; v++) {
    CUlaunchAttribute at;
    memset(&at, 0, sizeof at);
    at.id = CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE;
    at.value.deviceUpdatableKernelNode.deviceUpdatable = 1;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 32, cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = cs;
    cfg.attrs = dev ? &at : NULL;
    cfg.numAttrs = dev ? 1 : 0;
    fill_args(c, v, m->b[v], m->off[v]);
    CUresult r = cuLaunchKernelEx(&cfg, c->f, args_of(c, v), NULL);
    CUstreamCaptureStatus cst;
    const CUgraphNode *deps = NULL;
    size_t nd = 0;
    if (r == CUDA_SUCCESS) r = cuStreamGetCaptureInfo(cs, &cst, NULL, NULL, &deps, NULL, &nd);
    if (r == CUDA_SUCCESS && nd != 1) r = CUDA_ERROR_UNKNOWN;
    if (r == CUDA_SUCCESS && dev && !at.value.deviceUpdatableKernelNode.devNode) r = CUDA_ERROR_NOT_SUPPORTED;
    if (r != CUDA_SUCCESS) {
      CUgraph dead = NULL;
      cuStreamEndCapture(cs, &dead);
      if (dead) cuGraphDestroy(dead);
      return fail_drv(r, dev ? "capture with CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE" : "capture");
    }
    nodes[v] = deps[0];
    if (dev) c->devnode[v] = at.value.deviceUpdatableKernelNode.devNode; /* written back by the launch */
  }
  TRY(cuStreamEndCapture(cs, g), "cuStreamEndCapture");
  return 0;
}

static void build(Ctx *c, int big, int n) {
  memset(c, 0, sizeof *c);
  c->big = big, c->n = n, c->aname = big ? "large" : "small";
  c->f = big ? f_big : f_small;
  size_t o, sz;
  CKD(cuFuncGetParamInfo(c->f, 0, &o, &sz));
  if (big) {
    if (sz != sizeof(Big)) fprintf(stderr, "patch_costs: k_big takes %zu bytes, want %zu\n", sz, sizeof(Big)), exit(1);
    c->o_ptr = o + W_PTR * 8, c->o_off = o + W_OFF * 8;
  } else {
    c->o_ptr = o;
    CKD(cuFuncGetParamInfo(c->f, 2, &c->o_off, &sz));
  }
  c->bg = (Big *)calloc(MAXN, sizeof(Big));
  for (int v = 0; v < n; v++) {
    c->sid[v] = v;
    c->sargs[v][0] = &c->sp[v], c->sargs[v][1] = &c->sid[v], c->sargs[v][2] = &c->soff[v];
    c->bargs[v][0] = &c->bg[v];
    c->hconst[v] = 0;
    for (int i = 0; i < BIG_WORDS; i++) {
      c->bg[v].w[i] = i == W_NODE ? (unsigned long long)v : mix(1000 + i, v);
      if (i != W_PTR && i != W_OFF) c->hconst[v] ^= mix(i, c->bg[v].w[i]);
    }
    c->mg.b[v] = c->md.b[v] = c->me.b[v] = v % NBUF;
    c->mg.off[v] = c->md.off[v] = c->me.off[v] = 0x1111000000000000ull | (unsigned int)v;
  }
  if (capture(c, 0, &c->g, c->node)) fprintf(stderr, "patch_costs: %s\n", g_err), exit(1);
  CKD(cuGraphInstantiate(&c->e, c->g, 0));
  CKD(cuGraphUpload(c->e, s));
  for (int v = 0; v < n; v++) {
    CKD(cuGraphKernelNodeGetParams(c->node[v], &c->kp[v]));
    c->kp[v].kernelParams = args_of(c, v);
    c->kp[v].extra = NULL;
  }
  if (!capture(c, 1, &c->dg, c->dnode)) {
    CUresult r = cuGraphInstantiate(&c->de, c->dg, 0);
    if (r == CUDA_SUCCESS) r = cuGraphUpload(c->de, s);
    if (r != CUDA_SUCCESS) {
      fail_drv(r, "cuGraphInstantiate/cuGraphUpload of the device-updatable graph");
      c->de = NULL;
    }
  }
  if (!c->de) {
    for (int st = 0; st < NSTRAT; st++)
      if (target(st) == T_DEV && !refused[st][0]) snprintf(refused[st], sizeof refused[st], "%s", g_err);
    printf("refused: device-updatable nodes (%s N=%d): %s\n", c->aname, n, g_err);
  }
  CKD(cuStreamSynchronize(s));
}

static void destroy(Ctx *c) {
  CKD(cuStreamSynchronize(s));
  CKD(cuGraphExecDestroy(c->e));
  CKD(cuGraphDestroy(c->g));
  if (c->de) CKD(cuGraphExecDestroy(c->de));
  if (c->dg) CKD(cuGraphDestroy(c->dg));
  free(c->bg);
}

/* ---- findings: device-side updates against host-side ones, on the device-updatable graph */

typedef struct {
  char label;
  int b;
  unsigned long long off0; /* node v has offset off0 + v */
} State;

static State st_mk(char label, int b) {
  State x = {label, b, (unsigned long long)label << 40};
  return x;
}

static void host_set(Ctx *c, int v, State x) {
  c->md.b[v] = x.b, c->md.off[v] = x.off0 + v;
  fill_args(c, v, x.b, x.off0 + v);
  CKD(cuGraphExecKernelNodeSetParams(c->de, c->dnode[v], &c->kp[v]));
}

static void dev_set_all(Ctx *c, State x) {
  static Upd u[2 * MAXN];
  static unsigned long long ptrv;
  ptrv = (unsigned long long)bufp(x.b);
  for (int v = 0; v < c->n; v++) {
    c->md.b[v] = x.b, c->md.off[v] = x.off0 + v;
    u[2 * v] = Upd{c->devnode[v], (unsigned int)c->o_ptr, 8, &ptrv};
    u[2 * v + 1] = Upd{c->devnode[v], (unsigned int)c->o_off, 8, &c->md.off[v]};
  }
  if (dev_updates(u, 2 * c->n, 0)) fprintf(stderr, "patch_costs: updater: %s\n", g_err), exit(1);
}

static void launch_read(Ctx *c) {
  const size_t bytes = (size_t)NBUF * MAXN * sizeof(unsigned long long);
  CK(cudaMemsetAsync(dbuf, 0, bytes, (cudaStream_t)s));
  CKD(cuGraphLaunch(c->de, s));
  CK(cudaMemcpyAsync(hlog, dbuf, bytes, cudaMemcpyDeviceToHost, (cudaStream_t)s));
  CK(cudaStreamSynchronize((cudaStream_t)s));
}

/* which of the states node v's launch saw, '?' if none */
static char seen(const Ctx *c, int v, const State *x, int nx) {
  for (int i = 0; i < nx; i++)
    if (hlog[(size_t)x[i].b * MAXN + v] == expect_h(c, v, x[i].b, x[i].off0 + v)) return x[i].label;
  return '?';
}

/* "B:31" / "A:16 B:15": what nodes from..n-1 saw, in out; the count of the last state in *n_of */
static const char *census(const Ctx *c, int from, const State *x, int nx, int *n_of, char *out, size_t size) {
  int cnt[16] = {0}, other = 0;
  for (int v = from; v < c->n; v++) {
    char l = seen(c, v, x, nx);
    int i = 0;
    while (i < nx && x[i].label != l) i++;
    if (i < nx) cnt[i]++;
    else other++;
  }
  out[0] = 0;
  for (int i = 0; i < nx; i++)
    if (cnt[i]) snprintf(out + strlen(out), size - strlen(out), "%c:%d ", x[i].label, cnt[i]);
  if (other) snprintf(out + strlen(out), size - strlen(out), "?:%d ", other);
  if (n_of) *n_of = cnt[nx - 1];
  return out;
}

static void dev_findings(Ctx *c) {
  if (!c->de) return;
  char tag[32], buf[128];
  snprintf(tag, sizeof tag, "[%s N=%d]", c->aname, c->n);
  Model save = c->md;
  int n = c->n, cnt, bad;
  CUkernelNodeAttrValue av;
  memset(&av, 0, sizeof av);
  CUresult ra = cuGraphKernelNodeGetAttribute(c->dnode[0], CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &av);
  const char *ran = "?";
  cuGetErrorName(ra, &ran);
  printf("finding: %s cuGraphKernelNodeGetAttribute(DEVICE_UPDATABLE_KERNEL_NODE) on a node captured with the "
         "attribute: %s, deviceUpdatable=%d, devNode %s the one cuLaunchKernelEx wrote back\n",
         tag, ran, av.deviceUpdatableKernelNode.deviceUpdatable,
         av.deviceUpdatableKernelNode.devNode == c->devnode[0] ? "is" : "is NOT");
  State x[8] = {st_mk('A', 0), st_mk('B', 1), st_mk('C', 2), st_mk('D', 3),
                st_mk('E', 0), st_mk('F', 1), st_mk('G', 2), st_mk('H', 3)};
  int upd0 = g_upd_limit;
  g_upd_limit = 1 << 30;
  CK(cudaStreamSynchronize((cudaStream_t)s));

  for (int v = 0; v < n; v++) host_set(c, v, x[0]);
  launch_read(c);
  census(c, 0, x, 1, &cnt, buf, sizeof buf);
  if (cnt != n) printf("MISMATCH %s host-set state A seen by %d/%d nodes\n", tag, cnt, n), g_fail++;

  dev_set_all(c, x[1]);
  launch_read(c);
  census(c, 0, x, 2, &cnt, buf, sizeof buf);
  printf("finding: %s updater just before cuGraphLaunch: that launch saw the device updates on %d/%d nodes\n",
         tag, cnt, n);
  if (cnt != n) printf("MISMATCH %s device updates missing from the next launch: %s\n", tag, buf), g_fail++;

  launch_read(c);
  census(c, 0, x, 2, &cnt, buf, sizeof buf);
  printf("finding: %s next launch without updates: device-side values kept on %d/%d nodes\n", tag, cnt, n);
  if (cnt != n) printf("MISMATCH %s device updates lost after one launch: %s\n", tag, buf), g_fail++;

  host_set(c, 0, x[2]); /* strategy switch: one host patch after device-side updates */
  launch_read(c);
  char l0 = seen(c, 0, x, 3);
  census(c, 1, x, 2, &cnt, buf, sizeof buf);
  c->reverts = cnt != n - 1;
  census(c, 1, x, 3, NULL, buf, sizeof buf);
  printf("finding: %s host cuGraphExecKernelNodeSetParams on node 0 after device updates: node 0 saw %c "
         "(C = the host value); nodes 1..%d saw %s(B = device value kept, A = reverted to the last host value) "
         "=> %s\n",
         tag, l0, n - 1, buf,
         c->reverts ? "the host patch of one node UNDOES device-side updates of other nodes"
                    : "only the patched node loses its device-side updates");
  if (l0 != 'C') printf("MISMATCH %s the host patch of node 0 did not take effect\n", tag), g_fail++;

  dev_set_all(c, x[3]); /* explicit upload after device updates, no host change */
  CKD(cuGraphUpload(c->de, s));
  launch_read(c);
  census(c, 0, x, 4, NULL, buf, sizeof buf);
  printf("finding: %s cuGraphUpload after device updates, no host change: nodes saw %s(D = device value)\n", tag,
         buf);

  /* host patch of node 1 while an updater that sets every node to E still waits in the stream */
  if (host_sync(c, T_DEV)) fprintf(stderr, "patch_costs: %s\n", g_err), exit(1);
  CK(cudaStreamSynchronize((cudaStream_t)s));
  k_spin<<<1, 1, 0, (cudaStream_t)s>>>(20000000ull);
  dev_set_all(c, x[4]);
  fill_args(c, 1, x[5].b, x[5].off0 + 1);
  double t0 = ag_now_ms();
  CKD(cuGraphExecKernelNodeSetParams(c->de, c->dnode[1], &c->kp[1]));
  double waited = ag_now_ms() - t0;
  launch_read(c);
  char l1 = seen(c, 1, x, 6);
  census(c, 0, x, 6, NULL, buf, sizeof buf);
  printf("finding: %s host patch of node 1 while an updater is still queued (docs: undefined if concurrent; "
         "the host call took %.1f ms of a 20 ms hold): node 1 saw %c (F = host, E = device); all nodes saw %s\n",
         tag, waited, l1, buf);

  dev_set_all(c, x[6]);
  launch_read(c);
  census(c, 0, x, 7, &cnt, buf, sizeof buf);
  printf("finding: %s device updates after host patches: applied on %d/%d nodes\n", tag, cnt, n);
  if (cnt != n) printf("MISMATCH %s device updates no longer apply after host patches: %s\n", tag, buf), g_fail++;

  CUgraphExecUpdateResultInfo info;
  memset(&info, 0, sizeof info);
  CUresult r = cuGraphExecUpdate(c->de, c->dg, &info);
  const char *rn = "?";
  cuGetErrorName(r, &rn);
  printf("finding: %s cuGraphExecUpdate on the device-updatable graph: %s (update result %d)\n", tag, rn,
         (int)info.result);

  c->md = save; /* back to the model: host copies of every node, then one launch to check */
  CK(cudaStreamSynchronize((cudaStream_t)s));
  if (host_sync(c, T_DEV)) fprintf(stderr, "patch_costs: %s\n", g_err), exit(1);
  launch_read(c);
  bad = 0;
  for (int v = 0; v < n; v++) {
    State m = {'M', c->md.b[v], c->md.off[v] - v};
    if (seen(c, v, &m, 1) != 'M') bad++;
  }
  if (bad) printf("MISMATCH %s %d nodes not restored by host patches\n", tag, bad), g_fail++;
  g_upd_limit = upd0;
}

/* can a node captured without the attribute be made device-updatable afterwards, and where is its handle? */
static void attr_findings(void) {
  Ctx *c = (Ctx *)calloc(1, sizeof(Ctx));
  c->n = 1, c->aname = "small", c->f = f_small;
  c->sargs[0][0] = &c->sp[0], c->sargs[0][1] = &c->sid[0], c->sargs[0][2] = &c->soff[0];
  c->mg.b[0] = 0, c->mg.off[0] = 7;
  size_t sz;
  CKD(cuFuncGetParamInfo(f_small, 0, &c->o_ptr, &sz));
  CKD(cuFuncGetParamInfo(f_small, 2, &c->o_off, &sz));
  if (capture(c, 0, &c->g, c->node)) fprintf(stderr, "patch_costs: %s\n", g_err), exit(1);
  CUkernelNodeAttrValue v;
  memset(&v, 0, sizeof v);
  v.deviceUpdatableKernelNode.deviceUpdatable = 1;
  CUresult r1 = cuGraphKernelNodeSetAttribute(c->node[0], CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &v);
  memset(&v, 0, sizeof v);
  CUresult r2 = cuGraphKernelNodeGetAttribute(c->node[0], CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &v);
  const char *n1 = "?", *n2 = "?";
  cuGetErrorName(r1, &n1);
  cuGetErrorName(r2, &n2);
  printf("finding: cuGraphKernelNodeSetAttribute(DEVICE_UPDATABLE_KERNEL_NODE=1) on a captured node: %s; "
         "GetAttribute: %s, deviceUpdatable=%d devNode=%p\n",
         n1, n2, v.deviceUpdatableKernelNode.deviceUpdatable, (void *)v.deviceUpdatableKernelNode.devNode);
  if (r1 == CUDA_SUCCESS && r2 == CUDA_SUCCESS && v.deviceUpdatableKernelNode.devNode) {
    CUgraphExec e;
    CUresult r = cuGraphInstantiate(&e, c->g, 0);
    const char *what = "instantiate";
    if (r == CUDA_SUCCESS) {
      unsigned long long off = 0xabcdef12345ull;
      Upd u = {v.deviceUpdatableKernelNode.devNode, (unsigned int)c->o_off, 8, &off};
      CK(cudaMemsetAsync(dbuf, 0, (size_t)NBUF * MAXN * sizeof(unsigned long long), (cudaStream_t)s));
      if (dev_updates(&u, 1, 0)) fprintf(stderr, "patch_costs: %s\n", g_err), exit(1);
      r = cuGraphLaunch(e, s);
      what = "launch";
      CKD(cuStreamSynchronize(s));
      unsigned long long got = 0;
      CK(cudaMemcpy(&got, dbuf, sizeof got, cudaMemcpyDeviceToHost));
      int de = upd_error();
      if (r == CUDA_SUCCESS)
        printf("finding: ... that node's handle, used by an updater kernel: the next launch saw %s%s%s\n",
               got == expect_h(c, 0, 0, off)   ? "the device update"
               : got == expect_h(c, 0, 0, 7) ? "the old value"
                                              : "garbage",
               de ? "; " : "", de ? g_err : "");
      cuGraphExecDestroy(e);
    }
    if (r != CUDA_SUCCESS) {
      const char *n = "?";
      cuGetErrorName(r, &n);
      printf("finding: ... %s of that graph: %s\n", what, n);
    }
  }
  CKD(cuGraphDestroy(c->g));
  free(c);
}

/* host us per updater launch that changes nothing, by the size of its parameters */
static double upd_launch_cost(int cap) {
  double r[REPS];
  for (int rep = 0; rep < REPS; rep++) {
    CKD(cuStreamSynchronize(s));
    double t0 = ag_now_ms();
    for (int i = 0; i < g_iters; i++) {
      int bad = cap == 8 ? send_updates<8, 0>(NULL, 0)
                : cap == 64 ? send_updates<64, 0>(NULL, 0)
                : cap == 256 ? send_updates<256, 0>(NULL, 0)
                             : send_updates<UPD_MAXCAP, 0>(NULL, 0);
      if (bad) return V_REFUSED;
      if ((i + 1) % WIN == 0) CKD(cuStreamSynchronize(s));
    }
    r[rep] = (ag_now_ms() - t0) * 1e3 / g_iters;
  }
  return median(r);
}

/* ---------------------------------------------------------------- main */

#define NCOL 10 /* per-node s16 s1, whole s16 s1, dev s16 s1, node@dev s16, updater GPU set apply, upd+dev */
#define NBASE 8 /* graph s16 s1, dev graph s16 s1, eager s16 s1, GPU: graph, dev graph */
static const int ns[2] = {32, 128};
static double res[2][2][4][NCOL], base[2][2][NBASE], ucost[4];
static int gap[2][2][4][NCOL], bgap[2][2][NBASE];
static const int caps[4] = {8, 64, 256, UPD_MAXCAP};
static const size_t capbytes[4] = {sizeof(UpdBatch<8>), sizeof(UpdBatch<64>), sizeof(UpdBatch<256>),
                                   sizeof(UpdBatch<UPD_MAXCAP>)};

static void pr(double v, int flag) { /* 9 characters */
  if (v == V_REFUSED) printf(" refused ");
  else if (v == V_WRONG) printf("   WRONG ");
  else printf("%8.2f%c", v, flag ? '?' : ' ');
}

static int group_end(int col) { return col == 1 || col == 3 || col == 5 || col == 6 || col == 8 || col == 9; }

static void groups(const char *lead, const char **title, const int *width, int ng) {
  printf("%s|", lead);
  for (int i = 0; i < ng; i++) printf(" %-*s|", 9 * width[i] - 1, title[i]);
  printf("\n");
}

static void report(int devst) {
  char lead[32];
  printf("\nhost us per iteration (patch + launch), median of %d; s16: a sync every 16 iterations, s1: every "
         "iteration (included);\nupdater GPU: us per updater launch with 2k updates; upd+dev: GPU us per "
         "iteration of updater + dev graph%s\n",
         REPS, devst == S_DEVAPPLY ? "; dev-updater host columns use the UpdatesApply updater" : "");
  const char *t1[] = {"per-node", "whole-graph", "dev-updater", "node@dev", "updater GPU", "upd+dev"},
             *t2[] = {"s16", "s1", "s16", "s1", "s16", "s1", "s16", "set", "apply", "GPU"};
  const int w1[] = {2, 2, 2, 1, 2, 1};
  snprintf(lead, sizeof lead, "%-5s %4s %4s ", "args", "N", "k");
  groups(lead, t1, w1, 6);
  printf("%16s|", "");
  for (int col = 0; col < NCOL; col++) printf("%8s %s", t2[col], group_end(col) ? "|" : "");
  printf("\n");
  for (int big = 0; big < 2; big++)
    for (int ni = 0; ni < 2; ni++) {
      int n = ns[ni], ks[4] = {1, 8, n / 2, n};
      for (int ki = 0; ki < 4; ki++) {
        printf("%-5s %4d %4d |", big ? "large" : "small", n, ks[ki]);
        for (int col = 0; col < NCOL; col++) {
          pr(res[big][ni][ki][col], gap[big][ni][ki][col]);
          if (group_end(col)) printf("|");
        }
        printf("\n");
      }
    }
  printf("\nbaselines, no patch: host us per iteration, GPU us per graph launch\n");
  const char *b1[] = {"graph", "dev graph", "eager", "GPU"},
             *b2[] = {"s16", "s1", "s16", "s1", "s16", "s1", "graph", "dev"};
  const int bw[] = {2, 2, 2, 2};
  snprintf(lead, sizeof lead, "%-5s %4s ", "args", "N");
  groups(lead, b1, bw, 4);
  printf("%11s|", "");
  for (int col = 0; col < NBASE; col++) printf("%8s %s", b2[col], col % 2 ? "|" : "");
  printf("\n");
  for (int big = 0; big < 2; big++)
    for (int ni = 0; ni < 2; ni++) {
      printf("%-5s %4d |", big ? "large" : "small", ns[ni]);
      for (int col = 0; col < NBASE; col++) {
        pr(base[big][ni][col], bgap[big][ni][col]);
        if (col % 2) printf("|");
      }
      printf("\n");
    }
  printf("\nupdater launch that changes nothing, host us per launch (s16), by the size of its parameters:\n ");
  for (int i = 0; i < 4; i++) {
    printf(" %5zu B (%4d updates)", capbytes[i], caps[i]);
    pr(ucost[i], 0);
  }
  printf("\n'?': the host took long to queue the launches; the GPU may have waited for it\n");
  for (int st = 0; st < NSTRAT; st++)
    if (refused[st][0]) printf("refused: %s: %s\n", sname[st], refused[st]);
}

int main(int argc, char **argv) {
  if (argc > 1) g_iters = atoi(argv[1]);
  g_iters = (g_iters + WIN - 1) / WIN * WIN;
  if (g_iters < 4 * WIN) g_iters = 4 * WIN;
  CK(cudaSetDevice(0));
  CK(cudaFree(0));
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  int drv = 0;
  CKD(cuDriverGetVersion(&drv));
  printf("patch_costs: %s, driver API %d.%d, runtime %d.%d, %d iterations per cell at most\n", prop.name,
         drv / 1000, drv % 1000 / 10, CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10, g_iters);
  cudaStream_t rs;
  CK(cudaStreamCreateWithFlags(&rs, cudaStreamNonBlocking));
  s = (CUstream)rs;
  CK(cudaStreamCreateWithFlags(&rs, cudaStreamNonBlocking));
  cs = (CUstream)rs;
  CK(cudaMalloc(&dbuf, (size_t)NBUF * MAXN * sizeof(unsigned long long)));
  CK(cudaMemset(dbuf, 0, (size_t)NBUF * MAXN * sizeof(unsigned long long)));
  CK(cudaMallocHost(&hlog, (size_t)WIN * NBUF * MAXN * sizeof(unsigned long long)));
  CK(cudaGetSymbolAddress((void **)&d_sum, g_sum));
  CK(cudaGetSymbolAddress((void **)&d_upd_err, g_upd_err));
  CK(cudaDeviceSynchronize());
  CK(cudaGetFuncBySymbol((cudaFunction_t *)&f_small, (const void *)k_small));
  CK(cudaGetFuncBySymbol((cudaFunction_t *)&f_big, (const void *)k_big));
  CK(cudaEventCreate(&ev0));
  CK(cudaEventCreate(&ev1));
  double t_start = ag_now_ms();

  attr_findings();
  int devst = S_DEV;
  for (int big = 0; big < 2; big++)
    for (int ni = 0; ni < 2; ni++) {
      static Ctx c;
      int n = ns[ni], ks[4] = {1, 8, n / 2, n};
      build(&c, big, n);
      dev_findings(&c);

      /* checked loops: 64 iterations (4 windows of 16, no sync inside a window) per strategy and k */
      const int chk[] = {S_NODE, S_WHOLE, S_DEV, S_DEVAPPLY, S_NODEDEV, S_EAGER};
      for (int i = 0; i < (int)(sizeof chk / sizeof chk[0]); i++)
        for (int ki = 0; ki < 4; ki++) checked(&c, chk[i], ks[ki], 4, 1);
      g_upd_limit = 7; /* the updates split over several updater launches */
      checked(&c, S_DEV, n, 2, 1);
      checked(&c, S_DEVAPPLY, n / 2, 2, 1);
      g_upd_limit = 1 << 30;
      /* strategy switches on the dev graph with nothing resynced between them */
      if (!c.reverts) checked(&c, S_DEV, 8, 1, 1);
      checked(&c, S_NODEDEV, 8, 1, c.reverts);
      checked(&c, S_DEV, 8, 1, 0);
      if (c.reverts && c.de)
        printf("note: [%s N=%d] switch device -> host patches not checked: host patches undo device updates\n",
               c.aname, n);
      if (wrong[S_DEV] && !wrong[S_DEVAPPLY]) devst = S_DEVAPPLY;

      double *b = base[big][ni];
      int *bg = bgap[big][ni];
      b[0] = cell(&c, S_GRAPH, 0, WIN), b[1] = cell(&c, S_GRAPH, 0, 1);
      b[2] = cell(&c, S_DGRAPH, 0, WIN), b[3] = cell(&c, S_DGRAPH, 0, 1);
      b[4] = cell(&c, S_EAGER, 0, WIN), b[5] = cell(&c, S_EAGER, 0, 1);
      b[6] = gpu_time(&c, G_GRAPH, 0, &bg[6]);
      b[7] = gpu_time(&c, G_DGRAPH, 0, &bg[7]);
      for (int ki = 0; ki < 4; ki++) {
        double *r = res[big][ni][ki];
        int *gp = gap[big][ni][ki], k = ks[ki];
        r[0] = cell(&c, S_NODE, k, WIN), r[1] = cell(&c, S_NODE, k, 1);
        r[2] = cell(&c, S_WHOLE, k, WIN), r[3] = cell(&c, S_WHOLE, k, 1);
        r[4] = cell(&c, devst, k, WIN), r[5] = cell(&c, devst, k, 1);
        r[6] = cell(&c, S_NODEDEV, k, WIN);
        r[7] = gpu_time(&c, G_UPD, k, &gp[7]);
        r[8] = gpu_time(&c, G_UPDAPPLY, k, &gp[8]);
        r[9] = gpu_time(&c, devst == S_DEVAPPLY ? G_DUPDAPPLY : G_DUPD, k, &gp[9]);
      }
      destroy(&c);
    }
  for (int i = 0; i < 4; i++) ucost[i] = upd_launch_cost(caps[i]);
  report(devst);
  printf("patch_costs: %.1f s; %s\n", (ag_now_ms() - t_start) / 1e3,
         g_fail ? "CHECKS FAILED, see the MISMATCH lines" : "every checked launch saw the arguments set for it");
  return g_fail ? 1 : 0;
}
