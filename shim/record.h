/* Records of the operations the engine may defer: kernel argument layouts per function handle, the
 * operation record (signature fields and arguments), signatures, and issuing a record through the real
 * driver, as the application made it. Also the table of driver entry points the engine calls that are
 * not hooked. Locking: used under the engine lock (engine.c); the layout cache is written there only. */
#ifndef AG_RECORD_H
#define AG_RECORD_H

#include <stddef.h>
#include <string.h>

#include "internal.h"

#define AG_MAX_ATTRS 8

#define AG_DRV(name, params) typedef CUresult(CUDAAPI *ag_drv_##name##_t) params;
#define AG_DRV_OPT AG_DRV
#include "driver.def"
#undef AG_DRV
#undef AG_DRV_OPT
typedef struct {
#define AG_DRV(name, params) ag_drv_##name##_t name;
#define AG_DRV_OPT AG_DRV
#include "driver.def"
#undef AG_DRV
#undef AG_DRV_OPT
} ag_drv_t;
/* Resolved by ag_record_bind; NULL members where the driver lacks the entry point. */
extern ag_drv_t ag_drv;

/* The shim's own calls that CUDA may count unsafe beside a stream capture (page-locked allocations, queries
 * of its own events, the creation of streams, events and executable graphs, their destruction), and the
 * program's stream-ordered frees that it held back and issues later, are made in the relaxed capture mode:
 * a global capture that another thread of the program begins meanwhile neither refuses them nor is
 * invalidated by them. One can begin while the shim is in such a call made outside an engine lock (a
 * capture's start takes every engine's lock in turn, engine.c), and the modes stay relaxed under the lock
 * as well, a last line. ag_relaxed_begin returns the calling
 * thread's mode, for ag_relaxed_end to restore (nothing to restore where it was relaxed already). */
static inline CUstreamCaptureMode ag_relaxed_begin(void)
{
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (!ag_drv.cuThreadExchangeStreamCaptureMode || ag_drv.cuThreadExchangeStreamCaptureMode(&m) != CUDA_SUCCESS)
        m = CU_STREAM_CAPTURE_MODE_RELAXED; /* unchanged */
    return m;
}

static inline void ag_relaxed_end(CUstreamCaptureMode m)
{
    if (m != CU_STREAM_CAPTURE_MODE_RELAXED)
        ag_drv.cuThreadExchangeStreamCaptureMode(&m);
}

/* The driver's own entry point behind a hook. */
#define REAL(name) ((ag_fn_##name##_t)ag_real[AG_ID_##name])

/* One allocation per kernel, the parameter table inline: a launch reads one or two lines of it (they are
 * cold at every launch when an interpreter runs in between). */
typedef struct {
    const void *handle;
    uint64_t family; /* what the kernel is without its size, the shape-free signature's part (ag_name_family of
                      * its name, its handle where it has none; 0: a kernel a library picks by size) */
    uint32_t nparams;
    uint32_t total;   /* bytes from the first parameter to the end of the last */
    uint8_t no_defer; /* NCCL kernels, or no layout */
    uint8_t kernel;   /* the handle is a CUkernel (the CUfunction queries failed on it) */
    /* the engine (index) whose launch asked for it: a CUfunction is its context's, and its handle may be
     * another kernel's once that context has ended (ag_layouts_forget_engine); AG_LAYOUT_NO_ENGINE: none */
    uint8_t engine;
    struct {
        uint32_t off, size; /* in offset order, never overlapping (else no_defer) */
    } p[];
} ag_layout_t;

typedef enum { OP_KERNEL, OP_MEMSET, OP_COPY, OP_EVREC, OP_EVWAIT, OP_D2H, OP_H2D } ag_op_kind_t;

/* A kernel launch without attributes uses only the first 64 bytes (up to dst): that much is copied
 * when it is held back (ag_op_copy). */
