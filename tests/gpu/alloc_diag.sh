#!/usr/bin/env bash
# What PyTorch's allocator backend does to replay: tests/python/torch_mlp.py plain and under the shim,
# with the caching allocator (native) and with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (every
# tensor's memory from cuMemAllocAsync / cuMemFreeAsync), interleaved, REPS times (default 2), STEPS
# steps each (default 200). Not a test (nothing is asserted): bash tests/gpu/alloc_diag.sh
# Prints per backend the median steps, the speed-up (between processes, and within one: torch_mlp.py's
# --ab), the replayed share, the fallbacks, the frees held back, and the calls per step of the
# allocator's entry points; losses must be identical to plain in every run.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/shim_built.sh
STEPS=${STEPS:-200}
T=$(mktemp -d)
py=tests/python/torch_mlp.py
# pinned to the same cores, without ASLR, as run.sh's PyTorch runs (the spread between processes)
export PYTHONHASHSEED=0
pin=()
command -v taskset >/dev/null && pin=(taskset -c "${TORCH_CPUS:-2-5}")
setarch "$(uname -m)" -R true 2>/dev/null && pin=(setarch "$(uname -m)" -R "${pin[@]}")
for rep in $(seq "${REPS:-2}"); do
    for be in native async; do
        conf=()
        [ $be = async ] && conf=(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync)
        env "${conf[@]}" "${pin[@]}" python3 $py --steps "$STEPS" >"$T/$be.plain.out" 2>>"$T/$be.plain.err"
        env "${conf[@]}" AUTOGRAPH_STATS="$T/$be.json" LD_PRELOAD="$lib" "${pin[@]}" python3 $py --steps "$STEPS" \
            >"$T/$be.shim.out" 2>>"$T/$be.shim.err"
        cmp -s "$T/$be.plain.out" "$T/$be.shim.out" || echo "[$be] rep $rep: LOSSES DIFFER"
        # within one process: blocks of 10 steps with the shim and paused in turn (torch_mlp.py --ab)
        env "${conf[@]}" LD_PRELOAD="$lib" "${pin[@]}" python3 $py --steps "$STEPS" --ab 10 >"$T/$be.ab.out" \
            2>>"$T/$be.ab.err"
        cmp -s "$T/$be.plain.out" "$T/$be.ab.out" || echo "[$be] rep $rep: A/B LOSSES DIFFER"
    done
done
python3 - "$T" "$STEPS" <<'PY'
import json, re, statistics, sys
d, steps = sys.argv[1], int(sys.argv[2])
def med(f, key="step_us"):
    v = [float(x) for x in re.findall(rf"^{key}: ([0-9.]+)", open(f).read(), re.M)]
    return statistics.median(v) if v else float("nan")
for be in ("native", "async"):
    p, s = med(f"{d}/{be}.plain.err"), med(f"{d}/{be}.shim.err")
    j = json.load(open(f"{d}/{be}.json"))
    r = j["replay"]
    calls = {k: v / steps for k, v in j["calls"].items() if "Alloc" in k or "Free" in k}
    fb = {k: v for k, v in r["fallbacks"].items() if v}
    ab = [(float(x), float(y)) for x, y in
          re.findall(r"ab_step_us: shim ([0-9.]+) paused ([0-9.]+)", open(f"{d}/{be}.ab.err").read())]
    abr = statistics.median(y / x for x, y in ab) if ab else float("nan")
    print(f"{be}: plain {p:.0f} us, shim {s:.0f} us ({p / s:.3f}x; in-process A/B {abr:.3f}x) | replayed "
          f"{100.0 * r['launches_replayed'] / max(1, j['launches']):.1f}% of {j['launches'] / steps:.0f} launches per step, "
          f"{r['graph_launches'] / steps:.1f} graph launches per step, {r['graphs_built']} graphs | fallbacks {fb} | "
          f"probes {r['profit']} | frees held {r.get('async_frees_held', '-')}, released for memory "
          f"{r.get('async_frees_released_for_memory', '-')} | per step: "
          + ", ".join(f"{k} {v:.1f}" for k, v in sorted(calls.items()) if v))
PY
