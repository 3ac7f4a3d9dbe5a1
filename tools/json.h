/* json.h: a small strict JSON reader (and writer) for the statistics files libautograph writes.
 * Recursive descent over a length-bounded buffer with a depth limit; every error names the byte
 * offset (and line/column) where the input stopped making sense. */
#ifndef AG_JSON_H
#define AG_JSON_H

#include <stddef.h>
#include <stdio.h>

typedef enum {
    AG_JSON_NULL,
    AG_JSON_BOOL,
    AG_JSON_NUMBER,
    AG_JSON_STRING,
    AG_JSON_ARRAY,
    AG_JSON_OBJECT,
} ag_json_type_t;

typedef struct ag_json ag_json_t;
struct ag_json {
    ag_json_type_t type;
    int boolean;
    double number;
    /* STRING: the decoded bytes, NUL-terminated, len bytes (may hold NULs from \u0000).
     * NUMBER: the source text, kept so that large integer counters print exactly. */
    char *text;
    size_t len;
    ag_json_t *items; /* ARRAY and OBJECT: the children, in input order */
    char **keys;      /* OBJECT: keys[i] names items[i] (decoded, NUL-terminated) */
    size_t count;
};

/* Deeper input is rejected rather than risking the stack. */
#define AG_JSON_MAX_DEPTH 256

typedef struct {
    size_t offset; /* byte offset of the error */
    size_t line;   /* 1-based */
    size_t column; /* 1-based, in bytes */
    char msg[160];
} ag_json_error_t;

/* Parses exactly one JSON value (surrounded by optional whitespace) from text[0..len); text need not
 * be NUL-terminated. Returns 0 and *out (free with ag_json_free), -EINVAL on malformed input (err
 * filled), -ENOMEM. */
int ag_json_parse(const char *text, size_t len, ag_json_t **out, ag_json_error_t *err);
/* Same, for a whole file; -errno when the file cannot be read (err->msg says why). */
int ag_json_parse_file(const char *path, ag_json_t **out, ag_json_error_t *err);
void ag_json_free(ag_json_t *v);

/* First member named key of an object, NULL if absent or v is not an object. */
const ag_json_t *ag_json_get(const ag_json_t *v, const char *key);
/* Follows a dotted path of object keys ("replay.host_ns_per_match"). */
const ag_json_t *ag_json_path(const ag_json_t *root, const char *dotted);
/* 0 and *out when v is a number, -EINVAL otherwise (v may be NULL). */
int ag_json_number_of(const ag_json_t *v, double *out);

/* Writes v as JSON; indent > 0 pretty-prints with that many spaces per level. Returns 0 or -EIO. */
int ag_json_write(FILE *f, const ag_json_t *v, int indent);
void ag_json_write_string(FILE *f, const char *s, size_t len);

#endif /* AG_JSON_H */
