#!/usr/bin/env bash
# Where a workload's output under the shim departs from its plain run: the workload (default: the CNN,
# tests/python/cnn_step.py) run plain and under each of several settings, each in a fresh process, and
# for each the first step whose line differs, the replay's statistics (re-issues the driver refused, kernel
# attribute sets, launch attribute ids) and the calls that reached hooks.
# Not a test; on the GPU machine:
#   OUT=dir bash tests/gpu/cnn_diag.sh [STEPS] [ARGS...]      (default: 12 steps, no arguments)
# DIAG_MODES: space-separated settings, each a comma-separated list of VAR=value ("-": the defaults).
# Writes OUT/diag.txt (the table), and for the first mode that differs OUT/trace.txt.gz (its run at
# AUTOGRAPH_LOG=trace) and OUT/stats.json.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/shim_built.sh
OUT=${OUT:-/tmp/cnn-diag}
mkdir -p "$OUT"
steps=${1:-12}
shift || true
prog=(python3 "${DIAG_PROG:-tests/python/cnn_step.py}" --steps "$steps" "$@")
modes=${DIAG_MODES:-"- AUTOGRAPH_CUPTI=always AUTOGRAPH_CUPTI=off AUTOGRAPH_CHUNK=1 AUTOGRAPH_CHUNK=1,AUTOGRAPH_CUPTI=off AUTOGRAPH_CHUNK_PLAN=halving AUTOGRAPH_WARMUP=4 AUTOGRAPH_ISSUER=inline AUTOGRAPH_SEGMENT_KEY=exact AUTOGRAPH_SCOPE=off"}
T=$(mktemp -d)
"${prog[@]}" >"$T/plain.out" 2>"$T/plain.err" || { cat "$T/plain.err"; exit 1; }
"${prog[@]}" >"$T/plain2.out" 2>/dev/null
cmp -s "$T/plain.out" "$T/plain2.out" || echo "plain runs differ from each other" | tee -a "$OUT/diag.txt"
traced=no
for m in $modes; do
    envs=()
    [ "$m" = - ] || IFS=, read -ra envs <<<"$m"
    env "${envs[@]}" LD_PRELOAD="$lib" AUTOGRAPH_STATS="$T/s.json" "${prog[@]}" >"$T/m.out" 2>"$T/m.err"
    rc=$?
    first=$(diff <(cat "$T/plain.out") "$T/m.out" | grep -m1 -E '^[<>]' | cut -c1-60)
    line=$(python3 - "$T/s.json" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    print("no statistics"); sys.exit()
r = s.get("replay", {})
fb = {k: v for k, v in r.get("fallbacks", {}).items() if v}
print(f"launches {s['launches']} replayed {r.get('launches_replayed', 0)} graphs {r.get('graphs_built', 0)} "
      f"graph launches {r.get('graph_launches', 0)} fallbacks {fb or '-'} cupti {s.get('cupti', {}).get('launches', '-')} "
      f"unhooked {s.get('cupti', {}).get('unhooked', '-')}{s.get('cupti', {}).get('unhooked_names') or ''} "
      f"re-issues refused {r.get('reissue_failures', '-')} kernel attribute sets {s.get('function_attribute_sets', '-')} "
      f"launch attribute ids {s.get('launch_attribute_ids', '-')}")
PY
)
    printf '%-44s rc %s %-10s %s | %s\n' "$m" "$rc" "$([ -z "$first" ] && echo identical || echo DIFFERS)" \
        "${first:-}" "$line" | tee -a "$OUT/diag.txt"
    if [ -n "$first" ] && [ $traced = no ]; then
        traced=yes
        cp "$T/s.json" "$OUT/stats.json"
        grep -v "^autograph: trace" "$T/m.err" | tail -20 >>"$OUT/diag.txt"
        env "${envs[@]}" LD_PRELOAD="$lib" AUTOGRAPH_LOG=trace "${prog[@]}" >"$T/t.out" 2>"$T/t.err"
        gzip -c "$T/t.err" >"$OUT/trace.txt.gz"
        # which hooked entry points the program called, and how often
        python3 -c "import json,sys; print(json.load(open(sys.argv[1])).get('calls'))" "$OUT/stats.json" >>"$OUT/diag.txt"
    fi
done
