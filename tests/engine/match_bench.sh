#!/usr/bin/env bash
# Runs match_bench on fakecuda, plain and under the shim.
#   match_bench.sh BUILD_DIR check [bench args...]: identical output with and without the shim, and most
#     launches replayed (a CTest; it times nothing).
#   match_bench.sh BUILD_DIR measure RUNS [bench args...]: host_ns_per_match of each run under the shim
#     and their median (the machine is noisy: compare medians of several runs, never single ones).
#   match_bench.sh BUILD_DIR novel [bench args...]: --novel (nothing repeats) plain and under the shim:
#     identical output, nothing replayed, the engine rested; its own time on the launches it saw.
set -euo pipefail
build=$1 mode=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
prog=$build/bin/match_bench
shim() {
    env AUTOGRAPH_CUPTI=off LD_PRELOAD="$build/lib/libautograph.so" AUTOGRAPH_STATS="$tmp/stats.json" "$prog" "$@"
}
case $mode in
check)
    "$prog" "$@" >"$tmp/plain.out"
    shim "$@" >"$tmp/shim.out"
    diff -u "$tmp/plain.out" "$tmp/shim.out"
    python3 - "$tmp/stats.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
r = s["replay"]
frac = 100.0 * r["launches_replayed"] / max(1, s["launches"])
print(f"launches {s['launches']} replayed {r['launches_replayed']} ({frac:.1f}%), host_ns_per_match {r['host_ns_per_match']} (median {r['host_ns_per_match_median']})")
if frac < 80:
    sys.exit(f"replayed {frac:.1f}% < 80%")
# The timings are reported (never compared with a bound): the matched launches were timed, and by phase.
ph = r["host_ns_per_match_phases"]
if sorted(ph) != sorted(["record", "enter", "match", "copy", "learn"]) or min(ph.values()) < 0:
    sys.exit(f"host_ns_per_match_phases malformed: {ph}")
if r["host_ns_per_match"] <= 0 or r["host_ns_per_match_median"] <= 0 or r["host_ns_per_match_to_lock"] <= 0 or sum(ph.values()) <= 0:
    sys.exit("matched launches were not timed: " + json.dumps({k: r[k] for k in r if k.startswith("host_ns")}))
if not 0 <= r["host_ns_clock_read"] < 1e6:
    sys.exit(f"host_ns_clock_read {r['host_ns_clock_read']}")
print("phases (ns): " + ", ".join(f"{k} {v}" for k, v in ph.items()) + f"; a clock read {r['host_ns_clock_read']} ns")
PY
    ;;
novel)
    # match_bench --novel (nothing repeats): identical output, nothing replayed, the engine rested and let
    # most launches pass; prints the engine's own time on the launches it learned (reported, never bounded)
    "$prog" --novel "$@" >"$tmp/plain.out"
    shim --novel "$@" >"$tmp/shim.out"
    diff -u "$tmp/plain.out" "$tmp/shim.out"
    python3 - "$tmp/stats.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
r = s["replay"]
seen, total = r["launches_eager_through_engine"], s["launches"]
print(f"launches {total}: {seen} through the engine ({100.0 * seen / max(1, total):.1f}%), the others passed while it "
      f"rested ({r['rests']} rests, {r['segments_rested']} segments); engine {r['host_ns_engine_per_eager_launch']} ns "
      f"on each launch it saw (median {r['host_ns_engine_per_eager_launch_median']}), {r['host_ns_engine_per_launch']} ns "
      f"a launch over all; replayed {r['launches_replayed']}")
if r["launches_replayed"] or r["graphs_built"]:
    sys.exit("a program that never repeats had launches replayed or graphs built")
if r["rests"] < 1 or 4 * seen > total:
    sys.exit("the engine did not rest: it saw more than a quarter of the launches")
if r["host_ns_engine_per_eager_launch"] <= 0:
    sys.exit("the launches the engine saw were not timed")
PY
    ;;
measure)
    runs=$1
    shift
    for ((i = 0; i < runs; i++)); do
        shim "$@" >/dev/null
        python3 -c 'import json,sys; r = json.load(open(sys.argv[1]))["replay"]; print(r["host_ns_per_match"], r["host_ns_per_match_median"])' "$tmp/stats.json"
    done | python3 -c '
import statistics, sys
v = [tuple(map(float, l.split())) for l in sys.stdin.read().splitlines()]
print("host_ns_per_match runs: " + " ".join(f"{x:.1f}" for x, _ in v) + f"  median {statistics.median(x for x, _ in v):.1f}"
      + " (medians within each run: " + " ".join(f"{y:.1f}" for _, y in v) + ")")'
    ;;
*)
    echo "usage: $0 BUILD_DIR check|measure|novel ..." >&2
    exit 2
    ;;
esac
