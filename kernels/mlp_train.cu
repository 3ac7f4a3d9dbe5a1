/* mlp_train: a 3-layer MLP trained with cuBLAS SGEMMs, dropout drawn with the cuRAND device API
 * (philox, offset advancing every iteration and passed by value, as PyTorch does), an MSE loss
 * reduced on the device and copied to the host every iteration. The library must patch the changing
 * philox offset into its replayed graphs and flush before every loss copy. */
#include "common.h"

#include <cublas_v2.h>
#include <curand_kernel.h>

#define D0 64   /* inputs */
#define H 256   /* hidden width */
#define DOUT 16 /* outputs */
#define B 256   /* batch */
#define P_DROP 0.1f
#define LR 0.05f
#define PHILOX_PER_ITER 8ULL /* two dropout calls, 4 outputs each per thread, like PyTorch */

#define CB(call)                                                                                   \
  do {                                                                                             \
    cublasStatus_t cb_st_ = (call);                                                                \
    if (cb_st_ != CUBLAS_STATUS_SUCCESS) {                                                         \
      fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call,                    \
              cublasGetStatusString(cb_st_), (int)cb_st_);                                         \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

/* PyTorch's PhiloxCudaState: eager launches carry the offset by value; a captured graph reads a device
 * counter instead, which a kernel in the graph advances. Both give the same offsets. */
typedef struct {
  unsigned long long seed;
  unsigned long long offset;
  const unsigned long long *offset_ptr;
  unsigned long long intra;
  int captured;
} philox_args;

__global__ void k_bias_relu_dropout(float *z, const float *bias, float *a, float *mask, int rows, int n,
                                    philox_args ph) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned long long offset = ph.captured ? *ph.offset_ptr + ph.intra : ph.offset;
  curandStatePhilox4_32_10_t st;
  curand_init(ph.seed, (unsigned long long)i, offset, &st);
  float m = curand_uniform(&st) > P_DROP ? 1.0f / (1.0f - P_DROP) : 0.0f;
  float v = z[i] + bias[i % rows];
  z[i] = v;
  mask[i] = m;
  a[i] = (v > 0.0f ? v : 0.0f) * m;
}

__global__ void k_bias(float *y, const float *bias, int rows, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += bias[i % rows];
}

/* One block, fixed summation order: deterministic, unlike an atomicAdd reduction. */
__global__ void k_mse_loss(const float *y, const float *t, float *loss, int n) {
  __shared__ float s[256];
  float acc = 0.0f;
  for (int i = threadIdx.x; i < n; i += 256) {
    float d = y[i] - t[i];
    acc += d * d;
  }
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int stride = 128; stride > 0; stride >>= 1) {
    if (threadIdx.x < stride) s[threadIdx.x] += s[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0) *loss = s[0] / (float)n;
}

__global__ void k_mse_grad(const float *y, const float *t, float *dy, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) dy[i] = 2.0f / (float)n * (y[i] - t[i]);
}

/* Bias gradient: one thread per row, columns summed in order. */
__global__ void k_rowsum(const float *g, float *db, int rows, int cols) {
  int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  float acc = 0.0f;
  for (int c = 0; c < cols; c++) acc += g[(size_t)c * rows + r];
  db[r] = acc;
}

__global__ void k_relu_dropout_bwd(float *d, const float *z, const float *mask, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) d[i] = z[i] > 0.0f ? d[i] * mask[i] : 0.0f;
}

__global__ void k_sgd(float *w, const float *g, float lr, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) w[i] -= lr * g[i];
}

__global__ void k_advance(unsigned long long *counter, unsigned long long inc) { *counter += inc; }

enum { W1, B1, W2, B2, W3, B3, NPARAM };
static const int kParamSize[NPARAM] = {H * D0, H, H * H, H, DOUT * H, DOUT};

typedef struct {
  cublasHandle_t blas;
  float *x, *t, *p[NPARAM], *g[NPARAM];
  float *z1, *a1, *m1, *z2, *a2, *m2, *y, *dy, *loss;
  unsigned long long *counter;
  unsigned long long seed;
  int graph;
  long it;            /* eager: the iteration whose offset is passed by value */
  float *loss_pinned; /* graph: destination of the captured loss copy */
} ctx_t;

static void gemm(ctx_t *c, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, const float *a,
                 int lda, const float *b, int ldb, float *out, int ldc) {
  const float one = 1.0f, zero = 0.0f;
  CB(cublasSgemm(c->blas, ta, tb, m, n, k, &one, a, lda, b, ldb, &zero, out, ldc));
}

