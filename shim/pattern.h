/* Pattern detection on plain signatures (no CUDA headers): a chained hash of the operations since the
 * last barrier identifies "this point of the iteration"; chunks of operations that start at the same
 * point and contain the same signatures are learned as variants; a variant seen often enough is a
 * candidate for deferral and replay. For loops that never reach a barrier, a period detector places
 * virtual barriers every period.
 * Locking: an ag_learner_t and its table belong to one engine and are used under that engine's lock. */
#ifndef AG_PATTERN_H
#define AG_PATTERN_H

#include <stddef.h>
#include <stdint.h>

/* Variants kept per chunk start (the least recently seen one makes room): a batch padded to one of a few
 * sizes in no fixed order brings as many variants after the same start as there are sizes. With
 * shape-free seeds (ag_learner_t.shape_free_seeds), segments that differ only in their sizes share their
 * successors' start too, and more are kept. */
#define AG_MAX_VARIANTS_PER_START 16
#define AG_MAX_VARIANTS_PER_START_SHAPE_FREE 64
/* Candidates matched at once: where more may follow a start, the chunk's first operation chooses them. */
#define AG_MAX_CANDIDATES 4
/* Chunks before a variant remembered with it, to rank candidates that share a start and a first operation
 * (ag_learner_candidates_first): the variant that came after the same chunks last time goes first. */
#define AG_PRED 8
#define AG_PERIOD_WINDOW 4096
#define AG_MIN_VIRTUAL_SEGMENT 32

typedef struct ag_variant {
    uint64_t start;          /* key at the chunk's start */
    uint64_t end;            /* key after its last operation */
    uint32_t len;            /* operations */
    uint8_t ends_at_barrier; /* closed by a barrier (real or virtual) rather than by the chunk plan */
    uint8_t ungraphable;     /* the whole of a segment of one operation seen twice in a row, or building or
                              * launching its graph failed: never defer it again */
    uint8_t guarded;         /* its operations were seen in one run of the CUPTI guard (ag_learner_guarded) */
    uint8_t planned;         /* it closed once while its segment's own plan (from its timing) cut it */
    uint32_t seen;           /* sightings since it was learned or last failed */
    uint32_t fails;          /* deferrals of this start that failed: the backoff exponent */
    uint32_t asks, asks_epoch; /* builds a full graph cache refused it, as of that epoch (ag_graph_admit) */
    uint64_t id;               /* this learner's number for it (never reused) */
    uint64_t pred[AG_PRED];    /* the ids of the chunks closed before it, the last time it closed (latest first) */
    uint64_t last_used;      /* learner tick of the last sighting, for eviction */
    uint64_t seg;            /* seed of the segment it belongs to (its timings, ag_learner_timing) */
    uint64_t *sigs;          /* len signatures */
    void *graph;             /* owned by the engine (replay.c); released through the table's callback */
    struct ag_variant *next; /* bucket chain */
} ag_variant_t;

typedef void (*ag_variant_release_fn)(ag_variant_t *v, void *ctx);

typedef struct {
    ag_variant_t **buckets;
    size_t nbuckets;
    size_t count, max_count;
    ag_variant_release_fn release;
    void *release_ctx;
} ag_vtable_t;

/* ---- does the graph pay? (profit.c) ----
 * A graphed segment that ends at a real barrier is now and then run eagerly, as a probe, and its wall
 * time compared with its replays': from its first operation to the first operation after the barrier
 * that ends it (the host's wait at that barrier included; the program's own host work in between costs
 * the same either way, so it only adds noise). Probes one every AG_PROFIT_SPACING + 1 sightings make
 * a series: once k of them (k >= 2) were all slower than the replays' median by more than
 * AG_PROFIT_CLEAR_PCT / k percent (25% for 2, 12.5% for 4, ...), the replay pays, and the next series comes
 * after a long quiet stretch (twice as long each time). One probe settles the first series where it and
 * the fastest sighting that ran plain before any replay (learning: the engine's own plain launches, no
 * CUPTI attached) both took at least twice the replays' median: two plain runs, one of them free, in
 * place of two probes (a probe of launch_bound costs about 1.2 ms on the H200, 0.9% of its loop; spikes
 * of noise would have to hit both). Otherwise AG_PROFIT_SAMPLES probes are compared
 * by medians with the replays around them. Where eager was ahead by more than
 * 1/AG_PROFIT_MARGIN, and by more than the two kinds of runs lie from their medians (each the median
 * distance of its samples to it), and each probe set beside the replay just before it says so too (the
 * median of those pairs' ratios ahead by the margin: a change of the host's speed in the middle of a
 * series, which moves the medians of the recent replays and of the series' probes apart, moves both
 * runs of a pair alike), the segment runs eager for a hold of sightings (twice as long each
 * time it loses again), then replays AG_PROFIT_SAMPLES times and is judged again against the hold's own
 * eager times. Noise that only now and then adds time moves neither the medians nor those distances;
 * a segment whose time is mostly a wait that varies from sighting to sighting (for another process, as
 * a data-parallel rank waits for the others at its sync) keeps its graphs: there medians a few percent
 * apart said nothing, and verdicts drawn from them left segments eager where their graphs paid. Slow
 * probes can only keep the graphs (what the engine did before). */
