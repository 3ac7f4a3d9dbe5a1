/* CUPTI launch observer: subscribes to the driver-API callbacks of every launch entry point and counts
 * the launches that did not come from the shim itself. libcupti is opened with dlopen from
 * AUTOGRAPH_CUPTI_LIB, an already loaded copy, or the usual install places; without it the observer is
 * off and one info line says why. */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include "observer.h"

typedef CUptiResult (*subscribe_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
typedef CUptiResult (*enable_fn)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
typedef CUptiResult (*result_string_fn)(CUptiResult, const char **);

static const CUpti_CallbackId launch_cbids[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
};

static const char *const search_paths[] = {
    "libcupti.so.13",
    "libcupti.so",
    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so",
    "/usr/local/cuda/lib64/libcupti.so",
    "/usr/local/cuda/targets/x86_64-linux/lib/libcupti.so",
};

static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static atomic_llong launches = -1;
static char library[512];

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                 const void *data)
{
    const CUpti_CallbackData *cb = data;
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API || cb->callbackSite != CUPTI_API_ENTER || ag_guard)
        return;
    atomic_fetch_add_explicit(&launches, 1, memory_order_relaxed);
}

/* dl_iterate_phdr callback: for a loaded object under site-packages/nvidia/ or site-packages/torch/lib/,
 * tries the libcupti of the NVIDIA wheels beside it. Stops at the first that opens. */
static int find_wheel_cupti(struct dl_phdr_info *info, size_t size, void *out)
{
    static const char *const markers[] = {"site-packages/nvidia/", "site-packages/torch/lib/",
                                          "dist-packages/nvidia/", "dist-packages/torch/lib/"};
    static const char *const tails[] = {"nvidia/cu13/lib/libcupti.so.13", "nvidia/cuda_cupti/lib/libcupti.so.13",
                                        "nvidia/cuda_cupti/lib/libcupti.so.12"};
    (void)size;
    const char *path = info->dlpi_name;
    for (size_t m = 0; path && m < sizeof markers / sizeof *markers; m++) {
        const char *at = strstr(path, markers[m]);
        if (!at)
            continue;
        /* keep ".../site-packages/" */
        size_t base = (size_t)(at - path) + (size_t)(strchr(markers[m], '/') - markers[m]) + 1;
        for (size_t t = 0; t < sizeof tails / sizeof *tails; t++) {
            char cand[sizeof library];
            if (snprintf(cand, sizeof cand, "%.*s%s", (int)base, path, tails[t]) >= (int)sizeof cand)
                continue;
            void *h = dlopen(cand, RTLD_NOW | RTLD_LOCAL);
            if (h) {
                snprintf(library, sizeof library, "%s", cand);
                *(void **)out = h;
                return 1;
            }
        }
    }
    return 0;
}

static void *open_cupti(void)
{
    const char *lib = ag_opt(AG_OPT_CUPTI_LIB)->text;
    void *h;
    if (lib && *lib) {
        h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            ag_log(AG_LOG_WARN, "AUTOGRAPH_CUPTI_LIB=%s cannot be opened: %s", lib, dlerror());
        snprintf(library, sizeof library, "%s", lib);
        return h;
    }
    /* A copy the process already has, then the one beside the CUDA libraries of a PyTorch
     * installation's wheels (same CUDA release as what the program runs), then the toolkit's. */
    for (size_t i = 0; i < 2; i++) {
        h = dlopen(search_paths[i], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (h) {
            snprintf(library, sizeof library, "%s", search_paths[i]);
            return h;
        }
    }
    h = NULL;
    dl_iterate_phdr(find_wheel_cupti, &h);
    if (h)
        return h;
    for (size_t i = 0; i < sizeof search_paths / sizeof *search_paths; i++) {
        h = dlopen(search_paths[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            snprintf(library, sizeof library, "%s", search_paths[i]);
            return h;
        }
    }
    return NULL;
}

static void start(void)
{
    ag_guard++;
    void *h = open_cupti();
    if (!h) {
        ag_log(AG_LOG_INFO, "libcupti not found: the CUPTI observer is off (set AUTOGRAPH_CUPTI_LIB)");
        goto out;
    }
    subscribe_fn subscribe = (subscribe_fn)ag_real_dlsym(h, "cuptiSubscribe");
    enable_fn enable = (enable_fn)ag_real_dlsym(h, "cuptiEnableCallback");
    result_string_fn result_string = (result_string_fn)ag_real_dlsym(h, "cuptiGetResultString");
    if (!subscribe || !enable) {
        ag_log(AG_LOG_WARN, "%s lacks cuptiSubscribe/cuptiEnableCallback: the CUPTI observer is off", library);
        goto out;
    }
    CUpti_SubscriberHandle sub;
    CUptiResult r = subscribe(&sub, on_callback, NULL);
    if (r != CUPTI_SUCCESS) {
        const char *s = "?";
        if (result_string)
            result_string(r, &s);
        /* CUPTI takes one subscriber per process: a profiler got there first. */
        ag_log(AG_LOG_WARN, "CUPTI subscription refused (%s): going on without the observer", s);
        goto out;
    }
    atomic_store(&launches, 0);
    for (size_t i = 0; i < sizeof launch_cbids / sizeof *launch_cbids; i++) {
        r = enable(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, launch_cbids[i]);
        if (r != CUPTI_SUCCESS)
            ag_log(AG_LOG_WARN, "CUPTI refused callback id %u (error %d)", (unsigned)launch_cbids[i], (int)r);
    }
    ag_log(AG_LOG_DEBUG, "CUPTI observer attached (%s)", library);
out:
    ag_guard--;
}

int ag_cupti_start(void)
{
    if (ag_opt(AG_OPT_CUPTI)->num == AG_CUPTI_OFF)
        return 0;
    pthread_once(&start_once, start);
    return atomic_load(&launches) >= 0 ? 0 : -ENOENT;
}

long long ag_cupti_launches(void)
{
    return atomic_load_explicit(&launches, memory_order_relaxed);
}

const char *ag_cupti_library(void)
{
    return library;
}
