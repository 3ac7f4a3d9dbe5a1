/* Call counters and the statistics report. Counting is per thread (no shared cache line on the launch
 * path); exited threads fold into global totals; the report is summed at exit. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "record.h"

atomic_ulong ag_unmatched_proc;
atomic_ulong ag_fattr_sets[2];

static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static ag_tcount_t *live_blocks; /* blocks owned by running threads */
static ag_tcount_t *free_blocks; /* blocks of exited threads, zeroed, for reuse */
static _Atomic uint64_t retired[AG_ID_COUNT];
static pthread_key_t exit_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ok;

static void thread_exit(void *arg)
{
    ag_tcount_t *t = arg;
    ag_engine_thread_exit();
    pthread_mutex_lock(&blocks_lock);
    for (int i = 0; i < AG_ID_COUNT; i++) {
        uint64_t n = atomic_load_explicit(&t->n[i], memory_order_relaxed);
        atomic_fetch_add_explicit(&retired[i], n, memory_order_relaxed);
        atomic_store_explicit(&t->n[i], 0, memory_order_relaxed);
    }
    for (ag_tcount_t **pp = &live_blocks; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    t->next = free_blocks;
    free_blocks = t;
    pthread_mutex_unlock(&blocks_lock);
    ag_tc = NULL;
}

static void make_key(void)
{
    key_ok = pthread_key_create(&exit_key, thread_exit) == 0;
}

ag_tcount_t *ag_tcount_attach(void)
{
    pthread_once(&key_once, make_key);
    pthread_mutex_lock(&blocks_lock);
    ag_tcount_t *t = free_blocks;
    if (t)
        free_blocks = t->next;
    else
        t = calloc(1, sizeof *t);
    if (t) {
        t->next = live_blocks;
        live_blocks = t;
    }
    pthread_mutex_unlock(&blocks_lock);
    if (t && key_ok)
        pthread_setspecific(exit_key, t);
    ag_tc = t;
    return t;
}

void ag_stats_totals(uint64_t out[AG_ID_COUNT])
{
    pthread_mutex_lock(&blocks_lock);
    for (int i = 0; i < AG_ID_COUNT; i++)
        out[i] = atomic_load_explicit(&retired[i], memory_order_relaxed);
    for (ag_tcount_t *t = live_blocks; t; t = t->next)
        for (int i = 0; i < AG_ID_COUNT; i++)
            out[i] += atomic_load_explicit(&t->n[i], memory_order_relaxed);
    pthread_mutex_unlock(&blocks_lock);
}

void ag_stats_fork_prepare(void)
{
    pthread_mutex_lock(&blocks_lock);
}

void ag_stats_fork_parent(void)
{
    pthread_mutex_unlock(&blocks_lock);
}

/* The child counts its own calls only: the parent reports its own. */
void ag_stats_fork_child(void)
{
    pthread_mutex_init(&blocks_lock, NULL);
    for (int i = 0; i < AG_ID_COUNT; i++)
        atomic_store_explicit(&retired[i], 0, memory_order_relaxed);
    for (ag_tcount_t *t = live_blocks; t; t = t->next)
        for (int i = 0; i < AG_ID_COUNT; i++)
            atomic_store_explicit(&t->n[i], 0, memory_order_relaxed);
    atomic_store_explicit(&ag_unmatched_proc, 0, memory_order_relaxed);
    atomic_store_explicit(&ag_fattr_sets[0], 0, memory_order_relaxed);
    atomic_store_explicit(&ag_fattr_sets[1], 0, memory_order_relaxed);
    __atomic_store_n(&ag_attr_ids_seen, 0, __ATOMIC_RELAXED);
}

/* Expands '%p' to the pid and '%%' to '%'. Returns 1 if the pattern contained '%p'. */
static int expand_path(const char *pattern, char *out, size_t outlen)
{
    int has_pid = 0;
    size_t o = 0;
    for (const char *p = pattern; *p && o + 1 < outlen; p++) {
        if (p[0] == '%' && p[1] == 'p') {
            o += (size_t)snprintf(out + o, outlen - o, "%d", (int)getpid());
            has_pid = 1;
            p++;
        } else if (p[0] == '%' && p[1] == '%') {
            out[o++] = '%';
            p++;
        } else {
            out[o++] = *p;
        }
    }
    out[o < outlen ? o : outlen - 1] = '\0';
    return has_pid;
}

ag_sampler_t ag_passthru_launches, ag_passthru_memops;
ag_bar_time_t ag_bar_times[AG_BAR_CLASSES];
AG_TLS unsigned ag_passthru_tick, ag_passthru_mtick;

void ag_sampler_add(ag_sampler_t *s, uint64_t ns)
{
    uint64_t i = atomic_fetch_add_explicit(&s->n, 1, memory_order_relaxed);
    atomic_store_explicit(&s->ns[i % AG_SAMPLER_RING], ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns,
                          memory_order_relaxed);
    atomic_fetch_add_explicit(&s->sum, ns, memory_order_relaxed);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..k) (k > 0), which it sorts. */
static double median_sorting(uint32_t *v, size_t k)
{
    qsort(v, k, sizeof *v, cmp_u32);
    return k % 2 ? v[k / 2] : ((double)v[k / 2 - 1] + v[k / 2]) / 2;
}

double ag_median_u32(const uint32_t *ring, uint64_t n)
{
    size_t k = n < AG_SAMPLER_RING ? (size_t)n : AG_SAMPLER_RING;
    uint32_t *v = k ? malloc(sizeof *v * k) : NULL;
    if (!v)
        return 0;
    memcpy(v, ring, sizeof *v * k);
    double m = median_sorting(v, k);
    free(v);
    return m;
}

double ag_sampler_median(ag_sampler_t *s)
{
    uint64_t n = atomic_load(&s->n);
    size_t k = n < AG_SAMPLER_RING ? (size_t)n : AG_SAMPLER_RING;
    uint32_t *v = k ? malloc(sizeof *v * k) : NULL;
    if (!v)
        return 0;
    for (size_t i = 0; i < k; i++)
        v[i] = atomic_load_explicit(&s->ns[i], memory_order_relaxed);
    double m = median_sorting(v, k);
    free(v);
    return m;
}

void ag_put_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static uint64_t launches_of(const uint64_t *tot)
{
    uint64_t n = 0;
    for (int i = 0; i < AG_ID_COUNT; i++)
        if (AG_KIND_IS_LAUNCH(ag_hook_kinds[i]))
            n += tot[i];
    return n;
}

static int write_json(const char *path, const uint64_t *tot)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -errno;
    uint64_t total = 0;
    for (int i = 0; i < AG_ID_COUNT; i++)
        total += tot[i];
    fprintf(f, "{\n  \"autograph\": 1,\n  \"pid\": %d,\n  \"scope\": ", (int)getpid());
    ag_put_json_string(f, ag_opt(AG_OPT_SCOPE)->text);
    fprintf(f, ",\n");
    fprintf(f, "  \"launches\": %llu,\n  \"calls_total\": %llu,\n  \"calls\": {",
            (unsigned long long)launches_of(tot), (unsigned long long)total);
    const char *sep = "";
    for (int i = 0; i < AG_ID_COUNT; i++) {
        if (!tot[i])
            continue;
        fprintf(f, "%s\n    \"%s\": %llu", sep, ag_hook_names[i], (unsigned long long)tot[i]);
        sep = ",";
    }
    fprintf(f, "%s},\n  \"function_attribute_sets\": {\"barriers\": %lu, \"passed\": %lu},\n", *sep ? "\n  " : "",
            atomic_load(&ag_fattr_sets[1]), atomic_load(&ag_fattr_sets[0]));
    fprintf(f, "  \"launch_attribute_ids\": [");
    uint64_t ids = __atomic_load_n(&ag_attr_ids_seen, __ATOMIC_RELAXED);
    for (int i = 0, n = 0; i < 64; i++)
        if (ids >> i & 1)
            fprintf(f, "%s%d", n++ ? ", " : "", i);
    fprintf(f, "],\n  \"unmatched_proc_addresses\": %lu,\n  \"unmatched_proc_names\": [", atomic_load(&ag_unmatched_proc));
    const char *const *names;
    int nn = ag_unmatched_names(&names);
    for (int i = 0; i < nn; i++) {
        fputs(i ? ", " : "", f);
        ag_put_json_string(f, names[i]);
    }
    uint64_t pt = atomic_load(&ag_passthru_launches.n), pm = atomic_load(&ag_passthru_memops.n);
    fprintf(f, "],\n  \"passthrough_launches_timed\": %llu,\n  \"passthrough_launch_ns_median\": %.1f,\n"
               "  \"passthrough_launch_ns_mean\": %.1f,\n", (unsigned long long)pt, ag_sampler_median(&ag_passthru_launches),
            pt ? (double)atomic_load(&ag_passthru_launches.sum) / (double)pt : 0.0);
    fprintf(f, "  \"passthrough_memops_timed\": %llu,\n  \"passthrough_memop_ns_median\": %.1f,\n"
               "  \"passthrough_memop_ns_mean\": %.1f,\n", (unsigned long long)pm, ag_sampler_median(&ag_passthru_memops),
            pm ? (double)atomic_load(&ag_passthru_memops.sum) / (double)pm : 0.0);
    static const char *const bar_names[AG_BAR_CLASSES] = {"syncs", "queries", "graphs", "other"};
    fputs("  \"barrier_host_ms\": {", f);
    for (int i = 0; i < AG_BAR_CLASSES; i++)
        fprintf(f, "%s\"%s\": {\"calls\": %llu, \"engine\": %.3f, \"driver\": %.3f}", i ? ", " : "", bar_names[i],
                (unsigned long long)atomic_load(&ag_bar_times[i].calls),
                (double)atomic_load(&ag_bar_times[i].engine_ns) / 1e6,
                (double)atomic_load(&ag_bar_times[i].driver_ns) / 1e6);
    fputs("},\n", f);
    ag_engine_stats(f, launches_of(tot));
    ag_cupti_stats(f);
    fprintf(f, "}\n");
    int bad = ferror(f);
    if (fclose(f) != 0 || bad) {
        unlink(tmp);
        return -EIO;
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return -e;
    }
    return 0;
}

