/* two_streams: per iteration a fork/join across two created streams through events (record on s0,
 * wait on s1, kernels on both, record on s1, wait on s0, a join kernel on s0), then a sync of s0.
 * The library must keep the cross-stream ordering when it defers or replays (a graph with a fork and a
 * join); s0 is non-blocking, s1 has default flags (it also orders against the legacy stream). */
#include "common.h"

#define N 16384
#define THREADS 256
#define PER_STREAM 10

__global__ void k_axpb(float *y, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * y[i] + b;
}

/* Chaotic and clamped to [0, 1]: a lost dependency or kernel is never forgotten by the dynamics. */
__global__ void k_logistic(float *y, float r, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = fminf(fmaxf(y[i], 0.0f), 1.0f);
  y[i] = r * v * (1.0f - v);
}

/* The join: p depends on both branches, so a missing dependency changes the checksum. */
__global__ void k_join(float *p, const float *q, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = 0.5f * p[i] + 0.5f * q[(i + 1) % n];
}

typedef struct {
  cudaStream_t s0, s1;
  cudaEvent_t fork, join;
  float *p, *q;
} ctx_t;

static void enqueue(cudaStream_t unused, void *arg) {
  (void)unused;
  ctx_t *c = (ctx_t *)arg;
  const int grid = ag_blocks(N, THREADS);
  CK(cudaEventRecord(c->fork, c->s0));
  CK(cudaStreamWaitEvent(c->s1, c->fork, 0));
  for (int k = 0; k < PER_STREAM; k++) {
    if (k % 2 == 0) {
      /* Convex: a*y + (1-a)*t stays in [0, 1]. */
      k_axpb<<<grid, THREADS, 0, c->s0>>>(c->p, 0.95f, 0.05f * 0.1f * (float)k, N);
      k_axpb<<<grid, THREADS, 0, c->s1>>>(c->q, 0.9f, 0.1f * (1.0f - 0.1f * (float)k), N);
    } else {
      k_logistic<<<grid, THREADS, 0, c->s0>>>(c->p, 3.9f, N);
      k_logistic<<<grid, THREADS, 0, c->s1>>>(c->q, 3.8f, N);
    }
  }
  CK(cudaEventRecord(c->join, c->s1));
  CK(cudaStreamWaitEvent(c->s0, c->join, 0));
  k_join<<<grid, THREADS, 0, c->s0>>>(c->p, c->q, N);
  CK_LAUNCH();
}

int main(int argc, char **argv) {
  ag_args args;
  ag_parse(argc, argv, &args, 3000, NULL, 0);

  static float h[N];
  ctx_t c;
  CK(cudaStreamCreateWithFlags(&c.s0, cudaStreamNonBlocking));
  CK(cudaStreamCreate(&c.s1));
  CK(cudaEventCreateWithFlags(&c.fork, cudaEventDisableTiming));
  CK(cudaEventCreateWithFlags(&c.join, cudaEventDisableTiming));
  CK(cudaMalloc(&c.p, sizeof h));
  CK(cudaMalloc(&c.q, sizeof h));
  ag_fill_uniform(h, N, args.seed, 0.0f, 1.0f);
  CK(cudaMemcpy(c.p, h, sizeof h, cudaMemcpyHostToDevice));
  ag_fill_uniform(h, N, args.seed + 1, 0.0f, 1.0f);
  CK(cudaMemcpy(c.q, h, sizeof h, cudaMemcpyHostToDevice));
  CK(cudaDeviceSynchronize());

  cudaGraphExec_t exec = NULL;
  if (args.graph) exec = ag_capture(c.s0, enqueue, &c); /* s1 joins the capture through the fork event */

  CK(cudaDeviceSynchronize());
  double t0 = ag_now_ms();
  for (long it = 0; it < args.iters; it++) {
    ag_loop_mark(it, args.iters);
    if (args.graph)
      CK(cudaGraphLaunch(exec, c.s0));
    else
      enqueue(c.s0, &c);
    CK(cudaStreamSynchronize(c.s0));
  }
  CK(cudaDeviceSynchronize());
  ag_report_loop(ag_now_ms() - t0);

  CK(cudaMemcpy(h, c.p, sizeof h, cudaMemcpyDeviceToHost));
  printf("sample: two_streams\niters: %ld\np[0]: %a p[%d]: %a\n", args.iters, (double)h[0], N - 1,
         (double)h[N - 1]);
  uint64_t sum = ag_fnv1a(AG_FNV_INIT, h, sizeof h);
  sum = ag_hash_device(sum, c.q, sizeof h);
  ag_print_checksum(sum);
  if (exec) CK(cudaGraphExecDestroy(exec));
  CK(cudaEventDestroy(c.fork));
  CK(cudaEventDestroy(c.join));
  CK(cudaStreamDestroy(c.s0));
  CK(cudaStreamDestroy(c.s1));
  return 0;
}
