/* fakecuda_prog.h: TEST HELPERS for the programs that run on fakecuda (engine_prog, match_bench,
 * guard_prog): a driver-call check that exits with the failing call named, a monotonic clock, a spin of
 * some host time, and the FNV-1a fold of the bytes a program prints a checksum of. */
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

/* Spins ns of host time (a kernel's GPU time as the fake runs it, a program's own host work). */
static inline void fc_prog_spin(uint64_t ns)
{
    for (uint64_t t0 = ns ? fc_prog_now_ns() : 0; ns && fc_prog_now_ns() - t0 < ns;)
        ;
}

static inline uint64_t fc_prog_fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

#endif
