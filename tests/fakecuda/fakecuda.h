/* fakecuda.h: TEST DOUBLE, NOT A DRIVER. The test-only API of fakecuda, a CPU stand-in for
 * libcuda.so.1 that CI links tests against (or finds with LD_LIBRARY_PATH) when there is no GPU.
 * Nothing here runs on a GPU and nothing here may ever ship with the shim.
 *
 * Why it exists: the shim's correctness depends on ordering (deferral, replay, streams, events,
 * capture). fakecuda executes work later than the call, per stream, in an order chosen by a
 * seeded PRNG among the orders CUDA allows, so a program (or shim) that forgets a dependency gets
 * seed-dependent results instead of passing by luck.
 *
 * How it behaves (the choices a test can rely on):
 * - One device, one primary context; cuCtxCreate contexts also work. cuInit first, or
 *   CUDA_ERROR_NOT_INITIALIZED; no current context gives CUDA_ERROR_INVALID_CONTEXT.
 * - Device memory lives in a private PROT_NONE reservation: CUdeviceptr values never overlap host
 *   heap addresses, kernels dereference them directly, freed blocks go back to PROT_NONE and are
 *   never handed out again, so a use after free is an error (copies, memsets, frees) or a fault
 *   (kernels). New blocks are filled with 0xCD, as real device memory is not zeroed.
 * - Work is queued per stream and runs only when observed: synchronize, query, sync copies and
 *   memsets, D2H copies into pageable memory, cuMemFree, module unload. Pending work is dropped
 *   at exit. Ready work from all streams is interleaved by a PRNG (FAKECUDA_SEED, default 1)
 *   that respects FIFO order per stream, cuStreamWaitEvent, and the legacy default stream's
 *   implicit synchronization with blocking streams (the per-thread default streams are blocking).
 * - Queries run the pending work and return CUDA_SUCCESS; with FAKECUDA_QUERY_NOT_READY=1 the
 *   first query of a not-yet-complete stream position or event record returns NOT_READY. A stream
 *   whose pending work is only waits for events already complete is complete (a GPU resolves such
 *   a wait as it reaches it): a stream query retires them first.
 * - Async copies from pageable host memory snapshot the source at the call; from pinned memory
 *   they read it at execution time.
 * - Kernels are C functions registered by name; every module image is a NUL-terminated string
 *   starting with "fakecuda-module" and every module or library exposes every registered kernel.
 *   CUfunction and CUkernel are distinct handles with the real driver's rules.
 * - Errors found while executing queued work (a copy into memory freed in stream order) are
 *   reported by the next synchronizing call as CUDA_ERROR_ILLEGAL_ADDRESS, once (not sticky).
 * - cuGraphLaunch on a capturing stream returns CUDA_ERROR_NOT_SUPPORTED (no child-graph nodes).
 * - Host functions and kernels must not call the driver (CUDA forbids it): such calls return
 *   CUDA_ERROR_NOT_PERMITTED.
 * - One recursive mutex guards the whole fake: any thread may call in at any time.
 * - CUPTI: when the stand-in libcupti of tests/cupti is loaded (however: linked, or dlopen'ed local),
 *   the entry points CUPTI traces (launches, copies, memsets, syncs and queries, event record and wait,
 *   graph launch, host functions) report API entry and exit to it under their real callback ids, and
 *   every kernel run (eager or from a graph) is reported with its CLOCK_MONOTONIC start and end and the
 *   correlation id of the call that launched it (for a graph's kernel, the cuGraphLaunch).
 * - Failure injection for tests of error paths: FAKECUDA_FAIL=name[:n[-m]][,name[:n[-m]]...] makes
 *   the entry point `name` (its ABI name) return CUDA_ERROR_UNKNOWN, doing nothing, from its n-th call
 *   on (up to its m-th, where given).
 * - Host costs: every kernel launch, memset and copy call spins FAKECUDA_LAUNCH_NS on the calling
 *   thread (default 2000), every graph launch FAKECUDA_GRAPH_NS (default 3000): about what a real
 *   driver costs the host, so that graphs of several launches pay on the fake as they do on a GPU (the
 *   shim times them against plain launches, AUTOGRAPH_PROBE); a test can make them lose, or set 0.
 *   cuGraphInstantiateWithFlags spins FAKECUDA_INSTANTIATE_NS (default 0) before it takes the fake's lock,
 *   so that other threads' calls go on meanwhile (the H200's 50-300 us builds, to compare where they run).
 *   cuMemAllocHost and cuMemHostAlloc sleep FAKECUDA_HOST_ALLOC_NS (default 0) before they take the lock
 *   and apply the capture rules: page-locking takes milliseconds on a real host, and a capture another
 *   thread begins meanwhile is one the allocation meets.
 * - Capture rules for potentially unsafe calls (allocations, frees, host registration, event and stream
 *   queries and syncs, an executable graph's instantiation and destruction: the GPU's table,
 *   tests/fakecuda/capture_rules.expected): where the calling thread's mode
 *   (cuThreadExchangeStreamCaptureMode) and an active capture forbid the call, it fails with
 *   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and that capture is invalidated, as in CUDA.
 * - FAKECUDA_REUSE_HANDLES=1 gives the function handles of an unloaded module to the kernels of the
 *   modules loaded after it (a driver may reuse that memory), most recently unloaded first.
 * - FAKECUDA_NO_OWNER=1 makes cuFuncGetModule, cuKernelGetLibrary and cuLibraryGetModule fail, as a driver
 *   that cannot say whose a kernel is (a library is its own module in every context otherwise).
 * - FAKECUDA_REUSE_STREAMS=1 gives the handle of a destroyed stream whose work has run to the next stream
 *   made (its flags may differ), as a driver may.
 * - FAKECUDA_REUSE_EVENTS=1 gives the handles of destroyed events to the events made after them, most
 *   recently destroyed first (a driver may reuse that memory).
 * - FAKECUDA_STRICT_EVENTS=1: an event handle that was destroyed (and not handed out again) given to
 *   cuEventRecord, cuStreamWaitEvent, cuEventQuery, cuEventSynchronize or cuEventDestroy aborts the
 *   process with a message: what a shim that issued held work naming an event after its destroy did.
 * - Contexts: destroying a created context (cuCtxDestroy) takes what it made with it, as in CUDA: its
 *   device and page-locked allocations are freed (the page-locked pages made unreadable and unwritable),
 *   and its streams, events, graphs and execs are handles of a destroyed context, which abort the process
 *   with a message where they reach an entry point (FAKECUDA_STRICT_CONTEXTS, default 1; 0: refused as
 *   invalid handles); the modules it loaded are unloaded (FAKECUDA_REUSE_HANDLES then gives their
 *   functions' handles to later kernels). A primary context's reset keeps its state (a program may go on
 *   with it).
 *   FAKECUDA_REUSE_CONTEXTS=1 gives a destroyed context's handle to the next context made, most recently
 *   destroyed first (a driver may reuse that memory). FAKECUDA_CTX_DESTROY_RETURN_US=U: a successful
 *   cuCtxDestroy sleeps U microseconds after its work is done, before it returns, so that other threads'
 *   calls (a new context given the handle among them) come while the caller's hooks wait for it.
 * - FAKECUDA_JITTER_PCT=p (default 0): p% of the calls sleep 1-64 us before they take the fake's lock, so
 *   that threads' calls interleave as on a host of many cores, where a two-CPU machine runs them more in
 *   turn (difftest.directed.*_jitter, difftest.jitter).
 * - A modeled device (FAKECUDA_DEVICE_NS, default 0: off): the fake still runs work when it is observed,
 *   but each kernel, copy and memset also takes FAKECUDA_DEVICE_NS of a device that runs one operation at
 *   a time, from its launch call or when the operation before it ends, in the order submitted; a graph
 *   starts FAKECUDA_GRAPH_DEVICE_NS late (either variable turns the model on). A sync, a blocking copy or
 *   memset and every other wait for work returns no earlier than the device gets there, spinning outside
 *   the fake's lock (other threads' calls go on meanwhile); a stream or event query before then answers
 *   CUDA_ERROR_NOT_READY (with FAKECUDA_DEVICE_QUERIES=0 it runs the work and answers CUDA_SUCCESS, as
 *   without the model: for programs whose results depend on their queries' answers, which the times then
 *   decide); cuEventElapsedTime gives the modeled time between two records, and the stand-in libcupti
 *   each kernel's modeled start and end. So a program
 *   whose host outruns its kernels waits at its syncs as on a GPU, and work the shim holds back past the
 *   moment it would have run shows in the time (tests/engine/model_ab.sh).
 * - FAKECUDA_POOL_BYTES limits the memory cuMemAllocAsync hands out and no enqueued free has given
 *   back (a free gives it back when enqueued, as CUDA's pool reuses memory in the stream's order);
 *   beyond it the allocation fails with CUDA_ERROR_OUT_OF_MEMORY. Unset or 0: no limit.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <cuda.h>
#include <stddef.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    unsigned gx, gy, gz, bx, by, bz;
    unsigned smem;
} fakecuda_dims_t;

/* args[i] points to a private copy of parameter i's bytes made at launch time. The function runs
 * once per launch and loops over the grid itself. */
