/* capture_rules: which calls of one thread CUDA refuses, or lets break the capture, while another thread
 * captures on a non-blocking stream of the same context: in relaxed mode, as the library's builds capture,
 * and for comparison in the thread-local and global modes; then the same on a blocking stream (the blk-
 * rows), which work on the legacy stream synchronizes with. The calling thread keeps the default (global)
 * mode, as a program's threads do. Each round: thread A begins a capture on a new non-blocking stream and
 * captures a memset; thread B makes one call; A asks the capture's status, captures a second memset, ends
 * the capture, instantiates the graph, launches it and reads what it wrote. A call that has not returned
 * after 2 s of A's open capture is reported as blocked (A then ends the capture anyway).
 *
 * Driver API only, so that one program runs on fakecuda and on the GPU: fakecuda.capture_rules compares the
 * fake's table with the GPU's (tests/fakecuda/capture_rules.expected, the output of a GPU run; the capture
 * fence of shim/graph.c covers the calls whose relaxed row breaks the capture). On the GPU machine:
 *   build-gpu/bin/capture_rules            (the real libcuda.so.1: no LD_LIBRARY_PATH to the fake) */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fakecuda_prog.h"

#define BYTES (1u << 20)

static CUcontext ctx;
static CUdeviceptr dbuf; /* what the captured memsets write (words 0 and 1) and the copies use */
static CUdeviceptr dfree; /* a buffer B frees (made anew each round it is gone) */
static unsigned host[1024]; /* pageable */
static CUevent ev;
static CUstream other; /* a non-blocking stream of B's */

/* r, with the handle h cleared where r says the call released it */
static CUresult gone(CUresult r, void *h, size_t n)
{
    if (r == CUDA_SUCCESS)
        memset(h, 0, n);
    return r;
}
#define GONE(call, h) gone((call), &(h), sizeof(h))

static CUresult c_ctx_sync(void) { return cuCtxSynchronize(); }
static CUresult c_free(void) { return GONE(cuMemFree(dfree), dfree); }
static CUresult c_alloc(void)
{
    CUdeviceptr p;
    CUresult r = cuMemAlloc(&p, BYTES);
    return r != CUDA_SUCCESS ? r : cuMemFree(p);
}
static CUresult c_host_alloc(void)
{
    void *p;
    CUresult r = cuMemAllocHost(&p, BYTES);
    return r != CUDA_SUCCESS ? r : cuMemFreeHost(p);
}
static CUresult c_host_register(void)
{
    CUresult r = cuMemHostRegister(host, sizeof host, 0);
    return r != CUDA_SUCCESS ? r : cuMemHostUnregister(host);
}
static CUresult c_legacy_sync(void) { return cuStreamSynchronize(CU_STREAM_LEGACY); }
static CUresult c_other_sync(void) { return cuStreamSynchronize(other); }
static CUresult c_h2d(void) { return cuMemcpyHtoD(dbuf + 4096, host, sizeof host); }
static CUresult c_d2h(void) { return cuMemcpyDtoH(host, dbuf + 4096, sizeof host); }
static CUresult c_memset(void) { return cuMemsetD32(dbuf + 4096, 7, 1024); }
static CUresult c_legacy_memset(void) { return cuMemsetD32Async(dbuf + 8192, 7, 1024, CU_STREAM_LEGACY); }
static CUresult c_legacy_record(void)
{
    CUresult r = cuEventRecord(ev, CU_STREAM_LEGACY);
    return r != CUDA_SUCCESS ? r : cuEventSynchronize(ev);
}
static CUresult c_other_record(void)
{
    CUresult r = cuEventRecord(ev, other);
    return r != CUDA_SUCCESS ? r : cuEventSynchronize(ev);
}
static CUresult c_event_query(void) { return cuEventQuery(ev); }
static CUresult c_legacy_query(void) { return cuStreamQuery(CU_STREAM_LEGACY); }
static CUresult c_ctx_record(void) { return cuCtxRecordEvent(ctx, ev); }
static CUresult c_ctx_wait(void) { return cuCtxWaitEvent(ctx, ev); }
static CUresult c_async_alloc(void)
{
    CUdeviceptr p;
    CUresult r = cuMemAllocAsync(&p, BYTES, CU_STREAM_LEGACY);
    return r != CUDA_SUCCESS ? r : cuMemFreeAsync(p, CU_STREAM_LEGACY);
}

