/* fc_stream.c: fakecuda (CPU test double for libcuda.so.1) streams, events, the scheduler that
 * runs queued work in a seeded random order that respects CUDA's dependencies, kernel launches,
 * host functions and stream memory operations. */
#include "fc_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local fc_stream *tl_pts; /* this thread's per-thread default stream */
static _Thread_local int tl_passive;     /* fakecuda_thread_passive: this thread's queries run nothing */

void fakecuda_thread_passive(int on) { tl_passive = on != 0; }

static fc_stream *fc_stream_new(unsigned flags, int prio)
{
    fc_stream *s = fc_obj_new(sizeof(*s), FC_OBJ_STREAM);
    if (!s) return NULL;
    s->ctx = fc_cur_ctx() ? fc_cur_ctx() : fc_g.primary;
    s->flags = flags;
    s->priority = prio;
    s->id = ++fc_g.next_stream_id;
    if (fc_vec_push((void **)&fc_g.streams, &fc_g.nstreams, sizeof(s), &s)) {
        s->hdr.dead = 1;
        return NULL;
    }
    return s;
}

CUresult fc_stream_resolve(CUstream h, int ptds, fc_stream **out)
{
    if (!h) h = ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    if (h == CU_STREAM_LEGACY) {
        *out = fc_g.legacy;
        return CUDA_SUCCESS;
    }
    if (h == CU_STREAM_PER_THREAD) {
        if (!tl_pts) {
            tl_pts = fc_stream_new(0, 0);
            if (!tl_pts) return CUDA_ERROR_OUT_OF_MEMORY;
            tl_pts->perthread = 1;
            tl_pts->hdr.dead = 1; /* named only by 0 / CU_STREAM_PER_THREAD, never as a handle */
        }
        *out = tl_pts;
        return CUDA_SUCCESS;
    }
    if (!fc_obj_valid(h, FC_OBJ_STREAM)) return CUDA_ERROR_INVALID_HANDLE;
    *out = (fc_stream *)h;
    return CUDA_SUCCESS;
}

/* An op belongs to the traced call that makes it: a launch's kernel, or every node a cuGraphLaunch
 * enqueues, which CUPTI too correlates with the cuGraphLaunch. */
fc_op *fc_op_new(int kind)
{
    fc_op *op = calloc(1, sizeof(*op));
    if (op) op->kind = kind, op->correlation = fc_tl_correlation;
    return op;
}

void fc_launch_free(fc_launch *kl)
{
    free(kl->buf);
    kl->buf = NULL;
}

int fc_launch_dup(const fc_launch *src, fc_launch *dst)
{
    *dst = *src;
    dst->buf = malloc(src->bufsize ? src->bufsize : 1);
    if (!dst->buf) return -1;
    memcpy(dst->buf, src->buf, src->bufsize);
    return 0;
}

void fc_op_free(fc_op *op)
{
    if (!op) return;
    fc_launch_free(&op->kl);
    free(op->cp.owned);
    free(op->deps);
    free(op);
}

static int fc_op_add_dep(fc_op *op, fc_stream *s, uint64_t seq)
{
    fc_dep d = {s, seq};
    return fc_vec_push((void **)&op->deps, &op->ndeps, sizeof(d), &d);
}

static int fc_blocking(const fc_stream *s) { return !s->legacy && !(s->flags & CU_STREAM_NON_BLOCKING); }

/* The legacy stream synchronizes with every blocking stream, so touching it while a blocking
 * stream captures would add an implicit dependency on the capture: refused, and the capture broken, in
 * every capture mode and whatever the calling thread's mode (the GPU's table, capture_rules.expected:
 * the blk-* rows, relaxed-B among them). The fake has one legacy stream for every context, so it refuses
 * too where the capture is another context's (stricter than CUDA, whose legacy stream is per context). */
CUresult fc_legacy_capture_check(fc_stream *s, int invalidate)
{
    if (!s->legacy) return CUDA_SUCCESS;
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < fc_g.ncaps; i++) {
        fc_capture *c = fc_g.caps[i];
        if (!c->active) continue;
        for (size_t j = 0; j < c->nstreams; j++)
            if (fc_blocking(c->streams[j]) && c->streams[j]->cap == c) {
                if (invalidate) fc_capture_invalidate(c);
                r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
                break;
            }
    }
    return r;
}

