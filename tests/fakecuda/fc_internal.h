/* fc_internal.h: shared state and types of fakecuda, the CPU test double for libcuda.so.1.
 * API implementation functions return CUresult (the domain callers see); low-level helpers
 * return 0 or a negative errno. Everything runs under one recursive mutex (fc_enter/fc_leave). */
#ifndef FC_INTERNAL_H
#define FC_INTERNAL_H

#define _GNU_SOURCE
#include <cuda.h>
#include <cupti_driver_cbid.h> /* an enum only: no link dependency on libcupti */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "fakecuda.h"

enum { FC_OBJ_CTX = 1, FC_OBJ_STREAM, FC_OBJ_EVENT, FC_OBJ_MODULE, FC_OBJ_FUNC, FC_OBJ_KERN,
       FC_OBJ_GRAPH, FC_OBJ_NODE, FC_OBJ_EXEC, FC_OBJ_SEM };

/* Every handle starts with this header; handles are validated against a registry (never by
 * dereferencing an unknown pointer) and are kept until exit, so stale handles stay detectable. dead: 1
 * destroyed (or unloaded), FC_DIED_WITH_CTX gone with its context (fc_ctx_gone). */
typedef struct { int kind; int dead; } fc_obj;
enum { FC_DIED_WITH_CTX = 2 };

/* next_recycled: FAKECUDA_REUSE_CONTEXTS */
typedef struct fc_ctx { fc_obj hdr; int primary; struct fc_ctx *next_recycled; } fc_ctx;

typedef struct {
    char *name;
    fakecuda_kernel_fn fn;
    unsigned nparams;
    size_t *sizes, *offsets;
    size_t argsize;
} fc_kernel;

typedef struct fc_module fc_module;
/* max_dyn: CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as last set (0: the default, 48 KiB), shared by a
 * CUkernel and its functions. kern, ctx: a CUkernel's function in context ctx (cuKernelGetFunction: one
 * per kernel and context, as in CUDA), whose module is the library's module in that context. */
typedef struct fc_func {
    fc_obj hdr;
    fc_module *mod;
    int kidx;
    int max_dyn;
    struct fc_func *next, *kern;
    fc_ctx *ctx;
    unsigned gen; /* how often the handle was given out again after an unload (FAKECUDA_REUSE_HANDLES) */
} fc_func;
int fc_max_dyn(const void *f); /* the dynamic shared memory a launch of f may ask for */
/* library: 1 for a library, 2 for a library's module in one context (ctx; in the library's ctxmods, chained
 * by next: cuLibraryGetModule and cuFuncGetModule name it, and nothing unloads it but its library). */
struct fc_module { fc_obj hdr; int library; fc_ctx *ctx; fc_func *funcs; fc_module *ctxmods, *next; };

/* A resolved kernel launch: argument bytes packed at the param-info offsets; gen: f's when it was made (a
 * graph's node whose handle went to another kernel since would run that kernel: fakecuda aborts instead). */
typedef struct {
    fc_func *f;
    unsigned gen;
    fakecuda_dims_t dims;
    unsigned char *buf;
    size_t bufsize;
} fc_launch;

/* A resolved copy, 1D to 3D, between host-visible addresses. */
typedef struct {
    unsigned char *src, *dst;
    size_t width, height, depth, spitch, sheight, dpitch, dheight;
    unsigned char *owned; /* snapshot of a pageable source (src points into it) */
    int src_pageable, dst_pageable;
    int src_dev, dst_dev; /* device-side ranges, rechecked at execution */
    size_t sspan, dspan;
} fc_copy;

typedef struct {
    unsigned char *dst;
    unsigned esize;
    unsigned value;
    size_t width, height, pitch;
} fc_memset;

typedef struct fc_stream fc_stream;
typedef struct { fc_stream *s; uint64_t seq; } fc_dep;

enum { FC_OP_NOP, FC_OP_KERNEL, FC_OP_COPY, FC_OP_MEMSET, FC_OP_EVREC, FC_OP_HOSTFN,
       FC_OP_CALLBACK, FC_OP_WRITEVAL, FC_OP_WAITVAL, FC_OP_FREE };