typedef struct {
    uint8_t kind;
    uint8_t ex; /* from cuLaunchKernelEx */
    uint8_t nattrs;
    int8_t stage; /* host-to-device copy: staging buffer of a snapshotted pageable source, or -1 */
    ag_id_t id;   /* the entry point it came through, for an eager re-issue */
    CUfunction f;
    unsigned grid[3], block[3], smem;
    uint32_t arg_off; /* kernel arguments in the arena (a chunk's arguments stay far below 4 GiB) */
    CUstream stream;
    const ag_layout_t *layout;
    /* memset / copy (hdst: the host destination of a blocking device-to-host copy; hsrc: the pinned
     * source of a host-to-device copy, the application's or a staging buffer of ours) */
    CUdeviceptr dst, src;
    void *hdst;
    const void *hsrc;
    size_t n;
    unsigned value, elem;
    /* event record / wait: the event is an argument, not part of the signature; what a wait depends on
     * is (the chunk position of the record it waits for, or -1 for a record made before the chunk) */
    CUevent event;
    unsigned flags;
    int32_t rec_idx;
    /* last, so that copies of an operation without attributes stop before them */
    CUlaunchAttribute attrs[AG_MAX_ATTRS];
} ag_op_t;

/* The operations held back for one chunk and the arena their kernel arguments are in. */
typedef struct {
    ag_op_t *ops;
    uint32_t n;
    unsigned char *arena;
    size_t arena_used;
} ag_chunk_t;

#define AG_OP_KERNEL_SIZE offsetof(ag_op_t, dst)

/* Resolves ag_drv from libcuda; 0, or -1 when an entry point the engine needs is missing. */
int ag_record_bind(void);

/* Bytes of a record worth copying (the fields its kind uses and the attributes it has, not all of them). */
static inline size_t ag_op_size(const ag_op_t *o)
{
    if (o->kind == OP_KERNEL && !o->nattrs)
        return AG_OP_KERNEL_SIZE;
    return offsetof(ag_op_t, attrs) + sizeof(CUlaunchAttribute) * o->nattrs;
}

/* Copies a record (what ag_op_size says); the common case, a kernel without attributes, inline. */
static inline void ag_op_copy(ag_op_t *dst, const ag_op_t *src)
{
    if (src->kind == OP_KERNEL && !src->nattrs)
        memcpy(dst, src, AG_OP_KERNEL_SIZE);
    else
        memcpy(dst, src, ag_op_size(src));
}

/* The layout cache: open addressing on the handle. Written under the engine lock only. */
#define AG_LAYOUT_SLOTS 8192
extern ag_layout_t *ag_layouts[AG_LAYOUT_SLOTS];

static inline uint32_t ag_layout_slot(CUfunction f)
{
    return (uint32_t)(((uintptr_t)f >> 4) ^ ((uintptr_t)f >> 20)) % AG_LAYOUT_SLOTS;
}

/* ag_layout_of past its first probe: probes further, or queries the driver and caches a new layout. */
const ag_layout_t *ag_layout_find(CUfunction f, unsigned engine);
/* f's name from the driver, or NULL: kernel 1 for a CUkernel handle, 0 for a CUfunction, -1 when it is not
 * known which (the CUfunction query first). */
const char *ag_func_name(CUfunction f, int kernel);
/* o described for a log line (in buf, which it returns): its kind, and for a kernel its name, launch
 * configuration, attributes, argument layout and the function's shared-memory and block limits. */
const char *ag_op_describe(const ag_op_t *o, char *buf, size_t n);
/* Before the unload of module or library `handle` (library: 1 for cuLibraryUnload), while its handles are
 * still valid: which cached layouts are its kernels'. one_context: the calling thread's context is the only
 * one whose kernels have layouts (elsewhere a library's CUfunctions cannot be told apart from others'; then
 * every CUfunction counts as the library's). */
void ag_unload_collect(ag_unload_t *u, int library, const void *handle, int one_context);
/* Whether handle f is among u's (all: every one). */
int ag_unload_has(const ag_unload_t *u, const void *f);
void ag_unload_free(ag_unload_t *u);
/* After the unload: the layouts of u's kernels are forgotten (every layout where u->all). */
void ag_layouts_forget(const ag_unload_t *u);
#define AG_LAYOUT_NO_ENGINE 0xff
/* Engine `engine`'s context ended, and its modules with it: the layouts of the CUfunctions it asked for
 * (and of those no engine asked for) are forgotten, as at an unload, and stay allocated (another engine's
 * graph may hold one: a CUfunction launched in a context not its own); CUkernels outlive contexts. */
void ag_layouts_forget_engine(unsigned engine);

/* The argument layout of a kernel (CUfunction or CUkernel), cached; NULL when the cache is full. The slot
 * is read with acquire, as another context's engine may have just published the layout there (a plain
 * load on x86-64 all the same). */
