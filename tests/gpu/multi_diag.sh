#!/usr/bin/env bash
# Where the time of the two-GPU, one-process PyTorch runs goes (torch_mlp.py --data-parallel and
# --split): plain, under the shim, with probes off, with CUPTI off; REPS runs each, interleaved; the
# steady loop time each run reports, and the shim's replay statistics of its last default run.
# Usage on the GPU machine (2 GPUs), from the repository root, after a build into build-gpu:
#   bash tests/gpu/multi_diag.sh [MODE...]   (modes: data-parallel split; OUT for the logs)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/autograph-multi}
REPS=${REPS:-2}
STEPS=${STEPS:-100}
mkdir -p "$OUT"
lib=$PWD/build-gpu/lib/libautograph.so
modes=("$@")
[ ${#modes[@]} -gt 0 ] || modes=(data-parallel split)
export PYTHONHASHSEED=0
for mode in "${modes[@]}"; do
    for cfg in plain shim probe_off cupti_off; do : >"$OUT/$mode.$cfg"; done
    for rep in $(seq "$REPS"); do
        for cfg in plain shim probe_off cupti_off; do
            case $cfg in
            plain) env=() ;;
            shim) env=(LD_PRELOAD=$lib AUTOGRAPH_STATS=$OUT/$mode.stats.json) ;;
            probe_off) env=(LD_PRELOAD=$lib AUTOGRAPH_PROBE=off) ;;
            cupti_off) env=(LD_PRELOAD=$lib AUTOGRAPH_CUPTI=off) ;;
            esac
            t=$(env "${env[@]}" python3 tests/python/torch_mlp.py --steps "$STEPS" "--$mode" 2>&1 >/dev/null |
                sed -n 's/^steady_ms: //p')
            [ -n "$t" ] && echo "$t" >>"$OUT/$mode.$cfg"
            # each run as it ends: a call cut off at its limit still shows the runs that finished
            echo "$mode rep $rep $cfg: ${t:-no steady_ms (the run failed)}"
        done
    done
    line="$mode ($STEPS steps, steady ms):"
    for cfg in plain shim probe_off cupti_off; do
        line="$line $cfg $(sort -n "$OUT/$mode.$cfg" | tr '\n' ' ')|"
    done
    echo "$line"
    python3 - "$OUT/$mode.stats.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
r = s["replay"]
print("  replayed %.1f%%, graphs %d, graph launches %d, fallbacks %s, host_ms %s, probes %s, cupti %s/%s det %s setup_ms %s" % (
    100.0 * r["launches_replayed"] / max(1, s["launches"]), r["graphs_built"], r["graph_launches"],
    {k: v for k, v in r["fallbacks"].items() if v}, r["host_ms"], r["profit"],
    s.get("cupti", {}).get("mode"), s.get("cupti", {}).get("state"), s.get("cupti", {}).get("detaches"),
    s.get("cupti", {}).get("setup_ms")))
print("  contexts", r["contexts"])
PY
done
