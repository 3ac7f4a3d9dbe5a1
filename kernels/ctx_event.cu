/* ctx_event: a context-wide event record (cuCtxRecordEvent, CUDA 12.5 and later) is each iteration's only
 * wait. An iteration launches a chain of tiny kernels on the legacy stream, the last of which writes the
 * chain's first values into page-locked host memory mapped into the device; then it records an event for
 * the whole context, synchronizes on that event and reads the values straight from host memory (no copy,
 * no stream sync). The record must take in every launch made before it: a launch that reached the driver
 * after the record would leave the host reading the iteration before's values, and the checksum, folded
 * from what the host read in every iteration, would differ. --wait also makes the context wait on the
 * event (cuCtxWaitEvent) before the next iteration's launches. --sync-thread 1 adds a second thread that
 * syncs the whole context (cuCtxSynchronize) and records a context-wide event of its own, over and over,
 * while the loop runs: CUDA fails either call where a stream of the context captures, so every one of them
 * must succeed (the program captures nothing; the library's graph builds must keep out of their way), and
 * the sample exits 3 where one failed. --sync-thread 2 (a diagnostic, tests/gpu/ctx_sync_diag.sh) cycles the
 * second thread through more calls that wait for or touch the whole context: cuCtxSynchronize,
 * cuCtxRecordEvent, cuMemAlloc with cuMemFree (the runtime's cudaFree syncs the device) and a sync of the
 * legacy stream, counting each kind's failures. Exit 2 where the driver has no cuCtxRecordEvent. Not in
 * `autograph bench`: a test of the library's barriers. */
#include <cuda.h>
#include <pthread.h>

#include "common.h"

#define N 4096
#define THREADS 256
#define OBS 64

#include "sample_kernels.cuh"

/* Copies the first OBS values of a into the host's mapped buffer. */
__global__ void k_publish(float *host, const float *a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < OBS && i < n) host[i] = a[i];
}

/* --sync-thread: the second thread's calls, 0.3-0.7 ms apart, until `stop`; failures are counted by kind,
 * not fatal. Mode 1 cycles through the first two kinds, mode 2 through all four. */
enum { SK_CTX_SYNC, SK_CTX_RECORD, SK_ALLOC_FREE, SK_LEGACY_SYNC, SK_KINDS };
static const char *const sync_kind_name[SK_KINDS] = {"cuCtxSynchronize", "cuCtxRecordEvent", "cuMemAlloc+cuMemFree",
                                                     "cuStreamSynchronize(legacy)"};
struct syncer {
  CUcontext ctx;
  long mode;
  volatile int stop;
  long calls, failed;
  long kind_calls[SK_KINDS], kind_failed[SK_KINDS];
  CUresult first_error;
};

static CUresult sync_call(struct syncer *s, int kind, CUevent ev) {
  CUresult r;
  CUdeviceptr p;
  switch (kind) {
  case SK_CTX_SYNC: return cuCtxSynchronize();
  case SK_CTX_RECORD:
    r = cuCtxRecordEvent(s->ctx, ev);
    return r == CUDA_SUCCESS ? cuEventSynchronize(ev) : r;
  case SK_ALLOC_FREE:
    r = cuMemAlloc(&p, 1 << 20);
    return r == CUDA_SUCCESS ? cuMemFree(p) : r;
  default: return cuStreamSynchronize(CU_STREAM_LEGACY);
  }
}

static void *sync_thread(void *arg) {
  struct syncer *s = (struct syncer *)arg;
  CUevent ev;
  if (cuCtxSetCurrent(s->ctx) != CUDA_SUCCESS || cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
    s->failed++;
    return NULL;
  }
  while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
    int kind = (int)(s->calls % (s->mode == 2 ? SK_KINDS : 2));
    CUresult r = sync_call(s, kind, ev);
    s->calls++;
    s->kind_calls[kind]++;
    if (r != CUDA_SUCCESS) {
      s->kind_failed[kind]++;
      if (!s->failed++) s->first_error = r;
    }
    /* a pause between calls: each one issues the loop's held work, and the loop must complete chunks
     * (and build their graphs) in between for the calls to meet builds at all */
    struct timespec pause = {0, 300000 + 100000 * (s->calls % 5)};
    nanosleep(&pause, NULL);
  }
  cuEventDestroy(ev);
  return NULL;
}

