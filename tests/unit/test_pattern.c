/* Unit tests of pattern detection on synthetic signature streams: a loop with a sync per iteration,
 * alternation, nesting, a loop that never syncs, noise, a period that drifts once and settles, shape
 * changes back and forth, and a stream that never repeats. A small simulator plays the engine: it
 * defers from the candidates at each chunk start and counts operations that a graph would replay. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pattern.h"

#define BARRIER 0

typedef struct {
    ag_learner_t l;
    ag_variant_t *cands[AG_MAX_CANDIDATES];
    int ncand, nmatch;
    int wide; /* more candidates than are matched at once: the chunk's first operation chooses */
    ag_variant_t *match[AG_MAX_CANDIDATES];
    long ops, replayed, fallbacks, chosen;
    long replayed_single; /* chunks of one operation replayed */
    uint32_t lens[64]; /* lengths of the chunks closed since the last barrier */
    int nlens;
    int no_rename;     /* never rename a segment's point (ag_learner_rename), as the engine would */
} sim_t;

static void set_cands(sim_t *s, int n)
{
    s->ncand = n;
    memcpy(s->match, s->cands, sizeof s->cands);
    s->nmatch = s->ncand;
}

static void refresh(sim_t *s)
{
    int n = ag_learner_candidates(&s->l, s->cands);
    s->wide = n < 0;
    set_cands(s, n < 0 ? 0 : n);
}

static void completed(sim_t *s, ag_variant_t *v)
{
    for (int i = 0; i < s->nmatch; i++)
        if (s->match[i] == v) {
            s->replayed += v->len;
            s->replayed_single += v->len == 1;
            ag_learner_succeeded(v);
        }
}

static void fail(sim_t *s)
{
    if (s->ncand)
        s->fallbacks++;
    ag_learner_failed(&s->l, s->cands, s->ncand);
    s->ncand = s->nmatch = 0;
}

/* At a chunk's start where more candidates may follow than are matched at once: those whose first operation
 * is sig (the engine's choose_by_first). */
static void choose(sim_t *s, uint64_t sig)
{
    if (!s->wide)
        return;
    s->wide = 0;
    if (s->l.chunk_pos == 0) {
        set_cands(s, ag_learner_candidates_first(&s->l, s->cands, sig));
        s->chosen += s->ncand > 0;
    }
}

/* One operation of signature sig and shape-free signature sf (BARRIER: a barrier). */
static void sim_op_sf(sim_t *s, uint64_t sig, uint64_t sf)
{
    s->ops++;
    if (sig == BARRIER) {
        ag_variant_t *v = ag_learner_barrier(&s->l, 7, 0);
        s->nlens = 0;
        if (s->nmatch && v && v->ends_at_barrier)
            completed(s, v);
        refresh(s);
        return;
    }
    choose(s, sig);
    /* a segment's first operation that no candidate begins with: renamed, as the engine's op_arrive does */
    if (!s->no_rename && s->l.seg_pos == 0 && (s->l.rename_to[0] | s->l.rename_to[1])) {
        int expected = 0;
        for (int i = 0; i < s->nmatch; i++)
            expected |= s->match[i]->len && s->match[i]->sigs[0] == sig;
        if (!expected && ag_learner_rename(&s->l, sig)) {
            refresh(s);
            choose(s, sig);
        }
    }
    if (s->nmatch) {
        int k = 0;
        for (int i = 0; i < s->nmatch; i++)
            if (s->match[i]->len > s->l.chunk_pos && s->match[i]->sigs[s->l.chunk_pos] == sig)
                s->match[k++] = s->match[i];
        s->nmatch = k;
        if (!k)
            fail(s);
    }
    if (s->l.shape_free_seeds) /* as the engine calls them */
        ag_learner_push_shape_free(&s->l, sf);
    int r = ag_learner_push(&s->l, sig);
    if (r == 1 && s->nlens < 64)
        s->lens[s->nlens++] = s->l.chunk_pos;
    if (r == 1) {
        ag_variant_t *v = ag_learner_close(&s->l);
        if (s->nmatch && v)
            completed(s, v);
        else if (s->nmatch)
            fail(s);
        refresh(s);
    } else if (r == 2) {
        ag_variant_t *v = ag_learner_barrier(&s->l, 0, 1);
        if (s->nmatch && v)
            completed(s, v);
        else if (s->nmatch)
            fail(s);
        refresh(s);
    }
}

/* An operation whose signature is all there is to it (its shape-free signature is itself). */
static void sim_op(sim_t *s, uint64_t sig)
{
    sim_op_sf(s, sig, sig);
}

static void sim_init_warm(sim_t *s, uint32_t chunk, uint32_t first, uint32_t warmup)
{
    memset(s, 0, sizeof *s);
    CHECK(ag_learner_init(&s->l, chunk, first, warmup, 512, NULL, NULL) == 0);
    refresh(s);
}

static void sim_init_first(sim_t *s, uint32_t chunk, uint32_t first)
{
    sim_init_warm(s, chunk, first, 2);
}

static void sim_init(sim_t *s, uint32_t chunk)
{
    sim_init_first(s, chunk, 8);
}

static double frac(const sim_t *s)
{
    return (double)s->replayed / (double)s->ops;
}

/* Signature of kernel k at "shape" z. */
static uint64_t K(int k, int z)
{
    return ag_mix(1000 + (uint64_t)k, (uint64_t)z);
}

/* Kernel k at any shape. */
static uint64_t K_any(int k)
{
    return 1000 + (uint64_t)k;
}

/* Kernel k at shape z, with its shape-free signature (as the engine gives them). */
static void kop(sim_t *s, int k, int z)
{
    sim_op_sf(s, K(k, z), K_any(k));
}

static void iteration(sim_t *s, int n, int z, int sync)
{
    for (int i = 0; i < n; i++)
        kop(s, i % 17, z);
    if (sync)
        sim_op(s, BARRIER);
}


/* ---- modeled chunk plans (plan.c) ---- */

static const ag_plan_params_t PLAN_P = {6000, 3000, 2000, 128};

static void fill(ag_optime_t *t, uint32_t from, uint32_t to, uint32_t host_ns, uint32_t gpu_ns)
{
    for (uint32_t i = from; i < to; i++)
        t[i].host_ns = host_ns, t[i].gpu_ns = gpu_ns;
}

/* The model's time of every plan of n <= 12 operations (each set of cuts; chunks of at most chunk_max),
 * the least of them. */
static uint64_t brute_force(const ag_optime_t *t, uint32_t n, const ag_plan_params_t *p)
{
    uint64_t best = UINT64_MAX;
    uint32_t ends[12];
    for (uint32_t mask = 0; mask < 1u << (n - 1); mask++) {
        uint32_t k = 0, from = 0, ok = 1;
        for (uint32_t i = 1; i <= n; i++)
            if (i == n || (mask >> (i - 1) & 1)) {
                ok &= i - from <= p->chunk_max;
                ends[k++] = i;
                from = i;
            }
        uint64_t v = ok ? ag_plan_simulate(t, n, ends, k, p) : UINT64_MAX;
        if (v < best)
            best = v;
    }
    return best;
}

static void test_plan_model(void)
{
    ag_optime_t t[200];
    uint32_t ends[200], def[200];
    uint64_t tb;

    /* The PyTorch step's shape: Python between launches (30 us each), the GPU far ahead (4.5 us per
     * operation). Few chunks; the last one short; clearly ahead of the halving plan's ten launches. */
    fill(t, 0, 140, 30000, 4500);
    uint32_t nb = ag_plan_best(t, 140, &PLAN_P, ends, 200, &tb);
    uint32_t nd = ag_plan_default(140, 128, 8, 8, def, 200);
    uint64_t td = ag_plan_simulate(t, 140, def, nd, &PLAN_P);
    CHECK(nb >= 2 && nb <= 4);
    CHECK(nd >= 8);
    CHECK(ends[nb - 1] == 140 && 140 - ends[nb - 2] <= 2);
    CHECK(tb == ag_plan_simulate(t, 140, ends, nb, &PLAN_P));
    CHECK(tb + 4 * PLAN_P.launch_ns < td);
    for (uint32_t i = 1; i < nb; i++)
        CHECK(ends[i] > ends[i - 1] && ends[i] - ends[i - 1] <= 128);

    /* memops' shape: copies, then the host works for 40 us (it fills the next input), then kernels and
     * the sync. A cut falls right before the host's long gap, so the copies run during it. */
    const uint32_t host[8] = {1000, 1000, 1000, 40000, 1000, 1000, 1000, 1000};
    const uint32_t gpu[8] = {2000, 2000, 5000, 5000, 3000, 3000, 3000, 5000};
    for (int i = 0; i < 8; i++)
        t[i].host_ns = host[i], t[i].gpu_ns = gpu[i];
    nb = ag_plan_best(t, 8, &PLAN_P, ends, 200, &tb);
    int cut4 = 0;
    for (uint32_t i = 0; i < nb; i++)
        cut4 |= ends[i] == 4;
    CHECK(cut4);
    nd = ag_plan_default(8, 128, 8, 8, def, 200);
    CHECK(nd == 1 && def[0] == 8);
    CHECK(tb + 8000 <= ag_plan_simulate(t, 8, def, nd, &PLAN_P));

    /* Heavy work at the end (AdamW's multi-tensor kernels come back to back, the GPU slower than the
     * host there): the cuts come thick toward the end, the last chunk is at most three operations, and the model
     * beats the halving plan, whose first half is cut up needlessly. */
    fill(t, 0, 125, 30000, 4000);
    fill(t, 125, 140, 15000, 20000);
    nb = ag_plan_best(t, 140, &PLAN_P, ends, 200, &tb);
    nd = ag_plan_default(140, 128, 8, 1, def, 200);
    CHECK(nb >= 4 && ends[0] >= 100 && ends[nb - 2] >= 137);
    CHECK(tb + 4 * PLAN_P.launch_ns < ag_plan_simulate(t, 140, def, nd, &PLAN_P));

    /* GPU-bound work: never worse than the halving plan in the model. */
    fill(t, 0, 200, 500, 5000);
    nb = ag_plan_best(t, 200, &PLAN_P, ends, 200, &tb);
    nd = ag_plan_default(200, 128, 8, 8, def, 200);
    CHECK(nb > 0 && tb <= ag_plan_simulate(t, 200, def, nd, &PLAN_P));

    /* The dynamic programme finds the model's best plan: against every plan of small random segments. */
    uint64_t r = 12345;
    int agree = 0;
    for (int trial = 0; trial < 300; trial++) {
        uint32_t n = 1 + (uint32_t)(ag_mix(r, (uint64_t)trial) % 12);
        for (uint32_t i = 0; i < n; i++) {
            r = ag_mix(r, i);
            t[i].host_ns = (uint32_t)(r % 40000);
            t[i].gpu_ns = (uint32_t)((r >> 20) % 30000);
        }
        ag_plan_params_t p = {(uint32_t)(1000 + r % 9000), (uint32_t)(r % 5000), (uint32_t)(r >> 24) % 3000,
                              1 + (uint32_t)(r >> 40) % 6};
        nb = ag_plan_best(t, n, &p, ends, 200, &tb);
        agree += nb > 0 && tb == brute_force(t, n, &p) && tb == ag_plan_simulate(t, n, ends, nb, &p);
    }
    CHECK(agree == 300);

    /* Not a plan: the model refuses it. Too long a segment: no modeled plan. */
    uint32_t bad[2] = {3, 2};
    CHECK(ag_plan_simulate(t, 5, bad, 2, &PLAN_P) == UINT64_MAX);
    CHECK(ag_plan_best(t, AG_PLAN_MAX_OPS + 1, &PLAN_P, ends, 200, &tb) == 0);
}

