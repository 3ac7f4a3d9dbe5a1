/* bench.c: `autograph bench` and `autograph demo`: run the bundled samples eager, under the library
 * and (bench) in their own hand-written graph mode, interleaved rep by rep so that machine noise hits
 * every variant alike, and compare medians. Eager and library outputs must be identical: a wrong
 * result is the worst outcome, so a mismatch is loud and fails the command. Speed is only reported. */
#define _GNU_SOURCE
#include "cli.h"
#include "json.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char ag_help_bench[] =
    "usage: autograph bench [--reps N] [--samples a,b,c] [--iters N] [--json] [--bin DIR] [--lib PATH]\n"
    "                       [--timeout SECONDS] [--cupti-compare] [--ab B]\n"
    "\n"
    "Runs each sample three ways, interleaved rep by rep: eager (plain), shim (libautograph.so\n"
    "preloaded) and graph (the sample's own --graph mode, '-' where unsupported). Prints the median\n"
    "loop time of each (the sample's `loop_ms:` line), eager/shim and shim/graph, eager/graph (what the\n"
    "sample's own graph gains over eager: the most eager/shim can reach), whether eager and shim\n"
    "printed identical checksums, and from the library's statistics the host ns per matched launch and\n"
    "the share of launches replayed from graphs.\n"
    "\n"
    "  --reps N          interleaved repetitions (default 5)\n"
    "  --samples a,b,c   which samples (default: launch_bound, mlp_train, curand_host, nosync_loop,\n"
    "                    shape_change, two_streams, memops, driver_api, nvtx_ranges, jacobi, never_repeat)\n"
    "  --iters N         pass --iters N to every sample (default: the sample's own)\n"
    "  --json            print the results as JSON on stdout\n"
    "  --bin DIR         where the sample binaries are (default: the directory of autograph)\n"
    "  --lib PATH        the library (default: <dir of autograph>/../lib/libautograph.so)\n"
    "  --timeout S       kill a run after S seconds (default 600)\n"
    "  --cupti-compare   add a fourth run per rep: the shim with AUTOGRAPH_CUPTI=off (its output must\n"
    "                    match eager too), and the columns `cupti-off ms` and `learn/off` (shim ms over\n"
    "                    cupti-off ms: near 1.00x when the CUPTI observer used while learning, the\n"
    "                    default AUTOGRAPH_CUPTI=learn, leaves replay speed alone)\n"
    "  --ab B            add a run per rep: the shim with AG_AB=B, where the sample times the shim\n"
    "                    against itself paused (autograph_pause) in blocks of B iterations in turn, in\n"
    "                    one process (from its 20th iteration on); its output must match eager too.\n"
    "                    Column `in-process`: the paused blocks' median time per iteration over the\n"
    "                    shim's, each block ended by a device sync (above 1: the shim was faster),\n"
    "                    free of the spread between processes that the loop times carry (the paused\n"
    "                    side still passes the library's hooks)\n"
    "\n"
    "Exit code 0; 1 when outputs differ (MISMATCH) or a run fails; 77 without a GPU.\n";

const char ag_help_demo[] =
    "usage: autograph demo [--bin DIR] [--lib PATH]\n"
    "\n"
    "Runs the launch_bound sample plainly and under libautograph.so, 3 interleaved reps each, checks\n"
    "that the outputs are identical and prints the median times and the speedup. Exit code 0; 1 when\n"
    "outputs differ or a run fails; 77 without a GPU.\n";

static const char *const default_samples[] = { "launch_bound", "mlp_train",   "curand_host", "nosync_loop",
                                               "shape_change", "two_streams", "memops",      "driver_api",
                                               "nvtx_ranges",  "jacobi",      "never_repeat" };

#define MAX_REPS 100
#define MAX_SAMPLES 64

/* V_CUPTI_OFF (--cupti-compare) is the shim run again with AUTOGRAPH_CUPTI=off, V_AB (--ab) with AG_AB set.
 * They come last so that without the options every loop and every output is what it was before the
 * variants existed. */
enum { V_EAGER, V_SHIM, V_GRAPH, V_CUPTI_OFF, V_AB, V_COUNT };
static const char *const variant_names[V_COUNT] = { "eager", "shim", "graph", "cupti-off", "in-process" };

