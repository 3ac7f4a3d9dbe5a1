/* Unit tests of the profitability rule (profit.c): a segment's sightings played with chosen replay and
 * eager times, in the engine's order (a sighting starts, and is told whether it runs eager, before the
 * one before it is timed: its time ends at the next segment's first operation). */
#include <string.h>

#include "check.h"
#include "pattern.h"

typedef uint64_t (*cost_fn)(long i);

typedef struct {
    long probes, held, left, kept, eager_runs;
    uint32_t max_hold;
} tally_t;

/* n sightings; untimed: the probes' runs cannot be timed (CUPTI attached, say) */
static tally_t play(ag_profit_t *p, long n, cost_fn replay, cost_fn eager, int untimed)
{
    tally_t t = {0};
    int open = 0, o_forced = 0;
    uint64_t o_ns = 0;
    ag_run_t o_how = AG_RUN_OTHER;
    for (long i = 0; i < n; i++) {
        int forced = ag_profit_start(p);
        if (forced) {
            t.eager_runs++;
            if (p->eager)
                t.held++;
            else
                t.probes++;
        }
        if (open) {
            int v = ag_profit_end(p, o_how, o_forced, o_ns);
            t.left += v > 0;
            t.kept += v < 0;
            if (p->hold > t.max_hold)
                t.max_hold = p->hold;
        }
        open = 1;
        o_forced = forced;
        o_how = !forced ? AG_RUN_REPLAYED : untimed && !p->eager ? AG_RUN_OTHER : AG_RUN_EAGER;
        o_ns = forced ? eager(i) : replay(i);
    }
    return t;
}

static uint64_t us100(long i) { (void)i; return 100000; }
static uint64_t us50(long i) { (void)i; return 50000; }
static uint64_t us90(long i) { (void)i; return 90000; }
static uint64_t us102(long i) { (void)i; return 102000; }
static uint64_t us115(long i) { (void)i; return 115000; }
static uint64_t us300(long i) { (void)i; return 300000; }
static uint64_t us150(long i) { (void)i; return 150000; }
static uint64_t us95(long i) { (void)i; return 95000; }
/* a wait that varies from 1500 to 2700 us, stepping through 13 levels (any 8 runs in a row take levels
 * spread over the whole range); plain runs step through the same levels on their own count, 5% shorter */
static uint64_t wait_level(long k) { return 1500000 + (uint64_t)((k * 2) % 13) * 100000; }
static uint64_t wait_replay(long i) { return wait_level(i); }
static uint64_t wait_eager(long i)
{
    static long k; /* the plain runs so far */
    (void)i;
    return wait_level(k++) * 95 / 100;
}
/* noise only ever adds time: a third of the runs take 4x as long */
static uint64_t us100_spiky(long i) { return i % 3 ? 100000 : 400000; }
static uint64_t us95_spiky(long i) { return i % 3 ? 95000 : 400000; }
static uint64_t us110_spiky(long i) { return i % 3 ? 110000 : 400000; }

/* The host slows by half from sighting 50 on (another process took its cores), in the middle of the first
 * series of probes (sightings 33-61); at any moment the replays are 4% faster than plain runs. */
static uint64_t step_replay(long i) { return i < 50 ? 100000 : 150000; }
static uint64_t step_eager(long i) { return step_replay(i) * 104 / 100; }
/* ... and the same slowdown where plain runs are 5% faster at any moment */
static uint64_t step_eager_ahead(long i) { return step_replay(i) * 95 / 100; }

