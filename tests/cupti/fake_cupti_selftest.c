/* Self-test of the stand-in libcupti (fake_cupti.c) fed by fakecuda, without the shim: the stand-in is
 * opened RTLD_LOCAL, as the shim opens libcupti, so fakecuda must find it without RTLD_DEFAULT.
 * Usage: fake_cupti_selftest PATH_TO_libfake_cupti.so */
#define _GNU_SOURCE
#include <cuda.h>
#include <cupti.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fakecuda.h"

static int failures;
#define CHECK(cond)                                                                                   \
    do {                                                                                              \
        if (!(cond)) {                                                                                \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                  \
            failures++;                                                                               \
        }                                                                                             \
    } while (0)
#define CK(x) CHECK((x) == CUDA_SUCCESS)

static struct {
    CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*enable)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
    CUptiResult (*enable_domain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
    CUptiResult (*name)(CUpti_CallbackDomain, uint32_t, const char **);
    CUptiResult (*result)(CUptiResult, const char **);
    CUptiResult (*reg)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*act_enable)(CUpti_ActivityKind);
    CUptiResult (*act_disable)(CUpti_ActivityKind);
    CUptiResult (*flush)(uint32_t);
    CUptiResult (*next)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*timestamp)(uint64_t *);
} cu;

/* What the subscriber's callback saw. */
#define MAXSEEN 64
static struct {
    CUpti_CallbackId cbid;
    CUpti_ApiCallbackSite site;
    const char *name;
    uint32_t correlation;
    uint64_t data;
} seen[MAXSEEN];
static int nseen, nested_sync;

static void CUPTIAPI on_api(void *ud, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *p)
{
    const CUpti_CallbackData *d = p;
    CHECK(domain == CUPTI_CB_DOMAIN_DRIVER_API && ud == &seen);
    if (d->callbackSite == CUPTI_API_ENTER)
        *d->correlationData = 1000u + d->correlationId; /* must come back at the exit */
    if (nseen < MAXSEEN)
        seen[nseen++] = (__typeof__(seen[0])){cbid, d->callbackSite, d->functionName, d->correlationId,
                                              *d->correlationData};
    /* A subscriber may call the driver from its callback (the shim issues held-back work there). */
    if (nested_sync && cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel && d->callbackSite == CUPTI_API_ENTER) {
        nested_sync = 0;
        CHECK(cuStreamSynchronize(NULL) == CUDA_SUCCESS);
    }
}

static size_t buf_size = 64 * 1024;
static unsigned long long records, buffers_back, last_end;
static int order_ok = 1;
/* The records' correlation ids, in the order they came back (written under the stand-in's delivery
 * lock, read after a flush). */
#define MAXREC 64
static uint32_t rec_corr[MAXREC];

static void CUPTIAPI on_request(uint8_t **buffer, size_t *size, size_t *max)
{
    *buffer = aligned_alloc(ACTIVITY_RECORD_ALIGNMENT, buf_size);
    *size = buf_size;
    *max = 0;
}

static void CUPTIAPI on_complete(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
    CUpti_Activity *r = NULL;
    CUptiResult res;
    while ((res = cu.next(buffer, valid, &r)) == CUPTI_SUCCESS) {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)r;
        CHECK(k->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        if (k->start < last_end || k->end <= k->start)
            order_ok = 0;
        last_end = k->end;
        unsigned long long i = __atomic_fetch_add(&records, 1, __ATOMIC_SEQ_CST);
        if (i < MAXREC)
            rec_corr[i] = k->correlationId;
    }
    CHECK(res == CUPTI_ERROR_MAX_LIMIT_REACHED);
    free(buffer);
    __atomic_fetch_add(&buffers_back, 1, __ATOMIC_SEQ_CST);
}

static void k_inc(void **args, const fakecuda_dims_t *d)
{
    (void)d;
    (**(uint32_t **)args[0])++;
}

