/* nosync_loop: ~50 kernels per iteration (1D stencil sweeps, logistic-map and relaxation updates) with no
 * synchronization inside the loop at all, only one at the end. The library must find the iteration
 * boundary without a sync to anchor it and may defer freely, since nothing observes the device. */
#include "common.h"

#define N 65536
#define THREADS 256
#define SWEEP_PAIRS 24

/* Clamped boundary so that every element has the same weights and the sum stays bounded. */
__global__ void k_stencil(float *y, const float *x, float c0, float c1, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float l = x[i > 0 ? i - 1 : 0];
  float r = x[i < n - 1 ? i + 1 : n - 1];
  y[i] = c0 * x[i] + c1 * (l + r);
}

/* A coupled logistic-map lattice: chaotic, so a lost or repeated kernel is never forgotten; the clamp
 * keeps rounding inside [0, 1] where the map is bounded. */
__global__ void k_logistic(float *y, const float *x, float r, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = fminf(fmaxf(x[i], 0.0f), 1.0f);
  y[i] = r * v * (1.0f - v);
}

__global__ void k_relax(float *u, const float *f, float w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) u[i] = u[i] + w * (f[i] - u[i]);
}

__global__ void k_feedback(float *f, const float *u, float keep, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = fminf(fmaxf(keep * f[i] + (1.0f - keep) * u[i], 0.0f), 1.0f);
  f[i] = 3.9f * v * (1.0f - v);
}

typedef struct {
  float *u, *v, *f;
} ctx_t;

static void enqueue(cudaStream_t s, void *p) {
  ctx_t *c = (ctx_t *)p;
  const int grid = ag_blocks(N, THREADS);
  for (int k = 0; k < SWEEP_PAIRS; k++) {
    /* Slightly different weights per sweep give the kernels distinct by-value arguments. */
    float c1 = 0.10f + 0.002f * (float)k;
    k_stencil<<<grid, THREADS, 0, s>>>(c->v, c->u, 1.0f - 2.0f * c1, c1, N);
    k_logistic<<<grid, THREADS, 0, s>>>(c->u, c->v, 3.7f + 0.01f * (float)k, N);
  }
  k_relax<<<grid, THREADS, 0, s>>>(c->u, c->f, 0.05f, N);
  k_feedback<<<grid, THREADS, 0, s>>>(c->f, c->u, 0.9f, N);
  CK_LAUNCH();
}

int main(int argc, char **argv) {
  ag_args args;
  ag_parse(argc, argv, &args, 3000, NULL, 0);

  static float h[N];
  ctx_t c;
  CK(cudaMalloc(&c.u, sizeof h));
  CK(cudaMalloc(&c.v, sizeof h));
  CK(cudaMalloc(&c.f, sizeof h));
  ag_fill_uniform(h, N, args.seed, 0.0f, 1.0f);
  CK(cudaMemcpy(c.u, h, sizeof h, cudaMemcpyHostToDevice));
  CK(cudaMemset(c.v, 0, sizeof h));
  ag_fill_uniform(h, N, args.seed + 1, 0.0f, 1.0f);
  CK(cudaMemcpy(c.f, h, sizeof h, cudaMemcpyHostToDevice));

  cudaStream_t gs;
  cudaGraphExec_t exec = ag_graph_mode(&args, &gs, enqueue, &c);

  CK(cudaDeviceSynchronize());
  double t0 = ag_now_ms();
  for (long it = 0; it < args.iters; it++) {
    ag_loop_mark(it, args.iters);
    if (args.graph)
      CK(cudaGraphLaunch(exec, gs));
    else
      enqueue(0, &c);
  }
  CK(cudaDeviceSynchronize());
  ag_report_loop(ag_now_ms() - t0);

  CK(cudaMemcpy(h, c.u, sizeof h, cudaMemcpyDeviceToHost));
  printf("sample: nosync_loop\niters: %ld kernels: %d\nu[0]: %a u[%d]: %a\n", args.iters,
         2 * SWEEP_PAIRS + 2, (double)h[0], N / 2, (double)h[N / 2]);
  uint64_t sum = ag_fnv1a(AG_FNV_INIT, h, sizeof h);
  sum = ag_hash_device(sum, c.f, sizeof h);
  ag_print_checksum(sum);
  if (exec) CK(cudaGraphExecDestroy(exec));
  if (gs) CK(cudaStreamDestroy(gs));
  return 0;
}
