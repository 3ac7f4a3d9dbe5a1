#!/usr/bin/env bash
# Where a PyTorch step's time goes under the shim: the MLP of tests/python/torch_mlp.py run plain, as a
# hand-captured torch.cuda.graph (the ceiling) and under the shim with each setting, interleaved, REPS
# times. Not a test (nothing is asserted); run on the GPU machine: bash tests/gpu/torch_diag.sh
#   TORCH_SETTINGS space-separated settings, each a comma-separated list of VAR=value for the shim runs
#                  ("-" for the defaults; default: "- AUTOGRAPH_SCOPE=off AUTOGRAPH_CUPTI=off")
#   REPS           interleaved repetitions (default 5); STEPS steps per run (default 200)
#   TORCH_PY       the workload (default tests/python/torch_mlp.py; tests/python/torch_amp.py: the loop as
#                  users write it, which has no hand-graph mode: that line stays empty)
#   RT_LAYER=1     instead: the CUDA runtime's own layer of the step's launches (tests/gpu/rt_layer.c),
#                  cudaLaunchKernel timed whole beside the shim passing through, which times the driver's
#                  call alone; REPS runs, each run's numbers
# Prints per mode the medians of: the steady loop (ms), a step (us) and the part of it spent waiting in
# loss.item() (us), and for the shim the engine's host time per step from AUTOGRAPH_STATS.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/shim_built.sh
SETTINGS=${TORCH_SETTINGS:-- AUTOGRAPH_SCOPE=off AUTOGRAPH_CUPTI=off}
STEPS=${STEPS:-200}
T=$(mktemp -d)
py=${TORCH_PY:-tests/python/torch_mlp.py}
if [ "${RT_LAYER:-0}" = 1 ]; then
    gcc -O2 -shared -fPIC -o "$T/rt_layer.so" tests/gpu/rt_layer.c -ldl || exit 1
    for rep in $(seq "${REPS:-5}"); do
        for mode in off on; do
            : >"$T/rt.txt"
            scope=(AUTOGRAPH_SCOPE=off)
            [ $mode = on ] && scope=()
            env "${scope[@]}" RT_LAYER_OUT="$T/rt.txt" AUTOGRAPH_STATS="$T/rt.json" LD_PRELOAD="$T/rt_layer.so $lib" \
                python3 $py --steps "$STEPS" >/dev/null 2>"$T/rt.err"
            python3 - "$T" "$STEPS" $mode <<'PY'
import json, re, statistics, sys
d, steps, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
j = json.load(open(f"{d}/rt.json"))
step = statistics.median(float(x) for x in re.findall(r"step_us: ([0-9.]+)", open(f"{d}/rt.err").read()))
rt = re.findall(r"rt_layer: (\S+) calls (\d+) median_ns (\d+) mean_ns (\d+)", open(f"{d}/rt.txt").read())
if mode == "off":  # the driver's call alone, timed by the shim passing through
    head = (f"passing through: step {step:.0f} us; driver launches {j['launches'] / steps:.1f}/step, the driver's call "
            f"median {j.get('passthrough_launch_ns_median', 0):.0f} mean {j.get('passthrough_launch_ns_mean', 0):.0f} ns")
else:  # the shim replaying: the matched launch's own time
    r = j.get("replay", {})
    head = (f"replaying: step {step:.0f} us; {100.0 * r.get('launches_replayed', 0) / max(1, j['launches']):.1f}% replayed, "
            f"{r.get('host_ns_per_match', 0):.0f} ns per matched launch")
parts = [f"{name} {int(n) / steps:.1f}/step, whole call median {med} mean {mean} ns" for name, n, med, mean in rt]
print(head + " | " + (" | ".join(parts) or "no runtime launch seen"))
PY
        done
    done
    exit 0
fi
for rep in $(seq "${REPS:-5}"); do
    python3 $py --steps "$STEPS" >"$T/plain.out" 2>>"$T/plain.err"
    : >>"$T/graph.err"
    [ "$py" = tests/python/torch_mlp.py ] && python3 $py --steps "$STEPS" --graph >/dev/null 2>>"$T/graph.err"
    n=0
    for setting in $SETTINGS; do
        n=$((n + 1))
        env_args=()
        [ "$setting" != "-" ] && IFS=, read -r -a env_args <<<"$setting"
        env "${env_args[@]}" AUTOGRAPH_STATS="$T/s$n.json" LD_PRELOAD="$lib" python3 $py --steps "$STEPS" \
            >"$T/s.out" 2>>"$T/s$n.err"
        cmp -s "$T/plain.out" "$T/s.out" || echo "[$setting]: LOSSES DIFFER"
    done
done
python3 - "$T" "$STEPS" $SETTINGS <<'PY'
import json, re, statistics, sys
d, steps, settings = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def med(f, key):
    v = [float(x) for x in re.findall(rf"^{key}: ([0-9.]+)", open(f).read(), re.M)]
    return (statistics.median(v), min(v), max(v)) if v else (float("nan"),) * 3
def line(name, f):
    s, st, sy = med(f, "steady_ms"), med(f, "step_us"), med(f, "sync_us")
    return (f"{name:28s} steady {s[0]:7.1f} ms ({s[1]:.0f}-{s[2]:.0f}) | step {st[0]:6.1f} us ({st[1]:.0f}-{st[2]:.0f})"
            f" | in loss.item() {sy[0]:6.1f} us ({sy[1]:.0f}-{sy[2]:.0f})"), st[0]
pl, base = line("plain", f"{d}/plain.err")
print(pl)
print(line("hand graph (torch.cuda.graph)", f"{d}/graph.err")[0])
for n, st in enumerate(settings, 1):
    text, step = line(f"shim [{st}]", f"{d}/s{n}.err")
    print(f"{text} | {base / step:.3f}x")
    j = json.load(open(f"{d}/s{n}.json"))
    r = j.get("replay")
    if not r or not j.get("launches"):
        continue
    h = {k: 1e3 * v / steps for k, v in r["host_ms"].items()}
    print(f"    per step: {r['graph_launches'] / steps:.1f} graph launches {h['graph_launch']:.0f} us, "
          f"{r['nodes_patched'] / steps:.1f} nodes patched {h['patch']:.0f} us, blocking-copy wait "
          f"{h['blocking_copy_wait']:.0f} us, reissue {h['eager_reissue']:.0f} us; {r['host_ns_per_match']:.0f} ns "
          f"per match; replayed {100.0 * r['launches_replayed'] / j['launches']:.1f}%")
    print(f"    graphs: {r['graphs_built']} built ({h['graph_build']:.0f} us a step), {r['graphs_evicted']} evicted, "
          f"{r['variants']} variants; chunks chosen by their first operation {r['chunks_chosen_by_first_op']}; "
          f"fallbacks { {k: v for k, v in r['fallbacks'].items() if v} }")
    calls = sorted(j["calls"].items(), key=lambda kv: -kv[1])[:8]
    print("    calls per step: " + ", ".join(f"{k} {v / steps:.1f}" for k, v in calls))
PY