typedef struct fc_op {
    struct fc_op *next;
    int kind, from_graph;
    uint64_t seq;
    uint32_t correlation; /* CUPTI's id of the traced call that enqueued it (0: none), for its kernel record */
    uint64_t dev_start, dev_end; /* FAKECUDA_DEVICE_NS: when the modeled device runs it (CLOCK_MONOTONIC ns) */
    fc_dep *deps;
    size_t ndeps;
    fc_launch kl;
    fc_copy cp;
    fc_memset ms;
    struct fc_event *ev;
    void (*hostfn)(void *);
    CUstreamCallback cb;
    CUstream cbstream;
    void *ud;
    uint64_t *addr;
    uint64_t val;
    int is64;
    unsigned flags;
    CUdeviceptr freeptr;
} fc_op;

typedef struct fc_capture fc_capture;
typedef struct fc_node fc_node;

struct fc_stream {
    fc_obj hdr;
    fc_ctx *ctx;
    unsigned flags;
    int priority;
    int legacy, perthread;
    uint64_t id;
    fc_op *head, *tail;
    uint64_t last_seq, done_seq, queried_seq;
    uint64_t dev_end, dev_done_end; /* the modeled device's end of its last op submitted, of its last run */
    int destroyed; /* destroyed by the app: leaves fc_g.streams once its work has run */
    fc_capture *cap;
    fc_node **capdeps;
    size_t ncapdeps;
    struct fc_stream *next_recycled; /* FAKECUDA_REUSE_STREAMS */
};

typedef struct fc_event {
    fc_obj hdr;
    fc_ctx *ctx; /* current at its creation */
    unsigned flags;
    fc_stream *rs;
    uint64_t rseq, ts, ts_seq, queried_seq;
    uint64_t dev_at; /* the modeled device reaches its latest record then */
    int recorded;
    fc_capture *cap; /* recorded in this capture: waits join it */
    fc_node **capdeps;
    size_t ncapdeps;
    struct fc_event *next_recycled; /* FAKECUDA_REUSE_EVENTS */
} fc_event;

typedef struct fc_graph {
    fc_obj hdr;
    int is_exec;
    fc_node **nodes;
    size_t n, cap;
    fc_ctx *ctx;
} fc_graph;

struct fc_node {
    fc_obj hdr;
    fc_graph *g;
    CUgraphNodeType type;
    fc_node **deps;
    size_t ndeps, idx;
    fc_node *orig; /* in an exec: the graph node it came from */
    fc_launch kl;
    void **kparams; /* pointers into kl.buf for cuGraphKernelNodeGetParams */
    fc_copy cp;
    fc_memset ms;
    CUDA_MEMSET_NODE_PARAMS msp;
    fc_event *ev;
    void (*hostfn)(void *);
    void *ud;
};

struct fc_capture {
    uint64_t id;
    CUstreamCaptureMode mode;
    pthread_t thread;
    fc_stream *origin;
    fc_graph *g;
    int invalidated, owns_graph, active;
    int unseen; /* fakecuda_unseen_capture's: of no thread, on no stream */
    fc_stream **streams;
    size_t nstreams;
};

