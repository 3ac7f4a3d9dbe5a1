/* memops: memory operations between kernels every iteration: memset, device-to-device copy,
 * host-to-device from pinned and from pageable memory (the pageable source is rewritten by the host
 * as soon as the call returns, which CUDA allows), device-to-host into pinned memory plus a sync, and a
 * blocking device-to-host copy into pageable memory. The library must snapshot or flush correctly. */
#include "common.h"

#define N 16384
#define THREADS 256

__global__ void k_consume(float *x, const float *from_pinned, const float *from_pageable, const float *tmp,
                          int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = 0.5f * x[i] + 0.25f * from_pinned[i] + 0.25f * from_pageable[(i + 1) % n] + tmp[i];
}

/* tmp was zeroed by the memset; a missing or late memset shows up as accumulated values. */
__global__ void k_accum(float *tmp, const float *src, float w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) tmp[i] += w * src[i];
}

/* Host data that depends on the iteration and on what the host read back. */
static void host_fill(float *h, long it, float feedback, uint64_t seed) {
  uint64_t s = seed ^ ((uint64_t)it * 0x9e3779b97f4a7c15ULL);
  for (int i = 0; i < N; i++)
    h[i] = (float)(ag_splitmix64(&s) >> 40) * (1.0f / 16777216.0f) + 0.001f * feedback;
}

int main(int argc, char **argv) {
  ag_args args;
  ag_parse(argc, argv, &args, 2000, NULL, 0);
  ag_graph_unsupported(&args);

  const size_t bytes = N * sizeof(float);
  float *x, *y, *tmp, *d_pinned, *d_pageable;
  CK(cudaMalloc(&x, bytes));
  CK(cudaMalloc(&y, bytes));
  CK(cudaMalloc(&tmp, bytes));
  CK(cudaMalloc(&d_pinned, bytes));
  CK(cudaMalloc(&d_pageable, bytes));
  float *h_pinned_in, *h_pinned_out;
  CK(cudaMallocHost(&h_pinned_in, bytes));
  CK(cudaMallocHost(&h_pinned_out, bytes));
  float *h_pageable_in = (float *)malloc(bytes), *h_pageable_out = (float *)malloc(64 * sizeof(float));
  if (!h_pageable_in || !h_pageable_out) return 1;

  ag_fill_uniform(h_pageable_in, N, args.seed, 0.0f, 1.0f);
  CK(cudaMemcpy(x, h_pageable_in, bytes, cudaMemcpyHostToDevice));
  host_fill(h_pageable_in, 0, 0.0f, args.seed + 1);

  uint64_t readback = AG_FNV_INIT;
  float feedback = 0.0f;
  const int grid = ag_blocks(N, THREADS);
  CK(cudaDeviceSynchronize());
  double t0 = ag_now_ms();
  for (long it = 0; it < args.iters; it++) {
    ag_loop_mark(it, args.iters);
    /* The previous iteration ended with a sync, so the pinned source may be rewritten now. */
    host_fill(h_pinned_in, it, feedback, args.seed + 2);
    CK(cudaMemsetAsync(tmp, 0, bytes, 0));
    CK(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, 0));
    CK(cudaMemcpyAsync(d_pinned, h_pinned_in, bytes, cudaMemcpyHostToDevice, 0));
    CK(cudaMemcpyAsync(d_pageable, h_pageable_in, bytes, cudaMemcpyHostToDevice, 0));
    /* Legal: a pageable source is staged before the call returns. Next iteration's data goes in now. */
    host_fill(h_pageable_in, it + 1, feedback, args.seed + 1);
    k_accum<<<grid, THREADS>>>(tmp, y, 0.01f, N);
    k_accum<<<grid, THREADS>>>(tmp, d_pinned, 0.01f, N);
    k_consume<<<grid, THREADS>>>(x, d_pinned, d_pageable, tmp, N);
    CK_LAUNCH();
    CK(cudaMemcpyAsync(h_pinned_out, x, bytes, cudaMemcpyDeviceToHost, 0));
    CK(cudaStreamSynchronize(0));
    feedback = h_pinned_out[it % N];
    k_accum<<<grid, THREADS>>>(y, x, 0.5f, N);
    CK_LAUNCH();
    CK(cudaMemcpy(h_pageable_out, y + (it * 64) % N, 64 * sizeof(float), cudaMemcpyDeviceToHost));
    readback = ag_fnv1a(readback, h_pageable_out, 64 * sizeof(float));
  }
  CK(cudaDeviceSynchronize());
  ag_report_loop(ag_now_ms() - t0);

  CK(cudaMemcpy(h_pinned_out, x, bytes, cudaMemcpyDeviceToHost));
  printf("sample: memops\niters: %ld\nx[0]: %a\nreadback: %016llx\n", args.iters, (double)h_pinned_out[0],
         (unsigned long long)readback);
  uint64_t sum = ag_fnv1a(readback, h_pinned_out, bytes);
  sum = ag_hash_device(sum, y, bytes);
  ag_print_checksum(sum);
  CK(cudaFreeHost(h_pinned_in));
  CK(cudaFreeHost(h_pinned_out));
  free(h_pageable_in);
  free(h_pageable_out);
  return 0;
}
