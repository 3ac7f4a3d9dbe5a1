/* launch_bound: ~200 tiny elementwise kernels per iteration on the legacy default stream, one sync each.
 * Host launch cost dominates: the library should learn the iteration and replay it as one graph,
 * getting close to --graph (the hand-captured ceiling). */
#include "common.h"

#define N 4096
#define THREADS 256

#include "sample_kernels.cuh"

typedef struct {
  float *a, *b, *c;
  long kernels;
} ctx_t;

/* One iteration: a ping-pong chain that always ends in a (so every iteration has the same shape),
 * then c is relaxed towards a so that the state carries across iterations. */
static void enqueue(cudaStream_t s, void *p) {
  ctx_t *c = (ctx_t *)p;
  const int grid = ag_blocks(N, THREADS);
  float *cur = c->a, *other = c->b;
  for (long k = 0; k < c->kernels - 1; k++) {
    float *dst = (k == c->kernels - 2) ? c->a : other;
    /* Convex combinations and the logistic map keep every value in [0, 1]. */
    float a = 0.9f + 0.0005f * (float)(k % 200);
    switch (k % 3) {
    case 0:
      k_axpb<<<grid, THREADS, 0, s>>>(dst, cur, a, (1.0f - a) * (float)(k % 7) / 7.0f, N);
      break;
    case 1:
      k_mix<<<grid, THREADS, 0, s>>>(dst, cur, c->c, 0.01f, N);
      break;
    default:
      k_logistic<<<grid, THREADS, 0, s>>>(dst, cur, 3.8f + 0.0005f * (float)(k % 300), N);
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
  k_mix<<<grid, THREADS, 0, s>>>(c->c, c->c, c->a, 0.5f, N);
  CK_LAUNCH();
}

int main(int argc, char **argv) {
  ag_args args;
  long kernels = 200;
  ag_opt opts[] = {{"--kernels", 'i', &kernels}};
  ag_parse(argc, argv, &args, 600, opts, 1);
  if (kernels < 2) {
    fprintf(stderr, "--kernels must be >= 2\n");
    return 1;
  }

  static float h[N];
  ctx_t c;
  c.kernels = kernels;
  CK(cudaMalloc(&c.a, N * sizeof(float)));
  CK(cudaMalloc(&c.b, N * sizeof(float)));
  CK(cudaMalloc(&c.c, N * sizeof(float)));
  ag_fill_uniform(h, N, args.seed, 0.0f, 1.0f);
  CK(cudaMemcpy(c.a, h, sizeof h, cudaMemcpyHostToDevice));
  CK(cudaMemset(c.b, 0, sizeof h));
  ag_fill_uniform(h, N, args.seed + 1, 0.0f, 1.0f);
  CK(cudaMemcpy(c.c, h, sizeof h, cudaMemcpyHostToDevice));

  cudaStream_t gs;
  cudaGraphExec_t exec = ag_graph_mode(&args, &gs, enqueue, &c);

  CK(cudaDeviceSynchronize());
  double t0 = ag_now_ms();
  for (long it = 0; it < args.iters; it++) {
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

  CK(cudaMemcpy(h, c.a, sizeof h, cudaMemcpyDeviceToHost));
  printf("sample: launch_bound\niters: %ld kernels: %ld\na[0]: %a a[%d]: %a\n", args.iters, kernels,
         (double)h[0], N - 1, (double)h[N - 1]);
  uint64_t sum = ag_fnv1a(AG_FNV_INIT, h, sizeof h);
  sum = ag_hash_device(sum, c.c, sizeof h);
  ag_print_checksum(sum);
  if (exec) CK(cudaGraphExecDestroy(exec));
  if (gs) CK(cudaStreamDestroy(gs));
  CK(cudaFree(c.a));
  CK(cudaFree(c.b));
  CK(cudaFree(c.c));
  return 0;
}
