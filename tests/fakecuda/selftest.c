/* selftest.c: self-test of fakecuda, the CPU test double for libcuda.so.1 (CTest fakecuda.selftest).
 * Checks that the fake behaves like the driver where tests depend on it: memory, copies, launches,
 * stream ordering under several seeds, capture rules, graphs, cuGetProcAddress and threads. */
#define _GNU_SOURCE
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fakecuda.h"

static int failures;
#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);                  \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)
#define OK(x) CHECK((x) == CUDA_SUCCESS)
#define ERR(x, e) CHECK((x) == (e))

/* add(int *p, int v, int n): p[i] += v; scale(int *dst, const int *src, int k, int n) */
static void k_add(void **a, const fakecuda_dims_t *d)
{
    int *p = *(int **)a[0], v = *(int *)a[1], n = *(int *)a[2];
    for (int i = 0; i < n; i++) p[i] += v;
}
static void k_scale(void **a, const fakecuda_dims_t *d)
{
    int *dst = *(int **)a[0];
    const int *src = *(int **)a[1];
    char k = *(char *)a[2];
    int n = *(int *)a[3];
    for (int i = 0; i < n; i++) dst[i] = src[i] * k;
}

static CUmodule mod;
static CUfunction f_add, f_scale;

static void launch_add(CUstream s, CUdeviceptr p, int v, int n)
{
    void *args[] = {&p, &v, &n};
    OK(cuLaunchKernel(f_add, 1, 1, 1, 32, 1, 1, 0, s, args, NULL));
}

static void test_memory(void)
{
    CUdeviceptr d, d2;
    int host[64], back[64];
    for (int i = 0; i < 64; i++) host[i] = i;
    OK(cuMemAlloc(&d, sizeof(host)));
    OK(cuMemAlloc(&d2, sizeof(host)));
    CHECK(d < (CUdeviceptr)(uintptr_t)host || d > (CUdeviceptr)(uintptr_t)host + sizeof(host));
    OK(cuMemcpyHtoD(d, host, sizeof(host)));
    OK(cuMemcpyDtoD(d2, d, sizeof(host)));
    OK(cuMemcpyDtoH(back, d2, sizeof(back)));
    CHECK(!memcmp(host, back, sizeof(host)));
    OK(cuMemcpy(d2 + 4, d, 8)); /* unified */
    OK(cuMemcpyDtoH(back, d2, 16));
    CHECK(back[1] == 0 && back[2] == 1);
    /* memsets */
    OK(cuMemsetD8(d, 0x11, 4));
    OK(cuMemsetD16(d + 4, 0x2222, 2));
    OK(cuMemsetD32(d + 8, 0x33333333, 1));
    OK(cuMemcpyDtoH(back, d, 12));
    CHECK(back[0] == 0x11111111 && back[1] == 0x22222222 && back[2] == 0x33333333);
    ERR(cuMemsetD32(d + 2, 0, 1), CUDA_ERROR_INVALID_VALUE); /* misaligned */
    OK(cuMemsetD8Async(d, 1, 4, NULL));
    OK(cuMemsetD16Async(d, 2, 2, NULL));
    OK(cuMemsetD32Async(d, 3, 1, NULL));
    OK(cuMemsetD2D8Async(d, 16, 4, 4, 2, NULL));
    OK(cuMemsetD2D16Async(d, 16, 5, 2, 2, NULL));
    OK(cuMemsetD2D32Async(d, 16, 6, 1, 2, NULL));
    OK(cuStreamSynchronize(NULL));
    /* 2D: a 4x3 block of a 16-byte-pitch device image */
    OK(cuMemsetD2D32(d, 16, 7, 4, 3));
    OK(cuMemsetD2D8(d, 16, 0, 4, 3));
    OK(cuMemsetD2D16(d + 4, 16, 0x0909, 2, 3));
    unsigned char img[48];
    CUDA_MEMCPY2D c2 = {0};
    c2.srcMemoryType = CU_MEMORYTYPE_DEVICE, c2.srcDevice = d, c2.srcPitch = 16;
    c2.dstMemoryType = CU_MEMORYTYPE_HOST, c2.dstHost = img, c2.dstPitch = 16;
    c2.WidthInBytes = 8, c2.Height = 3;
    memset(img, 0xEE, sizeof(img));
    OK(cuMemcpy2D(&c2));
    CHECK(img[0] == 0 && img[4] == 9 && img[7] == 9 && img[8] == 0xEE && img[16 + 5] == 9 && img[32 + 8] == 0xEE);
    OK(cuMemcpy2DUnaligned(&c2));
    OK(cuMemcpy2DAsync(&c2, NULL)); /* pageable destination: blocking */
    CHECK(img[36] == 9);
    CUDA_MEMCPY3D c3 = {0};
    c3.srcMemoryType = CU_MEMORYTYPE_HOST, c3.srcHost = host, c3.dstMemoryType = CU_MEMORYTYPE_DEVICE, c3.dstDevice = d2;
    c3.WidthInBytes = 16, c3.Height = 1, c3.Depth = 1;
    OK(cuMemcpy3D(&c3));
    OK(cuMemcpy3DAsync(&c3, NULL));
    c2.srcPitch = 4; /* pitch below width */
    ERR(cuMemcpy2D(&c2), CUDA_ERROR_INVALID_VALUE);
    /* a host pointer where a device pointer belongs, out of bounds */
    ERR(cuMemcpyHtoD((CUdeviceptr)(uintptr_t)back, host, 4), CUDA_ERROR_INVALID_VALUE);
    ERR(cuMemcpyDtoH(back, d, sizeof(host) + 4), CUDA_ERROR_INVALID_VALUE);
    /* freed memory */
    OK(cuMemFree(d2));
    ERR(cuMemcpyHtoD(d2, host, 4), CUDA_ERROR_INVALID_VALUE);
    ERR(cuMemsetD8(d2, 0, 1), CUDA_ERROR_INVALID_VALUE);
    ERR(cuMemFree(d2), CUDA_ERROR_INVALID_VALUE);
    ERR(cuMemsetD8Async(d2, 0, 1, NULL), CUDA_ERROR_INVALID_VALUE);
    /* async free in stream order */
    CUdeviceptr d3;
    OK(cuMemAllocAsync(&d3, 64, NULL));
    OK(cuMemsetD8Async(d3, 1, 64, NULL));
    OK(cuMemFreeAsync(d3, NULL));
    ERR(cuMemsetD8Async(d3, 1, 64, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuStreamSynchronize(NULL));
    /* pinned vs pageable */
    void *pinned, *pinned2;
    unsigned mt = 0;
    OK(cuMemAllocHost(&pinned, 256));
    OK(cuMemHostAlloc(&pinned2, 256, CU_MEMHOSTALLOC_PORTABLE));
    OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)pinned));
    CHECK(mt == CU_MEMORYTYPE_HOST);
    OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, d));
    CHECK(mt == CU_MEMORYTYPE_DEVICE);
    ERR(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)host), CUDA_ERROR_INVALID_VALUE);
    static char reg[4096];
    OK(cuMemHostRegister(reg, sizeof(reg), 0));
    OK(cuPointerGetAttribute(&mt, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)reg + 100));
    CHECK(mt == CU_MEMORYTYPE_HOST);
    CUcontext pc = NULL, cur;
    OK(cuCtxGetCurrent(&cur));
    OK(cuPointerGetAttribute(&pc, CU_POINTER_ATTRIBUTE_CONTEXT, d));
    CHECK(pc == cur);
    /* pageable H2D async: snapshot at call; pinned: read at execution */
    int *src = malloc(16);
    src[0] = 1;
    OK(cuMemcpyHtoDAsync(d, src, 4, NULL));
    src[0] = 2;
    *(int *)pinned = 10;
    OK(cuMemcpyHtoDAsync(d + 4, pinned, 4, NULL));
    *(int *)pinned = 20;
    OK(cuMemcpyDtoHAsync(back, d, 8, NULL)); /* pageable destination: returns complete */
    CHECK(back[0] == 1 && back[1] == 20);
    free(src);
    OK(cuMemHostUnregister(reg));
    ERR(cuMemHostUnregister(reg), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
    OK(cuMemFreeHost(pinned));
    OK(cuMemFreeHost(pinned2));
    size_t fr, tot;
    OK(cuMemGetInfo(&fr, &tot));
    CHECK(fr <= tot && tot > 0);
    OK(cuMemFree(d));
}

