/* report.c: `autograph report`: a short human-readable (or JSON) summary of the statistics file that
 * libautograph.so writes at exit. Fields this file does not know are printed generically, so that new
 * sections of the library's output (replay, fallbacks, ...) show up without changes here. */
#define _GNU_SOURCE
#include "cli.h"
#include "json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char ag_help_report[] =
    "usage: autograph report FILE.json [--json] [--top N]\n"
    "\n"
    "Summarizes the statistics file that libautograph.so writes at exit when AUTOGRAPH_STATS=FILE\n"
    "(or `autograph run --stats FILE`): kernel launches, driver calls by entry point (the most\n"
    "frequent first) and every other section present in the file.\n"
    "\n"
    "  --json    print the summary as JSON instead\n"
    "  --top N   show the N most frequent entry points (default 15)\n"
    "\n"
    "Exit code 1 when the file cannot be read or is not valid JSON (the error names the offset).\n";

/* Top-level fields that the summary prints itself; all others are printed generically. */
static const char *const known_fields[] = { "autograph", "pid", "scope", "launches", "calls_total", "calls" };

typedef struct {
    const char *name;
    double count;
    const char *text;
} call_t;

static int cmp_calls(const void *a, const void *b)
{
    const call_t *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->name, y->name);
}

static int is_known(const char *key)
{
    for (size_t i = 0; i < sizeof(known_fields) / sizeof(known_fields[0]); i++)
        if (strcmp(key, known_fields[i]) == 0)
            return 1;
    return 0;
}

static void print_scalar(const ag_json_t *v)
{
    switch (v->type) {
    case AG_JSON_NULL: fputs("null", stdout); break;
    case AG_JSON_BOOL: fputs(v->boolean ? "true" : "false", stdout); break;
    case AG_JSON_NUMBER: fputs(v->text, stdout); break;
    case AG_JSON_STRING: fwrite(v->text, 1, v->len, stdout); break;
    default: break;
    }
}

static int is_scalar(const ag_json_t *v)
{
    return v->type != AG_JSON_ARRAY && v->type != AG_JSON_OBJECT;
}

static void print_generic(const char *key, const ag_json_t *v, int level, int width)
{
    printf("%*s%s:", level * 2, "", key);
    if (is_scalar(v)) {
        printf("%*s ", (int)(width - strlen(key)), "");
        print_scalar(v);
        putchar('\n');
        return;
    }
    if (v->type == AG_JSON_ARRAY) {
        int all_scalar = 1;
        for (size_t i = 0; i < v->count; i++)
            all_scalar &= is_scalar(&v->items[i]);
        if (all_scalar) {
            printf("%*s [", (int)(width - strlen(key)), "");
            for (size_t i = 0; i < v->count; i++) {
                if (i)
                    fputs(", ", stdout);
                print_scalar(&v->items[i]);
            }
            puts("]");
            return;
        }
        printf(" %zu entries\n", v->count);
        for (size_t i = 0; i < v->count; i++) {
            char idx[32];
            snprintf(idx, sizeof(idx), "[%zu]", i);
            print_generic(idx, &v->items[i], level + 1, (int)strlen(idx));
        }
        return;
    }
    putchar('\n');
    if (v->count == 0) {
        printf("%*s(empty)\n", (level + 1) * 2, "");
        return;
    }
    int w = 0;
    for (size_t i = 0; i < v->count; i++)
        if ((int)strlen(v->keys[i]) > w)
            w = (int)strlen(v->keys[i]);
    for (size_t i = 0; i < v->count; i++)
        print_generic(v->keys[i], &v->items[i], level + 1, w);
}

/* Share of launches replayed from graphs, when the file has the numbers for it. */
static int replayed_fraction(const ag_json_t *root, double *out)
{
    double replayed, launches;
    if (ag_json_number_of(ag_json_path(root, "replay.launches_replayed"), &replayed) ||
        ag_json_number_of(ag_json_get(root, "launches"), &launches) || launches <= 0)
        return -ENOENT;
    *out = replayed / launches;
    return 0;
}

/* Where the shim's own host time went and what replay saved (ms), where the file has the numbers: graph
 * builds, patches, graph launches and eager re-issues (on the program's threads or the issuer's: the
 * issuer's share next), CUPTI's learning windows, and the replay's estimated saving. */
static void print_costs(const ag_json_t *root)
{
    static const char *const parts[][2] = {{"graph_build", "graph builds"}, {"patch", "patches"},
                                           {"graph_launch", "graph launches"}, {"eager_reissue", "eager re-issues"}};
    const ag_json_t *h = ag_json_path(root, "replay.host_ms");
    double v;
    if (!h || h->type != AG_JSON_OBJECT)
        return;
    fputs("shim host time, ms:", stdout);
    const char *sep = " ";
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (ag_json_number_of(ag_json_get(h, parts[i][0]), &v) == 0) {
            printf("%s%s %.1f", sep, parts[i][1], v);
            sep = ", ";
        }
    if (ag_json_number_of(ag_json_path(root, "replay.issuer.issuer_ms"), &v) == 0)
        printf(" (issuer threads %.1f of it)", v);
    if (ag_json_number_of(ag_json_path(root, "cupti.setup_ms"), &v) == 0) {
        printf("; CUPTI learning windows %.1f", v);
        double open, traced;
        if (ag_json_number_of(ag_json_path(root, "cupti.attached_ms"), &open) == 0 &&
            ag_json_number_of(ag_json_path(root, "cupti.launches"), &traced) == 0 && open > 0)
            printf(" (open %.1f, the program's calls traced meanwhile: %.0f launches)", open, traced);
    }
    if (ag_json_number_of(ag_json_path(root, "replay.host_ms_saved_estimate"), &v) == 0)
        printf("; saved by replay (estimate, net of matching) %.1f", v);
    putchar('\n');
}

