/* Unit tests of the options table: defaults, parsing of every kind, warnings for malformed values and
 * unknown AUTOGRAPH_* names, and the env.example text. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "options.h"

static char warnings[8][512];
static int n_warnings;

static void collect(const char *msg)
{
    if (n_warnings < 8)
        snprintf(warnings[n_warnings], sizeof warnings[0], "%s", msg);
    n_warnings++;
}

static void reload(void)
{
    n_warnings = 0;
    ag_options_load(collect);
}

int main(void)
{
    size_t n;
    const ag_option_desc_t *d = ag_option_descs(&n);
    CHECK(n == AG_OPT_COUNT);
    for (size_t i = 0; i < n; i++) {
        char out[64];
        CHECK(strncmp(d[i].name, "AUTOGRAPH_", 10) == 0);
        CHECK(d[i].doc && strlen(d[i].doc) > 10);
        CHECK(ag_option_check(&d[i], d[i].def, out, sizeof out) == 0); /* defaults are valid */
    }

    /* Defaults with a clean environment. */
    for (size_t i = 0; i < n; i++)
        unsetenv(d[i].name);
    reload();
    CHECK(n_warnings == 0);
    CHECK(ag_opt(AG_OPT_LOG)->num == AG_LOG_WARN);
    CHECK(ag_opt(AG_OPT_SCOPE)->num == AG_SCOPE_ALL);
    CHECK(strcmp(ag_opt(AG_OPT_STATS)->text, "") == 0);

    /* Valid values. */
    setenv("AUTOGRAPH_LOG", "debug", 1);
    setenv("AUTOGRAPH_SCOPE", "off", 1);
    setenv("AUTOGRAPH_STATS", "/tmp/x-%p.json", 1);
    reload();
    CHECK(n_warnings == 0);
    CHECK(ag_opt(AG_OPT_LOG)->num == AG_LOG_DEBUG);
    CHECK(ag_opt(AG_OPT_SCOPE)->num == AG_SCOPE_OFF);
    CHECK(strcmp(ag_opt(AG_OPT_STATS)->text, "/tmp/x-%p.json") == 0);

    /* A malformed value: one warning naming the variable and the accepted values, then the default. */
    setenv("AUTOGRAPH_LOG", "verbose", 1);
    reload();
    CHECK(n_warnings == 1);
    CHECK(strstr(warnings[0], "AUTOGRAPH_LOG") != NULL);
    CHECK(strstr(warnings[0], "error|warn|info|debug|trace") != NULL);
    CHECK(ag_opt(AG_OPT_LOG)->num == AG_LOG_WARN);
    setenv("AUTOGRAPH_SCOPE", "", 1);
    reload();
    CHECK(n_warnings == 2);
    CHECK(ag_opt(AG_OPT_SCOPE)->num == AG_SCOPE_ALL);
    /* Prefixes of valid words are not valid. */
    setenv("AUTOGRAPH_LOG", "war", 1);
    setenv("AUTOGRAPH_SCOPE", "all", 1);
    reload();
    CHECK(n_warnings == 1);

    /* Unknown AUTOGRAPH_* names are reported (typos). */
    unsetenv("AUTOGRAPH_LOG");
    setenv("AUTOGRAPH_STAT", "x.json", 1);
    reload();
    CHECK(n_warnings == 1);
    CHECK(strstr(warnings[0], "AUTOGRAPH_STAT ") != NULL || strstr(warnings[0], "AUTOGRAPH_STAT is") != NULL);
    unsetenv("AUTOGRAPH_STAT");

    /* Integer options (none in the table yet beyond the parser): check the parser with a local desc. */
    ag_option_desc_t intd = {"AUTOGRAPH_TEST_INT", AG_OPT_INT, "2", "1..100", "test"};
    char out[32];
    CHECK(ag_option_check(&intd, "1", out, sizeof out) == 0 && strcmp(out, "1") == 0);
    CHECK(ag_option_check(&intd, "100", out, sizeof out) == 0);
    CHECK(ag_option_check(&intd, "0", out, sizeof out) != 0);
    CHECK(ag_option_check(&intd, "101", out, sizeof out) != 0);
    CHECK(ag_option_check(&intd, "5x", out, sizeof out) != 0);
    CHECK(ag_option_check(&intd, "", out, sizeof out) != 0);
    CHECK(ag_option_check(&intd, "99999999999999999999999", out, sizeof out) != 0);

    /* env.example text names every option with its default. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(ag_options_write_env_example(f) == 0);
    fclose(f);
    for (size_t i = 0; i < n; i++) {
        char line[256];
        snprintf(line, sizeof line, "\n%s=%s\n", d[i].name, d[i].def);
        CHECK(strstr(buf, line) != NULL);
    }
    free(buf);
    return CHECK_DONE();
}
