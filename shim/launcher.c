/* The launcher thread (launcher.h): a ring of job slots, each with its own operation and arena buffers,
 * filled by the engine under its lock and run here in order. After a job the thread spins for a while
 * (the next chunk usually follows within tens of microseconds), then sleeps on a futex; a post wakes it
 * only when it sleeps. */
#define _GNU_SOURCE
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher.h"
#include "record.h"

#define SLOTS 4
/* How long the thread looks for the next job before it sleeps (ns). */
#define SPIN_NS 50000

atomic_ullong ag_launcher_posted, ag_launcher_done;

static struct {
    ag_job_t slot[SLOTS]; /* job k is in slot[k % SLOTS] */
    ag_job_run_t run;
    CUcontext ctx;
    pthread_t thread;
    int started, failed;
    /* the futex word a sleeping launcher waits on (bumped by a post that finds it asleep), and whether
     * it sleeps or is about to */
    atomic_uint wake_seq;
    atomic_int sleeping;
    /* statistics: jobs run and the launcher's time in them; the engine's waits for it; its sleeps */
    uint64_t jobs, run_ns;
    atomic_ullong sleeps, waits, wait_ns;
} L;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* The next job's number once one is posted, after spinning and then sleeping for it. */
static uint64_t next_job(uint64_t k)
{
    uint64_t t0 = ag_now_ns();
    for (unsigned i = 0;; i++) {
        if (atomic_load_explicit(&ag_launcher_posted, memory_order_acquire) > k)
            return k;
        if ((i & 63) == 63 && ag_now_ns() - t0 > SPIN_NS)
            break;
        cpu_relax();
    }
    for (;;) {
        unsigned seq = atomic_load(&L.wake_seq);
        atomic_store(&L.sleeping, 1); /* sequentially consistent with the post's store and load */
        if (atomic_load(&ag_launcher_posted) > k) {
            atomic_store(&L.sleeping, 0);
            return k;
        }
        atomic_fetch_add_explicit(&L.sleeps, 1, memory_order_relaxed);
        syscall(SYS_futex, &L.wake_seq, FUTEX_WAIT_PRIVATE, seq, NULL, NULL, 0);
        atomic_store(&L.sleeping, 0);
    }
}

static void *launcher_main(void *arg)
{
    (void)arg;
    ag_guard = 1; /* every driver call from here is the shim's own: the hooks and CUPTI's guard skip it */
    if (ag_drv.cuCtxSetCurrent(L.ctx) != CUDA_SUCCESS)
        ag_log(AG_LOG_WARN, "the launcher thread could not make the engine's context current");
    for (uint64_t k = 0;; k++) {
        next_job(k);
        uint64_t t0 = ag_now_ns();
        L.run(&L.slot[k % SLOTS]);
        L.run_ns += ag_now_ns() - t0;
        L.jobs++;
        atomic_store_explicit(&ag_launcher_done, k + 1, memory_order_release);
    }
    return NULL;
}

int ag_launcher_start(CUcontext ctx, ag_job_run_t run)
{
    if (L.started || L.failed)
        return L.started ? 0 : -1;
    if (!ag_drv.cuCtxSetCurrent) {
        L.failed = 1;
        return -1;
    }
    L.ctx = ctx;
    L.run = run;
    /* No signal of the application's is delivered to this thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_attr_t a;
    int err = pthread_attr_init(&a);
    if (!err) {
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        err = pthread_create(&L.thread, &a, launcher_main, NULL);
        pthread_attr_destroy(&a);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err) {
        L.failed = 1;
        ag_log(AG_LOG_WARN, "cannot start the launcher thread (error %d); graphs are launched by the "
                            "application's threads", err);
        return -1;
    }
    pthread_setname_np(L.thread, "autograph-launch");
    L.started = 1;
    return 0;
}

void ag_launcher_post(ag_graph_t *g, ag_op_t **ops, uint32_t n, uint32_t *cap_ops, unsigned char **arena,
                      size_t used, size_t *cap_arena)
{
    uint64_t k = atomic_load_explicit(&ag_launcher_posted, memory_order_relaxed);
    if (k - atomic_load_explicit(&ag_launcher_done, memory_order_acquire) >= SLOTS - 1) {
        /* Every other slot is in flight: the oldest must finish (it gives its buffers back). */
        uint64_t t0 = ag_now_ns();
        while (k - atomic_load_explicit(&ag_launcher_done, memory_order_acquire) >= SLOTS - 1)
            cpu_relax();
        atomic_fetch_add_explicit(&L.wait_ns, ag_now_ns() - t0, memory_order_relaxed);
        atomic_fetch_add_explicit(&L.waits, 1, memory_order_relaxed);
    }
    /* Slot k takes the filled buffers; the engine gets slot k+1's, which job k+1-SLOTS gave back. */
    ag_job_t *j = &L.slot[k % SLOTS], *spare = &L.slot[(k + 1) % SLOTS];
    ag_op_t *sops = spare->c.ops;
    unsigned char *sarena = spare->c.arena;
    uint32_t scap_ops = spare->cap_ops;
    size_t scap_arena = spare->cap_arena;
    spare->c.ops = NULL, spare->c.arena = NULL, spare->cap_ops = 0, spare->cap_arena = 0;
    j->g = g;
    j->c.ops = *ops, j->c.n = n, j->c.arena = *arena, j->c.arena_used = used;
    j->cap_ops = *cap_ops, j->cap_arena = *cap_arena;
    *ops = sops, *cap_ops = scap_ops, *arena = sarena, *cap_arena = scap_arena;
    atomic_store(&ag_launcher_posted, k + 1); /* sequentially consistent: see next_job */
    if (atomic_load(&L.sleeping)) {
        atomic_fetch_add(&L.wake_seq, 1);
        syscall(SYS_futex, &L.wake_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
}

void ag_launcher_wait_slow(void)
{
    uint64_t want = atomic_load(&ag_launcher_posted), t0 = ag_now_ns();
    for (unsigned i = 0; atomic_load_explicit(&ag_launcher_done, memory_order_acquire) < want; i++) {
        if (i >= 4096 && (i & 255) == 0)
            sched_yield(); /* the launcher may be waiting for a core */
        cpu_relax();
    }
    atomic_fetch_add_explicit(&L.wait_ns, ag_now_ns() - t0, memory_order_relaxed);
    atomic_fetch_add_explicit(&L.waits, 1, memory_order_relaxed);
}

void ag_launcher_stats(ag_launcher_stats_t *out)
{
    out->jobs = L.jobs;
    out->run_ns = L.run_ns;
    out->sleeps = atomic_load(&L.sleeps);
    out->waits = atomic_load(&L.waits);
    out->wait_ns = atomic_load(&L.wait_ns);
}

void ag_launcher_fork_child(void)
{
    L.started = 0;
    L.failed = 1;
    atomic_store(&ag_launcher_done, atomic_load(&ag_launcher_posted));
}
