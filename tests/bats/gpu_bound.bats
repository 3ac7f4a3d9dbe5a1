#!/usr/bin/env bats
# Timings from CUPTI used by the engine, on the GPU: launch_bound with 16M elements per kernel is
# GPU-bound (each kernel runs far longer than the host takes to launch it). While learning, CUPTI ties
# each kernel's record to the operation that launched it; the segment's GPU time against its host time
# says a graph cannot pay there, and it stays on plain launches. AUTOGRAPH_GPU_BOUND=0 graphs it anyway.
# Loop times of both and of the plain run are logged (medians of 3 interleaved runs), never asserted.

load helpers

N=16777216

setup() {
    [ -x "$BIN/launch_bound" ] || skip "$BIN/launch_bound is not built (nvcc missing?)"
    OUT=$BATS_TEST_TMPDIR/gpu_bound
}

# loop_ms FILE: the sample's loop time from its stderr
loop_ms() { sed -n 's/^loop_ms: //p' "$1"; }

@test "launch_bound --n $N (GPU-bound): identical output, the segment judged GPU-bound and left eager" {
    unset AUTOGRAPH_CUPTI AUTOGRAPH_GPU_BOUND
    run_pair "$OUT" "$BIN/launch_bound" --n "$N" --iters 30
    same_output "$OUT"
    echo "# segments timed $(stat "$OUT/stats.json" replay.segments_timed), GPU-bound" \
         "$(stat "$OUT/stats.json" replay.segments_gpu_bound), kernel_us_mean $(stat "$OUT/stats.json" cupti.kernel_us_mean)," \
         "replayed $(stat "$OUT/stats.json" replay.launches_replayed)" >&3
    [ "$(stat "$OUT/stats.json" replay.segments_timed)" -ge 1 ]
    [ "$(stat "$OUT/stats.json" replay.segments_gpu_bound)" -ge 1 ]
    summary "$OUT" gpu_bound
}

@test "launch_bound --n $N, AUTOGRAPH_GPU_BOUND=0: identical output, graphed; loop times logged" {
    AUTOGRAPH_GPU_BOUND=0 run_pair "$OUT/forced" "$BIN/launch_bound" --n "$N" --iters 30
    same_output "$OUT/forced"
    [ "$(stat "$OUT/forced/stats.json" replay.launches_replayed)" -gt 0 ]
    local p=() s=() f=()
    for i in 1 2 3; do
        "$BIN/launch_bound" --n "$N" --iters 30 >/dev/null 2>"$OUT/p.err"
        p+=("$(loop_ms "$OUT/p.err")")
        LD_PRELOAD="$SHIM" "$BIN/launch_bound" --n "$N" --iters 30 >/dev/null 2>"$OUT/s.err"
        s+=("$(loop_ms "$OUT/s.err")")
        LD_PRELOAD="$SHIM" AUTOGRAPH_GPU_BOUND=0 "$BIN/launch_bound" --n "$N" --iters 30 >/dev/null 2>"$OUT/f.err"
        f+=("$(loop_ms "$OUT/f.err")")
    done
    local line
    line=$(python3 -c 'import statistics as st, sys
a = [list(map(float, x.split())) for x in sys.argv[1:]]
p, s, f = (st.median(x) for x in a)
print(f"GPU-bound launch_bound: plain {p:.1f} ms, shim (left eager) {s:.1f} ms ({p/s:.3f}x), shim graphing it anyway {f:.1f} ms ({p/f:.3f}x)")' \
        "${p[*]}" "${s[*]}" "${f[*]}")
    echo "# $line" >&3
    [ -z "${AG_SUMMARY:-}" ] || echo "$line" >>"$AG_SUMMARY"
}