/* The calls split apart (recorded after the first GPU table, which holds the pairs above; each pair's
 * other half made before or after the round, outside it: prep and tidy_round) and the queries the library
 * makes on a program's thread. */
static CUdeviceptr pool_ptr;  /* a stream-ordered allocation: made by one round, freed by the next */
static CUdeviceptr alloc_ptr; /* the same for cuMemAlloc */
static void *pinned_ptr;      /* the same for cuMemAllocHost */
static int host_registered;   /* host[] registered: by one round, unregistered by the next */
static CUresult c_async_alloc_only(void) { return cuMemAllocAsync(&pool_ptr, BYTES, CU_STREAM_LEGACY); }
static CUresult c_async_free_only(void) { return GONE(cuMemFreeAsync(pool_ptr, CU_STREAM_LEGACY), pool_ptr); }
static CUresult c_register_only(void)
{
    CUresult r = cuMemHostRegister(host, sizeof host, 0);
    host_registered = r == CUDA_SUCCESS;
    return r;
}
static CUresult c_unregister_only(void) { return GONE(cuMemHostUnregister(host), host_registered); }
static CUresult c_pointer_attr(void)
{
    CUmemorytype t;
    return cuPointerGetAttribute(&t, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dbuf);
}
static CUresult c_mem_info(void)
{
    size_t free_b, total;
    return cuMemGetInfo(&free_b, &total);
}
static CUresult c_stream_create(void)
{
    CUstream s;
    CUresult r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
    return r != CUDA_SUCCESS ? r : cuStreamDestroy(s);
}
static CUresult c_event_create(void)
{
    CUevent e;
    CUresult r = cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
    return r != CUDA_SUCCESS ? r : cuEventDestroy(e);
}

/* Third table (the fifty-fifth session): the other halves of the pairs, and the calls the library makes on
 * a program's thread when it issues held work (event records and waits, graph launches and patches,
 * asynchronous copies) or asks about a stream. */
static CUgraph graph0;        /* one memset node (gnode) on dbuf's word 16 */
static CUgraphNode gnode;
static CUgraphExec gexec;     /* graph0 instantiated */
static CUresult c_alloc_only(void) { return cuMemAlloc(&alloc_ptr, BYTES); }
static CUresult c_host_alloc_only(void) { return cuMemAllocHost(&pinned_ptr, BYTES); }
static CUresult c_host_free_only(void) { return GONE(cuMemFreeHost(pinned_ptr), pinned_ptr); }
static CUresult c_legacy_record_only(void) { return cuEventRecord(ev, CU_STREAM_LEGACY); }
static CUresult c_event_sync(void) { return cuEventSynchronize(ev); }
static CUresult c_legacy_wait(void) { return cuStreamWaitEvent(CU_STREAM_LEGACY, ev, 0); }
static CUresult c_graph_launch(void) { return cuGraphLaunch(gexec, CU_STREAM_LEGACY); }
static CUresult c_graph_instantiate(void)
{
    CUgraphExec e;
    CUresult r = cuGraphInstantiate(&e, graph0, 0);
    return r != CUDA_SUCCESS ? r : cuGraphExecDestroy(e);
}
static CUgraphExec exec_ptr;  /* made by one round (or before it), destroyed by it or the next */
static CUgraph graph_ptr;     /* the same for a graph */
static CUresult c_instantiate_only(void) { return cuGraphInstantiate(&exec_ptr, graph0, 0); }
static CUresult c_exec_destroy_only(void) { return GONE(cuGraphExecDestroy(exec_ptr), exec_ptr); }
static CUresult c_graph_destroy_only(void) { return GONE(cuGraphDestroy(graph_ptr), graph_ptr); }
static CUDA_MEMSET_NODE_PARAMS memset_params(unsigned value)
{
    CUDA_MEMSET_NODE_PARAMS p = {dbuf + 64, 0, value, 4, 1, 1};
    return p;
}
static CUresult c_graph_set_params(void)
{
    CUDA_MEMSET_NODE_PARAMS p = memset_params(9);
    return cuGraphExecMemsetNodeSetParams(gexec, gnode, &p, ctx);
}
static CUresult c_h2d_async(void) { return cuMemcpyHtoDAsync(dbuf + 4096, host, sizeof host, CU_STREAM_LEGACY); }
static CUresult c_d2h_async(void) { return cuMemcpyDtoHAsync(host, dbuf + 4096, sizeof host, CU_STREAM_LEGACY); }
static CUresult c_legacy_is_capturing(void)
{
    CUstreamCaptureStatus st;
    return cuStreamIsCapturing(CU_STREAM_LEGACY, &st);
}
static CUresult c_other_capture_info(void)
{
    CUstreamCaptureStatus st;
    return cuStreamGetCaptureInfo(other, &st, NULL, NULL, NULL, NULL, NULL);
}