/* The learner takes a modeled plan from a timing with per-operation times and cuts chunks there; with
 * AUTOGRAPH_CHUNK_PLAN=halving, or where the model gains too little, it keeps the halving plan. */
static void test_plan_learner(void)
{
    sim_t s;
    ag_optime_t t[140];
    fill(t, 0, 140, 30000, 4500);
    const uint32_t halving[] = {8, 8, 16, 32, 38, 19, 10, 5, 2, 1, 1}; /* tail_min 1 (4.5 us per op) */
    for (int model = 0; model < 2; model++) {
        sim_init(&s, 128);
        s.l.model_plans = (uint8_t)model;
        for (int it = 0; it < 6; it++)
            iteration(&s, 140, 0, 1);
        ag_learner_timing(&s.l, s.l.seg_seed, 140, 140ull * 4500, 140ull * 30000, t, &PLAN_P);
        CHECK(s.l.segments_timed == 1 && s.l.segments_planned == (uint64_t)model);
        uint32_t ends[200], want[200];
        uint64_t tb;
        uint32_t nb = ag_plan_best(t, 140, &PLAN_P, ends, 200, &tb);
        for (uint32_t i = 0; i < nb; i++)
            want[i] = ends[i] - (i ? ends[i - 1] : 0);
        iteration(&s, 140, 0, 1); /* its first chunk was planned before the timing came */
        iteration(&s, 140, 0, 0); /* the chunks closed by the plan (the last one too: it ends at 140) */
        if (model) {
            CHECK(s.nlens == (int)nb);
            for (int i = 0; i < s.nlens; i++)
                CHECK(s.lens[i] == want[i]);
        } else {
            CHECK(s.nlens == (int)(sizeof halving / sizeof *halving));
            for (int i = 0; i < s.nlens; i++)
                CHECK(s.lens[i] == halving[i]);
        }
        /* replay goes on with the new cuts: the segment ended identically warm-up times in a row, so a
         * chunk the modeled plan cut is replayed from its second sighting, the next iteration (the halving
         * plan's chunks were seen before) */
        long before = s.replayed;
        sim_op(&s, BARRIER);
        iteration(&s, 140, 0, 1);
        CHECK(s.replayed - before == 140);
        for (int it = 0; it < 5; it++)
            iteration(&s, 140, 0, 1);
        CHECK(s.replayed - before == 6 * 140);
        CHECK(s.fallbacks == 0);
        /* another length for the segment, once: the plan still expects 140 (one length between others, such
         * as an evaluation at a training step's point, does not move it); twice in a row: the halving plan
         * is back for it */
        iteration(&s, 100, 0, 1);
        iteration(&s, 100, 0, 0);
        if (model) {
            for (int i = 0; i < s.nlens; i++)
                CHECK(s.lens[i] == want[i]);
        } else {
            CHECK(s.nlens == 4); /* 8 8 16 32 of the halving plan for 140 (the next would end at 102) */
        }
        sim_op(&s, BARRIER);
        iteration(&s, 100, 0, 0);
        CHECK(s.nlens >= 4 && s.lens[0] == 8 && s.lens[1] == 8);
        sim_op(&s, BARRIER);
        ag_learner_destroy(&s.l);
    }
    /* The GPU sets the pace (its time more than half the host's): the modeled plan the segment had goes,
     * and the ramp stays with no tail (the GPU has work queued at the barrier): 8 8 16 32 64 12. */
    sim_init(&s, 128);
    s.l.model_plans = 1;
    for (int it = 0; it < 6; it++)
        iteration(&s, 140, 0, 1);
    ag_learner_timing(&s.l, s.l.seg_seed, 140, 140ull * 4500, 140ull * 30000, t, &PLAN_P);
    CHECK(s.l.segments_planned == 1 && s.l.segments_gpu_paced == 0 && ag_learner_seglen(&s.l, s.l.seg_seed)->nends > 0);
    CHECK(!ag_learner_seglen(&s.l, s.l.seg_seed)->gpu_paced); /* the issuer may launch its graphs */
    fill(t, 0, 140, 30000, 15001);
    ag_learner_timing(&s.l, s.l.seg_seed, 140, 140ull * 15001, 140ull * 30000, t, &PLAN_P);
    CHECK(s.l.segments_planned == 2 && s.l.segments_gpu_paced == 1);
    CHECK(ag_learner_seglen(&s.l, s.l.seg_seed)->gpu_paced); /* the program's thread launches them */
    const uint32_t paced[] = {8, 8, 16, 32, 64, 12};
    const ag_seglen_t *sl = ag_learner_seglen(&s.l, s.l.seg_seed);
    CHECK(sl->nends == 6 && sl->plan_len == 140);
    for (uint32_t i = 0; i < 6 && i < sl->nends; i++)
        CHECK(sl->ends[i] - (i ? sl->ends[i - 1] : 0) == paced[i]);
    iteration(&s, 140, 0, 1);
    iteration(&s, 140, 0, 0); /* the chunks closed by the plan */
    CHECK(s.nlens == 6);
    for (int i = 0; i < s.nlens && i < 6; i++)
        CHECK(s.lens[i] == paced[i]);
    ag_learner_destroy(&s.l);
    /* The same timing with the halving plan: the tail halves (down to one operation of 15 us). */
    sim_init(&s, 128);
    for (int it = 0; it < 6; it++)
        iteration(&s, 140, 0, 1);
    ag_learner_timing(&s.l, s.l.seg_seed, 140, 140ull * 15001, 140ull * 30000, t, &PLAN_P);
    CHECK(s.l.segments_planned == 0 && ag_learner_seglen(&s.l, s.l.seg_seed)->nends == 0);
    iteration(&s, 140, 0, 1);
    iteration(&s, 140, 0, 0);
    CHECK(s.nlens > 6 && s.lens[s.nlens - 1] == 1);
    ag_learner_destroy(&s.l);
    fill(t, 0, 140, 30000, 4500);

    /* Little to gain (the GPU's work is a fraction of a launch): the halving plan stays. */
    fill(t, 0, 140, 30000, 10);
    sim_init(&s, 128);
    s.l.model_plans = 1;
    for (int it = 0; it < 6; it++)
        iteration(&s, 140, 0, 1);
    ag_learner_timing(&s.l, s.l.seg_seed, 140, 1400, 140ull * 30000, t, &PLAN_P);
    CHECK(s.l.segments_planned == 0);
    ag_learner_destroy(&s.l);
}

/* The modeled plan on trial (plan_trials, AUTOGRAPH_CHUNK_PLAN=model): from the timing on, the segment's
 * sightings alternate between the modeled plan and the halving plan, both replayed with no fallback once
 * each plan's chunks were learned; each replayed sighting's time pairs with the one before it of the
 * other plan (a second time of one plan takes the first's place; another length, no time, no trial: not
 * counted). At the AG_TRIAL_PAIRS-th pair the median ratio is the verdict (a few pairs the other way do
 * not move it), and the segment takes it at its next end: the modeled plan for good where it was ahead,
 * else the halving plan, and a later timing does not bring the modeled plan back. Without trials
 * (model_untried) the modeled plan is simply kept (test_plan_learner). */
