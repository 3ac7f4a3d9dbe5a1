/* shape_change: ~30 kernels per iteration whose grid sizes follow a batch size that changes every
 * --period iterations (1024, 4096, 1024, 4096, 2048, repeating), with a sync per iteration. The library
 * must key what it learned on the launch shapes, keep one graph per shape (or fall back to eager when a
 * shape is new) and never replay a graph built for another batch size. */
#include "common.h"

#define WIDTH 256 /* features per row; also the block size of the row kernels */
#define MAX_BATCH 4096
#define LAYERS 10

static const int kBatches[] = {1024, 4096, 1024, 4096, 2048};
#define NBATCHES (int)(sizeof kBatches / sizeof kBatches[0])

__global__ void k_affine(float *y, const float *x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}

/* A squashed logistic map: bounded and chaotic, so a replay of the wrong shape cannot hide. */
__global__ void k_act(float *y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = 0.5f + 0.5f * tanhf(y[i]);
  y[i] = 3.9f * s * (1.0f - s);
}

/* One block per row; fixed-order tree reduction so the result is deterministic. */
__global__ void k_rownorm(float *y, const float *x) {
  __shared__ float s[WIDTH];
  const float *row = x + (size_t)blockIdx.x * WIDTH;
  float v = row[threadIdx.x];
  s[threadIdx.x] = v * v;
  __syncthreads();
  for (int stride = WIDTH / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  float inv = rsqrtf(s[0] / WIDTH + 1e-5f);
  y[(size_t)blockIdx.x * WIDTH + threadIdx.x] = v * inv;
}

int main(int argc, char **argv) {
  ag_args args;
  long period = 5;
  ag_opt opts[] = {{"--period", 'i', &period}};
  ag_parse(argc, argv, &args, 2000, opts, 1);
  ag_graph_unsupported(&args);
  if (period < 1) {
    fprintf(stderr, "--period must be >= 1\n");
    return 1;
  }

  const size_t total = (size_t)MAX_BATCH * WIDTH;
  float *h = (float *)malloc(total * sizeof(float));
  if (!h) return 1;
  float *x, *y;
  CK(cudaMalloc(&x, total * sizeof(float)));
  CK(cudaMalloc(&y, total * sizeof(float)));
  ag_fill_uniform(h, total, args.seed, -1.0f, 1.0f);
  CK(cudaMemcpy(x, h, total * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaMemset(y, 0, total * sizeof(float)));

  uint64_t batch_trace = AG_FNV_INIT;
  CK(cudaDeviceSynchronize());
  double t0 = ag_now_ms();
  for (long it = 0; it < args.iters; it++) {
    ag_loop_mark(it, args.iters);
    int batch = kBatches[(it / period) % NBATCHES];
    int n = batch * WIDTH;
    batch_trace = ag_fnv1a(batch_trace, &batch, sizeof batch);
    for (int l = 0; l < LAYERS; l++) {
      k_affine<<<ag_blocks(n, 256), 256>>>(y, x, 0.9f + 0.02f * (float)l, -1.0f, n);
      k_act<<<ag_blocks(n, 256), 256>>>(y, n);
      k_rownorm<<<batch, WIDTH>>>(x, y);
    }
    CK_LAUNCH();
    CK(cudaStreamSynchronize(0));
  }
  CK(cudaDeviceSynchronize());
  ag_report_loop(ag_now_ms() - t0);

  CK(cudaMemcpy(h, x, total * sizeof(float), cudaMemcpyDeviceToHost));
  printf("sample: shape_change\niters: %ld period: %ld\nbatch trace: %016llx\nx[0]: %a\n", args.iters,
         period, (unsigned long long)batch_trace, (double)h[0]);
  ag_print_checksum(ag_fnv1a(AG_FNV_INIT, h, total * sizeof(float)));
  free(h);
  CK(cudaFree(x));
  CK(cudaFree(y));
  return 0;
}
