/* json.c: strict recursive-descent JSON reader and a matching writer.
 * The reader never reads past the given length, rejects what RFC 8259 rejects (trailing commas,
 * leading zeros, raw control characters, lone surrogates, trailing garbage) and limits nesting. */
#define _POSIX_C_SOURCE 200809L
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *s;
    size_t n;
    size_t pos;
    int depth;
    ag_json_error_t *err;
} parser_t;

static void clear_value(ag_json_t *v);
static int parse_value(parser_t *p, ag_json_t *out);

/* Only the first error is kept: it is the one nearest to the cause. */
static int fail(parser_t *p, size_t at, const char *fmt, ...)
{
    if (p->err && p->err->msg[0] == '\0') {
        va_list ap;
        size_t line = 1, col = 1;
        for (size_t i = 0; i < at && i < p->n; i++) {
            if (p->s[i] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        p->err->offset = at;
        p->err->line = line;
        p->err->column = col;
        va_start(ap, fmt);
        vsnprintf(p->err->msg, sizeof(p->err->msg), fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static void skip_ws(parser_t *p)
{
    while (p->pos < p->n) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->pos++;
    }
}

static int describe_char(parser_t *p, size_t at, const char *what)
{
    if (at >= p->n)
        return fail(p, at, "unexpected end of input, expected %s", what);
    unsigned char c = (unsigned char)p->s[at];
    if (c >= 0x20 && c < 0x7f)
        return fail(p, at, "unexpected '%c', expected %s", c, what);
    return fail(p, at, "unexpected byte 0x%02x, expected %s", c, what);
}

static int parse_literal(parser_t *p, const char *word, ag_json_t *out, ag_json_type_t type, int b)
{
    size_t len = strlen(word);
    if (p->n - p->pos < len || memcmp(p->s + p->pos, word, len) != 0)
        return describe_char(p, p->pos, "a JSON value");
    p->pos += len;
    out->type = type;
    out->boolean = b;
    return 0;
}

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static int parse_number(parser_t *p, ag_json_t *out)
{
    size_t start = p->pos, i = p->pos;
    if (i < p->n && p->s[i] == '-')
        i++;
    if (i >= p->n || !is_digit(p->s[i]))
        return describe_char(p, i, "a digit");
    if (p->s[i] == '0') {
        i++;
        if (i < p->n && is_digit(p->s[i]))
            return fail(p, i, "leading zeros are not allowed in numbers");
    } else {
        while (i < p->n && is_digit(p->s[i]))
            i++;
    }
    if (i < p->n && p->s[i] == '.') {
        i++;
        if (i >= p->n || !is_digit(p->s[i]))
            return describe_char(p, i, "a digit after '.'");
        while (i < p->n && is_digit(p->s[i]))
            i++;
    }
    if (i < p->n && (p->s[i] == 'e' || p->s[i] == 'E')) {
        i++;
        if (i < p->n && (p->s[i] == '+' || p->s[i] == '-'))
            i++;
        if (i >= p->n || !is_digit(p->s[i]))
            return describe_char(p, i, "a digit in the exponent");
        while (i < p->n && is_digit(p->s[i]))
            i++;
    }
    size_t len = i - start;
    char *text = malloc(len + 1);
    if (!text)
        return -ENOMEM;
    memcpy(text, p->s + start, len);
    text[len] = '\0';
    /* The grammar was checked above, so strtod consumes exactly this text. */
    double d = strtod(text, NULL);
    if (isinf(d)) {
        free(text);
        return fail(p, start, "number out of range");
    }
    out->type = AG_JSON_NUMBER;
    out->number = d;
    out->text = text;
    out->len = len;
    p->pos = i;
    return 0;
}

static int hex4(parser_t *p, size_t at, unsigned *out)
{
    unsigned v = 0;
    if (p->n - at < 4)
        return fail(p, at, "truncated \\u escape");
    for (size_t i = at; i < at + 4; i++) {
        char c = p->s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            v |= (unsigned)(c - 'A' + 10);
        else
            return fail(p, i, "bad hex digit in \\u escape");
    }
    *out = v;
    return 0;
}

typedef struct {
    char *buf;
    size_t len, cap;
} strbuf_t;

static int sb_put(strbuf_t *b, const char *src, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 32;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *nb = realloc(b->buf, cap);
        if (!nb)
            return -ENOMEM;
        b->buf = nb;
        b->cap = cap;
    }
    memcpy(b->buf + b->len, src, n);
    b->len += n;
    b->buf[b->len] = '\0';
    return 0;
}

static int sb_put_utf8(strbuf_t *b, unsigned cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    return sb_put(b, u, n);
}

/* On success *out is a NUL-terminated malloc'd string of *outlen bytes. */
static int parse_string_raw(parser_t *p, char **out, size_t *outlen)
{
    strbuf_t b = { 0 };
    int rc;
    size_t start = p->pos;

    if (p->pos >= p->n || p->s[p->pos] != '"')
        return describe_char(p, p->pos, "'\"'");
    p->pos++;
    rc = sb_put(&b, "", 0);
    if (rc)
        goto out;
    for (;;) {
        if (p->pos >= p->n) {
            rc = fail(p, start, "unterminated string");
            goto out;
        }
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            p->pos++;
            break;
        }
        if (c < 0x20) {
            rc = fail(p, p->pos, "raw control character 0x%02x in string", c);
            goto out;
        }
        if (c != '\\') {
            /* Copy the run of plain bytes at once. */
            size_t run = p->pos;
            while (run < p->n && p->s[run] != '"' && p->s[run] != '\\' && (unsigned char)p->s[run] >= 0x20)
                run++;
            rc = sb_put(&b, p->s + p->pos, run - p->pos);
            if (rc)
                goto out;
            p->pos = run;
            continue;
        }
        size_t esc = p->pos;
        if (p->pos + 1 >= p->n) {
            rc = fail(p, esc, "unterminated escape");
            goto out;
        }
        char e = p->s[p->pos + 1];
        p->pos += 2;
        const char *rep = NULL;
        switch (e) {
        case '"': rep = "\""; break;
        case '\\': rep = "\\"; break;
        case '/': rep = "/"; break;
        case 'b': rep = "\b"; break;
        case 'f': rep = "\f"; break;
        case 'n': rep = "\n"; break;
        case 'r': rep = "\r"; break;
        case 't': rep = "\t"; break;
        case 'u': {
            unsigned cp, lo;
            rc = hex4(p, p->pos, &cp);
            if (rc)
                goto out;
            p->pos += 4;
            if (cp >= 0xdc00 && cp <= 0xdfff) {
                rc = fail(p, esc, "lone low surrogate in \\u escape");
                goto out;
            }
            if (cp >= 0xd800 && cp <= 0xdbff) {
                if (p->n - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
                    rc = fail(p, esc, "high surrogate not followed by a low surrogate");
                    goto out;
                }
                rc = hex4(p, p->pos + 2, &lo);
                if (rc)
                    goto out;
                if (lo < 0xdc00 || lo > 0xdfff) {
                    rc = fail(p, p->pos, "high surrogate not followed by a low surrogate");
                    goto out;
                }
                p->pos += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            rc = sb_put_utf8(&b, cp);
            if (rc)
                goto out;
            continue;
        }
        default:
            rc = fail(p, esc, "bad escape '\\%c'", (e >= 0x20 && e < 0x7f) ? e : '?');
            goto out;
        }
        rc = sb_put(&b, rep, 1);
        if (rc)
            goto out;
    }
    *out = b.buf;
    *outlen = b.len;
    b.buf = NULL;
    rc = 0;
out:
    free(b.buf);
    return rc;
}

static int append_item(ag_json_t *parent, ag_json_t *child, char *key)
{
    /* Grow geometrically: count is a power of two exactly when the arrays are full. */
    size_t n = parent->count;
    if (n == 0 || (n & (n - 1)) == 0) {
        size_t cap = n ? n * 2 : 4;
        ag_json_t *items = realloc(parent->items, cap * sizeof(*items));
        if (!items)
            return -ENOMEM;
        parent->items = items;
        if (parent->type == AG_JSON_OBJECT) {
            char **keys = realloc(parent->keys, cap * sizeof(*keys));
            if (!keys)
                return -ENOMEM;
            parent->keys = keys;
        }
    }
    parent->items[n] = *child;
    if (parent->type == AG_JSON_OBJECT)
        parent->keys[n] = key;
    parent->count = n + 1;
    return 0;
}

static int parse_container(parser_t *p, ag_json_t *out, int is_object)
{
    char close = is_object ? '}' : ']';
    size_t open_at = p->pos;

    if (++p->depth > AG_JSON_MAX_DEPTH)
        return fail(p, p->pos, "nesting deeper than %d levels", AG_JSON_MAX_DEPTH);
    out->type = is_object ? AG_JSON_OBJECT : AG_JSON_ARRAY;
    p->pos++;
    skip_ws(p);
    if (p->pos < p->n && p->s[p->pos] == close) {
        p->pos++;
        p->depth--;
        return 0;
    }
    for (;;) {
        ag_json_t child = { 0 };
        char *key = NULL;
        size_t keylen;
        int rc;

        skip_ws(p);
        if (is_object) {
            if (p->pos >= p->n || p->s[p->pos] != '"')
                return describe_char(p, p->pos, "a string key");
            rc = parse_string_raw(p, &key, &keylen);
            if (rc)
                return rc;
            skip_ws(p);
            if (p->pos >= p->n || p->s[p->pos] != ':') {
                free(key);
                return describe_char(p, p->pos, "':' after object key");
            }
            p->pos++;
            skip_ws(p);
        }
        rc = parse_value(p, &child);
        if (rc == 0)
            rc = append_item(out, &child, key);
        if (rc) {
            clear_value(&child);
            free(key);
            return rc;
        }
        skip_ws(p);
        if (p->pos >= p->n)
            return fail(p, open_at, "unterminated %s", is_object ? "object" : "array");
        if (p->s[p->pos] == ',') {
            p->pos++;
            skip_ws(p);
            if (p->pos < p->n && p->s[p->pos] == close)
                return fail(p, p->pos, "trailing comma before '%c'", close);
            continue;
        }
        if (p->s[p->pos] == close) {
            p->pos++;
            p->depth--;
            return 0;
        }
        return describe_char(p, p->pos, is_object ? "',' or '}'" : "',' or ']'");
    }
}

static int parse_value(parser_t *p, ag_json_t *out)
{
    skip_ws(p);
    if (p->pos >= p->n)
        return fail(p, p->pos, "unexpected end of input, expected a JSON value");
    switch (p->s[p->pos]) {
    case '{': return parse_container(p, out, 1);
    case '[': return parse_container(p, out, 0);
    case '"': {
        int rc = parse_string_raw(p, &out->text, &out->len);
        if (rc == 0)
            out->type = AG_JSON_STRING;
        return rc;
    }
    case 't': return parse_literal(p, "true", out, AG_JSON_BOOL, 1);
    case 'f': return parse_literal(p, "false", out, AG_JSON_BOOL, 0);
    case 'n': return parse_literal(p, "null", out, AG_JSON_NULL, 0);
    default:
        if (p->s[p->pos] == '-' || is_digit(p->s[p->pos]))
            return parse_number(p, out);
        return describe_char(p, p->pos, "a JSON value");
    }
}

int ag_json_parse(const char *text, size_t len, ag_json_t **out, ag_json_error_t *err)
{
    ag_json_error_t local;
    parser_t p = { .s = text, .n = len, .err = err ? err : &local };
    ag_json_t *v = NULL;
    int rc;

    memset(p.err, 0, sizeof(*p.err));
    *out = NULL;
    if (!text && len) {
        rc = fail(&p, 0, "no input");
        goto out;
    }
    v = calloc(1, sizeof(*v));
    if (!v) {
        rc = -ENOMEM;
        goto out;
    }
    rc = parse_value(&p, v);
    if (rc)
        goto out;
    skip_ws(&p);
    if (p.pos != p.n) {
        rc = describe_char(&p, p.pos, "end of input after the JSON value");
        goto out;
    }
    *out = v;
    v = NULL;
out:
    if (rc == -ENOMEM && p.err->msg[0] == '\0')
        snprintf(p.err->msg, sizeof(p.err->msg), "out of memory");
    ag_json_free(v);
    return rc;
}

int ag_json_parse_file(const char *path, ag_json_t **out, ag_json_error_t *err)
{
    FILE *f = NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc;

    if (err)
        memset(err, 0, sizeof(*err));
    *out = NULL;
    f = fopen(path, "rb");
    if (!f) {
        rc = -errno;
        goto io_error;
    }
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, cap);
            if (!nb) {
                rc = -ENOMEM;
                goto io_error;
            }
            buf = nb;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f)) {
                rc = -EIO;
                goto io_error;
            }
            break;
        }
    }
    rc = ag_json_parse(buf, len, out, err);
    goto out;
