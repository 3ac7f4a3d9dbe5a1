/* Shared helpers for the autograph sample programs: error checks, argument parsing, timing, checksums.
 * Contract: deterministic lines on stdout ending with "checksum: <16 hex digits>" (FNV-1a 64 over the
 * final result bytes); "loop_ms: <float>" on stderr; exit 1 on any CUDA error, exit 2 for an
 * unsupported --graph. */
#ifndef AG_SAMPLES_COMMON_H
#define AG_SAMPLES_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <dlfcn.h>

#include <cuda_runtime.h>

#define CK(call)                                                                                   \
  do {                                                                                             \
    cudaError_t ck_err_ = (call);                                                                  \
    if (ck_err_ != cudaSuccess) {                                                                  \
      fprintf(stderr, "%s:%d: %s failed: %s (%s, %d)\n", __FILE__, __LINE__, #call,                \
              cudaGetErrorString(ck_err_), cudaGetErrorName(ck_err_), (int)ck_err_);               \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* A driver API call's check, for the samples that include cuda.h and link libcuda (exit 1 on failure). */
#define CU(call)                                                                                   \
  do {                                                                                             \
    CUresult cu_r_ = (call);                                                                       \
    if (cu_r_ != CUDA_SUCCESS) {                                                                   \
      const char *cu_name_ = "?", *cu_desc_ = "?";                                                 \
      cuGetErrorName(cu_r_, &cu_name_);                                                            \
      cuGetErrorString(cu_r_, &cu_desc_);                                                          \
      fprintf(stderr, "%s:%d: %s failed: %s (%s, %d)\n", __FILE__, __LINE__, #call, cu_desc_,       \
              cu_name_, (int)cu_r_);                                                               \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* Launch errors (bad configuration) are reported by cudaGetLastError; asynchronous faults surface at
 * the next synchronizing call, which is checked too. */
#define CK_LAUNCH() CK(cudaGetLastError())

typedef struct {
  long iters;
  int graph;
  unsigned long long seed;
} ag_args;

/* Extra per-sample options: kind 'i' stores a long, 'f' a double. */
typedef struct {
  const char *name;
  char kind;
  void *ptr;
} ag_opt;

static inline void ag_usage(const char *prog, const ag_opt *opts, int nopts) {
  fprintf(stderr, "usage: %s [--iters N] [--graph] [--seed S]", prog);
  for (int i = 0; i < nopts; i++)
    fprintf(stderr, " [%s %s]", opts[i].name, opts[i].kind == 'i' ? "N" : "X");
  fprintf(stderr, "\n");
}

static inline void ag_parse(int argc, char **argv, ag_args *a, long default_iters, const ag_opt *opts,
                            int nopts) {
  a->iters = default_iters;
  a->graph = 0;
  a->seed = 1234;
  for (int i = 1; i < argc; i++) {
    const char *arg = argv[i];
    if (strcmp(arg, "--graph") == 0) {
      a->graph = 1;
      continue;
    }
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
      ag_usage(argv[0], opts, nopts);
      exit(0);
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "%s: unknown option or missing value: %s\n", argv[0], arg);
      ag_usage(argv[0], opts, nopts);
      exit(1);
    }
    const char *val = argv[i + 1];
    char *end = NULL;
    int matched = 1;
    if (strcmp(arg, "--iters") == 0) {
      a->iters = strtol(val, &end, 10);
      if (*end == '\0' && a->iters < 1) end = (char *)"x";
    } else if (strcmp(arg, "--seed") == 0) {
      a->seed = strtoull(val, &end, 0);
    } else {
      matched = 0;
      for (int k = 0; k < nopts; k++) {
        if (strcmp(arg, opts[k].name) != 0) continue;
        matched = 1;
        if (opts[k].kind == 'i')
          *(long *)opts[k].ptr = strtol(val, &end, 10);
        else
          *(double *)opts[k].ptr = strtod(val, &end);
      }
    }
    if (!matched) {
      fprintf(stderr, "%s: unknown option: %s\n", argv[0], arg);
      ag_usage(argv[0], opts, nopts);
      exit(1);
    }
    if (end == val || *end != '\0') {
      fprintf(stderr, "%s: bad value for %s: %s\n", argv[0], arg, val);
      exit(1);
    }
    i++;
  }
}

static inline void ag_graph_unsupported(const ag_args *a) {
  if (a->graph) {
    fprintf(stderr, "graph: unsupported\n");
    exit(2);
  }
}

static inline double ag_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* When the second half of the timed loop began (ag_loop_mark, called first thing in every iteration):
 * "steady_ms" is the time of that half, once learning and one-time set-up are over. */
static double ag_half_mark_ms = -1.0;
/* AG_ITER_US=N (a diagnostic, read once): the first N iterations' times (us, from one ag_loop_mark to
 * the next, the last to ag_report_loop) go to stderr as one "iter_us:" line, and each of the first 64
 * starts with an "iter I at T ms" line (CLOCK_MONOTONIC, which the shim's "loaded" line gives too: between
 * the shim's debug lines, it says where and when they came). */
#define AG_ITER_MAX 4096
#define AG_ITER_MARKS 64
static double ag_iter_ms[AG_ITER_MAX + 1];
static long ag_iter_n = -1;
/* AG_AB=B (a diagnostic, read once; under the shim): the loop compares the shim with itself paused, in one
 * process, free of the spread between processes (a launch-bound loop's time moves by 10-40% from one run
 * to the next on the GPU machine). From iteration AG_AB_WARM on, blocks of B iterations run with the engine
 * and with it paused (its exported autograph_pause, found with dlsym: every call straight to the driver,
 * as with AUTOGRAPH_SCOPE=off) in turn, switched as an iteration starts; ag_report_loop writes
 * "ab_iter_us: shim <median> paused <median> blocks <n>" to stderr: the medians over each side's blocks of
 * the block's time per iteration (us), from its second iteration (the first pays for the switch) to a
 * device sync after its last, so that what a block left queued on the GPU counts in it (a loop that never
 * syncs, nosync_loop, was timed by what the host enqueued before: the shim's side, whose graph launches
 * return at once, came out 11.5x faster than paused against 3.6x between processes). Without the shim (no
 * autograph_pause) it writes "ab_iter_us: no shim". A loop whose iterations differ in their work gives
 * each its weight (ag_ab_weight, during the iteration: never_repeat's kernel count), and a block's time is
 * per unit of weight: the two sides see other iterations, and with the same seed in every run their
 * medians of whole iterations differed by 3% in the same direction each time. */
#define AG_AB_WARM 20
static long ag_ab_block = -1, ag_ab_n[2], ag_ab_blocks;
static double ag_ab_us[2][AG_ITER_MAX], ag_ab_t0 = -1.0, ag_ab_wsum, ag_ab_w = 1.0;
static inline void ag_ab_weight(double w) {
  if (w > 0.0) ag_ab_w = w;
}
static int ag_ab_side = -1; /* what the block under way runs as: 0 the shim, 1 paused (-1: none yet) */
static int (*ag_ab_pause)(int);
/* The block under way ends (after its work is done): its time per unit of weight, where it was timed. */
static inline void ag_ab_block_end(void) {
  if (ag_ab_side < 0 || ag_ab_t0 < 0.0) return;
  cudaDeviceSynchronize();
  if (ag_ab_wsum > 0.0 && ag_ab_n[ag_ab_side] < AG_ITER_MAX)
    ag_ab_us[ag_ab_side][ag_ab_n[ag_ab_side]++] = (ag_now_ms() - ag_ab_t0) * 1e3 / ag_ab_wsum;
}
static inline void ag_ab_mark(long it) {
  if (ag_ab_block < 0) {
    const char *e = getenv("AG_AB");
    ag_ab_block = e ? atol(e) : 0;
    if (ag_ab_block < 0) ag_ab_block = 0;
    if (ag_ab_block) *(void **)&ag_ab_pause = dlsym(RTLD_DEFAULT, "autograph_pause");
  }
  if (!ag_ab_block || !ag_ab_pause) return;
  if (ag_ab_t0 >= 0.0) ag_ab_wsum += ag_ab_w; /* the iteration that ended was timed */
  ag_ab_w = 1.0;
  if (it < AG_AB_WARM) return;
  long k = it - AG_AB_WARM, side = (k / ag_ab_block) % 2;
  if (k % ag_ab_block == 0) { /* a block starts: the one before ends, the switch is made now */
    ag_ab_block_end();
    ag_ab_pause((int)side);
    ag_ab_blocks++;
    ag_ab_side = (int)side;
    ag_ab_t0 = -1.0;
    ag_ab_wsum = 0.0;
  } else if (ag_ab_t0 < 0.0) {
    ag_ab_t0 = ag_now_ms(); /* from the block's second iteration */
  }
}
static inline int ag_ab_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
static inline double ag_ab_median(int side) {
  long n = ag_ab_n[side];
  if (!n) return 0.0;
  qsort(ag_ab_us[side], (size_t)n, sizeof(double), ag_ab_cmp);
  return n % 2 ? ag_ab_us[side][n / 2] : 0.5 * (ag_ab_us[side][n / 2 - 1] + ag_ab_us[side][n / 2]);
}
static inline void ag_ab_report(void) {
  if (ag_ab_block <= 0) return;
  if (!ag_ab_pause) {
    fprintf(stderr, "ab_iter_us: no shim\n");
    return;
  }
  if (ag_ab_t0 >= 0.0) ag_ab_wsum += ag_ab_w; /* the last iteration */
  ag_ab_block_end();
  ag_ab_pause(0);
  fprintf(stderr, "ab_iter_us: shim %.3f paused %.3f blocks %ld\n", ag_ab_median(0), ag_ab_median(1), ag_ab_blocks);
}

static inline void ag_loop_mark(long it, long iters) {
  ag_ab_mark(it);
  if (ag_iter_n < 0) {
    const char *e = getenv("AG_ITER_US");
    ag_iter_n = e ? atol(e) : 0;
    if (ag_iter_n > AG_ITER_MAX || ag_iter_n < 0) ag_iter_n = AG_ITER_MAX;
  }
  if (it <= ag_iter_n) ag_iter_ms[it] = ag_now_ms();
  if (it < ag_iter_n && it < AG_ITER_MARKS) fprintf(stderr, "iter %ld at %.3f ms\n", it, ag_iter_ms[it]);
  if (it == iters / 2) ag_half_mark_ms = ag_now_ms();
}
/* --graph: the host time of capturing and instantiating the sample's graph before its loop (ag_capture),
 * which the loop's time leaves out; reported as "setup_ms:" (a program that graphs its work by hand pays
 * it, as the library pays its learning inside the loop). */
static double ag_setup_ms = -1.0;

static inline void ag_report_loop(double ms) {
  double end = ag_now_ms();
  ag_ab_report();
  fprintf(stderr, "loop_ms: %.3f\n", ms);
  if (ag_setup_ms >= 0.0) fprintf(stderr, "setup_ms: %.3f\n", ag_setup_ms);
  if (ag_half_mark_ms >= 0.0) fprintf(stderr, "steady_ms: %.3f\n", end - ag_half_mark_ms);
  if (ag_iter_n > 0) {
    fprintf(stderr, "iter_us:");
    for (long i = 0; i < ag_iter_n; i++)
      if (ag_iter_ms[i] > 0.0)
        fprintf(stderr, " %.0f", (ag_iter_ms[i + 1] > 0.0 ? ag_iter_ms[i + 1] : end) * 1e3 - ag_iter_ms[i] * 1e3);
    fprintf(stderr, "\n");
  }
}

/* Deterministic host-side initial data (splitmix64), identical on every machine. */
static inline uint64_t ag_splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static inline void ag_fill_uniform(float *h, size_t n, uint64_t seed, float lo, float hi) {
  uint64_t s = seed;
  for (size_t i = 0; i < n; i++) {
    float u = (float)(ag_splitmix64(&s) >> 40) * (1.0f / 16777216.0f);
    h[i] = lo + (hi - lo) * u;
  }
}

#define AG_FNV_INIT 0xcbf29ce484222325ULL

static inline uint64_t ag_fnv1a(uint64_t h, const void *data, size_t n) {
  const unsigned char *p = (const unsigned char *)data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

/* Copies a device buffer back (synchronously, after all work) and folds its bytes into h. */
static inline uint64_t ag_hash_device(uint64_t h, const void *dptr, size_t bytes) {
  void *tmp = malloc(bytes);
  if (!tmp) {
    fprintf(stderr, "out of host memory\n");
    exit(1);
  }
  CK(cudaMemcpy(tmp, dptr, bytes, cudaMemcpyDeviceToHost));
  h = ag_fnv1a(h, tmp, bytes);
  free(tmp);
  return h;
}

static inline void ag_print_checksum(uint64_t h) {
  printf("checksum: %016llx\n", (unsigned long long)h);
  fflush(stdout);
}

/* Captures one iteration enqueued by fn onto the created stream s and instantiates it once. */
typedef void (*ag_enqueue_fn)(cudaStream_t s, void *ctx);

static inline cudaGraphExec_t ag_capture(cudaStream_t s, ag_enqueue_fn fn, void *ctx) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  double t0 = ag_now_ms();
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  fn(s, ctx);
  CK(cudaStreamEndCapture(s, &graph));
  CK(cudaGraphInstantiate(&exec, graph, 0));
  CK(cudaGraphDestroy(graph));
  ag_setup_ms = (ag_setup_ms > 0.0 ? ag_setup_ms : 0.0) + ag_now_ms() - t0;
  return exec;
}

/* --graph: a non-blocking stream with one iteration captured on it (NULL and no stream otherwise). */
static inline cudaGraphExec_t ag_graph_mode(const ag_args *a, cudaStream_t *gs, ag_enqueue_fn fn, void *ctx) {
  *gs = NULL;
  if (!a->graph) return NULL;
  CK(cudaStreamCreateWithFlags(gs, cudaStreamNonBlocking));
  return ag_capture(*gs, fn, ctx);
}

static inline int ag_blocks(long n, int threads) { return (int)((n + threads - 1) / threads); }

#endif
