/* route_prog: a fixed CUDA driver workload whose entry points are obtained through one route (--route):
 * calls by name, dlsym in its variants, or cuGetProcAddress in its variants. It prints the driver's
 * answers to error probes, the result's checksum and the exact number of calls it made to each ABI entry
 * point, so that routes.sh can compare a plain run with a run under the shim and with its statistics.
 * Built twice: route_prog_direct (linked against libcuda, route `direct` only) and route_prog (not
 * linked against libcuda: every other route). */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fakecuda.h"
#include "route_prog.h"

#define RP_PT_NONE 0
#define RP_PT_DS 1 /* per-thread twin ends in _ptds */
#define RP_PT_SZ 2 /* per-thread twin ends in _ptsz */

/* Every entry point the workload calls, by API name (cuda.h maps it to the ABI symbol), with the kind of
 * its per-thread-default-stream twin. cuGetProcAddress(_v2) is handled apart: it is also the route. */
#define RP_ENTRIES(E)                                                                                      \
    E(cuInit, RP_PT_NONE)                                                                                 \
    E(cuDeviceGet, RP_PT_NONE)                                                                            \
    E(cuDevicePrimaryCtxRetain, RP_PT_NONE)                                                               \
    E(cuDevicePrimaryCtxRelease, RP_PT_NONE)                                                              \
    E(cuCtxSetCurrent, RP_PT_NONE)                                                                        \
    E(cuCtxSynchronize, RP_PT_NONE)                                                                       \
    E(cuModuleLoadData, RP_PT_NONE)                                                                       \
    E(cuModuleGetFunction, RP_PT_NONE)                                                                    \
    E(cuModuleUnload, RP_PT_NONE)                                                                         \
    E(cuLibraryLoadData, RP_PT_NONE)                                                                      \
    E(cuLibraryGetKernel, RP_PT_NONE)                                                                     \
    E(cuLibraryUnload, RP_PT_NONE)                                                                        \
    E(cuMemAlloc, RP_PT_NONE)                                                                             \
    E(cuMemFree, RP_PT_NONE)                                                                              \
    E(cuMemAllocHost, RP_PT_NONE)                                                                         \
    E(cuMemFreeHost, RP_PT_NONE)                                                                          \
    E(cuMemcpyHtoD, RP_PT_DS)                                                                             \
    E(cuMemcpyDtoH, RP_PT_DS)                                                                             \
    E(cuMemcpyDtoD, RP_PT_DS)                                                                             \
    E(cuMemcpyHtoDAsync, RP_PT_SZ)                                                                        \
    E(cuMemcpyDtoHAsync, RP_PT_SZ)                                                                        \
    E(cuMemsetD8, RP_PT_DS)                                                                               \
    E(cuMemsetD32, RP_PT_DS)                                                                              \
    E(cuMemsetD32Async, RP_PT_SZ)                                                                         \
    E(cuStreamCreate, RP_PT_NONE)                                                                         \
    E(cuStreamDestroy, RP_PT_NONE)                                                                        \
    E(cuStreamSynchronize, RP_PT_SZ)                                                                      \
    E(cuStreamQuery, RP_PT_SZ)                                                                            \
    E(cuStreamWaitEvent, RP_PT_SZ)                                                                        \
    E(cuEventCreate, RP_PT_NONE)                                                                          \
    E(cuEventRecord, RP_PT_SZ)                                                                            \
    E(cuEventQuery, RP_PT_NONE)                                                                           \
    E(cuEventSynchronize, RP_PT_NONE)                                                                     \
    E(cuEventDestroy, RP_PT_NONE)                                                                         \
    E(cuLaunchKernel, RP_PT_SZ)                                                                           \
    E(cuLaunchKernelEx, RP_PT_SZ)

#define RP_STR_(x) #x
#define RP_STR(x) RP_STR_(x)

enum {
#define RP_ENUM(name, pt) RP_##name,
    RP_ENTRIES(RP_ENUM)
#undef RP_ENUM
    RP_N,
    RP_PROC_V2 = RP_N, /* cuGetProcAddress_v2 */
    RP_PROC_V1,        /* cuGetProcAddress (4 arguments) */
    RP_N_ALL
};

