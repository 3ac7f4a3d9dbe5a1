/* test_json.c: unit test of the CLI's JSON reader (tools/json.c): values, escapes, numbers, the
 * byte offsets named by errors, bounds (input without a NUL), depth limit, and round trips. */
#define _POSIX_C_SOURCE 200809L
#include "json.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                                                  \
    do {                                                                                             \
        if (!(cond)) {                                                                               \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                 \
            failures++;                                                                              \
        }                                                                                            \
    } while (0)

static ag_json_t *parse_ok(const char *text)
{
    ag_json_t *v = NULL;
    ag_json_error_t err;
    int rc = ag_json_parse(text, strlen(text), &v, &err);
    if (rc != 0) {
        fprintf(stderr, "unexpected parse error for %s: offset %zu: %s\n", text, err.offset, err.msg);
        failures++;
    }
    return v;
}

/* expect_offset < 0: any offset. */
static void parse_bad(const char *text, long expect_offset, const char *expect_msg)
{
    ag_json_t *v = (ag_json_t *)1;
    ag_json_error_t err;
    int rc = ag_json_parse(text, strlen(text), &v, &err);
    if (rc != -EINVAL || v != NULL) {
        fprintf(stderr, "accepted bad input %s (rc %d)\n", text, rc);
        failures++;
        ag_json_free(v);
        return;
    }
    if (expect_offset >= 0 && (long)err.offset != expect_offset) {
        fprintf(stderr, "bad input %s: error at offset %zu (%s), expected %ld\n", text, err.offset, err.msg,
                expect_offset);
        failures++;
    }
    if (expect_msg && !strstr(err.msg, expect_msg)) {
        fprintf(stderr, "bad input %s: message '%s' lacks '%s'\n", text, err.msg, expect_msg);
        failures++;
    }
    if (err.msg[0] == '\0') {
        fprintf(stderr, "bad input %s: empty error message\n", text);
        failures++;
    }
}

static void test_values(void)
{
    ag_json_t *v = parse_ok(" {\"a\": 1, \"b\": [true, false, null, -2.5e3, \"x\"], \"c\": {\"d\": {\"e\": 42}},"
                            " \"big\": 18446744073709551615, \"z\": 0, \"neg0\": -0, \"f\": 0.125} ");
    double d;
    if (!v)
        return;
    CHECK(v->type == AG_JSON_OBJECT && v->count == 7);
    CHECK(ag_json_number_of(ag_json_get(v, "a"), &d) == 0 && d == 1.0);
    const ag_json_t *b = ag_json_get(v, "b");
    CHECK(b && b->type == AG_JSON_ARRAY && b->count == 5);
    if (b && b->count == 5) {
        CHECK(b->items[0].type == AG_JSON_BOOL && b->items[0].boolean == 1);
        CHECK(b->items[1].type == AG_JSON_BOOL && b->items[1].boolean == 0);
        CHECK(b->items[2].type == AG_JSON_NULL);
        CHECK(b->items[3].type == AG_JSON_NUMBER && b->items[3].number == -2500.0);
        CHECK(strcmp(b->items[3].text, "-2.5e3") == 0);
        CHECK(b->items[4].type == AG_JSON_STRING && strcmp(b->items[4].text, "x") == 0);
    }
    CHECK(ag_json_number_of(ag_json_path(v, "c.d.e"), &d) == 0 && d == 42.0);
    CHECK(ag_json_path(v, "c.d.nope") == NULL);
    CHECK(ag_json_path(v, "a.b") == NULL);
    CHECK(ag_json_get(v, "missing") == NULL);
    CHECK(ag_json_number_of(ag_json_get(v, "b"), &d) == -EINVAL);
    CHECK(ag_json_number_of(NULL, &d) == -EINVAL);
    /* Counters beyond 2^53 keep their exact text for printing. */
    CHECK(strcmp(ag_json_get(v, "big")->text, "18446744073709551615") == 0);
    CHECK(ag_json_number_of(ag_json_get(v, "f"), &d) == 0 && d == 0.125);
    ag_json_free(v);

    v = parse_ok("[]");
    CHECK(v && v->type == AG_JSON_ARRAY && v->count == 0);
    ag_json_free(v);
    v = parse_ok("{}");
    CHECK(v && v->type == AG_JSON_OBJECT && v->count == 0);
    ag_json_free(v);
    v = parse_ok("\t\r\n 7 \n");
    CHECK(v && v->type == AG_JSON_NUMBER && v->number == 7.0);
    ag_json_free(v);

    /* Many members: exercises the growth of the child arrays. */
    char big[20000];
    size_t o = 0;
    o += (size_t)snprintf(big + o, sizeof(big) - o, "{");
    for (int i = 0; i < 1000; i++)
        o += (size_t)snprintf(big + o, sizeof(big) - o, "%s\"k%d\": %d", i ? "," : "", i, i);
    snprintf(big + o, sizeof(big) - o, "}");
    v = parse_ok(big);
    CHECK(v && v->count == 1000);
    CHECK(v && ag_json_number_of(ag_json_get(v, "k999"), &d) == 0 && d == 999.0);
    ag_json_free(v);
}

