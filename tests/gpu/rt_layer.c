/* How long the CUDA runtime's own layer of a kernel launch takes in a real program: a preload that
 * times every __cudaLaunchKernel and cudaLaunchKernel (and their per-thread and Ex variants) from entry
 * to return, driver call included. Run it beside libautograph.so with AUTOGRAPH_SCOPE=off: the shim's pass-through statistics
 * time the driver's call alone (passthrough_launch_ns_*), and the difference is the runtime's part,
 * which a tool that matches launches at the driver cannot remove. Not a test; tests/gpu/torch_diag.sh
 * (RT_LAYER=1) builds and runs it.
 *   gcc -O2 -shared -fPIC -o rt_layer.so tests/gpu/rt_layer.c -ldl
 *   LD_PRELOAD="rt_layer.so libautograph.so" RT_LAYER_OUT=f.txt AUTOGRAPH_SCOPE=off python3 train.py
 * Writes to RT_LAYER_OUT (stderr if unset): calls per entry point, and the median and mean ns. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXS (1 << 20)
/* CUDA 13's <<<>>> calls __cudaLaunchKernel with the kernel handle __cudaGetKernel gave it once; the
 * older entry points take the host stub. */
enum { K_STUB, K_STUB_PTSZ, K_PLAIN, K_PTSZ, K_EX, K_EX_PTSZ, NK };
static const char *const names[NK] = {"__cudaLaunchKernel", "__cudaLaunchKernel_ptsz", "cudaLaunchKernel",
                                      "cudaLaunchKernel_ptsz", "cudaLaunchKernelExC", "cudaLaunchKernelExC_ptsz"};
static void *real[NK];
static uint32_t *samples[NK];
static _Atomic uint64_t count[NK], sum_ns[NK];

static uint64_t now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The first loaded libcudart that is not this library: where the program's references would have gone
 * (RTLD_NEXT misses a libcudart that a library loaded with RTLD_LOCAL brought in). */
static int find_cudart(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libcudart.so")) {
        *(void **)data = dlopen(info->dlpi_name, RTLD_NOW | RTLD_NOLOAD);
        return *(void **)data != NULL;
    }
    return 0;
}

static void *resolve(int k)
{
    void *f = __atomic_load_n(&real[k], __ATOMIC_ACQUIRE);
    if (f)
        return f;
    f = dlsym(RTLD_NEXT, names[k]);
    if (!f) {
        void *h = NULL;
        dl_iterate_phdr(find_cudart, &h);
        f = h ? dlsym(h, names[k]) : NULL;
    }
    __atomic_store_n(&real[k], f, __ATOMIC_RELEASE);
    return f;
}

static void note(int k, uint64_t ns)
{
    uint64_t i = atomic_fetch_add(&count[k], 1);
    atomic_fetch_add(&sum_ns[k], ns);
    if (!samples[k]) {
        uint32_t *s = calloc(MAXS, sizeof *s), *none = NULL;
        if (s && !__atomic_compare_exchange_n(&samples[k], &none, s, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            free(s);
    }
    if (samples[k] && i < MAXS)
        samples[k][i] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
}

typedef struct {
    unsigned x, y, z;
} dim3_t;
typedef int (*launch_t)(const void *, dim3_t, dim3_t, void **, size_t, void *);
typedef int (*launch_ex_t)(const void *, const void *, void **);

#define LAUNCH(name, k)                                                                                     \
    int name(const void *fn, dim3_t g, dim3_t b, void **args, size_t smem, void *stream)                    \
    {                                                                                                       \
        launch_t f = (launch_t)resolve(k);                                                                  \
        if (!f)                                                                                             \
            return 500; /* cudaErrorSymbolNotFound */                                                       \
        uint64_t t0 = now();                                                                                \
        int r = f(fn, g, b, args, smem, stream);                                                            \
        note(k, now() - t0);                                                                                \
        return r;                                                                                           \
    }
#define LAUNCH_EX(name, k)                                                                                  \
    int name(const void *cfg, const void *fn, void **args)                                                  \
    {                                                                                                       \
        launch_ex_t f = (launch_ex_t)resolve(k);                                                            \
        if (!f)                                                                                             \
            return 500;                                                                                     \
        uint64_t t0 = now();                                                                                \
        int r = f(cfg, fn, args);                                                                           \
        note(k, now() - t0);                                                                                \
        return r;                                                                                           \
    }
LAUNCH(__cudaLaunchKernel, K_STUB)
LAUNCH(__cudaLaunchKernel_ptsz, K_STUB_PTSZ)
LAUNCH(cudaLaunchKernel, K_PLAIN)
LAUNCH(cudaLaunchKernel_ptsz, K_PTSZ)
LAUNCH_EX(cudaLaunchKernelExC, K_EX)
LAUNCH_EX(cudaLaunchKernelExC_ptsz, K_EX_PTSZ)

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("RT_LAYER_OUT");
    FILE *f = path && *path ? fopen(path, "a") : stderr;
    if (!f)
        return;
    for (int k = 0; k < NK; k++) {
        uint64_t n = count[k];
        if (!n || !samples[k])
            continue;
        uint64_t m = n < MAXS ? n : MAXS;
        qsort(samples[k], m, sizeof *samples[k], cmp_u32);
        fprintf(f, "rt_layer: %s calls %llu median_ns %u mean_ns %.0f\n", names[k], (unsigned long long)n,
                samples[k][m / 2], (double)sum_ns[k] / (double)n);
    }
    if (f != stderr)
        fclose(f);
}