static void enqueue(cudaStream_t s, void *arg) {
  ctx_t *c = (ctx_t *)arg;
  const cublasOperation_t N_ = CUBLAS_OP_N, T_ = CUBLAS_OP_T;
  const int hb = H * B, ob = DOUT * B;
  philox_args ph = {c->seed, 0, c->counter, 0, c->graph};
  /* forward */
  gemm(c, N_, N_, H, B, D0, c->p[W1], H, c->x, D0, c->z1, H);
  ph.offset = (unsigned long long)c->it * PHILOX_PER_ITER;
  ph.intra = 0;
  k_bias_relu_dropout<<<ag_blocks(hb, 256), 256, 0, s>>>(c->z1, c->p[B1], c->a1, c->m1, H, hb, ph);
  gemm(c, N_, N_, H, B, H, c->p[W2], H, c->a1, H, c->z2, H);
  ph.offset += 4;
  ph.intra = 4;
  k_bias_relu_dropout<<<ag_blocks(hb, 256), 256, 0, s>>>(c->z2, c->p[B2], c->a2, c->m2, H, hb, ph);
  gemm(c, N_, N_, DOUT, B, H, c->p[W3], DOUT, c->a2, H, c->y, DOUT);
  k_bias<<<ag_blocks(ob, 256), 256, 0, s>>>(c->y, c->p[B3], DOUT, ob);
  k_mse_loss<<<1, 256, 0, s>>>(c->y, c->t, c->loss, ob);
  /* backward. Buffers are reused once their forward value is dead: dA2/dZ2 go into a2 (after dW3
   * used A2), dA1/dZ1 into a1 (after dW2 used A1). */
  k_mse_grad<<<ag_blocks(ob, 256), 256, 0, s>>>(c->y, c->t, c->dy, ob);
  gemm(c, N_, T_, DOUT, H, B, c->dy, DOUT, c->a2, H, c->g[W3], DOUT);
  k_rowsum<<<1, 256, 0, s>>>(c->dy, c->g[B3], DOUT, B);
  gemm(c, T_, N_, H, B, DOUT, c->p[W3], DOUT, c->dy, DOUT, c->a2, H);
  k_relu_dropout_bwd<<<ag_blocks(hb, 256), 256, 0, s>>>(c->a2, c->z2, c->m2, hb);
  gemm(c, N_, T_, H, H, B, c->a2, H, c->a1, H, c->g[W2], H);
  k_rowsum<<<1, 256, 0, s>>>(c->a2, c->g[B2], H, B);
  gemm(c, T_, N_, H, B, H, c->p[W2], H, c->a2, H, c->a1, H);
  k_relu_dropout_bwd<<<ag_blocks(hb, 256), 256, 0, s>>>(c->a1, c->z1, c->m1, hb);
  gemm(c, N_, T_, H, D0, B, c->a1, H, c->x, D0, c->g[W1], H);
  k_rowsum<<<1, 256, 0, s>>>(c->a1, c->g[B1], H, B);
  /* SGD */
  for (int k = 0; k < NPARAM; k++)
    k_sgd<<<ag_blocks(kParamSize[k], 256), 256, 0, s>>>(c->p[k], c->g[k], LR, kParamSize[k]);
  if (c->graph) {
    k_advance<<<1, 1, 0, s>>>(c->counter, PHILOX_PER_ITER);
    CK(cudaMemcpyAsync(c->loss_pinned, c->loss, sizeof(float), cudaMemcpyDeviceToHost, s));
  }
  CK_LAUNCH();
}

