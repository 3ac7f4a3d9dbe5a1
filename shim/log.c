/* Writes the shim's messages to stderr in one write(2) each, so that lines from several threads do not
 * interleave, and never touches stdout or errno. */
#define _POSIX_C_SOURCE 200809L
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

int ag_log_level = AG_LOG_WARN;
/* CLOCK_MONOTONIC when the level was set (ns): debug and trace lines say how long after it they came */
static long long log_t0;

static const char *const level_names[] = {"error", "warn", "info", "debug", "trace"};

static long long mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void ag_log_init(int level)
{
    ag_log_level = level;
    log_t0 = mono_ns();
}

double ag_log_t0_s(void)
{
    return (double)log_t0 / 1e9;
}

static void vlog(int level, const char *fmt, va_list ap)
{
    char buf[1024];
    int saved = errno;
    /* debug and trace lines are a timeline: "autograph: debug: [12.345 ms] ..." after the shim loaded */
    int n = level >= AG_LOG_DEBUG ? snprintf(buf, sizeof buf, "autograph: %s: [%.3f ms] ", level_names[level],
                                             (double)(mono_ns() - log_t0) / 1e6)
                                  : snprintf(buf, sizeof buf, "autograph: %s: ", level_names[level]);
    if (n < 0)
        n = 0;
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    if (m < 0)
        m = 0;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof buf - 2)
        len = sizeof buf - 2;
    buf[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, buf, len);
    (void)w;
    errno = saved;
}

void ag_log(int level, const char *fmt, ...)
{
    if (!AG_LOG_ON(level))
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, fmt, ap);
    va_end(ap);
}

void ag_log_capped(atomic_uint *count, int level, const char *fmt, ...)
{
    unsigned n = atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
    if (n > AG_LOG_CAP)
        return;
    if (n == AG_LOG_CAP) {
        ag_log(level, "(further messages like the last one are suppressed)");
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vlog(level, fmt, ap);
    va_end(ap);
}