static void *sym(void *h, const char *name)
{
    void *p = dlsym(h, name);
    if (!p) {
        fprintf(stderr, "fake_cupti_selftest: %s missing\n", name);
        exit(1);
    }
    return p;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fake_cupti_selftest PATH_TO_libfake_cupti.so\n");
        return 2;
    }
    size_t sz[] = {8};
    CHECK(fakecuda_register_kernel("inc", k_inc, 1, sz) == 0);
    CK(cuInit(0));
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(cuCtxSetCurrent(ctx));
    CUmodule mod;
    CUfunction inc;
    CK(cuModuleLoadData(&mod, "fakecuda-module selftest"));
    CK(cuModuleGetFunction(&inc, mod, "inc"));
    CUdeviceptr x;
    CK(cuMemAlloc(&x, 4));
    CK(cuMemsetD32(x, 0, 1));
    void *args[] = {&x};

    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h || dlsym(RTLD_DEFAULT, "cuptiSubscribe")) {
        fprintf(stderr, "fake_cupti_selftest: %s not opened RTLD_LOCAL (%s)\n", argv[1], dlerror());
        return 1;
    }
    cu.subscribe = sym(h, "cuptiSubscribe");
    cu.unsubscribe = sym(h, "cuptiUnsubscribe");
    cu.enable = sym(h, "cuptiEnableCallback");
    cu.enable_domain = sym(h, "cuptiEnableDomain");
    cu.name = sym(h, "cuptiGetCallbackName");
    cu.result = sym(h, "cuptiGetResultString");
    cu.reg = sym(h, "cuptiActivityRegisterCallbacks");
    cu.act_enable = sym(h, "cuptiActivityEnable");
    cu.act_disable = sym(h, "cuptiActivityDisable");
    cu.flush = sym(h, "cuptiActivityFlushAll");
    cu.next = sym(h, "cuptiActivityGetNextRecord");
    cu.timestamp = sym(h, "cuptiGetTimestamp");

    /* names, from the toolkit's headers */
    const char *s = NULL;
    CHECK(cu.name(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &s) == CUPTI_SUCCESS &&
          strcmp(s, "cuLaunchKernel") == 0);
    CHECK(cu.name(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2_ptsz, &s) == CUPTI_SUCCESS &&
          strcmp(s, "cuMemcpyHtoDAsync_v2_ptsz") == 0);
    CHECK(cu.name(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE - 1, &s) == CUPTI_SUCCESS && s);
    CHECK(cu.name(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_INVALID, &s) == CUPTI_ERROR_INVALID_PARAMETER && !s);
    CHECK(cu.name(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE, &s) == CUPTI_ERROR_INVALID_PARAMETER);
    CHECK(cu.result(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, &s) == CUPTI_SUCCESS &&
          strcmp(s, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED") == 0);
    CHECK(cu.result((CUptiResult)12345, &s) == CUPTI_ERROR_INVALID_PARAMETER);

    /* one subscriber at a time; a stale handle is refused */
    CUpti_SubscriberHandle sub, other;
    CHECK(cu.subscribe(&sub, on_api, &seen) == CUPTI_SUCCESS);
    CHECK(cu.subscribe(&other, on_api, &seen) == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
    CHECK(cu.unsubscribe(sub) == CUPTI_SUCCESS);
    CHECK(cu.subscribe(&other, on_api, &seen) == CUPTI_SUCCESS);
    CHECK(cu.enable(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) ==
          CUPTI_ERROR_INVALID_PARAMETER);
    sub = other;

    /* per-id enable: only the launch calls back, at entry and exit, with one correlation */
    CHECK(cu.enable(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) == CUPTI_SUCCESS);
    CK(cuLaunchKernel(inc, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CK(cuStreamSynchronize(NULL));
    CHECK(nseen == 2 && seen[0].cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel && seen[0].site == CUPTI_API_ENTER &&
          seen[1].site == CUPTI_API_EXIT && strcmp(seen[0].name, "cuLaunchKernel") == 0 &&
          seen[0].correlation == seen[1].correlation && seen[1].data == 1000u + seen[0].correlation);

    /* the unhooked launch reports as cuLaunchKernel; a driver call inside the callback nests */
    nseen = 0;
    nested_sync = 1;
    CHECK(cu.enable(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize) == CUPTI_SUCCESS);
    CK(fakecuda_unhooked_launch(inc, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CHECK(nseen == 4 && seen[0].cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel &&
          seen[1].cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamSynchronize && seen[2].site == CUPTI_API_EXIT &&
          seen[1].correlation == seen[2].correlation && seen[3].cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel &&
          seen[3].site == CUPTI_API_EXIT && seen[3].correlation == seen[0].correlation &&
          seen[3].data == 1000u + seen[0].correlation && strcmp(seen[3].name, "cuLaunchKernel") == 0);

    /* the whole domain on and off */
    CHECK(cu.enable_domain(0, sub, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS);
    nseen = 0;
    CK(cuLaunchKernel(inc, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CK(cuStreamSynchronize(NULL));
    CHECK(nseen == 0);
    CHECK(cu.enable_domain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API) == CUPTI_SUCCESS);
    uint32_t v = 0;
    CK(cuMemcpyDtoH(&v, x, 4));
    CHECK(nseen == 2 && seen[0].cbid == CUPTI_DRIVER_TRACE_CBID_cuMemcpyDtoH_v2 &&
          strcmp(seen[0].name, "cuMemcpyDtoH_v2") == 0);
    CHECK(v == 3);
    CHECK(cu.unsubscribe(sub) == CUPTI_SUCCESS);
    nseen = 0;
    CK(cuStreamSynchronize(NULL));
    CHECK(nseen == 0);

    /* activity: nothing to flush before registration; records on flush, in order, timed */
    CHECK(cu.flush(0) == CUPTI_ERROR_INVALID_OPERATION);
    CHECK(cu.reg(on_request, on_complete) == CUPTI_SUCCESS);
    CHECK(cu.act_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS);
    uint64_t t0 = 0, t1 = 0;
    CHECK(cu.timestamp(&t0) == CUPTI_SUCCESS);
    for (int i = 0; i < 3; i++)
        CK(cuLaunchKernel(inc, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CK(cuStreamSynchronize(NULL));
    CHECK(cu.flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    CHECK(cu.timestamp(&t1) == CUPTI_SUCCESS);
    CHECK(records == 3 && buffers_back >= 1 && order_ok && last_end <= t1);
    /* every launch has its own id, subscriber or not; one stream runs them in launch order */
    CHECK(rec_corr[0] != 0 && rec_corr[0] < rec_corr[1] && rec_corr[1] < rec_corr[2]);

    /* buffers of two records: full ones come back from the worker without a flush */
    buf_size = 2 * sizeof(CUpti_ActivityKernel10);
    CHECK(cu.flush(0) == CUPTI_SUCCESS);
    unsigned long long back = buffers_back;
    for (int i = 0; i < 5; i++)
        CK(cuLaunchKernel(inc, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CK(cuStreamSynchronize(NULL));
    for (int i = 0; i < 2000 && __atomic_load_n(&buffers_back, __ATOMIC_SEQ_CST) < back + 2; i++)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    CHECK(__atomic_load_n(&buffers_back, __ATOMIC_SEQ_CST) >= back + 2);
    /* disable hands back the last, partly filled buffer; no records after it */
    CHECK(cu.act_disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS);
    CHECK(records == 8 && order_ok);
    CK(cuLaunchKernel(inc, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CK(cuStreamSynchronize(NULL));
    CHECK(cu.flush(0) == CUPTI_SUCCESS);
    CHECK(records == 8);

    /* correlation: a kernel's record carries the id its cuLaunchKernel's callbacks saw, and a graph's
     * kernels that of the cuGraphLaunch that ran them, so a client can tell them apart by the call */
    buf_size = 64 * 1024;
    CHECK(cu.subscribe(&sub, on_api, &seen) == CUPTI_SUCCESS);
    CHECK(cu.enable(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel) == CUPTI_SUCCESS);
    CHECK(cu.enable(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch) == CUPTI_SUCCESS);
    CUstream cs;
    CUgraph g;
    CUgraphExec ex;
    CK(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
    CK(cuStreamBeginCapture(cs, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CK(cuLaunchKernel(inc, 1, 1, 1, 1, 1, 1, 0, cs, args, NULL));
    CK(cuLaunchKernel(inc, 1, 1, 1, 1, 1, 1, 0, cs, args, NULL));
    CK(cuStreamEndCapture(cs, &g));
    CK(cuGraphInstantiate(&ex, g, 0));
    CHECK(cu.act_enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS);
    unsigned long long base = records;
    nseen = 0;
    CK(cuLaunchKernel(inc, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
    CK(cuGraphLaunch(ex, cs));
    CK(cuGraphLaunch(ex, cs));
    /* a launch whose callback is off still has an id of its own, as in CUPTI */
    CUlaunchConfig lc = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1};
    CK(cuLaunchKernelEx(&lc, inc, args, NULL));
    CK(cuStreamSynchronize(cs));
    CK(cuStreamSynchronize(NULL));
    CHECK(cu.flush(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) == CUPTI_SUCCESS);
    CHECK(nseen == 6 && seen[0].cbid == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel && seen[0].site == CUPTI_API_ENTER &&
          seen[2].cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch && seen[2].site == CUPTI_API_ENTER &&
          seen[4].cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch && seen[4].site == CUPTI_API_ENTER);
    uint32_t launch_id = seen[0].correlation, graph1 = seen[2].correlation, graph2 = seen[4].correlation;
    CHECK(launch_id && graph1 && graph2 && launch_id != graph1 && graph1 != graph2 && graph2 != launch_id);
    CHECK(records == base + 6 && records <= MAXREC);
    int of_launch = 0, of_graph1 = 0, of_graph2 = 0, of_ex = 0, graph_order_ok = 1;
    for (unsigned long long i = base; i < records && i < MAXREC; i++) {
        uint32_t c = rec_corr[i];
        of_launch += c == launch_id;
        of_graph1 += c == graph1;
        of_graph2 += c == graph2;
        of_ex += c != 0 && c != launch_id && c != graph1 && c != graph2;
        if (c == graph1 && of_graph2) /* one stream: the first launch's kernels ran first */
            graph_order_ok = 0;
    }
    CHECK(of_launch == 1 && of_graph1 == 2 && of_graph2 == 2 && of_ex == 1 && graph_order_ok);
    CHECK(cu.act_disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS);
    CHECK(cu.unsubscribe(sub) == CUPTI_SUCCESS);
    CK(cuGraphExecDestroy(ex));
    CK(cuGraphDestroy(g));
    CK(cuStreamDestroy(cs));
    CHECK(cu.act_enable((CUpti_ActivityKind)0) == CUPTI_ERROR_INVALID_KIND);

    if (failures) {
        fprintf(stderr, "fake_cupti_selftest: %d failures\n", failures);
        return 1;
    }
    printf("fake_cupti_selftest: ok\n");
    return 0;
}
