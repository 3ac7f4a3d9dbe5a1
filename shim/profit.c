/* Whether a segment's graphs pay: probes and verdicts (pure C, no CUDA headers; pattern.h says how). */
#include <string.h>

#include "pattern.h"

static uint32_t clamp32(uint64_t ns)
{
    return ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}

static void push(uint32_t *ring, uint8_t *n, uint8_t *i, uint64_t ns)
{
    ring[*i] = clamp32(ns);
    *i = (uint8_t)((*i + 1) % AG_PROFIT_SAMPLES);
    if (*n < AG_PROFIT_SAMPLES)
        (*n)++;
}

_Static_assert(AG_PROFIT_SAMPLES <= AG_MEDIAN_MAX, "a series' samples have one median");

uint32_t ag_median32(const uint32_t *samples, uint32_t n)
{
    uint32_t v[AG_MEDIAN_MAX];
    if (n > AG_MEDIAN_MAX)
        n = AG_MEDIAN_MAX;
    memcpy(v, samples, sizeof *v * n);
    for (uint32_t i = 1; i < n; i++)
        for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
            uint32_t t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n ? v[(n - 1) / 2] : 0;
}

/* How far n samples typically lie from their median m: the median of their distances to it. */
static uint64_t spread(const uint32_t *ring, uint8_t n, uint64_t m)
{
    uint32_t d[AG_PROFIT_SAMPLES];
    for (int i = 0; i < n; i++)
        d[i] = clamp32(ring[i] > m ? ring[i] - m : m - ring[i]);
    return ag_median32(d, n);
}

/* Eager runs against replays, by medians: the replay loses where eager was ahead by the margin, and by
 * more than the two kinds of runs typically lie from their medians; at the end of a series, also where
 * its probes were ahead of their neighbours by the margin, pair by pair (the median ratio). */
static int judge(ag_profit_t *p)
{
    uint64_t e = ag_median32(p->eag, p->neag), r = ag_median32(p->rep, p->nrep);
    uint8_t n = p->series;
    p->series = 0;
    p->reps = 0;
    if (p->neag >= AG_PROFIT_SAMPLES / 2 && e * (AG_PROFIT_MARGIN + 1) < r * AG_PROFIT_MARGIN &&
        r - e > spread(p->eag, p->neag, e) + spread(p->rep, p->nrep, r) &&
        (!n || (uint64_t)ag_median32(p->ratio, n) * (AG_PROFIT_MARGIN + 1) < 1024u * AG_PROFIT_MARGIN)) {
        p->hold = p->hold ? (p->hold * 2 > AG_PROFIT_HOLD_MAX ? AG_PROFIT_HOLD_MAX : p->hold * 2) : AG_PROFIT_HOLD;
        p->hold_left = p->hold;
        p->eager = 1;
        return 1;
    }
    p->wait = AG_PROFIT_RECHECK;
    return -1;
}

int ag_profit_start(ag_profit_t *p)
{
    if (p->eager) {
        if (p->hold_left) {
            p->hold_left--;
            return 1;
        }
        /* The hold is over: replays again, judged against the hold's eager times once enough are in. */
        p->eager = 0;
        p->nrep = p->irep = 0;
        p->recheck = 1;
        p->reps = 0;
        return 0;
    }
    if (p->probe_out || p->recheck || p->nrep < AG_PROFIT_SAMPLES / 2 ||
        p->reps < (p->wait ? p->wait : AG_PROFIT_FIRST))
        return 0;
    p->probe_out = 1;
    p->reps = 0;
    return 1;
}

int ag_profit_end(ag_profit_t *p, ag_run_t how, int forced, uint64_t ns)
{
    if (how == AG_RUN_REPLAYED) {
        push(p->rep, &p->nrep, &p->irep, ns);
        p->last = clamp32(ns);
        if (p->eager)
            return 0;
        p->reps++;
        if (p->recheck && p->nrep == AG_PROFIT_SAMPLES) {
            p->recheck = 0;
            return judge(p);
        }
        return 0;
    }
    if (!forced) {
        /* learning, a fallback: says nothing about the graphs; a plain one before any replay is kept to
         * confirm a single clear probe */
        if (how == AG_RUN_EAGER && !p->nrep && !p->neag && (!p->plain || ns < p->plain))
            p->plain = clamp32(ns);
        return 0;
    }
    if (p->eager) {
        if (how == AG_RUN_EAGER)
            push(p->eag, &p->neag, &p->ieag, ns);
        return 0;
    }
    if (!p->probe_out)
        return 0;
    p->probe_out = 0;
    if (how != AG_RUN_EAGER) {
        /* The probe could not be timed (CUPTI attached, a rest began): again at the next sighting, a few
         * times, then the series is given up until the next check. */
        if (++p->attempts > AG_PROFIT_ATTEMPTS) {
            p->attempts = 0;
            p->series = 0;
            p->reps = 0;
            p->wait = AG_PROFIT_RECHECK;
        } else {
            p->reps = p->wait ? p->wait : AG_PROFIT_FIRST;
        }
        return 0;
    }
    p->attempts = 0;
    push(p->eag, &p->neag, &p->ieag, ns);
    uint32_t t = clamp32(ns);
    uint64_t ratio = p->last ? (uint64_t)t * 1024 / p->last : 1024; /* (a probe follows replays: always one) */
    if (p->series < AG_PROFIT_SAMPLES) /* (always: a series is judged at AG_PROFIT_SAMPLES) */
        p->ratio[p->series] = clamp32(ratio);
    p->smin = p->series++ && p->smin < t ? p->smin : t;
    /* k probes so far, each slower than the replays' median by more than AG_PROFIT_CLEAR_PCT / k percent;
     * or one, and the plain sighting before the replays, each by AG_PROFIT_CLEAR_ONE_PCT percent */
    uint64_t rmed = ag_median32(p->rep, p->nrep);
    int one = p->series == 1 && p->plain && (uint64_t)p->smin * 100 >= rmed * (100 + AG_PROFIT_CLEAR_ONE_PCT) &&
              (uint64_t)p->plain * 100 >= rmed * (100 + AG_PROFIT_CLEAR_ONE_PCT);
    if (p->series == 1)
        p->plain = 0; /* confirms one series only: it is as old as the first replays */
    if (one || (p->series >= AG_PROFIT_CLEAR_PROBES &&
                (uint64_t)p->smin * 100 * p->series >= rmed * (100 * p->series + AG_PROFIT_CLEAR_PCT))) {
        /* clearly slower eager: the graphs pay; the next look comes after a longer quiet stretch */
        uint32_t q = p->quiet ? p->quiet : AG_PROFIT_QUIET;
        p->wait = q;
        p->quiet = q * 2 > AG_PROFIT_QUIET_MAX ? AG_PROFIT_QUIET_MAX : q * 2;
        p->series = 0;
        return 0;
    }
    if (p->series < AG_PROFIT_SAMPLES) {
        p->wait = AG_PROFIT_SPACING;
        return 0;
    }
    return judge(p);
}

void ag_profit_medians(const ag_profit_t *p, uint64_t *eager_ns, uint64_t *replay_ns)
{
    *eager_ns = ag_median32(p->eag, p->neag);
    *replay_ns = ag_median32(p->rep, p->nrep);
}
