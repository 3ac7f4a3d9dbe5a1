/* Start-up of the preloaded library: options and logging in the constructor, binding to the real
 * libcuda on first use (the resolver may be called before cuInit), lookup tables from names and real
 * addresses to hook ids, fork handling and the report at exit. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

ag_hot_t ag_hot;
AG_TLS uint64_t ag_timing_op;
void *(*ag_real_dlsym)(void *, const char *);

static pthread_once_t bind_once = PTHREAD_ONCE_INIT;
static int forked_child;

static void bind_cuda_once(void)
{
    ag_guard++;
    /* The process has libcuda loaded whenever one of our hooks can be reached; opening it by soname
     * finds that copy. Failing NOLOAD, load it as the program would have. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        const char *e = dlerror();
        ag_log(AG_LOG_ERROR, "cannot open libcuda.so.1 (%s); every hooked call will fail", e ? e : "?");
    } else {
        int missing = 0;
        for (int id = 0; id < AG_ID_COUNT; id++) {
            void *p = ag_real_dlsym(h, ag_hook_names[id]);
            /* A definition that is our own means the driver lacks the symbol (the lookup fell through
             * to us); never call ourselves. */
            if (p == ag_hook_addr((ag_id_t)id))
                p = NULL;
            ag_real[id] = p;
            if (!p) {
                missing++;
                ag_log(AG_LOG_DEBUG, "the driver does not export %s", ag_hook_names[id]);
                continue;
            }
            ag_hooktab_add_real((ag_id_t)id, p);
        }
        ag_log(AG_LOG_DEBUG, "bound to the driver: %d of %d entry points present", AG_ID_COUNT - missing,
               AG_ID_COUNT);
    }
    atomic_store_explicit(&ag_bound, 1, memory_order_release);
    ag_guard--;
}

void ag_bind_cuda(void)
{
    /* A hook reached while binding (the loader running libcuda's constructors) must not wait for
     * itself: it sees unbound pointers and reports the driver as missing. */
    if (ag_guard)
        return;
    pthread_once(&bind_once, bind_cuda_once);
}

/* Option warnings wait until AUTOGRAPH_LOG itself is known. */
#define AG_EARLY_WARNINGS 8
static char early_warnings[AG_EARLY_WARNINGS][256];
static int n_early_warnings;

static void warn_option(const char *msg)
{
    if (n_early_warnings < AG_EARLY_WARNINGS)
        snprintf(early_warnings[n_early_warnings++], sizeof early_warnings[0], "%s", msg);
}

static void at_exit(void)
{
    if (!forked_child)
        ag_engine_exit();
    ag_stats_report(forked_child);
}

static void fork_prepare(void)
{
    ag_cupti_quiesce();
    ag_engine_fork_prepare();
    ag_stats_fork_prepare();
}

static void fork_parent(void)
{
    ag_stats_fork_parent();
    ag_engine_fork_parent();
}

static void fork_child(void)
{
    forked_child = 1;
    ag_stats_fork_child();
    ag_engine_fork_child();
}

AG_NO_SANITIZE void *ag_resolve_real_dlsym(void)
{
    /* dlvsym is not interposed; ask for the current symbol version first, then the original ones. */
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
    void *(*fn)(void *, const char *) = NULL;
    for (size_t i = 0; !fn && i < sizeof versions / sizeof *versions; i++)
        fn = (void *(*)(void *, const char *))dlvsym(RTLD_NEXT, "dlsym", versions[i]);
    ag_real_dlsym = fn;
    return (void *)fn;
}

__attribute__((constructor)) static void ag_start(void)
{
    ag_resolve_real_dlsym();
    /* Options first with the default level, so that warnings about them are printed. */
    ag_options_load(warn_option);
    ag_log_init((int)ag_opt(AG_OPT_LOG)->num);
    for (int i = 0; i < n_early_warnings; i++)
        ag_log(AG_LOG_WARN, "%s", early_warnings[i]);
    ag_hooktab_init();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    ag_engine_start();
    atexit(at_exit);
    ag_log(AG_LOG_DEBUG, "loaded into pid %d (scope %s) at CLOCK_MONOTONIC %.6f s", (int)getpid(),
           ag_opt(AG_OPT_SCOPE)->text, ag_log_t0_s());
}
