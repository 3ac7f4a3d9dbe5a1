#!/usr/bin/env bats
# A context-wide event record (cuCtxRecordEvent) as each iteration's only wait, with the ctx_event sample:
# the host reads page-locked mapped memory that the iteration's last kernel wrote, right after a sync on
# that event. The shim issues its held launches before the record (a barrier), so the record takes them
# in: identical output, and most launches replayed from graphs (without the barrier the host would read
# the iteration before's values). With --wait, cuCtxWaitEvent after each iteration as well. With
# --sync-thread, a second thread's context-wide syncs and records all along, none of which may fail.

load helpers

setup() {
    [ -x "$BIN/ctx_event" ] || skip "$BIN/ctx_event is not built (nvcc missing?)"
    OUT=$BATS_TEST_TMPDIR/ctx_event
    "$BIN/ctx_event" --iters 1 >/dev/null 2>&1 || { [ $? -ne 2 ] || skip "the driver has no cuCtxRecordEvent"; }
}

# replayed_most DIR: at least half of the launches were replayed from graphs (the barrier was met with
# work held, every iteration).
replayed_most() {
    local launches replayed
    launches=$(stat "$1/stats.json" launches)
    replayed=$(stat "$1/stats.json" replay.launches_replayed)
    echo "launches $launches, replayed $replayed; cuCtxRecordEvent calls $(stat "$1/stats.json" calls.cuCtxRecordEvent)"
    [ "$replayed" != null ] && [ "$((replayed * 2))" -ge "$launches" ]
}

@test "ctx_event: context-wide event record before the host reads mapped memory: identical, mostly replayed" {
    run_pair "$OUT" "$BIN/ctx_event" --iters "${ITERS:-200}"
    same_output "$OUT"
    replayed_most "$OUT"
    summary "$OUT" ctx_event
}

@test "ctx_event --wait 1: the context also waits on the event after each iteration: identical, mostly replayed" {
    run_pair "$OUT" "$BIN/ctx_event" --iters "${ITERS:-200}" --wait 1
    same_output "$OUT"
    replayed_most "$OUT"
    summary "$OUT" ctx_event_wait
}

@test "ctx_event --sync-thread 1: another thread syncs the context and records context-wide events all along: none fails, identical" {
    # CUDA fails a context-wide sync or event record (and breaks the capture) where any stream of the
    # context captures: the library's graph builds give way to such calls (the capture fence), so every
    # call of the second thread succeeds (the sample exits 3 where one failed, and run_pair fails then).
    run_pair "$OUT" "$BIN/ctx_event" --iters "${ITERS:-200}" --sync-thread 1
    same_output "$OUT"
    grep "sync thread" "$OUT/plain.err" "$OUT/shim.err"
    echo "graphs built $(stat "$OUT/stats.json" replay.graphs_built), builds that gave way" \
         "$(stat "$OUT/stats.json" replay.fallbacks.graph_build_gave_way), calls that waited for a capture" \
         "$(stat "$OUT/stats.json" replay.capture_fence_waits), replayed $(stat "$OUT/stats.json" replay.launches_replayed)" \
         "of $(stat "$OUT/stats.json" launches)"
    summary "$OUT" ctx_event_sync_thread
}