CUresult fc_submit(fc_stream *s, fc_op *op, uint64_t *seq)
{
    if (s->cap) return fc_capture_op(s, op);
    CUresult r = fc_legacy_capture_check(s, 1);
    if (r) {
        fc_op_free(op);
        return r;
    }
    int rc = 0;
    if (s->legacy) {
        for (size_t i = 0; i < fc_g.nstreams; i++) {
            fc_stream *t = fc_g.streams[i];
            if (fc_blocking(t) && t->last_seq > t->done_seq) rc |= fc_op_add_dep(op, t, t->last_seq);
        }
    } else if (fc_blocking(s) && fc_g.legacy->last_seq > fc_g.legacy->done_seq) {
        rc |= fc_op_add_dep(op, fc_g.legacy, fc_g.legacy->last_seq);
    }
    if (rc) {
        fc_op_free(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    op->seq = ++fc_g.seq;
    if (fc_g.dev_on) { /* one op at a time, in the order submitted, from now or when the last one ends */
        uint64_t now = fc_now_ns();
        op->dev_start = now > fc_g.dev_free_at ? now : fc_g.dev_free_at;
        if (fc_g.dev_graph_first) op->dev_start += fc_g.dev_graph_ns, fc_g.dev_graph_first = 0;
        int busy = op->kind == FC_OP_KERNEL || op->kind == FC_OP_COPY || op->kind == FC_OP_MEMSET;
        op->dev_end = op->dev_start + (busy ? fc_g.dev_ns : 0);
        fc_g.dev_free_at = s->dev_end = op->dev_end;
        if (op->kind == FC_OP_EVREC) op->ev->dev_at = op->dev_end;
    }
    if (op->kind == FC_OP_KERNEL) fc_g.stats.kernels_queued++;
    if (s->tail) s->tail->next = op;
    else s->head = op;
    s->tail = op;
    s->last_seq = op->seq;
    if (seq) *seq = op->seq;
    return CUDA_SUCCESS;
}

static int fc_op_ready(const fc_op *op)
{
    for (size_t i = 0; i < op->ndeps; i++)
        if (op->deps[i].s->done_seq < op->deps[i].seq) return 0;
    if (op->kind == FC_OP_WAITVAL) {
        uint64_t v;
        if (op->is64) v = *(volatile uint64_t *)op->addr;
        else v = *(volatile uint32_t *)op->addr;
        switch (op->flags & 3) {
        case CU_STREAM_WAIT_VALUE_GEQ: return op->is64 ? (int64_t)(v - op->val) >= 0 : (int32_t)(uint32_t)(v - op->val) >= 0;
        case CU_STREAM_WAIT_VALUE_EQ: return v == op->val;
        case CU_STREAM_WAIT_VALUE_AND: return (v & op->val) != 0;
        default: return op->is64 ? ~(v | op->val) != 0 : (uint32_t)~(v | op->val) != 0;
        }
    }
    return 1;
}

static void fc_exec_head(fc_stream *s)
{
    fc_op *op = s->head;
    s->head = op->next;
    if (!s->head) s->tail = NULL;
    CUresult r = CUDA_SUCCESS;
    fc_g.clock++;
    fc_tl_in_work = 1; /* kernels and host functions may not call back into the driver */
    switch (op->kind) {
    case FC_OP_KERNEL: {
        const fc_kernel *k = fc_func_kernel(op->kl.f);
        void *args[k->nparams ? k->nparams : 1];
        for (unsigned i = 0; i < k->nparams; i++) args[i] = op->kl.buf + k->offsets[i];
        uint64_t t0 = fc_cupti_kernel_start();
        k->fn(args, &op->kl.dims);
        if (fc_g.dev_on) fc_cupti_kernel_span(op->dev_start, op->dev_end, op->correlation);
        else fc_cupti_kernel_end(t0, op->correlation);
        fc_g.stats.kernels_executed++;
        break;
    }
    case FC_OP_COPY: r = fc_copy_exec(&op->cp); break;
    case FC_OP_MEMSET: fc_memset_exec(&op->ms); break;
    case FC_OP_EVREC:
        if (op->ev->rs == s && op->ev->rseq == op->seq) op->ev->ts = fc_g.clock, op->ev->ts_seq = op->seq;
        break;
    case FC_OP_HOSTFN: op->hostfn(op->ud); break;
    case FC_OP_CALLBACK: op->cb(op->cbstream, CUDA_SUCCESS, op->ud); break;
    case FC_OP_WRITEVAL:
        if (op->is64) *(volatile uint64_t *)op->addr = op->val;
        else *(volatile uint32_t *)op->addr = (uint32_t)op->val;
        break;
    case FC_OP_FREE: r = fc_mem_free_now(op->freeptr); break;
    default: break;
    }
    fc_tl_in_work = 0;
    if (r && !fc_g.async_err) fc_g.async_err = r;
    fc_g.stats.ops_executed++;
    if (op->from_graph) fc_g.stats.nodes_executed++;
    s->done_seq = op->seq;
    s->dev_done_end = op->dev_end;
    fc_op_free(op);
    /* A destroyed stream leaves the list with its last work (every submission and step walks the list;
     * ops that wait on it keep the object, which stays allocated). */
    if (!s->head && s->destroyed) fc_vec_remove((void **)fc_g.streams, &fc_g.nstreams, s);
}

/* Runs ready work, picking a random ready stream each step, until target has run past seq
 * (target NULL: until every stream is idle). Running unrelated work early is always legal. */
static CUresult fc_run(fc_stream *target, uint64_t seq)
{
    static fc_stream **ready;
    static size_t ready_cap;
    for (;;) {
        if (target && target->done_seq >= seq) break;
        if (ready_cap < fc_g.nstreams) {
            free(ready);
            ready_cap = fc_g.nstreams * 2;
            ready = malloc(ready_cap * sizeof(*ready));
            if (!ready) return ready_cap = 0, CUDA_ERROR_OUT_OF_MEMORY;
        }
        size_t n = 0, busy = 0;
        for (size_t i = 0; i < fc_g.nstreams; i++) {
            fc_stream *t = fc_g.streams[i];
            if (!t->head) continue;
            busy++;
            if (fc_op_ready(t->head)) ready[n++] = t;
        }
        if (!busy) break;
        if (!n) {
            fprintf(stderr, "fakecuda: deadlock: queued work waits on something that never happens\n");
            return CUDA_ERROR_LAUNCH_TIMEOUT;
        }
        fc_exec_head(ready[fc_rand() % n]);
    }
    /* the modeled device reaches the work waited for only then (the last op run of the target: its
     * ops run in order, and the loop stops at seq; every stream's last for a context-wide wait) */
    if (fc_g.dev_on) fc_dev_until(target ? target->dev_done_end : fc_g.dev_free_at);
    CUresult r = fc_g.async_err;
    fc_g.async_err = CUDA_SUCCESS;
    return r;
}

CUresult fc_sync_stream(fc_stream *s, uint64_t seq) { return fc_run(s, seq); }
CUresult fc_sync_all(void) { return fc_run(NULL, 0); }

CUresult fc_copy_submit(fc_copy *c, CUstream h, int ptds, int sync)
{
    fc_spend(fc_g.launch_ns);
    fc_stream *s;
    CUresult r = fc_stream_resolve(h, ptds, &s);
    if (r) return r;
    if (s->cap && (c->src_pageable || c->dst_pageable)) {
        fc_capture_invalidate(s->cap); /* CUDA cannot capture copies of pageable memory */
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    fc_op *op = fc_op_new(FC_OP_COPY);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!s->cap && !sync && c->src_pageable && c->width) {
        /* CUDA stages pageable sources: the caller may reuse the buffer as soon as we return. */
        c->owned = malloc(c->sspan);
        if (!c->owned) return fc_op_free(op), CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(c->owned, c->src, c->sspan);
        c->src = c->owned;
        c->src_dev = 0;
    }
    op->cp = *c;
    int blocking = sync || c->dst_pageable, capturing = s->cap != NULL;
    uint64_t seq = 0;
    r = fc_submit(s, op, &seq);
    if (r || capturing || !blocking) return r;
    return fc_run(s, seq);
}

CUresult fc_memset_submit(fc_memset *m, CUstream h, int ptds, int sync)
{
    fc_spend(fc_g.launch_ns);
    fc_stream *s;
    CUresult r = fc_stream_resolve(h, ptds, &s);
    if (r) return r;
    fc_op *op = fc_op_new(FC_OP_MEMSET);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    op->ms = *m;
    int capturing = s->cap != NULL;
    uint64_t seq = 0;
    r = fc_submit(s, op, &seq);
    if (r || capturing || !sync) return r;
    return fc_run(s, seq);
}

/* ---- streams ---- */
static CUresult fc_stream_create(CUstream *out, unsigned flags, int prio)
{
    if (!out || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
    prio = prio < -5 ? -5 : prio > 0 ? 0 : prio;
    fc_stream *s = fc_g.recycled_streams;
    if (s && !s->head) { /* FAKECUDA_REUSE_STREAMS: a destroyed stream's handle, its work done, now a new one's */
        fc_g.recycled_streams = s->next_recycled;
        if (fc_vec_push((void **)&fc_g.streams, &fc_g.nstreams, sizeof(s), &s)) return CUDA_ERROR_OUT_OF_MEMORY;
        /* the sequence numbers go on (operations may still name its earlier ones in their dependencies) */
        s->ctx = fc_cur_ctx() ? fc_cur_ctx() : fc_g.primary;
        s->flags = flags, s->priority = prio, s->destroyed = 0, s->next_recycled = NULL;
        s->hdr.dead = 0;
    } else if (!(s = fc_stream_new(flags, prio))) {
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = (CUstream)s;
    return CUDA_SUCCESS;
}
CUresult cuStreamCreate(CUstream *s, unsigned int flags) { FC_API(1, fc_stream_create(s, flags, 0)); }
CUresult cuStreamCreateWithPriority(CUstream *s, unsigned int flags, int p) { FC_API(1, fc_stream_create(s, flags, p)); }

static CUresult fc_stream_destroy(CUstream h)
{
    if (!h || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD || !fc_obj_valid(h, FC_OBJ_STREAM))
        return CUDA_ERROR_INVALID_HANDLE;
    fc_stream *s = (fc_stream *)h;
    if (s->cap) fc_capture_invalidate(s->cap);
    s->hdr.dead = 1; /* pending work still runs, as in CUDA */
    s->destroyed = 1;
    if (fc_g.reuse_streams) s->next_recycled = fc_g.recycled_streams, fc_g.recycled_streams = s;
    if (!s->head) fc_vec_remove((void **)fc_g.streams, &fc_g.nstreams, s);
    return CUDA_SUCCESS;
}
CUresult cuStreamDestroy_v2(CUstream s) { FC_API(1, fc_stream_destroy(s)); }

/* Synchronizing on a capturing stream is illegal and breaks the capture. A sync or query of another stream
 * is a potentially unsafe call, refused where the thread's mode forbids it (the GPU's table,
 * capture_rules.expected: another thread's global capture fails it and breaks). */
static CUresult fc_sync_prologue(fc_stream *s, int invalidate_legacy)
{
    if (s->cap) {
        fc_capture_invalidate(s->cap);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    CUresult r = fc_legacy_capture_check(s, invalidate_legacy);
    return r ? r : fc_capture_unsafe_check();
}

static CUresult fc_stream_sync(CUstream h, int ptds)
{
    fc_stream *s;
    CUresult r = fc_stream_resolve(h, ptds, &s);
    if (!r) r = fc_sync_prologue(s, 1);
    if (r) return r;
    fc_g.stats.syncs++;
    return fc_run(s, s->last_seq);
}
static CUresult fc_stream_sync_api(CUstream s) { FC_TRACED_FOR(cuStreamSynchronize, 1, fc_stream_sync(s, FC_LEGACY)); }
static CUresult fc_stream_sync_ptsz_api(CUstream s) { FC_TRACED_FOR(cuStreamSynchronize_ptsz, 1, fc_stream_sync(s, FC_PTDS)); }
CUresult cuStreamSynchronize(CUstream s) { FC_AWAITED(FC_AWAIT_STREAM_SYNC, fc_stream_sync_api(s)); }
CUresult cuStreamSynchronize_ptsz(CUstream s) { FC_AWAITED(FC_AWAIT_STREAM_SYNC, fc_stream_sync_ptsz_api(s)); }

static CUresult fc_stream_query(CUstream h, int ptds)
{
    fc_stream *s;
    CUresult r = fc_stream_resolve(h, ptds, &s);
    if (!r) r = fc_sync_prologue(s, 1);
    if (r) return r;
    if (fc_g.dev_queries && fc_now_ns() < s->dev_end) return CUDA_ERROR_NOT_READY; /* the modeled device is not there */
    if (s->done_seq >= s->last_seq) return CUDA_SUCCESS;
    if (tl_passive) return CUDA_ERROR_NOT_READY;
    /* A wait for work that is done is no work left: a stream whose queue holds only such waits has
     * completed (a GPU resolves them as it reaches them; a query finds nothing of it running). */
    while (s->head && s->head->kind == FC_OP_NOP && fc_op_ready(s->head)) fc_exec_head(s);
    if (s->done_seq >= s->last_seq) return CUDA_SUCCESS;
    if (fc_g.query_not_ready && s->queried_seq < s->last_seq) {
        s->queried_seq = s->last_seq;
        return CUDA_ERROR_NOT_READY;
    }
    return fc_run(s, s->last_seq);
}
CUresult cuStreamQuery(CUstream s) { FC_TRACED(cuStreamQuery, 1, fc_stream_query(s, FC_LEGACY)); }
CUresult cuStreamQuery_ptsz(CUstream s) { FC_TRACED(cuStreamQuery_ptsz, 1, fc_stream_query(s, FC_PTDS)); }

static CUresult fc_stream_wait_event(CUstream h, CUevent he, unsigned flags, int ptds)
{
    fc_stream *s;
    CUresult r = fc_stream_resolve(h, ptds, &s);
    if (r) return r;
    fc_event *e = (fc_event *)he;
    if (!fc_event_valid(e, "cuStreamWaitEvent")) return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    if (s->cap || (e->cap && e->cap->active)) return fc_capture_wait_event(s, e, flags != 0);
    if (!e->recorded || fc_event_done(e)) return fc_legacy_capture_check(s, 1);
    fc_op *op = fc_op_new(FC_OP_NOP);
    if (!op || fc_op_add_dep(op, e->rs, e->rseq)) return fc_op_free(op), CUDA_ERROR_OUT_OF_MEMORY;
    return fc_submit(s, op, NULL); /* the wait binds to the record current at this call */
}
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned int f) { FC_TRACED(cuStreamWaitEvent, 1, fc_stream_wait_event(s, e, f, FC_LEGACY)); }
CUresult cuStreamWaitEvent_ptsz(CUstream s, CUevent e, unsigned int f) { FC_TRACED(cuStreamWaitEvent_ptsz, 1, fc_stream_wait_event(s, e, f, FC_PTDS)); }

static CUresult fc_host_op(CUstream h, int ptds, void (*fn)(void *), CUstreamCallback cb, void *ud, unsigned flags)
{
    fc_stream *s;
    CUresult r = fc_stream_resolve(h, ptds, &s);
    if (r) return r;
    if ((!fn && !cb) || flags) return CUDA_ERROR_INVALID_VALUE;
    if (cb && s->cap) {
        fc_capture_invalidate(s->cap);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    fc_op *op = fc_op_new(cb ? FC_OP_CALLBACK : FC_OP_HOSTFN);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    op->hostfn = fn, op->cb = cb, op->ud = ud, op->cbstream = h;
    return fc_submit(s, op, NULL);
}
CUresult cuLaunchHostFunc(CUstream s, CUhostFn fn, void *ud) { FC_TRACED(cuLaunchHostFunc, 1, fc_host_op(s, FC_LEGACY, fn, NULL, ud, 0)); }
CUresult cuLaunchHostFunc_ptsz(CUstream s, CUhostFn fn, void *ud) { FC_TRACED(cuLaunchHostFunc_ptsz, 1, fc_host_op(s, FC_PTDS, fn, NULL, ud, 0)); }
CUresult cuStreamAddCallback(CUstream s, CUstreamCallback cb, void *ud, unsigned int f) { FC_API(1, fc_host_op(s, FC_LEGACY, NULL, cb, ud, f)); }
CUresult cuStreamAddCallback_ptsz(CUstream s, CUstreamCallback cb, void *ud, unsigned int f) { FC_API(1, fc_host_op(s, FC_PTDS, NULL, cb, ud, f)); }

static CUresult fc_stream_info(CUstream h, int ptds, CUcontext *ctx, unsigned *flags, unsigned long long *id, int *prio)
{
    fc_stream *s;
    CUresult r = fc_stream_resolve(h, ptds, &s);
    if (r) return r;
    if (!ctx && !flags && !id && !prio) return CUDA_ERROR_INVALID_VALUE;
    if (ctx) *ctx = (CUcontext)s->ctx;
    if (flags) *flags = s->flags;
    if (id) *id = s->id;
    if (prio) *prio = s->priority;
    return CUDA_SUCCESS;
}
CUresult cuStreamGetCtx(CUstream s, CUcontext *c) { FC_API(1, fc_stream_info(s, FC_LEGACY, c, NULL, NULL, NULL)); }
CUresult cuStreamGetCtx_ptsz(CUstream s, CUcontext *c) { FC_API(1, fc_stream_info(s, FC_PTDS, c, NULL, NULL, NULL)); }
CUresult cuStreamGetFlags(CUstream s, unsigned int *f) { FC_API(1, fc_stream_info(s, FC_LEGACY, NULL, f, NULL, NULL)); }
CUresult cuStreamGetFlags_ptsz(CUstream s, unsigned int *f) { FC_API(1, fc_stream_info(s, FC_PTDS, NULL, f, NULL, NULL)); }
CUresult cuStreamGetId(CUstream s, unsigned long long *id) { FC_API(1, fc_stream_info(s, FC_LEGACY, NULL, NULL, id, NULL)); }
CUresult cuStreamGetId_ptsz(CUstream s, unsigned long long *id) { FC_API(1, fc_stream_info(s, FC_PTDS, NULL, NULL, id, NULL)); }
CUresult cuStreamGetPriority(CUstream s, int *p) { FC_API(1, fc_stream_info(s, FC_LEGACY, NULL, NULL, NULL, p)); }
CUresult cuStreamGetPriority_ptsz(CUstream s, int *p) { FC_API(1, fc_stream_info(s, FC_PTDS, NULL, NULL, NULL, p)); }

CUresult fc_valop_submit(fc_stream *s, void *addr, uint64_t v, unsigned flags, int is64, int wait)
{
    if (s->cap) return CUDA_ERROR_NOT_SUPPORTED; /* no batch-mem-op or semaphore nodes in the fake */
    fc_op *op = fc_op_new(wait ? FC_OP_WAITVAL : FC_OP_WRITEVAL);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    op->addr = addr, op->val = v, op->is64 = is64, op->flags = flags;
    return fc_submit(s, op, NULL);
}

static CUresult fc_memop(CUstream h, int ptds, CUdeviceptr addr, uint64_t v, unsigned flags, int is64, int wait)
{
    fc_stream *s;
    CUresult r = fc_stream_resolve(h, ptds, &s);
    if (r) return r;
    int k = fc_ptr_check((uintptr_t)addr, is64 ? 8 : 4);
    if ((k != FC_PTR_DEVICE && k != FC_PTR_PINNED) || addr % (is64 ? 8 : 4)) return CUDA_ERROR_INVALID_VALUE;
    if (wait ? (flags & ~(3u | CU_STREAM_WAIT_VALUE_FLUSH)) : (flags & ~1u)) return CUDA_ERROR_INVALID_VALUE;
    return fc_valop_submit(s, (void *)(uintptr_t)addr, v, flags, is64, wait);
}
#define MEMOP(name, T, is64, wait)                                                                 \
    CUresult name(CUstream s, CUdeviceptr a, T v, unsigned int f) { FC_API(1, fc_memop(s, FC_LEGACY, a, v, f, is64, wait)); } \
    CUresult name##_ptsz(CUstream s, CUdeviceptr a, T v, unsigned int f) { FC_API(1, fc_memop(s, FC_PTDS, a, v, f, is64, wait)); }
/* cuda.h maps the v1 names to _v2; both ABIs are exported, so drop the mapping here. */
#undef cuStreamWriteValue32
#undef cuStreamWaitValue32
#undef cuStreamWriteValue64
#undef cuStreamWaitValue64
#undef cuStreamBatchMemOp
MEMOP(cuStreamWriteValue32, cuuint32_t, 0, 0)
MEMOP(cuStreamWriteValue32_v2, cuuint32_t, 0, 0)
MEMOP(cuStreamWaitValue32, cuuint32_t, 0, 1)
MEMOP(cuStreamWaitValue32_v2, cuuint32_t, 0, 1)
MEMOP(cuStreamWriteValue64, cuuint64_t, 1, 0)
MEMOP(cuStreamWriteValue64_v2, cuuint64_t, 1, 0)
MEMOP(cuStreamWaitValue64, cuuint64_t, 1, 1)
MEMOP(cuStreamWaitValue64_v2, cuuint64_t, 1, 1)
CUresult cuStreamBatchMemOp(CUstream s, unsigned int n, CUstreamBatchMemOpParams *p, unsigned int f) { FC_API(1, CUDA_ERROR_NOT_SUPPORTED); }
CUresult cuStreamBatchMemOp_ptsz(CUstream s, unsigned int n, CUstreamBatchMemOpParams *p, unsigned int f) { FC_API(1, CUDA_ERROR_NOT_SUPPORTED); }
CUresult cuStreamBatchMemOp_v2(CUstream s, unsigned int n, CUstreamBatchMemOpParams *p, unsigned int f) { FC_API(1, CUDA_ERROR_NOT_SUPPORTED); }
CUresult cuStreamBatchMemOp_v2_ptsz(CUstream s, unsigned int n, CUstreamBatchMemOpParams *p, unsigned int f) { FC_API(1, CUDA_ERROR_NOT_SUPPORTED); }

/* ---- events ---- */
static CUresult fc_event_create(CUevent *out, unsigned flags)
{
    unsigned ok = CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS;
    if (!out || (flags & ~ok)) return CUDA_ERROR_INVALID_VALUE;
    if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
    fc_event *e = fc_g.recycled_events;
    if (e) { /* FAKECUDA_REUSE_EVENTS: a destroyed event's handle, now a new event's */
        fc_g.recycled_events = e->next_recycled;
        fc_obj hdr = e->hdr;
        free(e->capdeps);
        memset(e, 0, sizeof(*e));
        e->hdr = hdr;
        e->hdr.dead = 0;
    } else {
        e = fc_obj_new(sizeof(*e), FC_OBJ_EVENT);
        if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e->ctx = fc_cur_ctx();
    e->flags = flags;
    *out = (CUevent)e;
    return CUDA_SUCCESS;
}
CUresult cuEventCreate(CUevent *e, unsigned int flags) { FC_API(1, fc_event_create(e, flags)); }

static CUresult fc_event_destroy(CUevent h)
{
    fc_event *e = (fc_event *)h;
    if (!fc_event_valid(e, "cuEventDestroy")) return CUDA_ERROR_INVALID_HANDLE;
    e->hdr.dead = 1;
    if (fc_g.reuse_events) e->next_recycled = fc_g.recycled_events, fc_g.recycled_events = e;
    return CUDA_SUCCESS;
}
CUresult cuEventDestroy_v2(CUevent e) { FC_API(1, fc_event_destroy(e)); }

int fc_event_done(const fc_event *e) { return !e->recorded || e->rs->done_seq >= e->rseq; }

static CUresult fc_event_record(CUevent h, CUstream hs, unsigned flags, int ptds)
{
    fc_event *e = (fc_event *)h;
    if (!fc_event_valid(e, "cuEventRecord")) return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    fc_stream *s;
    CUresult r = fc_stream_resolve(hs, ptds, &s);
    if (r) return r;
    if (s->cap) return fc_capture_event_record(s, e, flags != 0);
    fc_op *op = fc_op_new(FC_OP_EVREC);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    op->ev = e;
    uint64_t seq;
    r = fc_submit(s, op, &seq);
    if (r) return r;
    e->recorded = 1, e->rs = s, e->rseq = seq, e->cap = NULL;
    return CUDA_SUCCESS;
}
CUresult cuEventRecord(CUevent e, CUstream s) { FC_TRACED(cuEventRecord, 1, fc_event_record(e, s, 0, FC_LEGACY)); }
CUresult cuEventRecord_ptsz(CUevent e, CUstream s) { FC_TRACED(cuEventRecord_ptsz, 1, fc_event_record(e, s, 0, FC_PTDS)); }
CUresult cuEventRecordWithFlags(CUevent e, CUstream s, unsigned int f) { FC_TRACED(cuEventRecordWithFlags, 1, fc_event_record(e, s, f, FC_LEGACY)); }
CUresult cuEventRecordWithFlags_ptsz(CUevent e, CUstream s, unsigned int f) { FC_TRACED(cuEventRecordWithFlags_ptsz, 1, fc_event_record(e, s, f, FC_PTDS)); }

static CUresult fc_event_wait(CUevent h, int query)
{
    fc_event *e = (fc_event *)h;
    if (!fc_event_valid(e, query ? "cuEventQuery" : "cuEventSynchronize")) return CUDA_ERROR_INVALID_HANDLE;
    if (e->cap && e->cap->active) {
        fc_capture_invalidate(e->cap);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    /* a potentially unsafe call as well, where the thread's mode forbids it (PyTorch's page-locked host
     * allocator queries events at each allocation, and sets the relaxed mode for it during a capture) */
    CUresult r = fc_capture_unsafe_check();
    if (r) return r;
    if (!query) fc_g.stats.syncs++;
    if (fc_g.dev_on && e->recorded) { /* the modeled device reaches the record then */
        if (query && fc_g.dev_queries && fc_now_ns() < e->dev_at) return CUDA_ERROR_NOT_READY;
        fc_dev_until(e->dev_at);
    }
    if (fc_event_done(e)) return CUDA_SUCCESS;
    if (query && tl_passive) return CUDA_ERROR_NOT_READY;
    if (query && fc_g.query_not_ready && e->queried_seq < e->rseq) {
        e->queried_seq = e->rseq;
        return CUDA_ERROR_NOT_READY;
    }
    return fc_run(e->rs, e->rseq);
}
CUresult cuEventQuery(CUevent e) { FC_TRACED(cuEventQuery, 1, fc_event_wait(e, 1)); }
CUresult cuEventSynchronize(CUevent e) { FC_TRACED(cuEventSynchronize, 1, fc_event_wait(e, 0)); }

static CUresult fc_elapsed(float *ms, CUevent hs, CUevent he)
{
    fc_event *a = (fc_event *)hs, *b = (fc_event *)he;
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    if (!fc_obj_valid(a, FC_OBJ_EVENT) || !fc_obj_valid(b, FC_OBJ_EVENT)) return CUDA_ERROR_INVALID_HANDLE;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    if (!a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
    if (!fc_event_done(a) || !fc_event_done(b) || a->ts_seq != a->rseq || b->ts_seq != b->rseq)
        return CUDA_ERROR_NOT_READY;
    if (fc_g.dev_on) /* the modeled device's times */
        *ms = (float)(((double)b->dev_at - (double)a->dev_at) / 1e6);
    else
        *ms = (float)((double)b->ts - (double)a->ts) * 0.001f; /* one microsecond per executed op */
    return CUDA_SUCCESS;
}
#undef cuEventElapsedTime /* v1 and v2 share a signature; both are exported */
CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) { FC_API(1, fc_elapsed(ms, a, b)); }
CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) { FC_API(1, fc_elapsed(ms, a, b)); }

/* ---- launches ---- */
static CUresult fc_launch_kernel(CUfunction hf, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                          unsigned bz, unsigned smem, CUstream hs, int ptds, void **kp, void **extra)
{
    fc_spend(fc_g.launch_ns);
    fc_func *f;
    CUresult r = fc_func_resolve(hf, &f);
    if (r) return r;
    if (!gx || !gy || !gz || !bx || !by || !bz) return CUDA_ERROR_INVALID_VALUE;
    if (bx > 1024 || by > 1024 || bz > 64 || (unsigned long long)bx * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
    if (gy > 65535 || gz > 65535 || gx > 2147483647u) return CUDA_ERROR_INVALID_VALUE;
    if (smem > 232448 || (long long)smem > fc_max_dyn(f)) return CUDA_ERROR_INVALID_VALUE;
    fc_stream *s;
    r = fc_stream_resolve(hs, ptds, &s);
    if (r) return r;
    fc_op *op = fc_op_new(FC_OP_KERNEL);
    if (!op) return CUDA_ERROR_OUT_OF_MEMORY;
    if (fc_kernel_pack(fc_func_kernel(f), kp, extra, &op->kl, &r)) return fc_op_free(op), r;
    op->kl.f = f;
    op->kl.gen = f->gen;
    op->kl.dims = (fakecuda_dims_t){gx, gy, gz, bx, by, bz, smem};
    return fc_submit(s, op, NULL);
}
CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                        unsigned int by, unsigned int bz, unsigned int smem, CUstream s, void **kp, void **ex)
{
    FC_TRACED(cuLaunchKernel, 1, fc_launch_kernel(f, gx, gy, gz, bx, by, bz, smem, s, FC_LEGACY, kp, ex));
}
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                             unsigned int by, unsigned int bz, unsigned int smem, CUstream s, void **kp, void **ex)
{
    FC_TRACED(cuLaunchKernel_ptsz, 1, fc_launch_kernel(f, gx, gy, gz, bx, by, bz, smem, s, FC_PTDS, kp, ex));
}
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                   unsigned int by, unsigned int bz, unsigned int smem, CUstream s, void **kp)
{
    FC_TRACED(cuLaunchCooperativeKernel, 1, fc_launch_kernel(f, gx, gy, gz, bx, by, bz, smem, s, FC_LEGACY, kp, NULL));
}
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                        unsigned int by, unsigned int bz, unsigned int smem, CUstream s, void **kp)
{
    FC_TRACED(cuLaunchCooperativeKernel_ptsz, 1, fc_launch_kernel(f, gx, gy, gz, bx, by, bz, smem, s, FC_PTDS, kp, NULL));
}

/* A launch no hook of the shim sees: CUDA's own behaviour and CUPTI reports, under cuLaunchKernel's name. */
CUresult fakecuda_unhooked_launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                  unsigned int by, unsigned int bz, unsigned int smem, CUstream s, void **kp, void **ex)
{
    FC_TRACED(cuLaunchKernel, 1, fc_launch_kernel(f, gx, gy, gz, bx, by, bz, smem, s, FC_LEGACY, kp, ex));
}

static CUresult fc_launch_ex(const CUlaunchConfig *c, CUfunction f, void **kp, void **extra, int ptds)
{
    if (!c || (c->numAttrs && !c->attrs)) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < c->numAttrs; i++) {
        if ((unsigned)c->attrs[i].id > CU_LAUNCH_ATTRIBUTE_NVLINK_UTIL_CENTRIC_SCHEDULING) return CUDA_ERROR_INVALID_VALUE;
        /* 15, which cuda.h does not name: here an attribute whose value is 8 bytes, the second word the
         * first one's complement (whoever copies only part of the value makes the launch invalid) */
        if (c->attrs[i].id == 15) {
            uint32_t w[2];
            memcpy(w, &c->attrs[i].value, sizeof w);
            if (w[1] != ~w[0]) return CUDA_ERROR_INVALID_VALUE;
        }
    }
    return fc_launch_kernel(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY, c->blockDimZ,
                     c->sharedMemBytes, c->hStream, ptds, kp, extra);
}
CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **kp, void **ex) { FC_TRACED(cuLaunchKernelEx, 1, fc_launch_ex(c, f, kp, ex, FC_LEGACY)); }
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **kp, void **ex) { FC_TRACED(cuLaunchKernelEx_ptsz, 1, fc_launch_ex(c, f, kp, ex, FC_PTDS)); }
