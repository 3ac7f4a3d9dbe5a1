/* cupti_costs: what each CUPTI step costs the host, and what each state CUPTI can be left in costs later
 * kernel and graph launches. Not a test: tests/gpu/diag.sh runs it, once per mode (a fresh process each,
 * since CUPTI's first-use set-up happens once per process):
 *   late       the engine's learn mode today: subscribe after the context has run work, detach with
 *              cuptiFinalize, subscribe again
 *   late_keep  the same, but detach by cuptiUnsubscribe alone (no cuptiFinalize), then subscribe again
 *   early      subscribe and unsubscribe before the first CUDA call, then as late_keep
 *   early_ctx  subscribe and unsubscribe (nothing enabled, no activity) right after the context is made
 *   first W    as the engine's learn mode runs its first window (subscribed and unsubscribed before the
 *              first CUDA call, the window once the context ran work, finalized at its end), the window's
 *              first launches timed one by one: W is what the window enables: both (callbacks and kernel
 *              activity, as the observer), callbacks, activity, or smallbuf (both, CUPTI's device buffer
 *              for activity records set to 256 KB first)
 *   first W background
 *              the same, with cuptiFinalize on a second thread while this one launches graphs, each
 *              timed: what a finalize off the application's thread costs the launches meanwhile
 *   first W early_act
 *              the same as first W, with kernel activity also enabled and disabled in the subscription
 *              before the first CUDA call: whether that moves the window's first-launch cost out
 * Each line: a step and its host ms, or a state and the host us per kernel launch and per graph launch
 * (medians of 5 batches). */
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_bench.h"

__global__ void k_tiny(float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 0.999f + 1.0f;
}

#define N 4096
#define GK 25
static float *buf;
static cudaStream_t st;
static cudaGraphExec_t gexec;
static CUpti_SubscriberHandle sub;
static long long callbacks;

static void CUPTIAPI on_cb(void *u, CUpti_CallbackDomain d, CUpti_CallbackId id, const void *data) {
  (void)u; (void)d; (void)id; (void)data;
  callbacks++;
}
static void CUPTIAPI buf_req(uint8_t **b, size_t *size, size_t *max) {
  *b = (uint8_t *)aligned_alloc(8, 1 << 20);
  *size = 1 << 20;
  *max = 0;
}
static void CUPTIAPI buf_done(CUcontext c, uint32_t s, uint8_t *b, size_t size, size_t valid) {
  (void)c; (void)s; (void)size; (void)valid;
  free(b);
}

#define CU(x) CK_NAMED(CUptiResult, CUPTI_SUCCESS, cuptiGetResultString, x)

static double t0;
static void step(const char *what) {
  double t = ag_now_ms();
  printf("  step %-44s %8.3f ms\n", what, t - t0);
  t0 = ag_now_ms();
}
static void mark(void) { t0 = ag_now_ms(); }

static void setup(void) {
  CK(cudaMalloc(&buf, 4 * N * sizeof(float)));
  CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t g;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed));
  for (int k = 0; k < GK; k++) k_tiny<<<N / 256, 256, 0, st>>>(buf + (k % 4) * N, N);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&gexec, g, 0));
  CK(cudaStreamSynchronize(st));
}

/* host us per kernel launch and per graph launch, medians of 5 batches */
static void state(const char *what) {
  double kl[5], gl[5];
  for (int b = 0; b < 5; b++) {
    double t = ag_now_ms();
    for (int i = 0; i < 2000; i++) k_tiny<<<N / 256, 256, 0, st>>>(buf, N);
    kl[b] = (ag_now_ms() - t) * 1e3 / 2000;
    CK(cudaStreamSynchronize(st));
    t = ag_now_ms();
    for (int i = 0; i < 200; i++) CK(cudaGraphLaunch(gexec, st));
    gl[b] = (ag_now_ms() - t) * 1e3 / 200;
    CK(cudaStreamSynchronize(st));
  }
  qsort(kl, 5, sizeof *kl, cmp);
  qsort(gl, 5, sizeof *gl, cmp);
  printf("  state %-43s kernel %6.2f us, graph %6.2f us\n", what, kl[2], gl[2]);
}

static void subscribe(const char *what) {
  mark();
  CU(cuptiSubscribe(&sub, on_cb, NULL));
  step(what);
}

/* What a window watches: callbacks on the driver domain (cbs) and kernel activity (act), switched on, and
 * off with the activity records flushed, as the observer does. */