static void test_plan_trial(void)
{
    ag_optime_t t[140];
    fill(t, 0, 140, 30000, 4500);
    const uint32_t halving[] = {8, 8, 16, 32, 38, 19, 10, 5, 2, 1, 1};
    uint32_t ends[200], model[200];
    uint64_t tb;
    uint32_t nb = ag_plan_best(t, 140, &PLAN_P, ends, 200, &tb);
    for (uint32_t i = 0; i < nb; i++)
        model[i] = ends[i] - (i ? ends[i - 1] : 0);
    CHECK(nb > 0 && nb != sizeof halving / sizeof *halving);
    for (int lose = 0; lose < 2; lose++) {
        sim_t s;
        sim_init(&s, 128);
        s.l.model_plans = s.l.plan_trials = 1;
        for (int it = 0; it < 6; it++)
            iteration(&s, 140, 0, 1);
        CHECK(s.l.ended_side == -1); /* no trial yet */
        uint64_t seed = s.l.seg_seed;
        ag_learner_timing(&s.l, seed, 140, 140ull * 4500, 140ull * 30000, t, &PLAN_P);
        CHECK(s.l.segments_planned == 1 && s.l.trials_begun == 1 && ag_learner_seglen(&s.l, seed)->trial);
        iteration(&s, 140, 0, 1); /* its first chunk was planned before the timing came */
        CHECK(s.l.ended_seed == seed && s.l.ended_side == 0);
        uint32_t ratio = 0;
        /* the plans take turns: the modeled plan's chunks were learned at their first sighting under it,
         * the halving plan's before the timing but for its tail (the timing set how far it shrinks: the
         * chunks of its last 4 operations are new), replayed from their third sighting on; from the
         * fourth sighting on everything is replayed */
        long replayed = 0, fallbacks = 0;
        int verdict = 0;
        for (int it = 0; it < 2 * AG_TRIAL_PAIRS + 4 && !verdict; it++) {
            if (it == 3)
                replayed = s.replayed, fallbacks = s.fallbacks;
            iteration(&s, 140, 0, 0);
            int side = it % 2 == 0; /* 1: the halving plan */
            const uint32_t *want = side ? halving : model;
            int n = side ? (int)(sizeof halving / sizeof *halving) : (int)nb, same = s.nlens == n;
            for (int i = 0; same && i < n; i++)
                same = s.lens[i] == want[i];
            CHECK(same);
            sim_op(&s, BARRIER);
            CHECK(s.l.ended_seed == seed && s.l.ended_side == side);
            if (it < 3)
                continue; /* not replayed whole yet: the engine times no such sighting */
            if (it == 3) { /* not counted: another length, no time, an unknown segment */
                CHECK(!ag_learner_trial_time(&s.l, seed, 139, side, 1000000, &ratio));
                CHECK(!ag_learner_trial_time(&s.l, seed, 140, side, 0, &ratio));
                CHECK(!ag_learner_trial_time(&s.l, seed ^ 1, 140, side, 1000000, &ratio));
                CHECK(!ag_learner_trial_time(&s.l, seed, 140, -1, 1000000, &ratio));
                CHECK(!ag_learner_trial_time(&s.l, seed, 140, side, 5000000, &ratio)); /* replaced below */
            }
            /* the modeled plan 2% behind (lose) or ahead; one pair in four the other way by 10% */
            int behind = lose != ((it - 1) / 2 % 4 == 3);
            uint64_t ns = side ? 1000000 : behind ? (lose ? 1020000 : 1100000) : (lose ? 900000 : 980000);
            verdict = ag_learner_trial_time(&s.l, seed, 140, side, ns, &ratio);
        }
        CHECK(s.l.trial_pairs == AG_TRIAL_PAIRS && verdict == (lose ? -1 : 1));
        CHECK(lose ? ratio > 1024 : ratio < 1024);
        CHECK(s.replayed - replayed == (long)(2 * AG_TRIAL_PAIRS) * 140 && s.fallbacks == fallbacks);
        CHECK(ag_learner_seglen(&s.l, seed)->trial && s.l.trials_kept + s.l.trials_dropped == 0);
        /* the verdict comes at the next end: the sighting under way keeps its plan */
        iteration(&s, 140, 0, 0);
        CHECK(s.nlens == (int)nb); /* the modeled plan's turn */
        sim_op(&s, BARRIER);
        CHECK(s.l.trials_kept == (uint64_t)!lose && s.l.trials_dropped == (uint64_t)lose);
        CHECK(!ag_learner_seglen(&s.l, seed)->trial && s.l.ended_side == 0);
        for (int it = 0; it < 3; it++) {
            iteration(&s, 140, 0, 0);
            CHECK(s.nlens == (lose ? (int)(sizeof halving / sizeof *halving) : (int)nb));
            sim_op(&s, BARRIER);
            CHECK(s.l.ended_side == -1);
        }
        /* timed again: the plan a trial dropped is refused; one it kept is taken (and tried) again */
        ag_learner_timing(&s.l, seed, 140, 140ull * 4500, 140ull * 30000, t, &PLAN_P);
        CHECK(s.l.models_refused == (uint64_t)lose && s.l.segments_planned == 1u + !lose);
        CHECK(ag_learner_seglen(&s.l, seed)->nends == (lose ? 0 : nb));
        CHECK(ag_learner_seglen(&s.l, seed)->trial == !lose && s.l.trials_begun == 1u + !lose);
        ag_learner_destroy(&s.l);
    }
}

/* The pace from replay (ag_learner_waited): a segment no timing planned whose barrier waited more than
 * half the time the host took to issue it, AG_PACED_WAITS replayed sightings in a row, gets the ramp
 * with no tail (the plan a timing gives a segment the GPU paces); a shorter wait starts the count again;
 * after AG_WAIT_WEIGHED sightings it is weighed no more. Not a segment a timing judged, not another
 * length, not one that ends at a virtual barrier, not with the halving plan. */
static void test_plan_waits(void)
{
    sim_t s;
    const uint32_t paced[] = {8, 8, 16, 32, 64, 12};
    sim_init(&s, 128);
    s.l.model_plans = 1;
    for (int it = 0; it < 6; it++)
        iteration(&s, 140, 0, 1);
    uint64_t seed = s.l.seg_seed;
    CHECK(ag_learner_weighs_wait(&s.l, seed, 140) && !ag_learner_weighs_wait(&s.l, seed, 139));
    CHECK(!ag_learner_waited(&s.l, seed, 139, 10000, 50000)); /* another length: not weighed */
    CHECK(!ag_learner_waited(&s.l, seed, 140, 10000, 50000));
    CHECK(!ag_learner_waited(&s.l, seed, 140, 10000, 50000));
    CHECK(!ag_learner_waited(&s.l, seed, 140, 10000, 5000)); /* half the host's: the count starts again */
    CHECK(!ag_learner_waited(&s.l, seed, 140, 10000, 50000));
    CHECK(!ag_learner_waited(&s.l, seed, 140, 10000, 50000));
    CHECK(s.l.segments_paced_by_wait == 0 && ag_learner_seglen(&s.l, seed)->nends == 0);
    CHECK(ag_learner_waited(&s.l, seed, 140, 10000, 5001));
    CHECK(s.l.segments_paced_by_wait == 1 && s.l.segments_gpu_paced == 1);
    const ag_seglen_t *sl = ag_learner_seglen(&s.l, seed);
    CHECK(sl->gpu_paced && sl->nends == 6 && sl->plan_len == 140);
    for (uint32_t i = 0; i < 6 && i < sl->nends; i++)
        CHECK(sl->ends[i] - (i ? sl->ends[i - 1] : 0) == paced[i]);
    CHECK(!ag_learner_weighs_wait(&s.l, seed, 140)); /* decided */
    CHECK(!ag_learner_waited(&s.l, seed, 140, 10000, 50000) && s.l.segments_paced_by_wait == 1);
    /* the new cuts: graphed from their second sighting (the segment ended identically warm-up times) */
    iteration(&s, 140, 0, 1);
    iteration(&s, 140, 0, 0);
    CHECK(s.nlens == 6);
    for (int i = 0; i < s.nlens && i < 6; i++)
        CHECK(s.lens[i] == paced[i]);
    long before = s.replayed;
    sim_op(&s, BARRIER);
    for (int it = 0; it < 4; it++)
        iteration(&s, 140, 0, 1);
    CHECK(s.replayed - before == 4 * 140 && s.fallbacks == 0);
    ag_learner_destroy(&s.l);

    /* host-paced all along: weighed AG_WAIT_WEIGHED times, then no more */
    sim_init(&s, 128);
    s.l.model_plans = 1;
    for (int it = 0; it < 6; it++)
        iteration(&s, 140, 0, 1);
    seed = s.l.seg_seed;
    for (int i = 0; i < AG_WAIT_WEIGHED; i++)
        CHECK(!ag_learner_waited(&s.l, seed, 140, 10000, i % 2 ? 500 : 6000));
    CHECK(!ag_learner_weighs_wait(&s.l, seed, 140));
    for (int i = 0; i < AG_PACED_WAITS; i++)
        CHECK(!ag_learner_waited(&s.l, seed, 140, 10000, 50000));
    CHECK(s.l.segments_paced_by_wait == 0 && ag_learner_seglen(&s.l, seed)->nends == 0);
    ag_learner_destroy(&s.l);

    /* with the halving plan asked for (model_plans 0), nothing is weighed */
    sim_init(&s, 128);
    for (int it = 0; it < 6; it++)
        iteration(&s, 140, 0, 1);
    seed = s.l.seg_seed;
    CHECK(!ag_learner_weighs_wait(&s.l, seed, 140));
    for (int i = 0; i < AG_PACED_WAITS; i++)
        CHECK(!ag_learner_waited(&s.l, seed, 140, 10000, 50000));
    CHECK(s.l.segments_paced_by_wait == 0 && !ag_learner_seglen(&s.l, seed)->gpu_paced);
    ag_learner_destroy(&s.l);

    /* a timing judged it host-paced and gave it a modeled plan (its host time inflated by CUPTI's
     * callbacks): replay's waits overrule that, and the ramp replaces the modeled cuts; one judged
     * GPU-paced, or GPU-bound, is not weighed */
    ag_optime_t *t = calloc(140, sizeof *t);
    CHECK(t != NULL);
    for (int kind = 0; kind < 3 && t; kind++) {
        sim_init(&s, 128);
        s.l.model_plans = 1;
        s.l.bound_ratio = 8;
        for (int it = 0; it < 6; it++)
            iteration(&s, 140, 0, 1);
        seed = s.l.seg_seed;
        /* kind 0: host-paced, a gap after operation 69 that the model cuts before; 1: GPU-paced; 2:
         * GPU-bound */
        uint32_t host = kind == 0 ? 2000 : 500, gpu = kind == 0 ? 600 : kind == 1 ? 900 : 9000;
        fill(t, 0, 140, host, gpu);
        if (kind == 0)
            t[69].host_ns = 200000;
        uint64_t hsum = 0, gsum = 0;
        for (int i = 0; i < 140; i++)
            hsum += t[i].host_ns, gsum += t[i].gpu_ns;
        ag_learner_timing(&s.l, seed, 140, gsum, hsum, t, &PLAN_P);
        const ag_seglen_t *tl = ag_learner_seglen(&s.l, seed);
        CHECK(tl->gpu_bound == (kind == 2) && !tl->gpu_paced == (kind == 0));
        if (kind == 0)
            CHECK(tl->nends > 0 && !tl->gpu_paced); /* the modeled plan */
        CHECK(ag_learner_weighs_wait(&s.l, seed, 140) == (kind == 0));
        for (int i = 0; i < AG_PACED_WAITS; i++)
            CHECK(ag_learner_waited(&s.l, seed, 140, 10000, 50000) == (kind == 0 && i == AG_PACED_WAITS - 1));
        CHECK(s.l.segments_paced_by_wait == (kind == 0));
        if (kind == 0) {
            const uint32_t paced[] = {8, 8, 16, 32, 64, 12};
            CHECK(tl->gpu_paced && tl->nends == 6);
            for (uint32_t i = 0; i < 6 && i < tl->nends; i++)
                CHECK(tl->ends[i] - (i ? tl->ends[i - 1] : 0) == paced[i]);
        }
        ag_learner_destroy(&s.l);
    }
    free(t);

    /* a loop with no barrier (its segments end at virtual ones): never weighed */
    sim_init(&s, 128);
    s.l.model_plans = 1;
    for (int i = 0; i < 3000; i++)
        kop(&s, i % 50, 0);
    CHECK(s.l.period % 50 == 0);
    const ag_seglen_t *vl = ag_learner_seglen(&s.l, s.l.seg_seed);
    CHECK(vl && !vl->real_end && vl->length > 0);
    CHECK(vl && !ag_learner_weighs_wait(&s.l, s.l.seg_seed, vl->length));
    ag_learner_destroy(&s.l);
}

