/* Learns the repeating work from operation signatures alone: chunk variants keyed by the point of the
 * iteration where they start, a chunk plan that shrinks toward the expected barrier, exponential
 * backoff for variants that fail, and a period detector (prefix function) for loops without barriers. */
#include "pattern.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SEG_SEED0 0x243f6a8885a308d3ULL
#define CONTENT0 0x13198a2e03707344ULL
#define VIRTUAL_KIND 0xa4093822299f31d0ULL
#define MAX_FAILS 10
#define GKEYS (1u << 16)
/* A loop without barriers is searched for a period every PERIOD_CHECK operations at first; each search
 * that finds none doubles the interval, up to PERIOD_CHECK_MAX (a period that appears later is found
 * that much later). A search reads the whole window (AG_PERIOD_WINDOW signatures): searched every 256
 * operations it cost a never-repeating stream 15-30 ns per operation on the CPU test machine. */
#define PERIOD_CHECK 256u
#define PERIOD_CHECK_MAX (AG_PERIOD_WINDOW / 2)

uint64_t ag_mix(uint64_t h, uint64_t v)
{
    /* A 64-bit mix with good avalanche; collisions would merge two different chunks, so no
     * truncation anywhere. */
    uint64_t x = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static uint64_t key_of(const ag_learner_t *l)
{
    return ag_mix(l->seg_seed, l->content);
}

/* The key of the first chunk at the point `seed` names (key_of at that segment's start). */
static uint64_t start_of(uint64_t seed)
{
    return ag_mix(seed, CONTENT0);
}

static size_t bucket_of(const ag_vtable_t *t, uint64_t start)
{
    return (size_t)(start ^ (start >> 29)) & (t->nbuckets - 1);
}

static void variant_free(ag_vtable_t *t, ag_variant_t *v)
{
    if (v->graph && t->release)
        t->release(v, t->release_ctx);
    free(v->sigs);
    free(v);
    t->count--;
}

/* Drops variants that were never worth a graph, then the older half, keeping `keep`. */
static void evict(ag_vtable_t *t, const ag_variant_t *keep, uint32_t warmup, uint64_t tick)
{
    uint64_t oldest = tick;
    for (int pass = 0; pass < 2 && t->count > t->max_count * 3 / 4; pass++) {
        uint64_t cutoff = oldest + (tick - oldest) / 2;
        for (size_t b = 0; b < t->nbuckets; b++) {
            for (ag_variant_t **pp = &t->buckets[b]; *pp;) {
                ag_variant_t *v = *pp;
                int drop = v != keep && (pass == 0 ? (v->seen < warmup && !v->graph) : v->last_used < cutoff);
                if (pass == 0 && v->last_used < oldest)
                    oldest = v->last_used;
                if (drop) {
                    *pp = v->next;
                    variant_free(t, v);
                } else {
                    pp = &v->next;
                }
            }
        }
    }
}

/* Applies the failure recorded by ag_learner_failed, now that the chunk is known to be new work. */
static void penalize(ag_learner_t *l)
{
    for (int i = 0; i < l->nfailed; i++) {
        ag_variant_t *v = l->failed[i];
        if (v->fails < MAX_FAILS)
            v->fails++;
        if (v->fails >= 2)
            v->seen = 0;
    }
    l->nfailed = 0;
}

/* Chunk v closed (NULL: its variant could not be kept): it remembers the chunks before it, and becomes the
 * latest of them. */
static ag_variant_t *closed(ag_learner_t *l, ag_variant_t *v)
{
    if (v)
        memcpy(v->pred, l->hist, sizeof v->pred);
    memmove(l->hist + 1, l->hist, sizeof l->hist[0] * (AG_PRED - 1));
    l->hist[0] = v ? v->id : 0;
    return v;
}

static ag_variant_t *record_chunk(ag_learner_t *l, int at_barrier)
{
    ag_vtable_t *t = &l->table;
    uint64_t end = key_of(l);
    uint8_t planned = l->chunk_planned;
    int judge = l->nfailed && l->failed_start == l->chunk_start;
    if (!judge)
        l->nfailed = 0;
    size_t b = bucket_of(t, l->chunk_start);
    ag_variant_t *lru = NULL;
    int same_start = 0;
    for (ag_variant_t *v = t->buckets[b]; v; v = v->next) {
        if (v->start != l->chunk_start)
            continue;
        same_start++;
        if (v->end == end && v->len == l->chunk_pos && v->ends_at_barrier == at_barrier) {
            /* Known work came instead of the candidates: another variant, not a failure. */
            l->nfailed = 0;
            v->seen++;
            v->planned |= planned;
            v->last_used = l->tick;
            return closed(l, v);
        }
        if (!lru || v->last_used < lru->last_used)
            lru = v;
    }
    if (judge)
        penalize(l); /* before anything is evicted */
    if (same_start >= (l->shape_free_seeds ? AG_MAX_VARIANTS_PER_START_SHAPE_FREE : AG_MAX_VARIANTS_PER_START) &&
        lru) {
        for (ag_variant_t **pp = &t->buckets[b]; *pp; pp = &(*pp)->next)
            if (*pp == lru) {
                *pp = lru->next;
                variant_free(t, lru);
                break;
            }
    }
    ag_variant_t *v = calloc(1, sizeof *v);
    if (!v)
        return closed(l, NULL);
    v->sigs = malloc(sizeof(uint64_t) * (l->chunk_pos ? l->chunk_pos : 1));
    if (!v->sigs) {
        free(v);
        return closed(l, NULL);
    }
    v->id = ++l->last_id;
    memcpy(v->sigs, l->chunk_sigs, sizeof(uint64_t) * l->chunk_pos);
    v->start = l->chunk_start;
    v->seg = l->seg_seed;
    v->end = end;
    v->len = l->chunk_pos;
    v->ends_at_barrier = (uint8_t)at_barrier;
    v->seen = 1;
    v->planned = planned;
    v->last_used = l->tick;
    v->next = t->buckets[b];
    t->buckets[b] = v;
    t->count++;
    if (t->count > t->max_count)
        evict(t, v, l->warmup, l->tick);
    return closed(l, v);
}

static ag_seglen_t *seglen_set(ag_learner_t *l, uint64_t seed)
{
    return &l->seglens[((seed ^ (seed >> 32)) % AG_SEGLEN_SETS) * AG_SEGLEN_WAYS];
}

/* The entry of the segment that starts at seed, or NULL. */
static ag_seglen_t *seglen_find(ag_learner_t *l, uint64_t seed)
{
    ag_seglen_t *set = seglen_set(l, seed);
    for (int w = 0; w < AG_SEGLEN_WAYS; w++)
        if (set[w].used && set[w].seed == seed)
            return &set[w];
    return NULL;
}

static void drop_model_plan(ag_seglen_t *s);

/* The entry of the segment that starts at seed, made from the least recently ended one of its set (a
 * free one first) if it has none. */
static ag_seglen_t *seglen_take(ag_learner_t *l, uint64_t seed)
{
    ag_seglen_t *s = seglen_find(l, seed);
    if (s)
        return s;
    ag_seglen_t *set = seglen_set(l, seed);
    s = &set[0];
    for (int w = 1; w < AG_SEGLEN_WAYS; w++)
        if (set[w].used < s->used)
            s = &set[w];
    drop_model_plan(s); /* its timings, plan and verdict were another segment's */
    s->model_lost = 0;
    memset(&s->profit, 0, sizeof s->profit);
    s->gpu_bound = 0;
    s->gpu_ns_per_op = 0;
    s->gpu_paced = s->waits_long = s->waits_weighed = 0;
    s->seed = seed;
    s->length = s->expect = 0;
    s->expect_real = 0;
    s->repeats = 0;
    s->content = 0;
    memset(s->names, 0, sizeof s->names);
    s->real_end = 0;
    return s;
}

/* Chunk sizes: the halving plan (plan.c, ag_plan_default_chunk), or the modeled plan of a segment that
 * was timed operation by operation (model_plan below; plan.c says how). After a real barrier the GPU is
 * idle (the host waited for it): the first chunk is small so
 * that the GPU starts at once, and chunks double while it works (the chunk size equals the operations
 * already issued). Toward the end of a segment that ends at a real barrier, chunks shrink to half of
 * what is left: work still deferred at a barrier runs only then, while the CPU waits. Halving stops
 * where one more graph launch would cost about what it saves: at TAIL_GPU_NS of GPU work left when the
 * segment's kernels were timed (one graph launch costs the host 3-8 us on the H200), else at TAIL_MIN
 * operations.
 * (Measured and reverted: where CUPTI timed the GPU at least 4x slower per operation than the host's own
 * time, chunks that grew by half that ratio and a tail that did not shrink. On the H200, over the second
 * half of the loop, two_streams ran 1.29-1.30x slower with it, nvtx_ranges 1.17-1.25x, mlp_train
 * 1.10-1.11x, and launch_bound no faster, though its graph launches per iteration fell from about 10
 * to 3-4.) */
#define TAIL_MIN 8
#define TAIL_MIN_TIMED_MAX 32
#define TAIL_GPU_NS 8000u
static uint32_t tail_min(const ag_seglen_t *s)
{
    if (!s->gpu_ns_per_op)
        return TAIL_MIN;
    uint32_t n = TAIL_GPU_NS / s->gpu_ns_per_op;
    return n < 1 ? 1 : n > TAIL_MIN_TIMED_MAX ? TAIL_MIN_TIMED_MAX : n;
}

static uint32_t plan(ag_learner_t *l)
{
    ag_seglen_t *s = seglen_find(l, l->seg_seed);
    int known = s != NULL;
    l->chunk_planned = 0;
    if (known && s->nends && !s->trial_default && s->plan_len == s->expect && s->expect_real && l->seg_real) {
        for (uint32_t k = 0; k < s->nends; k++)
            if (s->ends[k] > l->seg_pos) {
                uint32_t c = s->ends[k] - l->seg_pos;
                l->chunk_planned = 1;
                return c < l->chunk_max ? c : l->chunk_max;
            }
    }
    return ag_plan_default_chunk(l->seg_pos, known ? s->expect : 0, l->seg_real, known && s->expect_real, l->chunk_max,
                                 l->chunk_first, known ? tail_min(s) : TAIL_MIN);
}

/* Whether the sighting of segment s that just ended (ops operations) is the one its point's plan expects,
 * ended at a real barrier, and short enough for the model: its timing may plan the point (an evaluation
 * timed at a training step's point would not), and its waits in replay are weighed. */
static int planned_end(const ag_seglen_t *s, uint32_t ops)
{
    return ops && ops == s->length && ops == s->expect && s->real_end && s->expect_real && ops <= AG_PLAN_MAX_OPS;
}

static void drop_model_plan(ag_seglen_t *s)
{
    free(s->ends);
    s->ends = NULL;
    s->nends = s->plan_len = 0;
    s->trial = s->trial_default = s->ntrial = s->trial_have_side = 0;
    s->trial_verdict = 0;
    s->trial_have = 0;
}

/* Segment s (ops operations) is cut at ends[0..n) from now on: the plan takes ends (malloc'd, n > 0). */
static void take_plan(ag_learner_t *l, ag_seglen_t *s, uint32_t *ends, uint32_t n, uint32_t ops)
{
    uint32_t *e = realloc(ends, sizeof *ends * n);
    s->ends = e ? e : ends;
    s->nends = n;
    s->plan_len = ops;
    l->segments_planned++;
}

/* The GPU sets segment s's pace (ops operations): it still has work queued when the host reaches the
 * barrier, so a tail that shrinks toward the barrier only adds graphs, each of which costs the GPU time
 * between two graphs. The ramp, with no tail. */
static void paced_plan(ag_learner_t *l, ag_seglen_t *s, uint32_t ops)
{
    drop_model_plan(s);
    s->gpu_paced = 1;
    uint32_t *ends = malloc(sizeof *ends * ops);
    uint32_t n = ends ? ag_plan_default(ops, l->chunk_max, l->chunk_first, ops, ends, ops) : 0;
    if (n) {
        take_plan(l, s, ends, n, ops);
        l->segments_gpu_paced++;
    } else {
        free(ends);
    }
}

/* The modeled plan for the segment of slot s (ops operations timed one by one), if it beats the default
 * plan clearly. */
static void model_plan(ag_learner_t *l, ag_seglen_t *s, uint32_t ops, const ag_optime_t *t,
                       const ag_plan_params_t *p)
{
    l->model_chunks = l->default_chunks = 0;
    if (!planned_end(s, ops))
        return;
    uint64_t host = 0, gpu = 0;
    for (uint32_t i = 0; i < ops; i++)
        host += t[i].host_ns, gpu += t[i].gpu_ns;
    s->gpu_paced = gpu * AG_PLAN_HOST_PER_GPU > host;
    if (s->gpu_paced) {
        paced_plan(l, s, ops);
        return;
    }
    uint32_t cap = ops, *best = malloc(sizeof *best * cap), *def = malloc(sizeof *def * cap);
    ag_plan_params_t pp = *p;
    pp.chunk_max = l->chunk_max;
    uint64_t tb = UINT64_MAX;
    uint32_t nb = best && def ? ag_plan_best(t, ops, &pp, best, cap, &tb) : 0;
    uint32_t nd = nb ? ag_plan_default(ops, l->chunk_max, l->chunk_first, tail_min(s), def, cap) : 0;
    uint64_t td = nd ? ag_plan_simulate(t, ops, def, nd, &pp) : 0;
    uint64_t margin = 2ull * pp.launch_ns + td / 200;
    l->model_chunks = nb, l->default_chunks = nd;
    l->model_ns = tb, l->default_ns = td, l->model_margin_ns = margin;
    drop_model_plan(s);
    if (nd && td != UINT64_MAX && tb < td && td - tb > margin) {
        if (s->model_lost) {
            l->models_refused++;
        } else {
            take_plan(l, s, best, nb, ops);
            best = NULL;
            if (l->plan_trials) {
                s->trial = 1; /* the modeled plan's sighting first: its chunks are learned at one sighting */
                l->trials_begun++;
            }
        }
    }
    free(best);
    free(def);
}

const ag_seglen_t *ag_learner_seglen(ag_learner_t *l, uint64_t seed)
{
    return seglen_find(l, seed);
}

ag_profit_t *ag_learner_profit(ag_learner_t *l, uint64_t seed)
{
    ag_seglen_t *s = seglen_find(l, seed);
    return s ? &s->profit : NULL;
}

/* The entry of a segment whose replayed sightings' waits are still to be weighed, or NULL. */
static ag_seglen_t *weighing(ag_learner_t *l, uint64_t seed, uint32_t ops)
{
    ag_seglen_t *s = l->model_plans ? seglen_find(l, seed) : NULL;
    if (!s || !planned_end(s, ops) || s->gpu_paced || s->gpu_bound || s->waits_weighed >= AG_WAIT_WEIGHED)
        return NULL;
    return s;
}

int ag_learner_weighs_wait(ag_learner_t *l, uint64_t seed, uint32_t ops)
{
    return weighing(l, seed, ops) != NULL;
}

int ag_learner_waited(ag_learner_t *l, uint64_t seed, uint32_t ops, uint64_t host_ns, uint64_t wait_ns)
{
    ag_seglen_t *s = weighing(l, seed, ops);
    if (!s)
        return 0;
    int longer = wait_ns * AG_PLAN_HOST_PER_GPU > host_ns;
    s->waits_weighed++;
    s->waits_long = longer ? s->waits_long + 1 : 0;
    l->waits_weighed++;
    l->waits_long += (uint64_t)longer;
    if (s->waits_long < AG_PACED_WAITS)
        return 0;
    paced_plan(l, s, ops);
    l->segments_paced_by_wait++;
    return 1;
}

_Static_assert(AG_TRIAL_PAIRS <= AG_MEDIAN_MAX, "a trial's pairs have one median");

int ag_learner_trial_time(ag_learner_t *l, uint64_t seed, uint32_t ops, int side, uint64_t ns, uint32_t *ratio)
{
    ag_seglen_t *s = seglen_find(l, seed);
    if (!s || !s->trial || s->trial_verdict || (side != 0 && side != 1) || ops != s->plan_len || !ns)
        return 0;
    uint32_t t = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
    if (!s->trial_have || s->trial_have_side == side) {
        s->trial_have = t; /* the first of a pair (a later one of the same plan takes its place) */
        s->trial_have_side = (uint8_t)side;
        return 0;
    }
    uint64_t model = side ? s->trial_have : t, def = side ? t : s->trial_have;
    uint64_t r = model * 1024 / def;
    s->trial_ratio[s->ntrial++] = r > UINT32_MAX ? UINT32_MAX : (uint32_t)r;
    s->trial_have = 0;
    l->trial_pairs++;
    if (s->ntrial < AG_TRIAL_PAIRS)
        return 0;
    *ratio = ag_median32(s->trial_ratio, s->ntrial);
    s->trial_verdict = *ratio < 1024 ? 1 : -1;
    return s->trial_verdict;
}

/* Segment s, on trial, ended: its next sighting runs the other plan, or, once the trial has its verdict,
 * the plan the verdict chose, for good. */
static void trial_next(ag_learner_t *l, ag_seglen_t *s)
{
    if (!s->trial_verdict) {
        s->trial_default ^= 1;
        return;
    }
    if (s->trial_verdict > 0) {
        l->trials_kept++;
        s->trial = s->trial_default = 0;
        s->trial_verdict = 0;
        return;
    }
    l->trials_dropped++;
    drop_model_plan(s);
    s->model_lost = 1;
}

void ag_learner_timing(ag_learner_t *l, uint64_t seed, uint32_t ops, uint64_t gpu_ns, uint64_t host_ns,
                       const ag_optime_t *t, const ag_plan_params_t *p)
{
    ag_seglen_t *s = seglen_find(l, seed);
    if (!s || !ops)
        return; /* the entry went to another segment meanwhile */
    uint64_t per = gpu_ns / ops;
    s->gpu_ns_per_op = per ? (per > UINT32_MAX ? UINT32_MAX : (uint32_t)per) : 1;
    s->gpu_bound = l->bound_ratio && gpu_ns >= (uint64_t)l->bound_ratio * host_ns;
    l->segments_timed++;
    l->segments_gpu_bound += s->gpu_bound;
    if (t && p && l->model_plans)
        model_plan(l, s, ops, t, p);
}

int ag_learner_init(ag_learner_t *l, uint32_t chunk_max, uint32_t chunk_first, uint32_t warmup, size_t max_variants,
                    ag_variant_release_fn release, void *release_ctx)
{
    memset(l, 0, sizeof *l);
    l->chunk_max = chunk_max ? chunk_max : 1;
    l->chunk_first = chunk_first;
    l->warmup = warmup ? warmup : 1;
    l->table.max_count = max_variants ? max_variants : 1;
    /* about one variant per bucket when the table is full: the learner walks a chain at every chunk
     * boundary, and in a program that never repeats the table stays full */
    for (l->table.nbuckets = 1024; l->table.nbuckets < l->table.max_count; l->table.nbuckets *= 2)
        ;
    l->table.release = release;
    l->table.release_ctx = release_ctx;
    l->table.buckets = calloc(l->table.nbuckets, sizeof *l->table.buckets);
    l->chunk_sigs = malloc(sizeof(uint64_t) * l->chunk_max);
    l->ring = malloc(sizeof(uint64_t) * AG_PERIOD_WINDOW);
    l->prefix = malloc(sizeof(int32_t) * AG_PERIOD_WINDOW);
    l->lin = malloc(sizeof(uint64_t) * AG_PERIOD_WINDOW);
    l->gkeys = calloc(GKEYS, sizeof *l->gkeys);
    if (!l->table.buckets || !l->chunk_sigs || !l->ring || !l->prefix || !l->lin || !l->gkeys) {
        ag_learner_destroy(l);
        return -ENOMEM;
    }
    l->seg_seed = l->seg_exact = SEG_SEED0;
    l->ended_side = -1;
    l->renames = 1;
    l->content = l->shape_free = CONTENT0;
    l->seg_real = 1;
    l->check_every = PERIOD_CHECK;
    l->chunk_start = key_of(l);
    l->chunk_target = plan(l);
    return 0;
}

void ag_learner_destroy(ag_learner_t *l)
{
    if (l->table.buckets) {
        for (size_t b = 0; b < l->table.nbuckets; b++)
            while (l->table.buckets[b]) {
                ag_variant_t *v = l->table.buckets[b];
                l->table.buckets[b] = v->next;
                variant_free(&l->table, v);
            }
    }
    for (size_t i = 0; i < sizeof l->seglens / sizeof *l->seglens; i++)
        drop_model_plan(&l->seglens[i]);
    free(l->table.buckets);
    free(l->chunk_sigs);
    free(l->ring);
    free(l->prefix);
    free(l->lin);
    free(l->gkeys);
    memset(l, 0, sizeof *l);
}

uint32_t ag_smallest_period(const uint64_t *s, uint32_t n, int32_t *pi)
{
    if (n == 0)
        return 0;
    pi[0] = 0;
    for (uint32_t i = 1; i < n; i++) {
        int32_t k = pi[i - 1];
        while (k > 0 && s[i] != s[k])
            k = pi[k - 1];
        if (s[i] == s[k])
            k++;
        pi[i] = k;
    }
    return n - (uint32_t)pi[n - 1];
}

/* Looks for a period in the recent window; locks it (a multiple of at least AG_MIN_VIRTUAL_SEGMENT
 * operations) when the window holds two full repetitions. */
static int detect_period(ag_learner_t *l)
{
    uint32_t n = l->ring_total < AG_PERIOD_WINDOW ? (uint32_t)l->ring_total : AG_PERIOD_WINDOW;
    if (n < 2 * AG_MIN_VIRTUAL_SEGMENT)
        return 0;
    l->period_searches++;
    uint64_t *lin = l->lin;
    uint64_t first = l->ring_total - n;
    for (uint32_t i = 0; i < n; i++)
        lin[i] = l->ring[(first + i) % AG_PERIOD_WINDOW];
    uint32_t p = ag_smallest_period(lin, n, l->prefix);
    if (p == 0 || p > n / 2)
        return 0;
    uint32_t mult = (AG_MIN_VIRTUAL_SEGMENT + p - 1) / p;
    l->period = p * mult;
    l->period_pos = 0;
    return 1;
}

static int period_holds(const ag_learner_t *l)
{
    uint64_t p = l->period;
    if (l->ring_total < 2 * p || 2 * p > AG_PERIOD_WINDOW)
        return 1;
    for (uint64_t i = l->ring_total - p; i < l->ring_total; i++)
        if (l->ring[i % AG_PERIOD_WINDOW] != l->ring[(i - p) % AG_PERIOD_WINDOW])
            return 0;
    return 1;
}

/* ---- what the guard saw ---- */

static struct ag_gkey *gkey_slot(ag_learner_t *l, uint64_t key)
{
    size_t i = (size_t)(key ^ (key >> 31)) & (GKEYS - 1);
    while (l->gkeys[i].run && l->gkeys[i].key != key)
        i = (i + 1) & (GKEYS - 1);
    return &l->gkeys[i];
}

static void gkey_put(ag_learner_t *l, uint64_t key, uint32_t pos)
{
    if (l->ngkeys >= GKEYS / 4 * 3) {
        memset(l->gkeys, 0, sizeof *l->gkeys * GKEYS); /* coverage not yet claimed by a variant is lost */
        l->ngkeys = 0;
    }
    struct ag_gkey *g = gkey_slot(l, key);
    l->ngkeys += !g->run;
    g->prev_run = g->run; /* 0 for an empty slot: no earlier pass */
    g->prev_tick = g->tick;
    g->key = key;
    g->run = l->watch_run;
    g->pos = pos;
    g->tick = l->tick;
}

void ag_learner_watch(ag_learner_t *l, int on)
{
    if (!on) {
        l->watch_run = 0;
        return;
    }
    if (l->watch_run)
        return;
    l->watch_run = ++l->last_run ? l->last_run : ++l->last_run; /* never 0 */
    gkey_put(l, key_of(l), l->seg_pos); /* what comes after this point is watched */
}

int ag_learner_guarded(ag_learner_t *l, ag_variant_t *v)
{
    if (v->guarded)
        return 1;
    const struct ag_gkey *a = gkey_slot(l, v->start), *b = gkey_slot(l, v->end);
    v->guarded = a->run && b->run && b->pos == a->pos + v->len &&
                 ((a->run == b->run && b->tick == a->tick + v->len) ||
                  (a->prev_run == b->run && b->tick == a->prev_tick + v->len));
    l->guarded_total += v->guarded;
    return v->guarded;
}

int ag_learner_push(ag_learner_t *l, uint64_t sig)
{
    l->chunk_sigs[l->chunk_pos++] = sig;
    l->content = ag_mix(l->content, sig);
    l->seg_pos++;
    l->tick++; /* before the key is stamped with it: a chunk's end is len ticks after its start */
    if (l->watch_run)
        gkey_put(l, key_of(l), l->seg_pos);
    l->ring[l->ring_total++ % AG_PERIOD_WINDOW] = sig;
    if (l->period) {
        if (++l->period_pos >= l->period) {
            /* Once in a while, check that the locked period still holds; a period that drifted is
             * found again rather than served by many phase-shifted variants. */
            if (++l->since_check >= 16) {
                l->since_check = 0;
                if (!period_holds(l)) {
                    l->period = 0;
                    l->seg_pos = 0;
                    l->check_every = PERIOD_CHECK;
                }
            }
            return 2;
        }
    } else if (l->seg_pos >= 2 * l->chunk_max && ++l->since_check >= l->check_every) {
        l->since_check = 0;
        if (detect_period(l)) {
            l->check_every = PERIOD_CHECK;
            return 2;
        }
        if (l->check_every < PERIOD_CHECK_MAX)
            l->check_every *= 2;
    }
    return l->chunk_pos >= l->chunk_target ? 1 : 0;
}

ag_variant_t *ag_learner_close(ag_learner_t *l)
{
    ag_variant_t *v = record_chunk(l, 0);
    l->chunk_start = key_of(l);
    l->chunk_pos = 0;
    l->chunk_target = plan(l);
    return v;
}

/* A segment of fewer operations repeating says little about what follows it (a copy of the loss to the
 * host every iteration, between steps that never repeat): ag_learner_expects_unguarded. */
#define AHEAD_MIN_OPS 4

/* The variant of the one operation of a segment that ends now: recorded at the barrier, or closed by the
 * plan before it (a segment known to be one operation long is planned as a chunk of one). */
static ag_variant_t *single_op(ag_learner_t *l, ag_variant_t *v)
{
    if (v)
        return v;
    uint64_t start = start_of(l->seg_seed), end = key_of(l);
    ag_vtable_t *t = &l->table;
    for (v = t->buckets[bucket_of(t, start)]; v; v = v->next)
        if (v->start == start && v->end == end && v->len == 1)
            return v;
    return NULL;
}

/* ---- a new point named after a known one (pattern.h) ---- */

static uint32_t sightings_needed(ag_learner_t *l, const ag_variant_t *v);

/* Something was learned at the point `seed` names: a variant starts there. */
static int point_known(const ag_learner_t *l, uint64_t seed)
{
    uint64_t start = start_of(seed);
    const ag_vtable_t *t = &l->table;
    for (const ag_variant_t *v = t->buckets[bucket_of(t, start)]; v; v = v->next)
        if (v->start == start)
            return 1;
    return 0;
}

static int has_name(const ag_seglen_t *s, uint64_t name)
{
    for (int i = 0; i < AG_SEG_NAMES; i++)
        if (s->names[i] == name)
            return 1;
    return 0;
}

/* name becomes the most recent of s's names (the least recent one goes, if it is new) */
static void add_name(ag_seglen_t *s, uint64_t name)
{
    int i = 0;
    while (i < AG_SEG_NAMES - 1 && s->names[i] != name)
        i++;
    memmove(&s->names[1], &s->names[0], sizeof s->names[0] * (size_t)i);
    s->names[0] = name;
}

/* Point from's entry: its own among the two of its set, or the one it is to take (an empty one, else the
 * one with fewer votes). Points are named by hashes of the program's kernel handles, which move with where
 * the driver loads them: with one entry per set, two points that alternate and shared it (1 run in about
 * 300 of difftest.directed.unload_others_*) took it from each other at every barrier, and neither was
 * ever renamed after. */
static struct ag_succ *succ_slot(ag_learner_t *l, uint64_t from)
{
    struct ag_succ *a = &l->succ[(size_t)((from ^ (from >> 32)) % (AG_SUCC_SLOTS / 2)) * 2], *b = a + 1;
    if (a->from == from || b->from == from)
        return a->from == from ? a : b;
    if (!a->from || !b->from)
        return a->from ? b : a;
    return a->votes <= b->votes ? a : b;
}

static int rename_was_wrong(const ag_learner_t *l, uint64_t from, uint64_t to)
{
    for (int i = 0; i < AG_RENAME_WRONG; i++)
        if (l->rename_wrong[i].from == from && l->rename_wrong[i].to == to)
            return 1;
    return 0;
}

/* At a real barrier: the segment that ended started at `from`, the next starts at `next`. from's usual
 * successor is the known point that comes after it most often (a majority count). Where another point
 * comes after from than that one, the segment that starts now may be renamed at its first operation, if
 * nothing expected at its point begins with it (ag_learner_rename). */
static void rename_options(ag_learner_t *l, uint64_t from, uint64_t next)
{
    struct ag_succ *e = succ_slot(l, from);
    int usual = e->from == from && e->to && e->to != next;
    if (point_known(l, next)) {
        if (e->from != from || !e->votes) {
            e->from = from;
            e->to = next;
            e->votes = 1;
        } else if (e->to == next) {
            e->votes += e->votes < 8;
        } else {
            e->votes--;
        }
    }
    if (!usual || !l->renames || l->require_guard)
        return;
    l->rename_to[0] = from;                                           /* the segment was put in between */
    l->rename_to[1] = e->to != from && e->to != next ? e->to : 0;     /* it came instead of the usual one */
}

int ag_learner_rename(ag_learner_t *l, uint64_t sig)
{
    uint64_t to[2] = {l->rename_to[0], l->rename_to[1]};
    l->rename_to[0] = l->rename_to[1] = 0;
    if (l->seg_pos || l->chunk_pos || l->require_guard)
        return 0;
    for (int i = 0; i < 2; i++) {
        if (!to[i] || rename_was_wrong(l, l->seg_seed, to[i]))
            continue;
        /* a variant ready there that begins with sig (whatever the point's plan now cuts: the renamed segment
         * takes that plan) */
        uint64_t start = start_of(to[i]);
        ag_vtable_t *t = &l->table;
        for (ag_variant_t *v = t->buckets[bucket_of(t, start)]; v; v = v->next) {
            uint32_t need = v->start == start && v->len && v->sigs[0] == sig ? sightings_needed(l, v) : 0;
            if (!need || v->seen < need)
                continue;
            l->renamed_from = l->seg_seed;
            l->seg_seed = to[i];
            l->chunk_start = start;
            l->chunk_target = plan(l);
            if (l->watch_run)
                gkey_put(l, l->chunk_start, 0);
            l->renamed++;
            return 1;
        }
    }
    return 0;
}

ag_variant_t *ag_learner_barrier(ag_learner_t *l, uint64_t kind, int virtual_)
{
    ag_variant_t *v = l->chunk_pos ? record_chunk(l, 1) : NULL;
    /* what names the point after this segment (its shape-free content with shape-free seeds) */
    uint64_t name = l->shape_free_seeds ? l->shape_free : l->content, from = l->seg_seed;
    if (l->renamed_from) {
        /* a renamed segment whose end names another next point than the recent segments of its new point
         * did was other work after all: it counts as its own point's, and is not renamed there again */
        const ag_seglen_t *r = seglen_find(l, l->seg_seed);
        if (!r || !has_name(r, name)) {
            uint32_t w = l->rename_wrong_next++ % AG_RENAME_WRONG;
            l->rename_wrong[w].from = l->renamed_from;
            l->rename_wrong[w].to = l->seg_seed;
            from = l->renamed_from;
            l->renames_wrong++;
        }
        l->renamed_from = 0;
    }
    l->rename_to[0] = l->rename_to[1] = 0;
    ag_seglen_t *s = seglen_take(l, from);
    s->used = ++l->segments_ended;
    l->ended_seed = from;
    l->ended_side = s->trial ? s->trial_default : -1;
    if (s->trial)
        trial_next(l, s);
    int same = s->repeats && s->content == l->content && s->real_end == !virtual_; /* the content holds the length */
    s->repeats = same ? s->repeats + 1 : 1;
    /* A segment of one operation, the same twice in a row (such as the copy of a result read right after
     * each sync): never held back, its graph would save nothing (one call in, one graph launch out) and a
     * CUPTI window would open for it. (One that comes now and then where other work follows the point
     * otherwise, a metric read every few steps, is replayed: as one of the point's candidates it costs no
     * fallback when it comes.) */
    ag_variant_t *one = l->seg_pos == 1 && s->repeats >= 2 ? single_op(l, v) : NULL;
    if (one)
        one->ungraphable = 1;
    s->content = l->content;
    add_name(s, name);
    if (!s->expect || (l->seg_pos == s->length && s->real_end == !virtual_)) {
        s->expect = l->seg_pos;
        s->expect_real = !virtual_;
    }
    s->length = l->seg_pos;
    s->real_end = !virtual_;
    l->seg_real = !virtual_;
    uint64_t bk = virtual_ ? VIRTUAL_KIND : kind;
    uint64_t exact = ag_mix(ag_mix(SEG_SEED0, l->content), bk);
    l->seg_after_repeat = l->seg_pos >= AHEAD_MIN_OPS && (s->repeats >= 2 || exact == l->seg_exact);
    l->seg_seed = l->shape_free_seeds ? ag_mix(ag_mix(SEG_SEED0, l->shape_free), bk) : exact;
    l->seg_exact = exact;
    if (!virtual_)
        rename_options(l, from, l->seg_seed);
    l->content = l->shape_free = CONTENT0;
    l->seg_pos = 0;
    l->chunk_pos = 0;
    l->chunk_start = key_of(l);
    if (l->watch_run)
        gkey_put(l, l->chunk_start, 0);
    if (virtual_) {
        l->period_pos = 0;
    } else {
        /* Real barriers restart detection at the same place every iteration, so that virtual
         * barriers inside long segments fall on the same operations each time. */
        l->period = 0;
        l->since_check = 0;
        l->check_every = PERIOD_CHECK;
        l->ring_total = 0;
    }
    l->chunk_target = plan(l);
    return v;
}

/* The sightings variant v (of the chunk starting now) needs to be a candidate; 0 where it never is now
 * (ungraphable, or its segment GPU-bound: a graph cannot pay there, the GPU, not the host, sets the pace).
 * One failure after a success costs nothing (another variant came this time, or noise); each further
 * failure without a success in between doubles the warm-up. A chunk that closed under a plan made for its
 * segment (from its timing), where that segment ended identically warm-up times in a row, was seen that
 * often as part of it: one sighting as a chunk (its signatures learned) is enough, however the new plan
 * cut it. (Not a chunk seen once before the plan came: it may be one the segment no longer holds, such as
 * its first sighting's.) */
static uint32_t sightings_needed(ag_learner_t *l, const ag_variant_t *v)
{
    if (v->ungraphable)
        return 0;
    const ag_seglen_t *s = seglen_find(l, v->seg);
    if (s && s->gpu_bound)
        return 0;
    if (!v->fails && v->planned && l->chunk_planned && s && s->repeats >= l->warmup)
        return 1;
    return l->warmup << (v->fails >= 2 ? v->fails - 1 : 0);
}

/* How well v's chunks before it, the last time it closed, agree with the chunks closed now: one point for
 * the latest, two for each earlier one (where the latest is shared, as the first chunk of a token's step
 * is by every token in text generation, the one before it tells them apart). */
static int agreement(const ag_learner_t *l, const ag_variant_t *v)
{
    int a = 0;
    for (int k = 0; k < AG_PRED; k++)
        if (l->hist[k] && v->pred[k] == l->hist[k])
            a += k ? 2 : 1;
    return a;
}

/* v, of agreement a, into the *n (at most AG_MAX_CANDIDATES) candidates out[] kept in order of agreement,
 * after those at least as good (the chain's order among equals); the last one goes where there is no room. */
static void rank_insert(ag_variant_t **out, int *score, int *n, ag_variant_t *v, int a)
{
    int k = *n < AG_MAX_CANDIDATES ? (*n)++ : AG_MAX_CANDIDATES;
    for (; k > 0 && score[k - 1] < a; k--)
        if (k < AG_MAX_CANDIDATES)
            out[k] = out[k - 1], score[k] = score[k - 1];
    if (k < AG_MAX_CANDIDATES)
        out[k] = v, score[k] = a;
}

/* The candidates at the chunk's start (whose first operation is *first, where not NULL): fills out[] with
 * at most AG_MAX_CANDIDATES of them and returns how many there are in all. Where there are more, those whose
 * chunks before them agree best with the chunks closed now (agreement) are kept, then the bucket chain's
 * order (the most recently learned first): the variants of a start whose first operation is the same for
 * all (text generation: 24 tokens whose steps differ from their middle on) were chosen by the chain's order
 * alone, the last 4 learned, and the others' chunks mismatched in every round (engine.tokens). */
static int collect(ag_learner_t *l, ag_variant_t **out, const uint64_t *first)
{
    int n = 0, score[AG_MAX_CANDIDATES];
    ag_vtable_t *t = &l->table;
    for (ag_variant_t *v = t->buckets[bucket_of(t, l->chunk_start)]; v; v = v->next) {
        if (v->start != l->chunk_start || v->ungraphable || (l->require_guard && !ag_learner_guarded(l, v)))
            continue;
        /* cut by another plan (one that changed since): this chunk closes elsewhere, so it cannot be v */
        if (v->len > l->chunk_target || (!v->ends_at_barrier && v->len != l->chunk_target))
            continue;
        if (first && (!v->len || v->sigs[0] != *first))
            continue;
        uint32_t need = sightings_needed(l, v);
        if (!need || v->seen < need)
            continue;
        if (n < AG_MAX_CANDIDATES) {
            out[n++] = v; /* room for all so far: the chain's order, no ranking (the usual case) */
            continue;
        }
        int kept = AG_MAX_CANDIDATES;
        if (n == AG_MAX_CANDIDATES) { /* one too many: those kept so far are ranked now, once (stably) */
            ag_variant_t *w[AG_MAX_CANDIDATES];
            memcpy(w, out, sizeof w);
            kept = 0;
            for (int k = 0; k < AG_MAX_CANDIDATES; k++)
                rank_insert(out, score, &kept, w[k], agreement(l, w[k]));
        }
        rank_insert(out, score, &kept, v, agreement(l, v));
        n++;
    }
    return n;
}

int ag_learner_candidates(ag_learner_t *l, ag_variant_t **out)
{
    int n = collect(l, out, NULL);
    return n > AG_MAX_CANDIDATES ? -1 : n;
}

int ag_learner_candidates_first(ag_learner_t *l, ag_variant_t **out, uint64_t sig)
{
    int n = collect(l, out, &sig);
    return n < AG_MAX_CANDIDATES ? n : AG_MAX_CANDIDATES;
}

int ag_learner_expects_unguarded(ag_learner_t *l)
{
    if (l->warmup < 2 || !l->seg_after_repeat)
        return 0;
    ag_vtable_t *t = &l->table;
    for (ag_variant_t *v = t->buckets[bucket_of(t, l->chunk_start)]; v; v = v->next) {
        uint32_t need = v->start == l->chunk_start && !v->guarded ? sightings_needed(l, v) : 0;
        if (need && v->seen + 1 >= need)
            return 1;
    }
    return 0;
}

void ag_learner_failed(ag_learner_t *l, ag_variant_t **cands, int n)
{
    /* Judged when the chunk closes: only new work counts against the candidates. */
    l->nfailed = n < AG_MAX_CANDIDATES ? n : AG_MAX_CANDIDATES;
    memcpy(l->failed, cands, sizeof *cands * (size_t)l->nfailed);
    l->failed_start = l->chunk_start;
}

void ag_learner_stalled(ag_learner_t *l, ag_variant_t **cands, int n)
{
    ag_learner_failed(l, cands, n);
    penalize(l);
}

void ag_learner_succeeded(ag_variant_t *v)
{
    v->fails = 0;
}

void ag_learner_unlock_period(ag_learner_t *l)
{
    l->period = 0;
    l->since_check = 0;
    l->check_every = PERIOD_CHECK;
}

uint32_t ag_rest_segment(ag_rest_t *r, int repeated, uint64_t content, uint32_t after)
{
    /* the set, most recently seen first: a content seen moves to its front, a new one enters there */
    uint64_t *set = &r->contents[((content ^ (content >> 32)) % (AG_REST_CONTENTS / AG_REST_WAYS)) * AG_REST_WAYS];
    int w = 0;
    while (w < AG_REST_WAYS - 1 && set[w] != content)
        w++;
    repeated |= set[w] == content;
    memmove(set + 1, set, sizeof *set * (size_t)w);
    set[0] = content;
    if (repeated) {
        r->novel = 0;
        r->next = 0;
        return 0;
    }
    if (!after || ++r->novel < after)
        return 0;
    uint32_t n = r->next ? r->next : 1;
    r->next = n >= AG_REST_MAX / 2 ? AG_REST_MAX : 2 * n;
    r->novel = after - 1; /* the segment learned after this rest decides alone whether to rest again */
    r->rests++;
    r->rested += n;
    return n;
}

static uint64_t fnv_bytes(uint64_t h, const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)p[i]) * 0x100000001b3ULL;
    return h;
}

