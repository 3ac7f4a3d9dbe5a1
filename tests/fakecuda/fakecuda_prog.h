/* fakecuda_prog.h: TEST HELPERS for the programs that run on fakecuda (engine_prog, match_bench,
 * guard_prog): a driver-call check that exits with the failing call named, and a monotonic clock. */
#ifndef FAKECUDA_PROG_H
#define FAKECUDA_PROG_H

#include <cuda.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* Runs a driver call; on failure prints where and what it returned, and exits 1. */
#define CK(x)                                                                                         \
    do {                                                                                              \
        CUresult r_ = (x);                                                                            \
        if (r_ != CUDA_SUCCESS) {                                                                     \
            fprintf(stderr, "%s:%d: %s = %d\n", __FILE__, __LINE__, #x, (int)r_);                     \
            exit(1);                                                                                  \
        }                                                                                             \
    } while (0)

static inline uint64_t fc_prog_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
