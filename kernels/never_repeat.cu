/* never_repeat: a launch-bound loop whose shapes never repeat: every iteration draws new grid sizes (and
 * a new kernel count) from a seeded generator, so no chunk is ever seen twice. The library can replay
 * nothing here; it must stay out of the way (the issue's bound: at most 3% slower than eager). */
#include "common.h"

#define N (1 << 16)
#define THREADS 128

__global__ void k_axpb(float *y, const float *x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}

__global__ void k_logistic(float *y, const float *x, float r, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = fminf(fmaxf(x[i], 0.0f), 1.0f);
    y[i] = r * v * (1.0f - v);
  }
}

int main(int argc, char **argv) {
  ag_args args;
  ag_parse(argc, argv, &args, 600, NULL, 0);
  if (args.graph) ag_graph_unsupported(&args);

  static float h[N];
  float *a, *b;
  CK(cudaMalloc(&a, N * sizeof(float)));
  CK(cudaMalloc(&b, N * sizeof(float)));
  ag_fill_uniform(h, N, args.seed, 0.0f, 1.0f);
  CK(cudaMemcpy(a, h, sizeof h, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, h, sizeof h, cudaMemcpyHostToDevice));

  uint64_t rng = args.seed * 0x9e3779b97f4a7c15ULL + 7;
  CK(cudaDeviceSynchronize());
  double t0 = ag_now_ms();
  for (long it = 0; it < args.iters; it++) {
    ag_loop_mark(it, args.iters);
    /* 150 to 250 kernels, each over a length that is new for this iteration */
    long kernels = 150 + (long)(ag_splitmix64(&rng) % 101);
    ag_ab_weight((double)kernels); /* AG_AB: time per kernel */
    for (long k = 0; k < kernels; k++) {
      int n = 1024 + (int)(ag_splitmix64(&rng) % (N - 1024));
      int grid = ag_blocks(n, THREADS);
      if (k % 2 == 0)
        k_axpb<<<grid, THREADS>>>(b, a, 0.95f, 0.025f, n);
      else
        k_logistic<<<grid, THREADS>>>(a, b, 3.9f, n);
    }
    CK_LAUNCH();
    CK(cudaStreamSynchronize(0));
  }
  CK(cudaDeviceSynchronize());
  ag_report_loop(ag_now_ms() - t0);

  CK(cudaMemcpy(h, a, sizeof h, cudaMemcpyDeviceToHost));
  printf("sample: never_repeat\niters: %ld\na[0]: %a\n", args.iters, (double)h[0]);
  uint64_t sum = ag_fnv1a(AG_FNV_INIT, h, sizeof h);
  sum = ag_hash_device(sum, b, sizeof h);
  ag_print_checksum(sum);
  CK(cudaFree(a));
  CK(cudaFree(b));
  return 0;
}