typedef void (*fakecuda_kernel_fn)(void **args, const fakecuda_dims_t *dims);

/* Registers (or, for an existing name, replaces) a kernel visible through every module and
 * library. Returns 0 or a negative errno (-EINVAL, -ENOMEM). Callable before cuInit. */
int fakecuda_register_kernel(const char *name, fakecuda_kernel_fn fn, unsigned nparams,
                             const size_t *param_sizes);

/* Reseeds the scheduler's PRNG (also settable with FAKECUDA_SEED before the first call). */
void fakecuda_set_seed(unsigned seed);

/* Turns FAKECUDA_QUERY_NOT_READY's behaviour on or off from here on (a test that needs it sets it
 * itself, whatever the environment). */
void fakecuda_set_query_not_ready(int on);

/* The calling thread's stream and event queries answer from the state of the work now, without running
 * any of it and without FAKECUDA_QUERY_NOT_READY's bookkeeping (a polling thread that must not change
 * what the program's own queries answer: queries run the queued work here, a real GPU runs it anyway). */
void fakecuda_thread_passive(int on);

/* Runs every queued operation now, as a GPU runs its work without being asked. Not a CUDA entry point:
 * a shim under test never sees it (a test's way to let work run that no sync of the program asks for). */
void fakecuda_run_all(void);