/* Resting (AUTOGRAPH_REST): after `after` novel segments in a row, rests of 1, 2, 4, 8 and then 16
 * segments, each followed by one learned segment that decides alone; a segment that repeats ends it and
 * the next run of novel segments starts again from 1. after = 0: never. */
static void test_rest(void)
{
    ag_rest_t r = {0};
    uint64_t c = 1000; /* a new content every segment */
    for (int i = 0; i < 31; i++)
        CHECK(ag_rest_segment(&r, 0, c++, 32) == 0);
    const uint32_t want[] = {1, 2, 4, 8, 16, 16, 16};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++)
        CHECK(ag_rest_segment(&r, 0, c++, 32) == want[i]);
    CHECK(r.rests == 7 && r.rested == 63);
    CHECK(ag_rest_segment(&r, 1, c++, 32) == 0); /* repeated: learning again */
    for (int i = 0; i < 31; i++)
        CHECK(ag_rest_segment(&r, 0, c++, 32) == 0);
    CHECK(ag_rest_segment(&r, 0, c++, 32) == 1);
    /* a repeat in between restarts the count */
    ag_rest_t q = {0};
    for (int i = 0; i < 100; i++)
        CHECK(ag_rest_segment(&q, i % 20 == 19, c++, 32) == 0);
    CHECK(q.rests == 0);
    ag_rest_t z = {0};
    for (int i = 0; i < 1000; i++)
        CHECK(ag_rest_segment(&z, 0, c++, 0) == 0);
    ag_rest_t one = {0};
    CHECK(ag_rest_segment(&one, 0, c++, 1) == 1 && ag_rest_segment(&one, 0, c++, 1) == 2);
    /* 40 syncing segments per iteration, each new in the first iteration (no chunk known yet): resting
     * may begin there, but from the second iteration on every segment's content is known again, and
     * a segment learned after a rest ends it. */
    ag_rest_t m = {0};
    uint32_t skip = 0;
    int rests_later = 0;
    for (int it = 0; it < 20; it++)
        for (uint64_t seg = 0; seg < 40; seg++) {
            if (skip) { /* sat out: the engine sees nothing of it */
                skip--;
                continue;
            }
            skip = ag_rest_segment(&m, 0, 77000 + seg, 32);
            rests_later += it >= 1 && skip;
        }
    CHECK(m.rests >= 1 && rests_later == 0);
    /* Two contents of one iteration that meet in one slot of a direct-mapped memory of 256 (as 5000 and
     * 5256 do) and more of their set in between: each is still known when it comes again. */
    ag_rest_t col = {0};
    for (int i = 0; i < 40; i++)
        CHECK(ag_rest_segment(&col, 0, 5000 + 256 * (uint64_t)(i % AG_REST_WAYS), AG_REST_WAYS + 1) == 0);
    CHECK(col.rests == 0);
}

/* Pushes n operations (signatures base, base+1, ...) and a real barrier of the given kind; returns the
 * seed of the segment that starts after it. */
static uint64_t segment(ag_learner_t *l, uint64_t base, int n, uint64_t kind)
{
    for (int i = 0; i < n; i++)
        if (ag_learner_push(l, base + (uint64_t)i) == 1)
            ag_learner_close(l);
    ag_learner_barrier(l, kind, 0);
    return l->seg_seed;
}

static unsigned slot256(uint64_t seed)
{
    return (unsigned)((seed ^ (seed >> 32)) % 256);
}

/* Two segments of one iteration whose seeds meet in one slot of a direct-mapped table of 256 (found by
 * trying barrier kinds): both keep their lengths and timings while they alternate; and a set full of
 * other segments gives up its least recently ended one. */
static void test_seglen_collision(void)
{
    ag_learner_t l;
    CHECK(ag_learner_init(&l, 128, 8, 2, 4096, NULL, NULL) == 0);
    /* A: 15 operations, then barrier kind 11; B: 1 operation, then barrier kind kb */
    uint64_t seed_b = segment(&l, 1000, 15, 11), seed_a = 0, kb = 0;
    for (uint64_t k = 12; k < 200000 && !kb; k++) {
        seed_a = segment(&l, 5000, 1, k);
        if (slot256(seed_a) == slot256(seed_b) && seed_a != seed_b)
            kb = k;
    }
    CHECK(kb != 0);
    ag_learner_destroy(&l);
    CHECK(ag_learner_init(&l, 128, 8, 2, 4096, NULL, NULL) == 0);
    for (int it = 0; it < 6; it++) {
        CHECK(segment(&l, 1000, 15, 11) == seed_b);
        CHECK(segment(&l, 5000, 1, kb) == seed_a);
        if (it == 2)
            ag_learner_timing(&l, seed_a, 15, 150000, 60000, NULL, NULL); /* A timed once */
    }
    const ag_seglen_t *a = ag_learner_seglen(&l, seed_a), *b = ag_learner_seglen(&l, seed_b);
    CHECK(a && a->length == 15 && a->real_end && a->gpu_ns_per_op == 10000);
    CHECK(b && b->length == 1);
    CHECK(l.segments_timed == 1);
    /* More segments in A's set than it has ways: the least recently ended ones go, the newest stay. */
    uint64_t seeds[AG_SEGLEN_WAYS + 2];
    int n = 0;
    for (uint64_t k = 300000; n < AG_SEGLEN_WAYS + 2 && k < 2000000; k++) {
        uint64_t sd = segment(&l, 9000, 1, k);
        if ((sd ^ (sd >> 32)) % AG_SEGLEN_SETS == (seed_a ^ (seed_a >> 32)) % AG_SEGLEN_SETS && sd != seed_a &&
            sd != seed_b) {
            segment(&l, 9100, 2, 13); /* the segment that starts at sd ends here: it takes an entry */
            seeds[n++] = sd;
        }
    }
    CHECK(n == AG_SEGLEN_WAYS + 2);
    CHECK(ag_learner_seglen(&l, seed_a) == NULL); /* ended before all of them */
    for (int i = 0; i < n; i++)
        CHECK((ag_learner_seglen(&l, seeds[i]) != NULL) == (i >= n - AG_SEGLEN_WAYS));
    ag_learner_destroy(&l);
}

