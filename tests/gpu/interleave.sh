#!/usr/bin/env bash
# A Python workload timed plain and under the shim in interleaved runs (plain, shim, plain, shim, ...): for a
# slowdown seen in a Bats test's single pair of runs, is it the shim or the spread between processes? Each
# command of PY_RUNS (separated by ';', run from the repository root, tests/python on PYTHONPATH; it must
# print "step_us: <median>" on stderr, as tests/python/report.py does) runs REPS (3) times each way; prints
# per command the median of each way's step_us, plain's over the shim's (above 1: the shim is faster),
# every run's value, and whether every output was identical. Not a test (nothing is asserted); on the GPU
# machine: PY_RUNS="python3 tests/python/torch_mlp.py --steps 200 --checkpoint" bash tests/gpu/interleave.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/shim_built.sh
[ -n "${PY_RUNS:-}" ] || { echo "interleave.sh: PY_RUNS is empty" >&2; exit 2; }
T=$(mktemp -d)
export PYTHONPATH=$PWD/tests/python${PYTHONPATH:+:$PYTHONPATH}
IFS=';' read -ra runs <<<"$PY_RUNS"
for cmd in "${runs[@]}"; do
    cmd=$(echo "$cmd" | sed 's/^ *//; s/ *$//')
    [ -n "$cmd" ] || continue
    rm -f "$T"/*
    for i in $(seq "${REPS:-3}"); do
        timeout 300 bash -c "exec $cmd" >"$T/plain$i.out" 2>"$T/plain$i.err"
        timeout 300 bash -c "export LD_PRELOAD='$lib' AUTOGRAPH_STATS='$T/stats$i.json'; exec $cmd" \
            >"$T/shim$i.out" 2>"$T/shim$i.err"
    done
    python3 - "$T" "${REPS:-3}" "$cmd" <<'PY'
import filecmp, json, re, statistics, sys
d, n, cmd = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def us(way):
    v = []
    for i in range(1, n + 1):
        m = re.search(r"step_us: ([0-9.]+)", open(f"{d}/{way}{i}.err").read())
        v.append(float(m.group(1)) if m else float("nan"))
    return v
p, s = us("plain"), us("shim")
same = all(filecmp.cmp(f"{d}/plain1.out", f"{d}/{w}{i}.out", shallow=False)
           for w in ("plain", "shim") for i in range(1, n + 1))
try:
    st = json.load(open(f"{d}/stats{n}.json"))
    rep = f"{100.0 * st['replay']['launches_replayed'] / max(1, st['launches']):.1f}% replayed"
except (OSError, ValueError, KeyError):
    rep = "no statistics"
print(f"{cmd}: step_us plain {statistics.median(p):.0f}, shim {statistics.median(s):.0f} "
      f"({statistics.median(p) / statistics.median(s):.3f}x); plain {' '.join(f'{x:.0f}' for x in p)}, "
      f"shim {' '.join(f'{x:.0f}' for x in s)}; {rep}; identical: {'yes' if same else 'NO'}")
PY
done
