#!/usr/bin/env bash
# launch_bound against its hand graph, taken apart: which part of the gap is paid once (learning,
# CUPTI's window, graph builds) and which every iteration. Each mode runs REPS (5) times interleaved;
# for each, the medians of the whole loop (loop_ms) and of its second half (steady_ms, after learning),
# and the fixed cost estimated as loop_ms - 2 * steady_ms. Not a test (nothing is asserted); on the
# GPU machine, after a build: bash tests/gpu/lb_diag.sh [REPS] [BUILD (build-gpu)] [SAMPLE (launch_bound)]
# (LB_ITERS: the sample's iterations, for graph launches per iteration and the phases; by default those
# the hand runs report, AG_ITER_US)
set -uo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-5}
B=${2:-build-gpu}
smp=${3:-launch_bound}
L=$(cd "$B" && pwd)/lib/libautograph.so
T=$(mktemp -d)
# LB_MODES: the modes, hand first; besides those named below, VAR=value[,VAR=value...] runs with those settings
read -r -a modes <<<"${LB_MODES:-hand default cupti_off first2 first4 first16 warmup1 one_graph halving}"
# mode_env MODE: the settings (array e) and arguments (array a) of a mode
mode_env() {
    e=(LD_PRELOAD="$L")
    a=()
    case $1 in
    hand) e=() a=(--graph) ;;
    cupti_off) e+=(AUTOGRAPH_CUPTI=off) ;;
    first2) e+=(AUTOGRAPH_CHUNK_FIRST=2) ;;
    first4) e+=(AUTOGRAPH_CHUNK_FIRST=4) ;;
    first16) e+=(AUTOGRAPH_CHUNK_FIRST=16) ;;
    warmup1) e+=(AUTOGRAPH_WARMUP=1) ;;
    one_graph) e+=(AUTOGRAPH_CHUNK_FIRST=0 AUTOGRAPH_CHUNK=256) ;;
    halving) e+=(AUTOGRAPH_CHUNK_PLAN=halving) ;;
    *=*) IFS=, read -r -a kv <<<"$1" && e+=("${kv[@]}") ;; # a mode VAR=value[,VAR=value...]
    esac
}
for i in $(seq "$reps"); do # REPS 0: only the iterations and the log below
    for m in "${modes[@]}"; do
        mode_env "$m"
        f=$T/${m//\//_} # a mode's files (a path in it, LD_PRELOAD=PATH, made a name)
        [ "$i" = 1 ] && [ "$m" != hand ] && e+=(AUTOGRAPH_STATS="$f.json")
        env "${e[@]}" AG_ITER_US=4096 "$B/bin/$smp" "${a[@]}" >"$f.out" 2>"$f.err"
        sed -n 's/^loop_ms: //p' "$f.err" >>"$f.loop"
        sed -n 's/^iter_us: //p' "$f.err" >>"$f.iters"
        sed -n 's/^steady_ms: //p' "$f.err" >>"$f.steady"
    done
done
[ "$reps" -gt 0 ] && python3 - "$T" "$smp" "${LB_ITERS:-0}" "${modes[@]}" <<'PY'
import json, statistics, sys
d, smp, iters, modes = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
if not iters:  # the sample's iterations, from the hand runs' iter_us lines
    iters = min((len(line.split()) for line in open(f"{d}/hand.iters")), default=600)
med = lambda f: statistics.median(float(x) for x in open(f))
name = lambda m: f"{d}/{m.replace('/', '_')}"  # a mode's files, as the shell loop names them
h_loop, h_st = med(f"{d}/hand.loop"), med(f"{d}/hand.steady")
print(f"{smp}: mode | loop ms (x hand) | steady ms (x hand) | fixed ms (loop - 2 steady) | graph launches/iter | eager-issued launches")
for m in modes:
    lp, st = med(f"{name(m)}.loop"), med(f"{name(m)}.steady")
    extra = ""
    try:
        s = json.load(open(f"{name(m)}.json"))
        r = s.get("replay", {})
        extra = f" | {r.get('graph_launches', 0) / iters:.2f} | {r.get('launches_eager', r.get('launches_eager_through_engine', '-'))}"
    except Exception:
        pass
    print(f"  {m:10s} | {lp:8.2f} ({lp / h_loop:.3f}x) | {st:7.2f} ({st / h_st:.3f}x) | {lp - 2 * st:6.2f}{extra}")
# Where the time over the hand graph goes: each run's iterations (AG_ITER_US) summed by phase, the
# medians over the runs, and what each phase costs over the hand graph's.
phases = [(0, 2), (2, 6), (6, 24), (24, iters // 2), (iters // 2, iters)]
def by_phase(m):
    runs = [[float(x) for x in line.split()] for line in open(f"{name(m)}.iters") if len(line.split()) >= iters]
    return [statistics.median(sum(r[a:b]) for r in runs) / 1e3 for a, b in phases] if runs else None
hand = by_phase("hand")
if hand:
    print(f"{smp}: ms by iterations (medians of the runs' sums), over the hand graph's in brackets")
    print("  mode       | " + " | ".join(f"{a}-{b - 1}" for a, b in phases))
    for m in modes:
        p = by_phase(m)
        if p:
            print(f"  {m:10s} | " + " | ".join(f"{x:.2f} ({x - h:+.2f})" for x, h in zip(p, hand)))
PY
# The first iterations one by one (us), once per mode: where the fixed cost lands.
echo "$smp: the first 24 iterations (us), one run each:"
for m in "${modes[@]}"; do
    mode_env "$m"
    echo "  $m: $(env "${e[@]}" AG_ITER_US=24 "$B/bin/$smp" "${a[@]}" 2>&1 >/dev/null | sed -n 's/^iter_us: //p')"
done
echo "debug log of one default run, with the iterations marked (times: ms after the shim loaded):"
# the sample's "iter I at T ms" (CLOCK_MONOTONIC) on the shim's clock, whose "loaded" line gives its zero
LD_PRELOAD="$L" AUTOGRAPH_LOG=${LB_LOG:-debug} AG_ITER_US=24 "$B/bin/$smp" 2>&1 >/dev/null | grep -E '^autograph|^iter' |
    grep -v 'layout of' | awk '/at CLOCK_MONOTONIC/ { for (i = 1; i < NF; i++) if ($i == "CLOCK_MONOTONIC") t0 = $(i + 1) * 1000 }
        /^iter [0-9]+ at / { printf "iter %s [%.3f ms]\n", $2, $4 - t0; next } { print }' | head -${LB_LOG_LINES:-80}

