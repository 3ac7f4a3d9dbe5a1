/* fc_interop.c: the fake's interop and resource objects. Texture objects over linear device memory
 * (kernels resolve them with fakecuda_tex_ptr when they run; destroying one waits for the queued work,
 * then retires it), external semaphores (a 64-bit value that stream-ordered signals write and waits
 * compare; the other API's side reads and sets it with fakecuda_semaphore_*), and the remaining entry
 * points the shim treats as barriers, implemented as far as a test needs to call them: they check their
 * stream and handles and refuse what the fake does not model. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <string.h>
#include <time.h>

#include "fc_internal.h"

typedef struct {
    CUdeviceptr ptr; /* 0: destroyed */
    int surface;
} fc_tex;

static fc_tex *texes; /* handle h is texes[h - 1] */
static size_t ntexes;

typedef struct {
    fc_obj hdr;
    uint64_t value;
} fc_sem;

static CUresult fc_tex_create(unsigned long long *out, const CUDA_RESOURCE_DESC *rd, int surface)
{
    if (!out || !rd || rd->resType != CU_RESOURCE_TYPE_LINEAR) return CUDA_ERROR_INVALID_VALUE;
    CUdeviceptr p = rd->res.linear.devPtr;
    if (!p || fc_ptr_check((uintptr_t)p, rd->res.linear.sizeInBytes ? rd->res.linear.sizeInBytes : 1) != FC_PTR_DEVICE)
        return CUDA_ERROR_INVALID_VALUE;
    fc_tex t = {p, surface};
    if (fc_vec_push((void **)&texes, &ntexes, sizeof t, &t)) return CUDA_ERROR_OUT_OF_MEMORY;
    *out = ntexes;
    return CUDA_SUCCESS;
}
CUresult cuTexObjectCreate(CUtexObject *t, const CUDA_RESOURCE_DESC *rd, const CUDA_TEXTURE_DESC *td,
                           const CUDA_RESOURCE_VIEW_DESC *vd)
{
    FC_API(1, td ? fc_tex_create(t, rd, 0) : CUDA_ERROR_INVALID_VALUE);
}
CUresult cuSurfObjectCreate(CUsurfObject *s, const CUDA_RESOURCE_DESC *rd) { FC_API(1, fc_tex_create(s, rd, 1)); }

static CUresult fc_tex_destroy(unsigned long long h, int surface)
{
    if (!h || h > ntexes || !texes[h - 1].ptr || texes[h - 1].surface != surface) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = fc_sync_all(); /* work queued before the call may still read it */
    texes[h - 1].ptr = 0;
    return r;
}
CUresult cuTexObjectDestroy(CUtexObject t) { FC_API(1, fc_tex_destroy(t, 0)); }
CUresult cuSurfObjectDestroy(CUsurfObject s) { FC_API(1, fc_tex_destroy(s, 1)); }

CUdeviceptr fakecuda_tex_ptr(unsigned long long h)
{
    /* called by kernels while they run (the fake's lock is held by the thread running them) */
    return h && h <= ntexes ? texes[h - 1].ptr : 0;
}

/* ---- external semaphores ---- */
static CUresult fc_sem_import(CUexternalSemaphore *out, const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *d)
{
    if (!out || !d) return CUDA_ERROR_INVALID_VALUE;
    fc_sem *s = fc_obj_new(sizeof *s, FC_OBJ_SEM);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    *out = (CUexternalSemaphore)s;
    return CUDA_SUCCESS;
}
CUresult cuImportExternalSemaphore(CUexternalSemaphore *s, const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *d)
{
    FC_API(1, fc_sem_import(s, d));
}

static CUresult fc_sem_destroy(CUexternalSemaphore h)
{
    fc_sem *s = (fc_sem *)h;
    if (!fc_obj_valid(s, FC_OBJ_SEM)) return CUDA_ERROR_INVALID_HANDLE;
    CUresult r = fc_sync_all(); /* queued signals and waits still name it */
    s->hdr.dead = 1;
    return r;
}
CUresult cuDestroyExternalSemaphore(CUexternalSemaphore s) { FC_API(1, fc_sem_destroy(s)); }

