/* doctor.c: `autograph doctor`: one line per thing the library needs (itself, the driver, a GPU,
 * CUPTI) and per AUTOGRAPH_* setting, each marked ok, warn or FAIL. Every library is loaded in a
 * child process, so a crashing constructor or driver shows up as a FAIL line, not a crash. */
#define _GNU_SOURCE
#include "cli.h"
#include "options.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

const char ag_help_doctor[] =
    "usage: autograph doctor [--lib PATH]\n"
    "\n"
    "Checks, one line each (ok / warn / FAIL): that libautograph.so exists and loads, libcuda.so.1\n"
    "loads, cuInit succeeds, the driver version, every GPU with its compute capability, whether\n"
    "libcupti can be found, and the AUTOGRAPH_* settings of this environment with their parsed values.\n"
    "\n"
    "  --lib PATH   the library to check (default: <dir of autograph>/../lib/libautograph.so)\n"
    "\n"
    "Exit code 0 when the library loads and a GPU works, 1 otherwise.\n";

static void line(const char *mark, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void line(const char *mark, const char *fmt, ...)
{
    va_list ap;
    printf("%-5s ", mark);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
}

static int check_library(const char *given)
{
    static const char *const syms[] = { "cuLaunchKernel", NULL };
    char path[PATH_MAX], msg[512];
    const char *preload = getenv("LD_PRELOAD");
    char *stripped = preload ? ag_preload_strip(preload) : NULL;
    int ok = 0;

    /* A tool that runs under the shim would measure and probe through it. */
    if (preload && (!stripped || strcmp(stripped, preload) != 0))
        line("warn", "LD_PRELOAD already holds libautograph.so; use `autograph run` to preload it for one program");
    free(stripped);
    if (ag_find_library(given, path, sizeof(path)) != 0) {
        line("FAIL", "library: %s not found%s", path, given ? "" : " (build it, or name it with --lib)");
        return 0;
    }
    int rc = ag_probe_dlopen(path, syms, msg, sizeof(msg));
    if (rc == 0) {
        line("ok", "library: %s (loads, exports cuLaunchKernel)", path);
        ok = 1;
    } else {
        line("FAIL", "library: %s: %s", path, msg);
    }
    return ok;
}

static int check_driver(void)
{
    ag_gpu_info_t info;
    int rc = ag_gpu_probe(&info);

    if (rc) {
        line("FAIL", "libcuda.so.1: cannot run the driver probe: %s", strerror(-rc));
        return 0;
    }
    if (info.probe_error[0]) {
        line("FAIL", "libcuda.so.1: %s", info.probe_error);
        return 0;
    }
    if (!info.lib_loaded) {
        line("FAIL", "libcuda.so.1: not loadable: %s", info.lib_error);
        return 0;
    }
    line("ok", "libcuda.so.1: loads");
    if (info.driver_version)
        line("ok", "driver version: %d.%d (supports CUDA up to this version)", info.driver_version / 1000,
             (info.driver_version % 1000) / 10);
    else
        line("warn", "driver version: unknown");
    if (info.init_rc != 0) {
        line("FAIL", "cuInit: %s", info.init_name);
        return 0;
    }
    line("ok", "cuInit: %s", info.init_name);
    if (info.device_count <= 0) {
        line("FAIL", "devices: none");
        return 0;
    }
    line("ok", "devices: %d", info.device_count);
    for (int i = 0; i < info.device_count && i < AG_GPU_MAX_DEVICES; i++)
        line("ok", "  device %d: %s (compute capability %d.%d)", i, info.dev[i].name[0] ? info.dev[i].name : "?",
             info.dev[i].major, info.dev[i].minor);
    if (info.device_count > AG_GPU_MAX_DEVICES)
        line("ok", "  (%d more devices not listed)", info.device_count - AG_GPU_MAX_DEVICES);
    return 1;
}

static void check_cupti(void)
{
    static const char *const syms[] = { "cuptiSubscribe", NULL };
    const char *candidates[] = {
        getenv("AUTOGRAPH_CUPTI_LIB"),
        "libcupti.so",
        "libcupti.so.13",
        "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
        "/usr/local/cuda/lib64/libcupti.so",
    };
    char msg[512], first_err[512] = "";

    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        if (!candidates[i] || !candidates[i][0])
            continue;
        if (ag_probe_dlopen(candidates[i], syms, msg, sizeof(msg)) == 0) {
            line("ok", "libcupti: %s", candidates[i]);
            return;
        }
        if (!first_err[0])
            snprintf(first_err, sizeof(first_err), "%s", msg);
    }
    line("warn", "libcupti: not found (the launch coverage guard is off without it; set AUTOGRAPH_CUPTI_LIB): %s",
         first_err);
}

static void check_settings(void)
{
    size_t count;
    const ag_option_desc_t *d = ag_option_descs(&count);
    char canon[512];

    for (size_t i = 0; i < count; i++) {
        const char *v = getenv(d[i].name);
        if (!v) {
            line("ok", "%s = %s (default)", d[i].name, d[i].def[0] ? d[i].def : "\"\"");
            continue;
        }
        if (ag_option_check(&d[i], v, canon, sizeof(canon)) == 0)
            line("ok", "%s = %s (set; parsed as %s)", d[i].name, v, canon[0] ? canon : "\"\"");
        else
            line("warn", "%s = '%s' is not valid (accepted: %s); the library uses the default %s", d[i].name, v,
                 d[i].values, d[i].def[0] ? d[i].def : "\"\"");
    }
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "AUTOGRAPH_", 10) != 0)
            continue;
        size_t n = strcspn(*e, "=");
        int known = 0;
        for (size_t i = 0; i < count && !known; i++)
            known = strlen(d[i].name) == n && strncmp(d[i].name, *e, n) == 0;
        if (!known)
            line("warn", "%.*s is not a setting the library knows (see `autograph env`)", (int)n, *e);
    }
}

int ag_cmd_doctor(int argc, char **argv)
{
    const char *lib = NULL;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(ag_help_doctor, stdout);
            return 0;
        } else if (strcmp(argv[i], "--lib") == 0) {
            if (i + 1 >= argc)
                return ag_usage_error("doctor", "--lib needs a path");
            lib = argv[++i];
        } else if (strncmp(argv[i], "--lib=", 6) == 0) {
            lib = argv[i] + 6;
        } else {
            return ag_usage_error("doctor", "unknown option '%s'", argv[i]);
        }
    }
    int lib_ok = check_library(lib);
    int gpu_ok = check_driver();
    check_cupti();
    check_settings();
    if (lib_ok && gpu_ok)
        printf("autograph doctor: ready\n");
    else
        printf("autograph doctor: not ready (%s)\n",
               !lib_ok && !gpu_ok ? "no library, no GPU" : !lib_ok ? "library missing or broken" : "no usable GPU");
    fflush(stdout);
    return lib_ok && gpu_ok ? 0 : 1;
}
