/* gpu.c: asks the CUDA driver (dlopen'ed, never linked) whether there is a usable GPU, and checks that
 * shared libraries load. Both run in a forked child so that a broken driver or a library constructor
 * cannot crash the tool or leave driver state in the process that later forks the benchmarks. */
#define _GNU_SOURCE
#include "cli.h"

#include <cuda.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

typedef CUresult (*init_fn)(unsigned int);
typedef CUresult (*int_out_fn)(int *);
typedef CUresult (*dev_get_fn)(CUdevice *, int);
typedef CUresult (*dev_name_fn)(char *, int, CUdevice);
typedef CUresult (*dev_attr_fn)(int *, CUdevice_attribute, CUdevice);
typedef CUresult (*err_name_fn)(CUresult, const char **);

static void probe_child(void *arg, void *buf, size_t len)
{
    ag_gpu_info_t *info = buf;
    void *h;
    (void)arg;
    (void)len;

    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(info->lib_error, sizeof(info->lib_error), "%s", e ? e : "unknown dlopen error");
        return;
    }
    info->lib_loaded = 1;
    init_fn cu_init = (init_fn)dlsym(h, "cuInit");
    int_out_fn cu_version = (int_out_fn)dlsym(h, "cuDriverGetVersion");
    int_out_fn cu_count = (int_out_fn)dlsym(h, "cuDeviceGetCount");
    dev_get_fn cu_dev = (dev_get_fn)dlsym(h, "cuDeviceGet");
    dev_name_fn cu_name = (dev_name_fn)dlsym(h, "cuDeviceGetName");
    dev_attr_fn cu_attr = (dev_attr_fn)dlsym(h, "cuDeviceGetAttribute");
    err_name_fn cu_errname = (err_name_fn)dlsym(h, "cuGetErrorName");
    if (!cu_init || !cu_count) {
        snprintf(info->lib_error, sizeof(info->lib_error), "libcuda.so.1 lacks cuInit or cuDeviceGetCount");
        info->lib_loaded = 0;
        return;
    }
    if (cu_version)
        cu_version(&info->driver_version);
    CUresult rc = cu_init(0);
    const char *name = NULL;
    info->init_rc = (int)rc;
    if (!cu_errname || cu_errname(rc, &name) != CUDA_SUCCESS || !name)
        name = NULL;
    if (name)
        snprintf(info->init_name, sizeof(info->init_name), "%s", name);
    else
        snprintf(info->init_name, sizeof(info->init_name), "CUresult %d", (int)rc);
    if (rc != CUDA_SUCCESS)
        return;
    int count = 0;
    if (cu_count(&count) != CUDA_SUCCESS)
        count = 0;
    info->device_count = count;
    for (int i = 0; i < count && i < AG_GPU_MAX_DEVICES; i++) {
        CUdevice d;
        if (!cu_dev || cu_dev(&d, i) != CUDA_SUCCESS)
            continue;
        if (cu_name)
            cu_name(info->dev[i].name, (int)sizeof(info->dev[i].name), d);
        if (cu_attr) {
            cu_attr(&info->dev[i].major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d);
            cu_attr(&info->dev[i].minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d);
        }
    }
}

int ag_gpu_probe(ag_gpu_info_t *info)
{
    int status = 0;
    long got;

    memset(info, 0, sizeof(*info));
    info->init_rc = -1;
    got = ag_in_child(probe_child, NULL, info, sizeof(*info), &status);
    if (got < 0)
        return (int)got;
    if (got != (long)sizeof(*info)) {
        memset(info, 0, sizeof(*info));
        info->init_rc = -1;
        if (WIFSIGNALED(status))
            snprintf(info->probe_error, sizeof(info->probe_error), "the driver probe was killed by signal %d (%s)",
                     WTERMSIG(status), strsignal(WTERMSIG(status)));
        else
            snprintf(info->probe_error, sizeof(info->probe_error), "the driver probe exited early");
    }
    info->lib_error[sizeof(info->lib_error) - 1] = '\0';
    info->init_name[sizeof(info->init_name) - 1] = '\0';
    for (int i = 0; i < AG_GPU_MAX_DEVICES; i++)
        info->dev[i].name[sizeof(info->dev[i].name) - 1] = '\0';
    return 0;
}

int ag_gpu_usable(const ag_gpu_info_t *info)
{
    return info->lib_loaded && info->init_rc == CUDA_SUCCESS && info->device_count > 0;
}

void ag_gpu_print_missing(const char *cmd, const ag_gpu_info_t *info)
{
    char why[400];
    if (info->probe_error[0])
        snprintf(why, sizeof(why), "%s", info->probe_error);
    else if (!info->lib_loaded)
        snprintf(why, sizeof(why), "cuInit: not called, libcuda.so.1 cannot be loaded: %s", info->lib_error);
    else if (info->init_rc != CUDA_SUCCESS)
        snprintf(why, sizeof(why), "cuInit: %s", info->init_name);
    else
        snprintf(why, sizeof(why), "cuInit: %s, but 0 devices", info->init_name);
    printf("autograph %s: no CUDA GPU found (%s). Run the tests instead: %s\n", cmd, why, AG_TEST_COMMAND);
    fflush(stdout);
}

typedef struct {
    const char *path;
    const char *const *syms;
} dl_arg_t;

typedef struct {
    int rc;
    char msg[512];
} dl_result_t;

static void dlopen_child(void *arg, void *buf, size_t len)
{
    const dl_arg_t *a = arg;
    dl_result_t *r = buf;
    (void)len;

    void *h = dlopen(a->path, RTLD_LAZY | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        r->rc = -ENOENT;
        snprintf(r->msg, sizeof(r->msg), "%s", e ? e : "dlopen failed");
        return;
    }
    for (const char *const *s = a->syms; s && *s; s++) {
        if (!dlsym(h, *s)) {
            r->rc = -ENOSYS;
            snprintf(r->msg, sizeof(r->msg), "does not export %s", *s);
            return;
        }
    }
    r->rc = 0;
    snprintf(r->msg, sizeof(r->msg), "loads");
}

int ag_probe_dlopen(const char *path, const char *const *syms, char *msg, size_t msglen)
{
    dl_arg_t a = { path, syms };
    dl_result_t r;
    int status = 0;
    long got;

    memset(&r, 0, sizeof(r));
    got = ag_in_child(dlopen_child, &a, &r, sizeof(r), &status);
    if (got < 0) {
        snprintf(msg, msglen, "cannot fork a probe: %s", strerror((int)-got));
        return (int)got;
    }
    if (got != (long)sizeof(r)) {
        if (WIFSIGNALED(status))
            snprintf(msg, msglen, "loading it killed the probe with signal %d (%s)", WTERMSIG(status),
                     strsignal(WTERMSIG(status)));
        else
            snprintf(msg, msglen, "loading it ended the probe (exit status %d)",
                     WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return -ENOENT;
    }
    r.msg[sizeof(r.msg) - 1] = '\0';
    snprintf(msg, msglen, "%s", r.msg);
    return r.rc;
}