/* Signals write each semaphore's fence value when the stream reaches them; waits hold the stream until
 * the value is at least theirs. */
static CUresult fc_sem_ops(const CUexternalSemaphore *sems, const unsigned long long *vals, size_t stride,
                           unsigned n, CUstream h, int ptds, int wait)
{
    fc_stream *st;
    CUresult r = fc_stream_resolve(h, ptds, &st);
    if (r) return r;
    if (!sems || !vals || !n) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < n; i++)
        if (!fc_obj_valid(sems[i], FC_OBJ_SEM)) return CUDA_ERROR_INVALID_HANDLE;
    for (unsigned i = 0; i < n && !r; i++)
        r = fc_valop_submit(st, &((fc_sem *)sems[i])->value,
                            *(const unsigned long long *)((const char *)vals + i * stride), CU_STREAM_WAIT_VALUE_GEQ,
                            1, wait);
    return r;
}
/* the fence values of signal or wait parameters, and the stride between them */
#define FENCE_ARGS(p) (p) ? &(p)->params.fence.value : NULL, sizeof *(p)
CUresult cuSignalExternalSemaphoresAsync(const CUexternalSemaphore *s, const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *p,
                                         unsigned int n, CUstream st)
{
    FC_API(1, fc_sem_ops(s, FENCE_ARGS(p), n, st, FC_LEGACY, 0));
}
CUresult cuSignalExternalSemaphoresAsync_ptsz(const CUexternalSemaphore *s,
                                              const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *p, unsigned int n,
                                              CUstream st)
{
    FC_API(1, fc_sem_ops(s, FENCE_ARGS(p), n, st, FC_PTDS, 0));
}
CUresult cuWaitExternalSemaphoresAsync(const CUexternalSemaphore *s, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *p,
                                       unsigned int n, CUstream st)
{
    FC_API(1, fc_sem_ops(s, FENCE_ARGS(p), n, st, FC_LEGACY, 1));
}
CUresult cuWaitExternalSemaphoresAsync_ptsz(const CUexternalSemaphore *s, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *p,
                                            unsigned int n, CUstream st)
{
    FC_API(1, fc_sem_ops(s, FENCE_ARGS(p), n, st, FC_PTDS, 1));
}

unsigned long long fakecuda_semaphore_value(CUexternalSemaphore h)
{
    (void)fc_enter(-1);
    (void)fc_sync_all(); /* the GPU has run whatever was queued by now */
    unsigned long long v = fc_obj_valid(h, FC_OBJ_SEM) ? ((fc_sem *)h)->value : 0;
    fc_leave();
    return v;
}

void fakecuda_semaphore_set(CUexternalSemaphore h, unsigned long long v)
{
    (void)fc_enter(-1);
    if (fc_obj_valid(h, FC_OBJ_SEM)) ((fc_sem *)h)->value = v;
    fc_leave();
}

/* ---- the rest: a stream or handle checked, nothing the fake models ---- */
static CUresult fc_stream_only(CUstream h, int ptds, CUresult then)
{
    fc_stream *st;
    CUresult r = fc_stream_resolve(h, ptds, &st);
    return r ? r : then;
}
#define FC_STREAM_ONLY(name, params, stream, then)                                                 \
    CUresult name params { FC_API(1, fc_stream_only(stream, FC_LEGACY, then)); }                 \
    CUresult name##_ptsz params { FC_API(1, fc_stream_only(stream, FC_PTDS, then)); }
/* no graphics API registers resources here, and no decompression engine or sparse array exists */
FC_STREAM_ONLY(cuGraphicsMapResources, (unsigned int c, CUgraphicsResource *r, CUstream s), s,
               c ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE)
FC_STREAM_ONLY(cuGraphicsUnmapResources, (unsigned int c, CUgraphicsResource *r, CUstream s), s,
               c ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_INVALID_VALUE)
