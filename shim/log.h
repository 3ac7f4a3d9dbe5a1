/* Logging for the shim: one function, levels from AUTOGRAPH_LOG, prefix 'autograph:', always stderr (debug
 * and trace lines with the time since the shim loaded),
 * never allocates, keeps errno. AG_LOG_CAPPED limits a message repeated at one call site.
 * Locking: none needed; each message is one write(2). */
#ifndef AG_LOG_H
#define AG_LOG_H

#include <stdatomic.h>

#include "options.h"

#if defined(__GNUC__)
#define AG_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define AG_PRINTF(a, b)
#endif

/* How many times one call site of AG_LOG_CAPPED prints before it goes quiet. */
#define AG_LOG_CAP 5

extern int ag_log_level;

void ag_log_init(int level);
/* CLOCK_MONOTONIC (s) at ag_log_init: the zero of the debug and trace lines' times */
double ag_log_t0_s(void);
void ag_log(int level, const char *fmt, ...) AG_PRINTF(2, 3);
/* Prints unless *count has passed AG_LOG_CAP; says so once when it does. */
void ag_log_capped(atomic_uint *count, int level, const char *fmt, ...) AG_PRINTF(3, 4);

#define AG_LOG_ON(level) ((level) <= ag_log_level)
#define AG_LOG_CAPPED(level, ...)                                                                     \
    do {                                                                                              \
        static atomic_uint ag_cap_;                                                                   \
        if (AG_LOG_ON(level))                                                                         \
            ag_log_capped(&ag_cap_, level, __VA_ARGS__);                                              \
    } while (0)

#endif
