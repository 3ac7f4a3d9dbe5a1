"""The output contract the Python workloads share with the bundled samples: per-step losses as exact
hex floats and a checksum of the parameters on stdout (compared bit for bit with and without the shim),
loop times on stderr (read by tests/gpu/run.sh)."""
import hashlib
import sys
import time

import torch


def timed_steps(steps, step):
    """Runs step(i) for every i; returns (all ms, ms without the first step)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    t1 = t0
    for i in range(steps):
        step(i)
        if i == 0:
            t1 = time.perf_counter()
    torch.cuda.synchronize()
    end = time.perf_counter()
    return (end - t0) * 1e3, (end - t1) * 1e3


def report(losses, parameters, ms, steady_ms):
    for i, loss in enumerate(losses):
        print(f"step {i} loss {float(loss).hex()}")
    h = hashlib.sha256()
    for p in parameters:
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    print(f"checksum: {h.hexdigest()[:16]}", flush=True)
    print(f"loop_ms: {ms:.3f}", file=sys.stderr)
    # Without the first step (torch.compile's compilation, lazy initialization): steadier to compare.
    print(f"steady_ms: {steady_ms:.3f}", file=sys.stderr)
