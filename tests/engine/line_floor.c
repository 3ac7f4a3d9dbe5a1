/* What cold cache lines cost on this CPU, the floor under a matched launch in an interpreter's program:
 * between two launches the interpreter's own work evicts the shim's lines, and the launch pays for each
 * one it touches. After a sweep of SWEEP_KB (evicting the private caches and the TLB), N lines are read
 * three ways: as a dependent chain (each address found in the line before), prefetched together on one
 * or two pages, and prefetched together one per page over 64 pages' span (each a TLB miss too). A launch
 * that touches N lines cannot cost less than the second way, nor, where its lines lie on many pages,
 * than the third. Not a test (it asserts nothing); run by tests/gpu/run.sh on the GPU machine's CPU:
 *   line_floor [N (16)] [SWEEP_KB (16384)] */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define ROUNDS 2000

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static volatile unsigned char *sweep_buf;
static size_t sweep_len;

static void sweep(void)
{
    for (size_t o = 0; o < sweep_len; o += 64)
        sweep_buf[o]++;
}

/* Lines `stride` bytes apart in a fresh block, linked in a scrambled order. Returns ns per round for
 * the chain (dependent) or for all lines prefetched, then read (together). */
static void measure(int n, size_t stride, double *chain, double *together)
{
    unsigned char *pool = aligned_alloc(4096, ((size_t)n * stride + 4095) / 4096 * 4096 + 4096);
    void **line = malloc(sizeof *line * (size_t)n);
    if (!pool || !line) {
        fprintf(stderr, "line_floor: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < n; i++) /* 7 is prime to every power of two: a permutation of the slots */
        line[i] = pool + (size_t)((i * 7) % n) * stride;
    for (int i = 0; i < n; i++)
        *(void **)line[i] = i + 1 < n ? line[i + 1] : NULL;
    uint64_t dep = 0, par = 0;
    uintptr_t sink = 0;
    for (int r = 0; r < ROUNDS; r++) {
        sweep();
        uint64_t t0 = now_ns();
        for (void *p = line[0]; p; p = *(void *volatile *)p)
            sink++;
        dep += now_ns() - t0;
        sweep();
        t0 = now_ns();
        for (int i = 0; i < n; i++)
            __builtin_prefetch(line[i]);
        for (int i = 0; i < n; i++)
            sink += (uintptr_t) * (void *volatile *)line[i];
        par += now_ns() - t0;
    }
    if (sink == 1)
        puts("");
    *chain = (double)dep / ROUNDS;
    *together = (double)par / ROUNDS;
    free(line);
    free(pool);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 16;
    long kb = argc > 2 ? atol(argv[2]) : 16384;
    if (n < 1 || n > 4096 || kb < 0) {
        fprintf(stderr, "usage: %s [N (1-4096)] [SWEEP_KB]\n", argv[0]);
        return 2;
    }
    sweep_len = (size_t)kb * 1024;
    sweep_buf = malloc(sweep_len ? sweep_len : 1);
    if (!sweep_buf) {
        fprintf(stderr, "line_floor: out of memory\n");
        return 1;
    }
    uint64_t t0 = now_ns(), clock_ns = now_ns() - t0;
    double chain, one_page, spread, ignored;
    measure(n, 128, &chain, &one_page);
    measure(n, 64 * 4096 / (size_t)n > 4096 ? 64 * 4096 / (size_t)n : 4096, &ignored, &spread);
    printf("line_floor: %d lines after a %ld KB sweep: chain %.0f ns (%.0f a line), together on one page "
           "%.0f ns, together one a page %.0f ns (clock read %llu ns)\n",
           n, kb, chain, chain / n, one_page, spread, (unsigned long long)clock_ns);
    return 0;
}
