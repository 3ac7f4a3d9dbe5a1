"""CPU test of the Python workloads' shared helpers (report.py) and of the syntax of every workload and
of the Python the GPU suite's shell scripts and Bats tests run inline: the
workloads themselves run only on a GPU (tests/bats/python.bats), so a slip in them would otherwise be
found only there. torch is stood in for where it is not installed (the helpers only set its flags)."""
import argparse
import contextlib
import ctypes
import io
import json
import os
import py_compile
import re
import subprocess
import sys
import tempfile
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

GPU_TOOLS = os.path.join(HERE, "..", "gpu")
with tempfile.TemporaryDirectory() as tmp:  # nothing written into the source tree
    for d in (HERE, GPU_TOOLS):  # the workloads, and the GPU suite's Python readers
        for name in sorted(os.listdir(d)):
            if name.endswith(".py"):
                py_compile.compile(os.path.join(d, name), cfile=os.path.join(tmp, name + "c"), doraise=True)


def shell_python(path):
    """The Python programs a shell script or Bats test of the GPU suite runs inline (python3 - <<'PY' ... PY), with the
    line each starts on: a slip in one would be found only after a GPU call's minutes."""
    lines = open(path).read().split("\n")
    i = 0
    while i < len(lines):
        if re.search(r"<<-?'PY'", lines[i]):
            end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "PY"), None)
            assert end is not None, f"{path}:{i + 1}: a heredoc 'PY' that never ends"
            yield i + 2, "\n".join(lines[i + 1:end])
            i = end
        i += 1


inline = 0
for d in (GPU_TOOLS, os.path.join(HERE, "..", "bats")):  # the GPU suite's scripts and Bats tests
    for name in sorted(os.listdir(d)):
        if name.endswith((".sh", ".bats", ".bash")):
            if name.endswith(".sh"):  # and the shell's own syntax
                subprocess.run(["bash", "-n", os.path.join(d, name)], check=True)
            for line, src in shell_python(os.path.join(d, name)):
                compile(src, f"{os.path.relpath(os.path.join(d, name), os.path.join(HERE, '..', '..'))}:{line}", "exec")
                inline += 1
assert inline >= 30, f"only {inline} inline Python programs found in tests/gpu and tests/bats"

try:
    import torch
except ImportError:
    torch = types.ModuleType("torch")
    ns = types.SimpleNamespace
    torch.backends = ns(cuda=ns(matmul=ns()), cudnn=ns())
    torch.cuda = ns(synchronize=lambda: None)
    torch.calls = []
    torch.use_deterministic_algorithms = lambda on: torch.calls.append(("deterministic", on))
    torch.manual_seed = lambda seed: torch.calls.append(("seed", seed))
    sys.modules["torch"] = torch

import report  # noqa: E402


def parse(argv):
    sys.argv = ["workload"] + argv
    ap = argparse.ArgumentParser()
    report.add_ab_option(ap)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            return report.parse_args(ap), None
    except SystemExit as e:
        return err.getvalue(), e.code


args, code = parse(["--steps", "7", "--seed", "3", "--ab", "10"])
assert code is None and (args.steps, args.seed, args.ab, args.graph) == (7, 3, 10, False), args
args, code = parse([])
assert code is None and args.ab == 0, args
err, code = parse(["--graph"])
assert code == 2 and "graph: unsupported" in err, (err, code)
_, code = parse(["--steps", "0"])
assert code == "--steps must be >= 1", code

report.deterministic(5)
assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
if hasattr(torch, "calls"):
    assert torch.calls == [("deterministic", True), ("seed", 5)], torch.calls

# The A/B: after AB_WARM steps, blocks of 3 with the shim (pause(0)) and paused (pause(1)) in turn, each
# block's first step left out of the medians.
paused = []


class Lib:
    @staticmethod
    def autograph_pause(v):
        paused.append(v)
        return 0


real_cdll = ctypes.CDLL
ctypes.CDLL = lambda *a, **k: Lib()
try:
    ran = []
    step = report.ab_steps(ran.append, 3)
finally:
    ctypes.CDLL = real_cdll
steps = report.AB_WARM + 12
for i in range(steps):
    step(i)
    report.STEP_US.append(100.0 if report.AB_MODE[-1] == 0 else 130.0 if report.AB_MODE[-1] == 1 else 999.0)
assert ran == list(range(steps)), ran
assert paused == [0, 1, 0, 1], paused
assert report.AB_MODE[: report.AB_WARM] == [-1] * report.AB_WARM
assert report.AB_MODE[report.AB_WARM:] == [-1, 0, 0, -1, 1, 1] * 2, report.AB_MODE
out = io.StringIO()
with contextlib.redirect_stderr(out):
    report.ab_report(steps, 3)
assert out.getvalue() == "ab_step_us: shim 100.0 paused 130.0 blocks 4\n", out.getvalue()

# tests/gpu/ratios.py (run.sh's tables): the A/B line (paused over shim, medians) and, for the `multi`
# part, plain's median over the shim's per mode; a mode without runs says so instead of failing.
import subprocess  # noqa: E402

sys.path.insert(0, GPU_TOOLS)
import ratios  # noqa: E402

assert ratios.ab_runs("x\nab_step_us: shim 100.0 paused 130.0 blocks 4\nab_step_us: shim 110 paused 121\n") == [
    (100.0, 130.0), (110.0, 121.0)]
