/* proc.c: where the tool finds its library and samples, how it builds the environment of a child,
 * and how it runs children with their output captured (fork/execve, never system()). */
#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int ag_self_dir(char *buf, size_t len)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
    if (n < 0)
        return -errno;
    path[n] = '\0';
    char *slash = strrchr(path, '/');
    if (!slash)
        return -EINVAL;
    *slash = '\0';
    if ((size_t)snprintf(buf, len, "%s", path[0] ? path : "/") >= len)
        return -ENAMETOOLONG;
    return 0;
}

int ag_find_library(const char *given, char *buf, size_t len)
{
    char tried[PATH_MAX * 2];
    char real[PATH_MAX];
    int rc;

    if (given) {
        snprintf(tried, sizeof(tried), "%s", given);
    } else {
        char dir[PATH_MAX];
        rc = ag_self_dir(dir, sizeof(dir));
        if (rc)
            return rc;
        snprintf(tried, sizeof(tried), "%s/../lib/libautograph.so", dir);
    }
    /* LD_PRELOAD resolves relative paths against the child's cwd: hand it an absolute one. */
    if (!realpath(tried, real) || access(real, R_OK) != 0) {
        snprintf(buf, len, "%s", tried);
        return -ENOENT;
    }
    if ((size_t)snprintf(buf, len, "%s", real) >= len)
        return -ENAMETOOLONG;
    return 0;
}

/* LD_PRELOAD entries are separated by spaces or colons. */
static int is_sep(char c)
{
    return c == ':' || c == ' ';
}

char *ag_preload_prepend(const char *lib, const char *old)
{
    size_t liblen = strlen(lib);
    const char *s = old ? old : "";

    for (const char *p = s; *p;) {
        while (is_sep(*p))
            p++;
        const char *e = p;
        while (*e && !is_sep(*e))
            e++;
        if ((size_t)(e - p) == liblen && memcmp(p, lib, liblen) == 0)
            return strdup(s);
        p = e;
    }
    size_t n = liblen + 1 + strlen(s) + 1;
    char *out = malloc(n);
    if (!out)
        return NULL;
    if (*s)
        snprintf(out, n, "%s:%s", lib, s);
    else
        snprintf(out, n, "%s", lib);
    return out;
}

char *ag_preload_strip(const char *old)
{
    static const char me[] = "libautograph.so";
    size_t melen = sizeof(me) - 1;
    char *out;
    size_t o = 0;

    if (!old)
        return NULL;
    out = malloc(strlen(old) + 1);
    if (!out)
        return NULL;
    for (const char *p = old; *p;) {
        while (is_sep(*p))
            p++;
        const char *e = p;
        while (*e && !is_sep(*e))
            e++;
        size_t n = (size_t)(e - p);
        int mine = n >= melen && memcmp(e - melen, me, melen) == 0 && (n == melen || e[-(long)melen - 1] == '/');
        if (n && !mine) {
            if (o)
                out[o++] = ':';
            memcpy(out + o, p, n);
            o += n;
        }
        p = e;
    }
    out[o] = '\0';
    if (o == 0) {
        free(out);
        return NULL;
    }
    return out;
}

int ag_env_init(ag_env_t *env)
{
    size_t n = 0;
    env->count = 0;
    while (environ && environ[n])
        n++;
    env->vars = calloc(n + 1, sizeof(char *));
    if (!env->vars)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        env->vars[i] = strdup(environ[i]);
        if (!env->vars[i]) {
            ag_env_free(env);
            return -ENOMEM;
        }
        env->count++;
    }
    return 0;
}

static long env_find(const ag_env_t *env, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < env->count; i++)
        if (strncmp(env->vars[i], name, n) == 0 && env->vars[i][n] == '=')
            return (long)i;
    return -1;
}

const char *ag_env_get(const ag_env_t *env, const char *name)
{
    long i = env_find(env, name);
    return i < 0 ? NULL : env->vars[i] + strlen(name) + 1;
}

int ag_env_set(ag_env_t *env, const char *name, const char *value)
{
    long i = env_find(env, name);
    char *var = NULL;

    if (!value) {
        if (i >= 0) {
            free(env->vars[i]);
            env->vars[i] = env->vars[env->count - 1];
            env->vars[--env->count] = NULL;
        }
        return 0;
    }
    size_t n = strlen(name) + strlen(value) + 2;
    var = malloc(n);
    if (!var)
        return -ENOMEM;
    snprintf(var, n, "%s=%s", name, value);
    if (i >= 0) {
        free(env->vars[i]);
        env->vars[i] = var;
        return 0;
    }
    char **vars = realloc(env->vars, (env->count + 2) * sizeof(char *));
    if (!vars) {
        free(var);
        return -ENOMEM;
    }
    env->vars = vars;
    env->vars[env->count++] = var;
    env->vars[env->count] = NULL;
    return 0;
}