#define AG_PROFIT_SAMPLES 8
#define AG_PROFIT_FIRST 32    /* replays before the first probe (a short run is not probed) */
#define AG_PROFIT_SPACING 3   /* replays between two probes of a series */
#define AG_PROFIT_CLEAR_PCT 50  /* k probes this many percent / k slower than the replays settle it ... */
#define AG_PROFIT_CLEAR_PROBES 2 /* ... from this many on */
#define AG_PROFIT_CLEAR_ONE_PCT 100 /* one probe and the plain sighting before the replays, this many percent */
#define AG_PROFIT_MARGIN 32   /* eager must be ahead by more than 1/32 (about 3%) */
#define AG_PROFIT_QUIET 1024  /* replays before the next probe once the replay was clearly ahead ... */
#define AG_PROFIT_QUIET_MAX 65536 /* ... doubling each time up to this */
#define AG_PROFIT_RECHECK 256 /* replays before the next series after a close call */
#define AG_PROFIT_HOLD 64     /* sightings left eager after the replay lost ... */
#define AG_PROFIT_HOLD_MAX 4096 /* ... doubling each time it loses again, up to this */
#define AG_PROFIT_ATTEMPTS 4  /* probes in a row that could not be timed before a series is given up */

typedef enum { AG_RUN_OTHER, AG_RUN_REPLAYED, AG_RUN_EAGER } ag_run_t;

typedef struct {
    uint32_t rep[AG_PROFIT_SAMPLES], eag[AG_PROFIT_SAMPLES]; /* recent times (ns): replays, forced eager runs */
    uint8_t nrep, neag, irep, ieag; /* samples held, next slot */
    uint8_t series;    /* probes so far in the current series */
    uint8_t probe_out; /* a probe started and its time has not come yet */
    uint8_t eager;     /* the replay lost: the segment runs eager for hold_left more sightings */
    uint8_t recheck;   /* a hold ended: judged again once AG_PROFIT_SAMPLES replays are in */
    uint8_t attempts;  /* probes in a row that could not be timed */
    uint32_t reps;     /* replays since the last probe (or decision) */
    uint32_t wait;     /* replays before the next probe (0: AG_PROFIT_FIRST) */
    uint32_t quiet;    /* the next quiet stretch (0: AG_PROFIT_QUIET) */
    uint32_t hold, hold_left;
    uint32_t smin;     /* the fastest probe of the current series */
    uint32_t last;     /* the last replay's time (ns) */
    uint32_t ratio[AG_PROFIT_SAMPLES]; /* the current series' probes, each over the replay just before it (x1024) */
    uint32_t plain;    /* the fastest sighting run plain before the first replay (ns, 0: none, or used) */
} ag_profit_t;

/* The median of n samples (the lower middle one for even n; 0 for none), of the first AG_MEDIAN_MAX. */
#define AG_MEDIAN_MAX 32
uint32_t ag_median32(const uint32_t *samples, uint32_t n);

/* A sighting of the segment starts: 1 if it runs eager (a probe, or a hold after the replay lost). */
int ag_profit_start(ag_profit_t *p);

/* The sighting ended: how it ran (AG_RUN_EAGER: all its operations went to the driver as they came, with
 * nothing else to slow them, CUPTI detached; one ag_profit_start forced that could not be timed is
 * AG_RUN_OTHER with forced set) and its time. Returns 1 when the segment is left eager now, -1 when a
 * judgement kept (or brought back) its graphs, 0 otherwise. */
int ag_profit_end(ag_profit_t *p, ag_run_t how, int forced, uint64_t ns);
/* The medians its judgements compare: its forced eager runs' and its replays' (ns, 0 with no samples). */
void ag_profit_medians(const ag_profit_t *p, uint64_t *eager_ns, uint64_t *replay_ns);

