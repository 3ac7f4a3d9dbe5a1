/* The AUTOGRAPH_* options table, its parser and the env.example writer. Pure C, no CUDA: linked into
 * the preloaded library and into the autograph CLI (which prints env.example from this table, and a
 * test checks that the file in the repository matches it). */
#include "options.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

static const ag_option_desc_t descs[AG_OPT_COUNT] = {
    [AG_OPT_LOG] = {"AUTOGRAPH_LOG", AG_OPT_ENUM, "warn", "error|warn|info|debug|trace",
                    "Messages written to stderr, prefixed 'autograph:'. 'info' adds a one-line summary at exit; 'debug' "
                    "a timeline, each line with the milliseconds since the shim loaded: a line per graph built, per "
                    "segment timed while learning and per probe and verdict; 'trace' a line per kernel node patched "
                    "(the bytes that changed), per kernel's parameter layout, per operation and barrier (with "
                    "the point it comes at) and per mismatch (what came, and what the candidate's graph holds "
                    "there)."},
    [AG_OPT_STATS] = {"AUTOGRAPH_STATS", AG_OPT_STRING, "", "path",
                      "Write statistics as JSON to this file at process exit (call counts per hooked entry "
                      "point, kernel launches). '%p' is replaced by the process id; a forked child writes "
                      "statistics only when the path contains '%p', and without it a process that made no "
                      "driver call (a helper the program ran, the shim preloaded into it too) does not "
                      "overwrite an existing file."},
    [AG_OPT_SCOPE] = {"AUTOGRAPH_SCOPE", AG_OPT_ENUM, "all", "off|all",
                      "Which work the shim may take over. 'all': every repeating kernel launch, memset and "
                      "device-to-device copy; 'off': every call goes straight to the driver (statistics are "
                      "still counted)."},
    [AG_OPT_CUPTI] = {"AUTOGRAPH_CUPTI", AG_OPT_ENUM, "learn", "off|learn|guard|always",
                      "CUPTI observer. 'learn': once work repeats, CUPTI callbacks watch it before any of it is "
                      "deferred and catch launches, copies and syncs that reach the driver past every hook "
                      "(deferred work is issued before them, and the shim stops deferring), and kernel "
                      "timings are recorded; both are switched off before graphs are replayed (with "
                      "callbacks on, graph launches cost 200-365 us). CUPTI is set up at cuInit (opened, "
                      "subscribed to and unsubscribed before any context exists: 6-12 ms in all on the "
                      "H200, the subscription about 4 ms of it, against 11-20 ms for a first subscription "
                      "inside the loop); a program that never repeats never attaches it. 'guard': "
                      "callbacks on for the whole run (safest, slow graph "
                      "launches). 'always': callbacks and timings for the whole run (for checking "
                      "coverage). 'off': no CUPTI. A profiler that subscribes later gets CUPTI."},
    [AG_OPT_CUPTI_LIB] = {"AUTOGRAPH_CUPTI_LIB", AG_OPT_STRING, "", "path",
                          "libcupti to open instead of searching the usual places (a copy already loaded, "
                          "the one beside a PyTorch installation's NVIDIA wheels, the CUDA toolkit's)."},
    [AG_OPT_CUPTI_DETACH] = {"AUTOGRAPH_CUPTI_DETACH", AG_OPT_ENUM, "background", "background|inline",
                             "Where CUPTI is finalized when a learning window closes (cuptiFinalize, 2-3.5 ms "
                             "on the H200 host): 'background' on a thread of the shim's while the program "
                             "goes on (callbacks, kernel activity and the subscription are off and the "
                             "records flushed before it starts, and CUPTI is not touched again until it "
                             "ended); 'inline' on the program's thread, which waits for it. Either way, once a "
                             "CUDA graph was launched while CUPTI timed kernels, graph launches wait while a "
                             "finalize runs."},
    [AG_OPT_CUPTI_TIMING] = {"AUTOGRAPH_CUPTI_TIMING", AG_OPT_ENUM, "on", "off|on",
                             "Whether CUPTI's learning windows (and 'always') time kernels with its activity "
                             "API. 'on': a segment never timed runs once more on plain launches under a window to "
                             "be timed (not the first sighting a window opened ahead of: CUPTI's first "
                             "launches cost the host several times a later one's), "
                             "which leaves segments the GPU bounds eager (AUTOGRAPH_GPU_BOUND), sets where "
                             "the chunk plan's tail stops and gives segments the GPU paces one chunk after "
                             "the ramp; enabling the activity costs 0.5-0.7 ms at a window's first launch on "
                             "the H200. 'off': windows only watch the calls, no segment is held back to be "
                             "timed, and a segment keeps the default plan unless replay finds the GPU sets "
                             "its pace (its barrier waiting over half the time the host took to issue it, "
                             "three times in a row: the ramp with no tail)."},
    [AG_OPT_WARMUP] = {"AUTOGRAPH_WARMUP", AG_OPT_INT, "2", "1..1000",
                       "How many times a chunk of work must be seen, identically, before it is deferred and "
                       "replayed from a CUDA graph. With 1, CUPTI's learning window opens in the first "
                       "iteration and times two iterations eagerly instead of one (the first one it sees whole "
                       "can run several times slower, too slow to plan from): replay starts one iteration "
                       "earlier than with 2, not two."},
    [AG_OPT_CHUNK] = {"AUTOGRAPH_CHUNK", AG_OPT_INT, "128", "4..8192",
                      "Most operations per graph. Long segments are cut into chunks so that the GPU runs one "
                      "chunk while the CPU issues the next; chunks shrink toward the expected sync point."},
    [AG_OPT_CHUNK_FIRST] = {"AUTOGRAPH_CHUNK_FIRST", AG_OPT_INT, "8", "0..8192",
                            "Operations in the first chunk after a sync. The GPU is idle after a sync: a small "
                            "first chunk starts it at once, and each later chunk is as large as all before it "
                            "(up to AUTOGRAPH_CHUNK). 0: every chunk is AUTOGRAPH_CHUNK long."},
    [AG_OPT_CHUNK_PLAN] = {"AUTOGRAPH_CHUNK_PLAN", AG_OPT_ENUM, "model", "halving|model|model_untried",
                           "Where chunks are cut. 'halving': the ramp of AUTOGRAPH_CHUNK_FIRST, then chunks "
                           "halving toward the expected sync (where segments of the length that last "
                           "ended twice in a row at that point end). 'model': the same until a segment was timed "
                           "once, operation by operation, while CUPTI watched it (AUTOGRAPH_CUPTI=learn or "
                           "always); then the cuts that a model of host and GPU times finishes soonest with, "
                           "where it beats the halving plan by two graph launches and 0.5% of the segment's time; a "
                           "segment whose GPU time is over half its host time keeps the ramp with no tail "
                           "(the GPU still has work queued at the sync); so does one no timing found so whose "
                           "sync, replayed, waits over half the time the host took to issue it, three times "
                           "in a row. A modeled plan is on trial: replayed sightings alternate between it and "
                           "the halving plan, each timed from its first operation to the first after its sync, "
                           "and after 16 pairs it stays only where the median pair put it ahead (else the "
                           "halving plan comes back for that segment, for good; not with AUTOGRAPH_CUPTI=guard or "
                           "always, which keep CUPTI attached while replaying). 'model_untried': the modeled "
                           "plan without the trial."},
    [AG_OPT_SEGMENT_KEY] = {"AUTOGRAPH_SEGMENT_KEY", AG_OPT_ENUM, "shape_free", "exact|shape_free",
                            "How the point of the iteration after a sync is named, where the work that follows "
                            "is learned. 'shape_free': by the kernels and copies before it without their grids "
                            "and sizes (a kernel by its name without template arguments, which another size may "
                            "change; none of the GEMM kernels a library picks by size: cuBLAS, cuBLASLt, "
                            "CUTLASS, cuDNN, split-K reductions), so that a batch of another size before a "
                            "sync leaves the next step at the same point, and up to 64 variants are kept there "
                            "(loops whose batches come in "
                            "several sizes in a random order, a loader padding to a few lengths, and whose loss "
                            "is read through page-locked memory, as PyTorch's loss.item() reads it). Segments "
                            "between syncs that differ only in their sizes share one point (their chunk plans "
                            "too). 'exact': by the work before it, sizes included (n sizes bring n x n variants "
                            "of what follows)."},
    [AG_OPT_RENAME] = {"AUTOGRAPH_RENAME", AG_OPT_ENUM, "on", "off|on",
                       "'on': where a segment between syncs starts at a point other than the one that usually "
                       "comes there, because the segment before it was not the usual one (an optimizer step "
                       "skipped, an evaluation put in between), and nothing expected there begins with its "
                       "first operation, it is matched as a sighting of the segment that usually comes: the "
                       "one that starts where the segment before it started, or the one that usually follows "
                       "that, whichever has work ready to replay that begins with that operation. A renaming "
                       "whose segment then ends unlike any of the last 4 segments of its new point was wrong "
                       "and is not made again. "
                       "Only once the program is trusted (a CUPTI learning window caught no call past the "
                       "hooks) or without the CUPTI guard, and never while the engine rests. 'off': such a "
                       "segment is learned at its own point (warm-up sightings for each of its sizes)."},
    [AG_OPT_MAX_GRAPHS] = {"AUTOGRAPH_MAX_GRAPHS", AG_OPT_INT, "256", "1..100000",
                           "Most CUDA graphs kept at once. Once full, a new graph replaces one not launched "
                           "for a while, or the one launched least where the new work asked for a graph more "
                           "than twice as often; else that work runs eagerly (fallback graph_cache_full)."},
    [AG_OPT_STAGING_KB] = {"AUTOGRAPH_STAGING_KB", AG_OPT_INT, "4096", "4..1048576",
                           "Size of each of the 4 pinned staging buffers (KiB) that hold snapshots of pageable "
                           "host-to-device copy sources while their copies wait in a graph; larger copies are "
                           "issued directly."},
    [AG_OPT_GPU_BOUND] = {"AUTOGRAPH_GPU_BOUND", AG_OPT_INT, "3", "0..1000",
                          "A segment (the work between two syncs) whose kernels, timed by CUPTI while the shim "
                          "learns, keep the GPU busy this many times longer than the host took to issue them "
                          "stays on plain launches: the host's launch work is hidden behind the GPU's, so a "
                          "graph cannot speed it up. 0: graph such segments too."},
    [AG_OPT_REST] = {"AUTOGRAPH_REST", AG_OPT_INT, "32", "0..1000000",
                     "After this many segments in a row (the work between two syncs) that repeated nothing "
                     "seen before, the shim rests: the next segments' calls go straight to the driver, "
                     "untouched, 1 segment at first, then 2, 4, ... up to 16 (or twice as many operations "
                     "as the last segment had, per segment, in a loop that stops syncing); one segment is "
                     "learned between two rests, and one that repeats ends resting. A program whose shapes "
                     "never repeat then pays almost nothing. 0: never rest."},
    [AG_OPT_PROBE] = {"AUTOGRAPH_PROBE", AG_OPT_ENUM, "on", "off|on",
                      "'on': now and then a graphed segment (the work between two syncs) runs on plain "
                      "launches instead, and its time from start to the end of its sync is compared with its "
                      "replays'. Probes that were all slower by a quarter (2 probes), an eighth (4), ... settle "
                      "it, and so does a single probe that took twice the replays' time where the fastest "
                      "sighting that ran plain before any replay did too (the first series only); otherwise a "
                      "series of 8 probes is compared by medians, and a segment whose replay came out more than "
                      "3% slower stays on plain launches for 64 sightings (twice as long "
                      "each time it loses again), then is judged again. Off while CUPTI watches everything ('guard', "
                      "'always'). 'off': every repeating segment is replayed."},
    [AG_OPT_STALL_MS] = {"AUTOGRAPH_STALL_MS", AG_OPT_INT, "100", "0..600000",
                         "Held work that no call of the program has followed for this many milliseconds is "
                         "issued by a thread of the shim's (as a fallback, 'stalled'): a program that waits "
                         "for a kernel's write to memory it reads directly, with no CUDA call, would otherwise "
                         "wait forever. 0: never (such a program hangs)."},
    [AG_OPT_ISSUER] = {"AUTOGRAPH_ISSUER", AG_OPT_ENUM, "thread", "inline|thread|launch",
                       "Who patches and launches a graph whose chunk was completed by a launch (not at a "
                       "sync), and builds it first at the chunk's second sighting: 'thread', a thread of "
                       "the shim's per context, while the program's thread goes on (anything that could "
                       "observe the work waits for it, or takes it back if the thread has not begun); "
                       "'inline', the program's thread itself, before its call returns; 'launch': the "
                       "thread patches and launches, but a graph not built yet is built by the program's "
                       "thread first (to measure, or rule out, the builds on the thread apart)."},
    [AG_OPT_ISSUER_SPIN_US] = {"AUTOGRAPH_ISSUER_SPIN_US", AG_OPT_INT, "20", "0..1000000",
                               "Microseconds the issuer thread keeps polling for the next chunk after one "
                               "before it sleeps. Woken from sleep it begins a chunk tens of microseconds "
                               "late (18-24 us on average on the H200 hosts measured, against 2 us "
                               "polling), and the program's thread then often issues the chunk itself; "
                               "polling keeps a CPU busy while the program replays, which paid on two hosts "
                               "and cost on three (PyTorch A/B). No polling where the process may run on 2 "
                               "CPUs or fewer. 0: it sleeps at once."},
    [AG_OPT_EVENT_DESTROY] = {"AUTOGRAPH_EVENT_DESTROY", AG_OPT_ENUM, "barrier", "barrier|defer",
                              "'barrier': the cuEventDestroy of an event that work since the last barrier "
                              "recorded or waited for ends the segment, the held work issued first; other "
                              "destroys pass. 'defer': no destroy ends the segment; where work held back may "
                              "name the event, the shim keeps it and destroys it right after that work is "
                              "issued (the call returns success at once, as CUDA's does). PyTorch's autograd "
                              "makes, waits for and destroys an event for each gradient it hands to another "
                              "stream: 'defer' replays those waits instead of making each a segment of its "
                              "own, but on the H200 the MLP whose forward and backward the program graphs "
                              "gained less with it (1.037x of the shim paused, in-process, against 1.062x)."},
};

