#!/usr/bin/env bash
# Runs one engine_prog case plain and under the shim on fakecuda: identical output, and the statistics
# show at least MIN_REPLAYED percent of the launches replayed from graphs (0 = only check output) and,
# when EXPECT_FALLBACK names a reason, at least one fallback for it; MAX_REPLAYED caps the share (percent),
# MAX_DEFERRED the operations held back (launches_deferred counts every kind); EXPECT, a Python expression
# over the statistics (s, r = s["replay"]), must hold. PATCH_TRACE=1: run under AUTOGRAPH_LOG=trace, and
# tests/gpu/patch_trace.py must find one "patch graph" line per kernel node patched. EXPECT_TRIES (1): runs
# under the shim, each with identical output, until one meets the statistics' checks (for checks on a
# decision the shim takes from one sighting's measured times).
# Usage: engine.sh BUILD_DIR CASE ITERS MIN_REPLAYED [extra env assignments...]
# The extra assignments apply to both runs (fakecuda's FAKECUDA_* host costs the same with and without
# the shim) and to the shim's settings.
set -euo pipefail
build=$1 case=$2 iters=$3 min=$4
shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# events handed out again after their destroy, and a destroyed one given to the fake aborts (fakecuda.h)
export FAKECUDA_REUSE_EVENTS=${FAKECUDA_REUSE_EVENTS:-1} FAKECUDA_STRICT_EVENTS=${FAKECUDA_STRICT_EVENTS:-1}
prog=$build/bin/engine_prog
env "$@" "$prog" "$case" "$iters" >"$tmp/plain.out"
trace=()
[ "${PATCH_TRACE:-0}" = 1 ] && trace=(AUTOGRAPH_LOG=trace)
for try in $(seq "${EXPECT_TRIES:-1}"); do
env "$@" "${trace[@]}" LD_PRELOAD="$build/lib/libautograph.so" AUTOGRAPH_STATS="$tmp/stats.json" \
    "$prog" "$case" "$iters" >"$tmp/shim.out" 2>"$tmp/shim.err" || { cat "$tmp/shim.err"; exit 1; }
if [ "${PATCH_TRACE:-0}" = 1 ]; then
    python3 "$(dirname "$0")/../gpu/patch_trace.py" "$tmp/shim.err" >"$tmp/trace.txt"
    tail -1 "$tmp/trace.txt"
    python3 - "$tmp/stats.json" "$tmp/trace.txt" <<'PY'
import json, re, sys
want = json.load(open(sys.argv[1]))["replay"]["nodes_patched_by_kind"]["kernel"]
m = re.search(r"^patches by kind: (.*)$", open(sys.argv[2]).read(), re.M)
got = sum(int(n) for n in re.findall(r" (\d+) \(\d+%", m.group(1))) if m else 0
if not want or got != want:
    sys.exit(f"patch trace: {got} kernel patches traced, the statistics count {want}")
PY
else
    cat "$tmp/shim.err"
fi
diff -u "$tmp/plain.out" "$tmp/shim.out"
if python3 - "$tmp/stats.json" "$min" "${EXPECT_FALLBACK:-}" "${MAX_REPLAYED:-100}" "${MAX_DEFERRED:--1}" "${EXPECT:-}" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
r = s["replay"]
frac = 100.0 * r["launches_replayed"] / max(1, s["launches"])
print(f"launches {s['launches']} replayed {r['launches_replayed']} ({frac:.1f}%), graphs {r['graphs_built']}, "
      f"graph launches {r['graph_launches']}, patched {r['nodes_patched']}, fallbacks {r['fallbacks']}, "
      f"profit {r['profit']}")
if sys.argv[6] and not eval(sys.argv[6], {"s": s, "r": r}):
    sys.exit(f"expected: {sys.argv[6]}")
if frac < float(sys.argv[2]):
    sys.exit(f"replayed {frac:.1f}% < {sys.argv[2]}%")
if frac > float(sys.argv[4]):
    sys.exit(f"replayed {frac:.1f}% > {sys.argv[4]}%")
if int(sys.argv[5]) >= 0 and r["launches_deferred"] > int(sys.argv[5]):
    sys.exit(f"{r['launches_deferred']} operations held back, more than {sys.argv[5]}")
if sys.argv[3] and not r["fallbacks"].get(sys.argv[3]):
    sys.exit(f"no fallback counted as {sys.argv[3]}")
PY
then
    exit 0
fi
done
exit 1
