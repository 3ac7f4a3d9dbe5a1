/* capture_rules: which calls of one thread CUDA fails, or lets break the capture, while another thread
 * captures on a non-blocking stream of the same context, as the library's builds do (relaxed mode), and for
 * comparison in the thread-local and global modes. The program's thread keeps the default (global) mode,
 * as a program's thread does. Each round: thread A begins a capture on a fresh non-blocking stream and
 * records a kernel into it; thread B makes one call; A then asks the capture's status, records a second
 * kernel, ends the capture, instantiates the graph, launches it and checks its result. A call that does not
 * return within 2 s while A's capture is open is reported as "blocked" (A then ends the capture anyway).
 * Not a test (it asserts nothing); it answers, on the machine it runs on, whether the capture fence
 * (shim/graph.c) must cover a call. On the GPU machine:
 *   nvcc -O2 -o /tmp/capture_rules tests/gpu/capture_rules.cu -lcuda && /tmp/capture_rules */
#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu_bench.h"

__global__ void k_add(float *x, float v) {
  if (threadIdx.x == 0) x[0] += v;
}

static float *dbuf;      /* device memory the kernels and copies use */
static float *dfree;     /* a buffer B frees (made anew each round) */
static float host[1024]; /* pageable */
static CUcontext ctx;
static CUevent cev;      /* for the context-wide calls */
static cudaEvent_t rev;  /* for the runtime's event calls */
static cudaStream_t other; /* a non-blocking stream of B's */

typedef struct {
  const char *name;
  cudaError_t (*call)(void);
} call_t;

static cudaError_t drv(CUresult r) { return r == CUDA_SUCCESS ? cudaSuccess : (cudaError_t)r; }

static cudaError_t c_device_sync(void) { return cudaDeviceSynchronize(); }
static cudaError_t c_ctx_sync(void) { return drv(cuCtxSynchronize()); }
static cudaError_t c_free(void) {
  cudaError_t r = cudaFree(dfree);
  if (r == cudaSuccess) dfree = NULL; /* made anew for the next round */
  return r;
}
static cudaError_t c_malloc(void) {
  void *p;
  cudaError_t r = cudaMalloc(&p, 1 << 20);
  if (r == cudaSuccess) dfree = (float *)p; /* freed by the round (the buffer it replaced is leaked) */
  return r;
}
static cudaError_t c_mem_alloc_free(void) {
  CUdeviceptr p;
  CUresult r = cuMemAlloc(&p, 1 << 20);
  return drv(r != CUDA_SUCCESS ? r : cuMemFree(p));
}
static cudaError_t c_host_alloc_free(void) {
  void *p;
  cudaError_t r = cudaMallocHost(&p, 1 << 20);
  return r != cudaSuccess ? r : cudaFreeHost(p);
}
static cudaError_t c_legacy_sync(void) { return cudaStreamSynchronize(0); }
static cudaError_t c_other_sync(void) { return cudaStreamSynchronize(other); }
static cudaError_t c_h2d(void) { return cudaMemcpy(dbuf + 1024, host, sizeof host, cudaMemcpyHostToDevice); }
static cudaError_t c_d2h(void) { return cudaMemcpy(host, dbuf + 1024, sizeof host, cudaMemcpyDeviceToHost); }
static cudaError_t c_memset(void) { return cudaMemset(dbuf + 1024, 0, sizeof host); }
static cudaError_t c_legacy_launch(void) {
  k_add<<<1, 32>>>(dbuf + 2048, 1.0f);
  return cudaGetLastError();
}
static cudaError_t c_legacy_record(void) {
  cudaError_t r = cudaEventRecord(rev, 0);
  return r != cudaSuccess ? r : cudaEventSynchronize(rev);
}
static cudaError_t c_other_record(void) {
  cudaError_t r = cudaEventRecord(rev, other);
  return r != cudaSuccess ? r : cudaEventSynchronize(rev);
}
static cudaError_t c_event_query(void) {
  cudaError_t r = cudaEventQuery(rev);
  return r == cudaErrorNotReady ? cudaSuccess : r;
}
static cudaError_t c_legacy_query(void) {
  cudaError_t r = cudaStreamQuery(0);
  return r == cudaErrorNotReady ? cudaSuccess : r;
}
static cudaError_t c_ctx_record(void) { return drv(cuCtxRecordEvent(ctx, cev)); }
static cudaError_t c_ctx_wait(void) { return drv(cuCtxWaitEvent(ctx, cev)); }
static cudaError_t c_async_alloc_free(void) {
  void *p;
  cudaError_t r = cudaMallocAsync(&p, 1 << 20, 0);
  return r != cudaSuccess ? r : cudaFreeAsync(p, 0);
}