/* The library issues held work in the mode of the thread that issues it; these two ask whether the relaxed
 * mode lets legacy-stream work pass beside a capture of a blocking stream (the blk- rows). It does not (an
 * H100, fifty-sixth session): CUDA_ERROR_STREAM_CAPTURE_IMPLICIT in every mode, so the library keeps held
 * work from meeting such a capture instead (engine.c, ag_engine_capture_counted). */
static CUresult relaxed_call(CUresult (*call)(void))
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    CK(cuThreadExchangeStreamCaptureMode(&m));
    CUresult r = call();
    CK(cuThreadExchangeStreamCaptureMode(&m));
    return r;
}
static CUresult c_legacy_memset_relaxed(void) { return relaxed_call(c_legacy_memset); }
static CUresult c_graph_launch_relaxed(void) { return relaxed_call(c_graph_launch); }

/* Before a round: what the rounds before left (the halves made outside them) undone, then what this
 * round's call needs made. */
static void tidy_round(CUresult (*call)(void))
{
    if (pool_ptr && call != c_async_free_only)
        CK(c_async_free_only());
    if (host_registered && call != c_unregister_only)
        CK(c_unregister_only());
    if (pinned_ptr && call != c_host_free_only)
        CK(c_host_free_only());
    if (alloc_ptr)
        CK(GONE(cuMemFree(alloc_ptr), alloc_ptr));
    if (exec_ptr && call != c_exec_destroy_only)
        CK(c_exec_destroy_only());
    if (graph_ptr && call != c_graph_destroy_only)
        CK(c_graph_destroy_only());
    if (call == c_async_free_only && !pool_ptr)
        CK(c_async_alloc_only());
    if (call == c_unregister_only && !host_registered)
        CK(c_register_only());
    if (call == c_host_free_only && !pinned_ptr)
        CK(c_host_alloc_only());
    if (call == c_exec_destroy_only && !exec_ptr)
        CK(c_instantiate_only());
    if (call == c_graph_destroy_only && !graph_ptr)
        CK(cuGraphCreate(&graph_ptr, 0));
}

