"""CuPy elementwise loop for autograph: ~50 small kernels per iteration on a 1M-element array
(ElementwiseKernels plus plain cupy ops that allocate temporaries), a sync every iteration.

stdout: a few deterministic lines ending with "checksum: <16 hex>" (sha256 of the final arrays' bytes).
stderr: "loop_ms: <float>" and "steady_ms: <float>" (without the first iteration).
Run with and without LD_PRELOAD=libautograph.so and compare stdout.
"""
import argparse
import hashlib
import sys
import time

import cupy as cp
import numpy as np

N = 1 << 20

axpb = cp.ElementwiseKernel("float32 x, float32 a, float32 b", "float32 y", "y = a * x + b", "ag_axpb")
mix = cp.ElementwiseKernel("float32 x, float32 z, float32 w", "float32 y", "y = x + w * (z - x)", "ag_mix")
# Chaotic and clamped to [0, 1]: a lost or repeated kernel always changes the checksum.
logistic = cp.ElementwiseKernel(
    "float32 x, float32 r", "float32 y",
    "float v = min(max(x, 0.0f), 1.0f); y = r * v * (1.0f - v)", "ag_logistic")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=None, help="alias of --iters")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    iters = args.steps if args.steps is not None else args.iters
    if iters < 1:
        sys.exit("--iters must be >= 1")

    rs = np.random.RandomState(args.seed)
    x = cp.asarray(rs.random_sample(N).astype(np.float32))
    z = cp.asarray(rs.random_sample(N).astype(np.float32))
    f32 = np.float32

    cp.cuda.Stream.null.synchronize()
    t0 = time.perf_counter()
    for it in range(iters):
        for k in range(16):
            a = f32(0.9 + 0.005 * k)
            axpb(x, a, f32((1.0 - a) * (k % 5) / 5.0), x)
            mix(x, z, f32(0.01), x)
            logistic(x, f32(3.8 + 0.01 * k), x)
        z[...] = 0.5 * z + 0.5 * x  # plain cupy ops: temporaries from the memory pool
        cp.clip(x, 0.0, 1.0, out=x)
        cp.cuda.Stream.null.synchronize()
        if it == 0:
            t1 = time.perf_counter()
    cp.cuda.Stream.null.synchronize()
    ms = (time.perf_counter() - t0) * 1e3
    steady_ms = (time.perf_counter() - t1) * 1e3

    hx, hz = x.get(), z.get()
    print("sample: cupy_loop")
    print(f"iters: {iters}")
    print(f"x[0]: {float(hx[0]).hex()}")
    print(f"checksum: {hashlib.sha256(hx.tobytes() + hz.tobytes()).hexdigest()[:16]}", flush=True)
    print(f"loop_ms: {ms:.3f}", file=sys.stderr)
    # Without the first iteration (kernel compilation on a cold cache): steadier to compare.
    print(f"steady_ms: {steady_ms:.3f}", file=sys.stderr)


if __name__ == "__main__":
    main()