static void test_launch(void)
{
    CUdeviceptr d;
    int n = 8, out[8];
    OK(cuMemAlloc(&d, sizeof(out)));
    OK(cuMemsetD32(d, 1, 8));
    launch_add(NULL, d, 5, n);
    /* extra form: params packed at the param-info offsets */
    size_t off[3], sz[3];
    for (int i = 0; i < 3; i++) OK(cuFuncGetParamInfo(f_add, i, &off[i], &sz[i]));
    ERR(cuFuncGetParamInfo(f_add, 3, &off[0], &sz[0]), CUDA_ERROR_INVALID_VALUE);
    CHECK(off[0] == 0 && sz[0] == 8 && off[1] == 8 && off[2] == 12);
    unsigned char buf[16];
    int v = 10;
    memcpy(buf + off[0], &d, 8), memcpy(buf + off[1], &v, 4), memcpy(buf + off[2], &n, 4);
    size_t bsz = sizeof(buf);
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &bsz, CU_LAUNCH_PARAM_END};
    OK(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, extra));
    void *args[] = {&d, &v, &n};
    ERR(cuLaunchKernel(f_add, 1, 1, 1, 1, 1, 1, 0, NULL, args, extra), CUDA_ERROR_INVALID_VALUE);
    ERR(cuLaunchKernel(f_add, 0, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
    ERR(cuLaunchKernel(f_add, 1, 1, 1, 1025, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_VALUE);
    ERR(cuLaunchKernel((CUfunction)(uintptr_t)out, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL), CUDA_ERROR_INVALID_HANDLE);
    /* cuLaunchKernelEx with an attribute, then a bad attribute */
    CUlaunchAttribute at = {0};
    at.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
    CUlaunchConfig cfg = {1, 1, 1, 32, 1, 1, 0, NULL, &at, 1};
    OK(cuLaunchKernelEx(&cfg, f_add, args, NULL));
    at.id = (CUlaunchAttributeID)999;
    ERR(cuLaunchKernelEx(&cfg, f_add, args, NULL), CUDA_ERROR_INVALID_VALUE);
    OK(cuLaunchCooperativeKernel(f_add, 1, 1, 1, 1, 1, 1, 0, NULL, args));
    OK(cuMemcpyDtoH(out, d, sizeof(out)));
    CHECK(out[0] == 1 + 5 + 10 + 10 + 10 && out[7] == out[0]);
    /* CUkernel vs CUfunction */
    CUlibrary lib;
    CUkernel kk;
    CUfunction kf;
    const char *name;
    ERR(cuLibraryLoadData(&lib, "garbage", NULL, NULL, 0, NULL, NULL, 0), CUDA_ERROR_INVALID_IMAGE);
    OK(cuLibraryLoadData(&lib, "fakecuda-module", NULL, NULL, 0, NULL, NULL, 0));
    OK(cuLibraryGetKernel(&kk, lib, "scale"));
    CHECK((void *)kk != (void *)f_scale);
    ERR(cuFuncGetParamInfo((CUfunction)kk, 0, &off[0], &sz[0]), CUDA_ERROR_INVALID_HANDLE);
    ERR(cuFuncGetName(&name, (CUfunction)kk), CUDA_ERROR_INVALID_HANDLE);
    OK(cuKernelGetParamInfo(kk, 2, &off[0], &sz[0]));
    CHECK(off[0] == 16 && sz[0] == 1);
    OK(cuKernelGetParamInfo(kk, 3, &off[0], &sz[0]));
    CHECK(off[0] == 20);
    OK(cuKernelGetName(&name, kk));
    CHECK(!strcmp(name, "scale"));
    OK(cuKernelGetFunction(&kf, kk));
    OK(cuFuncGetName(&name, kf));
    /* whose a kernel is (a library stands for its own module, as its CUfunctions' module) */
    CUmodule own_m, own_lm;
    CUlibrary own_l;
    OK(cuFuncGetModule(&own_m, f_scale));
    CHECK(own_m == mod);
    ERR(cuFuncGetModule(&own_m, (CUfunction)kk), CUDA_ERROR_INVALID_HANDLE);
    OK(cuKernelGetLibrary(&own_l, kk));
    CHECK(own_l == lib);
    ERR(cuKernelGetLibrary(&own_l, (CUkernel)f_scale), CUDA_ERROR_INVALID_HANDLE);
    OK(cuFuncGetModule(&own_m, kf));
    OK(cuLibraryGetModule(&own_lm, lib));
    CHECK(own_m == own_lm);
    ERR(cuLibraryGetModule(&own_lm, (CUlibrary)mod), CUDA_ERROR_INVALID_HANDLE);
    { /* in another context the kernel has another function, whose module is the library's there */
        CUcontext here, other;
        CUfunction kf2, kf_again;
        CUmodule m_other, lm_other;
        OK(cuCtxGetCurrent(&here));
        OK(cuCtxCreate(&other, NULL, 0, 0));
        OK(cuKernelGetFunction(&kf2, kk));
        CHECK(kf2 != kf);
        OK(cuFuncGetModule(&m_other, kf2));
        OK(cuLibraryGetModule(&lm_other, lib));
        CHECK(m_other == lm_other && m_other != own_m);
        OK(cuFuncGetModule(&m_other, kf)); /* from any context: its own context's */
        CHECK(m_other == own_m);
        OK(cuCtxSetCurrent(here));
        OK(cuKernelGetFunction(&kf_again, kk));
        CHECK(kf_again == kf);
        OK(cuCtxDestroy(other));
    }
    ERR(cuKernelGetName(&name, (CUkernel)kf), CUDA_ERROR_INVALID_HANDLE);
    CUdeviceptr d2;
    OK(cuMemAlloc(&d2, sizeof(out)));
    char k3 = 3;
    void *sargs[] = {&d2, &d, &k3, &n};
    OK(cuLaunchKernel((CUfunction)kk, 1, 1, 1, 1, 1, 1, 0, NULL, sargs, NULL)); /* CUkernel as CUfunction */
    OK(cuLibraryUnload(lib));                                                   /* runs the pending launch */
    ERR(cuLaunchKernel((CUfunction)kk, 1, 1, 1, 1, 1, 1, 0, NULL, sargs, NULL), CUDA_ERROR_INVALID_HANDLE);
    int out2[8];
    OK(cuMemcpyDtoH(out2, d2, sizeof(out2)));
    CHECK(out2[3] == out[3] * 3);
    CUmodule m2;
    ERR(cuModuleLoadData(&m2, "not a module"), CUDA_ERROR_INVALID_IMAGE);
    OK(cuMemFree(d));
    OK(cuMemFree(d2));
}

/* Stream A writes x = 1..n then stream B computes y = 2x. With the wait, every seed gives the
 * same y; without it, some seed runs B first. */
static int run_two_streams(unsigned seed, int with_wait, int *sum)
{
    CUstream a, b;
    CUevent e;
    CUdeviceptr x, y;
    int n = 16, host[16];
    fakecuda_set_seed(seed);
    OK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    OK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    OK(cuMemAlloc(&x, 64));
    OK(cuMemAlloc(&y, 64));
    OK(cuMemsetD32(x, 0, 16));
    for (int i = 0; i < 4; i++) launch_add(a, x, 1, n);
    OK(cuEventRecord(e, a));
    if (with_wait) OK(cuStreamWaitEvent(b, e, 0));
    char two = 2;
    void *args[] = {&y, &x, &two, &n};
    OK(cuLaunchKernel(f_scale, 1, 1, 1, 1, 1, 1, 0, b, args, NULL));
    OK(cuStreamSynchronize(b));
    OK(cuStreamSynchronize(a));
    OK(cuMemcpyDtoH(host, y, sizeof(host)));
    *sum = host[0];
    OK(cuMemFree(x));
    OK(cuMemFree(y));
    OK(cuEventDestroy(e));
    OK(cuStreamDestroy(a));
    OK(cuStreamDestroy(b));
    return 0;
}

static void test_ordering(void)
{
    int first = -1, differs = 0;
    for (unsigned seed = 1; seed <= 20; seed++) {
        int s;
        run_two_streams(seed, 1, &s);
        if (first < 0) first = s;
        CHECK(s == first);
    }
    CHECK(first == 8);
    for (unsigned seed = 1; seed <= 20; seed++) {
        int s;
        run_two_streams(seed, 0, &s);
        if (s != first) differs++;
    }
    CHECK(differs > 0); /* the fake catches the missing dependency */

    /* legacy stream: blocking streams synchronize with it, non-blocking ones do not */
    CUstream blk;
    CUdeviceptr x;
    int h;
    OK(cuStreamCreate(&blk, 0));
    OK(cuMemAlloc(&x, 4));
    for (unsigned seed = 1; seed <= 10; seed++) {
        fakecuda_set_seed(seed);
        OK(cuMemsetD32Async(x, 3, 1, blk));
        launch_add(CU_STREAM_LEGACY, x, 1, 1); /* waits for blk */
        launch_add(blk, x, 10, 1);             /* waits for the legacy launch */
        OK(cuStreamSynchronize(blk));
        OK(cuMemcpyDtoH(&h, x, 4));
        CHECK(h == 14);
    }
    /* events: query, synchronize, elapsed time */
    CUevent e0, e1, nt;
    float ms = 0;
    OK(cuEventCreate(&e0, 0));
    OK(cuEventCreate(&e1, 0));
    OK(cuEventCreate(&nt, CU_EVENT_DISABLE_TIMING));
    OK(cuEventRecord(e0, blk));
    launch_add(blk, x, 1, 1);
    OK(cuEventRecord(e1, blk));
    OK(cuEventRecord(nt, blk));
    ERR(cuEventElapsedTime(&ms, e0, e1), CUDA_ERROR_NOT_READY);
    /* a passive thread's queries run nothing: the work stays queued, and the next plain query is still
     * the first one (FAKECUDA_QUERY_NOT_READY) */
    fakecuda_thread_passive(1);
    for (int i = 0; i < 3; i++) {
        ERR(cuEventQuery(e1), CUDA_ERROR_NOT_READY);
        ERR(cuStreamQuery(blk), CUDA_ERROR_NOT_READY);
    }
    fakecuda_thread_passive(0);
    fakecuda_set_query_not_ready(1);
    ERR(cuEventQuery(e1), CUDA_ERROR_NOT_READY);
    fakecuda_set_query_not_ready(0);
    CUresult q;
    while ((q = cuEventQuery(e1)) == CUDA_ERROR_NOT_READY) {} /* FAKECUDA_QUERY_NOT_READY=1 */
    OK(q);
    OK(cuEventSynchronize(e1));
    OK(cuEventElapsedTime(&ms, e0, e1));
    CHECK(ms > 0);
    ERR(cuEventElapsedTime(&ms, e0, nt), CUDA_ERROR_INVALID_HANDLE);
    while ((q = cuStreamQuery(blk)) == CUDA_ERROR_NOT_READY) {}
    OK(q);
    /* host function runs in order */
    OK(cuMemFree(x));
    OK(cuStreamDestroy(blk));
}

/* A page-locked allocation from a thread of its own, in the capture mode given. */
typedef struct {
    CUstreamCaptureMode mode;
    void *p;
    CUresult r;
} host_alloc_job_t;
static void *host_alloc_thread(void *arg)
{
    host_alloc_job_t *j = arg;
    CUcontext ctx = NULL;
    CUstreamCaptureMode m = j->mode;
    if (cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS && cuCtxSetCurrent(ctx) == CUDA_SUCCESS &&
        cuThreadExchangeStreamCaptureMode(&m) == CUDA_SUCCESS)
        j->r = cuMemAllocHost(&j->p, 64);
    if (ctx) cuDevicePrimaryCtxRelease(0);
    return NULL;
}

static void test_capture(void)
{
    CUstream s, s2;
    CUgraph g;
    CUdeviceptr x;
    CUstreamCaptureStatus st;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    OK(cuMemAlloc(&x, 64));
    ERR(cuStreamBeginCapture(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ERR(cuStreamBeginCapture(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ERR(cuStreamBeginCapture(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_GLOBAL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    /* fork/join across two streams */
    CUevent fork, join;
    OK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    OK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    fakecuda_stats_t fs;
    fakecuda_stats(&fs);
    unsigned long long queued0 = fs.kernels_queued;
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_ACTIVE);
    OK(cuMemsetD32Async(x, 1, 16, s));
    OK(cuEventRecord(fork, s));
    OK(cuStreamWaitEvent(s2, fork, 0));
    launch_add(s2, x, 2, 16);
    OK(cuEventRecord(join, s2));
    OK(cuStreamWaitEvent(s, join, 0));
    launch_add(s, x, 3, 16);
    fakecuda_stats(&fs);
    CHECK(fs.kernels_queued == queued0); /* captured launches are not queued */
    cuuint64_t id;
    const CUgraphNode *deps;
    size_t nd;
    CUgraph cg;
    OK(cuStreamGetCaptureInfo(s, &st, &id, &cg, &deps, NULL, &nd));
    CHECK(nd == 1 && id > 0);
    ERR(cuStreamEndCapture(s2, &g), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
    OK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    ERR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* again, properly */
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuMemsetD32Async(x, 1, 16, s));
    OK(cuEventRecord(fork, s));
    OK(cuStreamWaitEvent(s2, fork, 0));
    launch_add(s2, x, 2, 16);
    /* legacy-stream work during a global capture of a blocking stream: fine here (non-blocking) */
    OK(cuEventRecord(join, s2));
    OK(cuStreamWaitEvent(s, join, 0));
    launch_add(s, x, 3, 16);
    OK(cuStreamEndCapture(s, &g));
    size_t nn = 0;
    OK(cuGraphGetNodes(g, NULL, &nn));
    CHECK(nn == 3);
    CUgraphExec ex;
    OK(cuGraphInstantiate(&ex, g, 0));
    int h[16];
    OK(cuGraphLaunch(ex, s));
    OK(cuStreamSynchronize(s));
    OK(cuMemcpyDtoH(h, x, sizeof(h)));
    CHECK(h[0] == 6 && h[15] == 6);
    OK(cuGraphExecDestroy(ex));
    OK(cuGraphDestroy(g));
    /* a page-locked allocation is unsafe in a global capture's thread: refused, and the capture is
     * invalidated; allowed once the thread's mode is relaxed (below) */
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    void *ph = NULL;
    ERR(cuMemAllocHost(&ph, 64), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    OK(cuStreamIsCapturing(s, &st));
    CHECK(st == CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    ERR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* from another thread in the default (global) mode: refused, and this thread's global capture is
     * invalidated; beside a thread-local capture, or in the relaxed mode, allowed */
    static const struct {
        CUstreamCaptureMode cap, thread;
        CUresult alloc;
    } other[] = {
        {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_GLOBAL, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED},
        {CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, CU_STREAM_CAPTURE_MODE_GLOBAL, CUDA_SUCCESS},
        {CU_STREAM_CAPTURE_MODE_GLOBAL, CU_STREAM_CAPTURE_MODE_RELAXED, CUDA_SUCCESS},
    };
    for (int k = 0; k < 3; k++) {
        host_alloc_job_t job = {other[k].thread, NULL, CUDA_ERROR_UNKNOWN};
        pthread_t th;
        OK(cuStreamBeginCapture(s, other[k].cap));
        CHECK(pthread_create(&th, NULL, host_alloc_thread, &job) == 0 && pthread_join(th, NULL) == 0);
        ERR(job.r, other[k].alloc);
        if (!other[k].alloc) launch_add(s, x, 1, 1); /* (an invalidated capture refuses more work) */
        ERR(cuStreamEndCapture(s, &g), other[k].alloc ? CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : CUDA_SUCCESS);
        if (!other[k].alloc) OK(cuGraphDestroy(g));
        if (job.p) OK(cuMemFreeHost(job.p)); /* after the capture: a free is unsafe beside a global one */
    }
    /* an event query (of an event outside the capture) in a global capture's thread: the same */
    CUevent outside;
    OK(cuEventCreate(&outside, CU_EVENT_DISABLE_TIMING));
    OK(cuEventRecord(outside, s2));
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ERR(cuEventQuery(outside), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ERR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(cuEventQuery(outside));
    OK(cuStreamEndCapture(s, &g));
    OK(cuGraphDestroy(g));
    OK(cuEventDestroy(outside));
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    CHECK(mode == CU_STREAM_CAPTURE_MODE_GLOBAL);
    OK(cuMemAllocHost(&ph, 64));
    OK(cuThreadExchangeStreamCaptureMode(&mode));
    launch_add(s, x, 1, 1);
    OK(cuStreamEndCapture(s, &g));
    OK(cuGraphDestroy(g));
    OK(cuMemFreeHost(ph));
    /* unjoined fork */
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    OK(cuEventRecord(fork, s));
    OK(cuStreamWaitEvent(s2, fork, 0));
    launch_add(s2, x, 2, 16);
    ERR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
    /* sync invalidates; pageable H2D is rejected */
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ERR(cuMemcpyHtoDAsync(x, h, 4, s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ERR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    launch_add(s, x, 1, 1);
    ERR(cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    ERR(cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    /* capture of a blocking stream: legacy work is an implicit dependency on it, refused in every mode
     * (capture_rules.expected's blk-* rows); beside a non-blocking stream's capture it is allowed */
    CUstream blk;
    OK(cuStreamCreate(&blk, 0));
    OK(cuStreamBeginCapture(blk, CU_STREAM_CAPTURE_MODE_GLOBAL));
    ERR(cuStreamSynchronize(NULL), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    ERR(cuStreamEndCapture(blk, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture(blk, CU_STREAM_CAPTURE_MODE_RELAXED));
    ERR(cuMemcpyDtoH(h, x, 4), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    ERR(cuStreamEndCapture(blk, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    OK(cuMemcpyDtoH(h, x, 4));
    OK(cuStreamEndCapture(s, &g));
    OK(cuGraphDestroy(g));
    OK(cuStreamDestroy(blk));
    OK(cuMemFree(x));
    OK(cuStreamDestroy(s));
    OK(cuStreamDestroy(s2));
}

static void test_graph(void)
{
    CUdeviceptr x, y;
    int n = 16, v = 4, hx[16], eager[16];
    char k = 3;
    OK(cuMemAlloc(&x, 64));
    OK(cuMemAlloc(&y, 64));
    /* eager reference: x = 1; x += 4; y = 3x */
    OK(cuMemsetD32(x, 1, 16));
    launch_add(NULL, x, v, n);
    void *sargs[] = {&y, &x, &k, &n};
    OK(cuLaunchKernel(f_scale, 1, 1, 1, 1, 1, 1, 0, NULL, sargs, NULL));
    OK(cuMemcpyDtoH(eager, y, 64));
    OK(cuMemsetD32(y, 0, 16));
    CUgraph g;
    CUgraphNode ms, ka, ks, cp;
    OK(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS mp = {x, 0, 1, 4, 16, 1};
    OK(cuGraphAddMemsetNode(&ms, g, NULL, 0, &mp, NULL));
    void *aargs[] = {&x, &v, &n};
    CUDA_KERNEL_NODE_PARAMS kp = {0};
    kp.func = f_add, kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1, kp.blockDimX = kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = aargs;
    OK(cuGraphAddKernelNode(&ka, g, &ms, 1, &kp));
    CUgraphNodeParams np;
    memset(&np, 0, sizeof(np));
    np.type = CU_GRAPH_NODE_TYPE_KERNEL;
    np.kernel.func = f_scale, np.kernel.gridDimX = np.kernel.gridDimY = np.kernel.gridDimZ = 1;
    np.kernel.blockDimX = np.kernel.blockDimY = np.kernel.blockDimZ = 1, np.kernel.kernelParams = sargs;
    OK(cuGraphAddNode(&ks, g, &ka, NULL, 1, &np));
    CUDA_MEMCPY3D c3 = {0};
    c3.srcMemoryType = CU_MEMORYTYPE_DEVICE, c3.srcDevice = y, c3.dstMemoryType = CU_MEMORYTYPE_DEVICE, c3.dstDevice = x;
    c3.WidthInBytes = 64, c3.Height = 1, c3.Depth = 1;
    OK(cuGraphAddMemcpyNode(&cp, g, &ks, 1, &c3, NULL));
    CUgraphNodeType t;
    OK(cuGraphNodeGetType(ka, &t));
    CHECK(t == CU_GRAPH_NODE_TYPE_KERNEL);
    CUDA_KERNEL_NODE_PARAMS got;
    OK(cuGraphKernelNodeGetParams(ka, &got));
    CHECK(got.func == f_add && *(int *)got.kernelParams[1] == 4);
    CUgraphExec ex;
    OK(cuGraphInstantiate(&ex, g, 0));
    v = 100; /* the node holds a copy of the argument bytes */
    fakecuda_reset_stats();
    OK(cuGraphLaunch(ex, NULL));
    OK(cuMemcpyDtoH(hx, x, 64));
    CHECK(!memcmp(hx, eager, 64));
    fakecuda_stats_t st;
    fakecuda_stats(&st);
    CHECK(st.graphs_launched == 1 && st.nodes_executed == 4 && st.kernels_executed == 2);
    CHECK(st.kernels_queued == 2); /* the graph's two kernel nodes, queued at its launch */
    /* exec kernel-node params: x += 6 instead of 4 */
    v = 6;
    OK(cuGraphExecKernelNodeSetParams(ex, ka, &kp));
    OK(cuGraphLaunch(ex, NULL));
    OK(cuMemcpyDtoH(hx, x, 64));
    CHECK(hx[0] == 21);
    /* exec update from a same-topology graph with v = 9 */
    v = 9;
    OK(cuGraphKernelNodeSetParams(ka, &kp));
    CUgraphExecUpdateResultInfo info;
    OK(cuGraphExecUpdate(ex, g, &info));
    CHECK(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS);
    OK(cuGraphLaunch(ex, NULL));
    OK(cuGraphLaunch(ex, NULL)); /* twice in flight */
    OK(cuMemcpyDtoH(hx, x, 64));
    CHECK(hx[0] == 30);
    CUgraphNode extra;
    OK(cuGraphAddEmptyNode(&extra, g, &cp, 1));
    ERR(cuGraphExecUpdate(ex, g, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE);
    CHECK(info.result == CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED);
    mp.value = 2;
    OK(cuGraphExecMemsetNodeSetParams(ex, ms, &mp, NULL));
    OK(cuGraphExecMemcpyNodeSetParams(ex, cp, &c3, NULL));
    CUDA_GRAPH_INSTANTIATE_PARAMS ip = {0};
    CUgraphExec ex2;
    OK(cuGraphInstantiateWithParams(&ex2, g, &ip));
    CHECK(ip.result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS);
    OK(cuGraphUpload(ex2, NULL));
    OK(cuGraphLaunch(ex, NULL));
    OK(cuMemcpyDtoH(hx, x, 64));
    CHECK(hx[0] == 33);
    OK(cuGraphExecDestroy(ex));
    OK(cuGraphExecDestroy(ex2));
    OK(cuGraphDestroy(g));
    OK(cuMemFree(x));
    OK(cuMemFree(y));
}

static void test_procaddr(void)
{
    static const struct { const char *api; int ver; cuuint64_t flags; const char *abi; } cases[] = {
        {"cuMemcpyHtoD", 12000, CU_GET_PROC_ADDRESS_DEFAULT, "cuMemcpyHtoD_v2"},
        {"cuMemcpyHtoD", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemcpyHtoD_v2_ptds"},
        {"cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuLaunchKernel"},
        {"cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuLaunchKernel_ptsz"},
        {"cuStreamBeginCapture", 10010, 0, "cuStreamBeginCapture_v2"},
        {"cuStreamBeginCapture", 10000, 0, "cuStreamBeginCapture"},
        {"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"},
        {"cuGetProcAddress", 11030, 0, "cuGetProcAddress"},
        {"cuEventElapsedTime", 12080, 0, "cuEventElapsedTime_v2"},
        {"cuEventElapsedTime", 12000, 0, "cuEventElapsedTime"},
        {"cuStreamGetCaptureInfo", 12030, 0, "cuStreamGetCaptureInfo_v3"},
        {"cuStreamGetCaptureInfo", 12030, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuStreamGetCaptureInfo_v3_ptsz"},
        {"cuCtxCreate", 12050, 0, "cuCtxCreate_v4"},
        {"cuMemAlloc", 3020, 0, "cuMemAlloc_v2"},
        {"cuGraphInstantiate", 12000, 0, "cuGraphInstantiateWithFlags"},
        {"cuCtxSynchronize", 13000, 0, "cuCtxSynchronize"},
    };
    void *self = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    CHECK(self != NULL);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        void *p = NULL;
        CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
        OK(cuGetProcAddress(cases[i].api, &p, cases[i].ver, cases[i].flags, &st));
        CHECK(st == CU_GET_PROC_ADDRESS_SUCCESS);
        CHECK(p && p == dlsym(self, cases[i].abi));
        if (!p || p != dlsym(self, cases[i].abi)) fprintf(stderr, "  for %s -> %s\n", cases[i].api, cases[i].abi);
    }
    void *p;
    CUdriverProcAddressQueryResult st;
    ERR(cuGetProcAddress("cuMemcpyHtoD", &p, 3000, 0, &st), CUDA_ERROR_NOT_FOUND);
    CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    ERR(cuGetProcAddress("cuLaunchKernelEx", &p, 11000, 0, &st), CUDA_ERROR_NOT_FOUND);
    CHECK(st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    ERR(cuGetProcAddress("cuNoSuchThing", &p, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    CHECK(st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    ERR(cuGetProcAddress("cuMemcpyHtoD_v2", &p, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    ERR(cuGetProcAddress("cuInit", &p, 13000, 7, &st), CUDA_ERROR_INVALID_VALUE);
    OK(cuGetProcAddress("cuInit", &p, 13000, 0, NULL));
    /* the v1 entry point, as handed out for old versions */
    CUresult (*v1)(const char *, void **, int, cuuint64_t) = dlsym(self, "cuGetProcAddress");
    CHECK(v1 && v1("cuLaunchKernel", &p, 12000, 0) == CUDA_SUCCESS && p == dlsym(self, "cuLaunchKernel"));
    dlclose(self);
}

/* A graph's kernel node whose function was unloaded since it was made: a driver's exec would run the old
 * code or fail, never another kernel's, so fakecuda aborts there (in a child: the parent sees SIGABRT). */
static void test_stale_node(void)
{
    CUmodule m2;
    CUfunction f2;
    CUgraph g;
    CUgraphNode node;
    CUgraphExec x;
    CUdeviceptr d;
    int v = 2, n = 8;
    OK(cuMemAlloc(&d, 64));
    OK(cuMemsetD32(d, 0, 16));
    OK(cuModuleLoadData(&m2, "fakecuda-module stale"));
    OK(cuModuleGetFunction(&f2, m2, "add"));
    void *args[] = {&d, &v, &n};
    CUDA_KERNEL_NODE_PARAMS kp;
    memset(&kp, 0, sizeof(kp));
    kp.func = f2, kp.gridDimX = kp.gridDimY = kp.gridDimZ = 1, kp.blockDimX = 32, kp.blockDimY = kp.blockDimZ = 1;
    kp.kernelParams = args;
    OK(cuGraphCreate(&g, 0));
    OK(cuGraphAddKernelNode(&node, g, NULL, 0, &kp));
    OK(cuGraphInstantiateWithFlags(&x, g, 0));
    OK(cuGraphLaunch(x, NULL)); /* its module still loaded: runs */
    OK(cuCtxSynchronize());
    int out[8];
    OK(cuMemcpyDtoH(out, d, sizeof(out)));
    CHECK(out[0] == 2 && out[7] == 2);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (!freopen("/dev/null", "w", stderr)) _exit(3);
        if (cuModuleUnload(m2) != CUDA_SUCCESS) _exit(4);
        (void)cuGraphLaunch(x, NULL);
        (void)cuCtxSynchronize();
        _exit(0);
    }
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);
    OK(cuGraphExecDestroy(x));
    OK(cuGraphDestroy(g));
    OK(cuModuleUnload(m2));
    OK(cuMemFree(d));
}

static CUdeviceptr shared_buf;
static void *thread_main(void *arg)
{
    int id = (int)(intptr_t)arg;
    CUcontext c;
    OK(cuDevicePrimaryCtxRetain(&c, 0));
    OK(cuCtxSetCurrent(c));
    CUstream s;
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < 200; i++) launch_add(s, shared_buf + 4 * id, 1, 1);
    for (int i = 0; i < 100; i++) launch_add(CU_STREAM_PER_THREAD, shared_buf + 8 + 4 * id, 1, 1);
    OK(cuStreamSynchronize(s));
    OK(cuStreamDestroy(s));
    OK(cuDevicePrimaryCtxRelease(0));
    return NULL;
}

static void test_threads(void)
{
    OK(cuMemAlloc(&shared_buf, 16));
    OK(cuMemsetD32(shared_buf, 0, 4));
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, thread_main, (void *)(intptr_t)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    int h[4];
    OK(cuCtxSynchronize());
    OK(cuMemcpyDtoH(h, shared_buf, 16));
    CHECK(h[0] == 200 && h[1] == 200 && h[2] == 100 && h[3] == 100);
    OK(cuMemFree(shared_buf));
}

/* Texture objects over linear memory and external semaphores (fc_interop.c). */
static void test_interop(void)
{
    CUdeviceptr d;
    OK(cuMemAlloc(&d, 256));
    CUDA_RESOURCE_DESC rd = fakecuda_linear_resource(d, 256);
    CUDA_TEXTURE_DESC td;
    memset(&td, 0, sizeof(td));
    CUtexObject tex;
    OK(cuTexObjectCreate(&tex, &rd, &td, NULL));
    CHECK(fakecuda_tex_ptr(tex) == d);
    OK(cuTexObjectDestroy(tex));
    CHECK(fakecuda_tex_ptr(tex) == 0);
    ERR(cuTexObjectDestroy(tex), CUDA_ERROR_INVALID_VALUE); /* twice */
    rd.resType = CU_RESOURCE_TYPE_ARRAY;
    ERR(cuTexObjectCreate(&tex, &rd, &td, NULL), CUDA_ERROR_INVALID_VALUE); /* only linear memory */

    CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC hd;
    memset(&hd, 0, sizeof(hd));
    CUexternalSemaphore sem;
    OK(cuImportExternalSemaphore(&sem, &hd));
    CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp;
    CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wp;
    memset(&sp, 0, sizeof(sp));
    memset(&wp, 0, sizeof(wp));
    sp.params.fence.value = 5;
    OK(cuSignalExternalSemaphoresAsync(&sem, &sp, 1, NULL));
    CHECK(fakecuda_semaphore_value(sem) == 5); /* the signal ran with the queued work */
    wp.params.fence.value = 7;
    OK(cuWaitExternalSemaphoresAsync(&sem, &wp, 1, NULL));
    OK(cuMemsetD8Async(d, 3, 1, NULL)); /* behind the wait */
    unsigned char b = 0;
    fakecuda_semaphore_set(sem, 7); /* the other API signals: the wait passes */
    OK(cuStreamSynchronize(NULL));
    OK(cuMemcpyDtoH(&b, d, 1));
    CHECK(b == 3);
    OK(cuDestroyExternalSemaphore(sem));
    ERR(cuDestroyExternalSemaphore(sem), CUDA_ERROR_INVALID_HANDLE);
    ERR(cuArrayDestroy(NULL), CUDA_ERROR_INVALID_HANDLE);
    OK(cuMemFree(d));
}

/* Ended captures and destroyed streams leave the lists that every submission walks (a process that
 * makes thousands of them, as the difftest does, would otherwise slow down quadratically); a stream
 * destroyed with work queued stays listed until that work has run, and an event recorded in an ended
 * capture still orders a wait. */
static void test_lists(void)
{
    fakecuda_stats_t fs;
    fakecuda_stats(&fs);
    unsigned long long streams0 = fs.streams_listed;
    CHECK(fs.captures_listed == 0);
    CUdeviceptr x;
    OK(cuMemAlloc(&x, 64));
    OK(cuMemsetD32(x, 0, 16));
    CUstream s[40];
    CUevent ev;
    OK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    for (int i = 0; i < 40; i++) {
        OK(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
        CUgraph g;
        CUgraphExec ge;
        OK(cuStreamBeginCapture(s[i], CU_STREAM_CAPTURE_MODE_GLOBAL));
        fakecuda_stats(&fs);
        CHECK(fs.captures_listed == 1);
        launch_add(s[i], x, 1, 16);
        if (i == 0) OK(cuEventRecord(ev, s[i]));
        OK(cuStreamEndCapture(s[i], &g));
        OK(cuGraphInstantiate(&ge, g, 0));
        OK(cuGraphLaunch(ge, s[i]));
        OK(cuStreamSynchronize(s[i]));
        OK(cuGraphExecDestroy(ge));
        OK(cuGraphDestroy(g));
    }
    fakecuda_stats(&fs);
    CHECK(fs.captures_listed == 0 && fs.streams_listed == streams0 + 40);
    OK(cuStreamWaitEvent(s[1], ev, 0)); /* recorded in an ended capture: an ordinary (empty) wait */
    launch_add(s[1], x, 1, 16);
    OK(cuStreamDestroy(s[1])); /* with work queued: listed until it has run */
    for (int i = 2; i < 40; i++) OK(cuStreamDestroy(s[i]));
    fakecuda_stats(&fs);
    CHECK(fs.streams_listed == streams0 + 2);
    OK(cuCtxSynchronize());
    fakecuda_stats(&fs);
    CHECK(fs.streams_listed == streams0 + 1);
    OK(cuStreamDestroy(s[0]));
    fakecuda_stats(&fs);
    CHECK(fs.streams_listed == streams0);
    int back[16];
    OK(cuMemcpyDtoH(back, x, sizeof(back)));
    CHECK(back[0] == 41 && back[15] == 41);
    OK(cuEventDestroy(ev));
    OK(cuMemFree(x));
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The modeled device (FAKECUDA_DEVICE_NS, FAKECUDA_GRAPH_DEVICE_NS: set by the CTest fakecuda.selftest_device,
 * long enough that nothing here can take longer): work runs one op at a time from its launch, a sync
 * returns no earlier than the device reaches what it waits for, a query before then answers "not ready",
 * a graph starts FAKECUDA_GRAPH_DEVICE_NS late; results are those of the unmodeled fake. */
static void test_device(uint64_t dev, uint64_t graph_dev)
{
    CUstream s;
    CUevent ev;
    CUdeviceptr d;
    int host[8];
    OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    OK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    OK(cuMemAlloc(&d, sizeof host));
    OK(cuMemsetD32(d, 0, 8)); /* (a sync memset: waits for the device) */
    uint64_t t0 = now_ns();
    launch_add(s, d, 1, 8);
    launch_add(s, d, 2, 8);
    OK(cuEventRecord(ev, s));
    launch_add(s, d, 4, 8);
    ERR(cuEventQuery(ev), CUDA_ERROR_NOT_READY);
    ERR(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    OK(cuEventSynchronize(ev));
    CHECK(now_ns() - t0 >= 2 * dev);
    OK(cuStreamSynchronize(s));
    CHECK(now_ns() - t0 >= 3 * dev);
    OK(cuStreamQuery(s));
    OK(cuEventQuery(ev));
    OK(cuMemcpyDtoH(host, d, sizeof host));
    CHECK(host[0] == 7 && host[7] == 7);

    CUgraph g;
    CUgraphExec x;
    OK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    launch_add(s, d, 8, 8);
    launch_add(s, d, 16, 8);
    OK(cuStreamEndCapture(s, &g));
    OK(cuGraphInstantiateWithFlags(&x, g, 0));
    t0 = now_ns();
    OK(cuGraphLaunch(x, s));
    ERR(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    OK(cuCtxSynchronize());
    CHECK(now_ns() - t0 >= graph_dev + 2 * dev);
    OK(cuMemcpyDtoH(host, d, sizeof host));
    CHECK(host[0] == 31 && host[7] == 31);
    CUevent e0, e1;
    float ms = 0;
    OK(cuEventCreate(&e0, 0));
    OK(cuEventCreate(&e1, 0));
    OK(cuEventRecord(e0, s));
    launch_add(s, d, 1, 8);
    launch_add(s, d, 1, 8);
    OK(cuEventRecord(e1, s));
    OK(cuEventSynchronize(e1));
    OK(cuEventElapsedTime(&ms, e0, e1)); /* the two kernels' modeled time (and the host's between the calls) */
    CHECK(ms >= 0.9999f * 2 * (float)dev / 1e6f);
    OK(cuEventDestroy(e0));
    OK(cuEventDestroy(e1));
    OK(cuGraphExecDestroy(x));
    OK(cuGraphDestroy(g));
    OK(cuMemFree(d));
    OK(cuEventDestroy(ev));
    OK(cuStreamDestroy(s));
}

int main(void)
{
    size_t add_sizes[] = {sizeof(int *), sizeof(int), sizeof(int)};
    size_t scale_sizes[] = {sizeof(int *), sizeof(int *), 1, sizeof(int)};
    CHECK(fakecuda_register_kernel("add", k_add, 3, add_sizes) == 0);
    CHECK(fakecuda_register_kernel("scale", k_scale, 4, scale_sizes) == 0);
    CUdeviceptr d;
    ERR(cuMemAlloc(&d, 4), CUDA_ERROR_NOT_INITIALIZED);
    OK(cuInit(0));
    ERR(cuMemAlloc(&d, 4), CUDA_ERROR_INVALID_CONTEXT);
    int ver = 0, cnt = 0;
    OK(cuDriverGetVersion(&ver));
    CHECK(ver == 13000);
    OK(cuDeviceGetCount(&cnt));
    CHECK(cnt == 1);
    CUcontext c;
    OK(cuDevicePrimaryCtxRetain(&c, 0));
    OK(cuCtxSetCurrent(c));
    ERR(cuModuleLoadData(&mod, "garbage"), CUDA_ERROR_INVALID_IMAGE);
    OK(cuModuleLoadData(&mod, "fakecuda-module v1"));
    OK(cuModuleGetFunction(&f_add, mod, "add"));
    OK(cuModuleGetFunction(&f_scale, mod, "scale"));
    const char *dev = getenv("FAKECUDA_DEVICE_NS"), *gdev = getenv("FAKECUDA_GRAPH_DEVICE_NS");
    if (dev && atoll(dev) > 0) { /* fakecuda.selftest_device: the modeled device alone */
        test_device(strtoull(dev, NULL, 0), gdev ? strtoull(gdev, NULL, 0) : 0);
        OK(cuModuleUnload(mod));
        OK(cuDevicePrimaryCtxRelease(0));
        fprintf(failures ? stderr : stdout, "fakecuda selftest (modeled device): %s\n",
                failures ? "failed" : "all checks passed");
        return failures ? 1 : 0;
    }
    test_memory();
    test_launch();
    test_ordering();
    test_capture();
    test_graph();
    test_stale_node();
    test_procaddr();
    test_threads();
    test_interop();
    test_lists();
    OK(cuModuleUnload(mod));
    OK(cuDevicePrimaryCtxRelease(0));
    if (failures) fprintf(stderr, "fakecuda selftest: %d failure(s)\n", failures);
    else printf("fakecuda selftest: all checks passed\n");
    return failures ? 1 : 0;
}