uint64_t ag_name_family(const char *name)
{
    static const char *const picked[] = {"gemm", "gemv", "nvjet", "xmma", "cutlass", "splitKreduce"};
    for (size_t i = 0; i < sizeof picked / sizeof picked[0]; i++)
        if (strstr(name, picked[i]))
            return 0;
    uint64_t h = 0xcbf29ce484222325ULL;
    size_t len = strlen(name);
    /* An Itanium-mangled name: _Z, N for a nested name, then its parts, each its length and its characters
     * (_GLOBAL__N_1 for an anonymous namespace), up to what follows them: I for template arguments, E for the
     * nested name's end, the parameters' types. Anything else (std:: abbreviations, operators) is taken whole. */
    const char *p = name;
    int parts = 0;
    if (strncmp(p, "_Z", 2) == 0) {
        p += 2 + (p[2] == 'N');
        while (isdigit((unsigned char)*p)) {
            char *end;
            unsigned long n = strtoul(p, &end, 10);
            if (n == 0 || n > (size_t)(name + len - end))
                break;
            h = fnv_bytes(h, end, n);
            h = fnv_bytes(h, "::", 2);
            p = end + n;
            parts++;
        }
    }
    if (!parts)
        h = fnv_bytes(h, name, len);
    return h ? h : 1;
}