/* ag_learner_expects_unguarded, right after each barrier: the engine opens the learning window ahead of a
 * segment whose first chunk comes to its warm-up-th sighting unwatched, once the segment before it
 * repeated (back to back, or as it ended the last time it started at the same point). */
/* Variants of the chunk start where the learner is now. */
static int at_start(const ag_learner_t *l)
{
    int n = 0;
    for (size_t b = 0; b < l->table.nbuckets; b++)
        for (const ag_variant_t *v = l->table.buckets[b]; v; v = v->next)
            n += v->start == l->chunk_start;
    return n;
}

/* A batch padded to one of nb sizes, in a seeded random order: nb variants follow each barrier. Up to
 * AG_MAX_VARIANTS_PER_START of them are kept; where more than AG_MAX_CANDIDATES are candidates, the
 * chunk's first operation chooses among them. pinned: the step's loss is read through page-locked memory
 * (the copy held back with the step; the sync is the one barrier) instead of a blocking copy followed by a
 * sync (two barriers, the second ending an empty segment); shape_free: AUTOGRAPH_SEGMENT_KEY=shape_free.
 * Returns the share replayed. */
static double buckets(int nb, int iters, int pinned, int shape_free, long *fallbacks, long *chosen)
{
    sim_t s;
    sim_init(&s, 128);
    s.l.shape_free_seeds = (uint8_t)shape_free;
    unsigned rng = 12345u;
    int cap = shape_free ? AG_MAX_VARIANTS_PER_START_SHAPE_FREE : AG_MAX_VARIANTS_PER_START;
    for (int it = 0; it < iters; it++) {
        rng = rng * 1103515245u + 12345u;
        iteration(&s, 40, 1 + (int)((rng >> 16) % (unsigned)nb), 1);
        if (!pinned) /* after the blocking copy's barrier, the sync's: the next step starts at the same point */
            sim_op(&s, BARRIER);
        CHECK(at_start(&s.l) <= cap);
    }
    if (!pinned && nb > AG_MAX_CANDIDATES && nb <= cap) {
        /* after the barrier: too many to match at once; the first operation of shape 3 names one */
        ag_variant_t *c[AG_MAX_CANDIDATES];
        CHECK(s.wide && ag_learner_candidates(&s.l, c) == -1);
        CHECK(ag_learner_candidates_first(&s.l, c, K(0, 3)) == 1 && c[0]->sigs[0] == K(0, 3));
        CHECK(ag_learner_candidates_first(&s.l, c, K(0, 99)) == 0);
    }
    double f = frac(&s);
    *fallbacks = s.fallbacks, *chosen = s.chosen;
    ag_learner_destroy(&s.l);
    return f;
}

static void test_buckets(void)
{
    long fb, chosen;
    /* 3 sizes: matched at once, as before (92.8% replayed, 4 fallbacks while learning) */
    CHECK(buckets(3, 300, 0, 0, &fb, &chosen) > 0.9 && chosen == 0 && fb <= 8);
    /* 8 and 16: each chunk's first operation chooses (88.4% and 83.6% replayed, 23 and 16 fallbacks;
     * where only the 4 most recently seen could be candidates, 74.1% and 68.0%, 170 and 95) */
    CHECK(buckets(8, 300, 0, 0, &fb, &chosen) > 0.85 && chosen > 200 && fb <= 40);
    CHECK(buckets(16, 300, 0, 0, &fb, &chosen) > 0.8 && chosen > 200 && fb <= 40);
    /* 24: more than are kept per start; the least recently seen make room (69.0%) */
    CHECK(buckets(24, 300, 0, 0, &fb, &chosen) > 0.5);
    /* The loss through page-locked memory, 8 sizes: the point after the step's sync is named by the step,
     * sizes and all, so 64 variants of the next step's chunks are learned apart (51.9% replayed); named
     * without its sizes, 8 (90.5%), and 24 sizes fit too (78.3%, against 2.3%). */
    double exact8 = buckets(8, 300, 1, 0, &fb, &chosen);
    CHECK(exact8 < 0.7);
    CHECK(buckets(8, 300, 1, 1, &fb, &chosen) > 0.85 && chosen > 200 && fb <= 40);
    CHECK(buckets(24, 300, 1, 0, &fb, &chosen) < 0.2);
    CHECK(buckets(24, 300, 1, 1, &fb, &chosen) > 0.6);
}

/* Text generation in outline: tokens steps a round, in order, round after round; each step's first 40
 * operations are the same for every token, the next 40 have the token's shape (attention over a cache one
 * position longer), then the step's sync. The chunk where the steps part has a variant per token after the
 * same start, all beginning with the same operation: the candidates are ranked by the chunks closed before
 * them (the previous token's last one tells them apart). Returns the share replayed. */
static double tokens(int ntok, int rounds, long *fallbacks)
{
    sim_t s;
    sim_init(&s, 128);
    s.l.shape_free_seeds = 1;
    for (int r = 0; r < rounds; r++)
        for (int t = 0; t < ntok; t++) {
            for (int i = 0; i < 40; i++)
                kop(&s, i % 17, 0);
            for (int i = 40; i < 80; i++)
                kop(&s, i % 17, 1 + t);
            sim_op(&s, BARRIER);
        }
    double f = frac(&s);
    *fallbacks = s.fallbacks;
    ag_learner_destroy(&s.l);
    return f;
}

static void test_tokens(void)
{
    long fb;
    /* 24 tokens, 10 rounds: 85.9% replayed, 23 fallbacks (all while learning); by the chain's order alone
     * (the last 4 learned), 66.2% and 183: every round the other tokens' parting chunks fell back */
    CHECK(tokens(24, 10, &fb) > 0.8 && fb <= 60);
    /* 4 tokens: matched at once, as before (81.0%, 3) */
    CHECK(tokens(4, 10, &fb) > 0.75 && fb <= 20);
}

/* A segment of one operation the same twice in a row (the copy of a result read right after each sync) is
 * never deferred: its graph would save nothing. One that comes every 4th step, where other work follows
 * the same point otherwise (a metric read now and then), stays among the point's candidates: neither it
 * nor the work that follows the point otherwise costs a fallback. */
static void test_single_op_segment(void)
{
    sim_t s;
    sim_init(&s, 64);
    for (int it = 0; it < 40; it++) {
        iteration(&s, 30, 0, 1);
        kop(&s, 77, 0);
        sim_op(&s, BARRIER);
    }
    printf("a copy after each sync: %ld of %ld operations replayed, %ld one-operation chunks\n", s.replayed, s.ops,
           s.replayed_single);
    CHECK(s.replayed_single == 0 && s.replayed >= 30 * 36 && s.fallbacks == 0);
    ag_learner_destroy(&s.l);

    long plain = 0;
    for (int logging = 0; logging < 2; logging++) {
        sim_init(&s, 64);
        for (int it = 0; it < 80; it++) {
            iteration(&s, 30, 0, 1);
            if (logging && it % 4 == 0) {
                kop(&s, 77, 0);
                sim_op(&s, BARRIER);
            }
        }
        printf("%s: %ld operations replayed, %ld fallbacks\n", logging ? "a metric read every 4th step" : "no metric",
               s.replayed, s.fallbacks);
        if (!logging)
            plain = s.replayed;
        else
            CHECK(s.replayed >= plain - 4 * 30 && s.fallbacks <= 2);
        ag_learner_destroy(&s.l);
    }
}

static void test_window_ahead(void)
{
    sim_t s;
    /* one segment per iteration: iteration 0 starts at the program's start, iteration 1 is the first
     * sighting at the loop's own start, which iteration 2 comes back to after it repeated back to back */
    sim_init(&s, 128);
    s.l.require_guard = 1; /* candidates then need the guard: refresh finds which were watched */
    CHECK(!ag_learner_expects_unguarded(&s.l));
    iteration(&s, 20, 0, 1);
    CHECK(!ag_learner_expects_unguarded(&s.l)); /* nothing known at this start */
    iteration(&s, 20, 0, 1);
    CHECK(ag_learner_expects_unguarded(&s.l)); /* its second sighting comes */
    iteration(&s, 20, 0, 1);
    CHECK(ag_learner_expects_unguarded(&s.l)); /* still unwatched */
    ag_learner_watch(&s.l, 1);
    iteration(&s, 20, 0, 1);
    ag_learner_watch(&s.l, 0);
    CHECK(s.ncand > 0 && !ag_learner_expects_unguarded(&s.l)); /* watched whole: a candidate now */
    ag_learner_destroy(&s.l);

    /* a segment of fewer operations repeating says little: not before the start it leads to */
    sim_init(&s, 128);
    for (int it = 0; it < 4; it++)
        iteration(&s, 3, 0, 1);
    CHECK(!ag_learner_expects_unguarded(&s.l));
    ag_learner_destroy(&s.l);

    /* two segments an iteration: A's start is expected once B ended as it did the time before */
    sim_init(&s, 128);
    iteration(&s, 20, 0, 1);
    iteration(&s, 10, 1, 1); /* B after A: A's start is new */
    CHECK(!ag_learner_expects_unguarded(&s.l));
    iteration(&s, 20, 0, 1); /* A at its loop start, first sighting */
    CHECK(!ag_learner_expects_unguarded(&s.l)); /* A's start (after B) had not repeated */
    iteration(&s, 10, 1, 1); /* B, ended as the last time at its start */
    CHECK(ag_learner_expects_unguarded(&s.l));
    ag_learner_destroy(&s.l);

    /* the loop's segment changes (a new shape): what follows it is not expected */
    sim_init(&s, 128);
    iteration(&s, 20, 0, 1);
    iteration(&s, 20, 0, 1);
    CHECK(ag_learner_expects_unguarded(&s.l));
    iteration(&s, 20, 5, 1);
    CHECK(!ag_learner_expects_unguarded(&s.l)); /* the segment before did not repeat */
    ag_learner_destroy(&s.l);

    /* warm-up 1: the window opens at a chunk's first sighting anyway (the engine's sighted) */
    sim_init_warm(&s, 128, 8, 1);
    for (int it = 0; it < 3; it++)
        iteration(&s, 20, 0, 1);
    CHECK(!ag_learner_expects_unguarded(&s.l));
    ag_learner_destroy(&s.l);
}

