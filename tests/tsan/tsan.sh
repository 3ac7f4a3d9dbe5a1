#!/usr/bin/env bash
# tsan.sh SRC_DIR BUILD_DIR: builds the shim, fakecuda and the engine's test programs with ThreadSanitizer
# (in BUILD_DIR/tsan, AUTOGRAPH_TSAN=ON) and runs the cases where the shim's threads meet the program's:
# the issuer building, patching and launching graphs while the program goes on, a second thread launching
# into the same stream (autograd), an observer thread querying held records, two contexts, a thread
# capturing graphs of its own beside one that launches (difftest.directed.capture_race, capture_staging,
# capture_window, legacy_capture), threads allocating stream-ordered memory at once (async_threads),
# contexts made and destroyed in two threads (ctx_cycle_threads), a context-wide event record or sync beside the builds
# (ctx_event_capture, ctx_sync_capture, ctx_sync_waits), and random programs. Each must print the same output as without the shim and ThreadSanitizer must report no race
# (it makes the run exit 66); tests/tsan/suppressions.txt lists the reads the shim makes without its lock
# on purpose. Exit code 77 (skipped) where the compiler cannot build with -fsanitize=thread, or where
# BUILD_DIR is itself a sanitizer build.
set -euo pipefail
src=$(cd "$1" && pwd)
b=$2/tsan
if grep -qE '^AUTOGRAPH_(SANITIZE|TSAN):BOOL=ON' "$2/CMakeCache.txt" 2>/dev/null; then
    echo "tsan.sh: $2 is a sanitizer build: not nested" >&2
    exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int main(void) { return 0; }' >"$probe/t.c"
if ! cc -fsanitize=thread "$probe/t.c" -o "$probe/t" 2>/dev/null || ! "$probe/t"; then
    echo "tsan.sh: the compiler cannot build with -fsanitize=thread here" >&2
    exit 77
fi
cmake -S "$src" -B "$b" -DAUTOGRAPH_TSAN=ON -DAUTOGRAPH_SAMPLES=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$b" -j"$(nproc)" --target autograph fakecuda engine_prog difftest difftest_directed >/dev/null
export TSAN_OPTIONS="suppressions=$src/tests/tsan/suppressions.txt exitcode=66 report_signal_unsafe=0"
fail=0
run() {
    echo "== $*"
    "$@" || { fail=1; echo "tsan.sh: FAILED: $*"; }
}
# Probes off: they judge speed, which ThreadSanitizer changes. The text generation's builds, most of them
# the issuer's, with the halving plan: under ThreadSanitizer the replay's waits at the syncs can find a
# segment GPU-paced (its graphs are then built and launched by the program's thread).
E="$src/tests/engine/engine.sh"
EXPECT="r['issuer']['builds'] >= 20" run bash "$E" "$b" tokens 144 0 AUTOGRAPH_PROBE=off AUTOGRAPH_CHUNK_PLAN=halving
run bash "$E" "$b" decode 100 0 AUTOGRAPH_PROBE=off
for c in sync autograd autograd_step observer_held observer_alt twostreams ctxwait farquery; do
    run bash "$E" "$b" "$c" 60 0 AUTOGRAPH_PROBE=off
done
D="$src/tests/difftest/difftest.sh"
DT_EXPECT="s['replay']['issuer']['builds'] >= 100" run bash "$D" "$b" 0 100
run bash "$D" "$b" 2000 100 "--buckets 6"
run bash "$D" "$b" 2200 60 --twoctx
run bash "$D" "$b" 1900 60 --observer
run bash "$D" "$b" 2400 60 --farquery
# fakecuda's modeled device: syncs that wait outside the fake's lock while the issuer and the side thread
# go on, queries answered "not ready" until the device gets there (the programs poll them)
FAKECUDA_DEVICE_NS=2000 FAKECUDA_GRAPH_DEVICE_NS=1000 run bash "$D" "$b" 5200 60 --poll
run bash "$D" "$b" --directed capture_race
# a capture counted before its barrier, begun from another context while a thread launches (legacy_capture)
run bash "$D" "$b" --directed legacy_capture
# three threads of one context allocating and freeing stream-ordered memory at once (the engine's set of
# those allocations, written at each allocation and read at each free, from every thread)
run bash "$D" "$b" --directed async_threads
# two threads making and destroying 20 contexts each: engines whose contexts ended taken over by the next
# ones, while the other thread's engine runs
run bash "$D" "$b" --directed ctx_cycle_threads
# ... with the handles given out again, a destroy returning 200 us after its work: the other thread's new
# context gets the destroyed one's handle while the destroying thread's hooks wait (the engine stops
# before the call)
FAKECUDA_REUSE_CONTEXTS=1 FAKECUDA_REUSE_HANDLES=1 FAKECUDA_CTX_DESTROY_RETURN_US=200 run bash "$D" "$b" --directed ctx_cycle_threads
# another context's global capture begun while the engine allocates a staging buffer (30 ms in the fake),
# and while it holds a launch (the capture's barrier slowed by the other context's held work)
FAKECUDA_HOST_ALLOC_NS=30000000 run bash "$D" "$b" --directed capture_staging
run bash "$D" "$b" --directed capture_window
# a second thread's context-wide event record, or sync, held by the fake until a build of ours captures: the
# capture fence (counts of such calls and of our captures, a wait for the captures under way) between the
# program's threads and the issuer
run bash "$D" "$b" --directed ctx_event_capture
run bash "$D" "$b" --directed ctx_sync_capture
# a device-wide sync that waits in the fence for another context's capture (the fence's mutex and condition)
run bash "$D" "$b" --directed ctx_sync_waits
# a thread of a third context capturing now and then (relaxed mode) beside two contexts' programs
run bash "$D" "$b" 42000 40 "--capturer --twoctx"
exit $fail