static const struct {
    const char *api, *abi;
    int pt;
} rp_ent[RP_N] = {
#define RP_DESC(name, pt) {#name, RP_STR(name), pt},
    RP_ENTRIES(RP_DESC)
#undef RP_DESC
};

/* The ABI name each counter stands for on this route (the per-thread twin on procaddr-ptsz). */
static char rp_abi[RP_N_ALL][64];
static atomic_ulong rp_calls[RP_N_ALL];

static void rp_count(int i)
{
    atomic_fetch_add_explicit(&rp_calls[i], 1, memory_order_relaxed);
}

#ifdef RP_DIRECT
/* Real link-time binding: a call by name, bound by the loader through the PLT. */
#define CALL(name, ...) (rp_count(RP_##name), name(__VA_ARGS__))
#else
static struct {
#define RP_FIELD(name, pt) __typeof__(name) *name;
    RP_ENTRIES(RP_FIELD)
#undef RP_FIELD
} rp_fn;

static void rp_set(int i, void *p)
{
    switch (i) {
#define RP_SET(name, pt)                                                                                   \
    case RP_##name:                                                                                        \
        memcpy(&rp_fn.name, &p, sizeof p);                                                                 \
        break;
        RP_ENTRIES(RP_SET)
#undef RP_SET
    }
}
#define CALL(name, ...) (rp_count(RP_##name), rp_fn.name(__VA_ARGS__))
#endif