typedef struct {
    pthread_mutex_t mu;
    int inited;
    fc_ctx *primary;
    int primary_refs;
    uint64_t rng;
    fakecuda_stats_t stats;
    fc_kernel *kernels;
    size_t nkernels;
    fc_stream **streams; /* every stream that may hold work, legacy and per-thread included */
    size_t nstreams;
    fc_stream *legacy;
    uint64_t seq, clock, next_stream_id, next_capture_id;
    fc_capture **caps;
    size_t ncaps;
    fc_capture **ended_caps; /* ended captures, kept for the events recorded in them (and reachable: no leak) */
    size_t nended_caps;
    CUresult async_err;
    int query_not_ready;
    /* FAKECUDA_REUSE_HANDLES=1: the function handles of an unloaded module are given to the kernels of
     * modules loaded later (a driver may reuse that memory), most recently unloaded first */
    int reuse_handles;
    int no_owner; /* FAKECUDA_NO_OWNER: cuFuncGetModule, cuKernelGetLibrary and cuLibraryGetModule fail */
    struct fc_func *recycled;
    /* FAKECUDA_REUSE_EVENTS=1: destroyed events are handed out again by cuEventCreate, most recently
     * destroyed first */
    int reuse_events;
    struct fc_event *recycled_events;
    int reuse_streams;
    struct fc_stream *recycled_streams;
    /* FAKECUDA_STRICT_EVENTS=1: a destroyed event given to an entry point aborts (fc_event_valid) */
    int strict_events;
    /* FAKECUDA_REUSE_CONTEXTS=1: a destroyed context's handle is given to the next cuCtxCreate, most
     * recently destroyed first (a driver may reuse that memory) */
    int reuse_contexts;
    fc_ctx *recycled_ctxs;
    /* FAKECUDA_CTX_DESTROY_RETURN_US: a successful cuCtxDestroy sleeps this long after its work, before it
     * returns (0: not): another thread's calls meanwhile may get the destroyed context's handle (with
     * FAKECUDA_REUSE_CONTEXTS) while the caller's hooks still wait for the call to return */
    uint64_t ctx_destroy_return_ns;
    unsigned jitter_pct; /* FAKECUDA_JITTER_PCT */
    /* FAKECUDA_STRICT_CONTEXTS (default 1): a stream, event, graph or exec handle of a destroyed context
     * given to an entry point aborts (fc_obj_valid); 0: it is refused as an invalid handle */
    int strict_contexts;
    /* host time an eager launch, memset or copy call and a graph launch take (ns, busy): the host
     * costs a real driver has, so that the shim's probes can tell whether its graphs pay */
    uint64_t launch_ns, graph_ns;
    uint64_t instantiate_ns; /* FAKECUDA_INSTANTIATE_NS: host time of a graph's instantiation, spent before
                              * the fake's lock (a driver builds an exec without holding up other threads) */
    uint64_t host_alloc_ns; /* FAKECUDA_HOST_ALLOC_NS: time a page-locked allocation takes, slept before the
                             * fake's lock (and before its capture rules are checked) */
    /* FAKECUDA_POOL_BYTES: the stream-ordered pool's size (0: no limit). Memory a free enqueued gives back
     * is at once the stream's again, as CUDA's pool reuses it in stream order. */
    size_t pool_limit, pool_in_use;
    /* The modeled device (FAKECUDA_DEVICE_NS, FAKECUDA_GRAPH_DEVICE_NS; off while both are 0): dev_free_at,
     * when it has run everything submitted; dev_graph_first: the next op submitted is a graph's first */
    int dev_on, dev_graph_first, dev_queries; /* dev_queries: FAKECUDA_DEVICE_QUERIES (default 1) */
    uint64_t dev_ns, dev_graph_ns, dev_free_at;
} fc_state;

extern fc_state fc_g;
extern _Thread_local int fc_tl_in_work;
extern _Thread_local CUstreamCaptureMode fc_tl_capmode;
/* The CUPTI correlation id of the entry point this thread is in (0: an untraced one, or none): ops
 * take it when made, so a kernel's activity record names the launch, or the cuGraphLaunch, behind it. */
extern _Thread_local uint32_t fc_tl_correlation;
/* The modeled device: the time the calling thread waits for once out of the fake's lock (a sync's wait
 * does not hold up other threads' calls), raised by fc_dev_until; fc_dev_wait spins to it. */
extern _Thread_local uint64_t fc_tl_wait_until;
static inline void fc_dev_until(uint64_t t)
{
    if (t > fc_tl_wait_until) fc_tl_wait_until = t;
}
void fc_dev_wait(void);

#define FC_LEGACY 0
#define FC_PTDS 1
#define FC_ERR_ASYNC CUDA_ERROR_ILLEGAL_ADDRESS

/* core */
CUresult fc_enter(int need_ctx);
void fc_leave(void);
/* Failure injection for tests of the shim's error paths: FAKECUDA_FAIL=name[:n[-m]][,...] makes the
 * entry point `name` return CUDA_ERROR_UNKNOWN (doing nothing) from its n-th call on (n = 1 when
 * omitted), up to its m-th where given. */
