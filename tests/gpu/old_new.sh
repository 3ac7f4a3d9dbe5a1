#!/usr/bin/env bash
# One workload under this tree's library and under an earlier version's, interleaved: did a change move
# what the engine does (how much it replayed, what the probes decided, whether CUPTI stayed attached) or the
# loop's time? Not a test (nothing is asserted); on the GPU machine, from the repository root:
#   OLD_SRC=build-old/<commit> CMD="python3 tests/python/torch_mlp.py --steps 200" bash tests/gpu/old_new.sh
# OLD_SRC: `git archive <commit>` unpacked (carried to the GPU machine with the device call's carry);
# REPS (3) interleaved pairs; CMD's environment passes through (PYTORCH_CUDA_ALLOC_CONF=... before it).
# Prints one line a run: the share replayed, graphs built, the probes' counts (probes/left eager/graphs
# kept/sightings eager/launches probed), CUPTI's mode and state at the end, the loop's steady_ms, and where
# CMD compares the library with itself paused in one process (torch_mlp.py --ab 10: an "ab_step_us" line)
# that ratio, which the spread between processes does not touch; then the medians of those ratios per side.
# To weigh two versions' speed on the PyTorch step: CMD="python3 tests/python/torch_mlp.py --steps 200
# --ab 10" REPS=8.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/shim_built.sh
[ -n "${CMD:-}" ] && [ -f "${OLD_SRC:-}/CMakeLists.txt" ] ||
    { echo "old_new.sh: set CMD and OLD_SRC (a source tree)" >&2; exit 2; }
old_lib=$(lib_built "$OLD_SRC" "$OLD_SRC-build" /tmp/old-build.log) || { tail -30 /tmp/old-build.log; exit 1; }
T=$(mktemp -d)
export PYTHONPATH=$PWD/tests/python${PYTHONPATH:+:$PYTHONPATH}
for rep in $(seq "${REPS:-3}"); do
    for side in new old; do
        l=$lib
        [ $side = old ] && l=$old_lib
        LD_PRELOAD=$l AUTOGRAPH_STATS=$T/s.json bash -c "$CMD" >"$T/out" 2>"$T/err"
        rc=$?
        python3 - "$T/s.json" "$T/err" "$side" "$rep" "$rc" <<'PY'
import json, re, sys
s = json.load(open(sys.argv[1]))
r, c = s.get("replay", {}), s.get("cupti", {})
err = open(sys.argv[2]).read()
m = re.search(r"steady_ms: ([0-9.]+)", err)
ab = re.search(r"ab_step_us: shim ([0-9.]+) paused ([0-9.]+)", err)
n, rep = s["launches"], r.get("launches_replayed", 0)
print(f"{sys.argv[3]} rep {sys.argv[4]} rc {sys.argv[5]}: replayed {100.0 * rep / max(1, n):.1f}% of {n}, "
      f"graphs {r.get('graphs_built', 0)}, probes {'/'.join(str(v) for v in (r.get('profit') or {}).values())}, "
      f"cupti {c.get('mode', '-')}/{c.get('state', '-')} (windows {c.get('windows', '-')}), "
      f"graph launches {r.get('graph_launches', '-')}, steady_ms {m.group(1) if m else '-'}"
      + (f", in-process A/B {float(ab.group(2)) / float(ab.group(1)):.4f}x" if ab else "")
      + f", plans weighed {r.get('plans_weighed', '-')}, planned {r.get('segments_planned', '-')}"
      + (f", trials {'/'.join(str(v) for v in r['plan_trials'].values())} (begun/kept/dropped/pairs/refused)"
         if 'plan_trials' in r else ""))
PY
        md5sum <"$T/out" | cut -c1-12
    done
done | tee "$T/lines"
python3 - "$T/lines" <<'PY'
import re, statistics, sys
ab = {"new": [], "old": []}
for line in open(sys.argv[1]):
    m = re.match(r"(new|old) rep .* in-process A/B ([0-9.]+)x", line)
    if m:
        ab[m.group(1)].append(float(m.group(2)))
if ab["new"] and ab["old"]:
    print(f"in-process A/B, medians: new {statistics.median(ab['new']):.4f}x ({len(ab['new'])} runs), "
          f"old {statistics.median(ab['old']):.4f}x ({len(ab['old'])} runs)")
PY