int main(int argc, char **argv) {
  ag_args args;
  ag_parse(argc, argv, &args, 2000, NULL, 0);

  ctx_t c;
  memset(&c, 0, sizeof c);
  c.seed = args.seed;
  c.graph = args.graph;
  static float hx[D0 * B], ht[DOUT * B], hproj[DOUT * D0], hw[H * H];
  ag_fill_uniform(hx, D0 * B, args.seed, -1.0f, 1.0f);
  ag_fill_uniform(hproj, DOUT * D0, args.seed + 1, -0.3f, 0.3f);
  for (int b = 0; b < B; b++)
    for (int o = 0; o < DOUT; o++) {
      float acc = 0.0f;
      for (int j = 0; j < D0; j++) acc += hproj[o * D0 + j] * hx[b * D0 + j];
      ht[b * DOUT + o] = sinf(acc);
    }
  CK(cudaMalloc(&c.x, sizeof hx));
  CK(cudaMalloc(&c.t, sizeof ht));
  CK(cudaMemcpy(c.x, hx, sizeof hx, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(c.t, ht, sizeof ht, cudaMemcpyHostToDevice));
  const int fan_in[NPARAM] = {D0, D0, H, H, H, H};
  for (int k = 0; k < NPARAM; k++) {
    size_t bytes = (size_t)kParamSize[k] * sizeof(float);
    CK(cudaMalloc(&c.p[k], bytes));
    CK(cudaMalloc(&c.g[k], bytes));
    float bound = 1.0f / sqrtf((float)fan_in[k]);
    ag_fill_uniform(hw, (size_t)kParamSize[k], args.seed + 10 + (uint64_t)k, -bound, bound);
    CK(cudaMemcpy(c.p[k], hw, bytes, cudaMemcpyHostToDevice));
  }
  float **acts[] = {&c.z1, &c.a1, &c.m1, &c.z2, &c.a2, &c.m2};
  for (int k = 0; k < 6; k++) CK(cudaMalloc(acts[k], (size_t)H * B * sizeof(float)));
  CK(cudaMalloc(&c.y, DOUT * B * sizeof(float)));
  CK(cudaMalloc(&c.dy, DOUT * B * sizeof(float)));
  CK(cudaMalloc(&c.loss, sizeof(float)));
  CK(cudaMalloc(&c.counter, sizeof(unsigned long long)));
  CK(cudaMemset(c.counter, 0, sizeof(unsigned long long)));
  CK(cudaMallocHost(&c.loss_pinned, sizeof(float)));

  /* Same math mode and the same explicit workspace in both modes, so cuBLAS picks the same kernels
   * eagerly and under capture. cublasSetStream resets the workspace, hence the order. */
  void *workspace;
  const size_t ws_bytes = 32u << 20;
  CK(cudaMalloc(&workspace, ws_bytes));
  CB(cublasCreate(&c.blas));
  CB(cublasSetMathMode(c.blas, CUBLAS_PEDANTIC_MATH));

  float *losses = (float *)malloc((size_t)args.iters * sizeof(float));
  if (!losses) return 1;
  cudaStream_t gs = NULL;
  cudaGraphExec_t exec = NULL;
  if (args.graph) {
    CK(cudaStreamCreateWithFlags(&gs, cudaStreamNonBlocking));
    CB(cublasSetStream(c.blas, gs));
    CB(cublasSetWorkspace(c.blas, workspace, ws_bytes));
    exec = ag_capture(gs, enqueue, &c);
  } else {
    CB(cublasSetStream(c.blas, 0));
    CB(cublasSetWorkspace(c.blas, workspace, ws_bytes));
  }

  CK(cudaDeviceSynchronize());
  double t0 = ag_now_ms();
  for (long it = 0; it < args.iters; it++) {
    ag_loop_mark(it, args.iters);
    if (args.graph) {
      CK(cudaGraphLaunch(exec, gs));
      CK(cudaStreamSynchronize(gs));
      losses[it] = *c.loss_pinned;
    } else {
      c.it = it;
      enqueue(0, &c);
      float l; /* pageable: a synchronous copy, like loss.item() */
      CK(cudaMemcpy(&l, c.loss, sizeof l, cudaMemcpyDeviceToHost));
      losses[it] = l;
    }
  }
  CK(cudaDeviceSynchronize());
  ag_report_loop(ag_now_ms() - t0);

  uint64_t lh = ag_fnv1a(AG_FNV_INIT, losses, (size_t)args.iters * sizeof(float));
  printf("sample: mlp_train\niters: %ld\nloss[0]: %a\n", args.iters, (double)losses[0]);
  for (long it = args.iters > 3 ? args.iters - 3 : 1; it < args.iters; it++)
    printf("loss[%ld]: %a\n", it, (double)losses[it]);
  printf("losses: %016llx\n", (unsigned long long)lh);
  uint64_t sum = lh;
  for (int k = 0; k < NPARAM; k++) sum = ag_hash_device(sum, c.p[k], (size_t)kParamSize[k] * sizeof(float));
  ag_print_checksum(sum);
  CB(cublasDestroy(c.blas));
  if (exec) CK(cudaGraphExecDestroy(exec));
  if (gs) CK(cudaStreamDestroy(gs));
  free(losses);
  return 0;
}