#define AG_SEG_NAMES 4

/* ---- the modeled plan on trial (ag_learner_trial_time) ----
 * The model knows the host's and the GPU's times only as one eager sighting under CUPTI took them, and
 * guesses the rest (a graph launch's cost, where the GPU starts a chunk); on the PyTorch step, H100 hosts,
 * the modeled plan it put ahead of the halving plan was behind by about 2% in replay (1.127x of the
 * library paused in one process, against 1.141x with the halving plan; medians of 8 runs each). So where
 * a timing gives a segment the modeled plan, replay tries both: its sightings alternate between the
 * modeled and the default plan, each replayed sighting timed as the probes time it (from its first
 * operation to the first after its barrier), and pairs of sightings side by side (one of each, in a row)
 * compared. After AG_TRIAL_PAIRS pairs the modeled plan stays only where the median of the pairs' ratios
 * puts it ahead; else the default plan comes back, and later timings of the segment do not bring the
 * model's plan again. */
#define AG_TRIAL_PAIRS 16

typedef struct {
    uint64_t seed;     /* chain state at the segment's start */
    uint32_t length;   /* operations in the segment the last time it ended */
    uint32_t expect;   /* the length its chunk plan expects: the last one that ended twice in a row (the
                        * first one until then), not one that came once between others (an evaluation at
                        * the point of a training step's first micro-batch) */
    uint8_t expect_real; /* ... and whether that one ended at a real barrier */
    uint32_t repeats;  /* times in a row it ended with the same content (content) */
    uint64_t content;  /* its content (the learner's hash of its signatures) the last time it ended */
    uint8_t real_end;  /* it ended at a real barrier (the host waited there), not a virtual one */
    uint8_t gpu_bound; /* its kernels kept the GPU busy far longer than the host took to issue them */
    uint32_t gpu_ns_per_op; /* mean GPU time of its operations when timed (0: not timed) */
    uint8_t gpu_paced;      /* replayed, the GPU would set its pace (its model_plan found, or its barrier's
                             * waits in replay: ag_learner_waited; 0: not known) */
    uint8_t waits_long;     /* replayed sightings in a row whose barrier waited over half their host time */
    uint8_t waits_weighed;  /* replayed sightings weighed so far (AG_WAIT_WEIGHED: no more) */
    uint32_t plan_len;      /* the modeled chunk plan (ag_plan_best) is for a segment of this length */
    uint32_t nends;         /* its chunk ends (0: the default plan) */
    uint32_t *ends;
    /* the modeled plan's trial (ag_learner_trial_time): its sightings alternate with the default plan's */
    uint8_t trial;          /* the modeled plan is on trial */
    uint8_t trial_default;  /* the sighting under way (and the next, until it ends) runs the default plan */
    int8_t trial_verdict;   /* the trial's verdict, taken at the segment's next end: 1 kept, -1 dropped */
    uint8_t trial_have_side; /* the side of the unpaired time below (0: the modeled plan, 1: the default) */
    uint8_t model_lost;     /* a trial found the modeled plan no faster: later timings keep the default plan */
    uint8_t ntrial;         /* pairs so far */
    uint32_t trial_have;    /* a replayed sighting's time not paired yet (ns; 0: none) */
    uint32_t trial_ratio[AG_TRIAL_PAIRS]; /* each pair's modeled time over its default time (x1024) */
    uint64_t used;          /* the learner's segment count when it last ended (0: the entry is free) */
    uint64_t names[AG_SEG_NAMES]; /* what named the point after it the last times it ended, the distinct
                                   * ones, most recent first (its shape-free content with shape_free_seeds,
                                   * else its content): other segments may start at its point too */
    ag_profit_t profit;     /* whether its graphs pay (profit.c) */
} ag_seglen_t;

/* The segment table: AG_SEGLEN_SETS sets of AG_SEGLEN_WAYS entries, a seed's set chosen by its hash,
 * the least recently ended entry of the set replaced. Direct-mapped, two segments of one iteration
 * whose seeds met in one slot took it from each other at every barrier, so neither kept its length or
 * its timing (about one program in 256: seeds hash function handles, which move between runs). */
#define AG_SEGLEN_SETS 64
#define AG_SEGLEN_WAYS 4