static void test_strings(void)
{
    ag_json_t *v = parse_ok("\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20ac\\ud83d\\ude00\"");
    if (v) {
        const char want[] = "a\"b\\c/d\b\f\n\r\tA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80";
        CHECK(v->type == AG_JSON_STRING);
        CHECK(v->len == sizeof(want) - 1 && memcmp(v->text, want, v->len) == 0);
    }
    ag_json_free(v);
    v = parse_ok("\"nul\\u0000inside\"");
    CHECK(v && v->len == 10 && v->text[3] == '\0' && strcmp(v->text + 4, "inside") == 0);
    ag_json_free(v);
    v = parse_ok("\"caf\xc3\xa9\"");
    CHECK(v && v->len == 5);
    ag_json_free(v);
}

static void test_errors(void)
{
    parse_bad("", 0, "end of input");
    parse_bad("   ", 3, "end of input");
    parse_bad("{", 1, "string key");
    parse_bad("{\"a\" 1}", 5, "':'");
    parse_bad("{\"a\": 1,}", 8, "trailing comma");
    parse_bad("[1, 2,]", 6, "trailing comma");
    parse_bad("[1 2]", 3, "',' or ']'");
    parse_bad("{\"a\": 1 \"b\": 2}", 8, "',' or '}'");
    parse_bad("[1, 2", 0, "unterminated array");
    parse_bad("{\"a\": [1]", 0, "unterminated object");
    parse_bad("{'a': 1}", 1, "string key");
    parse_bad("{a: 1}", 1, "string key");
    parse_bad("01", 1, "leading zeros");
    parse_bad("-", 1, "digit");
    parse_bad("1.", 2, "digit after '.'");
    parse_bad(".5", 0, "JSON value");
    parse_bad("1e", 2, "exponent");
    parse_bad("1e+", 3, "exponent");
    parse_bad("+1", 0, "JSON value");
    parse_bad("1e999", 0, "out of range");
    parse_bad("NaN", 0, "JSON value");
    parse_bad("tru", 0, "JSON value");
    parse_bad("nulll", 4, "end of input after");
    parse_bad("[1] [2]", 4, "end of input after");
    parse_bad("\"abc", 0, "unterminated string");
    parse_bad("\"a\nb\"", 2, "control character");
    parse_bad("\"\\x\"", 1, "bad escape");
    parse_bad("\"\\u12xy\"", 5, "hex digit");
    parse_bad("\"\\u12", 3, "truncated");
    parse_bad("\"\\ud800\"", 1, "surrogate");
    parse_bad("\"\\ud800\\u0041\"", 7, "surrogate");
    parse_bad("\"\\udc00\"", 1, "lone low surrogate");
    parse_bad("\"abc\\", 4, "unterminated escape");
    parse_bad("{\"a\": 1, \"b\": [1, {\"c\": x}]}", 24, "JSON value");
    parse_bad("\x01", 0, "byte 0x01");

    /* Line and column of the error. */
    ag_json_t *v;
    ag_json_error_t err;
    const char *text = "{\n  \"a\": 1,\n  \"b\" 2\n}";
    CHECK(ag_json_parse(text, strlen(text), &v, &err) == -EINVAL);
    CHECK(err.offset == 18 && err.line == 3 && err.column == 7);
}