/* The engine's own time on the launches it did not hold back (sampled): typical, and how much of it a few
 * long ones took (a launch that set off held work's issue, a graph's build, a CUPTI window). */
static void print_eager_own(const ag_json_t *root)
{
    const ag_json_t *l = ag_json_path(root, "replay.eager_launches_engine_long");
    double med, mean, n, k1, ms1, k2, ms2, max;
    if (!l || ag_json_number_of(ag_json_path(root, "replay.host_ns_engine_per_eager_launch_median"), &med) ||
        ag_json_number_of(ag_json_path(root, "replay.host_ns_engine_per_eager_launch"), &mean) ||
        ag_json_number_of(ag_json_get(l, "sampled"), &n) || ag_json_number_of(ag_json_get(l, "10us_1ms"), &k1) ||
        ag_json_number_of(ag_json_get(l, "10us_1ms_ms"), &ms1) || ag_json_number_of(ag_json_get(l, "over_1ms"), &k2) ||
        ag_json_number_of(ag_json_get(l, "over_1ms_ms"), &ms2) || ag_json_number_of(ag_json_get(l, "max_us"), &max) ||
        n <= 0)
        return;
    printf("engine on launches not held back: median %.0f ns, mean %.0f ns over %.0f sampled; %.0f of them "
           "10 us-1 ms (%.2f ms), %.0f over 1 ms (%.2f ms), longest %.0f us\n",
           med, mean, n, k1, ms1, k2, ms2, max);
}

/* The barrier hooks' host time by class: the engine's part, and the driver's (a sync's wait for the GPU). */
static void print_barriers(const ag_json_t *root)
{
    static const char *const classes[] = {"syncs", "queries", "graphs", "other"};
    const ag_json_t *b = ag_json_get(root, "barrier_host_ms");
    if (!b || b->type != AG_JSON_OBJECT)
        return;
    fputs("barriers, ms:", stdout);
    const char *sep = " ";
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++) {
        const ag_json_t *c = ag_json_get(b, classes[i]);
        double n, e, d;
        if (!c || ag_json_number_of(ag_json_get(c, "calls"), &n) || ag_json_number_of(ag_json_get(c, "engine"), &e) ||
            ag_json_number_of(ag_json_get(c, "driver"), &d) || n <= 0)
            continue;
        printf("%s%s %.0f calls, engine %.2f, driver %.2f", sep, classes[i], n, e, d);
        sep = "; ";
    }
    puts(*sep == ' ' ? " none" : "");
}

static void print_text(const char *path, const ag_json_t *root, const call_t *calls, size_t ncalls, long top)
{
    const ag_json_t *v;
    double total = 0, frac;
    size_t shown = ncalls < (size_t)top ? ncalls : (size_t)top;

    printf("autograph statistics: %s\n", path);
    printf("  format %s", (v = ag_json_get(root, "autograph")) && v->type == AG_JSON_NUMBER ? v->text : "?");
    if ((v = ag_json_get(root, "pid")) && v->type == AG_JSON_NUMBER)
        printf(", pid %s", v->text);
    if ((v = ag_json_get(root, "scope")) && v->type == AG_JSON_STRING)
        printf(", scope %s", v->text);
    putchar('\n');
    v = ag_json_get(root, "launches");
    printf("kernel launches: %s\n", v && v->type == AG_JSON_NUMBER ? v->text : "(not recorded)");
    if (replayed_fraction(root, &frac) == 0)
        printf("launches replayed from graphs: %.1f%%\n", frac * 100.0);
    print_costs(root);
    print_eager_own(root);
    print_barriers(root);

    for (size_t i = 0; i < ncalls; i++)
        total += calls[i].count;
    v = ag_json_get(root, "calls_total");
    if (v && v->type == AG_JSON_NUMBER)
        printf("driver calls: %s in total", v->text);
    else
        printf("driver calls: %.0f in total", total);
    printf(", %zu entry point%s\n", ncalls, ncalls == 1 ? "" : "s");
    int w = 0;
    for (size_t i = 0; i < shown; i++)
        if ((int)strlen(calls[i].name) > w)
            w = (int)strlen(calls[i].name);
    for (size_t i = 0; i < shown; i++)
        printf("  %-*s %12s  %5.1f%%\n", w, calls[i].name, calls[i].text,
               total > 0 ? calls[i].count * 100.0 / total : 0.0);
    if (shown < ncalls) {
        double rest = 0;
        for (size_t i = shown; i < ncalls; i++)
            rest += calls[i].count;
        printf("  (%zu more entry points: %.0f calls)\n", ncalls - shown, rest);
    }

    w = 0;
    for (size_t i = 0; i < root->count; i++)
        if (!is_known(root->keys[i]) && (int)strlen(root->keys[i]) > w)
            w = (int)strlen(root->keys[i]);
    for (size_t i = 0; i < root->count; i++)
        if (!is_known(root->keys[i]))
            print_generic(root->keys[i], &root->items[i], 0, w);
}