typedef struct {
    const char *name;
    char path[PATH_MAX];
    int missing;
    int graph_unsupported;
    double ms[V_COUNT][MAX_REPS];
    int n[V_COUNT];
    double steady[V_COUNT][MAX_REPS]; /* the second half of the loop (`steady_ms:`), when reported */
    int nsteady[V_COUNT];
    int failures[V_COUNT];
    int compared;      /* eager/shim (and eager/cupti-off) pairs compared */
    int mismatches;    /* ... that differed */
    int graph_differs; /* graph checksum differed from eager (reported, not fatal) */
    double host_ns[MAX_REPS];
    int n_host_ns;
    double replayed[MAX_REPS];
    int n_replayed;
    double ab[MAX_REPS]; /* --ab: paused over shim, each run's medians of iterations */
    int n_ab;
    double setup[MAX_REPS]; /* the graph mode's capture and instantiation before its loop (`setup_ms:`) */
    int n_setup;
} sample_t;

typedef struct {
    const char *cmd; /* "bench" or "demo", for messages */
    long reps;
    long iters; /* 0: the sample's default */
    int json;
    int with_graph;
    int cupti_compare;
    long ab; /* --ab B: iterations per block (0: no such run) */
    const char *bin;
    const char *lib;
    long timeout_s;
    sample_t *samples;
    size_t nsamples;
} bench_t;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(const double *v, int n)
{
    double tmp[MAX_REPS];
    if (n <= 0)
        return NAN;
    memcpy(tmp, v, (size_t)n * sizeof(double));
    qsort(tmp, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2.0;
}

/* The value of the last "key: <float>" line of text. */
static int find_float_line(const char *text, const char *key, double *out)
{
    size_t klen = strlen(key);
    int found = 0;
    for (const char *p = text; p && *p;) {
        const char *eol = strchr(p, '\n');
        if (strncmp(p, key, klen) == 0) {
            char *end;
            double v = strtod(p + klen, &end);
            if (end != p + klen && isfinite(v)) {
                *out = v;
                found = 1;
            }
        }
        p = eol ? eol + 1 : NULL;
    }
    return found ? 0 : -ENOENT;
}

/* The lines that carry a checksum, concatenated; the whole output when there are none, so that a
 * sample without checksum lines is still compared. */
static char *checksum_lines(const char *out)
{
    size_t len = strlen(out), o = 0;
    char *res = malloc(len + 1);
    if (!res)
        return NULL;
    for (const char *p = out; *p;) {
        const char *eol = strchr(p, '\n');
        size_t n = eol ? (size_t)(eol - p) + 1 : strlen(p);
        if (memmem(p, n, "checksum:", 9)) {
            memcpy(res + o, p, n);
            o += n;
        }
        p += n;
    }
    if (o == 0) {
        memcpy(res, out, len);
        o = len;
    }
    res[o] = '\0';
    return res;
}

static void first_line(const char *s, char *buf, size_t len)
{
    size_t n = strcspn(s, "\n");
    snprintf(buf, len, "%.*s", (int)n, s);
}

static void read_shim_stats(sample_t *s, const char *path)
{
    ag_json_t *root = NULL;
    ag_json_error_t err;
    double v, launches;

    if (ag_json_parse_file(path, &root, &err) != 0)
        return;
    if (ag_json_number_of(ag_json_path(root, "replay.host_ns_per_match"), &v) == 0 && s->n_host_ns < MAX_REPS)
        s->host_ns[s->n_host_ns++] = v;
    if (ag_json_number_of(ag_json_path(root, "replay.launches_replayed"), &v) == 0 &&
        ag_json_number_of(ag_json_get(root, "launches"), &launches) == 0 && launches > 0 && s->n_replayed < MAX_REPS)
        s->replayed[s->n_replayed++] = v / launches;
    ag_json_free(root);
}

/* The sample's "ab_iter_us: shim S paused P blocks N" line (kernels/common.h, AG_AB): P / S, where both
 * sides ran (a block each at least). */
static void read_ab(sample_t *s, const char *err)
{
    const char *p = NULL;
    for (const char *q = err; (q = strstr(q, "ab_iter_us: ")) != NULL; q++)
        if (q == err || q[-1] == '\n')
            p = q;
    double sh, pa;
    long blocks;
    if (p && sscanf(p, "ab_iter_us: shim %lf paused %lf blocks %ld", &sh, &pa, &blocks) == 3 && blocks >= 2 &&
        sh > 0 && pa > 0 && isfinite(sh) && isfinite(pa) && s->n_ab < MAX_REPS)
        s->ab[s->n_ab++] = pa / sh;
}

static void report_failure(const bench_t *b, const sample_t *s, int variant, long rep, const ag_child_t *c,
                           const char *why)
{
    char status[128];
    ag_child_status_text(c, status, sizeof(status));
    fprintf(stderr, "autograph %s: %s (%s, rep %ld) failed: %s%s%s; stderr ends with:\n", b->cmd, s->name,
            variant_names[variant], rep, why ? why : status, why ? ", " : "", why ? status : "");
    ag_print_tail(c->err, c->err_len, 8);
}

/* One run of one variant; fills *cks with its checksum lines when it succeeded. */
static int run_one(bench_t *b, sample_t *s, int variant, long rep, ag_env_t *env, const char *tmpdir, char **cks)
{
    char iters[32], stats[PATH_MAX] = "";
    char *argv[6];
    int argc = 0, rc;
    ag_child_t c;
    double ms = 0;

    *cks = NULL;
    argv[argc++] = s->path;
    if (b->iters) {
        snprintf(iters, sizeof(iters), "%ld", b->iters);
        argv[argc++] = "--iters";
        argv[argc++] = iters;
    }
    if (variant == V_GRAPH)
        argv[argc++] = "--graph";
    argv[argc] = NULL;
    /* The cupti-off and in-process runs write statistics too, so that their environment differs from the
     * shim run's in their own setting alone (and never into the user's own AUTOGRAPH_STATS file); they are
     * not read. */
    if (variant != V_EAGER && variant != V_GRAPH) {
        if ((size_t)snprintf(stats, sizeof(stats), "%s/stats-%s-%ld-%s.json", tmpdir, s->name, rep,
                             variant_names[variant]) >= sizeof(stats))
            return -ENAMETOOLONG;
        unlink(stats);
        rc = ag_env_set(env, "AUTOGRAPH_STATS", stats);
        if (rc)
            return rc;
    }
    rc = ag_child_run(s->path, argv, env->vars, (unsigned)b->timeout_s, tmpdir, &c);
    if (rc) {
        fprintf(stderr, "autograph %s: cannot run %s: %s\n", b->cmd, s->path, strerror(-rc));
        s->failures[variant]++;
        return 0;
    }
    if (variant == V_GRAPH && c.exited && c.code == 2 && strstr(c.err, "graph: unsupported")) {
        s->graph_unsupported = 1;
        goto out;
    }
    if (!c.exited || c.code != 0) {
        report_failure(b, s, variant, rep, &c, NULL);
        s->failures[variant]++;
        goto out;
    }
    if (find_float_line(c.err, "loop_ms:", &ms) != 0) {
        report_failure(b, s, variant, rep, &c, "no `loop_ms: <float>` line on stderr");
        s->failures[variant]++;
        goto out;
    }
    s->ms[variant][s->n[variant]++] = ms; /* V_AB's mixes both sides: never shown, only counted */
    double steady;
    if (find_float_line(c.err, "steady_ms:", &steady) == 0)
        s->steady[variant][s->nsteady[variant]++] = steady;
    double setup;
    if (variant == V_GRAPH && find_float_line(c.err, "setup_ms:", &setup) == 0)
        s->setup[s->n_setup++] = setup;
    *cks = checksum_lines(c.out);
    if (variant == V_SHIM)
        read_shim_stats(s, stats);
    if (variant == V_AB)
        read_ab(s, c.err);
out:
    if (variant != V_EAGER && variant != V_GRAPH)
        unlink(stats);
    ag_child_free(&c);
    return 0;
}

/* Eager's checksum lines against those of a run under the library (which: a name for the message, and the
 * settings it ran with after "under libautograph.so"). */
static void compare_one(const bench_t *b, sample_t *s, long rep, const char *eager, const char *other,
                        const char *which, const char *with)
{
    char le[160], lo[160];
    if (!eager || !other)
        return;
    s->compared++;
    if (strcmp(eager, other) == 0)
        return;
    s->mismatches++;
    first_line(eager, le, sizeof(le));
    first_line(other, lo, sizeof(lo));
    int w = (int)strlen(which) > 6 ? (int)strlen(which) : 6; /* the labels aligned, "eager:" the shortest */
    fprintf(stderr,
            "autograph %s: MISMATCH: %s rep %ld: the output under libautograph.so%s differs from eager!\n"
            "    %-*s %s\n    %-*s %s\n",
            b->cmd, s->name, rep, with, w, "eager:", le, w, which, lo);
}

static void compare_outputs(const bench_t *b, sample_t *s, long rep, char *const cks[V_COUNT])
{
    char with[64];
    compare_one(b, s, rep, cks[V_EAGER], cks[V_SHIM], "shim:", "");
    compare_one(b, s, rep, cks[V_EAGER], cks[V_CUPTI_OFF], "cupti-off:", " with AUTOGRAPH_CUPTI=off");
    snprintf(with, sizeof(with), " with AG_AB=%ld (paused in turn)", b->ab);
    compare_one(b, s, rep, cks[V_EAGER], cks[V_AB], "in-process:", with);
    if (cks[V_EAGER] && cks[V_GRAPH] && strcmp(cks[V_EAGER], cks[V_GRAPH]) != 0 && !s->graph_differs) {
        s->graph_differs = 1;
        fprintf(stderr, "autograph %s: note: %s: the sample's own --graph mode prints a different checksum\n",
                b->cmd, s->name);
    }
}

static int run_all(bench_t *b, ag_env_t *const env[V_COUNT], const char *tmpdir)
{
    for (size_t i = 0; i < b->nsamples; i++) {
        sample_t *s = &b->samples[i];
        if (s->missing)
            continue;
        if (!b->json)
            fprintf(stderr, "autograph %s: %s: %ld rep%s ...\n", b->cmd, s->name, b->reps, b->reps == 1 ? "" : "s");
        for (long rep = 1; rep <= b->reps; rep++) {
            char *cks[V_COUNT] = { NULL };
            int rc = 0;
            for (int v = 0; v < V_COUNT && rc == 0; v++) {
                if (v == V_GRAPH && (!b->with_graph || s->graph_unsupported))
                    continue;
                if ((v == V_CUPTI_OFF && !b->cupti_compare) || (v == V_AB && !b->ab))
                    continue;
                rc = run_one(b, s, v, rep, env[v], tmpdir, &cks[v]);
            }
            if (rc == 0)
                compare_outputs(b, s, rep, cks);
            for (int v = 0; v < V_COUNT; v++)
                free(cks[v]);
            if (rc)
                return rc;
        }
    }
    return 0;
}

static void fmt_ms(char *buf, size_t len, const sample_t *s, int v)
{
    if (v == V_GRAPH && s->graph_unsupported && s->n[v] == 0)
        snprintf(buf, len, "-");
    else if (s->n[v] == 0)
        snprintf(buf, len, s->failures[v] ? "FAILED" : "-");
    else
        snprintf(buf, len, "%.3f", median(s->ms[v], s->n[v]));
}

/* The graph mode's loop and the capture and instantiation before it (medians of each; NAN where the sample
 * reports no setup). */
static double graph_with_setup(const sample_t *s)
{
    if (!s->n_setup || !s->n[V_GRAPH])
        return NAN;
    return median(s->ms[V_GRAPH], s->n[V_GRAPH]) + median(s->setup, s->n_setup);
}

static void fmt_ratio(char *buf, size_t len, double num, double den)
{
    if (isnan(num) || isnan(den) || den <= 0)
        snprintf(buf, len, "-");
    else
        snprintf(buf, len, "%.2fx", num / den);
}

static const char *identical_text(const sample_t *s)
{
    if (s->compared == 0)
        return "-";
    return s->mismatches ? "NO" : "yes";
}

static void print_bench_table(const bench_t *b)
{
    printf("%-14s %10s %10s", "sample", "eager ms", "shim ms");
    if (b->cupti_compare)
        printf(" %12s %10s %10s", "cupti-off ms", "learn/off", "steady l/o");
    printf(" %10s %10s %10s %12s %11s %9s %13s %9s%s\n", "graph ms", "eager/shim", "shim/graph", "shim/g+setup",
           "eager/graph", "identical", "host ns/match", "replayed", b->ab ? " in-process" : "");
    for (size_t i = 0; i < b->nsamples; i++) {
        const sample_t *s = &b->samples[i];
        char e[32], sh[32], g[32], r1[32], r2[32], r2s[32], r3[32], ns[32], rp[32], off[32], roff[32], rst[32];
        if (s->missing) {
            printf("%-14s %10s\n", s->name, "(missing)");
            continue;
        }
        fmt_ms(e, sizeof(e), s, V_EAGER);
        fmt_ms(sh, sizeof(sh), s, V_SHIM);
        fmt_ms(g, sizeof(g), s, V_GRAPH);
        double me = median(s->ms[V_EAGER], s->n[V_EAGER]), msh = median(s->ms[V_SHIM], s->n[V_SHIM]);
        printf("%-14s %10s %10s", s->name, e, sh);
        if (b->cupti_compare) {
            fmt_ms(off, sizeof(off), s, V_CUPTI_OFF);
            fmt_ratio(roff, sizeof(roff), msh, median(s->ms[V_CUPTI_OFF], s->n[V_CUPTI_OFF]));
            fmt_ratio(rst, sizeof(rst), median(s->steady[V_SHIM], s->nsteady[V_SHIM]),
                      median(s->steady[V_CUPTI_OFF], s->nsteady[V_CUPTI_OFF]));
            printf(" %12s %10s %10s", off, roff, rst);
        }
        fmt_ratio(r1, sizeof(r1), me, msh);
        fmt_ratio(r2, sizeof(r2), msh, median(s->ms[V_GRAPH], s->n[V_GRAPH]));
        fmt_ratio(r2s, sizeof(r2s), msh, graph_with_setup(s));
        fmt_ratio(r3, sizeof(r3), me, median(s->ms[V_GRAPH], s->n[V_GRAPH]));
        if (s->n_host_ns)
            snprintf(ns, sizeof(ns), "%.1f", median(s->host_ns, s->n_host_ns));
        else
            snprintf(ns, sizeof(ns), "-");
        if (s->n_replayed)
            snprintf(rp, sizeof(rp), "%.1f%%", 100.0 * median(s->replayed, s->n_replayed));
        else
            snprintf(rp, sizeof(rp), "-");
        printf(" %10s %10s %10s %12s %11s %9s %13s %9s", g, r1, r2, r2s, r3, identical_text(s), ns, rp);
        if (b->ab) {
            char ab[32];
            fmt_ratio(ab, sizeof(ab), median(s->ab, s->n_ab), 1.0);
            printf(" %10s", ab);
        }
        putchar('\n');
    }
    printf("(medians of %ld interleaved rep%s; eager/shim above 1 means the library was faster; eager/graph is\n"
           " the sample's own graph over eager, the most eager/shim could be; shim/g+setup: over the graph's loop\n"
           " and its capture and instantiation before it (`setup_ms:`), which the loop leaves out while the\n"
           " library's learning is inside its loop)\n",
           b->reps, b->reps == 1 ? "" : "s");
    if (b->cupti_compare)
        printf("(learn/off: shim ms with the default AUTOGRAPH_CUPTI=learn over shim ms with AUTOGRAPH_CUPTI=off;\n"
               " steady l/o: the same over the second half of the loop (`steady_ms:`), once learning and CUPTI's\n"
               " one-time set-up are over: near 1.00x means the observer used while learning does not slow replay)\n");
    if (b->ab)
        printf("(in-process: one more run per rep with AG_AB=%ld, the sample timing the shim against itself paused in\n"
               " blocks of %ld iterations in turn, each ended by a device sync; the paused blocks' median time per\n"
               " iteration over the shim's, above 1 when the shim was faster: free of the spread between processes,\n"
               " the paused side still passing the hooks)\n",
               b->ab, b->ab);
}

static void json_num(double v)
{
    if (isnan(v))
        fputs("null", stdout);
    else
        printf("%.6g", v);
}

static void print_bench_json(const bench_t *b, int failed)
{
    printf("{\"reps\": %ld, \"iters\": ", b->reps);
    if (b->iters)
        printf("%ld", b->iters);
    else
        fputs("null", stdout);
    printf(", \"ok\": %s, \"samples\": [", failed ? "false" : "true");
    for (size_t i = 0; i < b->nsamples; i++) {
        const sample_t *s = &b->samples[i];
        double m[V_COUNT];
        for (int v = 0; v < V_COUNT; v++)
            m[v] = median(s->ms[v], s->n[v]);
        printf("%s\n  {\"name\": ", i ? "," : "");
        ag_json_write_string(stdout, s->name, strlen(s->name));
        printf(", \"missing\": %s", s->missing ? "true" : "false");
        for (int v = V_EAGER; v <= V_GRAPH; v++) {
            printf(", \"%s_ms\": ", variant_names[v]);
            json_num(m[v]);
        }
        if (b->cupti_compare) {
            fputs(", \"cupti_off_ms\": ", stdout);
            json_num(m[V_CUPTI_OFF]);
        }
        fputs(", \"eager_over_shim\": ", stdout);
        json_num(m[V_SHIM] > 0 ? m[V_EAGER] / m[V_SHIM] : NAN);
        fputs(", \"shim_over_graph\": ", stdout);
        json_num(m[V_GRAPH] > 0 ? m[V_SHIM] / m[V_GRAPH] : NAN);
        fputs(", \"graph_setup_ms\": ", stdout);
        json_num(s->n_setup ? median(s->setup, s->n_setup) : NAN);
        fputs(", \"shim_over_graph_with_setup\": ", stdout);
        double gs = graph_with_setup(s);
        json_num(gs > 0 ? m[V_SHIM] / gs : NAN);
        fputs(", \"eager_over_graph\": ", stdout);
        json_num(m[V_GRAPH] > 0 ? m[V_EAGER] / m[V_GRAPH] : NAN);
        if (b->cupti_compare) {
            fputs(", \"shim_over_cupti_off\": ", stdout);
            json_num(m[V_CUPTI_OFF] > 0 ? m[V_SHIM] / m[V_CUPTI_OFF] : NAN);
            double so = median(s->steady[V_CUPTI_OFF], s->nsteady[V_CUPTI_OFF]);
            fputs(", \"shim_over_cupti_off_steady\": ", stdout);
            json_num(so > 0 ? median(s->steady[V_SHIM], s->nsteady[V_SHIM]) / so : NAN);
        }
        printf(", \"graph_supported\": %s", s->graph_unsupported ? "false" : "true");
        printf(", \"outputs_identical\": %s", s->compared == 0 ? "null" : s->mismatches ? "false" : "true");
        printf(", \"graph_output_differs\": %s", s->graph_differs ? "true" : "false");
        fputs(", \"host_ns_per_match\": ", stdout);
        json_num(median(s->host_ns, s->n_host_ns));
        fputs(", \"replayed_fraction\": ", stdout);
        json_num(median(s->replayed, s->n_replayed));
        if (b->ab) {
            fputs(", \"in_process_paused_over_shim\": ", stdout);
            json_num(median(s->ab, s->n_ab));
        }
        printf(", \"runs\": {\"eager\": %d, \"shim\": %d, \"graph\": %d", s->n[V_EAGER], s->n[V_SHIM], s->n[V_GRAPH]);
        if (b->cupti_compare)
            printf(", \"cupti_off\": %d", s->n[V_CUPTI_OFF]);
        if (b->ab)
            printf(", \"in_process\": %d", s->n[V_AB]);
        printf("}, \"failures\": {\"eager\": %d, \"shim\": %d, \"graph\": %d", s->failures[V_EAGER],
               s->failures[V_SHIM], s->failures[V_GRAPH]);
        if (b->cupti_compare)
            printf(", \"cupti_off\": %d", s->failures[V_CUPTI_OFF]);
        if (b->ab)
            printf(", \"in_process\": %d", s->failures[V_AB]);
        fputs("}}", stdout);
    }
    puts("\n]}");
}

static void print_demo_table(const bench_t *b)
{
    const sample_t *s = &b->samples[0];
    char e[32], sh[32], r[32];
    fmt_ms(e, sizeof(e), s, V_EAGER);
    fmt_ms(sh, sizeof(sh), s, V_SHIM);
    fmt_ratio(r, sizeof(r), median(s->ms[V_EAGER], s->n[V_EAGER]), median(s->ms[V_SHIM], s->n[V_SHIM]));
    printf("%-14s %10s %13s %9s %18s\n", "sample", "eager ms", "autograph ms", "speedup", "outputs identical");
    printf("%-14s %10s %13s %9s %18s\n", s->name, e, sh, r, identical_text(s));
    printf("(medians of %ld interleaved reps; loop time as the sample reports it)\n", b->reps);
}

/* Shared by bench and demo. Returns the exit code. */
static int bench_main(bench_t *b)
{
    ag_gpu_info_t gpu;
    ag_env_t plain = { 0 }, shim = { 0 }, cupti_off = { 0 }, ab = { 0 };
    char bindir[PATH_MAX], lib[PATH_MAX], tmpdir[PATH_MAX];
    int ret = 1, rc, have_tmp = 0;
    size_t present = 0;

    rc = ag_gpu_probe(&gpu);
    if (rc) {
        fprintf(stderr, "autograph %s: cannot probe the driver: %s\n", b->cmd, strerror(-rc));
        return 1;
    }
    if (!ag_gpu_usable(&gpu)) {
        ag_gpu_print_missing(b->cmd, &gpu);
        return AG_EXIT_NO_GPU;
    }
    if (b->bin)
        snprintf(bindir, sizeof(bindir), "%s", b->bin);
    else if ((rc = ag_self_dir(bindir, sizeof(bindir))) != 0) {
        fprintf(stderr, "autograph %s: cannot find my own directory: %s\n", b->cmd, strerror(-rc));
        return 1;
    }
    if (ag_find_library(b->lib, lib, sizeof(lib)) != 0) {
        fprintf(stderr, "autograph %s: library not found: %s%s\n", b->cmd, lib,
                b->lib ? "" : " (build it with `cmake --build build`, or name it with --lib PATH)");
        return 1;
    }
    for (size_t i = 0; i < b->nsamples; i++) {
        sample_t *s = &b->samples[i];
        int n = snprintf(s->path, sizeof(s->path), "%s/%s", bindir, s->name);
        if (n < 0 || (size_t)n >= sizeof(s->path) || access(s->path, X_OK) != 0) {
            s->missing = 1;
            fprintf(stderr, "autograph %s: sample %s is missing (%s); skipped. The samples are built when nvcc "
                            "is found (AUTOGRAPH_SAMPLES=ON).\n",
                    b->cmd, s->name, s->path);
        } else {
            present++;
        }
    }
    if (present == 0) {
        fprintf(stderr, "autograph %s: no sample binaries found in %s\n", b->cmd, bindir);
        return 1;
    }

    const char *tmp = getenv("TMPDIR");
    snprintf(tmpdir, sizeof(tmpdir), "%s/autograph-%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", b->cmd);
    if (!mkdtemp(tmpdir)) {
        fprintf(stderr, "autograph %s: cannot create a temporary directory: %s\n", b->cmd, strerror(errno));
        return 1;
    }
    have_tmp = 1;
    /* Eager and graph runs must not go through the library even when the user's LD_PRELOAD has it. */
    char *stripped = ag_preload_strip(getenv("LD_PRELOAD"));
    char *preload = ag_preload_prepend(lib, stripped ? stripped : "");
    rc = (!preload) ? -ENOMEM : ag_env_init(&plain);
    if (!rc)
        rc = ag_env_set(&plain, "LD_PRELOAD", stripped);
    if (!rc) /* the sample's in-process comparison only where --ab asks for it */
        rc = ag_env_set(&plain, "AG_AB", NULL);
    if (!rc)
        rc = ag_env_init(&shim);
    if (!rc)
        rc = ag_env_set(&shim, "LD_PRELOAD", preload);
    if (!rc)
        rc = ag_env_set(&shim, "AG_AB", NULL);
    if (!rc && b->cupti_compare)
        rc = ag_env_init(&cupti_off);
    if (!rc && b->cupti_compare)
        rc = ag_env_set(&cupti_off, "LD_PRELOAD", preload);
    if (!rc && b->cupti_compare)
        rc = ag_env_set(&cupti_off, "AUTOGRAPH_CUPTI", "off");
    if (!rc && b->cupti_compare)
        rc = ag_env_set(&cupti_off, "AG_AB", NULL);
    char blk[32];
    snprintf(blk, sizeof(blk), "%ld", b->ab);
    if (!rc && b->ab)
        rc = ag_env_init(&ab);
    if (!rc && b->ab)
        rc = ag_env_set(&ab, "LD_PRELOAD", preload);
    if (!rc && b->ab)
        rc = ag_env_set(&ab, "AG_AB", blk);
    free(stripped);
    free(preload);
    if (rc) {
        fprintf(stderr, "autograph %s: cannot prepare the environment: %s\n", b->cmd, strerror(-rc));
        goto out;
    }

    ag_env_t *const env[V_COUNT] = { [V_EAGER] = &plain, [V_SHIM] = &shim, [V_GRAPH] = &plain,
                                     [V_CUPTI_OFF] = &cupti_off, [V_AB] = &ab };
    rc = run_all(b, env, tmpdir);
    if (rc) {
        fprintf(stderr, "autograph %s: %s\n", b->cmd, strerror(-rc));
        goto out;
    }
    int mismatch = 0, failed = 0;
    for (size_t i = 0; i < b->nsamples; i++) {
        mismatch |= b->samples[i].mismatches != 0;
        for (int v = 0; v < V_COUNT; v++)
            failed |= b->samples[i].failures[v] != 0;
    }
    if (b->json)
        print_bench_json(b, mismatch || failed);
    else if (b->with_graph)
        print_bench_table(b);
    else
        print_demo_table(b);
    fflush(stdout);
    if (mismatch)
        fprintf(stderr, "autograph %s: MISMATCH: outputs under libautograph.so differ from eager (see above)\n",
                b->cmd);
    if (failed)
        fprintf(stderr, "autograph %s: some runs failed (see above)\n", b->cmd);
    ret = mismatch || failed ? 1 : 0;
out:
    ag_env_free(&plain);
    ag_env_free(&shim);
    ag_env_free(&cupti_off);
    ag_env_free(&ab);
    if (have_tmp)
        rmdir(tmpdir);
    fflush(stdout);
    return ret;
}

static int parse_samples(bench_t *b, char *list)
{
    size_t n = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        if (!*tok)
            continue;
        if (n == MAX_SAMPLES)
            return -E2BIG;
        if (strchr(tok, '/') || strcmp(tok, ".") == 0 || strcmp(tok, "..") == 0)
            return -EINVAL;
        b->samples[n++].name = tok;
    }
    if (n == 0)
        return -EINVAL;
    b->nsamples = n;
    return 0;
}