/* ---- a new point named after a known one ----
 * The point after a barrier is named by the segment before it. Where that segment was not the one that
 * usually comes there (an optimizer step skipped, an evaluation put in between), the point after it is new,
 * and the work that follows, though it is the usual work, would be learned there anew (each of its sizes
 * warm-up times). Each point's usual successor is kept (the known point that most often follows it: a
 * majority count). Once the program is trusted (require_guard off: nothing needs the guard's evidence
 * then), a segment that starts at another point than the usual successor of the point before, where
 * nothing expected begins with its first operation, may be renamed then to a known point where a ready
 * candidate begins with that operation: first the point where the segment before it started (that segment
 * was put in between, and the work usually there comes now), then that point's usual successor (the
 * segment before it came in place of the usual one). The segment is
 * then a sighting of that point's segment: its chunks are matched against that point's variants, and its
 * plan, timings and probes are that segment's. Where its end names another next point than any of the
 * last AG_SEG_NAMES distinct ones the segments at that point named (other work after all; several: the
 * segment put in between started at the same point), the renaming was wrong: the sighting counts as its own
 * point's, and that point is not renamed to that one again. */
#define AG_SUCC_SLOTS 256
#define AG_RENAME_WRONG 16

/* ---- chunk plans (plan.c) ---- */

/* Longest segment the model plans (longer ones keep the default plan), and how many chunks beyond one
 * per AUTOGRAPH_CHUNK operations it considers. Only segments whose GPU time is at most a half of their
 * host time (as replay takes it) get the model's cuts: where the GPU sets the pace they did worse on the
 * H200 (launch_bound 0.96x: the model knows the GPU's time per kernel only as eager launches took it,
 * which need not be its time inside a graph). Such a segment keeps the ramp and loses the tail instead:
 * the GPU has work queued when the host reaches the barrier. */
#define AG_PLAN_MAX_OPS 2048
#define AG_PLAN_EXTRA_CHUNKS 24
#define AG_PLAN_HOST_PER_GPU 2

/* One operation of a timed segment: host time from its arrival to the next operation's (to the
 * barrier's, for the last) as replay would take it, and its time on the GPU. */
typedef struct {
    uint32_t host_ns, gpu_ns;
} ag_optime_t;

typedef struct {
    uint32_t launch_ns; /* host time of one graph launch */
    uint32_t start_ns;  /* from a graph launch to its work starting on an idle GPU */
    uint32_t graph_gpu_ns; /* a graph's own GPU time, between its work and the next graph's */
    uint32_t chunk_max; /* operations per chunk at most */
} ag_plan_params_t;

/* The default plan's next chunk size at `pos` operations into a segment expected to be `length` long
 * (0: unknown): a ramp from chunk_first after a real barrier, halving toward a real end down to tail_min. */
uint32_t ag_plan_default_chunk(uint32_t pos, uint32_t length, int real_start, int real_end, uint32_t chunk_max,
                               uint32_t chunk_first, uint32_t tail_min);
/* The default plan of a whole segment of n operations between real barriers: its chunk ends, ascending
 * (the last is n); returns how many (0: more than cap). */
uint32_t ag_plan_default(uint32_t n, uint32_t chunk_max, uint32_t chunk_first, uint32_t tail_min, uint32_t *ends,
                         uint32_t cap);
/* The model's time (ns) of a segment of n operations cut at ends[0..nends) (UINT64_MAX: not a plan). */
uint64_t ag_plan_simulate(const ag_optime_t *t, uint32_t n, const uint32_t *ends, uint32_t nends,
                          const ag_plan_params_t *p);
/* The chunk ends the model finishes soonest with (at most cap chunks, at most n <= AG_PLAN_MAX_OPS
 * operations); returns how many, 0 if none, and their modeled time in *time. */
uint32_t ag_plan_best(const ag_optime_t *t, uint32_t n, const ag_plan_params_t *p, uint32_t *ends, uint32_t cap,
                      uint64_t *time);