/* Sets the host costs of launches (kernels, memsets, copies) and of graph launches, in ns (as
 * FAKECUDA_LAUNCH_NS and FAKECUDA_GRAPH_NS do at start-up): a program can change them mid-run. */
void fakecuda_set_host_costs(unsigned long long launch_ns, unsigned long long graph_ns);
/* The host costs in force (to set them back after a change). */
void fakecuda_get_host_costs(unsigned long long *launch_ns, unsigned long long *graph_ns);

/* Exactly cuLaunchKernel, CUPTI reports included (under cuLaunchKernel's callback id and name), through
 * a name the shim does not hook: a launch that reaches the driver by a route no hook sees (a pointer
 * read from libcuda's symbol table, say), for the tests of the shim's CUPTI coverage guard. */
CUresult fakecuda_unhooked_launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                  unsigned int by, unsigned int bz, unsigned int smem, CUstream s, void **kp,
                                  void **extra);

/* Exactly cuFuncSetAttribute, through a name the shim does not hook: a kernel's limit changed where no hook
 * sees it, so that a launch the shim holds back fails when it is issued (the tests of what the shim does
 * when held work fails to re-issue). */
CUresult fakecuda_unhooked_func_set_attribute(CUfunction f, CUfunction_attribute a, int v);

/* The device address behind a texture or surface object of linear memory (cuTexObjectCreate,
 * cuSurfObjectCreate), for a kernel to read through while it runs; 0 once the object is destroyed. */