/* A kernel's family (the shape-free signature's part): one template with other arguments is one family; the
 * kernels a library picks by size are none (0); names that are not mangled function names count whole. */
static void test_name_family(void)
{
    const char *gb32 = "_ZN2at6native12_GLOBAL__N_135GammaBetaBackwardCUDAKernelTemplateIffLj32ELj32ELj256ELb0ELb1ELb0EEEvllPKT_"
                       "S5_PKT0_S8_PS3_S9_",
               *gb16 = "_ZN2at6native12_GLOBAL__N_135GammaBetaBackwardCUDAKernelTemplateIffLj32ELj16ELj128ELb0ELb1ELb0EEEvllPKT_"
                       "S5_PKT0_S8_PS3_S9_",
               *ln = "_ZN2at6native12_GLOBAL__N_128vectorized_layer_norm_kernelIffLb0EEEviT0_PKT_S6_S6_PS3_S7_S8_";
    CHECK(ag_name_family(gb32) == ag_name_family(gb16));
    CHECK(ag_name_family(gb32) != 0 && ag_name_family(gb32) != ag_name_family(ln));
    /* the parameters count no more than the template arguments; another namespace is another family */
    CHECK(ag_name_family("_ZN3foo3barIiEEvPf") == ag_name_family("_ZN3foo3barIfEEvPd"));
    CHECK(ag_name_family("_ZN3foo3barIiEEvPf") != ag_name_family("_ZN3baz3barIiEEvPf"));
    CHECK(ag_name_family("_Z4axpbPfPKfffi") == ag_name_family("_Z4axpbPdPKdddi"));
    CHECK(ag_name_family("_Z4axpbPfPKfffi") != ag_name_family("_Z4axpcPfPKfffi"));
    /* extern "C" names, std:: abbreviations and a length past the end count whole */
    CHECK(ag_name_family("axpb") != ag_name_family("axpc") && ag_name_family("axpb") != 0);
    CHECK(ag_name_family("_ZNSt3fooIiEEvv") != ag_name_family("_ZNSt3fooIfEEvv"));
    CHECK(ag_name_family("_Z99ab") != ag_name_family("_Z99ac"));
    /* picked by the problem's size: cuBLAS's nvjet kernels, GEMMs, CUTLASS, split-K reductions */
    CHECK(ag_name_family("nvjet_sm90_hsh_64x24_64x16_2x4_h_bz_bias_TNT") == 0);
    CHECK(ag_name_family("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x64") == 0);
    CHECK(ag_name_family("_ZN7cutlass6KernelINS_4gemm6kernel4GemmEEEvNT_6ParamsE") == 0);
    CHECK(ag_name_family("_Z19splitKreduce_kernelILi32ELi16EifffEv18cublasSplitKParamsIT2_E") == 0);
}

/* torch_amp.py's step in outline (the engine's test engine.amp has it on fakecuda): two micro-batches of
 * one of six sizes each, the same forward, fresh then accumulated gradients, each ending at a sync; the
 * unscale and its check, a sync; the update, skipped one time in seven, and the scale, a sync; an
 * evaluation every tenth step. A micro-batch after a skipped update or after an evaluation starts at a new
 * point (named by the segment before it): renamed after the point where it usually starts. bad: from
 * step 60 on, what follows the evaluation is other work, which begins as the first micro-batch does. */
static double amp_steps(int rename, int steps, int evals, int bad, long *renamed, long *wrong)
{
    sim_t s;
    sim_init(&s, 128);
    s.l.shape_free_seeds = 1;
    s.no_rename = !rename;
    unsigned rng = 4242u;
    for (int it = 0; it < steps; it++) {
        for (int mb = 0; mb < 2; mb++) {
            rng = rng * 1103515245u + 12345u;
            int z = 1 + (int)((rng >> 16) % 6);
            for (int k = 0; k < 8; k++) /* forward */
                kop(&s, 1 + k, z);
            for (int k = 0; k < 8; k++) /* backward */
                kop(&s, (mb ? 21 : 11) + k, z);
            sim_op(&s, BARRIER);
        }
        for (int k = 0; k < 4; k++) /* unscale, check */
            kop(&s, 31 + k, 0);
        sim_op(&s, BARRIER);
        for (int k = 0; it % 7 != 3 && k < 12; k++) /* the update */
            kop(&s, 41 + k, 0);
        kop(&s, 53, 0); /* the scale */
        sim_op(&s, BARRIER);
        if (evals && (it + 1) % 10 == 0) {
            for (int k = 0; k < 6; k++) /* evaluation */
                kop(&s, 61 + k, 0);
            sim_op(&s, BARRIER);
            if (bad && it >= 60) { /* other work that begins as the first micro-batch does */
                for (int k = 0; k < 8; k++)
                    kop(&s, 1 + k, 1);
                for (int k = 0; k < 8; k++)
                    kop(&s, 71 + k, 1);
                sim_op(&s, BARRIER);
            }
        }
    }
    double f = frac(&s);
    *renamed = (long)s.l.renamed, *wrong = (long)s.l.renames_wrong;
    ag_learner_destroy(&s.l);
    return f;
}

/* Two segments A and B in turn, each ending at a sync; then a sync with nothing before it (a module's unload,
 * say), after which A comes at a point of its own: renamed after A's usual point. B's kernels are chosen
 * (x) so that the points after A and after B fall in one set of the successor table. Returns the
 * renamings. */
static long alternate(int x, uint64_t *after_a, uint64_t *after_b)
{
    sim_t s;
    sim_init(&s, 128);
    for (int r = 0; r < 12; r++) {
        for (int k = 0; k < 4; k++)
            kop(&s, 1 + k, 0);
        sim_op(&s, BARRIER);
        *after_a = s.l.seg_seed;
        for (int k = 0; k < 2; k++)
            kop(&s, x + k, 0);
        sim_op(&s, BARRIER);
        *after_b = s.l.seg_seed;
    }
    sim_op(&s, BARRIER); /* nothing before it: the point after it is new */
    for (int k = 0; k < 4; k++)
        kop(&s, 1 + k, 0);
    sim_op(&s, BARRIER);
    long renamed = (long)s.l.renamed;
    ag_learner_destroy(&s.l);
    return renamed;
}

static void test_rename_shared_set(void)
{
    /* A's point and B's point by the hash that picks their set: those of a pair that share one; 1 run in
     * about 300 of difftest.directed.unload_others_* met such a pair (the points are named by kernel
     * handles, which move with where the driver loads them) */
    uint64_t a = 0, b = 0;
    int x = 100;
    for (; x < 100000; x += 2) {
        alternate(x, &a, &b);
        if ((a ^ (a >> 32)) % AG_SUCC_SLOTS == (b ^ (b >> 32)) % AG_SUCC_SLOTS)
            break;
    }
    CHECK(x < 100000);
    long renamed = alternate(x, &a, &b), apart = alternate(100, &a, &b);
    printf("rename, two points in one set of the successor table: %ld renamed (points apart: %ld)\n", renamed, apart);
    /* with one entry per set, the two took it from each other at every sync and A was not renamed (0) */
    CHECK(renamed == 1 && apart == 1);
}

static void test_rename(void)
{
    long renamed, wrong, renamed_e, wrong_e, renamed_bad, wrong_bad, r0, w0;
    double off = amp_steps(0, 160, 0, 0, &r0, &w0), on = amp_steps(1, 160, 0, 0, &renamed, &wrong);
    double off_e = amp_steps(0, 160, 1, 0, &r0, &w0), on_e = amp_steps(1, 160, 1, 0, &renamed_e, &wrong_e);
    double bad = amp_steps(1, 160, 1, 1, &renamed_bad, &wrong_bad);
    printf("rename: skips %.3f replayed without, %.3f with (%ld renamed, %ld wrong); with evaluations %.3f, %.3f (%ld, "
           "%ld); other work after them %.3f (%ld, %ld)\n", off, on, renamed, wrong, off_e, on_e, renamed_e, wrong_e, bad,
           renamed_bad, wrong_bad);
    /* 160 steps: with the skipped updates alone 83.4% replayed, 85.5% with renaming (21 of the 23 micro-batches
     * after a skip renamed, none wrong); with the evaluations too 81.6% and 84.4% (33 renamed, none wrong). The
     * plan of the point where an evaluation starts (the first micro-batch's) expects the micro-batch's length,
     * not the evaluation's: with the length that ended there last, 78.4% and 81.1% (29 renamed; 1 wrong: the
     * first micro-batch after the first evaluation, whose size was not yet ready where it usually starts, went
     * to the second micro-batch's point, which begins alike) */
    CHECK(r0 == 0 && w0 == 0);
    CHECK(renamed >= 18 && wrong == 0 && on > off + 0.015);
    CHECK(renamed_e > renamed && wrong_e <= 1 && on_e > off_e + 0.015 && on_e > 0.83);
    /* a wrong renaming is found at the segment's end, and not made again (at most once to each of the two
     * points it may go to): 3 wrong in all, 83.1% replayed (80.0% with the last length planned) */
    CHECK(wrong_bad >= 1 && wrong_bad <= 3 && bad > off_e);
}