int ag_cmd_bench(int argc, char **argv)
{
    bench_t b = { .cmd = "bench", .reps = 5, .with_graph = 1, .timeout_s = 600 };
    char *list = NULL;
    int ret;

    b.samples = calloc(MAX_SAMPLES, sizeof(sample_t));
    if (!b.samples) {
        fprintf(stderr, "autograph bench: out of memory\n");
        return 1;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(ag_help_bench, stdout);
            ret = 0;
            goto out;
        }
        if (strcmp(a, "--json") == 0) {
            b.json = 1;
            continue;
        }
        if (strcmp(a, "--cupti-compare") == 0) {
            b.cupti_compare = 1;
            continue;
        }
        if (strcmp(a, "--reps") && strcmp(a, "--iters") && strcmp(a, "--samples") && strcmp(a, "--bin") &&
            strcmp(a, "--lib") && strcmp(a, "--timeout") && strcmp(a, "--ab")) {
            ret = ag_usage_error("bench", "unknown option '%s'", a);
            goto out;
        }
        if (!v) {
            ret = ag_usage_error("bench", "option '%s' needs a value", a);
            goto out;
        }
        i++;
        if ((strcmp(a, "--reps") == 0 && ag_parse_count(v, MAX_REPS, &b.reps)) ||
            (strcmp(a, "--iters") == 0 && ag_parse_count(v, 1000000000L, &b.iters)) ||
            (strcmp(a, "--timeout") == 0 && ag_parse_count(v, 86400, &b.timeout_s)) ||
            (strcmp(a, "--ab") == 0 && ag_parse_count(v, 1000, &b.ab))) {
            ret = ag_usage_error("bench", "'%s' is not a valid value for %s (a number from 1%s)", v, a,
                                 strcmp(a, "--reps") == 0 ? " to 100" : strcmp(a, "--ab") == 0 ? " to 1000" : "");
            goto out;
        }
        if (strcmp(a, "--samples") == 0) {
            free(list);
            list = strdup(v);
            if (!list || parse_samples(&b, list)) {
                ret = ag_usage_error("bench", "--samples wants a comma-separated list of sample names, got '%s'", v);
                goto out;
            }
        }
        if (strcmp(a, "--bin") == 0)
            b.bin = v;
        if (strcmp(a, "--lib") == 0)
            b.lib = v;
    }
    if (b.nsamples == 0) {
        for (size_t i = 0; i < sizeof(default_samples) / sizeof(default_samples[0]); i++)
            b.samples[i].name = default_samples[i];
        b.nsamples = sizeof(default_samples) / sizeof(default_samples[0]);
    }
    ret = bench_main(&b);
out:
    free(list);
    free(b.samples);
    return ret;
}

int ag_cmd_demo(int argc, char **argv)
{
    bench_t b = { .cmd = "demo", .reps = 3, .with_graph = 0, .timeout_s = 600 };
    sample_t *s = calloc(1, sizeof(*s));
    int ret;

    if (!s) {
        fprintf(stderr, "autograph demo: out of memory\n");
        return 1;
    }
    s->name = "launch_bound";
    b.samples = s;
    b.nsamples = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(ag_help_demo, stdout);
            ret = 0;
            goto out;
        }
        if (strcmp(argv[i], "--bin") == 0 || strcmp(argv[i], "--lib") == 0) {
            if (i + 1 >= argc) {
                ret = ag_usage_error("demo", "option '%s' needs a value", argv[i]);
                goto out;
            }
            *(argv[i][2] == 'b' ? &b.bin : &b.lib) = argv[i + 1];
            i++;
            continue;
        }
        ret = ag_usage_error("demo", "unknown option '%s'", argv[i]);
        goto out;
    }
    ret = bench_main(&b);
out:
    free(s);
    return ret;
}