got = ratios.ab_summary("ab_step_us: shim 100.0 paused 130.0 blocks 4\nab_step_us: shim 110 paused 121\n")
assert got == "A/B 1.200x (shim 105 us, paused 126 us; runs 1.300, 1.100)", got
assert ratios.ab_summary("no such line") is None
with tempfile.TemporaryDirectory() as tmp:
    for cfg, times in (("plain", "1100\n900\n1000\n"), ("shim", "800\n1000\n"), ("cupti_off", "1250\n")):
        with open(os.path.join(tmp, "data-parallel." + cfg), "w") as f:
            f.write(times)
    got = subprocess.run([sys.executable, os.path.join(GPU_TOOLS, "ratios.py"), "multi", tmp], capture_output=True,
                         text=True, check=True).stdout.strip()
want = ("data-parallel 1.111x (plain 1000 ms, 900-1100; shim 900 ms; CUPTI off 0.800x; 2 runs); "
        "split - (no runs)")
assert got == want, got
# the `amp` part: plain's median step over the shim's, the A/B, the replay from the shim run's statistics
with tempfile.TemporaryDirectory() as tmp:
    files = {"a_plain.err": "step_us: 1500.0\nstep_us: 1300.0\nstep_us: 1400.0\n",
             "a_all.err": "step_us: 1000.0\nstep_us: 1200.0\n",
             "a_ab.err": "ab_step_us: shim 100.0 paused 120.0 blocks 12\n",
             "a_all.json": json.dumps({"launches": 2000, "replay": {
                 "launches_replayed": 1500, "graphs_built": 7, "variants": 9, "fallbacks": {"mismatch": 2, "stalled": 0},
                 "profit": {"probes": 1}, "host_ns_per_match": 400.4, "host_ns_per_match_median": 300.0}})}
    for name, text in files.items():
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    got = subprocess.run([sys.executable, os.path.join(GPU_TOOLS, "ratios.py"), "amp", tmp, "10", "yes"],
                         capture_output=True, text=True, check=True).stdout.strip()
want = ("median step: plain 1400 us, the shim 1100 us (1.273x) | in-process, blocks of 10 steps: A/B 1.200x (shim "
        "100 us, paused 120 us; runs 1.200) | identical: yes | replayed 75.0% of 200 launches a step | graphs built 7, "
        "variants 9 | fallbacks {'mismatch': 2} | probes {'probes': 1} | 400 ns per matched launch (median 300)")
assert got == want, got
# ... and the shim with other settings (AMP_ALT), where it ran
with tempfile.TemporaryDirectory() as tmp:
    files["a_alt.settings"] = "AUTOGRAPH_SEGMENT_KEY=exact\n"
    files["a_alt.err"] = "step_us: 1250.0\n"
    files["a_alt.json"] = json.dumps({"launches": 2000, "replay": {"launches_replayed": 1000, "graphs_built": 30}})
    for name, text in files.items():
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    got = subprocess.run([sys.executable, os.path.join(GPU_TOOLS, "ratios.py"), "amp", tmp, "10", "yes"],
                         capture_output=True, text=True, check=True).stdout.strip()
assert got == want + " | with AUTOGRAPH_SEGMENT_KEY=exact: 1250 us (1.120x), replayed 50.0%, graphs built 30", got
# the `gen` part: the steady loops' medians, the outputs compared, the syncs' times, the long eager launches
with tempfile.TemporaryDirectory() as tmp:
    for r, (pl, sh, pt, drv) in enumerate(((330.0, 380.0, 335.0, 40.0), (320.0, 390.0, 325.0, 44.0))):
        run = os.path.join(tmp, f"rep{r + 1}", "run1")
        os.makedirs(run)
        for k, v in (("plain", pl), ("shim", sh), ("passthru", pt)):
            with open(os.path.join(run, k + ".err"), "w") as f:
                f.write(f"loop_ms: 1.0\nsteady_ms: {v}\n")
            with open(os.path.join(run, k + ".out"), "w") as f:
                f.write("round 0 tokens ab\n")
        with open(os.path.join(run, "stats.json"), "w") as f:
            json.dump({"barrier_host_ms": {"syncs": {"calls": 264, "engine": 2.0, "driver": drv}},
                       "replay": {"eager_launches_engine_long": {"sampled": 148, "10us_1ms": 3, "10us_1ms_ms": 0.5,
                                                                 "over_1ms": 1, "over_1ms_ms": 8.0}},
                       "cupti": {"attached_ms": 12.5 + r}}, f)
        with open(os.path.join(run, "passthru.json"), "w") as f:
            json.dump({"barrier_host_ms": {"syncs": {"calls": 264, "engine": 0.1, "driver": 20.0}}}, f)
    got = subprocess.run([sys.executable, os.path.join(GPU_TOOLS, "ratios.py"), "gen", tmp],
                         capture_output=True, text=True, check=True).stdout.strip()
want = ("steady ms plain 325.0, the shim 385.0 (0.844x), pass-through 330.0 (0.985x); identical yes; syncs under the "
        "shim: driver 42.0 ms, engine 2.0 ms; syncs under pass-through: driver 20.0 ms, engine 0.1 ms; long eager "
        "launches 3+1 of 148 (8.5 ms), 3+1 of 148 (8.5 ms); CUPTI windows open 12.5, 13.5 ms; 2 rounds")
assert got == want, got
print("report.py helpers, tests/gpu/ratios.py and every workload's syntax: ok")
