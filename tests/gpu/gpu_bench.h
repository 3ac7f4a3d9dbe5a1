/* gpu_bench.h: what the GPU cost programs in tests/gpu (graph_costs.cu, patch_costs.cu, cupti_costs.cu)
 * share: the samples' helpers (runtime-call check CK, ag_now_ms), a check for driver and CUPTI calls
 * that exits with the error named, and a comparison of doubles for qsort (medians). */
#ifndef AG_GPU_BENCH_H
#define AG_GPU_BENCH_H

#include <stdio.h>
#include <stdlib.h>

#include "../../kernels/common.h" /* CK (runtime calls), ag_now_ms */

/* A check like the samples' CK (kernels/common.h), for an API whose error codes a function names
 * (cuGetErrorName, cuptiGetResultString). */
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

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

#endif
