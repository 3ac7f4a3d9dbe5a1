/* Device code of the driver_api sample, compiled to a fatbin at build time and embedded into the
 * executable; extern "C" keeps the names stable for cuModuleGetFunction. */

extern "C" __global__ void ag_axpb(float *y, const float *x, float a, float b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + b;
}

extern "C" __global__ void ag_mix(float *y, const float *x, const float *z, float w, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + w * (z[i] - x[i]);
}

/* Chaotic and clamped to [0, 1], so no launch can be lost without changing the checksum. */
extern "C" __global__ void ag_logistic(float *y, float r, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float v = fminf(fmaxf(y[i], 0.0f), 1.0f);
  y[i] = r * v * (1.0f - v);
}
