/* driver_api: the driver API only: an embedded fatbin loaded with cuModuleLoadData, launches through
 * cuLaunchKernelEx (with a priority attribute) and cuLaunchKernel, arguments through kernelParams and
 * through `extra` packed buffers, a cuStreamSynchronize per iteration. The library must read argument
 * bytes from both forms (and CUfunction handles) and replay them identically.
 * --contexts N runs the same work in N contexts of the device (the primary one and N-1 created ones,
 * each with its module, buffers and seed), one after the other in each iteration, or with --threads 1
 * each in a thread of its own: every context is the library's to replay, not only the first.
 * --reload K adds a second segment to each iteration (after the first's sync): 4 launches of a kernel of
 * another copy of the fatbin, which is unloaded and loaded again every K iterations (its kernel may come
 * back under the same handle), loaded as a module (--reload-kind 0, a CUfunction), as a library whose
 * CUkernel is launched (1, as the runtime does), or as a library whose kernel's CUfunction in the context
 * is (2, cuKernelGetFunction). The library must forget the unloaded kernel, and may keep the first
 * segment's graphs.
 * --lives L then runs the loop L more times, each in a context created for it (its module, buffers and
 * seed) and destroyed after it, one after the other: more contexts over the process's life than the
 * library keeps engines for at once (16), whose modules, streams and memory go with them. */
#include <cuda.h>
#include <pthread.h>
#include <stddef.h>

#include "common.h"
#include "driver_api_fatbin.h"

#define N 4096
#define THREADS 256

/* Packed argument buffers for `extra`: laid out exactly like the kernels' parameters (natural
 * alignment, no tail padding), which the static_asserts pin down. */
typedef struct {
  CUdeviceptr y, x, z;
  float w;
  int n;
} mix_args;
static_assert(offsetof(mix_args, w) == 24 && offsetof(mix_args, n) == 28 && sizeof(mix_args) == 32,
              "mix_args layout");
typedef struct {
  CUdeviceptr y;
  float r;
  int n;
} logistic_args;
static_assert(offsetof(logistic_args, r) == 8 && sizeof(logistic_args) == 16, "logistic_args layout");

typedef struct {
  CUcontext cu;
  CUmodule mod;
  CUfunction axpb, mix, logistic;
  CUdeviceptr a, c;
  int priority;
  long launches, iters;
  long reload, reload_kind; /* --reload K, --reload-kind */
  void *aux_owner;          /* the reloaded copy: a CUmodule or a CUlibrary */
  CUfunction aux;
} ctx_t;

static void launch_ex(ctx_t *c, CUstream s, CUfunction f, void **params, void **extra) {
  CUlaunchAttribute attr;
  memset(&attr, 0, sizeof attr);
  attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attr.value.priority = c->priority;
  CUlaunchConfig cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDimX = ag_blocks(N, THREADS);
  cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = THREADS;
  cfg.blockDimY = cfg.blockDimZ = 1;
  cfg.sharedMemBytes = 0;
  cfg.hStream = s;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  CU(cuLaunchKernelEx(&cfg, f, params, extra));
}

static void enqueue(CUstream s, ctx_t *c) {
  const unsigned grid = (unsigned)ag_blocks(N, THREADS);
  int n = N;
  for (long k = 0; k < c->launches; k++) {
    switch (k % 4) {
    case 0: { /* cuLaunchKernelEx, kernelParams */
      float a = 0.9f + 0.001f * (float)(k % 64), b = (1.0f - a) * (float)(k % 5) / 5.0f;
      void *params[] = {&c->a, &c->a, &a, &b, &n};
      launch_ex(c, s, c->axpb, params, NULL);
      break;
    }
    case 1: { /* cuLaunchKernelEx, extra */
      mix_args m = {c->a, c->a, c->c, 0.01f, N};
      size_t size = sizeof m;
      void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &m, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                       CU_LAUNCH_PARAM_END};
      launch_ex(c, s, c->mix, NULL, extra);
      break;
    }
    case 2: { /* cuLaunchKernel, kernelParams */
      float r = 3.8f + 0.001f * (float)(k % 128);
      void *params[] = {&c->a, &r, &n};
      CU(cuLaunchKernel(c->logistic, grid, 1, 1, THREADS, 1, 1, 0, s, params, NULL));
      break;
    }
    default: { /* cuLaunchKernel, extra */
      logistic_args l = {c->a, 3.9f, N};
      size_t size = sizeof l;
      void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &l, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                       CU_LAUNCH_PARAM_END};
      CU(cuLaunchKernel(c->logistic, grid, 1, 1, THREADS, 1, 1, 0, s, NULL, extra));
      break;
    }
    }
  }
  float w = 0.5f;
  void *params[] = {&c->c, &c->c, &c->a, &w, &n};
  CU(cuLaunchKernel(c->mix, grid, 1, 1, THREADS, 1, 1, 0, s, params, NULL));
}

