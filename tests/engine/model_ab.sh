#!/usr/bin/env bash
# model_ab.sh: engine_prog cases timed plain and under the shim's settings on fakecuda's modeled device
# (FAKECUDA_DEVICE_NS: kernels that run while the host goes on, as on a GPU; fakecuda.h). A measurement on
# the CPU, not a test (nothing is asserted): what holding work back costs at the syncs, what each chunk
# plan gains, before a GPU confirms it. Medians of interleaved runs; the loop's time (ENGINE_TIME).
#   model_ab.sh BUILD RUNS CASE ITERS MODE...
#   MODE: "label|VAR=val VAR=val" (label plain: no shim), e.g.
#   MODEL_ENV="FAKECUDA_DEVICE_NS=6000 FAKECUDA_GRAPH_DEVICE_NS=2000 ENGINE_HOST_US=2" \
#       tests/engine/model_ab.sh build 5 sync 200 "plain|" "default|" "onegraph|AUTOGRAPH_CHUNK_FIRST=0 AUTOGRAPH_CHUNK=256"
# MODEL_ENV applies to every run; each shim run's statistics stay in $OUT/LABEL.json (OUT: a temporary folder).
# Run it alone: another load on two CPUs moves the times more than most effects.
set -euo pipefail
build=$(cd "$1" && pwd) runs=$2 case=$3 iters=$4
shift 4
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
export LD_LIBRARY_PATH=$build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FAKECUDA_REUSE_EVENTS=1 FAKECUDA_STRICT_EVENTS=1 ENGINE_TIME=1
for ((i = 0; i < runs; i++)); do
    for m in "$@"; do
        label=${m%%|*} vars=${m#*|} pre=()
        [ "$label" = plain ] || pre=(LD_PRELOAD="$build/lib/libautograph.so" AUTOGRAPH_STATS="$out/$label.json")
        # shellcheck disable=SC2086 # the settings split into words on purpose
        ms=$(env ${MODEL_ENV:-} $vars "${pre[@]}" "$build/bin/engine_prog" "$case" "$iters" 2>&1 >/dev/null |
             sed -n 's/^loop_ms: //p')
        echo "$label ${ms:-nan}"
    done
done | python3 -c '
import statistics as st, sys
runs, order = {}, []
for line in sys.stdin:
    k, v = line.split()
    order += [k] if k not in runs else []
    runs.setdefault(k, []).append(float(v))
base = st.median(runs["plain"]) if "plain" in runs else None
for k in order:
    m = st.median(runs[k])
    rel = f" ({m / base:.3f}x of plain)" if base else ""
    print(f"{k:<12} {m:8.2f} ms{rel}   runs " + " ".join(f"{x:.1f}" for x in runs[k]))
'
echo "statistics: $out"