io_error:
    if (err)
        snprintf(err->msg, sizeof(err->msg), "cannot read: %s", strerror(-rc));
out:
    if (f)
        fclose(f);
    free(buf);
    return rc;
}

static void clear_value(ag_json_t *v)
{
    for (size_t i = 0; i < v->count; i++) {
        clear_value(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->text);
    memset(v, 0, sizeof(*v));
}

void ag_json_free(ag_json_t *v)
{
    if (!v)
        return;
    clear_value(v);
    free(v);
}

const ag_json_t *ag_json_get(const ag_json_t *v, const char *key)
{
    if (!v || v->type != AG_JSON_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->count; i++)
        if (strcmp(v->keys[i], key) == 0)
            return &v->items[i];
    return NULL;
}

const ag_json_t *ag_json_path(const ag_json_t *root, const char *dotted)
{
    char part[256];
    const ag_json_t *v = root;
    const char *s = dotted;

    while (v && *s) {
        const char *dot = strchr(s, '.');
        size_t n = dot ? (size_t)(dot - s) : strlen(s);
        if (n >= sizeof(part))
            return NULL;
        memcpy(part, s, n);
        part[n] = '\0';
        v = ag_json_get(v, part);
        s += n + (dot ? 1 : 0);
    }
    return v;
}

int ag_json_number_of(const ag_json_t *v, double *out)
{
    if (!v || v->type != AG_JSON_NUMBER)
        return -EINVAL;
    *out = v->number;
    return 0;
}

void ag_json_write_string(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (c < 0x20)
                fprintf(f, "\\u%04x", c);
            else
                fputc(c, f);
        }
    }
    fputc('"', f);
}

