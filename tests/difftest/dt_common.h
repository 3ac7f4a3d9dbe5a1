/* dt_common.h: shared by the differential tests (difftest.c, directed.c): the PRNG, the FNV-1a
 * checksum every observation is folded into, and the call wrapper that folds every return code.
 * Header-only on purpose: two small test programs, no library of their own. */
#ifndef DT_COMMON_H
#define DT_COMMON_H

#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define DT_FNV_OFFSET 0xcbf29ce484222325ull
#define DT_FNV_PRIME 0x100000001b3ull

static inline uint64_t dt_fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * DT_FNV_PRIME;
    return h;
}
static inline uint64_t dt_fnv_u64(uint64_t h, uint64_t v) { return dt_fnv(h, &v, sizeof(v)); }

/* The shim's autograph_pause where it is loaded (the plain run: NULL). Needs _GNU_SOURCE (RTLD_DEFAULT). */
typedef int (*dt_pause_fn_t)(int);
static inline dt_pause_fn_t dt_pause_fn(void)
{
    dt_pause_fn_t f = NULL;
    *(void **)&f = dlsym(RTLD_DEFAULT, "autograph_pause");
    return f;
}

/* splitmix64: tiny, seedable, and identical on every platform, so a seed names one program. */
typedef struct { uint64_t s; } dt_rng_t;
static inline uint64_t dt_next(dt_rng_t *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static inline unsigned dt_below(dt_rng_t *r, unsigned n) { return n ? (unsigned)(dt_next(r) % n) : 0; }
static inline int dt_range(dt_rng_t *r, int lo, int hi) { return lo + (int)dt_below(r, (unsigned)(hi - lo + 1)); }
static inline int dt_chance(dt_rng_t *r, unsigned pct) { return dt_below(r, 100) < pct; }
static inline float dt_unit(dt_rng_t *r) { return (float)(dt_next(r) >> 40) / (float)(1u << 24); }
static inline uint64_t dt_mix(uint64_t a, uint64_t b)
{
    dt_rng_t r = {a * 0x2545f4914f6cdd1dull ^ b};
    return dt_next(&r);
}

/* Keeps values bounded (-4, 4) so that long programs never saturate to inf/NaN, which would hide
 * later differences. */
static inline float dt_squash(float x) { return 4.0f * x / (4.0f + (x < 0 ? -x : x)); }

/* Every call's return code goes into the checksum; an unexpected failure is also counted so a
 * generator bug (an invalid program) is not mistaken for a passing comparison. */
typedef struct {
    uint64_t hash;
    int errors;
    int verbose;
    const char *who;
} dt_sum_t;

/* DT_TRACE_SEED (difftest.c): every return code of the traced program, with the checksum after it, to stderr */
static int dt_trace_on;
static inline CUresult dt_check(dt_sum_t *s, CUresult rc, CUresult want, const char *what, int line)
{
    s->hash = dt_fnv_u64(s->hash, (uint64_t)rc);
    if (dt_trace_on) fprintf(stderr, "T %d rc %d %016llx\n", line, (int)rc, (unsigned long long)s->hash);
    if (rc != want) {
        s->errors++;
        if (s->errors <= 5)
            fprintf(stderr, "difftest: %s: line %d: %s returned %d, expected %d\n", s->who, line, what, (int)rc,
                    (int)want);
    }
    return rc;
}
static inline CUresult dt_check_query(dt_sum_t *s, CUresult rc, const char *what, int line)
{
    return dt_check(s, rc, rc == CUDA_ERROR_NOT_READY ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS, what, line);
}
#define DT_CK(sum, call) dt_check((sum), (call), CUDA_SUCCESS, #call, __LINE__)
/* a query: NOT_READY is a legal answer (and must be the same answer with the shim) */
#define DT_CKQ(sum, call) dt_check_query((sum), (call), #call, __LINE__)
#define DT_CKE(sum, call, want) dt_check((sum), (call), (want), #call, __LINE__)

#endif
