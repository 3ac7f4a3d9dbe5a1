"""The output contract the Python workloads share with the bundled samples: per-step losses as exact
hex floats and a checksum of the parameters on stdout (compared bit for bit with and without the shim),
loop times on stderr (read by tests/gpu/run.sh)."""
import ctypes
import hashlib
import statistics
import sys
import time

import torch


STEP_US = []  # each step's wall time, us
SYNC_US = []  # per step, the time a workload's timed_sync() spent waiting (loss.item())


def parse_args(ap):
    """Adds the options every workload takes (--steps, --seed; --graph, which a workload without a
    hand-written graph mode answers with "graph: unsupported" on stderr and exit 2) and parses them."""
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--graph", action="store_true")
    args = ap.parse_args()
    if args.steps < 1:
        sys.exit("--steps must be >= 1")
    if args.graph:
        print("graph: unsupported", file=sys.stderr)
        sys.exit(2)
    return args


def add_ab_option(ap, unit="steps"):
    """Adds --ab B (0: off): ab_steps' in-process A/B, in blocks of B `unit`."""
    ap.add_argument("--ab", type=int, default=0, metavar="B",
                    help=f"blocks of B {unit} with the shim and paused in turn (needs the shim)")


def deterministic(seed):
    """The same results run after run (the outputs are compared bit for bit): no TF32, cuDNN's and
    PyTorch's deterministic algorithms (the scatters' sums in a fixed order), the seed."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(seed)


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
        # the bytes, whatever the type (NumPy has no bfloat16)
        h.update(p.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
    print(f"checksum: {h.hexdigest()[:16]}", flush=True)
    print(f"loop_ms: {ms:.3f}", file=sys.stderr)
    # Without the first step (torch.compile's compilation, lazy initialization): steadier to compare.
    print(f"steady_ms: {steady_ms:.3f}", file=sys.stderr)
    # Medians over the last 90% of the steps (after learning): less sensitive to a few disturbed steps
    # than the loop's total. step_us is a whole step; sync_us the part spent waiting in timed_sync().
    tail = len(STEP_US) // 10
    # A short run's steps one by one (where learning and replay fall): generate's six rounds, for example.
    if 0 < len(STEP_US) <= 32:
        print("steps_ms: " + " ".join(f"{us / 1e3:.1f}" for us in STEP_US), file=sys.stderr)
    print(f"step_us: {_median(STEP_US[tail:]):.1f}", file=sys.stderr)
    if SYNC_US:
        print(f"sync_us: {_median(SYNC_US[tail:]):.1f}", file=sys.stderr)


AB_WARM = 40  # steps before --ab's blocks: learning, the CUPTI window and the first probes are over
AB_MODE = []  # --ab: each step's mode (0 with the shim, 1 paused, -1 a block's first step or warm-up)


def ab_steps(step, block):
    """--ab B, the A/B within one process: step(i) wrapped so that after AB_WARM steps, blocks of B steps
    run with the shim and paused (its autograph_pause: every call straight to the driver) in turn,
    switched between two steps (after a step's loss.item()). Needs the shim."""
    try:
        pause = ctypes.CDLL(None).autograph_pause
    except AttributeError:
        sys.exit("--ab needs the shim (LD_PRELOAD=libautograph.so): autograph_pause not found")
    pause.argtypes, pause.restype = [ctypes.c_int], ctypes.c_int

    def ab_step(i):
        k = i - AB_WARM
        if k >= 0 and k % block == 0:
            if pause((k // block) % 2) < 0:
                sys.exit("--ab: the shim's engine does not run (AUTOGRAPH_SCOPE=off?)")
        AB_MODE.append(-1 if k < 0 or k % block == 0 else (k // block) % 2)
        step(i)

    return ab_step


def ab_report(steps, block):
    """stderr "ab_step_us: shim <median> paused <median> blocks <n>" after an ab_steps run (each block's
    first step left out)."""
    by = [[us for us, m in zip(STEP_US, AB_MODE) if m == mode] for mode in (0, 1)]
    if by[0] and by[1]:
        print(f"ab_step_us: shim {statistics.median(by[0]):.1f} paused {statistics.median(by[1]):.1f} "
              f"blocks {max(0, steps - AB_WARM) // block}", file=sys.stderr)


def run_and_report(args, step, losses, parameters):
    """Runs step(i) for args.steps steps (in --ab's blocks where args.ab is set), then prints the losses,
    the checksum of `parameters` and the timings (report), and the A/B line (ab_report)."""
    if args.ab > 0:
        step = ab_steps(step, args.ab)
    ms, steady_ms = timed_steps(args.steps, step)
    report(losses, parameters, ms, steady_ms)
    if args.ab > 0:
        ab_report(args.steps, args.ab)