static void write_indent(FILE *f, int indent, int level)
{
    if (indent <= 0)
        return;
    fputc('\n', f);
    for (int i = 0; i < indent * level; i++)
        fputc(' ', f);
}

static void write_value(FILE *f, const ag_json_t *v, int indent, int level)
{
    switch (v->type) {
    case AG_JSON_NULL: fputs("null", f); break;
    case AG_JSON_BOOL: fputs(v->boolean ? "true" : "false", f); break;
    case AG_JSON_NUMBER:
        if (v->text)
            fputs(v->text, f);
        else
            fprintf(f, "%.17g", v->number);
        break;
    case AG_JSON_STRING: ag_json_write_string(f, v->text ? v->text : "", v->len); break;
    case AG_JSON_ARRAY:
    case AG_JSON_OBJECT: {
        int obj = v->type == AG_JSON_OBJECT;
        fputc(obj ? '{' : '[', f);
        for (size_t i = 0; i < v->count; i++) {
            if (i)
                fputc(',', f);
            write_indent(f, indent, level + 1);
            if (obj) {
                ag_json_write_string(f, v->keys[i], strlen(v->keys[i]));
                fputs(indent > 0 ? ": " : ":", f);
            }
            write_value(f, &v->items[i], indent, level + 1);
        }
        if (v->count)
            write_indent(f, indent, level);
        fputc(obj ? '}' : ']', f);
        break;
    }
    }
}

int ag_json_write(FILE *f, const ag_json_t *v, int indent)
{
    write_value(f, v, indent, 0);
    return ferror(f) ? -EIO : 0;
}