int fc_inject(const char *func);
/* The body of every entry point. One the real driver reports to CUPTI names its callback id (cbid
 * nonzero) and reports entry and exit to the stand-in libcupti, outside the lock: the subscriber's
 * callback may call the driver. The call's correlation id is current on the thread only between the
 * two reports, so calls the callbacks make (nested on the thread) stamp their own ids, and the outer
 * one is back when they return; an untraced entry point makes 0 current. */
#define FC_API_INJ_(cbid, name, func, need_ctx, expr)                                              \
    do {                                                                                           \
        uint32_t fc_corr_ = (cbid) ? fc_cupti_api(cbid, name, 0) : 0;                              \
        uint32_t fc_outer_ = fc_tl_correlation;                                                    \
        fc_tl_correlation = fc_corr_;                                                              \
        CUresult fc_r_ = fc_enter(need_ctx);                                                       \
        if (fc_r_ == CUDA_SUCCESS && fc_inject(func)) fc_r_ = CUDA_ERROR_UNKNOWN;                  \
        else if (fc_r_ == CUDA_SUCCESS) fc_r_ = (expr);                                            \
        fc_leave();                                                                                \
        fc_dev_wait();                                                                             \
        fc_tl_correlation = fc_outer_;                                                             \
        if (cbid) fc_cupti_api(cbid, name, 1);                                                     \
        return fc_r_;                                                                              \
    } while (0)
#define FC_API_AS_(cbid, name, need_ctx, expr) FC_API_INJ_(cbid, name, __func__, need_ctx, expr)
#define FC_API(need_ctx, expr) FC_API_AS_(0, "", need_ctx, expr)
/* The body of a helper that does the driver's part of entry point func (FAKECUDA_FAIL names func), where
 * the entry point does more outside the lock. */
#define FC_API_FOR(func, need_ctx, expr) FC_API_INJ_(0, "", func, need_ctx, expr)
/* The entry points CUPTI traces (launches, copies, memsets, syncs and queries, event record and wait,
 * graph launch, host functions): name is the ABI name, which is also its callback id's name. */
#define FC_TRACED(name, need_ctx, expr) FC_API_AS_(CUPTI_DRIVER_TRACE_CBID_##name, #name, need_ctx, expr)
/* ... in a helper of entry point `name` that does more outside the lock */
#define FC_TRACED_FOR(name, need_ctx, expr) FC_API_INJ_(CUPTI_DRIVER_TRACE_CBID_##name, #name, #name, need_ctx, expr)
int fc_obj_register(void *obj, int kind);
int fc_obj_valid(const void *obj, int kind);
int fc_event_valid(const void *e, const char *call);
void *fc_obj_new(size_t size, int kind);
fc_ctx *fc_cur_ctx(void);
uint64_t fc_rand(void);
int fc_vec_push(void **arr, size_t *n, size_t elem, const void *item);
/* Removes item from an array of pointers, keeping the others' order (nothing if absent). */
void fc_vec_remove(void **arr, size_t *n, const void *item);
const fc_kernel *fc_func_kernel(const fc_func *f);
CUresult fc_func_resolve(CUfunction h, fc_func **out);
int fc_kernel_pack(const fc_kernel *k, void **kernelParams, void **extra, fc_launch *out, CUresult *err);

/* memory */
int fc_mem_init(void);
/* Context c was destroyed: its device and page-locked allocations go with it (fc_mem.c). */
void fc_mem_ctx_gone(const fc_ctx *c);
enum { FC_PTR_PAGEABLE, FC_PTR_DEVICE, FC_PTR_PINNED, FC_PTR_BAD };
int fc_ptr_check(uintptr_t p, size_t n);
CUresult fc_copy_exec(fc_copy *c);
void fc_memset_exec(const fc_memset *m);
CUresult fc_copy_from3d(const CUDA_MEMCPY3D *p, fc_copy *out);
CUresult fc_memset_build(CUdeviceptr dst, size_t pitch, unsigned esize, unsigned value, size_t w,
                         size_t h, fc_memset *out);
CUresult fc_mem_free_now(CUdeviceptr p);

