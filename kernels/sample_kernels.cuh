/* Elementwise kernels shared by the launch-bound samples (launch_bound, elf_launch). */
#ifndef AG_SAMPLE_KERNELS_CUH
#define AG_SAMPLE_KERNELS_CUH

__global__ void k_axpb(float *y, const float *x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}

__global__ void k_mix(float *y, const float *x, const float *z, float w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + w * (z[i] - x[i]);
}

/* Chaotic (r close to 4), so that a skipped, repeated or reordered kernel anywhere in the run changes
 * the checksum instead of being forgotten by a contracting map. The clamp keeps rounding from ever
 * leaving [0, 1], where the map is bounded. */
__global__ void k_logistic(float *y, const float *x, float r, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float v = fminf(fmaxf(x[i], 0.0f), 1.0f);
    y[i] = r * v * (1.0f - v);
  }
}

#endif