typedef CUresult(CUDAAPI *rp_proc_v2_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult(CUDAAPI *rp_proc_v1_t)(const char *, void **, int, cuuint64_t);
typedef int (*rp_register_t)(const char *, fakecuda_kernel_fn, unsigned, const size_t *);

#ifndef RP_DIRECT
static rp_proc_v2_t rp_proc_v2;
#endif
static rp_proc_v1_t rp_proc_v1; /* set only on procaddr-old: then every query goes through v1 */
static int failures;

/* Reports a failure on stderr (the shim's tests compare stdout); returns 1 for `return rp_fail(...)`. */
__attribute__((format(printf, 1, 2))) static int rp_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("route_prog: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    failures++;
    return 1;
}
#define RP_FAIL(...) rp_fail(__VA_ARGS__)
#define OK(x)                                                                                              \
    do {                                                                                                   \
        CUresult r_ = (x);                                                                                 \
        if (r_ != CUDA_SUCCESS)                                                                            \
            RP_FAIL("%s:%d: %s returned %d", __FILE__, __LINE__, #x, (int)r_);                            \
    } while (0)

/* One query through this route's resolver, counted. status is left untouched on the v1 form. */
static CUresult rp_proc(const char *sym, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st)
{
    if (rp_proc_v1) {
        rp_count(RP_PROC_V1);
        return rp_proc_v1(sym, pfn, ver, flags);
    }
    rp_count(RP_PROC_V2);
#ifdef RP_DIRECT
    return cuGetProcAddress(sym, pfn, ver, flags, st); /* cuda.h: cuGetProcAddress_v2 */
#else
    return rp_proc_v2(sym, pfn, ver, flags, st);
#endif
}

static const char *rp_symname(void *p)
{
    Dl_info di;
    if (!p)
        return "null";
    if (!dladdr(p, &di) || !di.dli_sname)
        return "?";
    return di.dli_sname;
}

/* ---- kernels (C functions registered with fakecuda) ---- */
#define RP_PTR(a) ((uint32_t *)(uintptr_t) * (CUdeviceptr *)(a))

/* y[i] = a * x[i] + y[i] */
static void k_saxpy(void **a, const fakecuda_dims_t *d)
{
    (void)d;
    uint32_t *y = RP_PTR(a[0]);
    const uint32_t *x = RP_PTR(a[1]);
    uint32_t k = *(uint32_t *)a[2], n = *(uint32_t *)a[3];
    for (uint32_t i = 0; i < n; i++)
        y[i] = k * x[i] + y[i];
}

/* dst[i] = src[i] * k */
static void k_scale(void **a, const fakecuda_dims_t *d)
{
    (void)d;
    uint32_t *dst = RP_PTR(a[0]);
    const uint32_t *src = RP_PTR(a[1]);
    uint32_t k = *(uint32_t *)a[2], n = *(uint32_t *)a[3];
    for (uint32_t i = 0; i < n; i++)
        dst[i] = src[i] * k;
}

/* p[i] += v */
static void k_add(void **a, const fakecuda_dims_t *d)
{
    (void)d;
    uint32_t *p = RP_PTR(a[0]);
    uint32_t v = *(uint32_t *)a[1], n = *(uint32_t *)a[2];
    for (uint32_t i = 0; i < n; i++)
        p[i] += v;
}

/* ---- routes ---- */
static const char *const rp_routes[] = {"direct", "dlsym", "dlsym-default", "dlsym-old", "procaddr-v2",
                                        "procaddr-old", "procaddr-ptsz", "procaddr-self", "runtime-like"};

static int rp_is(const char *route, const char *name)
{
    return strcmp(route, name) == 0;
}

#ifndef RP_DIRECT
/* Fills rp_fn through dlsym-like `look` on `h`, by ABI name. */
static int rp_resolve_dlsym(void *(*look)(void *, const char *), void *h)
{
    for (int i = 0; i < RP_N; i++) {
        void *p = look(h, rp_ent[i].abi);
        if (!p) {
            RP_FAIL("dlsym(%s) failed", rp_ent[i].abi);
            return -1;
        }
        rp_set(i, p);
    }
    return 0;
}

/* Fills rp_fn through the route's cuGetProcAddress, by API name, and checks that each answer is the
 * entry point of the expected ABI (for the shim: its hook of that name). */
static int rp_resolve_proc(int ver, cuuint64_t flags)
{
    for (int i = 0; i < RP_N; i++) {
        void *p = NULL;
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
        CUresult r = rp_proc(rp_ent[i].api, &p, ver, flags, &st);
        if (r != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS || !p) {
            RP_FAIL("cuGetProcAddress(%s, %d, %llu) = %d, status %d", rp_ent[i].api, ver,
                    (unsigned long long)flags, (int)r, (int)st);
            return -1;
        }
        if (strcmp(rp_symname(p), rp_abi[i]) != 0) {
            RP_FAIL("cuGetProcAddress(%s) gave %s, expected %s", rp_ent[i].api, rp_symname(p), rp_abi[i]);
            return -1;
        }
        rp_set(i, p);
    }
    return 0;
}
#endif

/* Binds the entry points for `route`; *reg receives fakecuda_register_kernel. */
static int rp_bind(const char *route, rp_register_t *reg)
{
    for (int i = 0; i < RP_N; i++)
        snprintf(rp_abi[i], sizeof rp_abi[i], "%s", rp_ent[i].abi);
    snprintf(rp_abi[RP_PROC_V2], sizeof rp_abi[0], "cuGetProcAddress_v2");
    snprintf(rp_abi[RP_PROC_V1], sizeof rp_abi[0], "cuGetProcAddress");
#ifdef RP_DIRECT
    if (!rp_is(route, "direct")) {
        fprintf(stderr, "route_prog_direct: only --route direct (use route_prog for %s)\n", route);
        return 2;
    }
    *reg = fakecuda_register_kernel;
    return 0;
#else
    if (rp_is(route, "direct")) {
        fprintf(stderr, "route_prog: --route direct needs route_prog_direct (linked against libcuda)\n");
        return 2;
    }
    if (rp_is(route, "dlsym-old") && !rp_have_dlsym_old()) {
        fprintf(stderr, "route_prog: no dlsym@GLIBC_2.2.5 on this platform\n");
        return 77;
    }
    int global = rp_is(route, "dlsym-default");
    void *h = dlopen("libcuda.so.1", RTLD_NOW | (global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (!h) {
        fprintf(stderr, "route_prog: dlopen(libcuda.so.1): %s\n", dlerror());
        return 1;
    }
    void *(*look)(void *, const char *) = dlsym;
    void *lh = h;
    if (global)
        lh = RTLD_DEFAULT;
    else if (rp_is(route, "dlsym-old"))
        look = rp_dlsym_old;
    *reg = (rp_register_t)look(lh, "fakecuda_register_kernel");
    if (!*reg) {
        fprintf(stderr, "route_prog: fakecuda_register_kernel not found: libcuda.so.1 is not fakecuda\n");
        return 1;
    }

    if (rp_is(route, "dlsym") || global || rp_is(route, "dlsym-old")) {
        void *p = look(lh, "cuGetProcAddress_v2");
        memcpy(&rp_proc_v2, &p, sizeof p);
        if (!p)
            return rp_fail("dlsym(cuGetProcAddress_v2) failed");
        return rp_resolve_dlsym(look, lh) ? 1 : 0;
    }
    if (rp_is(route, "procaddr-old")) {
        void *p = dlsym(h, "cuGetProcAddress");
        memcpy(&rp_proc_v1, &p, sizeof p);
        if (!p)
            return rp_fail("dlsym(cuGetProcAddress) failed");
        /* CUDA 12.0 is the oldest version at which every entry point used here has its current ABI. */
        return rp_resolve_proc(12000, CU_GET_PROC_ADDRESS_DEFAULT) ? 1 : 0;
    }
    void *p = dlsym(h, "cuGetProcAddress_v2");
    memcpy(&rp_proc_v2, &p, sizeof p);
    if (!p)
        return rp_fail("dlsym(cuGetProcAddress_v2) failed");
    if (rp_is(route, "procaddr-v2") || rp_is(route, "runtime-like"))
        return rp_resolve_proc(13000, CU_GET_PROC_ADDRESS_DEFAULT) ? 1 : 0;
    if (rp_is(route, "procaddr-ptsz")) {
        for (int i = 0; i < RP_N; i++)
            if (rp_ent[i].pt != RP_PT_NONE)
                snprintf(rp_abi[i], sizeof rp_abi[i], "%s%s", rp_ent[i].abi,
                         rp_ent[i].pt == RP_PT_DS ? "_ptds" : "_ptsz");
        return rp_resolve_proc(13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ? 1 : 0;
    }
    if (rp_is(route, "procaddr-self")) {
        /* The driver hands out its own resolver; from then on every query goes through that pointer. */
        void *self = NULL;
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CUresult r = rp_proc("cuGetProcAddress", &self, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st);
        if (r != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS || !self)
            return rp_fail("cuGetProcAddress(cuGetProcAddress) = %d, status %d", (int)r, (int)st);
        if (strcmp(rp_symname(self), "cuGetProcAddress_v2") != 0)
            return rp_fail("cuGetProcAddress(cuGetProcAddress) gave %s", rp_symname(self));
        memcpy(&rp_proc_v2, &self, sizeof self);
        return rp_resolve_proc(13000, CU_GET_PROC_ADDRESS_DEFAULT) ? 1 : 0;
    }
    fprintf(stderr, "route_prog: unknown route %s\n", route);
    return 2;
#endif
}

/* ---- probes: answers that must be the same with and without the shim ---- */
static void rp_probe(const char *what, const char *sym, int ver, cuuint64_t flags)
{
    void *p = (void *)&failures; /* sentinel: shows whether the driver wrote *pfn */
    CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)77;
    CUresult r = rp_proc(sym, &p, ver, flags, &st);
    printf("probe %s rc=%d status=%d pfn=%s\n", what, (int)r, rp_proc_v1 ? -1 : (int)st,
           p == (void *)&failures ? "untouched" : rp_symname(p));
}

static void rp_probes(void)
{
    rp_probe("unknown", "cuNoSuchEntryPoint", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
    rp_probe("too-old", "cuLaunchKernelEx", 11000, CU_GET_PROC_ADDRESS_DEFAULT);
    rp_probe("no-abi", "cuMemcpyHtoD", 3000, CU_GET_PROC_ADDRESS_DEFAULT);
    rp_probe("capture@10000", "cuStreamBeginCapture", 10000, CU_GET_PROC_ADDRESS_DEFAULT);
    rp_probe("capture@10010", "cuStreamBeginCapture", 10010, CU_GET_PROC_ADDRESS_DEFAULT);
    rp_probe("capture@13000-pt", "cuStreamBeginCapture", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    rp_probe("elapsed@12000", "cuEventElapsedTime", 12000, CU_GET_PROC_ADDRESS_DEFAULT);
    rp_probe("elapsed@13000", "cuEventElapsedTime", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
    rp_probe("procaddr@11030", "cuGetProcAddress", 11030, CU_GET_PROC_ADDRESS_DEFAULT);
    rp_probe("procaddr@13000", "cuGetProcAddress", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
    rp_probe("launch-legacy", "cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM);
    rp_probe("launch-pt", "cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    rp_probe("unhooked", "cuDeviceGet", 13000, CU_GET_PROC_ADDRESS_DEFAULT);
    rp_probe("bad-flags", "cuLaunchKernel", 13000, 99);
}

/* ---- the workload ---- */
#define N 256u
#define RP_THREADS 2
#define RP_THREAD_LAUNCHES 40

static CUcontext ctx;
static CUfunction f_saxpy, f_scale, f_add;
static CUdeviceptr d_acc;

static void *rp_thread(void *arg)
{
    uint32_t t = (uint32_t)(uintptr_t)arg, n = N;
    OK(CALL(cuCtxSetCurrent, ctx));
    for (uint32_t j = 0; j < RP_THREAD_LAUNCHES; j++) {
        uint32_t v = t * 1000u + j;
        void *args[] = {&d_acc, &v, &n};
        OK(CALL(cuLaunchKernel, f_add, 1, 1, 1, 32, 1, 1, 0, NULL, args, NULL));
    }
    return NULL;
}

static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(rp_abi[*(const int *)a], rp_abi[*(const int *)b]);
}

int main(int argc, char **argv)
{
    const char *route = NULL;
    int do_fork = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--route") == 0 && i + 1 < argc)
            route = argv[++i];
        else if (strcmp(argv[i], "--fork") == 0)
            do_fork = 1;
        else
            route = NULL, i = argc;
    }
    int known = 0;
    for (size_t i = 0; route && i < sizeof rp_routes / sizeof rp_routes[0]; i++)
        known |= rp_is(route, rp_routes[i]);
    if (!known) {
        fprintf(stderr, "usage: %s --route ROUTE [--fork]; routes: direct (route_prog_direct only), dlsym, "
                        "dlsym-default, dlsym-old, procaddr-v2, procaddr-old, procaddr-ptsz, procaddr-self, "
                        "runtime-like\n", argv[0]);
        return 2;
    }
    rp_register_t reg = NULL;
    int rc = rp_bind(route, &reg);
    if (rc)
        return rc;
    static const size_t sz_saxpy[] = {8, 8, 4, 4}, sz_add[] = {8, 4, 4};
    if (reg("rp_saxpy", k_saxpy, 4, sz_saxpy) || reg("rp_scale", k_scale, 4, sz_saxpy) ||
        reg("rp_add", k_add, 3, sz_add)) {
        fprintf(stderr, "route_prog: fakecuda_register_kernel failed\n");
        return 1;
    }
    printf("route %s\n", route);

    /* The resolver answers before cuInit, as the runtime relies on. */
    rp_probes();

    CUdevice dev;
    CUmodule mod;
    CUlibrary lib;
    CUkernel k_scale_lib;
    CUstream s;
    CUevent e;
    CUdeviceptr dx, dy, dz, dw;
    uint32_t *pinned = NULL;
    OK(CALL(cuInit, 0));
    OK(CALL(cuDeviceGet, &dev, 0));
    OK(CALL(cuDevicePrimaryCtxRetain, &ctx, dev));
    OK(CALL(cuCtxSetCurrent, ctx));
    OK(CALL(cuModuleLoadData, &mod, "fakecuda-module routes"));
    OK(CALL(cuModuleGetFunction, &f_saxpy, mod, "rp_saxpy"));
    OK(CALL(cuModuleGetFunction, &f_scale, mod, "rp_scale"));
    OK(CALL(cuModuleGetFunction, &f_add, mod, "rp_add"));
    OK(CALL(cuLibraryLoadData, &lib, "fakecuda-module routes-library", NULL, NULL, 0, NULL, NULL, 0));
    OK(CALL(cuLibraryGetKernel, &k_scale_lib, lib, "rp_scale"));
    OK(CALL(cuMemAlloc, &dx, N * 4));
    OK(CALL(cuMemAlloc, &dy, N * 4));
    OK(CALL(cuMemAlloc, &dz, N * 4));
    OK(CALL(cuMemAlloc, &dw, N * 4));
    OK(CALL(cuMemAllocHost, (void **)&pinned, N * 4));
    OK(CALL(cuStreamCreate, &s, 0));
    OK(CALL(cuEventCreate, &e, 0));
    if (failures || !pinned)
        return 1;

    uint32_t hx[N], hy[N], rx[N], ry[N], rz[N], rw[N], out_w[N], out_y[N], out_z[N];
    uint32_t n = N, a3 = 3, a2 = 2, a1 = 1, k5 = 5, k7 = 7;
    for (uint32_t i = 0; i < N; i++) {
        hx[i] = i * 7u + 3u;
        hy[i] = i ^ 0x55u;
        pinned[i] = hy[i];
    }
    /* Host reference of the device sequence below. */
    for (uint32_t i = 0; i < N; i++) {
        rx[i] = hx[i];
        ry[i] = 3u * rx[i] + hy[i];
        rz[i] = 2u * rx[i] + ry[i] * 5u;
        rw[i] = 9u;
        ry[i] = rz[i] * 7u;
        ry[i] = 1u * rw[i] + ry[i];
        rw[i] = ry[i];
        ry[i] = 0xA5A5A5A5u;
    }

    OK(CALL(cuMemcpyHtoD, dx, hx, sizeof hx));
    OK(CALL(cuMemsetD8, dz, 0x11, N * 4));
    OK(CALL(cuMemsetD32, dy, 1, N));
    OK(CALL(cuMemcpyHtoDAsync, dy, pinned, N * 4, s)); /* from pinned memory: read when it runs */

    /* 1: kernelParams on s. */
    void *args1[] = {&dy, &dx, &a3, &n};
    OK(CALL(cuLaunchKernel, f_saxpy, 1, 1, 1, 32, 1, 1, 0, s, args1, NULL));
    if (do_fork) {
        fflush(stdout);
        fflush(stderr);
        pid_t pid = fork();
        if (pid == 0)
            exit(0); /* nothing CUDA-related in the child */
        int status = 0;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            RP_FAIL("fork/child failed");
        fprintf(stderr, "route_prog: parent %d child %d\n", (int)getpid(), (int)pid);
    }
    OK(CALL(cuEventRecord, e, s));
    OK(CALL(cuStreamWaitEvent, NULL, e, 0));

    /* 2: extra (a packed argument buffer) on the default stream: dz = dy * 5. */
    struct {
        CUdeviceptr dst, src;
        uint32_t k, n;
    } packed = {dz, dy, k5, N};
    size_t packed_size = sizeof packed;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &packed_size,
                     CU_LAUNCH_PARAM_END};
    OK(CALL(cuLaunchKernel, f_scale, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, extra));
    OK(CALL(cuEventRecord, e, NULL));
    OK(CALL(cuStreamWaitEvent, s, e, 0));

    /* 3: cuLaunchKernelEx with an attribute on s: dz = 2 * dx + dz. */
    CUlaunchAttribute attr;
    memset(&attr, 0, sizeof attr);
    attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    attr.value.priority = 0;
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 32;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
    void *args3[] = {&dz, &dx, &a2, &n};
    OK(CALL(cuLaunchKernelEx, &cfg, f_saxpy, args3, NULL));

    /* 4: a CUkernel (context-independent loading, as the runtime does) through cuLaunchKernel: dy = dz * 7. */
    OK(CALL(cuMemsetD32Async, dw, 9, N, s));
    void *args4[] = {&dy, &dz, &k7, &n};
    OK(CALL(cuLaunchKernel, (CUfunction)k_scale_lib, 1, 1, 1, 32, 1, 1, 0, s, args4, NULL));
    /* 5: dy = dw + dy */
    void *args5[] = {&dy, &dw, &a1, &n};
    OK(CALL(cuLaunchKernel, f_saxpy, 1, 1, 1, 32, 1, 1, 0, s, args5, NULL));
    printf("query stream=%d\n", (int)CALL(cuStreamQuery, s));
    OK(CALL(cuStreamSynchronize, s));

    OK(CALL(cuMemcpyDtoD, dw, dy, N * 4));
    OK(CALL(cuMemsetD32, dy, 0xA5A5A5A5u, N));
    OK(CALL(cuMemcpyDtoHAsync, pinned, dz, N * 4, s));
    OK(CALL(cuEventRecord, e, s));
    printf("query event=%d\n", (int)CALL(cuEventQuery, e));
    OK(CALL(cuEventSynchronize, e));
    memcpy(out_z, pinned, sizeof out_z);
    OK(CALL(cuMemcpyDtoH, out_w, dw, sizeof out_w));
    OK(CALL(cuMemcpyDtoH, out_y, dy, sizeof out_y));

    /* Launch errors the driver reports synchronously must come back unchanged. */
    static char not_a_function;
    void *args_bad[] = {&dy, &dx, &a1, &n};
    printf("badlaunch handle=%d zerogrid=%d both-params=%d",
           (int)CALL(cuLaunchKernel, (CUfunction)(void *)&not_a_function, 1, 1, 1, 1, 1, 1, 0, NULL, args_bad, NULL),
           (int)CALL(cuLaunchKernel, f_saxpy, 0, 1, 1, 32, 1, 1, 0, NULL, args_bad, NULL),
           (int)CALL(cuLaunchKernel, f_saxpy, 1, 1, 1, 32, 1, 1, 0, NULL, args_bad, extra));
    cfg.gridDimX = 0;
    printf(" ex-zerogrid=%d\n", (int)CALL(cuLaunchKernelEx, &cfg, f_saxpy, args_bad, NULL));

    uint64_t h = fnv1a(0xcbf29ce484222325ULL, out_w, sizeof out_w);
    h = fnv1a(h, out_z, sizeof out_z);
    h = fnv1a(h, out_y, sizeof out_y);
    int ok = !memcmp(out_w, rw, sizeof rw) && !memcmp(out_z, rz, sizeof rz) && !memcmp(out_y, ry, sizeof ry);

    if (rp_is(route, "runtime-like")) {
        /* Two threads launch into the same (legacy default) stream, as the runtime and PyTorch's autograd
         * thread do; additions commute, so the result does not depend on their interleaving. */
        uint32_t acc[N];
        OK(CALL(cuMemAlloc, &d_acc, N * 4));
        OK(CALL(cuMemsetD32, d_acc, 0, N));
        pthread_t th[RP_THREADS];
        for (uintptr_t t = 0; t < RP_THREADS; t++)
            if (pthread_create(&th[t], NULL, rp_thread, (void *)t))
                RP_FAIL("pthread_create");
        for (int t = 0; t < RP_THREADS; t++)
            pthread_join(th[t], NULL);
        OK(CALL(cuStreamSynchronize, NULL));
        OK(CALL(cuMemcpyDtoH, acc, d_acc, sizeof acc));
        OK(CALL(cuMemFree, d_acc));
        uint32_t want = 0;
        for (uint32_t t = 0; t < RP_THREADS; t++)
            for (uint32_t j = 0; j < RP_THREAD_LAUNCHES; j++)
                want += t * 1000u + j;
        for (uint32_t i = 0; i < N; i++)
            ok &= acc[i] == want;
        h = fnv1a(h, acc, sizeof acc);
    }

    OK(CALL(cuCtxSynchronize));
    OK(CALL(cuEventDestroy, e));
    OK(CALL(cuStreamDestroy, s));
    OK(CALL(cuMemFree, dx));
    OK(CALL(cuMemFree, dy));
    OK(CALL(cuMemFree, dz));
    OK(CALL(cuMemFree, dw));
    OK(CALL(cuMemFreeHost, pinned));
    OK(CALL(cuLibraryUnload, lib));
    OK(CALL(cuModuleUnload, mod));
    OK(CALL(cuDevicePrimaryCtxRelease, dev));

    printf("result %s\n", ok ? "ok" : "MISMATCH");
    printf("checksum %016llx\n", (unsigned long long)h);
    int order[RP_N_ALL], m = 0;
    for (int i = 0; i < RP_N_ALL; i++)
        if (atomic_load(&rp_calls[i]))
            order[m++] = i;
    qsort(order, (size_t)m, sizeof order[0], cmp_names);
    printf("issued");
    for (int i = 0; i < m; i++)
        printf(" %s=%lu", rp_abi[order[i]], atomic_load(&rp_calls[order[i]]));
    printf("\n");
    if (!ok)
        RP_FAIL("device results differ from the host reference");
    return failures ? 1 : 0;
}