void ag_env_free(ag_env_t *env)
{
    for (size_t i = 0; env->vars && i < env->count; i++)
        free(env->vars[i]);
    free(env->vars);
    env->vars = NULL;
    env->count = 0;
}

static int read_fd(int fd, char **out, size_t *outlen)
{
    struct stat st;
    char *buf;
    size_t len = 0, cap;

    if (fstat(fd, &st) != 0)
        return -errno;
    cap = (size_t)st.st_size + 1;
    buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    if (lseek(fd, 0, SEEK_SET) < 0) {
        free(buf);
        return -errno;
    }
    for (;;) {
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                return -ENOMEM;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t got = read(fd, buf + len, cap - len - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int e = -errno;
            free(buf);
            return e;
        }
        if (got == 0)
            break;
        len += (size_t)got;
    }
    buf[len] = '\0';
    *out = buf;
    *outlen = len;
    return 0;
}

static int temp_fd(const char *tmpdir, const char *tag)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s-XXXXXX", tmpdir, tag);
    int fd = mkstemp(path);
    if (fd < 0)
        return -errno;
    /* Only the descriptor is needed; the name would only be left behind on a crash. */
    unlink(path);
    return fd;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int ag_child_run(const char *path, char *const argv[], char *const envp[], unsigned timeout_s,
                 const char *tmpdir, ag_child_t *res)
{
    int out_fd = -1, err_fd = -1, rc, status;
    pid_t pid;
    double t0;

    memset(res, 0, sizeof(*res));
    out_fd = temp_fd(tmpdir, "stdout");
    if (out_fd < 0) {
        rc = out_fd;
        goto out;
    }
    err_fd = temp_fd(tmpdir, "stderr");
    if (err_fd < 0) {
        rc = err_fd;
        goto out;
    }
    fflush(NULL);
    t0 = now_ms();
    pid = fork();
    if (pid < 0) {
        rc = -errno;
        goto out;
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        /* The alarm survives execve: a hung sample is killed by SIGALRM without a watcher. */
        if (timeout_s)
            alarm(timeout_s);
        execve(path, argv, envp);
        dprintf(2, "autograph: cannot execute %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            rc = -errno;
            goto out;
        }
    }
    res->wall_ms = now_ms() - t0;
    if (WIFEXITED(status)) {
        res->exited = 1;
        res->code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        res->signal = WTERMSIG(status);
    }
    rc = read_fd(out_fd, &res->out, &res->out_len);
    if (rc)
        goto out;
    rc = read_fd(err_fd, &res->err, &res->err_len);
out:
    if (out_fd >= 0)
        close(out_fd);
    if (err_fd >= 0)
        close(err_fd);
    if (rc)
        ag_child_free(res);
    return rc;
}

void ag_child_free(ag_child_t *res)
{
    free(res->out);
    free(res->err);
    res->out = res->err = NULL;
    res->out_len = res->err_len = 0;
}

void ag_child_status_text(const ag_child_t *res, char *buf, size_t len)
{
    if (res->exited)
        snprintf(buf, len, "exit code %d", res->code);
    else if (res->signal == SIGALRM)
        snprintf(buf, len, "timed out (killed by SIGALRM)");
    else
        snprintf(buf, len, "killed by signal %d (%s)", res->signal, strsignal(res->signal));
}

void ag_print_tail(const char *text, size_t len, int lines)
{
    size_t start = len;
    int seen = 0;

    while (len && text[len - 1] == '\n')
        len--;
    start = len;
    while (start > 0) {
        if (text[start - 1] == '\n' && ++seen == lines)
            break;
        start--;
    }
    if (len == 0) {
        fprintf(stderr, "    (stderr is empty)\n");
        return;
    }
    for (size_t i = start; i < len;) {
        size_t e = i;
        while (e < len && text[e] != '\n')
            e++;
        fprintf(stderr, "    | %.*s\n", (int)(e - i), text + i);
        i = e + 1;
    }
}

long ag_in_child(ag_child_fn fn, void *arg, void *buf, size_t len, int *status)
{
    int fds[2];
    pid_t pid;
    size_t got = 0;
    long rc = 0;

    if (pipe(fds) != 0)
        return -errno;
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        rc = -errno;
        close(fds[0]);
        close(fds[1]);
        return rc;
    }
    if (pid == 0) {
        close(fds[0]);
        /* The child's result goes through the pipe only; keep whatever it loads quiet on stdout. */
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 1);
        fn(arg, buf, len);
        size_t off = 0;
        while (off < len) {
            ssize_t w = write(fds[1], (char *)buf + off, len - off);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
        _exit(0);
    }
    close(fds[1]);
    while (got < len) {
        ssize_t r = read(fds[0], (char *)buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fds[0]);
    while (waitpid(pid, status, 0) < 0) {
        if (errno != EINTR)
            return -errno;
    }
    return (long)got;
}