FC_STREAM_ONLY(cuMemBatchDecompressAsync, (CUmemDecompressParams *p, size_t c, unsigned int f, size_t *e, CUstream s),
               s, CUDA_ERROR_NOT_SUPPORTED)
FC_STREAM_ONLY(cuMemMapArrayAsync, (CUarrayMapInfo *m, unsigned int c, CUstream s), s, CUDA_ERROR_NOT_SUPPORTED)
/* managed memory is not modeled: attaching any range is refused */
FC_STREAM_ONLY(cuStreamAttachMemAsync, (CUstream s, CUdeviceptr p, size_t n, unsigned int f), s,
               CUDA_ERROR_INVALID_VALUE)
/* nor is discarding it (the driver refuses where a device lacks concurrent managed access) */
FC_STREAM_ONLY(cuMemDiscardBatchAsync, (CUdeviceptr *d, size_t *n, size_t c, unsigned long long f, CUstream s), s,
               CUDA_ERROR_NOT_SUPPORTED)
FC_STREAM_ONLY(cuMemDiscardAndPrefetchBatchAsync,
               (CUdeviceptr *d, size_t *n, size_t c, CUmemLocation *l, size_t *li, size_t nl, unsigned long long f,
                CUstream s),
               s, CUDA_ERROR_NOT_SUPPORTED)

/* ---- context-wide event records and waits ---- */
/* A record takes in the work the context has at the call (the fake runs it now, so the event is complete),
 * a wait holds back the context's later work until the event's work is done (the fake runs that now).
 * Either breaks a capture under way, as in CUDA, and answers that it did. */
static CUresult fc_ctx_event(CUcontext c, CUevent he, int wait)
{
    fc_event *e = (fc_event *)he;
    if (!fc_obj_valid(c, FC_OBJ_CTX)) return CUDA_ERROR_INVALID_CONTEXT;
    if (!fc_event_valid(e, wait ? "cuCtxWaitEvent" : "cuCtxRecordEvent")) return CUDA_ERROR_INVALID_HANDLE;
    if (!wait && e->ctx != (fc_ctx *)c) return CUDA_ERROR_INVALID_HANDLE; /* of another context */
    CUresult r = fc_captures_break();
    if (r) return r;
    if (wait) return e->recorded && !fc_event_done(e) ? fc_sync_stream(e->rs, e->rseq) : CUDA_SUCCESS;
    r = fc_sync_all();
    e->recorded = 0, e->cap = NULL; /* nothing left to wait for */
    return r;
}

/* A test's rendezvous (fakecuda_ctx_wide_await_capture, fakecuda_stream_sync_await_capture): the next
 * context-wide call (a sync, an event record or wait), or the next stream sync, waits, before it takes the
 * fake's lock, for a capture to begin, and a capture that begins meanwhile stays under way until that call
 * has looked. Its own lock: the waits happen outside the fake's. */
static pthread_mutex_t aw_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t aw_cv = PTHREAD_COND_INITIALIZER;
static int aw_ms;          /* armed: how long the next call waits (ms) */
static int aw_kind;        /* the calls armed: FC_AWAIT_CTX_WIDE or FC_AWAIT_STREAM_SYNC */
static int aw_waiting, aw_no_capture; /* a call waits; it has met no capture yet */
static _Thread_local int aw_mine; /* this thread's call is the one that waits (others pass untouched) */

/* Waits (aw_mu held) while *flag is set, at most ms. */
static void aw_wait_while(const int *flag, unsigned ms)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) t.tv_sec++, t.tv_nsec -= 1000000000L;
    while (*flag && pthread_cond_timedwait(&aw_cv, &aw_mu, &t) != ETIMEDOUT)
        ;
}

/* One of the rendezvous' words, read or written (and the waiters woken) under its lock. */
static int aw_load(const int *w)
{
    pthread_mutex_lock(&aw_mu);
    int v = *w;
    pthread_mutex_unlock(&aw_mu);
    return v;
}
static void aw_store(int *w, int v)
{
    pthread_mutex_lock(&aw_mu);
    *w = v;
    pthread_cond_broadcast(&aw_cv);
    pthread_mutex_unlock(&aw_mu);
}