/* --reload: the second copy of the fatbin, loaded as --reload-kind says, and its unload. */
static void aux_load(ctx_t *c) {
  if (c->reload_kind == 0) {
    CU(cuModuleLoadData((CUmodule *)&c->aux_owner, ag_driver_api_fatbin));
    CU(cuModuleGetFunction(&c->aux, (CUmodule)c->aux_owner, "ag_logistic"));
    return;
  }
  CUkernel k;
  CU(cuLibraryLoadData((CUlibrary *)&c->aux_owner, ag_driver_api_fatbin, NULL, NULL, 0, NULL, NULL, 0));
  CU(cuLibraryGetKernel(&k, (CUlibrary)c->aux_owner, "ag_logistic"));
  if (c->reload_kind == 1)
    c->aux = (CUfunction)k;
  else
    CU(cuKernelGetFunction(&c->aux, k));
}
static void aux_unload(ctx_t *c) {
  if (!c->aux_owner) return;
  if (c->reload_kind == 0)
    CU(cuModuleUnload((CUmodule)c->aux_owner));
  else
    CU(cuLibraryUnload((CUlibrary)c->aux_owner));
  c->aux_owner = NULL;
}

/* The second segment of iteration it (--reload), ended by a sync. */
static void aux_round(ctx_t *c, long it) {
  if (!c->reload) return;
  if (it % c->reload == 0) {
    aux_unload(c);
    aux_load(c);
  }
  int n = N;
  for (int j = 0; j < 4; j++) {
    float r = 3.7f + 0.01f * (float)j;
    void *params[] = {&c->c, &r, &n};
    CU(cuLaunchKernel(c->aux, (unsigned)ag_blocks(N, THREADS), 1, 1, THREADS, 1, 1, 0, NULL, params, NULL));
  }
  CU(cuStreamSynchronize(NULL));
}

/* Context c (current): its module, functions and buffers, filled from seed. */
static void setup(ctx_t *c, uint64_t seed) {
  CU(cuModuleLoadData(&c->mod, ag_driver_api_fatbin));
  CU(cuModuleGetFunction(&c->axpb, c->mod, "ag_axpb"));
  CU(cuModuleGetFunction(&c->mix, c->mod, "ag_mix"));
  CU(cuModuleGetFunction(&c->logistic, c->mod, "ag_logistic"));
  int least, greatest;
  CU(cuCtxGetStreamPriorityRange(&least, &greatest));
  c->priority = greatest;
  static float h[N];
  CU(cuMemAlloc(&c->a, sizeof h));
  CU(cuMemAlloc(&c->c, sizeof h));
  ag_fill_uniform(h, N, seed, 0.0f, 1.0f);
  CU(cuMemcpyHtoD(c->a, h, sizeof h));
  ag_fill_uniform(h, N, seed + 1, 0.0f, 1.0f);
  CU(cuMemcpyHtoD(c->c, h, sizeof h));
}

/* --threads: context c's whole loop in a thread of its own. */
static void *context_thread(void *arg) {
  ctx_t *c = (ctx_t *)arg;
  CU(cuCtxSetCurrent(c->cu));
  for (long it = 0; it < c->iters; it++) {
    enqueue(NULL, c);
    CU(cuStreamSynchronize(NULL));
    aux_round(c, it);
  }
  CU(cuCtxSynchronize());
  return NULL;
}

#define MAX_CONTEXTS 8