typedef struct {
    /* What every ag_learner_push reads and writes, in the first two cache lines (an interpreter running
     * between launches evicts them each time; the engine prefetches them). */
    uint64_t *chunk_sigs; /* signatures of the current chunk (chunk_max of them) */
    uint64_t *ring;       /* last AG_PERIOD_WINDOW signatures, for period detection */
    /* position: key = mix(seg_seed, content) names "this point of the iteration" */
    uint64_t content;     /* hash of the operations since the segment's start, from a constant */
    uint64_t shape_free;  /* with shape_free_seeds, the same over their shape-free signatures
                           * (ag_learner_push_shape_free) */
    uint64_t seg_seed;    /* what came before: the previous segment's content (or its shape-free content,
                           * with shape_free_seeds) and its barrier */
    uint64_t tick;
    uint64_t ring_total;
    uint32_t chunk_pos;   /* operations in the current chunk */
    uint32_t chunk_target;
    uint32_t seg_pos;     /* operations since the segment's start */
    uint32_t chunk_max;   /* AUTOGRAPH_CHUNK */
    uint32_t period;      /* locked period (0: none) */
    uint32_t period_pos;  /* operations since the last virtual barrier */
    uint32_t since_check; /* operations since the last period check */
    uint32_t check_every; /* operations between period searches while none is locked: doubles after each
                           * search that finds none (a loop that never repeats pays less and less) */
    uint32_t watch_run;   /* the CUPTI guard's current watch run (see gkeys), 0 while not watching */
    uint8_t shape_free_seeds; /* AUTOGRAPH_SEGMENT_KEY=shape_free: seg_seed from the shape-free content
                               * (read at every operation: here, in a hole of the second line) */
    uint64_t chunk_start; /* key at the chunk's start */
    uint64_t seg_exact;   /* seg_seed from the previous segment's content, sizes and all */
    uint8_t seg_real;     /* the segment started at a real barrier (or at the program's start) */
    uint8_t seg_after_repeat; /* the segment before it repeated: it ended as the last time it started
                               * there, or it started where it ends (the same segment back to back) */
    uint8_t chunk_planned; /* the current chunk was cut by its segment's own plan (from its timing) */

    /* configuration */
    uint32_t chunk_first; /* AUTOGRAPH_CHUNK_FIRST: 0 for no ramp after a real barrier */
    uint32_t warmup;    /* sightings before a variant is a candidate */
    uint32_t bound_ratio; /* AUTOGRAPH_GPU_BOUND: a segment whose GPU time is this many times its host
                           * time is left eager (0: never) */
    uint8_t require_guard; /* only variants seen whole under the CUPTI guard are candidates */
    uint8_t renames;       /* AUTOGRAPH_RENAME: a new point may be renamed after a known one (1 by default) */
    uint8_t model_plans;   /* AUTOGRAPH_CHUNK_PLAN=model: timed segments get the modeled plan */
    uint8_t plan_trials;   /* ... on trial against the default plan (not with model_untried) */
    /* the segment that ended at the last barrier: its entry's seed, and which plan its sighting ran if
     * its modeled plan is on trial (0: the modeled, 1: the default; -1: no trial) */
    uint64_t ended_seed;
    int ended_side;

    /* period detection for loops without barriers (ring, ring_total and the period are above) */
    int32_t *prefix;       /* scratch for the prefix function */
    uint64_t *lin;         /* scratch: the window in chronological order */

    /* Keys (points of the iteration) passed while the CUPTI guard watched, with their position in the
     * segment and, for the last two passes, the watch run and the learner's tick: a chunk whose end key
     * was passed len operations (ticks, and positions in the segment) after a pass of its start key in
     * the same run had every operation of it seen by the guard, whatever chunk plan cut it (open
     * addressing; cleared when three quarters full). The start's pass before its last counts too: at a
     * chunk's start its key was just passed again. Without the ticks, a watch that began where a chunk
     * ends (CUPTI attaching there) and passed the chunk's start in the next iteration took the chunk for
     * watched, though none of its operations were. */
    struct ag_gkey {
        uint64_t key, tick, prev_tick;
        uint32_t run, prev_run, pos;
    } *gkeys;
    size_t ngkeys;
    uint32_t last_run;
    uint64_t guarded_total; /* variants found guarded so far (ag_learner_guarded) */

    /* the ids of the last chunks closed (latest first; 0: none or unknown), and the last id given */
    uint64_t hist[AG_PRED], last_id;

    /* candidates that failed in the current chunk, judged when it closes */
    ag_variant_t *failed[AG_MAX_CANDIDATES];
    int nfailed;
    uint64_t failed_start;

    ag_vtable_t table;

    /* expected segment lengths and timings, keyed by seed, for the chunk plan */
    ag_seglen_t seglens[AG_SEGLEN_SETS * AG_SEGLEN_WAYS];
    uint64_t segments_ended; /* real and virtual barriers: the segment table's clock */
    uint64_t segments_timed, segments_gpu_bound;
    uint64_t segments_planned; /* timings that gave a segment the modeled plan */
    uint64_t segments_gpu_paced; /* those of them where the GPU sets the pace: the ramp with no tail */
    uint64_t segments_paced_by_wait; /* segments found GPU-paced by their barrier's waits in replay */
    uint64_t waits_weighed, waits_long; /* replayed sightings weighed, and those that waited over half */
    uint64_t trials_begun, trials_kept, trials_dropped; /* the modeled plans' trials and their verdicts */
    uint64_t trial_pairs;   /* pairs of sightings they compared */
    uint64_t models_refused; /* modeled plans not taken: a trial had dropped the segment's before */
    /* the last timing's comparison of plans (ag_learner_timing), for the engine's debug log: the modeled
     * plan's and the default plan's chunks and times (ns; 0 chunks: not compared), and the margin */
    uint32_t model_chunks, default_chunks;
    uint64_t model_ns, default_ns, model_margin_ns;
    uint64_t period_searches; /* searches of the window for a period (each reads all of it) */

    /* Renaming a new point after a known one (ag_learner_rename): the point each known one is usually
     * followed by (two-way sets by the earlier one; a majority count), the points the segment starting
     * now may be renamed to at its first operation (0: none), the point it was renamed from (0: not
     * renamed), and the renamings found wrong (the last AG_RENAME_WRONG of them) */
    struct ag_succ {
        uint64_t from, to;
        uint32_t votes;
    } succ[AG_SUCC_SLOTS];
    uint64_t rename_to[2];
    uint64_t renamed_from;
    struct {
        uint64_t from, to;
    } rename_wrong[AG_RENAME_WRONG]; /* renamings found wrong */
    uint32_t rename_wrong_next;
    uint64_t renamed, renames_wrong; /* segments renamed, and those of them found wrong at their end */
} ag_learner_t;

