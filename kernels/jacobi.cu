/* jacobi: a Jacobi solver for a 2D Poisson problem; each iteration some sweeps, a deterministic
 * residual-norm reduction, the residual copied to the host and checked against --tol. The library
 * must flush before the synchronous copy and replay the sweep+reduction block as one graph. */
#include "common.h"

#include <math.h>

#define THREADS 256

/* Interior points only; the boundary rows and columns stay at their initial values. */
__global__ void k_sweep(float *out, const float *in, const float *f, int n, float h2) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  int r = i / n, c = i % n;
  if (r <= 0 || r >= n - 1 || c <= 0 || c >= n - 1) return;
  out[i] = 0.25f * (in[i - 1] + in[i + 1] + in[i - n] + in[i + n] - h2 * f[i]);
}

/* One block per row, fixed-order tree: the squared residual of each row, deterministically. */
__global__ void k_row_residual(float *partial, const float *u, const float *f, int n, float inv_h2) {
  __shared__ float s[THREADS];
  int r = blockIdx.x;
  float acc = 0.0f;
  if (r > 0 && r < n - 1)
    for (int c = 1 + threadIdx.x; c < n - 1; c += THREADS) {
      int i = r * n + c;
      float lap = (u[i - 1] + u[i + 1] + u[i - n] + u[i + n] - 4.0f * u[i]) * inv_h2;
      float d = f[i] - lap;
      acc += d * d;
    }
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = THREADS / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[r] = s[0];
}

__global__ void k_final_residual(float *res, const float *partial, int rows) {
  __shared__ float s[THREADS];
  float acc = 0.0f;
  for (int r = threadIdx.x; r < rows; r += THREADS) acc += partial[r];
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = THREADS / 2; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) *res = sqrtf(s[0]);
}

typedef struct {
  float *u, *v, *f, *partial, *res, *res_pinned;
  int n, sweeps, graph;
} ctx_t;

static void enqueue(cudaStream_t s, void *arg) {
  ctx_t *c = (ctx_t *)arg;
  const int cells = c->n * c->n;
  const float h = 1.0f / (float)(c->n - 1);
  for (int k = 0; k < c->sweeps / 2; k++) {
    k_sweep<<<ag_blocks(cells, THREADS), THREADS, 0, s>>>(c->v, c->u, c->f, c->n, h * h);
    k_sweep<<<ag_blocks(cells, THREADS), THREADS, 0, s>>>(c->u, c->v, c->f, c->n, h * h);
  }
  k_row_residual<<<c->n, THREADS, 0, s>>>(c->partial, c->u, c->f, c->n, 1.0f / (h * h));
  k_final_residual<<<1, THREADS, 0, s>>>(c->res, c->partial, c->n);
  if (c->graph) CK(cudaMemcpyAsync(c->res_pinned, c->res, sizeof(float), cudaMemcpyDeviceToHost, s));
  CK_LAUNCH();
}

int main(int argc, char **argv) {
  ag_args args;
  long n = 256, sweeps = 4;
  double tol = 0.0; /* 0: never converged, so every run does exactly --iters iterations */
  ag_opt opts[] = {{"--n", 'i', &n}, {"--sweeps", 'i', &sweeps}, {"--tol", 'f', &tol}};
  ag_parse(argc, argv, &args, 6000, opts, 3);
  /* Sweeps ping-pong between u and v, so an even count leaves the result in u. */
  if (n < 3 || n > 8192 || sweeps < 2 || sweeps % 2 != 0) {
    fprintf(stderr, "need 3 <= --n <= 8192 and an even --sweeps >= 2\n");
    return 1;
  }

  ctx_t c;
  c.n = (int)n;
  c.sweeps = (int)sweeps;
  c.graph = args.graph;
  const size_t cells = (size_t)n * (size_t)n, bytes = cells * sizeof(float);
  float *hf = (float *)malloc(bytes);
  float *res_hist = (float *)malloc((size_t)args.iters * sizeof(float));
  if (!hf || !res_hist) return 1;
  ag_fill_uniform(hf, cells, args.seed, -1.0f, 1.0f);
  CK(cudaMalloc(&c.u, bytes));
  CK(cudaMalloc(&c.v, bytes));
  CK(cudaMalloc(&c.f, bytes));
  CK(cudaMalloc(&c.partial, (size_t)n * sizeof(float)));
  CK(cudaMalloc(&c.res, sizeof(float)));
  CK(cudaMallocHost(&c.res_pinned, sizeof(float)));
  CK(cudaMemcpy(c.f, hf, bytes, cudaMemcpyHostToDevice));
  CK(cudaMemset(c.u, 0, bytes));
  CK(cudaMemset(c.v, 0, bytes));

  cudaStream_t gs;
  cudaGraphExec_t exec = ag_graph_mode(&args, &gs, enqueue, &c);

  long done = 0;
  CK(cudaDeviceSynchronize());
  double t0 = ag_now_ms();
  for (long it = 0; it < args.iters; it++) {
    ag_loop_mark(it, args.iters);
    float res;
    if (args.graph) {
      CK(cudaGraphLaunch(exec, gs));
      CK(cudaStreamSynchronize(gs));
      res = *c.res_pinned;
    } else {
      enqueue(0, &c);
      CK(cudaMemcpy(&res, c.res, sizeof res, cudaMemcpyDeviceToHost));
    }
    res_hist[done++] = res;
    if (!isfinite(res)) {
      fprintf(stderr, "jacobi: residual is not finite at iteration %ld\n", it);
      return 1;
    }
    if ((double)res < tol) break;
  }
  CK(cudaDeviceSynchronize());
  ag_report_loop(ag_now_ms() - t0);

  CK(cudaMemcpy(hf, c.u, bytes, cudaMemcpyDeviceToHost));
  printf("sample: jacobi\nn: %ld sweeps: %ld\niterations: %ld\nresidual[0]: %a\nresidual[last]: %a\n", n,
         sweeps, done, (double)res_hist[0], (double)res_hist[done - 1]);
  uint64_t sum = ag_fnv1a(AG_FNV_INIT, res_hist, (size_t)done * sizeof(float));
  sum = ag_fnv1a(sum, hf, bytes);
  ag_print_checksum(sum);
  if (exec) CK(cudaGraphExecDestroy(exec));
  if (gs) CK(cudaStreamDestroy(gs));
  free(hf);
  free(res_hist);
  return 0;
}