int main(int argc, char **argv) {
  ag_args args;
  long launches = 64, ncontexts = 1, threads = 0, reload = 0, reload_kind = 0, lives = 0;
  ag_opt opts[] = {{"--kernels", 'i', &launches},
                   {"--contexts", 'i', &ncontexts},
                   {"--threads", 'i', &threads},
                   {"--reload", 'i', &reload},
                   {"--reload-kind", 'i', &reload_kind},
                   {"--lives", 'i', &lives}};
  ag_parse(argc, argv, &args, 1500, opts, 6);
  if (ncontexts < 1 || ncontexts > MAX_CONTEXTS || (args.graph && ncontexts > 1)) {
    fprintf(stderr, "driver_api: --contexts takes 1..%d (1 with --graph)\n", MAX_CONTEXTS);
    return 2;
  }
  if (reload < 0 || reload_kind < 0 || reload_kind > 2 || (args.graph && reload)) {
    fprintf(stderr, "driver_api: --reload takes K >= 1 (not with --graph), --reload-kind 0, 1 or 2\n");
    return 2;
  }
  if (lives < 0 || (args.graph && lives)) {
    fprintf(stderr, "driver_api: --lives takes L >= 0 (not with --graph)\n");
    return 2;
  }

  CUdevice dev;
  CU(cuInit(0));
  CU(cuDeviceGet(&dev, 0));
  static ctx_t cs[MAX_CONTEXTS];
  for (long k = 0; k < ncontexts; k++) {
    if (k == 0) {
      CU(cuDevicePrimaryCtxRetain(&cs[k].cu, dev));
      CU(cuCtxSetCurrent(cs[k].cu));
    } else {
      CU(cuCtxCreate(&cs[k].cu, NULL, 0, dev)); /* current from here on */
    }
    cs[k].launches = launches;
    cs[k].iters = args.iters;
    cs[k].reload = reload;
    cs[k].reload_kind = reload_kind;
    setup(&cs[k], args.seed + 2 * (uint64_t)k);
  }
  CU(cuCtxSetCurrent(cs[0].cu));
  ctx_t *c = &cs[0];

  CUstream gs = NULL;
  CUgraphExec exec = NULL;
  if (args.graph) {
    CUgraph graph;
    CU(cuStreamCreate(&gs, CU_STREAM_NON_BLOCKING));
    double t0 = ag_now_ms();
    CU(cuStreamBeginCapture(gs, CU_STREAM_CAPTURE_MODE_GLOBAL));
    enqueue(gs, c);
    CU(cuStreamEndCapture(gs, &graph));
    CU(cuGraphInstantiate(&exec, graph, 0));
    CU(cuGraphDestroy(graph));
    ag_setup_ms = ag_now_ms() - t0; /* (common.h) */
  }

  CU(cuCtxSynchronize());
  double t0 = ag_now_ms();
  if (threads && ncontexts > 1) {
    pthread_t th[MAX_CONTEXTS];
    for (long k = 0; k < ncontexts; k++)
      if (pthread_create(&th[k], NULL, context_thread, &cs[k]) != 0) {
        fprintf(stderr, "driver_api: cannot start a thread\n");
        return 1;
      }
    for (long k = 0; k < ncontexts; k++)
      pthread_join(th[k], NULL);
  } else {
    for (long it = 0; it < args.iters; it++) {
      ag_loop_mark(it, args.iters);
      if (args.graph) {
        CU(cuGraphLaunch(exec, gs));
        CU(cuStreamSynchronize(gs));
        continue;
      }
      for (long k = 0; k < ncontexts; k++) {
        if (ncontexts > 1)
          CU(cuCtxSetCurrent(cs[k].cu));
        enqueue(NULL, &cs[k]);
        CU(cuStreamSynchronize(NULL));
        aux_round(&cs[k], it);
      }
    }
  }
  static float h[N];
  uint64_t lives_sum = AG_FNV_INIT;
  for (long l = 0; l < lives; l++) {
    ctx_t lc;
    memset(&lc, 0, sizeof lc);
    CU(cuCtxCreate(&lc.cu, NULL, 0, dev)); /* current from here on */
    lc.launches = launches;
    lc.iters = args.iters;
    setup(&lc, args.seed + 1000 + 2 * (uint64_t)l);
    for (long it = 0; it < args.iters; it++) {
      enqueue(NULL, &lc);
      CU(cuStreamSynchronize(NULL));
    }
    CU(cuMemcpyDtoH(h, lc.a, sizeof h));
    lives_sum = ag_fnv1a(lives_sum, h, sizeof h);
    CU(cuMemcpyDtoH(h, lc.c, sizeof h));
    lives_sum = ag_fnv1a(lives_sum, h, sizeof h);
    CU(cuCtxDestroy(lc.cu)); /* its module and memory with it */
  }
  CU(cuCtxSetCurrent(c->cu));
  CU(cuCtxSynchronize());
  ag_report_loop(ag_now_ms() - t0);

  CU(cuMemcpyDtoH(h, c->a, sizeof h));
  printf("sample: driver_api\niters: %ld launches: %ld\na[0]: %a a[%d]: %a\n", args.iters, launches + 1,
         (double)h[0], N - 1, (double)h[N - 1]);
  uint64_t sum = AG_FNV_INIT;
  for (long k = 0; k < ncontexts; k++) {
    CU(cuCtxSetCurrent(cs[k].cu));
    CU(cuMemcpyDtoH(h, cs[k].a, sizeof h));
    sum = ag_fnv1a(sum, h, sizeof h);
    CU(cuMemcpyDtoH(h, cs[k].c, sizeof h));
    sum = ag_fnv1a(sum, h, sizeof h);
  }
  if (ncontexts > 1)
    printf("contexts: %ld%s\n", ncontexts, threads ? " (a thread each)" : "");
  if (lives)
    printf("lives: %ld, checksum %016llx\n", lives, (unsigned long long)lives_sum);
  if (reload)
    printf("reloaded every %ld iterations, as %s\n", reload,
           reload_kind == 0 ? "a module" : reload_kind == 1 ? "a library (CUkernel)" : "a library (CUfunction)");
  ag_print_checksum(sum);
  CU(cuCtxSetCurrent(c->cu));
  if (exec) CU(cuGraphExecDestroy(exec));
  if (gs) CU(cuStreamDestroy(gs));
  for (long k = ncontexts - 1; k >= 0; k--) {
    CU(cuCtxSetCurrent(cs[k].cu));
    CU(cuMemFree(cs[k].a));
    CU(cuMemFree(cs[k].c));
    CU(cuModuleUnload(cs[k].mod));
    aux_unload(&cs[k]);
    if (k)
      CU(cuCtxDestroy(cs[k].cu));
  }
  CU(cuDevicePrimaryCtxRelease(dev));
  return 0;
}