int main(void)
{
    ag_profit_t p;

    /* Replays clearly ahead (100 us against 300 plain), no plain sighting before them: two probes settle
     * it, the next two come after a long quiet stretch (1024 replays, then 2048): 4 probes in 3000
     * sightings, no verdict against. */
    memset(&p, 0, sizeof p);
    tally_t t = play(&p, 3000, us100, us300, 0);
    CHECK(t.probes == 2 * AG_PROFIT_CLEAR_PROBES && t.left == 0 && t.held == 0 && t.kept == 0);
    CHECK(p.quiet == 4 * AG_PROFIT_QUIET);

    /* The same with a plain sighting before the replays (learning, 300 us): one probe settles the first
     * series; the sighting is used once, so the next series takes two: 3 probes in 3000 sightings. */
    memset(&p, 0, sizeof p);
    CHECK(ag_profit_end(&p, AG_RUN_EAGER, 0, 300000) == 0 && p.plain == 300000);
    t = play(&p, 3000, us100, us300, 0);
    CHECK(t.probes == 2 * AG_PROFIT_CLEAR_PROBES - 1 && t.left == 0 && t.held == 0 && t.kept == 0);
    CHECK(p.quiet == 4 * AG_PROFIT_QUIET && p.plain == 0);
    /* Only what ran plain before the first replay counts, the fastest of them; a forced run (not plain:
     * the CUPTI-timed, say) or a later one does not. */
    memset(&p, 0, sizeof p);
    ag_profit_end(&p, AG_RUN_EAGER, 0, 500000);
    ag_profit_end(&p, AG_RUN_OTHER, 0, 100000);
    ag_profit_end(&p, AG_RUN_EAGER, 0, 400000);
    ag_profit_end(&p, AG_RUN_REPLAYED, 0, 100000);
    ag_profit_end(&p, AG_RUN_EAGER, 0, 150000);
    CHECK(p.plain == 400000);
    /* Either of the two under twice the replays' median: two probes, as without the sighting (a plain
     * sighting of 150 us, probes of 300; a sighting of 300 us, probes of 150, cleared at the second by
     * the 25% rule). */
    memset(&p, 0, sizeof p);
    ag_profit_end(&p, AG_RUN_EAGER, 0, 150000);
    t = play(&p, 1000, us100, us300, 0);
    CHECK(t.probes == AG_PROFIT_CLEAR_PROBES && t.left == 0);
    memset(&p, 0, sizeof p);
    ag_profit_end(&p, AG_RUN_EAGER, 0, 300000);
    t = play(&p, 1000, us100, us150, 0);
    CHECK(t.probes == AG_PROFIT_CLEAR_PROBES && t.left == 0);

    /* Plain launches ahead (90 against 100 us): one series of 8 probes, then the segment runs eager;
     * after each hold it replays 8 times and is judged again against the hold's eager times, losing
     * again: the holds double (64, 128, 256, ...), no further probes. */
    memset(&p, 0, sizeof p);
    t = play(&p, 3000, us100, us90, 0);
    CHECK(t.probes == AG_PROFIT_SAMPLES);
    CHECK(t.left >= 4 && t.kept == 0);
    CHECK(t.max_hold >= 8 * AG_PROFIT_HOLD && t.max_hold <= AG_PROFIT_HOLD_MAX);
    CHECK(t.eager_runs > 2700); /* nearly every sighting after the first series */

    /* Replays ahead by 15%: settled after four probes (each slower by more than 50%/4). */
    memset(&p, 0, sizeof p);
    t = play(&p, 1000, us100, us115, 0);
    CHECK(t.probes == 4 && t.left == 0 && t.held == 0);

    /* A close call (plain 2% slower, within the margin): the graphs are kept, a new series after 256. */
    memset(&p, 0, sizeof p);
    t = play(&p, 1000, us100, us102, 0);
    CHECK(t.left == 0 && t.kept >= 2);
    CHECK(t.probes >= 2 * AG_PROFIT_SAMPLES && t.probes <= 5 * AG_PROFIT_SAMPLES);

    /* Noise that slows a third of the runs either way does not move the medians' verdict: plain 5%
     * faster still wins; plain 10% slower never does. */
    memset(&p, 0, sizeof p);
    t = play(&p, 2000, us100_spiky, us95_spiky, 0);
    CHECK(t.left >= 1 && t.eager_runs > 1000);
    memset(&p, 0, sizeof p);
    t = play(&p, 2000, us100_spiky, us110_spiky, 0);
    CHECK(t.left == 0 && t.held == 0);

    /* A segment whose time is mostly a wait that varies by a third from sighting to sighting (a
     * data-parallel rank waiting for the others at its sync): plain runs 5% faster by the medians are
     * no verdict, since the runs lie farther than that from their medians; the same 5% with steady
     * times is one. */
    memset(&p, 0, sizeof p);
    t = play(&p, 3000, wait_replay, wait_eager, 0);
    CHECK(t.left == 0 && t.held == 0 && t.kept >= 2);
    memset(&p, 0, sizeof p);
    t = play(&p, 1000, us100, us95, 0);
    CHECK(t.left >= 1);

    /* A slowdown of the whole host in the middle of a series is no verdict: the replays it is judged
     * against are taken across the series, one between each two probes, as the probes are (the last 8
     * replays, all after the slowdown, against probes mostly before it said "plain is faster" until the
     * fifty-fifth session: a PyTorch run on a disturbed host left its largest segment eager for 64 steps). */
    memset(&p, 0, sizeof p);
    t = play(&p, 200, step_replay, step_eager, 0);
    CHECK(t.left == 0 && t.held == 0);
    /* ... while plain runs that are ahead at every moment still win through the same slowdown */
    memset(&p, 0, sizeof p);
    t = play(&p, 200, step_replay, step_eager_ahead, 0);
    CHECK(t.left >= 1 && t.held >= AG_PROFIT_HOLD);

    /* A plain sighting before the replays that was slow (first-time costs, 300 us) does not settle a
     * segment whose plain launches are ahead: its probe must be slow too. */
    memset(&p, 0, sizeof p);
    ag_profit_end(&p, AG_RUN_EAGER, 0, 300000);
    t = play(&p, 1000, us100, us90, 0);
    CHECK(t.probes == AG_PROFIT_SAMPLES && t.left >= 1);

    /* Plain ahead at first, then the replays get faster (50 us): after the hold the segment is judged
     * again and its graphs come back. */
    memset(&p, 0, sizeof p);
    t = play(&p, 100, us100, us90, 0);
    CHECK(t.left == 1 && p.eager);
    t = play(&p, 400, us50, us90, 0);
    CHECK(t.kept >= 1 && t.left == 0 && !p.eager);

    /* Probes that cannot be timed are asked for again at the next sightings, then the series is given
     * up until the next check (256 replays later): never a verdict from them. */
    memset(&p, 0, sizeof p);
    t = play(&p, AG_PROFIT_FIRST + 40, us100, us90, 1);
    CHECK(t.probes == AG_PROFIT_ATTEMPTS + 1 && t.left == 0 && t.held == 0);
    CHECK(p.wait == AG_PROFIT_RECHECK);
    t = play(&p, 300, us100, us90, 0);
    CHECK(t.probes >= 1 && t.probes <= AG_PROFIT_SAMPLES);

    /* A record too new to say anything (fewer than 4 replays timed) never probes. */
    memset(&p, 0, sizeof p);
    CHECK(ag_profit_start(&p) == 0);
    for (int i = 0; i < 3; i++)
        ag_profit_end(&p, AG_RUN_REPLAYED, 0, 100000);
    p.reps = 1000;
    CHECK(ag_profit_start(&p) == 0);
    /* Sightings that ran otherwise (learning, a fallback) count for nothing. */
    memset(&p, 0, sizeof p);
    for (int i = 0; i < 100; i++)
        CHECK(ag_profit_end(&p, AG_RUN_OTHER, 0, 1) == 0 && ag_profit_start(&p) == 0);

    return CHECK_DONE();
}
