#!/usr/bin/env bash
# The graphed model (torch_mlp.py --graphed-model) under this tree's library and earlier trees' (OLD_SRC, one
# or more folders holding a git archive each, carried under an ignored path), side by side: REPS
# interleaved in-process A/B runs of each (the shim against itself paused), one run each with its statistics
# (graph launches, probes, fallbacks, events), and two steps of a short run at trace level (operations,
# barriers, chunks, with the host clock), so that a change in how the step is cut can be read off (REPS 0:
# the traces alone). TRACE_LINES (170): how many lines of them. Not a test; on the GPU machine:
#   OLD_SRC="build-old/a build-old/b" bash tests/gpu/handoff_diag.sh [REPS] [TRACE_STEPS]
# MODES="name=VAR=value ...": this tree's library again under each setting, as one more entry each (OLD_SRC
# may then be empty). The entries' in-process A/B medians go to $AB_OUT (name and ratio a line) where set.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/shim_built.sh
reps=${1:-3} tsteps=${2:-30}
T=$(mktemp -d)
libs=(new)
[ -n "${MODES:-}" ] && libs=() # the modes are this tree's library, the default among them
declare -A L=([new]=$lib) V=([new]=)
for m in ${MODES:-}; do
    L[${m%%=*}]=$lib V[${m%%=*}]=${m#*=} libs+=("${m%%=*}")
done
for src in ${OLD_SRC:-}; do
    [ -f "$src/CMakeLists.txt" ] || continue
    k=$(basename "$src")
    L[$k]=$(lib_built "$src" "$src-build" "$T/build_$k.log") && V[$k]= && libs+=("$k")
done
pin=()
command -v taskset >/dev/null && pin=(taskset -c "${TORCH_CPUS:-2-5}")
m=(python3 tests/python/torch_mlp.py --graphed-model)
for i in $(seq "$reps"); do
    for k in "${libs[@]}"; do
        env ${V[$k]} LD_PRELOAD=${L[$k]} "${pin[@]}" "${m[@]}" --steps 200 --ab 10 >"$T/$k.ab.out" 2>>"$T/$k.ab.err"
    done
done
for k in "${libs[@]}"; do
    [ "$reps" -gt 0 ] && {
        env ${V[$k]} LD_PRELOAD=${L[$k]} AUTOGRAPH_STATS=$T/$k.json "${pin[@]}" "${m[@]}" --steps 200 >/dev/null 2>"$T/$k.err"
        echo "== $k: $(python3 - "$T/$k.json" "$T/$k.ab.err" <<'PY'
import json, sys
sys.path.insert(0, "tests/gpu")
from ratios import ab_summary
s = json.load(open(sys.argv[1]))
r = s["replay"]
n = 200
print(f"{ab_summary(open(sys.argv[2]).read())}\n   launches {s['launches'] / n:.1f} a step, replayed {r['launches_replayed'] / n:.1f}, "
      f"graph launches {r['graph_launches'] / n:.2f}, graphs {r['graphs_built']}, patched {r['nodes_patched'] / n:.1f} a step, "
      f"match {r['host_ns_per_match']:.0f} ns\n   fallbacks {r['fallbacks']}\n   profit {r.get('profit')}\n"
      f"   host_ms {r.get('host_ms')}\n   destroys passed {r.get('event_destroys_passed')}, in segment "
      f"{r.get('event_destroys_in_segment', '-')}, event chunks without a graph {r.get('event_chunks_without_graph', '-')}, "
      f"unmatched at a chunk's start {r.get('chunk_starts_unmatched', '-')}, "
      f"issuer jobs {r.get('issuer', {})}")
PY
)"
        [ -n "${AB_OUT:-}" ] && python3 -c "
import sys; sys.path.insert(0, 'tests/gpu')
from ratios import ab_runs
import statistics
ab = ab_runs(open(sys.argv[1]).read())
print(sys.argv[2], statistics.median(y / x for x, y in ab) if ab else 0)" "$T/$k.ab.err" "$k" >>"$AB_OUT"
    }
    # a short run at trace level
    env ${V[$k]} LD_PRELOAD=${L[$k]} AUTOGRAPH_LOG=trace "${pin[@]}" "${m[@]}" --steps "$tsteps" 2>"$T/$k.trace" >/dev/null
    grep -E "engine [0-9]+: (operation|barrier|chunk of|no candidate)" "$T/$k.trace" |
        sed -E 's/^autograph: trace: //; s/ at point [0-9a-f]+//; s/: point [0-9a-f]+//; s/segment operation/seg op/' >"$T/$k.seq"
    # two steps from three quarters into the run on (a step is about 36 operations, a line each, and its
    # barriers and chunks), the host clock on each line
    a=$(($(wc -l <"$T/$k.seq") * 3 / 4))
    echo "== $k: from line $a of $(wc -l <"$T/$k.seq") at trace level"
    sed -n "$a,$((a + ${TRACE_LINES:-170}))p" "$T/$k.seq" | cut -c1-170
done
