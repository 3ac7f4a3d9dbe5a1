#!/usr/bin/env bash
# Python workloads looked at before they become tests (or when one of them changes): each command of
# PY_RUNS (separated by ';', run from the repository root, tests/python on PYTHONPATH) runs plain twice
# (is the program itself deterministic?) and under the shim (identical to the plain run? how much of it
# replayed, and which fallbacks?). Not a test (nothing is asserted); on the GPU machine:
#   PY_RUNS="python3 tests/python/attention.py --steps 40; python3 tests/python/generate.py --steps 6" \
#       bash tests/gpu/py_diag.sh
# PLAIN_TWICE=0 skips the second plain run; PASSTHRU=1 adds a run under the shim with AUTOGRAPH_SCOPE=off
# (every call straight to the driver, timed: its syncs' waits for the GPU beside the default run's, where
# held work would make them longer); RUN_TIMEOUT (300) limits each run, in seconds; OUT (default a
# temporary folder) keeps every run's output.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/shim_built.sh
[ -n "${PY_RUNS:-}" ] || { echo "py_diag.sh: PY_RUNS is empty" >&2; exit 2; }
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
export PYTHONPATH=$PWD/tests/python${PYTHONPATH:+:$PYTHONPATH}
IFS=';' read -ra runs <<<"$PY_RUNS"
n=0
for cmd in "${runs[@]}"; do
    cmd=$(echo "$cmd" | sed 's/^ *//; s/ *$//')
    [ -n "$cmd" ] || continue
    n=$((n + 1))
    d=$out/run$n
    mkdir -p "$d"
    echo "$cmd" >"$d/cmd"
    timeout "${RUN_TIMEOUT:-300}" bash -c "$cmd" >"$d/plain.out" 2>"$d/plain.err"
    echo $? >"$d/plain.rc"
    if [ "${PLAIN_TWICE:-1}" = 1 ]; then
        timeout "${RUN_TIMEOUT:-300}" bash -c "$cmd" >"$d/plain2.out" 2>"$d/plain2.err"
    fi
    # the shim in the workload's process only (exec), not in timeout's or bash's
    timeout "${RUN_TIMEOUT:-300}" bash -c "export LD_PRELOAD='$lib' AUTOGRAPH_STATS='$d/stats.json'; exec $cmd" \
        >"$d/shim.out" 2>"$d/shim.err"
    echo $? >"$d/shim.rc"
    if [ "${PASSTHRU:-0}" = 1 ]; then
        timeout "${RUN_TIMEOUT:-300}" bash -c "export LD_PRELOAD='$lib' AUTOGRAPH_SCOPE=off AUTOGRAPH_STATS='$d/passthru.json'; exec $cmd" \
            >"$d/passthru.out" 2>"$d/passthru.err"
    fi
done
python3 - "$out" "$n" <<'PY'
import json, os, re, sys
out, n = sys.argv[1], int(sys.argv[2])
def ms(path):
    m = re.search(r"steady_ms: ([0-9.]+)", open(path).read()) if os.path.exists(path) else None
    return float(m.group(1)) if m else float("nan")
for i in range(1, n + 1):
    d = f"{out}/run{i}"
    cmd = open(f"{d}/cmd").read().strip()
    plain = open(f"{d}/plain.out").read()
    shim = open(f"{d}/shim.out").read()
    det = "-" if not os.path.exists(f"{d}/plain2.out") else ("yes" if open(f"{d}/plain2.out").read() == plain else "NO")
    print(f"== {cmd}")
    print(f"   rc plain {open(d + '/plain.rc').read().strip()} shim {open(d + '/shim.rc').read().strip()}; "
          f"plain deterministic {det}; shim identical {'yes' if plain == shim and plain else 'NO'}; "
          f"steady ms plain {ms(d + '/plain.err'):.1f} shim {ms(d + '/shim.err'):.1f}")
    if plain != shim or not plain:
        a, b = plain.splitlines(), shim.splitlines()
        k = next((j for j in range(min(len(a), len(b))) if a[j] != b[j]), min(len(a), len(b)))
        print(f"   first difference at line {k}: plain {a[k] if k < len(a) else '<end>'!r} shim {b[k] if k < len(b) else '<end>'!r}")
        for f in ("plain.err", "shim.err"):
            tail = open(f"{d}/{f}").read().strip().splitlines()[-4:]
            print(f"   {f}: " + " | ".join(tail))
    for f in ("plain.err", "shim.err"):  # a short run's steps one by one (report.py)
        m = re.search(r"^steps_ms: (.*)$", open(f"{d}/{f}").read(), re.M) if os.path.exists(f"{d}/{f}") else None
        if m:
            print(f"   steps ms {f.split('.')[0]}: {m.group(1)}")
    head = [l for l in plain.splitlines() if not l.startswith(("step ", "round "))][:2]
    if head:
        print("   plain says: " + " | ".join(head))
    try:
        s = json.load(open(f"{d}/stats.json"))
    except (OSError, ValueError):
        print("   no statistics")
        continue
    r = s.get("replay", {})
    L = s.get("launches", 0)
    rep = r.get("launches_replayed", 0)
    fb = {k: v for k, v in r.get("fallbacks", {}).items() if v}
    keys = ("observer_syncs_flushed", "observer_queries_not_ready", "distant_event_queries", "copies_staged")
    extra = {k: r.get(k, s.get(k)) for k in keys if r.get(k, s.get(k))}
    print(f"   launches {L}, replayed {rep} ({100.0 * rep / max(L, 1):.1f}%), graphs {r.get('graphs_built')}, "
          f"graph launches {r.get('graph_launches')}, fallbacks {fb}, profit {r.get('profit')}, {extra}")
    lo = r.get("eager_launches_engine_long")
    if lo:
        print(f"   engine on launches not held back: median {r.get('host_ns_engine_per_eager_launch_median', 0):.0f} ns, "
              f"mean {r.get('host_ns_engine_per_eager_launch', 0):.0f} ns; {lo}")
    for name, f in (("shim", "stats.json"), ("pass-through", "passthru.json")):
        try:
            b = json.load(open(f"{d}/{f}")).get("barrier_host_ms", {})
        except (OSError, ValueError):
            continue
        print(f"   barriers ms, {name}: " + "; ".join(f"{k} {v['calls']} calls, engine {v['engine']:.2f}, driver {v['driver']:.2f}"
                                                  for k, v in b.items() if v["calls"]))
    if os.path.exists(f"{d}/passthru.err"):
        print(f"   steady ms pass-through {ms(d + '/passthru.err'):.1f}; output "
              f"{'identical' if open(d + '/passthru.out').read() == plain else 'DIFFERENT'}")
PY
