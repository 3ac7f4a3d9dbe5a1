#!/usr/bin/env bats
# Modules and libraries unloaded while the program runs: the driver_api sample with a second segment each
# iteration whose kernel comes from another copy of its fatbin, unloaded and loaded again every 10
# iterations (--reload), as a module, as a library whose CUkernel is launched, and as a library whose
# kernel's CUfunction is. Output identical with and without the shim; the unload forgets only its own
# kernel (the shim's debug line says how many of its cached kernels went), and the first segment's graphs
# stay: no more graphs are built than in a run that loads the copy once, but for the second segment's.

load helpers

# reload_run KIND: the pair with reloads every 10 iterations (60: 5 reloads after the first load), and the
# shim alone with the copy loaded once.
reload_run() {
    local d=$BATS_TEST_TMPDIR/reload$1
    [ -x "$BIN/driver_api" ] || skip "$BIN/driver_api is not built (nvcc missing?)"
    AUTOGRAPH_LOG=debug run_pair "$d" "$BIN/driver_api" --iters 60 --reload 10 --reload-kind "$1"
    same_output "$d"
    LD_PRELOAD="$SHIM" AUTOGRAPH_STATS="$d/once.json" "$BIN/driver_api" --iters 60 --reload 1000 \
        --reload-kind "$1" >"$d/once.out" 2>"$d/once.err" || { cat "$d/once.err" >&2; return 1; }
    summary "$d" "driver_api_reload$1"
    local own built once released
    own=$(grep -cE 'unload of (module|library) 0x[0-9a-f]+: 1 of the [0-9]+ cached kernels go with it' "$d/shim.err")
    built=$(stat "$d/stats.json" replay.graphs_built)
    once=$(stat "$d/once.json" replay.graphs_built)
    released=$(stat "$d/stats.json" replay.graphs_released)
    echo "# reload kind $1: $own unloads took their one kernel; graphs built $built (loaded once: $once), released $released" >&3
    grep -E 'unload of' "$d/shim.err" | sed 's/^/# /' >&3
    [ "$own" -ge 5 ]
    # each reload rebuilds the second segment's graph (one, two at most), not the first segment's chunks
    [ "$built" -le $((once + 10)) ]
    [ "$released" -ge 5 ]
    replayed_at_least "$d" 60
}

@test "driver_api reloading a module every 10 iterations: identical output, only its kernel forgotten" {
    reload_run 0
}

@test "driver_api reloading a library every 10 iterations, its CUkernel launched: identical output, only its kernel forgotten" {
    reload_run 1
}

@test "driver_api reloading a library every 10 iterations, its kernel's CUfunction launched: identical output, only its kernel forgotten" {
    reload_run 2
}

@test "driver_api in two contexts reloading a library's CUfunction: identical output (every CUfunction counts as the library's)" {
    [ -x "$BIN/driver_api" ] || skip "$BIN/driver_api is not built (nvcc missing?)"
    local d=$BATS_TEST_TMPDIR/reload2ctx
    run_pair "$d" "$BIN/driver_api" --iters 40 --reload 10 --reload-kind 2 --contexts 2
    same_output "$d"
    summary "$d" driver_api_reload2ctx
}