/* streams and scheduling */
CUresult fc_stream_resolve(CUstream h, int ptds, fc_stream **out);
fc_op *fc_op_new(int kind);
void fc_op_free(fc_op *op);
CUresult fc_submit(fc_stream *s, fc_op *op, uint64_t *seq);
/* A stream write (wait: a wait, with a CU_STREAM_WAIT_VALUE_* comparison in flags) of a 32- or 64-bit
 * value at addr: stream memory operations, external semaphores. Not under capture (no such nodes). */
CUresult fc_valop_submit(fc_stream *s, void *addr, uint64_t v, unsigned flags, int is64, int wait);
uint64_t fc_now_ns(void); /* CLOCK_MONOTONIC */
void fc_spend(uint64_t ns);
/* FAKECUDA_INSTANTIATE_NS of host time, outside the fake's lock. */
void fc_spend_instantiate(void);
/* FAKECUDA_HOST_ALLOC_NS slept, outside the fake's lock. */
void fc_host_alloc_wait(void);
CUresult fc_copy_submit(fc_copy *c, CUstream h, int ptds, int sync);
CUresult fc_memset_submit(fc_memset *m, CUstream h, int ptds, int sync);
CUresult fc_sync_stream(fc_stream *s, uint64_t seq);
CUresult fc_sync_all(void);
int fc_event_done(const fc_event *e);
CUresult fc_legacy_capture_check(fc_stream *s, int invalidate);
void fc_launch_free(fc_launch *kl);
int fc_launch_dup(const fc_launch *src, fc_launch *dst);

/* cupti: reports to the stand-in libcupti of tests/cupti, when one is loaded. fc_cupti_api returns the
 * call's correlation id (0 while no stand-in is loaded). */
uint32_t fc_cupti_api(uint32_t cbid, const char *name, int site);
/* A graph exec is launched (the stand-in models CUPTI's hazard there: fake_cupti.h). */
void fc_cupti_graph(const void *exec);
/* A kernel's clock: the start, taken before it runs, and the report, after it ran (under the lock),
 * with the correlation id of the op that ran it. */
uint64_t fc_cupti_kernel_start(void);
void fc_cupti_kernel_end(uint64_t start, uint32_t correlation);
void fc_cupti_kernel_span(uint64_t start, uint64_t end, uint32_t correlation);

/* graphs and capture */
fc_node *fc_node_new(fc_graph *g, CUgraphNodeType type, fc_node *const *deps, size_t ndeps);
CUresult fc_capture_op(fc_stream *s, fc_op *op);
CUresult fc_capture_event_record(fc_stream *s, fc_event *e, int external);
CUresult fc_capture_wait_event(fc_stream *s, fc_event *e, int external);
void fc_capture_invalidate(fc_capture *c);
/* Every capture under way is invalidated: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED where there was one. */
CUresult fc_captures_break(void);
/* A capture began (after its begin call, outside the fake's lock): where a context-wide call or a stream
 * sync waits for one (fakecuda_ctx_wide_await_capture, fakecuda_stream_sync_await_capture), it stays under
 * way until that call has looked; where a hold is armed (fakecuda_capture_hold), until the test releases
 * it. */
void fc_capture_began(void);
/* Around a context-wide call (cuCtxSynchronize and its _v2, cuCtxRecordEvent, cuCtxWaitEvent) or a stream
 * sync, outside the fake's lock: the test's rendezvous, where armed for that kind of call. */
enum { FC_AWAIT_CTX_WIDE, FC_AWAIT_STREAM_SYNC };
void fc_await_before(int kind);
void fc_await_after(void);
/* The body of an entry point of that kind: expr (its helper's call) inside the rendezvous. */
#define FC_AWAITED(kind, expr)                                                                     \
    do {                                                                                           \
        fc_await_before(kind);                                                                     \
        CUresult fc_w_ = (expr);                                                                   \
        fc_await_after();                                                                          \
        return fc_w_;                                                                              \
    } while (0)
#define FC_CTX_WIDE(expr) FC_AWAITED(FC_AWAIT_CTX_WIDE, expr)
CUresult fc_capture_unsafe_check(void);

#endif