static const struct {
    const char *name;
    CUresult (*call)(void);
} calls[] = {
    {"cuCtxSynchronize", c_ctx_sync},
    {"cuMemFree", c_free},
    {"cuMemAlloc+cuMemFree", c_alloc},
    {"cuMemAllocHost+cuMemFreeHost", c_host_alloc},
    {"cuMemHostRegister+Unregister", c_host_register},
    {"cuStreamSynchronize(legacy)", c_legacy_sync},
    {"cuStreamSynchronize(B's)", c_other_sync},
    {"cuMemcpyHtoD(pageable)", c_h2d},
    {"cuMemcpyDtoH(pageable)", c_d2h},
    {"cuMemsetD32", c_memset},
    {"cuMemsetD32Async(legacy)", c_legacy_memset},
    {"cuEventRecord(legacy)+Synchronize", c_legacy_record},
    {"cuEventRecord(B's)+Synchronize", c_other_record},
    {"cuEventQuery", c_event_query},
    {"cuStreamQuery(legacy)", c_legacy_query},
    {"cuCtxRecordEvent", c_ctx_record},
    {"cuCtxWaitEvent", c_ctx_wait},
    {"cuMemAllocAsync+FreeAsync(legacy)", c_async_alloc},
    {"cuMemAllocAsync(legacy)", c_async_alloc_only},
    {"cuMemFreeAsync(legacy)", c_async_free_only},
    {"cuMemHostRegister", c_register_only},
    {"cuMemHostUnregister", c_unregister_only},
    {"cuPointerGetAttribute", c_pointer_attr},
    {"cuMemGetInfo", c_mem_info},
    {"cuStreamCreate+Destroy", c_stream_create},
    {"cuEventCreate+Destroy", c_event_create},
    {"cuMemAlloc", c_alloc_only},
    {"cuMemAllocHost", c_host_alloc_only},
    {"cuMemFreeHost", c_host_free_only},
    {"cuEventRecord(legacy)", c_legacy_record_only},
    {"cuEventSynchronize", c_event_sync},
    {"cuStreamWaitEvent(legacy)", c_legacy_wait},
    {"cuGraphLaunch(legacy)", c_graph_launch},
    {"cuGraphInstantiate+Destroy", c_graph_instantiate},
    {"cuGraphInstantiate", c_instantiate_only},
    {"cuGraphExecDestroy", c_exec_destroy_only},
    {"cuGraphDestroy", c_graph_destroy_only},
    {"cuMemsetD32Async(legacy,relaxed-B)", c_legacy_memset_relaxed},
    {"cuGraphLaunch(legacy,relaxed-B)", c_graph_launch_relaxed},
    {"cuGraphExecMemsetNodeSetParams", c_graph_set_params},
    {"cuMemcpyHtoDAsync(legacy,pageable)", c_h2d_async},
    {"cuMemcpyDtoHAsync(legacy,pageable)", c_d2h_async},
    {"cuStreamIsCapturing(legacy)", c_legacy_is_capturing},
    {"cuStreamGetCaptureInfo(B's)", c_other_capture_info},
};
#define NCALLS (sizeof calls / sizeof calls[0])

static int go, done; /* through __atomic builtins */
static size_t current;
static CUresult b_result;

