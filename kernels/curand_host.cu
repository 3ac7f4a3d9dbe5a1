/* curand_host: a cuRAND host-API philox generator fills a buffer every iteration (its kernels are
 * launched from inside libcurand), a few kernels consume the numbers, then a sync. The library sees
 * launches it did not compile itself and whose philox offset argument changes every iteration. */
#include "common.h"

#include <curand.h>

#define N (1 << 16)
#define THREADS 256
#define CONSUMERS 6

#define CR(call)                                                                                   \
  do {                                                                                             \
    curandStatus_t cr_st_ = (call);                                                                \
    if (cr_st_ != CURAND_STATUS_SUCCESS) {                                                         \
      fprintf(stderr, "%s:%d: %s failed: curandStatus %d\n", __FILE__, __LINE__, #call, (int)cr_st_); \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* A running mix of the draws, so the final state depends on every iteration's numbers in order. */
__global__ void k_blend(float *x, const float *r, float w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = (1.0f - w) * x[i] + w * r[(i * 7 + 3) % n];
}

__global__ void k_threshold(float *acc, const float *r, float t, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) acc[i] += r[i] > t ? 1.0f : 0.0f;
}

int main(int argc, char **argv) {
  ag_args args;
  ag_parse(argc, argv, &args, 4000, NULL, 0);
  ag_graph_unsupported(&args); /* the generator's offset is host state: a captured draw would repeat */

  float *r, *x, *acc;
  CK(cudaMalloc(&r, N * sizeof(float)));
  CK(cudaMalloc(&x, N * sizeof(float)));
  CK(cudaMalloc(&acc, N * sizeof(float)));
  CK(cudaMemset(x, 0, N * sizeof(float)));
  CK(cudaMemset(acc, 0, N * sizeof(float)));

  curandGenerator_t gen;
  CR(curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10));
  CR(curandSetPseudoRandomGeneratorSeed(gen, args.seed));
  CR(curandSetStream(gen, 0));

  const int grid = ag_blocks(N, THREADS);
  CK(cudaDeviceSynchronize());
  double t0 = ag_now_ms();
  for (long it = 0; it < args.iters; it++) {
    ag_loop_mark(it, args.iters);
    CR(curandGenerateUniform(gen, r, N));
    for (int k = 0; k < CONSUMERS; k++) {
      if (k % 2 == 0)
        k_blend<<<grid, THREADS>>>(x, r, 0.05f * (float)(k + 1), N);
      else
        k_threshold<<<grid, THREADS>>>(acc, r, 0.1f * (float)k, N);
    }
    CK_LAUNCH();
    CK(cudaStreamSynchronize(0));
  }
  CK(cudaDeviceSynchronize());
  ag_report_loop(ag_now_ms() - t0);

  static float h[N];
  CK(cudaMemcpy(h, x, sizeof h, cudaMemcpyDeviceToHost));
  printf("sample: curand_host\niters: %ld\nx[0]: %a x[%d]: %a\n", args.iters, (double)h[0], N - 1,
         (double)h[N - 1]);
  uint64_t sum = ag_fnv1a(AG_FNV_INIT, h, sizeof h);
  sum = ag_hash_device(sum, acc, sizeof h);
  sum = ag_hash_device(sum, r, sizeof h);
  ag_print_checksum(sum);
  CR(curandDestroyGenerator(gen));
  return 0;
}
