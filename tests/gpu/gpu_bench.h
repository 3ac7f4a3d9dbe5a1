/* gpu_bench.h: what the GPU cost programs in tests/gpu (graph_costs.cu, patch_costs.cu, cupti_costs.cu)
 * share: call checks that exit with the error named, a monotonic clock in ms and a comparison of
 * doubles for qsort (medians). */
#ifndef AG_GPU_BENCH_H
#define AG_GPU_BENCH_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define CK(x)                                                                                      \
  do {                                                                                             \
    cudaError_t e_ = (x);                                                                          \
    if (e_ != cudaSuccess) {                                                                       \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));                  \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* The same for an API whose error codes a function names (cuGetErrorName, cuptiGetResultString). */
#define CK_NAMED(type, ok, name_of, x)                                                             \
  do {                                                                                             \
    type r_ = (x);                                                                                 \
    if (r_ != (ok)) {                                                                              \
      const char *s_ = "?";                                                                        \
      name_of(r_, &s_);                                                                            \
      fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, s_);                                      \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

#endif