static void *thread_b(void *unused)
{
    (void)unused;
    CK(cuCtxSetCurrent(ctx));
    while (!__atomic_load_n(&go, __ATOMIC_SEQ_CST))
        usleep(50);
    b_result = calls[current].call();
    __atomic_store_n(&done, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

static const char *err_name(CUresult r)
{
    const char *s = NULL;
    return cuGetErrorName(r, &s) == CUDA_SUCCESS && s ? s : "?";
}

static const char *status_name(CUstreamCaptureStatus s)
{
    if (s == CU_STREAM_CAPTURE_STATUS_ACTIVE)
        return "active";
    return s == CU_STREAM_CAPTURE_STATUS_INVALIDATED ? "invalidated" : "none";
}

/* One round; returns 0, or 1 where the context is left with an error (the rest would mean nothing). */
static int round_of(size_t i, CUstreamCaptureMode mode, int blocking, const char *mode_name)
{
    CUstream s;
    CK(cuStreamCreate(&s, blocking ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING));
    CK(cuMemsetD32(dbuf, 0, 2));
    if (!dfree)
        CK(cuMemAlloc(&dfree, BYTES));
    tidy_round(calls[i].call);
    CK(cuEventRecord(ev, other));
    CK(cuCtxSynchronize());
    current = i;
    __atomic_store_n(&go, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&done, 0, __ATOMIC_SEQ_CST);
    pthread_t t;
    if (pthread_create(&t, NULL, thread_b, NULL))
        exit(1);
    CUstreamCaptureMode keep = mode; /* A's own calls in the capture's mode */
    CK(cuThreadExchangeStreamCaptureMode(&keep));
    CUresult begin = cuStreamBeginCapture(s, mode);
    CUresult first = cuMemsetD32Async(dbuf, 1, 1, s);
    __atomic_store_n(&go, 1, __ATOMIC_SEQ_CST);
    uint64_t t0 = fc_prog_now_ns();
    while (!__atomic_load_n(&done, __ATOMIC_SEQ_CST) && fc_prog_now_ns() - t0 < 2000000000ull)
        usleep(50);
    int blocked = !__atomic_load_n(&done, __ATOMIC_SEQ_CST);
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult info = cuStreamIsCapturing(s, &st);
    (void)cuMemsetD32Async(dbuf + 4, 2, 1, s); /* fails where the capture was invalidated */
    CUgraph g = NULL;
    CUresult end = cuStreamEndCapture(s, &g);
    CK(cuThreadExchangeStreamCaptureMode(&keep));
    pthread_join(t, NULL);
    const char *graph = "-";
    if (end == CUDA_SUCCESS && g) {
        CUgraphExec e = NULL;
        unsigned v[2] = {0, 0};
        if (cuGraphInstantiate(&e, g, 0) == CUDA_SUCCESS && cuGraphLaunch(e, s) == CUDA_SUCCESS &&
            cuStreamSynchronize(s) == CUDA_SUCCESS && cuMemcpyDtoH(v, dbuf, sizeof v) == CUDA_SUCCESS)
            graph = v[0] == 1 && v[1] == 2 ? "ran, right" : "ran, WRONG";
        else
            graph = "failed";
        if (e)
            cuGraphExecDestroy(e);
    }
    if (g)
        cuGraphDestroy(g);
    CUresult after = cuCtxSynchronize();
    printf("%-12s %-34s B: %-36s%s capture: %-11s end: %-36s graph: %s%s%s\n", mode_name, calls[i].name,
           err_name(b_result), blocked ? " (blocked until the capture ended)" : "",
           info == CUDA_SUCCESS ? status_name(st) : err_name(info), err_name(end), graph,
           begin == CUDA_SUCCESS && first == CUDA_SUCCESS ? "" : " (A's capture did not begin)",
           after == CUDA_SUCCESS ? "" : " CONTEXT ERROR");
    fflush(stdout);
    cuStreamDestroy(s);
    return after != CUDA_SUCCESS;
}

int main(void)
{
    CUdevice dev;
    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    CK(cuMemAlloc(&dbuf, BYTES));
    CK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    CK(cuGraphCreate(&graph0, 0));
    CUDA_MEMSET_NODE_PARAMS p = memset_params(5);
    CK(cuGraphAddMemsetNode(&gnode, graph0, NULL, 0, &p, ctx));
    CK(cuGraphInstantiate(&gexec, graph0, 0));
    /* blk-: A captures on a blocking stream, which the legacy stream synchronizes with (fifty-fifth session) */
    static const struct {
        CUstreamCaptureMode m;
        int blocking;
        const char *name;
    } modes[] = {{CU_STREAM_CAPTURE_MODE_RELAXED, 0, "relaxed"},
                 {CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, 0, "thread-local"},
                 {CU_STREAM_CAPTURE_MODE_GLOBAL, 0, "global"},
                 {CU_STREAM_CAPTURE_MODE_RELAXED, 1, "blk-relaxed"},
                 {CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, 1, "blk-local"},
                 {CU_STREAM_CAPTURE_MODE_GLOBAL, 1, "blk-global"}};
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
        for (size_t i = 0; i < NCALLS; i++)
            if (round_of(i, modes[m].m, modes[m].blocking, modes[m].name))
                return 2;
    return 0;
}
