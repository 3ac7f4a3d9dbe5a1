#!/usr/bin/env bash
# What PyTorch's allocator backend does to replay: tests/python/torch_mlp.py plain and under the shim,
# with the caching allocator (native) and with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (every
# tensor's memory from cuMemAllocAsync / cuMemFreeAsync), interleaved, REPS times (default 2), STEPS
# steps each (default 200). Not a test (nothing is asserted): bash tests/gpu/alloc_diag.sh
# Prints per backend the median steps, the speed-up, the replayed share, the fallbacks, and the calls
# per step of the allocator's entry points; losses must be identical to plain in every run.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/shim_built.sh
STEPS=${STEPS:-200}
T=$(mktemp -d)
py=tests/python/torch_mlp.py
for rep in $(seq "${REPS:-2}"); do
    for be in native async; do
        conf=()
        [ $be = async ] && conf=(PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync)
        env "${conf[@]}" python3 $py --steps "$STEPS" >"$T/$be.plain.out" 2>>"$T/$be.plain.err"
        env "${conf[@]}" AUTOGRAPH_STATS="$T/$be.json" LD_PRELOAD="$lib" python3 $py --steps "$STEPS" \
            >"$T/$be.shim.out" 2>>"$T/$be.shim.err"
        cmp -s "$T/$be.plain.out" "$T/$be.shim.out" || echo "[$be] rep $rep: LOSSES DIFFER"
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
    print(f"{be}: plain {p:.0f} us, shim {s:.0f} us ({p / s:.3f}x) | replayed "
          f"{100.0 * r['launches_replayed'] / max(1, j['launches']):.1f}% of {j['launches'] / steps:.0f} launches per step, "
          f"{r['graph_launches'] / steps:.1f} graph launches per step, {r['graphs_built']} graphs | fallbacks {fb} | "
          f"probes {r['profit']} | per step: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(calls.items()) if v))
PY