static void aw_arm(int kind, unsigned ms)
{
    pthread_mutex_lock(&aw_mu);
    aw_kind = kind;
    pthread_mutex_unlock(&aw_mu);
    aw_store(&aw_ms, (int)ms);
}
void fakecuda_ctx_wide_await_capture(unsigned ms) { aw_arm(FC_AWAIT_CTX_WIDE, ms); }
void fakecuda_stream_sync_await_capture(unsigned ms) { aw_arm(FC_AWAIT_STREAM_SYNC, ms); }
int fakecuda_ctx_wide_awaiting(void) { return aw_load(&aw_waiting); }

void fc_await_before(int kind)
{
    pthread_mutex_lock(&aw_mu);
    if (aw_ms && aw_kind == kind) {
        unsigned ms = (unsigned)aw_ms;
        aw_ms = 0, aw_waiting = 1, aw_no_capture = 1, aw_mine = 1;
        pthread_cond_broadcast(&aw_cv);
        aw_wait_while(&aw_no_capture, ms);
    }
    pthread_mutex_unlock(&aw_mu);
}

void fc_await_after(void)
{
    if (!aw_mine) return;
    aw_mine = 0;
    aw_store(&aw_waiting, 0);
}

/* fakecuda_capture_hold: armed for the next capture (how long it may be held), and one held now */
static int ch_ms, ch_holding;

void fakecuda_capture_hold(unsigned ms) { aw_store(&ch_ms, (int)ms); }
int fakecuda_capture_held(void) { return aw_load(&ch_holding); }
void fakecuda_capture_release(void) { aw_store(&ch_holding, 0); }

void fc_capture_began(void)
{
    pthread_mutex_lock(&aw_mu);
    if (aw_waiting && aw_no_capture) {
        aw_no_capture = 0;
        pthread_cond_broadcast(&aw_cv);
        aw_wait_while(&aw_waiting, 10000); /* bounded: a call that never comes does not hang the capture */
    }
    if (ch_ms) {
        unsigned ms = (unsigned)ch_ms;
        ch_ms = 0, ch_holding = 1;
        pthread_cond_broadcast(&aw_cv);
        aw_wait_while(&ch_holding, ms);
        ch_holding = 0;
    }
    pthread_mutex_unlock(&aw_mu);
}

static CUresult fc_ctx_event_api(CUcontext c, CUevent e, int wait)
{
    FC_API_FOR(wait ? "cuCtxWaitEvent" : "cuCtxRecordEvent", 1, fc_ctx_event(c, e, wait));
}
CUresult cuCtxRecordEvent(CUcontext c, CUevent e) { FC_CTX_WIDE(fc_ctx_event_api(c, e, 0)); }
CUresult cuCtxWaitEvent(CUcontext c, CUevent e) { FC_CTX_WIDE(fc_ctx_event_api(c, e, 1)); }
/* the fake makes no green contexts */
CUresult cuGreenCtxRecordEvent(CUgreenCtx c, CUevent e) { FC_API(1, CUDA_ERROR_INVALID_HANDLE); }
CUresult cuGreenCtxWaitEvent(CUgreenCtx c, CUevent e) { FC_API(1, CUDA_ERROR_INVALID_HANDLE); }

CUresult cuArrayDestroy(CUarray a) { FC_API(1, CUDA_ERROR_INVALID_HANDLE); }
CUresult cuMipmappedArrayDestroy(CUmipmappedArray a) { FC_API(1, CUDA_ERROR_INVALID_HANDLE); }
CUresult cuDestroyExternalMemory(CUexternalMemory m) { FC_API(1, CUDA_ERROR_INVALID_HANDLE); }
CUresult cuGraphicsUnregisterResource(CUgraphicsResource r) { FC_API(1, CUDA_ERROR_INVALID_HANDLE); }
CUresult cuMemPoolDestroy(CUmemoryPool p) { FC_API(1, CUDA_ERROR_INVALID_VALUE); }
