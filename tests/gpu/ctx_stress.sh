#!/usr/bin/env bash
# Not a test: runs driver_api in three contexts with a thread each (bats.contexts' second case) under the
# shim again and again, with every CPU busy and launch_bound running beside it on the GPU, and counts
# the runs whose output differs from a plain run's or that fail; the first few failures' stderr go to
# OUT (with tests/gpu/segv_bt.c preloaded: a backtrace and the mappings on a fatal signal).
# Found with it (twenty-third session, H200): a segfault inside libcupti at a thread's exit, 1 run in
# 77-100 under this load, with the session's code and with the code before it (`2de925b`): CUPTI's
# per-thread destructor against cuptiFinalize, which the observer now keeps apart: 0 of 308 runs failed
# after the fix (twenty-fourth session, background and inline finalize), the exclusion acting in 108.
# Usage on the GPU machine, after a build: bash tests/gpu/ctx_stress.sh [SECONDS (120)] [BUILD (build-gpu)]
# (STRESS_ENV: extra settings for the shim's runs, e.g. "AUTOGRAPH_CUPTI_DETACH=inline"; OUT: where the
# failures' stderr go, /tmp/ctx_stress by default)
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-120}
B=${2:-build-gpu}
L=$(cd "$B" && pwd)/lib/libautograph.so
OUT=${OUT:-/tmp/ctx_stress}
mkdir -p "$OUT"
bt=/tmp/segv_bt.so
gcc -O1 -g -shared -fPIC -o "$bt" tests/gpu/segv_bt.c || exit 1
read -r -a extra <<<"${STRESS_ENV:-}"
prog=("$B/bin/driver_api" --iters 40 --contexts 3 --threads 1)
"${prog[@]}" >"$OUT/plain.out" 2>"$OUT/plain.err" || { echo "the plain run failed"; exit 1; }
busy=()
for _ in $(seq "$(nproc)"); do
    timeout $((secs + 30)) sh -c 'while :; do :; done' &
    busy+=($!)
done
(for _ in $(seq 1000); do "$B/bin/launch_bound" --iters 300 >/dev/null 2>&1; done) &
neighbour=$!
n=0 bad=0 t0=$SECONDS
ends_waited=0 fins_waited=0 acted=0
while [ $((SECONDS - t0)) -lt "$secs" ]; do
    rm -f "$OUT/stats.json"
    env "${extra[@]}" AUTOGRAPH_STATS="$OUT/stats.json" LD_PRELOAD="$bt $L" "${prog[@]}" >"$OUT/shim.out" 2>"$OUT/shim.err"
    rc=$?
    n=$((n + 1))
    # how often the observer kept a thread's end and a finalize apart (cupti.thread_ends_waited and
    # cupti.finalizes_waited_for_ends), summed over the runs
    e=$(grep -so '"thread_ends_waited": [0-9]*' "$OUT/stats.json" | grep -o '[0-9]*$')
    f=$(grep -so '"finalizes_waited_for_ends": [0-9]*' "$OUT/stats.json" | grep -o '[0-9]*$')
    ends_waited=$((ends_waited + ${e:-0})) fins_waited=$((fins_waited + ${f:-0}))
    [ $((${e:-0} + ${f:-0})) -gt 0 ] && acted=$((acted + 1))
    if [ $rc != 0 ] || ! cmp -s "$OUT/plain.out" "$OUT/shim.out"; then
        bad=$((bad + 1))
        [ $bad -le 3 ] && cp "$OUT/shim.err" "$OUT/fail$bad.err"
        echo "run $n: rc $rc"
        grep '^segv_bt\|^/' "$OUT/shim.err" | grep -v '^/.* r-xp \|^/.* r--p ' | head -12
    fi
done
kill "$neighbour" "${busy[@]}" 2>/dev/null
wait 2>/dev/null
echo "ctx_stress: $bad of $n runs differ or failed (${STRESS_ENV:-default settings}, $secs s); the exclusion acted in $acted runs (thread ends waited $ends_waited, finalizes waited for ends $fins_waited)"
