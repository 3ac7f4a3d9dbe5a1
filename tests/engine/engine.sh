#!/usr/bin/env bash
# Runs one engine_prog case plain and under the shim on fakecuda: identical output, and the statistics
# show at least MIN_REPLAYED percent of the launches replayed from graphs (0 = only check output) and,
# when EXPECT_FALLBACK names a reason, at least one fallback for it; MAX_REPLAYED caps the share (percent),
# MAX_DEFERRED the operations held back (launches_deferred counts every kind); EXPECT, a Python expression
# over the statistics (s, r = s["replay"]), must hold.
# Usage: engine.sh BUILD_DIR CASE ITERS MIN_REPLAYED [extra env assignments...]
# The extra assignments apply to both runs (fakecuda's FAKECUDA_* host costs the same with and without
# the shim) and to the shim's settings.
set -euo pipefail
build=$1 case=$2 iters=$3 min=$4
shift 4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
prog=$build/bin/engine_prog
env "$@" "$prog" "$case" "$iters" >"$tmp/plain.out"
env "$@" LD_PRELOAD="$build/lib/libautograph.so" AUTOGRAPH_STATS="$tmp/stats.json" \
    "$prog" "$case" "$iters" >"$tmp/shim.out" 2>"$tmp/shim.err" || { cat "$tmp/shim.err"; exit 1; }
cat "$tmp/shim.err"
diff -u "$tmp/plain.out" "$tmp/shim.out"
python3 - "$tmp/stats.json" "$min" "${EXPECT_FALLBACK:-}" "${MAX_REPLAYED:-100}" "${MAX_DEFERRED:--1}" "${EXPECT:-}" <<'PY'
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
