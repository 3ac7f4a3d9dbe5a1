/* CUDA graphs of chunks: build (capture on private streams), patch, launch ordered with the
 * application's streams, a bounded least-recently-used cache, and the pinned staging buffers of host
 * copies inside graphs, one set per engine (ag_graph_use). Locking: every call under that engine's lock,
 * or from its issuer thread while it holds a job (engine.c settles the job before any other call);
 * nothing here waits for the GPU. */
#ifndef AG_GRAPH_H
#define AG_GRAPH_H

#include "pattern.h"
#include "record.h"

/* Streams in one segment, and event records in one segment; more ends the segment (engine.c). */
#define AG_MAX_STREAMS 16
#define AG_MAX_RECORDS 64
/* A blocking device-to-host copy up to this size can end a graph (through a staging buffer). */
#define AG_D2H_STAGING_MAX (1u << 20)

typedef struct ag_graph ag_graph_t;

/* Engines at most, one per CUDA context (engine.c); a context past them runs eagerly. */
#define AG_MAX_ENGINES 16
/* Selects the state of engine `engine` for this thread's next calls (the engine's lock is held). */
void ag_graph_use(unsigned engine);

/* The engine's context ended, and a later context takes the engine over: its graphs, streams, events and
 * staging buffers went with the old one, so the graph module's state is forgotten (host memory freed, no
 * CUDA call) and starts again (ag_graph_init); the calling threads' blocking-read buffers of that context
 * are dropped as each thread meets them. */
void ag_graph_retire(void);
/* Once per engine, for its context: the capture stream and the cache. Returns CUDA's result. */
CUresult ag_graph_init(CUcontext ctx, uint32_t max_graphs, size_t staging_size);
/* Captures the chunk's operations into a graph owned by v (and cached): *out and 0; -EAGAIN where it gave
 * way to a context-wide call of the program (the capture fence: it may be built at a later sighting), -EIO
 * where CUDA refused it (*out NULL then). */
int ag_graph_build(const ag_chunk_t *c, ag_variant_t *v, ag_graph_t **out);
/* Whether variant v may have a graph built now: 1 where the cache has room or makes it (evicting a graph
 * used less than v asked for one), 0 where it is full of graphs in use (v's request is counted). */
int ag_graph_admit(ag_variant_t *v);
/* Writes into the exec what changed since its last launch; 0, or -1 when the driver refused a patch
 * (the exec cannot be trusted then: release it). */
int ag_graph_patch(ag_graph_t *g, const ag_chunk_t *c);
/* How many streams the chunk's operations use (-1: more than AG_MAX_STREAMS). */
int ag_graph_chunk_streams(const ag_chunk_t *c);
/* The operation node i of g holds (NULL past its end, or without a graph). */
const ag_op_t *ag_graph_op(const ag_graph_t *g, uint32_t i);
/* The stream g is launched on: the legacy stream where the chunk uses it (a launch there waits for every
 * blocking stream's earlier work, as each of the chunk's legacy operations would have), else the chunk's
 * first. */
CUstream ag_graph_stream(const ag_graph_t *g);
/* Launches the graph for the chunk, ordered with the chunk's streams and the events it waits for.
 * CUDA's result: a failure means nothing of the chunk was issued. The chunk's event records are the
 * caller's to make after it (engine.c, issue_graph: the last thing on their streams, with the chunk's
 * held frees in the program's order). */
CUresult ag_graph_launch(ag_graph_t *g, const ag_chunk_t *c);
/* Destroys v's graph (the learner's release callback too). */
void ag_graph_release(ag_variant_t *v, void *ctx);
/* Stream s is destroyed: the graphs that hold the legacy stream's implicit order with it are destroyed (its
 * handle may come back with other flags); their variants build new ones from the work they next hold. */
void ag_graph_release_stream(CUstream s);
/* Destroys the engine's graphs that hold one of u's kernels (a module was unloaded: its kernels' handles
 * may come back as other kernels, and such a graph holds the old ones; every graph where u->all). Their
 * variants build new ones from the work they next hold. */
void ag_graph_release_kernels(const ag_unload_t *u);
/* The staging buffer the device-to-host node i of g writes to. */
const void *ag_graph_d2h_dst(const ag_graph_t *g, uint32_t i);

/* A pinned copy of a pageable source, valid until the work that reads it has run; NULL when no
 * staging buffer is free now (the copy is then not held back). *which names the buffer. */
void *ag_stage_copy(const void *src, size_t n, int8_t *which);
/* The chunk's graph was issued on `s`: fences the staging buffers its operations read. */
void ag_stage_issued(const ag_chunk_t *c, CUstream s);
/* Operation o was issued eagerly: fences the staging buffer it reads, if any (at once, before the
 * operations after it on its stream). */
void ag_stage_issued_op(const ag_op_t *o);
/* Held operations read one of the staging buffers (a pageable source's snapshot). */
int ag_stage_held(void);
/* The held operations were all issued (eagerly, each fenced): they no longer hold staging buffers. */
void ag_stage_done(void);
/* The calling thread's staging buffer for a blocking device-to-host copy (AG_D2H_STAGING_MAX bytes). */
void *ag_thread_staging(void);
/* The calling thread's event in the current engine (made where it has none; NULL where that fails): it
 * waits on it for a replayed blocking read (engine.c, d2h_common). */
CUevent ag_thread_wait_event(void);
/* The calling thread exits: its staging buffers go to their engines' spares (no engine lock needed). */
void ag_graph_thread_exit(void);

typedef struct {
    uint64_t built, evicted, patched;
    uint64_t patched_by[3], patch_drv_ns[3]; /* by node kind: kernel, memset, copy */
    uint32_t live;
    size_t mem; /* device memory of the live graphs (estimated) */
    uint64_t thread_stages; /* blocking-read staging buffers allocated (AG_D2H_STAGING_MAX bytes each) */
    uint64_t mixing_legacy; /* graphs built of chunks on the legacy stream and created streams */
    uint64_t released;      /* graphs released because their kernels (a module unload) or a stream went */
    uint64_t refused;       /* builds refused by a full cache (ag_graph_admit) */
} ag_graph_stats_t;
void ag_graph_stats(ag_graph_stats_t *out);

#endif