void ag_stats_report(int forked_child)
{
    static uint64_t tot[AG_ID_COUNT];
    ag_stats_totals(tot);
    const char *pattern = ag_opt(AG_OPT_STATS)->text;
    if (pattern && *pattern) {
        char path[4096];
        int has_pid = expand_path(pattern, path, sizeof path);
        uint64_t calls = 0;
        for (int i = 0; i < AG_ID_COUNT; i++)
            calls += tot[i];
        /* A process that made no driver call (a helper the program ran, with the shim preloaded too)
         * does not overwrite another process's statistics at one path: it would, exiting after it. */
        int idle_over = !has_pid && !calls && access(path, F_OK) == 0;
        if ((!forked_child || has_pid) && !idle_over) {
            int rc = write_json(path, tot);
            if (rc)
                ag_log(AG_LOG_WARN, "cannot write statistics to %s: %s", path, strerror(-rc));
        }
    }
    if (AG_LOG_ON(AG_LOG_INFO)) {
        uint64_t total = 0;
        for (int i = 0; i < AG_ID_COUNT; i++)
            total += tot[i];
        long long cl = ag_cupti_launches();
        char cupti[64] = "";
        if (cl >= 0)
            snprintf(cupti, sizeof cupti, ", CUPTI saw %lld", cl);
        uint64_t launches = launches_of(tot), replayed = 0, graphs = 0;
        ag_engine_summary(&replayed, &graphs);
        ag_log(AG_LOG_INFO,
               "pid %d: %llu kernel launches (%.1f%% replayed from %llu graphs)%s, %llu driver calls intercepted, "
               "scope %s",
               (int)getpid(), (unsigned long long)launches, launches ? 100.0 * (double)replayed / (double)launches : 0.0,
               (unsigned long long)graphs, cupti, (unsigned long long)total, ag_opt(AG_OPT_SCOPE)->text);
    }
}
