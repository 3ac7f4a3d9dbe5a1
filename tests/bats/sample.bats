#!/usr/bin/env bats
# One bundled sample (SAMPLE, set by CTest) on the GPU: identical output with and without the shim, every
# launch CUPTI saw reached a hook, at least MIN_REPLAYED percent of the launches replayed from graphs
# (set per sample by CTest), and AUTOGRAPH_SCOPE=off identical with nothing replayed.

load helpers

setup() {
    : "${SAMPLE:?set SAMPLE to a sample name}"
    [ -x "$BIN/$SAMPLE" ] || skip "$BIN/$SAMPLE is not built (nvcc missing?)"
    OUT=$BATS_TEST_TMPDIR/$SAMPLE
}

@test "$SAMPLE: identical output under the shim, every launch seen, replayed from graphs" {
    AUTOGRAPH_CUPTI=always run_pair "$OUT" "$BIN/$SAMPLE" --iters "${ITERS:-40}"
    same_output "$OUT"
    coverage_ok "$OUT" "$SAMPLE"
    replayed_at_least "$OUT" "${MIN_REPLAYED:-0}"
    if [ "$SAMPLE" = never_repeat ]; then
        # Nothing repeats: nothing may be replayed, and nothing is held back in vain for long; after 32
        # segments in a row that repeated nothing the engine rests (AUTOGRAPH_REST).
        [ "$(stat "$OUT/stats.json" replay.launches_replayed)" = 0 ]
        [ "$(stat "$OUT/stats.json" replay.rests)" -ge 1 ]
    fi
    if [ -n "${EXPECT_FALLBACK:-}" ]; then
        # A sample that changes shape must show why it fell back.
        [ "$(stat "$OUT/stats.json" "replay.fallbacks.$EXPECT_FALLBACK")" -gt 0 ]
    fi
}

@test "$SAMPLE: paused and resumed every 5 iterations inside the run (AG_AB), identical output" {
    # kernels/common.h AG_AB: from iteration 20 on, blocks of 5 with the engine and paused (autograph_pause)
    # in turn; held work is issued at each pause and the engine picks the loop up again at each resume.
    AG_AB=5 run_pair "$OUT" "$BIN/$SAMPLE" --iters 40
    same_output "$OUT"
    grep -qx "ab_iter_us: no shim" "$OUT/plain.err"
    line=$(grep "^ab_iter_us: " "$OUT/shim.err")
    echo "# $line" >&3
    [[ "$line" =~ ^ab_iter_us:\ shim\ ([0-9.]+)\ paused\ ([0-9.]+)\ blocks\ 4$ ]]
    python3 -c "import sys; sys.exit(not (float(sys.argv[1]) > 0 and float(sys.argv[2]) > 0))" \
        "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
}

@test "$SAMPLE: AUTOGRAPH_SCOPE=off is a pure pass-through" {
    AUTOGRAPH_SCOPE=off run_pair "$OUT" "$BIN/$SAMPLE" --iters 10
    same_output "$OUT"
    [ "$(stat "$OUT/stats.json" scope)" = off ]
    [ "$(stat "$OUT/stats.json" replay.launches_replayed)" = null ] || \
        [ "$(stat "$OUT/stats.json" replay.launches_replayed)" = 0 ]
}

@test "$SAMPLE: default CUPTI mode (learn): guard while learning, detached for replay, no call past the hooks" {
    AUTOGRAPH_CUPTI=learn run_pair "$OUT" "$BIN/$SAMPLE" --iters "${ITERS:-40}"
    same_output "$OUT"
    [ "$(stat "$OUT/stats.json" cupti.unhooked)" = 0 ]
    state=$(stat "$OUT/stats.json" cupti.state)
    echo "# cupti state $state, detaches $(stat "$OUT/stats.json" cupti.detaches), busy while learning $(stat "$OUT/stats.json" cupti.gpu_busy_learning), kernels timed $(stat "$OUT/stats.json" cupti.kernels_timed), set-up $(stat "$OUT/stats.json" cupti.setup_ms) ms (at cuInit $(stat "$OUT/stats.json" cupti.warm_ms) ms)" >&3
    if [ "$(stat "$OUT/stats.json" replay.launches_replayed)" -gt 0 ]; then
        # Graphs were launched: CUPTI was detached before the first one.
        [ "$(stat "$OUT/stats.json" cupti.detaches)" -ge 1 ]
    fi
    if [ "$SAMPLE" = never_repeat ]; then
        # Nothing repeats: CUPTI, set up at cuInit, is never attached, and it is finalized when the engine
        # first rests (a warm CUPTI slows every kernel launch a little).
        [ "$(stat "$OUT/stats.json" cupti.attaches)" = 0 ]
        [ "$(stat "$OUT/stats.json" replay.rests)" -ge 1 ]
        [ "$(stat "$OUT/stats.json" cupti.state)" = detached ]
        [ "$(stat "$OUT/stats.json" cupti.finalized_resting)" = true ]
    else
        # It repeats: CUPTI was attached to watch it (the kernel records of a short window may not all
        # be delivered before CUPTI is detached, so kernels_timed is logged above, not asserted).
        [ "$(stat "$OUT/stats.json" cupti.attaches)" -ge 1 ]
    fi
    summary "$OUT" "$SAMPLE/learn"
    replayed_at_least "$OUT" "${MIN_REPLAYED:-0}"
}

@test "$SAMPLE: a graph cache smaller than the work (AUTOGRAPH_MAX_GRAPHS=2), identical output" {
    # Only the sample whose batch size changes: its three sizes want more graphs than the cache holds, so
    # graphs are replaced (cuGraphExecDestroy while the program runs) or builds refused (fallback
    # graph_cache_full). engine.cache_full covers the policy on fakecuda; this covers real CUDA.
    [ "$SAMPLE" = shape_change ] || skip "only shape_change"
    AUTOGRAPH_MAX_GRAPHS=2 run_pair "$OUT" "$BIN/$SAMPLE" --iters 200 --period 3
    same_output "$OUT"
    live=$(stat "$OUT/stats.json" replay.graphs_live)
    evicted=$(stat "$OUT/stats.json" replay.graphs_evicted)
    refused=$(stat "$OUT/stats.json" replay.graph_builds_refused)
    echo "# built $(stat "$OUT/stats.json" replay.graphs_built), live $live ($(stat "$OUT/stats.json" replay.graphs_device_bytes) device bytes), evicted $evicted, refused $refused, replayed $(stat "$OUT/stats.json" replay.launches_replayed) of $(stat "$OUT/stats.json" launches)" >&3
    [ "$live" -le 2 ]
    [ $((evicted + refused)) -gt 0 ]
}