static ag_opt_value_t values[AG_OPT_COUNT];

const ag_option_desc_t *ag_option_descs(size_t *count)
{
    if (count)
        *count = AG_OPT_COUNT;
    return descs;
}

/* Finds `value` among the '|'-separated words of `list`; returns its index or -1. */
static int enum_index(const char *list, const char *value)
{
    size_t vlen = strlen(value);
    int idx = 0;
    for (const char *p = list;; idx++) {
        const char *bar = strchr(p, '|');
        size_t wlen = bar ? (size_t)(bar - p) : strlen(p);
        if (wlen == vlen && strncmp(p, value, vlen) == 0)
            return idx;
        if (!bar)
            return -1;
        p = bar + 1;
    }
}

static int parse(const ag_option_desc_t *d, const char *value, ag_opt_value_t *v)
{
    switch (d->kind) {
    case AG_OPT_ENUM: {
        int i = enum_index(d->values, value);
        if (i < 0)
            return -EINVAL;
        v->num = i;
        v->text = value;
        return 0;
    }
    case AG_OPT_INT: {
        long lo = 0, hi = LONG_MAX;
        char *end;
        if (sscanf(d->values, "%ld..%ld", &lo, &hi) != 2)
            return -EINVAL;
        errno = 0;
        long n = strtol(value, &end, 10);
        if (errno || end == value || *end || n < lo || n > hi)
            return -EINVAL;
        v->num = n;
        v->text = value;
        return 0;
    }
    case AG_OPT_STRING:
        v->num = 0;
        v->text = value;
        return 0;
    }
    return -EINVAL;
}

