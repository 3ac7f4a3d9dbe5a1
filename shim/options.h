/* The one table of AUTOGRAPH_* options: read once at start-up (ag_options_load), queried everywhere
 * else through ag_opt(). No other file calls getenv. The CLI links this file too, to print env.example.
 * Locking: loaded once before any other thread can use the shim (library constructor); read-only after. */
#ifndef AG_OPTIONS_H
#define AG_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

typedef enum { AG_OPT_ENUM, AG_OPT_INT, AG_OPT_STRING } ag_opt_kind_t;

typedef struct {
    const char *name;   /* "AUTOGRAPH_LOG" */
    ag_opt_kind_t kind;
    const char *def;    /* default as text, "" for none */
    const char *values; /* accepted values: "error|warn|info|debug|trace", "1..1000000", "path" */
    const char *doc;    /* one or two sentences */
} ag_option_desc_t;

/* Index of each option in the table; keep in the table's order. */
typedef enum {
    AG_OPT_LOG,
    AG_OPT_STATS,
    AG_OPT_SCOPE,
    AG_OPT_CUPTI,
    AG_OPT_CUPTI_LIB,
    AG_OPT_CUPTI_DETACH,
    AG_OPT_CUPTI_TIMING,
    AG_OPT_WARMUP,
    AG_OPT_CHUNK,
    AG_OPT_CHUNK_FIRST,
    AG_OPT_CHUNK_PLAN,
    AG_OPT_SEGMENT_KEY,
    AG_OPT_RENAME,
    AG_OPT_MAX_GRAPHS,
    AG_OPT_STAGING_KB,
    AG_OPT_GPU_BOUND,
    AG_OPT_REST,
    AG_OPT_PROBE,
    AG_OPT_STALL_MS,
    AG_OPT_ISSUER,
    AG_OPT_ISSUER_SPIN_US,
    AG_OPT_EVENT_DESTROY,
    AG_OPT_COUNT
} ag_opt_id_t;

/* Enum values, in the order of the option's `values` text. */
enum { AG_LOG_ERROR, AG_LOG_WARN, AG_LOG_INFO, AG_LOG_DEBUG, AG_LOG_TRACE };
enum { AG_SCOPE_OFF, AG_SCOPE_ALL };
enum { AG_CUPTI_OFF, AG_CUPTI_LEARN, AG_CUPTI_GUARD, AG_CUPTI_ALWAYS };
enum { AG_CUPTI_DETACH_BACKGROUND, AG_CUPTI_DETACH_INLINE };
enum { AG_CUPTI_TIMING_OFF, AG_CUPTI_TIMING_ON };
enum { AG_PLAN_HALVING, AG_PLAN_MODEL, AG_PLAN_MODEL_UNTRIED };
enum { AG_SEGKEY_EXACT, AG_SEGKEY_SHAPE_FREE };
enum { AG_PROBE_OFF, AG_PROBE_ON };
enum { AG_RENAME_OFF, AG_RENAME_ON };
enum { AG_ISSUER_INLINE, AG_ISSUER_THREAD, AG_ISSUER_LAUNCH };
enum { AG_EVDESTROY_BARRIER, AG_EVDESTROY_DEFER };

typedef struct {
    long num;         /* enum index or integer value */
    const char *text; /* canonical text of the value (points into the table or the environment) */
} ag_opt_value_t;

const ag_option_desc_t *ag_option_descs(size_t *count);

/* Writes the whole env.example text. Returns 0 or -errno. */
int ag_options_write_env_example(FILE *f);

/* Parses one value; returns 0 if valid (and writes the canonical text into out), -EINVAL otherwise. */
int ag_option_check(const ag_option_desc_t *d, const char *value, char *out, size_t outlen);

/* Reads the environment once. Malformed values and unknown AUTOGRAPH_* names are reported through
 * `warn` (one call per problem) and replaced by the default. */
void ag_options_load(void (*warn)(const char *msg));

const ag_opt_value_t *ag_opt(ag_opt_id_t id);

#endif
