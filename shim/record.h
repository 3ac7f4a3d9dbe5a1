/* Records of the operations the engine may defer: kernel argument layouts per function handle, the
 * operation record (signature fields and arguments), signatures, and issuing a record through the real
 * driver, as the application made it. Also the table of driver entry points the engine calls that are
 * not hooked. Locking: used under the engine lock (engine.c); the layout cache is written there only. */
#ifndef AG_RECORD_H
#define AG_RECORD_H

#include <stddef.h>

#include "internal.h"

#define AG_MAX_ATTRS 8

#define AG_DRV(name, params) typedef CUresult(CUDAAPI *ag_drv_##name##_t) params;
#include "driver.def"
#undef AG_DRV
typedef struct {
#define AG_DRV(name, params) ag_drv_##name##_t name;
#include "driver.def"
#undef AG_DRV
} ag_drv_t;
/* Resolved by ag_record_bind; NULL members where the driver lacks the entry point. */
extern ag_drv_t ag_drv;

/* The driver's own entry point behind a hook. */
#define REAL(name) ((ag_fn_##name##_t)ag_real[AG_ID_##name])

typedef struct {
    const void *handle;
    uint32_t nparams;
    uint32_t total;   /* bytes from the first parameter to the end of the last */
    uint8_t no_defer; /* NCCL kernels, or no layout */
    uint32_t *off, *size;
    /* padding between parameters: zeroed on copy so that equal arguments compare equal */
    uint32_t ngaps;
    uint32_t *gap_off, *gap_len;
} ag_layout_t;

typedef enum { OP_KERNEL, OP_MEMSET, OP_COPY, OP_EVREC, OP_EVWAIT, OP_D2H, OP_H2D } ag_op_kind_t;

typedef struct {
    uint8_t kind;
    uint8_t ex; /* from cuLaunchKernelEx */
    uint8_t nattrs;
    ag_id_t id; /* the entry point it came through, for an eager re-issue */
    CUfunction f;
    unsigned grid[3], block[3], smem;
    CUstream stream;
    const ag_layout_t *layout;
    size_t arg_off; /* kernel arguments in the arena */
    /* memset / copy (hdst: the host destination of a blocking device-to-host copy; hsrc: the pinned
     * source of a host-to-device copy, the application's or a staging buffer of ours) */
    CUdeviceptr dst, src;
    void *hdst;
    const void *hsrc;
    int8_t stage; /* staging buffer of a snapshotted pageable source, or -1 */
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

/* Resolves ag_drv from libcuda; 0, or -1 when an entry point the engine needs is missing. */
int ag_record_bind(void);
/* Bytes of a record worth copying (the attributes it has, not all of them). */
size_t ag_op_size(const ag_op_t *o);
/* The argument layout of a kernel (CUfunction or CUkernel), cached; NULL when the cache is full. */
const ag_layout_t *ag_layout_of(CUfunction f);
/* kernelParams pointing into an argument block laid out by `lay` (scratch, valid until the next call). */
void **ag_param_ptrs(const ag_layout_t *lay, unsigned char *args);
uint64_t ag_op_sig(const ag_op_t *o);
/* Bytes of a launch attribute's value that mean something, or -1 for attributes never deferred. */
int ag_attr_value_size(CUlaunchAttributeID id);
/* Issues a record on `stream` as the application made it (kernel arguments from `arena`). */
CUresult ag_issue(const ag_op_t *o, CUstream stream, unsigned char *arena);
/* An event record or wait through the entry point the application used, with another event. */
CUresult ag_issue_event(const ag_op_t *o, CUstream stream, CUevent ev);

#endif
