/* nvtx_ranges: a training-like iteration with NVTX ranges around its phases ("forward", "backward",
 * "optimizer") and an "eval" range with extra kernels every 4th iteration, a sync per iteration. The
 * library must see the period-4 structure (or stay correct falling back) and may use the ranges as
 * hints; the NVTX calls themselves must keep working under it. */
#include "common.h"

#include <nvtx3/nvToolsExt.h>

#define N 32768
#define THREADS 256

__global__ void k_logistic(float *y, const float *x, float r, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = fminf(fmaxf(x[i], 0.0f), 1.0f);
  y[i] = r * v * (1.0f - v);
}

__global__ void k_mix(float *y, const float *x, const float *z, float w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + w * (z[i] - x[i]);
}

int main(int argc, char **argv) {
  ag_args args;
  ag_parse(argc, argv, &args, 3000, NULL, 0);
  ag_graph_unsupported(&args);

  static float h[N];
  const size_t bytes = sizeof h;
  float *param, *act, *grad, *eval;
  CK(cudaMalloc(&param, bytes));
  CK(cudaMalloc(&act, bytes));
  CK(cudaMalloc(&grad, bytes));
  CK(cudaMalloc(&eval, bytes));
  ag_fill_uniform(h, N, args.seed, 0.0f, 1.0f);
  CK(cudaMemcpy(param, h, bytes, cudaMemcpyHostToDevice));
  CK(cudaMemset(act, 0, bytes));
  CK(cudaMemset(grad, 0, bytes));
  CK(cudaMemset(eval, 0, bytes));

  const int grid = ag_blocks(N, THREADS);
  CK(cudaDeviceSynchronize());
  double t0 = ag_now_ms();
  for (long it = 0; it < args.iters; it++) {
    ag_loop_mark(it, args.iters);
    nvtxRangePushA("step");
    nvtxRangePushA("forward");
    k_mix<<<grid, THREADS>>>(act, act, param, 0.5f, N);
    for (int k = 0; k < 6; k++) k_logistic<<<grid, THREADS>>>(act, act, 3.7f + 0.03f * (float)k, N);
    nvtxRangePop();
    nvtxRangePushA("backward");
    k_mix<<<grid, THREADS>>>(grad, act, param, 0.25f, N);
    for (int k = 0; k < 8; k++) k_logistic<<<grid, THREADS>>>(grad, grad, 3.75f + 0.02f * (float)k, N);
    nvtxRangePop();
    nvtxRangePushA("optimizer");
    for (int k = 0; k < 4; k++) k_mix<<<grid, THREADS>>>(param, param, grad, 0.01f * (float)(k + 1), N);
    nvtxRangePop();
    if (it % 4 == 3) {
      nvtxRangePushA("eval");
      k_mix<<<grid, THREADS>>>(eval, eval, param, 0.5f, N);
      for (int k = 0; k < 5; k++) k_logistic<<<grid, THREADS>>>(eval, eval, 3.9f, N);
      nvtxRangePop();
    }
    CK_LAUNCH();
    CK(cudaStreamSynchronize(0));
    nvtxRangePop();
  }
  CK(cudaDeviceSynchronize());
  ag_report_loop(ag_now_ms() - t0);

  CK(cudaMemcpy(h, param, bytes, cudaMemcpyDeviceToHost));
  printf("sample: nvtx_ranges\niters: %ld\nparam[0]: %a\n", args.iters, (double)h[0]);
  uint64_t sum = ag_fnv1a(AG_FNV_INIT, h, bytes);
  sum = ag_hash_device(sum, act, bytes);
  sum = ag_hash_device(sum, grad, bytes);
  sum = ag_hash_device(sum, eval, bytes);
  ag_print_checksum(sum);
  return 0;
}