static void watch(int cbs, int act) {
  if (cbs) CU(cuptiEnableDomain(1, sub, CUPTI_CB_DOMAIN_DRIVER_API));
  if (act) {
    CU(cuptiActivityRegisterCallbacks(buf_req, buf_done));
    CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
  }
}
static void unwatch(int cbs, int act) {
  if (cbs) CU(cuptiEnableDomain(0, sub, CUPTI_CB_DOMAIN_DRIVER_API));
  if (act) {
    CU(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    CU(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  }
}

/* the learn window: callbacks on the driver domain and kernel activity, as the observer enables them */
static void window(int finalize) {
  mark();
  watch(1, 1);
  step("enable callbacks and kernel activity");
  state("attached (callbacks, activity)");
  mark();
  unwatch(1, 1);
  step("disable and flush");
  CU(cuptiUnsubscribe(sub));
  step("unsubscribe");
  if (finalize) {
    CU(cuptiFinalize());
    step("finalize");
  }
  state(finalize ? "after unsubscribe and finalize" : "after unsubscribe, no finalize");
}

/* The first launches after a window opens, one by one (host us): where a one-time cost lands. */
static void first_launches(const char *what) {
  double us[400];
  for (int i = 0; i < 400; i++) {
    double t = ag_now_ms();
    k_tiny<<<N / 256, 256, 0, st>>>(buf, N);
    us[i] = (ag_now_ms() - t) * 1e3;
  }
  CK(cudaStreamSynchronize(st));
  double sum = 0, rest[200];
  for (int i = 0; i < 200; i++) sum += us[i], rest[i] = us[200 + i];
  qsort(rest, 200, sizeof *rest, cmp);
  printf("  first launches %-34s 1-5: %.1f %.1f %.1f %.1f %.1f us | first 200 together %.3f ms | "
         "launches 201-400 median %.2f us\n", what, us[0], us[1], us[2], us[3], us[4], sum / 1e3, rest[100]);
}

static volatile int fin_done;
static double fin_ms;
static void *finalize_main(void *arg) {
  (void)arg;
  double t = ag_now_ms();
  CU(cuptiFinalize());
  fin_ms = ag_now_ms() - t;
  __atomic_store_n(&fin_done, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* cuptiFinalize on a second thread; this one launches graphs meanwhile, each timed (host us), and goes
 * on for as many after it ended: the launches' cost during and after, and how long the finalize took. */
static void finalize_background(void) {
  static double during[20000], after[2000];
  int nd = 0, na = 0;
  pthread_t th;
  mark();
  if (pthread_create(&th, NULL, finalize_main, NULL)) exit(1);
  while (!__atomic_load_n(&fin_done, __ATOMIC_ACQUIRE) && nd < 20000) {
    double t = ag_now_ms();
    CK(cudaGraphLaunch(gexec, st));
    during[nd++] = (ag_now_ms() - t) * 1e3;
    if (nd % 64 == 0) CK(cudaStreamSynchronize(st));
  }
  pthread_join(th, NULL);
  double wall = ag_now_ms() - t0;
  CK(cudaStreamSynchronize(st));
  for (na = 0; na < 2000; na++) {
    double t = ag_now_ms();
    CK(cudaGraphLaunch(gexec, st));
    after[na] = (ag_now_ms() - t) * 1e3;
    if (na % 64 == 63) CK(cudaStreamSynchronize(st));
  }
  CK(cudaStreamSynchronize(st));
  double sum = 0;
  for (int i = 0; i < nd; i++) sum += during[i];
  qsort(during, nd, sizeof *during, cmp);
  qsort(after, na, sizeof *after, cmp);
  printf("  step finalize on a second thread: %.3f ms there, %.3f ms until joined; %d graph launches meanwhile "
         "(%.3f ms together, median %.2f us, max %.1f us); the 2000 after: median %.2f us, max %.1f us\n",
         fin_ms, wall, nd, sum / 1e3, nd ? during[nd / 2] : 0.0, nd ? during[nd - 1] : 0.0, after[na / 2],
         after[na - 1]);
  t0 = ag_now_ms();
}

/* mode first: the engine's first learning window, W what it enables; background: finalized on a second
 * thread while this one launches graphs */
static void first_window(const char *w, int background) {
  int cbs = strcmp(w, "activity") != 0, act = strcmp(w, "callbacks") != 0;
  subscribe("subscribe (first window, warm)");
  mark();
  if (strcmp(w, "smallbuf") == 0) {
    size_t v = 256 << 10, sz = sizeof v;
    CU(cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE, &sz, &v));
  }
  watch(cbs, act);
  step(w);
  first_launches(w);
  mark();
  unwatch(cbs, act);
  step("disable and flush");
  CU(cuptiUnsubscribe(sub));
  step("unsubscribe");
  if (background) {
    finalize_background();
  } else {
    CU(cuptiFinalize());
    step("finalize");
  }
  first_launches("after the finalize");
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "late";
  printf("cupti_costs %s\n", mode);
  int first = strcmp(mode, "first") == 0;
  int early = strcmp(mode, "early") == 0 || first, keep = strcmp(mode, "late") != 0;
  if (early) {
    subscribe("subscribe before any CUDA call");
    if (first && argc > 3 && strcmp(argv[3], "early_act") == 0) {
      watch(0, 1);
      unwatch(0, 1);
      step("kernel activity enabled and disabled (and flushed) before any CUDA call");
    }
    CU(cuptiUnsubscribe(sub));
    step("unsubscribe");
  }
  mark();
  setup();
  step("context, buffers, graph");
  state(early ? "before the window (subscribed once before)" : "plain");
  if (first) {
    first_launches("before the window");
    first_window(argc > 2 ? argv[2] : "both", argc > 3 && strcmp(argv[3], "background") == 0);
    return 0;
  }
  if (strcmp(mode, "early_ctx") == 0) {
    subscribe("subscribe right after the context (idle)");
    state("subscribed, nothing enabled");
    CU(cuptiUnsubscribe(sub));
    step("unsubscribe");
    state("after the idle subscription");
  }
  subscribe("subscribe (first window)");
  window(!keep);
  subscribe("subscribe (second window)");
  window(!keep);
  subscribe("subscribe (third window)");
  window(1);
  printf("  callbacks seen: %lld\n", callbacks);
  return 0;
}
