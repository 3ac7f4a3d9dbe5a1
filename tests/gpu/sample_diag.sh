#!/usr/bin/env bash
# One sample under the shim, in detail: plain, the default, AUTOGRAPH_PROBE=off and pass-through
# (AUTOGRAPH_SCOPE=off), REPS (3) interleaved runs each; the loop ms medians, whether the outputs match
# the plain run's, the replay statistics of the last default and probes-off runs, and the distinct lines
# of one run's debug log (how often each came). Not a test (nothing is asserted); on the GPU machine,
# after a build: bash tests/gpu/sample_diag.sh SAMPLE [REPS] [BUILD (build-gpu)]
set -uo pipefail
cd "$(dirname "$0")/../.."
smp=${1:?usage: sample_diag.sh SAMPLE [REPS] [BUILD]}
reps=${2:-3}
B=${3:-build-gpu}
L=$(cd "$B" && pwd)/lib/libautograph.so
T=$(mktemp -d)
for i in $(seq "$reps"); do
    for m in plain default noprobe passthrough; do
        e=()
        case $m in
        default) e=(LD_PRELOAD="$L" AUTOGRAPH_STATS="$T/default.json") ;;
        noprobe) e=(LD_PRELOAD="$L" AUTOGRAPH_PROBE=off AUTOGRAPH_STATS="$T/noprobe.json") ;;
        passthrough) e=(LD_PRELOAD="$L" AUTOGRAPH_SCOPE=off) ;;
        esac
        env "${e[@]}" "$B/bin/$smp" >"$T/$m.out" 2>"$T/$m.err"
        sed -n 's/^loop_ms: //p' "$T/$m.err" >>"$T/$m.ms"
        [ "$m" = plain ] || cmp -s "$T/plain.out" "$T/$m.out" || echo "$smp [$m]: OUTPUT DIFFERS"
    done
done
python3 - "$T" "$smp" <<'PY'
import json, statistics, sys
d, smp = sys.argv[1], sys.argv[2]
med = {m: statistics.median(float(x) for x in open(f"{d}/{m}.ms")) for m in ("plain", "default", "noprobe", "passthrough")}
print(f"{smp}: " + " | ".join(f"{m} {v:.1f} ms ({med['plain'] / v:.3f}x of plain)" for m, v in med.items()))
for m in ("default", "noprobe"):
    print(f"{m} replay statistics: {json.dumps(json.load(open(f'{d}/{m}.json'))['replay'])}")
PY
echo "debug log of one default run (count, line):"
LD_PRELOAD="$L" AUTOGRAPH_LOG=debug "$B/bin/$smp" 2>&1 >/dev/null | grep '^autograph' | sed 's/[0-9][0-9.]*/N/g' |
    sort | uniq -c | sort -rn | head -40
