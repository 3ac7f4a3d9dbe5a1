/* driver_api: the driver API only: an embedded fatbin loaded with cuModuleLoadData, launches through
 * cuLaunchKernelEx (with a priority attribute) and cuLaunchKernel, arguments through kernelParams and
 * through `extra` packed buffers, a cuStreamSynchronize per iteration. The library must read argument
 * bytes from both forms (and CUfunction handles) and replay them identically. */
#include <cuda.h>
#include <stddef.h>

#include "common.h"
#include "driver_api_fatbin.h"

#define N 4096
#define THREADS 256

#define CU(call)                                                                                   \
  do {                                                                                             \
    CUresult cu_r_ = (call);                                                                       \
    if (cu_r_ != CUDA_SUCCESS) {                                                                   \
      const char *cu_name_ = "?", *cu_desc_ = "?";                                                 \
      cuGetErrorName(cu_r_, &cu_name_);                                                            \
      cuGetErrorString(cu_r_, &cu_desc_);                                                          \
      fprintf(stderr, "%s:%d: %s failed: %s (%s, %d)\n", __FILE__, __LINE__, #call, cu_desc_,       \
              cu_name_, (int)cu_r_);                                                               \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

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
  CUfunction axpb, mix, logistic;
  CUdeviceptr a, c;
  int priority;
  long launches;
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

int main(int argc, char **argv) {
  ag_args args;
  long launches = 64;
  ag_opt opts[] = {{"--kernels", 'i', &launches}};
  ag_parse(argc, argv, &args, 1500, opts, 1);

  CUdevice dev;
  CUcontext ctx;
  CU(cuInit(0));
  CU(cuDeviceGet(&dev, 0));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  CUmodule mod;
  CU(cuModuleLoadData(&mod, ag_driver_api_fatbin));
  ctx_t c;
  c.launches = launches;
  CU(cuModuleGetFunction(&c.axpb, mod, "ag_axpb"));
  CU(cuModuleGetFunction(&c.mix, mod, "ag_mix"));
  CU(cuModuleGetFunction(&c.logistic, mod, "ag_logistic"));
  int least, greatest;
  CU(cuCtxGetStreamPriorityRange(&least, &greatest));
  c.priority = greatest;

  static float h[N];
  CU(cuMemAlloc(&c.a, sizeof h));
  CU(cuMemAlloc(&c.c, sizeof h));
  ag_fill_uniform(h, N, args.seed, 0.0f, 1.0f);
  CU(cuMemcpyHtoD(c.a, h, sizeof h));
  ag_fill_uniform(h, N, args.seed + 1, 0.0f, 1.0f);
  CU(cuMemcpyHtoD(c.c, h, sizeof h));

  CUstream gs = NULL;
  CUgraphExec exec = NULL;
  if (args.graph) {
    CUgraph graph;
    CU(cuStreamCreate(&gs, CU_STREAM_NON_BLOCKING));
    CU(cuStreamBeginCapture(gs, CU_STREAM_CAPTURE_MODE_GLOBAL));
    enqueue(gs, &c);
    CU(cuStreamEndCapture(gs, &graph));
    CU(cuGraphInstantiate(&exec, graph, 0));
    CU(cuGraphDestroy(graph));
  }

  CU(cuCtxSynchronize());
  double t0 = ag_now_ms();
  for (long it = 0; it < args.iters; it++) {
    ag_loop_mark(it, args.iters);
    if (args.graph) {
      CU(cuGraphLaunch(exec, gs));
      CU(cuStreamSynchronize(gs));
    } else {
      enqueue(NULL, &c);
      CU(cuStreamSynchronize(NULL));
    }
  }
  CU(cuCtxSynchronize());
  ag_report_loop(ag_now_ms() - t0);

  CU(cuMemcpyDtoH(h, c.a, sizeof h));
  printf("sample: driver_api\niters: %ld launches: %ld\na[0]: %a a[%d]: %a\n", args.iters, launches + 1,
         (double)h[0], N - 1, (double)h[N - 1]);
  uint64_t sum = ag_fnv1a(AG_FNV_INIT, h, sizeof h);
  CU(cuMemcpyDtoH(h, c.c, sizeof h));
  sum = ag_fnv1a(sum, h, sizeof h);
  ag_print_checksum(sum);
  if (exec) CU(cuGraphExecDestroy(exec));
  if (gs) CU(cuStreamDestroy(gs));
  CU(cuMemFree(c.a));
  CU(cuMemFree(c.c));
  CU(cuModuleUnload(mod));
  CU(cuDevicePrimaryCtxRelease(dev));
  return 0;
}
