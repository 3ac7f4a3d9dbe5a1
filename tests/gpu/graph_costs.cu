/* graph_costs: what the replay engine pays per iteration for the ways it could launch the same work,
 * measured on the GPU (host time per iteration of a loop that syncs every iteration, median of 5).
 * Not a test: tests/gpu/diag.sh runs it to explain the bench numbers.
 *   eager            K tiny kernels launched one by one on the legacy stream
 *   graph/nonblock   one graph of the K kernels on a non-blocking stream (a hand-written graph)
 *   graph/legacy     the same graph on the legacy stream (where the engine launches PyTorch's work)
 *   3 graphs         the K kernels cut in chunks of K/2, K/4, rest (the engine's chunk plan)
 *   3 graphs+patch   the same, two kernel nodes patched before each launch (a philox offset)
 *   +d2h             the last chunk ends with a 4-byte copy to pinned memory (a loss copy) */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_bench.h"

__global__ void k_tiny(float *x, int n, unsigned long long off) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * 0.999f + (float)(off & 7);
}

#define K 25
#define N 4096
static float *buf;
static float *pinned;

static void enqueue(cudaStream_t s, int from, int to, unsigned long long off) {
  for (int k = from; k < to; k++) k_tiny<<<N / 256, 256, 0, s>>>(buf + (k % 4) * N, N, off);
}

static cudaGraphExec_t capture(cudaStream_t cs, int from, int to, int d2h, cudaGraphNode_t *first) {
  cudaGraph_t g;
  cudaGraphExec_t e;
  CK(cudaStreamBeginCapture(cs, cudaStreamCaptureModeRelaxed));
  enqueue(cs, from, to, 0);
  if (d2h) CK(cudaMemcpyAsync(pinned, buf, 4, cudaMemcpyDeviceToHost, cs));
  CK(cudaStreamEndCapture(cs, &g));
  if (first) { /* the chunk's first kernel: the only root of a one-stream capture */
    size_t n = 1;
    CK(cudaGraphGetRootNodes(g, first, &n));
  }
  CK(cudaGraphInstantiate(&e, g, 0));
  return e;
}

int main(int argc, char **argv) {
  int iters = argc > 1 ? atoi(argv[1]) : 2000;
  CK(cudaMalloc(&buf, 4 * N * sizeof(float)));
  CK(cudaMemset(buf, 0, 4 * N * sizeof(float)));
  CK(cudaMallocHost(&pinned, 4));
  cudaStream_t nb, cs;
  CK(cudaStreamCreateWithFlags(&nb, cudaStreamNonBlocking));
  CK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
  cudaGraphNode_t n0;
  cudaGraphExec_t whole = capture(cs, 0, K, 0, NULL);
  cudaGraphExec_t c1 = capture(cs, 0, K / 2, 0, &n0), c2 = capture(cs, K / 2, K / 2 + K / 4, 0, NULL);
  cudaGraphExec_t c3 = capture(cs, K / 2 + K / 4, K, 0, NULL), c3d = capture(cs, K / 2 + K / 4, K, 1, NULL);
  cudaKernelNodeParams kp;
  CK(cudaGraphKernelNodeGetParams(n0, &kp));
  const char *names[] = {"eager", "graph/nonblock", "graph/legacy", "3 graphs", "3 graphs+patch", "3 graphs+patch+d2h",
                         "eager+d2h(pageable)"};
  const int ncase = 7;
  double t[7][5];
  for (int rep = 0; rep < 5; rep++)
    for (int c = 0; c < ncase; c++) {
      CK(cudaDeviceSynchronize());
      double t0 = ag_now_ms();
      for (int it = 0; it < iters; it++) {
        unsigned long long off = (unsigned long long)it;
        float host;
        switch (c) {
        case 0:
          enqueue(0, 0, K, off);
          CK(cudaStreamSynchronize(0));
          break;
        case 6:
          enqueue(0, 0, K, off);
          CK(cudaMemcpy(&host, buf, 4, cudaMemcpyDeviceToHost));
          break;
        case 1:
          CK(cudaGraphLaunch(whole, nb));
          CK(cudaStreamSynchronize(nb));
          break;
        case 2:
          CK(cudaGraphLaunch(whole, 0));
          CK(cudaStreamSynchronize(0));
          break;
        default: {
          if (c >= 4) {
            void *args[3];
            float *p = buf;
            int n = N;
            args[0] = &p, args[1] = &n, args[2] = &off;
            kp.kernelParams = args;
            CK(cudaGraphExecKernelNodeSetParams(c1, n0, &kp));
          }
          CK(cudaGraphLaunch(c1, 0));
          CK(cudaGraphLaunch(c2, 0));
          CK(cudaGraphLaunch(c == 5 ? c3d : c3, 0));
          CK(cudaStreamSynchronize(0));
          if (c == 5) memcpy(&host, pinned, 4);
        }
        }
      }
      t[c][rep] = (ag_now_ms() - t0) * 1e3 / iters;
    }
  printf("graph_costs: %d tiny kernels per iteration, one sync per iteration, us per iteration (median of 5)\n", K);
  for (int c = 0; c < ncase; c++) {
    qsort(t[c], 5, sizeof(double), cmp);
    printf("  %-22s %8.2f\n", names[c], t[c][2]);
  }
  return 0;
}
