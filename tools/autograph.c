/* autograph.c: entry point of the autograph command-line tool: subcommand dispatch, the help texts,
 * and the two small subcommands (`run`, which execs a program with libautograph.so preloaded, and
 * `env`, which prints env.example from the options table). */
#define _GNU_SOURCE
#include "cli.h"
#include "options.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef AG_VERSION
#define AG_VERSION "unknown"
#endif

static const char help_main[] =
    "usage: autograph <command> [options]\n"
    "\n"
    "Replays the work a CUDA program repeats every iteration as CUDA graphs, without changing the\n"
    "program: libautograph.so is preloaded into it.\n"
    "\n"
    "commands:\n"
    "  run      run a program with libautograph.so preloaded\n"
    "  report   summarize the statistics file the library writes (AUTOGRAPH_STATS)\n"
    "  env      print env.example: every AUTOGRAPH_* setting with its default and meaning\n"
    "  doctor   check the library, the driver, the GPUs, CUPTI and the current settings\n"
    "  bench    time the bundled samples eager, under the library and as hand-written graphs\n"
    "  demo     one quick comparison: the launch_bound sample eager and under the library\n"
    "  help     this text; `autograph help <command>` or `autograph <command> --help` for one command\n";

static const char help_run[] =
    "usage: autograph run [--stats FILE] [--log LEVEL] [--scope SCOPE] [--lib PATH] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Runs PROGRAM with libautograph.so first in LD_PRELOAD (entries already there are kept). The\n"
    "program replaces this process; its exit code is the program's.\n"
    "\n"
    "  --stats FILE   write statistics as JSON to FILE at exit (sets AUTOGRAPH_STATS)\n"
    "  --log LEVEL    error|warn|info|debug|trace (sets AUTOGRAPH_LOG)\n"
    "  --scope SCOPE  what the library handles (sets AUTOGRAPH_SCOPE; see `autograph env`)\n"
    "  --lib PATH     the library to preload (default: <dir of autograph>/../lib/libautograph.so)\n"
    "\n"
    "Every other AUTOGRAPH_* variable in the environment reaches the program unchanged.\n";

static const char help_env[] =
    "usage: autograph env\n"
    "\n"
    "Prints env.example, generated from the library's options table: every AUTOGRAPH_* variable with\n"
    "its default, accepted values and meaning. `autograph env > my.env` gives an editable copy.\n";

static const char help_help[] =
    "usage: autograph help [COMMAND]\n"
    "\n"
    "Prints the list of commands, or the help of one command.\n";

int ag_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "autograph %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n(see `autograph %s --help`)\n", cmd);
    return AG_EXIT_USAGE;
}