CUdeviceptr fakecuda_tex_ptr(unsigned long long object);

/* The one resource the fake's texture and surface objects take: bytes of linear device memory (floats). */
static inline CUDA_RESOURCE_DESC fakecuda_linear_resource(CUdeviceptr p, size_t bytes)
{
    CUDA_RESOURCE_DESC rd;
    memset(&rd, 0, sizeof(rd));
    rd.resType = CU_RESOURCE_TYPE_LINEAR;
    rd.res.linear.devPtr = p;
    rd.res.linear.format = CU_AD_FORMAT_FLOAT;
    rd.res.linear.numChannels = 1;
    rd.res.linear.sizeInBytes = bytes;
    return rd;
}

/* An external semaphore's value as the other API sees it (cuImportExternalSemaphore: any handle type).
 * Reading it first runs the queued work, as a GPU would have by then; setting it is the other API's
 * signal, which cuWaitExternalSemaphoresAsync waits for. */
unsigned long long fakecuda_semaphore_value(CUexternalSemaphore sem);
void fakecuda_semaphore_set(CUexternalSemaphore sem, unsigned long long value);

/* Arms a rendezvous: the next context-wide call (cuCtxSynchronize or its _v2, cuCtxRecordEvent,
 * cuCtxWaitEvent) waits up to ms, before it does anything, for a stream capture to begin
 * (cuStreamBeginCapture_v2), and such a capture stays under way until that call has looked at it;
 * fakecuda_ctx_wide_awaiting says whether such a call waits now. */
void fakecuda_ctx_wide_await_capture(unsigned ms);
/* The same for the next stream sync (cuStreamSynchronize, _ptsz) instead; fakecuda_ctx_wide_awaiting says
 * whether such a call waits now. Either arming replaces the other; ms 0 disarms. */
void fakecuda_stream_sync_await_capture(unsigned ms);
int fakecuda_ctx_wide_awaiting(void);
/* A global-mode capture under way that the program's threads did not begin through the driver API, so
 * that no hook saw it begin (the library counts a capture before the barrier it makes for it, so held work
 * cannot otherwise meet one; this stands for any that it did not order, as a last line): on 1 begins it,
 * on 0 ends it. While it is
 * under way, the potentially unsafe calls of threads in the global mode are refused and break it, and
 * context-wide calls in any mode. Returns 1 where it was under way and broken. */
int fakecuda_unseen_capture(int on);
/* Arms a hold: the next stream capture to begin stays under way (its cuStreamBeginCapture_v2 returns only
 * then) until fakecuda_capture_release, or ms at most; fakecuda_capture_held says whether one is held now. */
void fakecuda_capture_hold(unsigned ms);
int fakecuda_capture_held(void);
void fakecuda_capture_release(void);

typedef struct {
    unsigned long long kernels_executed; /* kernels run, eager or from graphs */
    unsigned long long graphs_launched;  /* cuGraphLaunch calls accepted */
    unsigned long long nodes_executed;   /* operations run that came from graph launches */
    unsigned long long syncs;            /* stream/event/context synchronize calls */
    unsigned long long ops_executed;     /* every queued operation run */
    unsigned long long kernels_queued;   /* kernels queued to a stream (not captured), eager or as graph
                                          * nodes: what another process could see progress on */
    unsigned long long streams_listed;   /* now: streams that submissions and steps walk (the legacy
                                          * stream, live ones, destroyed ones with work still queued) */
    unsigned long long captures_listed;  /* now: captures under way */
} fakecuda_stats_t;

void fakecuda_stats(fakecuda_stats_t *out);
void fakecuda_reset_stats(void);

#ifdef __cplusplus
}
#endif
#endif
