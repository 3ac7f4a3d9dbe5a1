/* launch_bound: ~200 tiny elementwise kernels per iteration on the legacy default stream, one sync each.
 * Host launch cost dominates: the library should learn the iteration and replay it as one graph,
 * getting close to --graph (the hand-captured ceiling). With a large --n (elements per kernel) the same
 * loop is GPU-bound instead: the GPU, not the host, sets the pace, and a graph cannot speed it up. */
#include "common.h"

#define N 4096
#define THREADS 256

#include "sample_kernels.cuh"

typedef struct {
  float *a, *b, *c;
  long kernels;
  int n;
} ctx_t;

/* One iteration: a ping-pong chain that always ends in a (so every iteration has the same shape),
 * then c is relaxed towards a so that the state carries across iterations. */
static void enqueue(cudaStream_t s, void *p) {
  ctx_t *c = (ctx_t *)p;
  const int n = c->n;
  const int grid = ag_blocks(n, THREADS);
  float *cur = c->a, *other = c->b;
  for (long k = 0; k < c->kernels - 1; k++) {
    float *dst = (k == c->kernels - 2) ? c->a : other;
    /* Convex combinations and the logistic map keep every value in [0, 1]. */
    float a = 0.9f + 0.0005f * (float)(k % 200);
    switch (k % 3) {
    case 0:
      k_axpb<<<grid, THREADS, 0, s>>>(dst, cur, a, (1.0f - a) * (float)(k % 7) / 7.0f, n);
      break;
    case 1:
      k_mix<<<grid, THREADS, 0, s>>>(dst, cur, c->c, 0.01f, n);
      break;
    default:
      k_logistic<<<grid, THREADS, 0, s>>>(dst, cur, 3.8f + 0.0005f * (float)(k % 300), n);
      break;
    }
    if (dst == c->a) {
      cur = c->a;
      other = c->b;
    } else {
      other = cur;
      cur = dst;
    }
  }
  k_mix<<<grid, THREADS, 0, s>>>(c->c, c->c, c->a, 0.5f, n);
  CK_LAUNCH();
}

int main(int argc, char **argv) {
  ag_args args;
  long kernels = 200, n = N;
  ag_opt opts[] = {{"--kernels", 'i', &kernels}, {"--n", 'i', &n}};
  ag_parse(argc, argv, &args, 600, opts, 2);
  if (kernels < 2) {
    fprintf(stderr, "--kernels must be >= 2\n");
    return 1;
  }
  if (n < 1 || n > (1L << 28)) {
    fprintf(stderr, "--n must be in 1..%ld\n", 1L << 28);
    return 1;
  }

  const size_t bytes = (size_t)n * sizeof(float);
  float *h = (float *)malloc(bytes);
  if (!h) {
    fprintf(stderr, "out of host memory\n");
    return 1;
  }
  ctx_t c;
  c.kernels = kernels;
  c.n = (int)n;
  CK(cudaMalloc(&c.a, bytes));
  CK(cudaMalloc(&c.b, bytes));
  CK(cudaMalloc(&c.c, bytes));
  ag_fill_uniform(h, (size_t)n, args.seed, 0.0f, 1.0f);
  CK(cudaMemcpy(c.a, h, bytes, cudaMemcpyHostToDevice));
  CK(cudaMemset(c.b, 0, bytes));
  ag_fill_uniform(h, (size_t)n, args.seed + 1, 0.0f, 1.0f);
  CK(cudaMemcpy(c.c, h, bytes, cudaMemcpyHostToDevice));

  cudaStream_t gs;
  cudaGraphExec_t exec = ag_graph_mode(&args, &gs, enqueue, &c);

  CK(cudaDeviceSynchronize());
  double t0 = ag_now_ms();
  for (long it = 0; it < args.iters; it++) {
    ag_loop_mark(it, args.iters);
    if (args.graph) {
      CK(cudaGraphLaunch(exec, gs));
      CK(cudaStreamSynchronize(gs));
    } else {
      enqueue(0, &c);
      CK(cudaStreamSynchronize(0));
    }
  }
  CK(cudaDeviceSynchronize());
  ag_report_loop(ag_now_ms() - t0);

  CK(cudaMemcpy(h, c.a, bytes, cudaMemcpyDeviceToHost));
  printf("sample: launch_bound\niters: %ld kernels: %ld\na[0]: %a a[%d]: %a\n", args.iters, kernels,
         (double)h[0], (int)n - 1, (double)h[n - 1]);
  uint64_t sum = ag_fnv1a(AG_FNV_INIT, h, bytes);
  sum = ag_hash_device(sum, c.c, bytes);
  ag_print_checksum(sum);
  if (exec) CK(cudaGraphExecDestroy(exec));
  if (gs) CK(cudaStreamDestroy(gs));
  CK(cudaFree(c.a));
  CK(cudaFree(c.b));
  CK(cudaFree(c.c));
  free(h);
  return 0;
}
