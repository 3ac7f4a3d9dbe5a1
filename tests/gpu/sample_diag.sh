#!/usr/bin/env bash
# One sample under the shim, in detail: plain, the default, AUTOGRAPH_PROBE=off and pass-through
# (AUTOGRAPH_SCOPE=off), REPS (3) interleaved runs each; the loop ms medians, whether the outputs match
# the plain run's, the replay statistics of the last default and probes-off runs, and the distinct lines
# of one run's debug log (how often each came). Not a test (nothing is asserted); on the GPU machine,
# after a build: bash tests/gpu/sample_diag.sh SAMPLE [REPS] [BUILD (build-gpu)]
# SD_MODES: the modes (default "plain default noprobe passthrough"); besides those, VAR=value[,VAR=value...]
# runs under the shim with those settings. SD_AB=B: each shim mode also runs once with AG_AB=B (the
# sample compares the shim with itself paused in one process, blocks of B iterations). SD_LOG=0: no debug log.
set -uo pipefail
cd "$(dirname "$0")/../.."
smp=${1:?usage: sample_diag.sh SAMPLE [REPS] [BUILD]}
reps=${2:-3}
B=${3:-build-gpu}
L=$(cd "$B" && pwd)/lib/libautograph.so
T=$(mktemp -d)
read -r -a modes <<<"${SD_MODES:-plain default noprobe passthrough}"
mode_env() { # the settings of a mode (array e; its statistics file under the shim)
    e=()
    case $1 in
    plain) ;;
    default) e=(LD_PRELOAD="$L") ;;
    noprobe) e=(LD_PRELOAD="$L" AUTOGRAPH_PROBE=off) ;;
    passthrough) e=(LD_PRELOAD="$L" AUTOGRAPH_SCOPE=off) ;;
    *=*) IFS=, read -r -a kv <<<"$1" && e=(LD_PRELOAD="$L" "${kv[@]}") ;;
    *) echo "sample_diag.sh: unknown mode $1" >&2 && exit 2 ;;
    esac
}
fname() { local s=${1//[^A-Za-z0-9_]/_}; echo "$T/$s"; }
for i in $(seq "$reps"); do
    for m in "${modes[@]}"; do
        mode_env "$m"
        f=$(fname "$m")
        [ "$m" = plain ] || e+=(AUTOGRAPH_STATS="$f.json")
        env "${e[@]}" "$B/bin/$smp" >"$f.out" 2>"$f.err"
        sed -n 's/^loop_ms: //p' "$f.err" >>"$f.ms"
        sed -n 's/^steady_ms: //p' "$f.err" >>"$f.steady"
        [ "$m" = plain ] || cmp -s "$(fname plain).out" "$f.out" || echo "$smp [$m]: OUTPUT DIFFERS"
    done
done
if [ -n "${SD_AB:-}" ]; then
    for m in "${modes[@]}"; do
        [ "$m" = plain ] && continue
        mode_env "$m"
        env "${e[@]}" AG_AB="$SD_AB" "$B/bin/$smp" 2>&1 >/dev/null | sed -n "s|^ab_iter_us: |$m A/B (us an iteration): |p"
    done
fi
python3 - "$T" "$smp" "${modes[@]}" <<'PY'
import json, re, statistics, sys
d, smp, modes = sys.argv[1], sys.argv[2], sys.argv[3:]
f = lambda m: f"{d}/" + re.sub(r"[^A-Za-z0-9_]", "_", m)
med = lambda p: statistics.median(float(x) for x in open(p))
plain = med(f(modes[0]) + ".ms") if modes and modes[0] == "plain" else None
for m in modes:
    ms, st = med(f(m) + ".ms"), med(f(m) + ".steady")
    ratio = f" ({plain / ms:.3f}x of plain)" if plain else ""
    runs = " ".join(f"{float(x):.1f}" for x in open(f(m) + ".ms"))
    print(f"{smp} {m}: loop {ms:.1f} ms{ratio}, steady half {st:.1f} ms; runs {runs}")
for m in modes:
    if m == "plain":
        continue
    try:
        r = json.load(open(f(m) + ".json"))
    except (OSError, ValueError):
        continue
    keep = ("launches", "launches_replayed", "graph_launches", "graphs_built", "fallbacks", "profit", "issuer")
    rp = r.get("replay", {})
    print(f"{m} statistics: {json.dumps({k: rp[k] for k in keep if k in rp})}")
PY
[ "${SD_LOG:-1}" = 0 ] && exit 0
echo "debug log of one default run (count, line):"
LD_PRELOAD="$L" AUTOGRAPH_LOG=debug "$B/bin/$smp" 2>&1 >/dev/null | grep '^autograph' | sed 's/[0-9][0-9.]*/N/g' |
    sort | uniq -c | sort -rn | head -40