static void print_json(const char *path, const ag_json_t *root, const call_t *calls, size_t ncalls, long top)
{
    const ag_json_t *v;
    double frac;
    size_t shown = ncalls < (size_t)top ? ncalls : (size_t)top;

    fputs("{\"file\": ", stdout);
    ag_json_write_string(stdout, path, strlen(path));
    const char *scalars[] = { "autograph", "pid", "scope", "launches", "calls_total" };
    for (size_t i = 0; i < sizeof(scalars) / sizeof(scalars[0]); i++) {
        printf(",\n \"%s\": ", scalars[i]);
        v = ag_json_get(root, scalars[i]);
        if (v)
            ag_json_write(stdout, v, 0);
        else
            fputs("null", stdout);
    }
    fputs(",\n \"replayed_fraction\": ", stdout);
    if (replayed_fraction(root, &frac) == 0)
        printf("%.6g", frac);
    else
        fputs("null", stdout);
    fputs(",\n \"calls_top\": [", stdout);
    for (size_t i = 0; i < shown; i++) {
        fputs(i ? ", {\"name\": " : "{\"name\": ", stdout);
        ag_json_write_string(stdout, calls[i].name, strlen(calls[i].name));
        printf(", \"count\": %s}", calls[i].text);
    }
    printf("],\n \"calls_entry_points\": %zu,\n \"other\": {", ncalls);
    int first = 1;
    for (size_t i = 0; i < root->count; i++) {
        if (is_known(root->keys[i]))
            continue;
        fputs(first ? "" : ", ", stdout);
        first = 0;
        ag_json_write_string(stdout, root->keys[i], strlen(root->keys[i]));
        fputs(": ", stdout);
        ag_json_write(stdout, &root->items[i], 0);
    }
    fputs("}}\n", stdout);
}

int ag_cmd_report(int argc, char **argv)
{
    const char *path = NULL;
    int as_json = 0, ret = 1;
    long top = 15;
    ag_json_t *root = NULL;
    ag_json_error_t err;
    call_t *calls = NULL;
    size_t ncalls = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(ag_help_report, stdout);
            return 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = 1;
        } else if (strcmp(argv[i], "--top") == 0) {
            if (i + 1 >= argc || ag_parse_count(argv[i + 1], 1000000, &top))
                return ag_usage_error("report", "--top needs a positive number");
            i++;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return ag_usage_error("report", "unknown option '%s'", argv[i]);
        } else if (path) {
            return ag_usage_error("report", "more than one file given ('%s', '%s')", path, argv[i]);
        } else {
            path = argv[i];
        }
    }
    if (!path)
        return ag_usage_error("report", "no statistics file given");

    int rc = ag_json_parse_file(path, &root, &err);
    if (rc == -EINVAL) {
        fprintf(stderr, "autograph report: %s: malformed JSON at offset %zu (line %zu, column %zu): %s\n", path,
                err.offset, err.line, err.column, err.msg);
        goto out;
    }
    if (rc) {
        fprintf(stderr, "autograph report: %s: %s\n", path, err.msg[0] ? err.msg : strerror(-rc));
        goto out;
    }
    if (root->type != AG_JSON_OBJECT) {
        fprintf(stderr, "autograph report: %s: not an autograph statistics file (the top level is not an object)\n",
                path);
        goto out;
    }
    if (!ag_json_get(root, "autograph"))
        fprintf(stderr, "autograph report: warning: %s has no \"autograph\" field; summarizing it anyway\n", path);

    const ag_json_t *cv = ag_json_get(root, "calls");
    if (cv && cv->type == AG_JSON_OBJECT && cv->count) {
        calls = calloc(cv->count, sizeof(*calls));
        if (!calls) {
            fprintf(stderr, "autograph report: out of memory\n");
            goto out;
        }
        for (size_t i = 0; i < cv->count; i++) {
            if (cv->items[i].type != AG_JSON_NUMBER)
                continue;
            calls[ncalls].name = cv->keys[i];
            calls[ncalls].count = cv->items[i].number;
            calls[ncalls].text = cv->items[i].text;
            ncalls++;
        }
        qsort(calls, ncalls, sizeof(*calls), cmp_calls);
    }
    if (as_json)
        print_json(path, root, calls, ncalls, top);
    else
        print_text(path, root, calls, ncalls, top);
    ret = fflush(stdout) == 0 ? 0 : 1;
out:
    free(calls);
    ag_json_free(root);
    return ret;
}