static const call_t calls[] = {
    {"cudaDeviceSynchronize", c_device_sync},
    {"cuCtxSynchronize", c_ctx_sync},
    {"cudaFree", c_free},
    {"cudaMalloc", c_malloc},
    {"cuMemAlloc+cuMemFree", c_mem_alloc_free},
    {"cudaMallocHost+cudaFreeHost", c_host_alloc_free},
    {"cudaStreamSynchronize(legacy)", c_legacy_sync},
    {"cudaStreamSynchronize(B's nonblocking)", c_other_sync},
    {"cudaMemcpy H2D pageable", c_h2d},
    {"cudaMemcpy D2H pageable", c_d2h},
    {"cudaMemset", c_memset},
    {"launch on legacy", c_legacy_launch},
    {"cudaEventRecord(legacy)+Synchronize", c_legacy_record},
    {"cudaEventRecord(B's)+Synchronize", c_other_record},
    {"cudaEventQuery", c_event_query},
    {"cudaStreamQuery(legacy)", c_legacy_query},
    {"cuCtxRecordEvent", c_ctx_record},
    {"cuCtxWaitEvent", c_ctx_wait},
    {"cudaMallocAsync+cudaFreeAsync(legacy)", c_async_alloc_free},
};

static int go, done; /* through __atomic builtins */
static const call_t *current;
static cudaError_t b_result;

static void *thread_b(void *unused) {
  (void)unused;
  CK(cudaSetDevice(0));
  while (!__atomic_load_n(&go, __ATOMIC_SEQ_CST)) usleep(50);
  b_result = current->call();
  __atomic_store_n(&done, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

static const char *status_name(cudaStreamCaptureStatus s) {
  return s == cudaStreamCaptureStatusActive ? "active" : s == cudaStreamCaptureStatusInvalidated ? "invalidated" : "none";
}

static void round_of(const call_t *c, cudaStreamCaptureMode mode, const char *mode_name) {
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  CK(cudaMemset(dbuf, 0, sizeof(float)));
  if (!dfree) CK(cudaMalloc(&dfree, 1 << 20));
  CK(cudaEventRecord(rev, other));
  CK(cudaDeviceSynchronize());
  current = c;
  __atomic_store_n(&go, 0, __ATOMIC_SEQ_CST);
  __atomic_store_n(&done, 0, __ATOMIC_SEQ_CST);
  pthread_t t;
  if (pthread_create(&t, NULL, thread_b, NULL)) exit(1);
  cudaStreamCaptureMode keep = mode; /* A's thread: the capture's own mode for the calls it makes */
  CK(cudaThreadExchangeStreamCaptureMode(&keep));
  cudaError_t begin = cudaStreamBeginCapture(s, mode);
  k_add<<<1, 32, 0, s>>>(dbuf, 1.0f);
  __atomic_store_n(&go, 1, __ATOMIC_SEQ_CST);
  double t0 = ag_now_ms();
  while (!__atomic_load_n(&done, __ATOMIC_SEQ_CST) && ag_now_ms() - t0 < 2000) usleep(50);
  int blocked = !__atomic_load_n(&done, __ATOMIC_SEQ_CST);
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  cudaError_t info = cudaStreamIsCapturing(s, &st);
  k_add<<<1, 32, 0, s>>>(dbuf, 2.0f);
  cudaGraph_t g = NULL;
  cudaError_t end = cudaStreamEndCapture(s, &g);
  CK(cudaThreadExchangeStreamCaptureMode(&keep));
  pthread_join(t, NULL);
  const char *graph = "-";
  if (end == cudaSuccess && g) {
    cudaGraphExec_t e;
    float v = -1;
    if (cudaGraphInstantiate(&e, g, 0) == cudaSuccess && cudaGraphLaunch(e, s) == cudaSuccess &&
        cudaMemcpy(&v, dbuf, sizeof v, cudaMemcpyDeviceToHost) == cudaSuccess)
      graph = v == 3.0f ? "ran, right" : "ran, WRONG";
    else
      graph = "failed";
    cudaGraphExecDestroy(e);
  }
  if (g) cudaGraphDestroy(g);
  (void)cudaGetLastError();
  cudaError_t sticky = cudaDeviceSynchronize();
  printf("%-13s %-40s B: %-36s%s capture then: %-11s end: %-36s graph: %s%s%s\n", mode_name, c->name,
         cudaGetErrorName(b_result), blocked ? " (blocked until the capture ended)" : "",
         info == cudaSuccess ? status_name(st) : cudaGetErrorName(info), cudaGetErrorName(end), graph,
         begin == cudaSuccess ? "" : " (begin failed)", sticky == cudaSuccess ? "" : " STICKY ERROR");
  (void)cudaGetLastError();
  CK(cudaStreamDestroy(s));
  if (sticky != cudaSuccess) exit(2);
}

int main(void) {
  CK(cudaSetDevice(0));
  CK(cudaFree(0));
  if (cuCtxGetCurrent(&ctx) != CUDA_SUCCESS) return 1;
  CK(cudaMalloc(&dbuf, 4 << 20));
  CK(cudaEventCreateWithFlags(&rev, cudaEventDisableTiming));
  if (cuEventCreate(&cev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) return 1;
  CK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  const struct {
    cudaStreamCaptureMode m;
    const char *name;
  } modes[] = {{cudaStreamCaptureModeRelaxed, "relaxed"},
               {cudaStreamCaptureModeThreadLocal, "thread-local"},
               {cudaStreamCaptureModeGlobal, "global"}};
  int driver = 0;
  cudaDriverGetVersion(&driver);
  printf("capture_rules: driver %d; thread A captures on a non-blocking stream, thread B (global mode) calls\n",
         driver);
  for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++)
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) round_of(&calls[i], modes[m].m, modes[m].name);
  return 0;
}
