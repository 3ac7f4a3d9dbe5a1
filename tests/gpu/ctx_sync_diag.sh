#!/usr/bin/env bash
# Does CUDA fail a context-wide sync or event record of one thread while another thread's launches are being
# graphed (the library's builds capture in relaxed mode)? Runs the ctx_event sample with --sync-thread MODE
# (default 2: a second thread's cuCtxSynchronize, cuCtxRecordEvent, cuMemAlloc with cuMemFree and sync of
# the legacy stream all along, each kind's failures counted; 1: the first two only; exit 3 where one
# failed) REPS times plain, under this tree's library (the capture fence) and under earlier trees' (OLD_SRC:
# folders holding a git archive each, carried under an ignored path; before the fifty-second session no
# build kept out of a sync), interleaved. Prints each run's exit code, the second thread's count of calls and failures, and the
# library's counts of builds that gave way and calls that waited. ARGS: more of the sample's options (e.g.
# "--kernels 2000": captures of a few milliseconds, which the second thread's calls meet); SHIM_ENV: more
# environment for the library's runs (e.g. "AUTOGRAPH_CHUNK=64"). Not a test; on the GPU machine:
#   OLD_SRC="build-old/a" MODE=2 ARGS="--kernels 2000" bash tests/gpu/ctx_sync_diag.sh [REPS] [ITERS]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
. tests/gpu/shim_built.sh
reps=${1:-5} iters=${2:-400} mode=${MODE:-2}
sample=$BUILD/bin/ctx_event
[ -x "$sample" ] || cmake --build "$BUILD" -j16 --target ctx_event >/tmp/ctx_event-build.log 2>&1 ||
    { tail -20 /tmp/ctx_event-build.log; exit 1; }
T=$(mktemp -d)
declare -A L=([plain]="" [new]=$lib)
names=(plain new)
for src in ${OLD_SRC:-}; do
    [ -f "$src/CMakeLists.txt" ] || continue
    k=$(basename "$src")
    L[$k]=$(lib_built "$src" "$src-build" "$T/build_$k.log") && names+=("$k")
done
for i in $(seq "$reps"); do
    for k in "${names[@]}"; do
        pre=()
        [ -n "${L[$k]}" ] && pre=(env ${SHIM_ENV:-} LD_PRELOAD="${L[$k]}" AUTOGRAPH_STATS="$T/$k.$i.json")
        # shellcheck disable=SC2086 # ARGS: several words
        "${pre[@]}" "$sample" --iters "$iters" --sync-thread "$mode" ${ARGS:-} >"$T/$k.$i.out" 2>"$T/$k.$i.err"
        rc=$?
        line=$(grep -h "sync thread" "$T/$k.$i.err" | sed 's/^sync thread: //' | paste -sd';' -)
        extra=
        [ -f "$T/$k.$i.json" ] && extra=$(python3 - "$T/$k.$i.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
r = s.get("replay", {})
print("graphs %s, gave way %s, waits %s, replayed %s of %s" % (r.get("graphs_built"),
      r.get("fallbacks", {}).get("graph_build_gave_way", "-"), r.get("capture_fence_waits", "-"),
      r.get("launches_replayed"), s.get("launches")))
PY
)
        echo "$k run $i: rc $rc; ${line:-no sync thread line}; $(tail -1 "$T/$k.$i.out"); $extra"
    done
done