/* The launch path's functions: placed together (.text.hot), so that the few lines of code a launch runs
 * through, cold again after an interpreter ran between launches, sit on few pages. */
#ifndef AG_HOT
#define AG_HOT __attribute__((hot))
#endif

/* Mixes a value into a hash (also used to build operation signatures). */
AG_HOT uint64_t ag_mix(uint64_t h, uint64_t v);

int ag_learner_init(ag_learner_t *l, uint32_t chunk_max, uint32_t chunk_first, uint32_t warmup, size_t max_variants,
                    ag_variant_release_fn release, void *release_ctx);
void ag_learner_destroy(ag_learner_t *l);

/* Appends one operation. Returns 1 when the chunk plan closes the chunk after it (the caller then
 * calls ag_learner_close), 2 when a virtual barrier falls after it (call ag_learner_barrier with
 * virtual_=1), 0 otherwise. */
AG_HOT int ag_learner_push(ag_learner_t *l, uint64_t sig);

/* With shape_free_seeds, before each ag_learner_push: the operation's signature without its shape (grid,
 * block, sizes). The point after a segment is then named by its shape-free content (and its barrier): a
 * segment that differs only in its sizes (a batch of another size) leaves the next one at the same point,
 * and a batch padded to one of n sizes brings n variants there, not n times n. Without the flag nothing
 * calls it, and no operation pays for it. */
static inline void ag_learner_push_shape_free(ag_learner_t *l, uint64_t shape_free)
{
    l->shape_free = ag_mix(l->shape_free, shape_free);
}

/* Closes the current chunk at its planned size and starts the next. Returns the variant that now
 * describes the closed chunk (learned or re-seen), or NULL (out of memory). */
ag_variant_t *ag_learner_close(ag_learner_t *l);

/* A barrier (an observing call, identified by `kind`) or a virtual barrier ends the segment: closes a
 * non-empty chunk and starts a new segment. Returns the closed chunk's variant or NULL. */
ag_variant_t *ag_learner_barrier(ag_learner_t *l, uint64_t kind, int virtual_);

/* Variants that may follow from the current chunk start and have been seen often enough; fills out[]
 * (at most AG_MAX_CANDIDATES) and returns how many. Where more than AG_MAX_CANDIDATES may follow, returns
 * -1 (out[] unspecified): the chunk's first operation chooses among them (ag_learner_candidates_first). */
int ag_learner_candidates(ag_learner_t *l, ag_variant_t **out);

/* At the chunk's start, before its first operation (signature sig) is pushed: those of the variants
 * ag_learner_candidates would give whose first operation is sig (the most recently learned first, at most
 * AG_MAX_CANDIDATES); returns how many. */
