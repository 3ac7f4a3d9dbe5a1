/* fc_cupti.c: fakecuda (CPU test double for libcuda.so.1) reports to the stand-in libcupti of
 * tests/cupti, as the real driver reports to CUPTI: API entry and exit of the traced entry points, and
 * every kernel it runs. The stand-in is found at run time, wherever and however it was loaded; until
 * then the reports go nowhere. */
#include "fc_internal.h"

#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "fake_cupti.h"

static _Atomic(fakecupti_api_fn *) api_fn;
static _Atomic(fakecupti_kernel_fn *) kernel_fn;
static _Atomic(fakecupti_graph_fn *) graph_fn;
static atomic_ullong scanned_adds; /* the loader's object count at the last scan */

_Thread_local uint32_t fc_tl_correlation;

static int loader_adds(struct dl_phdr_info *info, size_t size, void *out)
{
    (void)size;
    *(unsigned long long *)out = info->dlpi_adds;
    return 1; /* the first object carries the count: stop there */
}

typedef struct {
    char **names;
    size_t n;
} obj_names;

static int collect_name(struct dl_phdr_info *info, size_t size, void *out)
{
    obj_names *o = out;
    (void)size;
    if (!info->dlpi_name || !info->dlpi_name[0])
        return 0;
    char *s = strdup(info->dlpi_name);
    if (!s || fc_vec_push((void **)&o->names, &o->n, sizeof s, &s))
        free(s);
    return 0;
}

/* The shim opens libcupti RTLD_LOCAL, out of RTLD_DEFAULT's reach: every loaded object is asked by
 * name. The names are gathered first, as dlopen under dl_iterate_phdr's lock could deadlock. */
static void find_stand_in(void)
{
    unsigned long long adds = 0;
    dl_iterate_phdr(loader_adds, &adds);
    if (adds == atomic_load(&scanned_adds))
        return; /* nothing loaded since the last look */
    atomic_store(&scanned_adds, adds);
    void *api = dlsym(RTLD_DEFAULT, "fakecupti_api"), *kernel = dlsym(RTLD_DEFAULT, "fakecupti_kernel"),
         *graph = dlsym(RTLD_DEFAULT, "fakecupti_graph");
    obj_names o = {NULL, 0};
    if (!api)
        dl_iterate_phdr(collect_name, &o);
    for (size_t i = 0; i < o.n; i++) {
        void *h = api ? NULL : dlopen(o.names[i], RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            /* The stand-in is linked -z nodelete: the pointers outlive this handle. */
            api = dlsym(h, "fakecupti_api");
            kernel = dlsym(h, "fakecupti_kernel");
            graph = dlsym(h, "fakecupti_graph");
            dlclose(h);
        }
        free(o.names[i]);
    }
    free(o.names);
    if (api && kernel && graph) {
        atomic_store(&kernel_fn, (fakecupti_kernel_fn *)kernel);
        atomic_store(&graph_fn, (fakecupti_graph_fn *)graph);
        atomic_store(&api_fn, (fakecupti_api_fn *)api);
    }
}

uint32_t fc_cupti_api(uint32_t cbid, const char *name, int site)
{
    fakecupti_api_fn *fn = atomic_load_explicit(&api_fn, memory_order_acquire);
    if (!fn) {
        find_stand_in();
        fn = atomic_load_explicit(&api_fn, memory_order_acquire);
    }
    return fn ? fn(cbid, name, site) : 0;
}

void fc_cupti_graph(const void *exec)
{
    fakecupti_graph_fn *fn = atomic_load_explicit(&graph_fn, memory_order_acquire);
    if (fn)
        fn(exec);
}

uint64_t fc_cupti_kernel_start(void)
{
    return fc_now_ns();
}

/* One device runs one kernel at a time: each starts no earlier than the last one ended and lasts at
 * least a nanosecond, so busy time never exceeds the wall time of the stand-in's clock. Called under
 * the fake's lock, which guards last_end. */
/* A kernel's run on the modeled device (FAKECUDA_DEVICE_NS): its span as the model has it. */
void fc_cupti_kernel_span(uint64_t start, uint64_t end, uint32_t correlation)
{
    fakecupti_kernel_fn *fn = atomic_load_explicit(&kernel_fn, memory_order_acquire);
    if (fn)
        fn(start, end > start ? end : start + 1, correlation);
}

void fc_cupti_kernel_end(uint64_t start, uint32_t correlation)
{
    static uint64_t last_end;
    uint64_t end = fc_now_ns();
    if (start < last_end)
        start = last_end;
    last_end = end > start ? end : start + 1;
    fc_cupti_kernel_span(start, end, correlation);
}