int ag_option_check(const ag_option_desc_t *d, const char *value, char *out, size_t outlen)
{
    ag_opt_value_t v;
    int rc = parse(d, value, &v);
    if (rc == 0 && out && outlen)
        snprintf(out, outlen, "%s", v.text);
    return rc;
}

static const ag_option_desc_t *find(const char *name, size_t len)
{
    for (size_t i = 0; i < AG_OPT_COUNT; i++)
        if (strlen(descs[i].name) == len && strncmp(descs[i].name, name, len) == 0)
            return &descs[i];
    return NULL;
}

void ag_options_load(void (*warn)(const char *msg))
{
    char msg[512];
    for (size_t i = 0; i < AG_OPT_COUNT; i++) {
        const ag_option_desc_t *d = &descs[i];
        const char *env = getenv(d->name);
        if (parse(d, d->def, &values[i]) != 0) /* defaults are valid by construction */
            values[i] = (ag_opt_value_t){0, d->def};
        if (!env)
            continue;
        ag_opt_value_t v;
        if (parse(d, env, &v) == 0) {
            values[i] = v;
        } else if (warn) {
            snprintf(msg, sizeof msg, "%s='%s' is not valid (accepted: %s); using the default '%s'",
                     d->name, env, d->values, d->def);
            warn(msg);
        }
    }
    if (!warn || !environ)
        return;
    for (char **e = environ; *e; e++) {
        if (strncmp(*e, "AUTOGRAPH_", 10) != 0)
            continue;
        const char *eq = strchr(*e, '=');
        size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
        if (!find(*e, len)) {
            snprintf(msg, sizeof msg, "unknown variable %.*s is ignored (see env.example)", (int)len, *e);
            warn(msg);
        }
    }
}

const ag_opt_value_t *ag_opt(ag_opt_id_t id)
{
    return &values[id];
}

int ag_options_write_env_example(FILE *f)
{
    fprintf(f, "# Every AUTOGRAPH_* environment variable, with its default and meaning.\n"
               "# Generated from the options table (shim/options.c) by `autograph env`; a test fails\n"
               "# when this file and the table disagree. A malformed value gives one warning and the default.\n");
    for (size_t i = 0; i < AG_OPT_COUNT; i++) {
        const ag_option_desc_t *d = &descs[i];
        fprintf(f, "\n# %s\n# Accepted: %s\n%s=%s\n", d->doc, d->values, d->name, d->def);
    }
    return ferror(f) ? -EIO : 0;
}