static inline const ag_layout_t *ag_layout_of(CUfunction f, unsigned engine)
{
    const ag_layout_t *l = __atomic_load_n(&ag_layouts[ag_layout_slot(f)], __ATOMIC_ACQUIRE);
    return AG_LIKELY(l && l->handle == f) ? l : ag_layout_find(f, engine);
}

/* Asks for the cache line where ag_layout_of(f) starts looking (no access: usable without the lock). */
static inline void ag_layout_prefetch(CUfunction f)
{
    __builtin_prefetch(&ag_layouts[ag_layout_slot(f)]);
}

/* A copy of n bytes, and n zero bytes, without a call: the C library's memcpy and memset cost a cold
 * launch their procedure-linkage lines and their own code lines (structs passed by value, PyTorch's
 * offset calculators and arrays; the padding between parameters). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AG_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define AG_ASAN 1
#endif
/* (string instructions where the sanitizer cannot see them: its builds keep the calls it checks) */
#if defined(__x86_64__) && !defined(AG_ASAN)
#define AG_STRING_INSNS 1
#endif
static inline void ag_copy_inline(void *dst, const void *src, size_t n)
{
#if AG_STRING_INSNS
    __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
#else
    memcpy(dst, src, n);
#endif
}

static inline void ag_zero_inline(void *dst, size_t n)
{
#if AG_STRING_INSNS
    __asm__ volatile("rep stosb" : "+D"(dst), "+c"(n) : "a"(0) : "memory");
#else
    memset(dst, 0, n);
#endif
}

/* Copies a launch's parameters (kernelParams) into one block laid out by `lay`. The bytes between
 * parameters belong to none and are zeroed, so that equal arguments compare equal. */
static inline void ag_args_copy(const ag_layout_t *lay, unsigned char *dst, const void *const *kparams)
{
    uint32_t end = 0;
    for (uint32_t i = 0; i < lay->nparams; i++) {
        uint32_t off = lay->p[i].off, size = lay->p[i].size;
        if (off > end) /* padding: a few bytes, written without a call */
            ag_zero_inline(dst + end, off - end);
        /* Most parameters are pointers and scalars: constant sizes copy without a call. */
        if (size == 8)
            memcpy(dst + off, kparams[i], 8);
        else if (size == 4)
            memcpy(dst + off, kparams[i], 4);
        else
            ag_copy_inline(dst + off, kparams[i], size);
        end = off + size;
    }
}

/* kernelParams pointing into an argument block laid out by `lay` (scratch, valid until the next call). */
void **ag_param_ptrs(const ag_layout_t *lay, unsigned char *args);
/* The calling thread exits: its scratch goes. */
void ag_record_thread_exit(void);
/* An operation's signature (what it runs, where, and its shape: grid, block, shared memory, attributes,
 * sizes), and in *shape_free the same without the shape: what kind of operation and where, the fold the
 * signature begins with (for a kernel the caller xors in what it runs, its layout's family: a template
 * instantiated with other tile sizes for another size is the same kernel there). The learner chains the
 * shape-free ones to name the point after a segment (AUTOGRAPH_SEGMENT_KEY=shape_free,
 * ag_learner_push_shape_free), so that a batch of another size before it leaves that point where it was. */
AG_HOT uint64_t ag_op_sig(const ag_op_t *o, uint64_t *shape_free);
/* Bytes of a launch attribute's value that mean something (all of it for an attribute this header does not
 * name), or -1 for attributes never deferred. */
int ag_attr_value_size(CUlaunchAttributeID id);
/* The launch attribute ids of the launches captured into graphs (bit id; bit 63: 63 and above), for the
 * statistics; noted as a chunk is captured (ag_graph_build), not on the launch path. */
extern uint64_t ag_attr_ids_seen;
static inline void ag_attr_seen(CUlaunchAttributeID id)
{
    uint64_t bit = 1ULL << ((unsigned)id < 63 ? (unsigned)id : 63);
    if (!(__atomic_load_n(&ag_attr_ids_seen, __ATOMIC_RELAXED) & bit))
        __atomic_fetch_or(&ag_attr_ids_seen, bit, __ATOMIC_RELAXED);
}
/* Issues a record on `stream` as the application made it (kernel arguments from `arena`). */
CUresult ag_issue(const ag_op_t *o, CUstream stream, unsigned char *arena);
/* An event record or wait through the entry point the application used, with another event. */
CUresult ag_issue_event(const ag_op_t *o, CUstream stream, CUevent ev);

#endif
