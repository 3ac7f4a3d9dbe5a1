#!/usr/bin/env bash
# Where the time of a replay goes, for a few samples, and how the chunk plan settings change it. Not a
# test (nothing is asserted); run on the GPU machine: bash tests/gpu/diag.sh
#   DIAG_SAMPLES  samples (default: mlp_train launch_bound two_streams nosync_loop)
#   DIAG_SETTINGS space-separated settings, each a comma-separated list of VAR=value for the shim runs
#                 ("-" for the defaults); every setting runs interleaved with eager, DIAG_REPS times
# Prints, per sample: eager and hand-graph loop ms, and per setting the median shim loop ms with the
# engine's phase timers (AUTOGRAPH_STATS replay.host_ms) of its last run. First, graph_costs.cu: the raw
# cost of each way to launch the same 25 tiny kernels, then patch_costs.cu: what each way to patch costs, then
# cupti_costs.cu: what CUPTI's steps and states cost.
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-gpu}
SAMPLES=${DIAG_SAMPLES:-mlp_train launch_bound two_streams nosync_loop}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
{ cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build "$BUILD" -j16 --target autograph $SAMPLES; } >/tmp/diag-build.log 2>&1 ||
  { tail -30 /tmp/diag-build.log; exit 1; }
nvcc -O2 -arch=sm_90 -o /tmp/graph_costs tests/gpu/graph_costs.cu && /tmp/graph_costs 2000
# The ways to patch a graph's kernel arguments (per node, whole graph, device-updatable nodes); its
# MISMATCH lines (wrong arguments seen by a launch) are counted, not printed one by one.
nvcc -O2 -arch=sm_90 -rdc=true -o /tmp/patch_costs tests/gpu/patch_costs.cu -lcuda -lcudadevrt &&
    { /tmp/patch_costs >/tmp/patch_costs.txt 2>&1; echo "patch_costs: exit $?, $(grep -c MISMATCH /tmp/patch_costs.txt) MISMATCH lines"
      grep -v MISMATCH /tmp/patch_costs.txt; }
# What each CUPTI step costs, and what each state CUPTI is left in costs later launches (a fresh process
# per mode: CUPTI's first-use set-up happens once per process).
nvcc -O2 -arch=sm_90 -o /tmp/cupti_costs tests/gpu/cupti_costs.cu -lcupti -lcuda &&
    { for m in late late_keep early early_ctx; do /tmp/cupti_costs $m; done
      for w in both callbacks activity smallbuf; do /tmp/cupti_costs first $w; done
      /tmp/cupti_costs first both background; /tmp/cupti_costs first both early_act; }
lib=$PWD/$BUILD/lib/libautograph.so
T=$(mktemp -d)
ms() { sed -n 's/^loop_ms: //p' "$1"; }
for s in $SAMPLES; do
    : >"$T/eager"; : >"$T/graph"
    for rep in $(seq "${DIAG_REPS:-3}"); do
        "$BUILD/bin/$s" >"$T/e.out" 2>"$T/e.err" && ms "$T/e.err" >>"$T/eager"
        "$BUILD/bin/$s" --graph >/dev/null 2>"$T/g.err" && ms "$T/g.err" >>"$T/graph"
        n=0
        for setting in ${DIAG_SETTINGS:--}; do
            n=$((n + 1))
            env_args=()
            [ "$setting" != "-" ] && IFS=, read -r -a env_args <<<"$setting"
            env "${env_args[@]}" AUTOGRAPH_STATS="$T/s$n.json" LD_PRELOAD="$lib" "$BUILD/bin/$s" \
                >"$T/s.out" 2>"$T/s.err"
            ms "$T/s.err" >>"$T/ms$n"
            cmp -s "$T/e.out" "$T/s.out" || echo "$s [$setting]: OUTPUT DIFFERS"
        done
    done
    python3 - "$s" "$T" ${DIAG_SETTINGS:--} <<'PY'
import json, statistics, sys, os
s, d, settings = sys.argv[1], sys.argv[2], sys.argv[3:]
def med(f):
    v = [float(x) for x in open(f).read().split()]
    return statistics.median(v) if v else float("nan")
print(f"{s}: eager {med(d+'/eager'):.1f} ms, hand graph {med(d+'/graph'):.1f} ms")
for n, st in enumerate(settings, 1):
    j = json.load(open(f"{d}/s{n}.json")); r = j["replay"]
    h = r["host_ms"]
    print(f"  [{st}] shim {med(f'{d}/ms{n}'):.1f} ms | graph launches {r['graph_launches']} patched {r['nodes_patched']}"
          f" | ns/match {r['host_ns_per_match']:.0f} | host ms: launch {h['graph_launch']:.1f} patch {h['patch']:.1f}"
          f" build {h['graph_build']:.1f} reissue {h['eager_reissue']:.1f} copy-wait {h['blocking_copy_wait']:.1f}")
    os.remove(f"{d}/ms{n}")
PY
done
