/* The launcher: a thread of the shim's own that patches and launches the graphs of chunks completed in
 * the middle of a segment, so that the application's thread returns as soon as a chunk's last operation
 * is recorded (AUTOGRAPH_LAUNCHER=thread). A chunk posted here is issued, in posting order, before
 * anything the engine issues later: every eager issue, every barrier and every graph release waits for
 * the launcher first (ag_launcher_wait). Posted work is work still deferred, and deferral stays
 * invisible the same way.
 * Locking: ag_launcher_post is called under the engine lock (so posts are ordered); ag_launcher_wait
 * from any thread, under the lock or not. The launcher thread never takes the engine lock, and runs
 * with ag_guard raised (its driver calls are the shim's own). */
#ifndef AG_LAUNCHER_H
#define AG_LAUNCHER_H

#include "graph.h"

/* A posted chunk: its graph and its operations. The buffers (ops and arena, with their capacities)
 * belong to the job until it has run. */
typedef struct {
    ag_graph_t *g;
    ag_chunk_t c;
    uint32_t cap_ops;
    size_t cap_arena;
} ag_job_t;

/* Runs a job on the launcher thread. */
typedef void (*ag_job_run_t)(ag_job_t *job);

/* Starts the thread (once) with ctx current; 0, or -1 when it cannot run (the engine then launches on
 * the application's thread). */
int ag_launcher_start(CUcontext ctx, ag_job_run_t run);
/* Hands the chunk (ops[0..n), arena[0..used)) to the launcher and swaps in empty buffers of the
 * launcher's spare slot (their capacities in *cap_ops and *cap_arena, maybe 0 and NULL); waits while
 * every slot is in flight. */
void ag_launcher_post(ag_graph_t *g, ag_op_t **ops, uint32_t n, uint32_t *cap_ops, unsigned char **arena,
                      size_t used, size_t *cap_arena);

/* Returns once every posted job has run. One atomic load when nothing is in flight. */
void ag_launcher_wait_slow(void);
extern atomic_ullong ag_launcher_posted, ag_launcher_done;
static inline void ag_launcher_wait(void)
{
    if (atomic_load_explicit(&ag_launcher_done, memory_order_acquire) !=
        atomic_load_explicit(&ag_launcher_posted, memory_order_relaxed))
        ag_launcher_wait_slow();
}

typedef struct {
    uint64_t jobs, waits, wait_ns, sleeps, run_ns;
} ag_launcher_stats_t;
/* After ag_launcher_wait. */
void ag_launcher_stats(ag_launcher_stats_t *out);
/* In a forked child: no launcher thread there (the engine is off). */
void ag_launcher_fork_child(void);

#endif