int ag_learner_candidates_first(ag_learner_t *l, ag_variant_t **out, uint64_t sig);

/* Kernel time on the GPU and host time of issuing, measured for one whole sighting of the segment that
 * started at `seed` (ops operations, none of them deferred). A segment whose GPU time is bound_ratio
 * times its host time or more is one a graph cannot speed up (the host's launch work is hidden behind
 * the GPU's): its variants stop being candidates until a later timing says otherwise. The GPU time per
 * operation also sets how far the default plan's tail shrinks. With per-operation times (t, NULL if
 * unknown) of a whole segment between real barriers, and model_plans set, the segment gets the modeled
 * plan where the model puts it ahead of the default plan by two graph launches and 0.5% (it
 * keeps or drops an earlier modeled plan accordingly). */
void ag_learner_timing(ag_learner_t *l, uint64_t seed, uint32_t ops, uint64_t gpu_ns, uint64_t host_ns,
                       const ag_optime_t *t, const ag_plan_params_t *p);

/* The pace of a segment not known to be paced by the GPU, from replay itself. A whole sighting of the
 * segment that started at `seed` (ops operations, every one of them held back and replayed) took the host
 * host_ns from its first operation until its barrier's call went to the driver, and that call then
 * blocked for wait_ns: the GPU
 * still had at least that much of the segment's work queued when the host was done, so the segment's GPU
 * time was at least wait_ns. Where that is more than half the host's time (the rule ag_learner_timing
 * applies to a timed segment's GPU time) AG_PACED_WAITS sightings in a row, the GPU sets the pace: the
 * segment keeps the ramp and loses the tail, as a timing would plan it (the chunks it cuts anew are
 * graphed at their second sighting). Measured on the H200 (launch_bound, halving plan): 120-140 us of host
 * work and 100-110 us waited, outliers about one sighting in ten; the paced plan then took 87-95 us and
 * waited 130-140 us. A timing's verdict of host-paced is weighed too: CUPTI attached inflates the host
 * time of the launches it watches, so a segment the GPU paces can be timed as host-paced (launch_bound,
 * timed in its second sighting under CUPTI on the H200: 370 us of host time as replay would take it, GPU
 * 184 us, a plan of three chunks; in replay the host took 90-140 us). Only segments that end at a real
 * barrier, neither GPU-paced nor GPU-bound, with model_plans set; at most AG_WAIT_WEIGHED sightings each.
 * Returns 1 when the segment got the plan now. */
#define AG_PACED_WAITS 3
#define AG_WAIT_WEIGHED 32
int ag_learner_waited(ag_learner_t *l, uint64_t seed, uint32_t ops, uint64_t host_ns, uint64_t wait_ns);
/* Whether ag_learner_waited would weigh a sighting of that segment (ops operations) now. */
int ag_learner_weighs_wait(ag_learner_t *l, uint64_t seed, uint32_t ops);

/* A replayed sighting of the segment whose entry's seed is `seed` (ops operations, every one of them
 * held back and replayed, no CUPTI attached, not a probe) took ns, under the plan `side` (as
 * ag_learner_barrier left it in ended_side). With the sighting before it of the other plan it makes a
 * pair; the AG_TRIAL_PAIRS-th pair gives the verdict, which the segment takes at its next end (the
 * sighting under way keeps the plan it started with). Returns 1 when the modeled plan is kept, -1 when
 * it is dropped (*ratio: the pairs' median ratio, x1024), else 0. */
int ag_learner_trial_time(ag_learner_t *l, uint64_t seed, uint32_t ops, int side, uint64_t ns, uint32_t *ratio);

/* The expected length, timings and plan of the segment that started at `seed`, or NULL if unknown. */
const ag_seglen_t *ag_learner_seglen(ag_learner_t *l, uint64_t seed);

/* The profitability record of the segment that started at `seed`, or NULL if unknown. */
ag_profit_t *ag_learner_profit(ag_learner_t *l, uint64_t seed);

/* The CUPTI guard starts (on) or stops watching the operations pushed from now on. */
void ag_learner_watch(ag_learner_t *l, int on);

/* Whether every operation of v was seen in one run of the guard (cached in v->guarded once true). */
int ag_learner_guarded(ag_learner_t *l, ag_variant_t *v);

