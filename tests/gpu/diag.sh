#!/usr/bin/env bash
# Where the host time of a replay goes, for a few samples: the engine's phase timers (AUTOGRAPH_STATS
# replay.host_ms), graph launches and patches per iteration, and tests/gpu/graph_costs.cu (the raw cost
# of each way to launch the same work). Not a test; run on the GPU machine: bash tests/gpu/diag.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build-gpu}
SAMPLES=${DIAG_SAMPLES:-mlp_train launch_bound two_streams}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
{ cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build "$BUILD" -j16 --target autograph $SAMPLES; } >/tmp/diag-build.log 2>&1 ||
  { tail -30 /tmp/diag-build.log; exit 1; }
nvcc -O2 -arch=sm_90 -o /tmp/graph_costs tests/gpu/graph_costs.cu && /tmp/graph_costs 2000
[ -n "${DIAG_COSTS_ONLY:-}" ] && exit 0
lib=$PWD/$BUILD/lib/libautograph.so
T=$(mktemp -d)
for s in $SAMPLES; do
    for chunk in ${DIAG_CHUNKS:-128}; do
        "$BUILD/bin/$s" >"$T/e.out" 2>"$T/e.err"
        g_ms=$("$BUILD/bin/$s" --graph 2>&1 >/dev/null | sed -n 's/loop_ms: //p')
        o_ms=$(AUTOGRAPH_SCOPE=off LD_PRELOAD=$PWD/$BUILD/lib/libautograph.so "$BUILD/bin/$s" 2>&1 >/dev/null | sed -n 's/loop_ms: //p')
        echo "$s: hand graph ${g_ms:-n/a} ms, shim passing through ${o_ms:-?} ms"
        AUTOGRAPH_CHUNK=$chunk AUTOGRAPH_STATS=$T/s.json LD_PRELOAD=$lib "$BUILD/bin/$s" >"$T/s.out" 2>"$T/s.err"
        python3 - "$s" "$chunk" "$T" <<'PY'
import json, re, sys
s, chunk, d = sys.argv[1:4]
def ms(f): return float(re.search(r"loop_ms: ([0-9.]+)", open(f).read()).group(1))
j = json.load(open(f"{d}/s.json")); r = j["replay"]
same = open(f"{d}/e.out").read() == open(f"{d}/s.out").read()
it = int(re.search(r"iters: (\d+)", open(f"{d}/e.out").read()).group(1)) if "iters:" in open(f"{d}/e.out").read() else 0
print(f"{s} chunk={chunk}: eager {ms(d+'/e.err'):.1f} ms, shim {ms(d+'/s.err'):.1f} ms, identical={same}, iters={it}")
print(f"   launches={j['launches']} replayed={r['launches_replayed']} graph_launches={r['graph_launches']} "
      f"patched={r['nodes_patched']} ns/match={r['host_ns_per_match']} ns/eager={r['host_ns_per_eager_launch']}")
print(f"   host_ms={r['host_ms']} fallbacks={ {k: v for k, v in r['fallbacks'].items() if v} }")
PY
    done
done