int main(void)
{
    sim_t s;

    test_rename();
    test_rename_shared_set();

    test_name_family();

    test_plan_model();
    test_plan_learner();
    test_plan_trial();
    test_plan_waits();
    test_rest();
    test_seglen_collision();
    test_window_ahead();
    test_single_op_segment();
    test_buckets();
    test_tokens();

    /* Period finder. */
    int32_t scratch[64];
    uint64_t a[12] = {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3};
    CHECK(ag_smallest_period(a, 12, scratch) == 3);
    uint64_t b[5] = {1, 2, 3, 4, 5};
    CHECK(ag_smallest_period(b, 5, scratch) == 5);
    uint64_t c[7] = {5, 5, 5, 5, 5, 5, 5};
    CHECK(ag_smallest_period(c, 7, scratch) == 1);

    /* Chunk plan of a loop with a sync per iteration (200 operations, AUTOGRAPH_CHUNK 128): after the
     * sync the chunks start small and double (the GPU starts at once), then shrink to half of what is
     * left toward the expected sync (the tail the CPU waits for is short). AUTOGRAPH_CHUNK_FIRST 8. */
    sim_init(&s, 128);
    for (int it = 0; it < 30; it++)
        iteration(&s, 200, 0, 1);
    for (int i = 0; i < 200; i++)
        kop(&s, i % 17, 0);
    const uint32_t want[] = {8, 8, 16, 32, 64, 36, 18, 9, 5, 4};
    CHECK(s.nlens == (int)(sizeof want / sizeof *want));
    for (int i = 0; i < s.nlens && i < (int)(sizeof want / sizeof *want); i++)
        CHECK(s.lens[i] == want[i]);
    sim_op(&s, BARRIER);
    CHECK(frac(&s) > 0.85);
    CHECK(s.fallbacks == 0);
    ag_learner_destroy(&s.l);
    /* Without the ramp (AUTOGRAPH_CHUNK_FIRST=0) only the tail shrinks. */
    sim_init_first(&s, 128, 0);
    for (int it = 0; it < 6; it++)
        iteration(&s, 200, 0, 1);
    for (int i = 0; i < 200; i++)
        kop(&s, i % 17, 0);
    const uint32_t want0[] = {100, 50, 25, 13, 6, 6};
    CHECK(s.nlens == (int)(sizeof want0 / sizeof *want0));
    for (int i = 0; i < s.nlens && i < (int)(sizeof want0 / sizeof *want0); i++)
        CHECK(s.lens[i] == want0[i]);
    ag_learner_destroy(&s.l);
    /* Timed by CUPTI, the tail stops halving where the GPU work left is about one graph launch's cost
     * (8 us): kernels of 0.5 us stop it at 16 operations, kernels of 50 us only at the last one. */
    struct {
        uint32_t ns_per_op;
        uint32_t want[12];
        int n;
    } timed[] = {{500, {8, 8, 16, 32, 64, 36, 18, 9, 9}, 9}, {50000, {8, 8, 16, 32, 64, 36, 18, 9, 5, 2, 1, 1}, 12}};
    for (size_t t = 0; t < sizeof timed / sizeof *timed; t++) {
        sim_init(&s, 128);
        for (int it = 0; it < 6; it++)
            iteration(&s, 200, 0, 1);
        ag_learner_timing(&s.l, s.l.seg_seed, 200, 200ull * timed[t].ns_per_op, 1000000000ull, NULL, NULL);
        CHECK(s.l.segments_timed == 1 && s.l.segments_gpu_bound == 0);
        iteration(&s, 200, 0, 0);
        CHECK(s.nlens == timed[t].n);
        for (int i = 0; i < s.nlens && i < timed[t].n; i++)
            CHECK(s.lens[i] == timed[t].want[i]);
        ag_learner_destroy(&s.l);
    }

    /* A segment whose GPU time is AUTOGRAPH_GPU_BOUND times its host time or more is left eager (a graph
     * cannot pay there) until a later timing finds the host setting the pace again. */
    sim_init(&s, 64);
    s.l.bound_ratio = 3;
    for (int it = 0; it < 6; it++)
        iteration(&s, 100, 0, 1);
    long rep0 = s.replayed;
    CHECK(rep0 > 0);
    ag_learner_timing(&s.l, s.l.seg_seed, 100, 3000000, 1000000, NULL, NULL); /* exactly 3x: bound */
    CHECK(s.l.segments_gpu_bound == 1);
    refresh(&s);
    for (int it = 0; it < 6; it++)
        iteration(&s, 100, 0, 1);
    CHECK(s.replayed == rep0);
    CHECK(s.fallbacks == 0);
    ag_learner_timing(&s.l, s.l.seg_seed, 100, 2900000, 1000000, NULL, NULL); /* below 3x: the host sets the pace */
    refresh(&s);
    for (int it = 0; it < 6; it++)
        iteration(&s, 100, 0, 1);
    CHECK(s.replayed > rep0);
    /* AUTOGRAPH_GPU_BOUND=0: never. */
    s.l.bound_ratio = 0;
    ag_learner_timing(&s.l, s.l.seg_seed, 100, 100000000, 1, NULL, NULL);
    CHECK(s.l.segments_gpu_bound == 1);
    ag_learner_destroy(&s.l);

    /* With the CUPTI guard available, only variants seen whole under it are candidates. */
    sim_init(&s, 64);
    s.l.require_guard = 1;
    for (int it = 0; it < 6; it++)
        iteration(&s, 100, 0, 1);
    CHECK(s.replayed == 0);
    for (size_t b = 0; b < s.l.table.nbuckets; b++)
        for (ag_variant_t *v = s.l.table.buckets[b]; v; v = v->next)
            v->guarded = 1;
    refresh(&s);
    for (int it = 0; it < 6; it++)
        iteration(&s, 100, 0, 1);
    CHECK(s.replayed > 0);
    CHECK(s.fallbacks == 0);
    ag_learner_destroy(&s.l);

    /* A watch that begins where a chunk ends (CUPTI attaches at a chunk's second sighting) covers what
     * comes after that point, not the chunk: passing the chunk's start in the next iteration does not make
     * it watched (its start and end keys were both passed in the watch, len apart in the segment, but the
     * end before the start). It is watched once the next iteration has run it under the guard. */
    sim_init(&s, 128);
    s.l.require_guard = 1;
    for (int it = 0; it < 3; it++)
        iteration(&s, 200, 0, 1); /* the loop's point of the second iteration comes back from the third */
    for (int i = 0; i < 8; i++)
        kop(&s, i % 17, 0); /* the first chunk (8 operations, the ramp) */
    ag_learner_watch(&s.l, 1);
    for (int i = 8; i < 200; i++)
        kop(&s, i % 17, 0);
    sim_op(&s, BARRIER);
    CHECK(s.ncand == 0); /* the first chunk: never watched */
    for (int i = 0; i < 8; i++)
        kop(&s, i % 17, 0);
    CHECK(s.ncand > 0); /* the second chunk: watched whole in the last iteration */
    for (int i = 8; i < 200; i++)
        kop(&s, i % 17, 0);
    sim_op(&s, BARRIER);
    CHECK(s.ncand > 0); /* the first chunk again: watched whole now */
    ag_learner_destroy(&s.l);

    /* The guard's coverage belongs to the points of the iteration it watched, not to chunks: chunks that
     * a new plan cuts out of watched work (the tail's timing arrived) are deferrable without another
     * window, and work it never watched is not. */
    sim_init(&s, 128);
    s.l.require_guard = 1;
    iteration(&s, 200, 0, 1);
    ag_learner_watch(&s.l, 1);
    for (int it = 0; it < 3; it++) /* the second iteration's point of the loop comes back from the third */
        iteration(&s, 200, 0, 1);
    ag_learner_watch(&s.l, 0);
    CHECK(s.replayed > 0);
    /* the tail now shrinks to 1 */
    ag_learner_timing(&s.l, s.l.seg_seed, 200, 200ull * 50000, 1000000000ull, NULL, NULL);
    for (int it = 0; it < 3; it++)
        iteration(&s, 200, 0, 1);
    long before_last = s.replayed;
    iteration(&s, 200, 0, 1);
    CHECK(s.replayed - before_last == 200);
    long watched = s.replayed;
    for (int it = 0; it < 6; it++)
        iteration(&s, 200, 1, 1); /* another shape, never watched */
    CHECK(s.replayed == watched);
    CHECK(s.fallbacks <= 2);
    ag_learner_destroy(&s.l);

    /* A loop that never syncs: virtual segments neither ramp nor shrink (the host never waits there). */
    sim_init(&s, 16);
    for (int i = 0; i < 3000; i++)
        kop(&s, i % 50, 0);
    CHECK(s.l.period % 50 == 0);
    s.nlens = 0;
    for (int i = 0; i < 1000; i++)
        kop(&s, i % 50, 0);
    for (int i = 0; i < s.nlens; i++)
        CHECK(s.lens[i] == 16);
    ag_learner_destroy(&s.l);

    /* A stream that never syncs and never repeats is searched for a period less and less often (a search
     * reads the whole window): every 256 operations at first, then twice as far apart each time, up to
     * 2048; 100000 operations take about 50 searches (390 at a fixed 256). A loop that starts afterwards
     * is still found once the window holds nothing else, and replayed. */
    sim_init(&s, 64);
    for (int i = 0; i < 100000; i++)
        sim_op(&s, ag_mix(99, (uint64_t)i));
    printf("never repeats, never syncs: %llu period searches in 100000 operations\n",
           (unsigned long long)s.l.period_searches);
    CHECK(s.l.period_searches >= 45 && s.l.period_searches <= 60);
    CHECK(s.replayed == 0);
    for (int i = 0; i < 20000; i++)
        kop(&s, i % 50, 0);
    CHECK(s.l.period % 50 == 0);
    printf("then a loop: %ld of 20000 operations replayed\n", s.replayed);
    CHECK(s.replayed > 10000);
    ag_learner_destroy(&s.l);

    /* AUTOGRAPH_WARMUP: a chunk is deferred only once it was seen that many times identically. The
     * first iteration is cut before the segment's length is known, so its chunks are not the planned
     * ones: the first replay comes in iteration warmup + 2. */
    for (uint32_t w = 1; w <= 3; w++) {
        sim_init_warm(&s, 64, 8, w);
        int first = 0;
        for (int it = 1; it <= 6 && !first; it++) {
            iteration(&s, 40, 0, 1);
            if (s.replayed)
                first = it;
        }
        CHECK(first == (int)w + 2);
        ag_learner_destroy(&s.l);
    }

    /* A chunk whose end comes back identically only once in three iterations (x, then two iterations
     * with a new end) is not tried again and again: its second failure resets its count of sightings
     * (and each later one would double the sightings it needs). */
    sim_init(&s, 64);
    for (int it = 0; it < 10; it++) {
        for (int i = 0; i < 39; i++)
            kop(&s, i % 17, 0);
        kop(&s, 99, 0);
        sim_op(&s, BARRIER);
    }
    CHECK(s.replayed > 0 && s.fallbacks == 0);
    for (int it = 0; it < 120; it++) {
        for (int i = 0; i < 39; i++)
            kop(&s, i % 17, 0);
        kop(&s, 99, it % 3 == 0 ? 0 : 1000 + it);
        sim_op(&s, BARRIER);
    }
    printf("x, new, new: %ld fallbacks in 120 iterations\n", s.fallbacks);
    CHECK(s.fallbacks >= 2 && s.fallbacks <= 10);
    ag_learner_destroy(&s.l);

    /* A training loop: 120 operations, a sync per iteration. */
    sim_init(&s, 64);
    for (int it = 0; it < 100; it++)
        iteration(&s, 120, 0, 1);
    printf("sync loop: %.3f replayed, %ld fallbacks\n", frac(&s), s.fallbacks);
    CHECK(frac(&s) > 0.9);
    CHECK(s.fallbacks == 0);
    ag_learner_destroy(&s.l);

    /* Alternation: A B A B with different lengths and kernels. */
    sim_init(&s, 64);
    for (int it = 0; it < 100; it++)
        iteration(&s, it % 2 ? 90 : 130, it % 2, 1);
    printf("alternation: %.3f replayed, %ld fallbacks\n", frac(&s), s.fallbacks);
    CHECK(frac(&s) > 0.85);
    ag_learner_destroy(&s.l);

    /* Nesting: a layer of 10 kernels repeated 8 times between a head and a tail. */
    sim_init(&s, 64);
    for (int it = 0; it < 60; it++) {
        for (int i = 0; i < 5; i++)
            kop(&s, 100 + i, 0);
        for (int layer = 0; layer < 8; layer++)
            for (int i = 0; i < 10; i++)
                kop(&s, 200 + i, 0);
        for (int i = 0; i < 7; i++)
            kop(&s, 300 + i, 0);
        sim_op(&s, BARRIER);
    }
    printf("nesting: %.3f replayed\n", frac(&s));
    CHECK(frac(&s) > 0.9);
    ag_learner_destroy(&s.l);

    /* A loop that never syncs: the period (50) must be found without barriers. */
    sim_init(&s, 64);
    for (int it = 0; it < 400; it++)
        iteration(&s, 50, 0, 0);
    printf("no sync: %.3f replayed, period %u\n", frac(&s), s.l.period);
    CHECK(s.l.period % 50 == 0);
    CHECK(frac(&s) > 0.8);
    ag_learner_destroy(&s.l);

    /* Noise: an extra kernel every 10th iteration costs that iteration only. */
    sim_init(&s, 64);
    for (int it = 0; it < 200; it++) {
        if (it % 10 == 5)
            kop(&s, 999, 0);
        iteration(&s, 100, 0, 1);
    }
    printf("noise: %.3f replayed, %ld fallbacks\n", frac(&s), s.fallbacks);
    CHECK(frac(&s) > 0.6);
    ag_learner_destroy(&s.l);

    /* Drift once and settle: without syncs, the period changes from 50 to 60 and stays. */
    sim_init(&s, 64);
    for (int it = 0; it < 200; it++)
        iteration(&s, 50, 0, 0);
    long before = s.replayed;
    s.replayed = 0;
    s.ops = 0;
    for (int it = 0; it < 400; it++)
        iteration(&s, 60, 3, 0);
    printf("drift: %.3f replayed after the change (%ld before), period %u\n", frac(&s), before, s.l.period);
    CHECK(s.l.period % 60 == 0);
    CHECK(frac(&s) > 0.7);
    ag_learner_destroy(&s.l);

    /* Shape changes: the batch switches every 5 iterations between two sizes. */
    sim_init(&s, 64);
    for (int it = 0; it < 200; it++)
        iteration(&s, 40, (it / 5) % 2, 1);
    printf("shape change: %.3f replayed, %ld fallbacks\n", frac(&s), s.fallbacks);
    CHECK(frac(&s) > 0.6);
    ag_learner_destroy(&s.l);

    /* Never repeating: nothing replayed, nothing deferred, and the table stays bounded. */
    sim_init(&s, 64);
    srand(1);
    for (int it = 0; it < 300; it++) {
        for (int i = 0; i < 70; i++)
            sim_op(&s, ag_mix((uint64_t)rand(), (uint64_t)it));
        sim_op(&s, BARRIER);
    }
    printf("random: %.3f replayed, %zu variants\n", frac(&s), s.l.table.count);
    CHECK(s.replayed == 0);
    CHECK(s.fallbacks == 0);
    CHECK(s.l.table.count <= 512);
    ag_learner_destroy(&s.l);

    /* A new segment every third iteration costs at most that iteration. */
    sim_init(&s, 64);
    for (int it = 0; it < 200; it++)
        iteration(&s, 30, it % 3 == 2 ? it : 0, 1);
    printf("every third new: %.3f replayed, %ld fallbacks\n", frac(&s), s.fallbacks);
    CHECK(s.fallbacks <= 200 / 3 + 1);
    CHECK(frac(&s) > 0.3);
    ag_learner_destroy(&s.l);

    /* A segment that keeps failing backs off: after a regular start, everything from the 6th
     * operation on changes every iteration, so the learned chunk fails at its 6th operation each time. */
    sim_init(&s, 64);
    for (int it = 0; it < 50; it++)
        iteration(&s, 40, 0, 1);
    long fb0 = s.fallbacks;
    for (int it = 0; it < 150; it++) {
        for (int i = 0; i < 40; i++)
            sim_op(&s, i < 5 ? K(i, 0) : ag_mix((uint64_t)it, (uint64_t)i));
        sim_op(&s, BARRIER);
    }
    printf("backoff: %ld fallbacks in 150 failing iterations\n", s.fallbacks - fb0);
    CHECK(s.fallbacks - fb0 <= 3);
    ag_learner_destroy(&s.l);

    /* The backoff is exponential: a one-chunk segment (6 operations, then a sync) that fails each time it
     * is deferred. An iteration that fails (new work from its 4th operation on) comes whenever the
     * learner would defer the next one. The first failure is forgiven; from the second on the sightings
     * are forgotten and the warm-up (2) doubles with each further failure: 4, 8, 16 sightings. After a
     * failing iteration the next one starts at a new point (its seed holds the failed content), so each
     * run of good iterations has one more than the sightings needed: 1, 5, 9, 17 (the first run, 4, is
     * the warm-up + 2 pinned above: the chunk that ends at the sync is learned again once the segment's
     * length is known). */
    sim_init(&s, 64);
    /* (the failures come where the learner holds candidates at an iteration's start; a renamed iteration would
     * get its candidates only at its first operation, be replayed, and forgive the failure before it) */
    s.no_rename = 1;
    int runs[8], nruns = 0, good = 0;
    for (int it = 0; it < 400 && nruns < 5; it++) {
        if (s.ncand) {
            long fb = s.fallbacks;
            for (int i = 0; i < 6; i++)
                sim_op(&s, i < 3 ? K(i, 0) : ag_mix(7000 + (uint64_t)it, (uint64_t)i));
            sim_op(&s, BARRIER);
            CHECK(s.fallbacks == fb + 1);
            runs[nruns++] = good;
            good = 0;
        } else {
            iteration(&s, 6, 0, 1);
            good++;
        }
    }
    const int want_runs[] = {4, 1, 5, 9, 17};
    CHECK(nruns == 5);
    for (int i = 0; i < nruns; i++) {
        printf("%d%s", runs[i], i + 1 < nruns ? " " : " good iterations between failures\n");
        CHECK(runs[i] == want_runs[i]);
    }
    CHECK(s.replayed == 0);
    ag_learner_destroy(&s.l);
    return CHECK_DONE();
}
