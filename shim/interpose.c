/* Every route to a driver entry point ends here: the exported cu* symbols generated from hooks.def,
 * dlsym (any handle, both glibc symbol versions: the library carries no symbol versions, so the loader
 * binds references of either version to it), and cuGetProcAddress(_v2), which hands out the hook whose
 * ABI matches the pointer the driver returned. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Plain pass-through: count, then call the driver. A hook reached from the shim's own calls
 * (ag_guard) is not counted. Barriers and deferrable operations raise ag_hook_depth around their
 * driver calls: the CUPTI coverage guard tells a call no hook saw by a depth of 0. */
#define AG_PASSTHROUGH(name, params, args) AG_PASSTHROUGH_THEN_(name, params, args, )
/* ... and `after` (a statement) once the driver answered r_. */
#define AG_PASSTHROUGH_THEN_(name, params, args, after)                                               \
    AG_EXPORT CUresult CUDAAPI name params                                                            \
    {                                                                                                 \
        if (AG_LIKELY(!ag_guard))                                                                     \
            ag_count(AG_ID_##name);                                                                   \
        ag_fn_##name##_t real_ = (ag_fn_##name##_t)ag_real_get(AG_ID_##name);                         \
        CUresult r_ = real_ ? real_ args : CUDA_ERROR_NOT_FOUND;                                      \
        after;                                                                                        \
        return r_;                                                                                    \
    }

/* A barrier: whatever the engine holds back is issued first (in order), then the call goes to the
 * driver; where the engine asked for it, how long the call blocked is weighed once it returns. The
 * program's capture is counted before the barrier when it begins (a call another thread makes meanwhile
 * passes to the driver, after what was held: nothing held can be issued into the capture's time) and
 * after the driver call when it ends; a capture that fails to begin is reported back so the engine does
 * not wait for its end. */
#define AG_BARRIER_(name, params, args, engine_call) AG_BARRIER_AROUND_(name, params, args, engine_call, , )
/* ... with `before` and `after` (statements) right around the driver call. */
#define AG_BARRIER_AROUND_(name, params, args, engine_call, before, after)                            \
    AG_EXPORT CUresult CUDAAPI name params                                                            \
    {                                                                                                 \
        ag_fn_##name##_t real_ = (ag_fn_##name##_t)ag_real_get(AG_ID_##name);                         \
        if (AG_UNLIKELY(ag_guard))                                                                    \
            return real_ ? real_ args : CUDA_ERROR_NOT_FOUND;                                         \
        ag_count(AG_ID_##name);                                                                       \
        ag_hook_depth++;                                                                              \
        CUresult answer_ = CUDA_SUCCESS; /* the engine's own answer (an observing query) */          \
        uint64_t t0_ = ag_now_ns();                                                                   \
        int capture_ = ag_hook_kinds[AG_ID_##name] == AG_KIND_CAPTURE;                                \
        int counted_ = capture_ && ag_engine_capture_counted(AG_ID_##name);                           \
        if (atomic_load_explicit(&ag_engine_on, memory_order_relaxed))                                \
            engine_call;                                                                              \
        uint64_t t1_ = ag_now_ns();                                                                   \
        before;                                                                                       \
        CUresult r_ = answer_ != CUDA_SUCCESS ? answer_ : real_ ? real_ args : CUDA_ERROR_NOT_FOUND;  \
        after;                                                                                        \
        uint64_t t2_ = ag_now_ns();                                                                   \
        ag_wait_done();                                                                               \
        ag_bar_timed(AG_ID_##name, t1_ - t0_ + (ag_now_ns() - t2_), t2_ - t1_);                        \
        if (capture_)                                                                                 \
            ag_engine_capture_done(AG_ID_##name, r_, counted_);                                       \
        ag_hook_depth--;                                                                              \
        return r_;                                                                                    \
    }
#define AG_BARRIER(name, params, args) AG_BARRIER_(name, params, args, ag_engine_barrier(AG_ID_##name))
/* The program's graph launch: a barrier whose driver call no cuptiFinalize may overlap where it must not
 * (ag_cupti_graph_enter). */
#define AG_GRAPH_BARRIER(name, params, args)                                                          \
    AG_BARRIER_AROUND_(name, params, args, ag_engine_barrier(AG_ID_##name), ag_cupti_graph_enter(),   \
                       ag_cupti_graph_leave())
/* A sync or query: a barrier, but one that a thread which never issued work may pass through where it
 * cannot observe held work, or that the engine answers itself (ag_engine_observe). AG_OBS_<name>: the
 * events it observes (NULL, NULL for a stream or the context), and the stream it syncs or queries (NULL
 * for the others). */
#define AG_OBSERVING(name, params, args)                                                              \
    AG_BARRIER_(name, params, args, answer_ = ag_engine_observe(AG_ID_##name, AG_OBS_##name))
#define AG_OBS_cuCtxSynchronize NULL, NULL, NULL
#define AG_OBS_cuCtxSynchronize_v2 NULL, NULL, NULL
#define AG_OBS_cuStreamSynchronize NULL, NULL, hStream
#define AG_OBS_cuStreamSynchronize_ptsz NULL, NULL, hStream
#define AG_OBS_cuStreamQuery NULL, NULL, hStream
#define AG_OBS_cuStreamQuery_ptsz NULL, NULL, hStream
#define AG_OBS_cuEventSynchronize hEvent, NULL, NULL
#define AG_OBS_cuEventQuery hEvent, NULL, NULL
#define AG_OBS_cuEventElapsedTime hStart, hEnd, NULL
#define AG_OBS_cuEventElapsedTime_v2 hStart, hEnd, NULL

/* An operation the engine may defer (`kind`, a constant: AG_KIND_DLAUNCH ... AG_KIND_DFREE): it goes to
 * the engine entry named by AG_ENGINE_<name>, which takes the hook id and then the call's own
 * arguments. While the engine rests it goes straight to the driver, unless it is a device-to-host copy
 * (which can be blocking: the engine counts it as the end of a segment) or a free (whose allocation the
 * engine stops tracking). */
#define AG_UNPAREN(...) __VA_ARGS__
/* The start of a hook that does more than pass through: the driver's entry (CUDA_ERROR_NOT_FOUND
 * without one), the shim's own calls straight to it, the call counted and the hook depth raised (the
 * hook lowers it before it returns). */
#define AG_HOOK_ENTER_(name, args)                                                                    \
    ag_fn_##name##_t real_ = (ag_fn_##name##_t)ag_real_get(AG_ID_##name);                             \
    if (!real_)                                                                                       \
        return CUDA_ERROR_NOT_FOUND;                                                                  \
    if (AG_UNLIKELY(ag_guard))                                                                        \
        return real_ args;                                                                            \
    ag_count(AG_ID_##name);                                                                           \
    ag_hook_depth++;
#define AG_DEFERRABLE_(name, params, args, kind)                                                      \
    AG_EXPORT AG_HOT CUresult CUDAAPI name params                                                     \
    {                                                                                                 \
        AG_HOOK_ENTER_(name, args)                                                                    \
        int on_ = atomic_load_explicit(&ag_engine_on, memory_order_relaxed);                          \
        CUresult r_;                                                                                  \
        if (on_ == AG_ENGINE_ACTIVE ||                                                                \
            (((kind) == AG_KIND_DD2H || (kind) == AG_KIND_DFREE) && on_ == AG_ENGINE_RESTING)) {      \
            r_ = AG_ENGINE_##name(AG_ID_##name, AG_UNPAREN args);                                     \
        } else {                                                                                      \
            if (on_ == AG_ENGINE_RESTING)                                                             \
                ag_engine_rested();                                                                   \
            if (AG_KIND_IS_LAUNCH(kind) ? (++ag_passthru_tick & 15) == 0                              \
                                        : (kind) != AG_KIND_DD2H && (kind) != AG_KIND_DFREE &&        \
                                              (++ag_passthru_mtick & 15) == 0) {                      \
                uint64_t t0_ = ag_now_ns();                                                           \
                r_ = real_ args;                                                                      \
                ag_sampler_add(AG_KIND_IS_LAUNCH(kind) ? &ag_passthru_launches : &ag_passthru_memops, \
                               ag_now_ns() - t0_);                                                    \
            } else {                                                                                  \
                r_ = real_ args;                                                                      \
            }                                                                                         \
        }                                                                                             \
        ag_hook_depth--;                                                                              \
        return r_;                                                                                    \
    }
#define AG_ENGINE_cuLaunchKernel ag_engine_launch
#define AG_ENGINE_cuLaunchKernel_ptsz ag_engine_launch
#define AG_ENGINE_cuLaunchKernelEx ag_engine_launch_ex
#define AG_ENGINE_cuLaunchKernelEx_ptsz ag_engine_launch_ex
#define AG_ENGINE_cuMemsetD8Async ag_engine_memset8
#define AG_ENGINE_cuMemsetD8Async_ptsz ag_engine_memset8
#define AG_ENGINE_cuMemsetD16Async ag_engine_memset16
#define AG_ENGINE_cuMemsetD16Async_ptsz ag_engine_memset16
#define AG_ENGINE_cuMemsetD32Async ag_engine_memset32
#define AG_ENGINE_cuMemsetD32Async_ptsz ag_engine_memset32
#define AG_ENGINE_cuMemcpyDtoDAsync_v2 ag_engine_copy
#define AG_ENGINE_cuMemcpyDtoDAsync_v2_ptsz ag_engine_copy
#define AG_ENGINE_cuEventRecord ag_engine_event_record
#define AG_ENGINE_cuEventRecord_ptsz ag_engine_event_record
#define AG_ENGINE_cuEventRecordWithFlags ag_engine_event_record_flags
#define AG_ENGINE_cuEventRecordWithFlags_ptsz ag_engine_event_record_flags
#define AG_ENGINE_cuStreamWaitEvent ag_engine_stream_wait_event
#define AG_ENGINE_cuStreamWaitEvent_ptsz ag_engine_stream_wait_event
#define AG_ENGINE_cuMemcpyHtoDAsync_v2 ag_engine_h2d_async
#define AG_ENGINE_cuMemcpyHtoDAsync_v2_ptsz ag_engine_h2d_async
#define AG_ENGINE_cuMemcpyDtoH_v2 ag_engine_d2h
#define AG_ENGINE_cuMemcpyDtoH_v2_ptds ag_engine_d2h
#define AG_ENGINE_cuMemcpyDtoHAsync_v2 ag_engine_d2h_async
#define AG_ENGINE_cuMemcpyDtoHAsync_v2_ptsz ag_engine_d2h_async
#define AG_ENGINE_cuMemcpyAsync ag_engine_copy_unified
#define AG_ENGINE_cuMemcpyAsync_ptsz ag_engine_copy_unified
#define AG_ENGINE_cuMemFreeAsync ag_engine_free_async
#define AG_ENGINE_cuMemFreeAsync_ptsz ag_engine_free_async

/* A stream-ordered allocation: passed to the driver, then noted by the engine (so that its free may be
 * held back with the work before it). Where it runs out of memory while frees are held back, those are
 * issued and it is tried once more: holding frees must not make an allocation fail that eager would
 * have served. */
#define AG_SALLOC_(name, params, args)                                                                \
    AG_EXPORT CUresult CUDAAPI name params                                                            \
    {                                                                                                 \
        AG_HOOK_ENTER_(name, args)                                                                    \
        CUresult r_ = real_ args;                                                                     \
        if (atomic_load_explicit(&ag_engine_on, memory_order_relaxed)) {                              \
            if (r_ == CUDA_ERROR_OUT_OF_MEMORY && ag_engine_frees_release())                          \
                r_ = real_ args;                                                                      \
            if (r_ == CUDA_SUCCESS && dptr)                                                           \
                ag_engine_alloced(*dptr);                                                             \
        }                                                                                             \
        ag_hook_depth--;                                                                              \
        return r_;                                                                                    \
    }

/* Kinds whose hooks do more than this are written by hand below. */
#define AG_GEN_INIT(name, params, args)
#define AG_GEN_PROC(name, params, args)
#define AG_GEN_DLAUNCH(name, params, args) AG_DEFERRABLE_(name, params, args, AG_KIND_DLAUNCH)
#define AG_GEN_DSET(name, params, args) AG_DEFERRABLE_(name, params, args, AG_KIND_DSET)
#define AG_GEN_DCOPY(name, params, args) AG_DEFERRABLE_(name, params, args, AG_KIND_DCOPY)
#define AG_GEN_DEVENT(name, params, args) AG_DEFERRABLE_(name, params, args, AG_KIND_DEVENT)
#define AG_GEN_DD2H(name, params, args) AG_DEFERRABLE_(name, params, args, AG_KIND_DD2H)
#define AG_GEN_DFREE(name, params, args) AG_DEFERRABLE_(name, params, args, AG_KIND_DFREE)
#define AG_GEN_SALLOC AG_SALLOC_
#define AG_GEN_QUERY AG_PASSTHROUGH
#define AG_GEN_ALLOC AG_PASSTHROUGH
#define AG_GEN_LAUNCH AG_BARRIER
#define AG_GEN_COPY AG_BARRIER
#define AG_GEN_SET AG_BARRIER
#define AG_GEN_SYNC AG_OBSERVING
/* cuEventDestroy (the one EVENT hook): the engine forgets the event, and with AUTOGRAPH_EVENT_DESTROY=defer
 * keeps it where held work names it (destroyed once that work is issued; the call succeeds at once, as
 * CUDA's does); otherwise a barrier where held work may name it */
#define AG_GEN_EVENT(name, params, args)                                                              \
    AG_EXPORT CUresult CUDAAPI name params                                                            \
    {                                                                                                 \
        AG_HOOK_ENTER_(name, args)                                                                    \
        CUresult r_ = CUDA_SUCCESS;                                                                   \
        if (!atomic_load_explicit(&ag_engine_on, memory_order_relaxed) ||                             \
            !ag_engine_event_destroy(AG_ID_##name, hEvent))                                           \
            r_ = real_ args;                                                                          \
        ag_wait_done();                                                                               \
        ag_hook_depth--;                                                                              \
        return r_;                                                                                    \
    }
/* A stream's destroy: a barrier, and, engine running or paused, the graphs built on its flags released */
#define AG_GEN_STREAM(name, params, args)                                                             \
    AG_BARRIER_AROUND_(name, params, args, ag_engine_barrier(AG_ID_##name), ag_engine_stream_gone(hStream), )
#define AG_GEN_HOSTFN AG_BARRIER
#define AG_GEN_MEMOP AG_BARRIER
#define AG_GEN_FREE AG_BARRIER
#define AG_GEN_GRAPH AG_GRAPH_BARRIER
#define AG_GEN_CAPTURE AG_BARRIER
/* A module's or library's unload: a barrier, and, engine running or paused, its kernels found before the
 * driver call and forgotten after it. AG_UNLOAD_<name>: whether it unloads a library, and the handle. */
#define AG_UNLOAD_cuModuleUnload 0, (const void *)hmod
#define AG_UNLOAD_cuLibraryUnload 1, (const void *)library
#define AG_GEN_MODULE(name, params, args)                                                             \
    AG_BARRIER_AROUND_(name, params, args, ag_engine_barrier(AG_ID_##name),                           \
                       ag_unload_t u_; ag_engine_unload_begin(&u_, AG_UNLOAD_##name),                 \
                       ag_engine_kernels_gone(&u_))
#define AG_GEN_LIMIT AG_BARRIER
/* A kernel attribute set: a barrier where the value changes (a launch held back must meet the limits it was
 * made under; libraries raise a function's dynamic shared memory limit for a launch and may put it back after
 * it), none where it stays (libraries set it again before each launch) or where the dynamic shared memory
 * limit goes up. AG_FATTR_<name>: the function or kernel, whether it is a kernel, its device, the attribute
 * and the new value. */
#define AG_FATTR_cuFuncSetAttribute (const void *)hfunc, 0, 0, attrib, value
#define AG_FATTR_cuKernelSetAttribute (const void *)kernel, 1, dev, attrib, val
#define AG_GEN_FATTR(name, params, args)                                                              \
    AG_BARRIER_(name, params, args, if (ag_func_attr_changes(AG_FATTR_##name)) ag_engine_barrier(AG_ID_##name))
/* A context's end (cuCtxDestroy, a primary context's release or reset): a barrier before it, and after
 * it, where it succeeded, the engine is told (it stops where its own context ended, even while paused:
 * AG_CTX_<name> gives the context or the device). */
#define AG_CTX_cuCtxDestroy_v2 ctx, -1
#define AG_CTX_cuDevicePrimaryCtxRelease_v2 NULL, dev
#define AG_CTX_cuDevicePrimaryCtxReset_v2 NULL, dev
#define AG_CTX_cuDevicePrimaryCtxRelease NULL, dev
#define AG_CTX_cuDevicePrimaryCtxReset NULL, dev
#define AG_GEN_CONTEXT(name, params, args)                                                            \
    AG_EXPORT CUresult CUDAAPI name params                                                            \
    {                                                                                                 \
        AG_HOOK_ENTER_(name, args)                                                                    \
        if (atomic_load_explicit(&ag_engine_on, memory_order_relaxed))                                \
            ag_engine_barrier(AG_ID_##name);                                                          \
        ag_engine_context_ending(AG_ID_##name, AG_CTX_##name);                                        \
        CUresult r_ = real_ args;                                                                     \
        ag_wait_engine = NULL; /* not a wait for the GPU's work */                                    \
        if (r_ == CUDA_SUCCESS)                                                                       \
            ag_engine_context_end(AG_ID_##name, AG_CTX_##name);                                       \
        ag_hook_depth--;                                                                              \
        return r_;                                                                                    \
    }
#define AG_GEN_IPC AG_BARRIER
/* A context-wide event record or wait: a barrier, its driver call kept clear of our captures (the capture
 * fence) */
#define AG_GEN_CTXEVENT(name, params, args)                                                           \
    AG_BARRIER_AROUND_(name, params, args, ag_engine_barrier(AG_ID_##name), ag_capture_fence_enter(), \
                       ag_capture_fence_leave())
/* A context-wide sync: an observing barrier (AG_OBSERVING) whose driver call is kept clear of our captures */
#define AG_GEN_CTXSYNC(name, params, args)                                                            \
    AG_BARRIER_AROUND_(name, params, args, answer_ = ag_engine_observe(AG_ID_##name, AG_OBS_##name),  \
                       ag_capture_fence_enter(), ag_capture_fence_leave())
/* The primary context's retain: passed through, and the context it returned noted for its device, even
 * for the shim's own calls (a reset or last release of the device ends that context only: the engines of
 * contexts the program made on the device go on). */
#define AG_GEN_PRIMARY(name, params, args)                                                            \
    AG_PASSTHROUGH_THEN_(name, params, args, if (r_ == CUDA_SUCCESS && pctx) ag_engine_primary_retained(dev, *pctx))

#define AG_HOOK(kind, name, params, args) AG_GEN_##kind(name, params, args)
#include "hooks.def"
#undef AG_HOOK

AG_EXPORT CUresult CUDAAPI cuInit(unsigned int Flags)
{
    if (ag_guard)
        return ((ag_fn_cuInit_t)ag_real_get(AG_ID_cuInit))(Flags);
    ag_count(AG_ID_cuInit);
    ag_fn_cuInit_t real = (ag_fn_cuInit_t)ag_real_get(AG_ID_cuInit);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    CUresult r = real(Flags);
    if (r == CUDA_SUCCESS)
        ag_cupti_start();
    return r;
}

/* Replaces the driver's answer by our hook with the same ABI. An entry point of a family we hook whose
 * address we do not know would bypass the shim: count it, say so, and hand it out unchanged. */
/* Names of the unmatched answers, for the statistics (the first AG_MAX_UNMATCHED distinct ones). */
#define AG_MAX_UNMATCHED 64
static char unmatched_names[AG_MAX_UNMATCHED][64];
static atomic_int n_unmatched_names;
static pthread_mutex_t unmatched_lock = PTHREAD_MUTEX_INITIALIZER;

static void note_unmatched(const char *symbol, int version, cuuint64_t flags, void *p)
{
    Dl_info info;
    const char *what = dladdr(p, &info) && info.dli_sname ? info.dli_sname : "?";
    ag_log(AG_LOG_DEBUG, "cuGetProcAddress(\"%s\", %d, flags %llu) returned %p (%s), unknown to the shim", symbol,
           version, (unsigned long long)flags, p, what);
    pthread_mutex_lock(&unmatched_lock);
    int n = atomic_load(&n_unmatched_names), dup = 0;
    for (int i = 0; i < n && !dup; i++)
        dup = strncmp(unmatched_names[i], symbol, sizeof unmatched_names[i] - 1) == 0;
    if (!dup && n < AG_MAX_UNMATCHED) {
        snprintf(unmatched_names[n], sizeof unmatched_names[n], "%s", symbol);
        atomic_store(&n_unmatched_names, n + 1);
    }
    pthread_mutex_unlock(&unmatched_lock);
}

int ag_unmatched_names(const char *const **names)
{
    static const char *ptrs[AG_MAX_UNMATCHED];
    int n = atomic_load(&n_unmatched_names);
    for (int i = 0; i < n; i++)
        ptrs[i] = unmatched_names[i];
    *names = ptrs;
    return n;
}

static void wrap_proc(const char *symbol, void **pfn, int version, cuuint64_t flags)
{
    for (int i = 0; i < AG_ID_COUNT; i++)
        if (*pfn == ag_hook_addr((ag_id_t)i))
            return; /* already ours (a resolver that looks its answers up through dlsym) */
    int id = ag_hook_by_real(*pfn);
    if (id >= 0) {
        *pfn = ag_hook_addr((ag_id_t)id);
        return;
    }
    if (symbol && ag_hook_family_known(symbol)) {
        atomic_fetch_add_explicit(&ag_unmatched_proc, 1, memory_order_relaxed);
        note_unmatched(symbol, version, flags, *pfn);
        AG_LOG_CAPPED(AG_LOG_WARN, "cuGetProcAddress(\"%s\") returned an entry point the shim does not know; "
                                   "calls through it are not seen", symbol);
    }
}

AG_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                               CUdriverProcAddressQueryResult *symbolStatus)
{
    ag_fn_cuGetProcAddress_v2_t real = (ag_fn_cuGetProcAddress_v2_t)ag_real_get(AG_ID_cuGetProcAddress_v2);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    if (ag_guard)
        return real(symbol, pfn, cudaVersion, flags, symbolStatus);
    ag_count(AG_ID_cuGetProcAddress_v2);
    /* Guarded: a resolver that uses dlsym itself must get the driver's answer, which we then wrap. */
    ag_guard++;
    CUresult r = real(symbol, pfn, cudaVersion, flags, symbolStatus);
    ag_guard--;
    if (r == CUDA_SUCCESS && pfn && *pfn)
        wrap_proc(symbol, pfn, cudaVersion, flags);
    return r;
}

AG_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    ag_fn_cuGetProcAddress_t real = (ag_fn_cuGetProcAddress_t)ag_real_get(AG_ID_cuGetProcAddress);
    if (!real)
        return CUDA_ERROR_NOT_FOUND;
    if (ag_guard)
        return real(symbol, pfn, cudaVersion, flags);
    ag_count(AG_ID_cuGetProcAddress);
    ag_guard++;
    CUresult r = real(symbol, pfn, cudaVersion, flags);
    ag_guard--;
    if (r == CUDA_SUCCESS && pfn && *pfn)
        wrap_proc(symbol, pfn, cudaVersion, flags);
    return r;
}

static void *const hook_addrs[AG_ID_COUNT] = {
#define AG_HOOK(kind, name, params, args) (void *)name,
#include "hooks.def"
#undef AG_HOOK
};

void *ag_hook_addr(ag_id_t id)
{
    return hook_addrs[id];
}

/* dlsym for every handle but RTLD_NEXT (whose meaning depends on the caller's address, so the entry
 * stub below jumps to the real dlsym for it without a frame of ours in between). */
void *ag_dlsym_hook(void *handle, const char *name);
AG_NO_SANITIZE void *ag_dlsym_hook(void *handle, const char *name)
{
    /* Constructors of libraries loaded before our own constructor ran may call dlsym already. */
    if (AG_UNLIKELY(!ag_real_dlsym) && !ag_resolve_real_dlsym())
        return NULL;
    void *r = ag_real_dlsym(handle, name);
    if (!r || !name || name[0] != 'c' || name[1] != 'u' || ag_guard)
        return r;
    int id = ag_hook_by_name(name);
    if (id < 0 || r == hook_addrs[id])
        return r;
    ag_bind_cuda();
    /* Only the driver's own definition is replaced; another library's symbol of that name is not ours
     * to take. */
    return ag_real[id] == r ? hook_addrs[id] : r;
}

#if defined(__x86_64__)
/* The real dlsym is resolved here if our constructor has not run yet, keeping the arguments and the
 * caller's return address, so that RTLD_NEXT stays relative to the caller. */
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "    movq ag_real_dlsym(%rip), %rax\n"
        "    testq %rax, %rax\n"
        "    jne 2f\n"
        "    pushq %rdi\n"
        "    pushq %rsi\n"
        "    subq $8, %rsp\n"
        "    call ag_resolve_real_dlsym\n"
        "    addq $8, %rsp\n"
        "    popq %rsi\n"
        "    popq %rdi\n"
        "    testq %rax, %rax\n"
        "    je 1f\n"
        "2:  cmpq $-1, %rdi\n"
        "    jne 1f\n"
        "    jmp *%rax\n"
        "1:  jmp ag_dlsym_hook\n"
        ".size dlsym, .-dlsym\n");
#elif defined(__aarch64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, %function\n"
        "dlsym:\n"
        "    cmn x0, #1\n"
        "    b.ne 1f\n"
        "    adrp x16, ag_real_dlsym\n"
        "    ldr x16, [x16, :lo12:ag_real_dlsym]\n"
        "    cbz x16, 1f\n"
        "    br x16\n"
        "1:  b ag_dlsym_hook\n"
        ".size dlsym, .-dlsym\n");
#else
AG_EXPORT void *dlsym(void *handle, const char *name)
{
    return ag_dlsym_hook(handle, name);
}
#endif