int ag_parse_count(const char *text, long max, long *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < 1 || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

/* Flags with a value accept both "--flag VALUE" and "--flag=VALUE". */
static const char *flag_value(const char *flag, int argc, char **argv, int *i)
{
    size_t n = strlen(flag);
    if (strncmp(argv[*i], flag, n) == 0 && argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (strcmp(argv[*i], flag) != 0)
        return NULL;
    if (*i + 1 >= argc)
        return "";
    return argv[++*i];
}

static int check_option_value(const char *name, const char *value)
{
    size_t count;
    const ag_option_desc_t *d = ag_option_descs(&count);
    char canon[256];

    for (size_t i = 0; i < count; i++) {
        if (strcmp(d[i].name, name) != 0)
            continue;
        if (ag_option_check(&d[i], value, canon, sizeof(canon)) != 0)
            return ag_usage_error("run", "'%s' is not a valid value for %s (accepted: %s)", value, name,
                                  d[i].values);
        return 0;
    }
    /* An option the table does not know: the library decides. */
    return 0;
}

static int cmd_run(int argc, char **argv)
{
    const char *stats = NULL, *log = NULL, *scope = NULL, *lib = NULL;
    char libpath[PATH_MAX];
    char *preload;
    int i, rc;

    for (i = 1; i < argc; i++) {
        const char *v;
        if (strcmp(argv[i], "--") == 0) {
            i++;
            break;
        }
        if (argv[i][0] != '-')
            break;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(help_run, stdout);
            return 0;
        }
        if ((v = flag_value("--stats", argc, argv, &i)))
            stats = v;
        else if ((v = flag_value("--log", argc, argv, &i)))
            log = v;
        else if ((v = flag_value("--scope", argc, argv, &i)))
            scope = v;
        else if ((v = flag_value("--lib", argc, argv, &i)))
            lib = v;
        else
            return ag_usage_error("run", "unknown option '%s'", argv[i]);
        if (!*v)
            return ag_usage_error("run", "option '%s' needs a value", argv[i]);
    }
    if (i >= argc)
        return ag_usage_error("run", "no program given");
    if (log && (rc = check_option_value("AUTOGRAPH_LOG", log)))
        return rc;
    if (scope && (rc = check_option_value("AUTOGRAPH_SCOPE", scope)))
        return rc;
    rc = ag_find_library(lib, libpath, sizeof(libpath));
    if (rc) {
        fprintf(stderr, "autograph run: library not found: %s\n%s", libpath,
                lib ? "" : "(build it with `cmake --build build`, or name it with --lib PATH)\n");
        return 1;
    }
    preload = ag_preload_prepend(libpath, getenv("LD_PRELOAD"));
    if (!preload || setenv("LD_PRELOAD", preload, 1) != 0 || (stats && setenv("AUTOGRAPH_STATS", stats, 1)) ||
        (log && setenv("AUTOGRAPH_LOG", log, 1)) || (scope && setenv("AUTOGRAPH_SCOPE", scope, 1))) {
        fprintf(stderr, "autograph run: cannot set the environment: %s\n", strerror(errno));
        free(preload);
        return 1;
    }
    free(preload);
    execvp(argv[i], argv + i);
    rc = errno;
    fprintf(stderr, "autograph run: cannot execute %s: %s\n", argv[i], strerror(rc));
    return rc == ENOENT ? 127 : 126;
}

static int cmd_env(int argc, char **argv)
{
    if (argc > 1) {
        if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
            fputs(help_env, stdout);
            return 0;
        }
        if (argv[1][0] == '-')
            return ag_usage_error("env", "unknown option '%s'", argv[1]);
        return ag_usage_error("env", "unexpected argument '%s'", argv[1]);
    }
    int rc = ag_options_write_env_example(stdout);
    if (rc == 0 && fflush(stdout) != 0)
        rc = -errno;
    if (rc) {
        fprintf(stderr, "autograph env: cannot write: %s\n", strerror(-rc));
        return 1;
    }
    return 0;
}

typedef struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
} command_t;

static int cmd_help(int argc, char **argv);

static const command_t commands[] = {
    { "run", cmd_run, help_run },
    { "report", ag_cmd_report, ag_help_report },
    { "env", cmd_env, help_env },
    { "doctor", ag_cmd_doctor, ag_help_doctor },
    { "bench", ag_cmd_bench, ag_help_bench },
    { "demo", ag_cmd_demo, ag_help_demo },
    { "help", cmd_help, help_help },
};

static const command_t *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static int cmd_help(int argc, char **argv)
{
    if (argc < 2) {
        fputs(help_main, stdout);
        return 0;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(help_help, stdout);
        return 0;
    }
    const command_t *c = find_command(argv[1]);
    if (!c)
        return ag_usage_error("help", "unknown command '%s'", argv[1]);
    fputs(c->help, stdout);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(help_main, stderr);
        return AG_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(help_main, stdout);
        return 0;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("autograph %s\n", AG_VERSION);
        return 0;
    }
    const command_t *c = find_command(argv[1]);
    if (!c) {
        fprintf(stderr, "autograph: unknown command '%s'\n(see `autograph help`)\n", argv[1]);
        return AG_EXIT_USAGE;
    }
    return c->fn(argc - 1, argv + 1);
}
