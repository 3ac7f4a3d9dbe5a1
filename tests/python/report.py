"""The output contract the Python workloads share with the bundled samples: per-step losses as exact
hex floats and a checksum of the parameters on stdout (compared bit for bit with and without the shim),
loop times on stderr (read by tests/gpu/run.sh)."""
import hashlib
import sys
import time

import torch


STEP_US = []  # each step's wall time, us
SYNC_US = []  # per step, the time a workload's timed_sync() spent waiting (loss.item())


def timed_sync(fn):
    """Calls fn() (the step's host-visible sync, e.g. loss.item()) and records how long it took."""
    t = time.perf_counter()
    v = fn()
    SYNC_US.append((time.perf_counter() - t) * 1e6)
    return v


def timed_steps(steps, step):
    """Runs step(i) for every i; returns (all ms, ms without the first step)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    t1 = t0
    prev = t0
    for i in range(steps):
        step(i)
        now = time.perf_counter()
        STEP_US.append((now - prev) * 1e6)
        prev = now
        if i == 0:
            t1 = now
    torch.cuda.synchronize()
    end = time.perf_counter()
    return (end - t0) * 1e3, (end - t1) * 1e3


def _median(v):
    v = sorted(v)
    return v[len(v) // 2] if v else 0.0


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
    # Medians over the last 90% of the steps (after learning): less sensitive to a few disturbed steps
    # than the loop's total. step_us is a whole step; sync_us the part spent waiting in timed_sync().
    tail = len(STEP_US) // 10
    print(f"step_us: {_median(STEP_US[tail:]):.1f}", file=sys.stderr)
    if SYNC_US:
        print(f"sync_us: {_median(SYNC_US[tail:]):.1f}", file=sys.stderr)