/* Right after a barrier: whether the segment's first chunk is likely to come to its warm-up-th sighting
 * (warm-up 2 or more) now, unwatched by the guard. The segment before repeated (seg_after_repeat, one of
 * a few operations or more: a loop, not work that only starts the same way each time), and a variant
 * known at this start, not found guarded, is made a candidate by one more sighting (graphable, its
 * segment not GPU-bound). The engine then opens the learning window here rather than after that chunk:
 * the sighting is watched whole, so the work can be held back at its next sighting instead of one
 * later (engine.c, window_ahead). */
int ag_learner_expects_unguarded(ag_learner_t *l);

/* At a segment's first operation (signature sig), where the barrier before it left rename_to set: renames
 * the point the segment starts at ("a new point named after a known one", above). Returns 1 if it did (the
 * candidates are then those of the new name). */
int ag_learner_rename(ag_learner_t *l, uint64_t sig);

/* A deferral of these candidates failed. Unless the chunk turns out to be another known variant, they
 * are charged when it closes: from the second failure in a row on, their sightings are forgotten and
 * the warm-up doubles with each further failure. */
void ag_learner_failed(ag_learner_t *l, ag_variant_t **cands, int n);
/* Held work of these candidates waited for the program in vain (it observed the device by other means
 * than a call): charged at once, whatever work comes next, as a failure is charged when the chunk
 * closes. */
void ag_learner_stalled(ag_learner_t *l, ag_variant_t **cands, int n);

/* A deferral of this variant completed: its failures are forgiven. */
void ag_learner_succeeded(ag_variant_t *v);

/* Forgets the locked period (after a mismatch inside a virtual segment). */
void ag_learner_unlock_period(ag_learner_t *l);

/* ---- resting: a program whose work never repeats (pattern.c) ----
 * After `after` (AUTOGRAPH_REST) segments in a row that repeated nothing seen before (neither a chunk
 * the learner knew nor the segment's whole content, wherever in the iteration it came), the engine rests:
 * the next segments go straight to the driver, untouched (no learner, no lock), 1 of them at first,
 * then twice as many each time up to AG_REST_MAX; one segment is learned between two rests, and one
 * that repeats something ends resting until the next run of `after` novel segments. A segment learned
 * right after a rest starts from the same point of the learner (the barrier's kind), so work that
 * repeats shows up between two rests whatever came before it. */
#define AG_REST_MAX 16
/* Contents of recent segments remembered: sets of AG_REST_WAYS, the least recently seen one of a set
 * forgotten (direct-mapped, as the segment table was, two contents of one iteration that met in a slot
 * forgot each other every time). */
#define AG_REST_CONTENTS 256
#define AG_REST_WAYS 4

typedef struct {
    uint32_t novel; /* segments in a row that repeated nothing */
    uint32_t next;  /* segments the next rest sits out (0: 1) */
    uint64_t rests, rested; /* rests begun, and the segments they were to sit out */
    uint64_t contents[AG_REST_CONTENTS];
} ag_rest_t;

/* A segment with operations ended, its content hashed as `content` (the learner's, which does not
 * depend on what came before it); repeated: a chunk of it was seen before. A segment whose content was
 * seen before counts as repeated too: a program with more syncs per iteration than `after`, each
 * segment new in its first iteration, is not taken for one that never repeats once its second
 * iteration comes. Returns how many segments to sit out from now (0: go on learning). after = 0:
 * never rest. */
uint32_t ag_rest_segment(ag_rest_t *r, int repeated, uint64_t content, uint32_t after);

/* What a kernel is without its size, for the shape-free signature (AUTOGRAPH_SEGMENT_KEY=shape_free), from
 * its name as the driver gives it (cuFuncGetName, cuKernelGetName: mangled): the hash of the name without
 * its template arguments and parameters (PyTorch instantiates one kernel template with other tile sizes for
 * another batch size: LayerNorm's backward GammaBetaBackwardCUDAKernelTemplate<float, float, 32, 32, 256>
 * for 224 rows and more, <..., 32, 16, 128> below on the H200), or 0 for a kernel a library picks by the
 * problem's size whatever its name says (cuBLAS's nvjet kernels, which carry the tile in the name,
 * cuBLAS/cuBLASLt/CUTLASS/cuDNN GEMMs and GEMVs, split-K reductions: another size may bring another kernel,
 * or one more), which leaves no trace. A name that is not a mangled function name (extern "C") is taken
 * whole. Never 0 otherwise. */
uint64_t ag_name_family(const char *name);

/* Smallest period of s[0..n) (n if none): exposed for the unit tests. */
uint32_t ag_smallest_period(const uint64_t *s, uint32_t n, int32_t *scratch);

#endif