static void test_bounds(void)
{
    /* The parser must stop at len even when more (valid-looking) bytes follow. */
    const char buf[] = "[1, 2, 3]garbage";
    ag_json_t *v = NULL;
    ag_json_error_t err;
    CHECK(ag_json_parse(buf, 9, &v, &err) == 0 && v && v->count == 3);
    ag_json_free(v);
    CHECK(ag_json_parse(buf, 5, &v, &err) == -EINVAL && err.offset == 0);
    /* A number at the very end of an unterminated buffer. */
    char *heap = malloc(3);
    memcpy(heap, "123", 3);
    CHECK(ag_json_parse(heap, 3, &v, &err) == 0 && v && v->number == 123.0);
    ag_json_free(v);
    memcpy(heap, "\"ab", 3);
    CHECK(ag_json_parse(heap, 3, &v, &err) == -EINVAL);
    memcpy(heap, "\"\\u", 3);
    CHECK(ag_json_parse(heap, 3, &v, &err) == -EINVAL);
    free(heap);
    CHECK(ag_json_parse(NULL, 0, &v, &err) == -EINVAL);

    /* Nesting: the limit is accepted, one more is an error, and 100000 does not crash. */
    size_t n = 100000;
    char *deep = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++) {
        deep[i] = '[';
        deep[2 * n - 1 - i] = ']';
    }
    deep[2 * n] = '\0';
    CHECK(ag_json_parse(deep, 2 * n, &v, &err) == -EINVAL && strstr(err.msg, "nesting"));
    size_t lim = AG_JSON_MAX_DEPTH;
    CHECK(ag_json_parse(deep + n - lim, 2 * lim, &v, &err) == 0);
    ag_json_free(v);
    CHECK(ag_json_parse(deep + n - lim - 1, 2 * lim + 2, &v, &err) == -EINVAL);
    free(deep);
}

static void test_roundtrip(void)
{
    const char *text = "{\"s\":\"q\\\"\\\\\\n\\u0001\",\"n\":[1,-2.5e3,null,true,false],\"o\":{}}";
    ag_json_t *v = parse_ok(text), *w = NULL;
    char *out = NULL;
    size_t len = 0;
    if (!v)
        return;
    FILE *f = open_memstream(&out, &len);
    CHECK(ag_json_write(f, v, 0) == 0);
    fclose(f);
    CHECK(strcmp(out, text) == 0);
    free(out);
    f = open_memstream(&out, &len);
    CHECK(ag_json_write(f, v, 2) == 0);
    fclose(f);
    CHECK(strchr(out, '\n') != NULL);
    w = parse_ok(out);
    CHECK(w && w->count == 3 && strcmp(ag_json_get(w, "s")->text, "q\"\\\n\x01") == 0);
    free(out);
    ag_json_free(w);
    ag_json_free(v);
}

static void test_file(void)
{
    ag_json_t *v = NULL;
    ag_json_error_t err;
    CHECK(ag_json_parse_file("/nonexistent/stats.json", &v, &err) == -ENOENT && v == NULL);
    CHECK(strstr(err.msg, "No such file") != NULL);
    char path[] = "/tmp/ag_test_json_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    FILE *f = fdopen(fd, "w");
    fputs("{\"launches\": 5}", f);
    fclose(f);
    CHECK(ag_json_parse_file(path, &v, &err) == 0 && v);
    double d;
    CHECK(v && ag_json_number_of(ag_json_get(v, "launches"), &d) == 0 && d == 5.0);
    ag_json_free(v);
    remove(path);
}

int main(void)
{
    test_values();
    test_strings();
    test_errors();
    test_bounds();
    test_roundtrip();
    test_file();
    if (failures) {
        fprintf(stderr, "test_json: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_json: all passed\n");
    return 0;
}
