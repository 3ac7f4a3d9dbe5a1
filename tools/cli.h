/* cli.h: declarations shared between the files of the autograph command-line tool, grouped by the
 * file that owns them. The tool is single-threaded; nothing here locks. */
#ifndef AG_CLI_H
#define AG_CLI_H

#include <stddef.h>

/* What bench, demo and doctor tell a user without a GPU to run instead (the README's test command). */
#define AG_TEST_COMMAND \
    "cmake -S . -B build && cmake --build build -j4 && ctest --test-dir build --output-on-failure"
/* Exit code of bench/demo without a GPU: CTest's conventional "skipped". */
#define AG_EXIT_NO_GPU 77
/* Exit code for bad usage (unknown flag, missing argument). */
#define AG_EXIT_USAGE 2

/* ---- autograph.c: dispatch and the small subcommands ---- */
int ag_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Parses a positive integer flag value; returns 0 or -EINVAL. */
int ag_parse_count(const char *text, long max, long *out);

/* ---- proc.c: paths, environments and child processes ---- */
/* Directory holding the running executable (from /proc/self/exe). */
int ag_self_dir(char *buf, size_t len);
/* The library to preload: `given` if not NULL, else <self dir>/../lib/libautograph.so. Returns 0 with
 * the absolute path in buf, or -ENOENT with the path that was tried in buf. */
int ag_find_library(const char *given, char *buf, size_t len);
/* LD_PRELOAD value with lib first, keeping the old entries (lib is not added twice). malloc'd. */
char *ag_preload_prepend(const char *lib, const char *old);
/* LD_PRELOAD value without any entry whose file name is libautograph.so; NULL when nothing is left. */
char *ag_preload_strip(const char *old);

/* A private copy of the environment to hand to children. */
typedef struct {
    char **vars; /* NULL-terminated, each malloc'd "NAME=VALUE" */
    size_t count;
} ag_env_t;
int ag_env_init(ag_env_t *env);
/* value NULL removes the variable. */
int ag_env_set(ag_env_t *env, const char *name, const char *value);
const char *ag_env_get(const ag_env_t *env, const char *name);
void ag_env_free(ag_env_t *env);

typedef struct {
    int exited;     /* 1: exited normally with `code` */
    int code;
    int signal;     /* killed by this signal (SIGALRM: the time limit) */
    double wall_ms; /* fork to reap */
    char *out;      /* whole stdout, NUL-terminated */
    size_t out_len;
    char *err; /* whole stderr, NUL-terminated */
    size_t err_len;
} ag_child_t;
/* Runs path with argv/envp (fork + execve), stdin from /dev/null, stdout and stderr into temporary
 * files in tmpdir, killed after timeout_s seconds (0: no limit). 0 when the child ran (whatever its
 * exit status), -errno when it could not be started. */
int ag_child_run(const char *path, char *const argv[], char *const envp[], unsigned timeout_s,
                 const char *tmpdir, ag_child_t *res);
void ag_child_free(ag_child_t *res);
/* "exit code 3" / "killed by signal 11 (Segmentation fault)" / "timed out". */
void ag_child_status_text(const ag_child_t *res, char *buf, size_t len);
/* Prints the last lines of text, indented, to stderr. */
void ag_print_tail(const char *text, size_t len, int lines);
/* Runs fn(arg) in a forked child that writes at most len bytes of result to buf through a pipe;
 * protects the tool from libraries that crash or leave state behind. Returns the byte count read, or
 * -errno; *status gets the waitpid status. */
typedef void (*ag_child_fn)(void *arg, void *buf, size_t len);
long ag_in_child(ag_child_fn fn, void *arg, void *buf, size_t len, int *status);

/* ---- gpu.c: driver probe through dlopen("libcuda.so.1"), always in a child process ---- */
#define AG_GPU_MAX_DEVICES 16
typedef struct {
    int lib_loaded;         /* libcuda.so.1 could be opened */
    char lib_error[256];    /* dlerror() when it could not */
    int init_rc;            /* cuInit result (CUresult), -1 when not called */
    char init_name[64];     /* cuGetErrorName of it */
    int driver_version;     /* cuDriverGetVersion, 0 when unknown */
    int device_count;
    struct {
        char name[128];
        int major, minor;
    } dev[AG_GPU_MAX_DEVICES];
    char probe_error[128]; /* the probe itself failed (crashed) */
} ag_gpu_info_t;
int ag_gpu_probe(ag_gpu_info_t *info);
int ag_gpu_usable(const ag_gpu_info_t *info);
/* The "no CUDA GPU found ... Run the tests instead" message, on stdout. */
void ag_gpu_print_missing(const char *cmd, const ag_gpu_info_t *info);
/* dlopen(path) (+ dlsym of each name in syms, NULL-terminated) in a child. 0 when it loads and has
 * all symbols, -ENOENT when it does not load, -ENOSYS when a symbol is missing; msg says why. */
int ag_probe_dlopen(const char *path, const char *const *syms, char *msg, size_t msglen);

/* ---- subcommands (one file each, except the small ones in autograph.c) ---- */
int ag_cmd_report(int argc, char **argv);   /* report.c */
int ag_cmd_doctor(int argc, char **argv);   /* doctor.c */
int ag_cmd_bench(int argc, char **argv);    /* bench.c */
int ag_cmd_demo(int argc, char **argv);     /* bench.c */
extern const char ag_help_report[];
extern const char ag_help_doctor[];
extern const char ag_help_bench[];
extern const char ag_help_demo[];

#endif /* AG_CLI_H */
