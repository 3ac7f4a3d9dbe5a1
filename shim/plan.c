/* Chunk plans for a segment that ends at a real barrier (pure C, no CUDA headers).
 *
 * Work still deferred when the host reaches the barrier runs only then, while the host waits; every
 * chunk costs the host one graph launch. The default plan (ag_plan_default_chunk) ramps up after the
 * barrier and halves toward the expected end. Once one eager sighting of the segment was timed, the
 * host time between its operations and each operation's GPU time are known, and ag_plan_best finds the
 * chunk ends that a simple model says finish soonest:
 *   - operation i reaches the engine at P[i] = h[0] + ... + h[i-1] plus the graph launches made before it
 *     (L each), where h[i] is the host time from operation i to the next one (to the barrier for the
 *     last) as replay takes it;
 *   - a chunk is launched when its last operation arrives (the last chunk at the barrier); on the GPU it
 *     starts S after that or when the chunk before it ends, whichever is later, and runs for the sum of
 *     its operations' GPU times plus a graph's own GPU cost;
 *   - the segment ends when the host has reached the barrier and launched the last chunk, or when the
 *     GPU finishes, whichever is later.
 * Dynamic programming over (chunks so far, chunk end) keeps the earliest GPU finish; the host's time
 * depends only on those two. The learner takes the result only where the model puts it clearly ahead of
 * the default plan (a margin for the model's own errors: it knows a kernel's GPU time only as an eager
 * launch took it, and a memory operation's only as an estimate). */
#include <stdlib.h>
#include <string.h>

#include "pattern.h"

uint32_t ag_plan_default_chunk(uint32_t pos, uint32_t length, int real_start, int real_end, uint32_t chunk_max,
                               uint32_t chunk_first, uint32_t tail_min)
{
    uint32_t c = chunk_max;
    if (real_start && chunk_first) {
        uint32_t ramp = pos > chunk_first ? pos : chunk_first;
        if (ramp < c)
            c = ramp;
    }
    if (!real_end || length <= pos)
        return c;
    uint32_t remaining = length - pos;
    uint32_t tail = remaining > tail_min ? (remaining + 1) / 2 : remaining;
    return tail < c ? tail : c;
}

uint32_t ag_plan_default(uint32_t n, uint32_t chunk_max, uint32_t chunk_first, uint32_t tail_min, uint32_t *ends,
                         uint32_t cap)
{
    uint32_t k = 0;
    for (uint32_t pos = 0; pos < n; k++) {
        if (k == cap)
            return 0;
        uint32_t c = ag_plan_default_chunk(pos, n, 1, 1, chunk_max, chunk_first, tail_min);
        pos += c ? c : 1;
        ends[k] = pos < n ? pos : n;
    }
    return k;
}

static uint64_t max64(uint64_t a, uint64_t b)
{
    return a > b ? a : b;
}

/* Host arrival times P[j] for j in 0..n (P[n]: the barrier), graph launches not counted, and the GPU
 * time of the operations before j, Q[j]. */
static void arrivals(const ag_optime_t *t, uint32_t n, uint64_t *P, uint64_t *Q)
{
    P[0] = Q[0] = 0;
    for (uint32_t i = 0; i < n; i++) {
        P[i + 1] = P[i] + t[i].host_ns;
        Q[i + 1] = Q[i] + t[i].gpu_ns;
    }
}

/* When the chunk that ends at `end` is launched, with `before` graph launches made earlier. */
static uint64_t launch_at(const uint64_t *P, uint32_t n, uint32_t end, uint32_t before, const ag_plan_params_t *p)
{
    return (end < n ? P[end - 1] : P[n]) + (uint64_t)before * p->launch_ns;
}

uint64_t ag_plan_simulate(const ag_optime_t *t, uint32_t n, const uint32_t *ends, uint32_t nends,
                          const ag_plan_params_t *p)
{
    if (!n || !nends || ends[nends - 1] != n)
        return UINT64_MAX;
    uint64_t *P = malloc(sizeof *P * 2 * ((size_t)n + 1));
    if (!P)
        return UINT64_MAX;
    uint64_t *Q = P + n + 1;
    arrivals(t, n, P, Q);
    uint64_t gpu = 0;
    uint32_t from = 0;
    for (uint32_t c = 0; c < nends; c++) {
        uint32_t end = ends[c];
        if (end <= from || end > n) {
            free(P);
            return UINT64_MAX;
        }
        gpu = max64(gpu, launch_at(P, n, end, c, p) + p->start_ns) + (Q[end] - Q[from]) + p->graph_gpu_ns;
        from = end;
    }
    uint64_t total = max64(P[n] + (uint64_t)nends * p->launch_ns, gpu);
    free(P);
    return total;
}

uint32_t ag_plan_best(const ag_optime_t *t, uint32_t n, const ag_plan_params_t *p, uint32_t *ends, uint32_t cap,
                      uint64_t *time)
{
    if (!n || n > AG_PLAN_MAX_OPS || !p->chunk_max)
        return 0;
    uint32_t W = p->chunk_max;
    uint32_t C = (n + W - 1) / W + AG_PLAN_EXTRA_CHUNKS; /* more chunks than that never paid in the samples */
    if (C > n)
        C = n;
    if (C > cap)
        C = cap;
    size_t cols = (size_t)n + 1;
    uint64_t *P = malloc(sizeof *P * 2 * cols);
    uint64_t *F = malloc(sizeof *F * cols * ((size_t)C + 1)); /* F[c][j]: earliest GPU finish, c chunks ending at j */
    uint16_t *from = calloc(cols * ((size_t)C + 1), sizeof *from);
    if (!P || !F || !from) {
        free(P);
        free(F);
        free(from);
        return 0;
    }
    uint64_t *Q = P + cols;
    arrivals(t, n, P, Q);
    memset(F, 0xff, sizeof *F * cols * ((size_t)C + 1)); /* UINT64_MAX: not reachable */
    F[0] = 0; /* after a real barrier the GPU is idle */
    uint64_t best = UINT64_MAX;
    uint32_t best_c = 0;
    for (uint32_t c = 1; c <= C; c++) {
        const uint64_t *prev = F + cols * (c - 1);
        uint64_t *cur = F + cols * c;
        uint16_t *fr = from + cols * c;
        for (uint32_t j = c; j <= n; j++) {
            uint64_t start_min = launch_at(P, n, j, c - 1, p) + p->start_ns;
            uint32_t lo = j > W ? j - W : 0;
            if (lo < c - 1)
                lo = c - 1; /* c - 1 chunks end at c - 1 at the earliest */
            for (uint32_t i = j - 1;; i--) {
                if (prev[i] != UINT64_MAX) {
                    uint64_t f = max64(prev[i], start_min) + (Q[j] - Q[i]) + p->graph_gpu_ns;
                    if (f < cur[j]) {
                        cur[j] = f;
                        fr[j] = (uint16_t)i;
                    }
                }
                if (i == lo)
                    break;
            }
        }
        if (cur[n] != UINT64_MAX) {
            uint64_t total = max64(P[n] + (uint64_t)c * p->launch_ns, cur[n]);
            if (total < best) { /* ties go to fewer chunks */
                best = total;
                best_c = c;
            }
        }
    }
    if (best_c) {
        uint32_t j = n;
        for (uint32_t c = best_c; c >= 1; c--) {
            ends[c - 1] = j;
            j = from[cols * c + j];
        }
        *time = best;
    }
    free(P);
    free(F);
    free(from);
    return best_c;
}