int main(int argc, char **argv) {
  ag_args args;
  long kernels = 40, wait = 0, sync_thread_on = 0;
  ag_opt opts[] = {{"--kernels", 'i', &kernels}, {"--wait", 'i', &wait}, {"--sync-thread", 'i', &sync_thread_on}};
  ag_parse(argc, argv, &args, 200, opts, 3);
  ag_graph_unsupported(&args);
  if (kernels < 1) {
    fprintf(stderr, "--kernels must be >= 1\n");
    return 1;
  }
  if (sync_thread_on < 0 || sync_thread_on > 2) {
    fprintf(stderr, "--sync-thread must be 0, 1 or 2\n");
    return 1;
  }
  CK(cudaSetDevice(0));
  CK(cudaFree(0)); /* the primary context, current from here on */
  CUcontext ctx;
  CU(cuCtxGetCurrent(&ctx));
  CUevent ev;
  CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CUresult probe = cuCtxRecordEvent(ctx, ev);
  if (probe == CUDA_ERROR_NOT_SUPPORTED || probe == CUDA_ERROR_NOT_FOUND) {
    fprintf(stderr, "cuCtxRecordEvent: not supported by this driver\n");
    return 2;
  }
  CU(probe);
  CU(cuEventSynchronize(ev));

  float *a, *b, *host, *host_dev;
  CK(cudaMalloc(&a, N * sizeof(float)));
  CK(cudaMalloc(&b, N * sizeof(float)));
  CK(cudaHostAlloc(&host, OBS * sizeof(float), cudaHostAllocMapped));
  CK(cudaHostGetDevicePointer(&host_dev, host, 0));
  float *init = (float *)malloc(N * sizeof(float));
  if (!init) return 1;
  ag_fill_uniform(init, N, args.seed, 0.0f, 1.0f);
  CK(cudaMemcpy(a, init, N * sizeof(float), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(b, init, N * sizeof(float), cudaMemcpyHostToDevice));
  free(init);
  memset(host, 0, OBS * sizeof(float));
  CK(cudaDeviceSynchronize());

  const int grid = ag_blocks(N, THREADS);
  uint64_t h = AG_FNV_INIT;
  struct syncer syncer = {ctx, sync_thread_on, 0, 0, 0, {0}, {0}, CUDA_SUCCESS};
  pthread_t syncer_thread;
  if (sync_thread_on && pthread_create(&syncer_thread, NULL, sync_thread, &syncer) != 0) {
    fprintf(stderr, "no thread for --sync-thread\n");
    return 1;
  }
  double t0 = ag_now_ms();
  for (long it = 0; it < args.iters; it++) {
    ag_loop_mark(it, args.iters);
    for (long k = 0; k < kernels; k++) {
      /* a ping-pong chain through a and b that ends in a; the map keeps every value in [0, 1] */
      float *dst = (k % 2 == 0) ? b : a, *src = (k % 2 == 0) ? a : b;
      if (k == kernels - 1) dst = a;
      if (k % 2 == 0)
        k_logistic<<<grid, THREADS>>>(dst, src, 3.7f + 0.001f * (float)(k % 250), N);
      else
        k_mix<<<grid, THREADS>>>(dst, src, b, 0.25f, N);
    }
    k_publish<<<1, OBS>>>(host_dev, a, N);
    CK_LAUNCH();
    CU(cuCtxRecordEvent(ctx, ev));
    CU(cuEventSynchronize(ev));
    h = ag_fnv1a(h, host, OBS * sizeof(float)); /* read straight from the mapped memory */
    if (wait) CU(cuCtxWaitEvent(ctx, ev));
  }
  double ms = ag_now_ms() - t0;
  if (sync_thread_on) {
    __atomic_store_n(&syncer.stop, 1, __ATOMIC_RELEASE);
    pthread_join(syncer_thread, NULL);
    const char *name = "none";
    if (syncer.failed) cuGetErrorName(syncer.first_error, &name);
    fprintf(stderr, "sync thread: %ld context-wide calls, %ld failed (first: %s)\n", syncer.calls, syncer.failed,
            name);
    for (int k = 0; k < SK_KINDS; k++)
      if (syncer.kind_calls[k])
        fprintf(stderr, "sync thread: %s %ld calls, %ld failed\n", sync_kind_name[k], syncer.kind_calls[k],
                syncer.kind_failed[k]);
  }
  CK(cudaDeviceSynchronize());
  ag_report_loop(ms);
  h = ag_hash_device(h, a, N * sizeof(float));
  printf("iterations: %ld, kernels per iteration: %ld\n", args.iters, kernels + 1);
  ag_print_checksum(h);
  CU(cuEventDestroy(ev));
  CK(cudaFreeHost(host));
  CK(cudaFree(a));
  CK(cudaFree(b));
  return syncer.failed ? 3 : 0;
}
