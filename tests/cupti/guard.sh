#!/usr/bin/env bash
# The CUPTI observer's coverage guard and its neighbours on the CPU: guard_prog on fakecuda, which reports
# to the stand-in libcupti, under the shim. guard_prog launches, in the middle of every iteration, one
# kernel no hook sees on the buffer the deferrable kernels work on, so only the guard keeps the results
# right. Cases:
#   default, guard   identical output; the unhooked cuLaunchKernel counted and named. guard also: an
#                    unhooked launch first seen while work is held back (replaying) still runs after it,
#                    and with no unhooked launch, replay on and nothing counted as unhooked
#   off              the output differs (early and late unhooked launches): the hazard the guard exists for
#   learn_detaches   no unhooked launch: CUPTI detached for replay, replay on, nothing unhooked
#   profiler         the program subscribes half-way and its session works; identical output
#   busy             a profiler holds CUPTI: one warning, state refused, identical output
#   bogus            AUTOGRAPH_CUPTI=bogus: one warning naming it, the default mode (learn)
#   scope_off        AUTOGRAPH_SCOPE=off: learn mode opens no CUPTI; guard mode still observes
#   never_repeats    a loop in which nothing repeats: learn mode warms CUPTI at cuInit (subscribed and
#                    unsubscribed before any other driver call) and never attaches (points named exactly,
#                    AUTOGRAPH_SEGMENT_KEY=exact); named without sizes (shape_free) the copy read after each
#                    sync repeats, but a segment of one operation is never graphed: nothing held back either (one
#                    window may open, ahead of the kernels following that point, each seen once before)
#   own_graph        the same loop launching a graph of its own every iteration: the warm CUPTI is
#                    finalized at the first one (it would slow each graph launch), before any window;
#                    a graph captured before the loop, never launched: finalized at the capture; and a
#                    repeating loop with its graph: no graph of the program's is launched under a window's
#                    kernel activity and then during a finalize (the H200 faulted there)
#   graph_thread     graph launches under the kernel activity ('always'), from a thread of the program too,
#                    are held off while CUPTI finalizes for a profiler; two engines: a chunk runs eagerly
#                    while the other engine's window is open; identical output
#   gpu_bound        kernels that keep the GPU busy far longer than the host takes to issue them: timed
#                    while learning, the segment stays on plain launches (AUTOGRAPH_GPU_BOUND=0 graphs it)
#   model_plan       the host works 800 us after the 4th of 15 launches of 20 us each: the learning window
#                    holds one whole iteration eager and times it operation by operation, and the modeled
#                    plan cuts a chunk right before that gap (so the GPU runs it meanwhile); identical
#                    output. On fakecuda's modeled device (FAKECUDA_DEVICE_NS: kernels run while the host
#                    goes on) the plan's trial against the halving plan keeps it: its syncs wait about 220
#                    us, the halving plan's 300. AUTOGRAPH_CHUNK_PLAN=halving keeps the halving plan, and replays (the
#                    timing is of a whole iteration, not the GPU-heavy part after CUPTI attached)
#   detach           each cuptiFinalize of the stand-in takes 20 ms (100 ms in the second part): in the background
#                    (the default) it runs on a thread of the shim's, no CUPTI call of the shim's comes
#                    while it runs, and the process ends after it; inline (AUTOGRAPH_CUPTI_DETACH=inline)
#                    the program waits for it; a program with graphs of its own: in the background too,
#                    none of its graph launches held off; identical output in each
#   thread_ends      threads CUPTI called back end while the shim finalizes CUPTI: each end waits for a
#                    running finalize, and a finalize for ends in progress (CUPTI's per-thread destructor
#                    rereads a global cuptiFinalize clears); identical output
#   attach_point     the chunk that ended where CUPTI attached was not watched: it is not held back until
#                    the guard saw it whole, so an unhooked launch first coming right after it is caught
#   ahead            one segment per iteration: the window opens ahead of the segment's second sighting
#                    (watched whole), so without the timing the next one is held back; an unhooked launch
#                    is still caught; with the timing the sighting it opened ahead of is left untimed
#                    (made slow on the host here), the next is timed and the loop found paced by the GPU
#   windows          new variants keep coming all run long (--drift 5: a new one every 5 iterations, 120
#                    in all): once trusted, each window doubles the wait for the next (to 8 times the first),
#                    so fewer windows open (1-7 here, against 21-30 when every window waited the same);
#                    identical output
#   windows_contexts two contexts learn the same loop (--contexts 2), each CUPTI subscription taking 40 ms
#                    (FAKE_CUPTI_SUBSCRIBE_US): the wait after a window counts for every context, so the
#                    second context opens none in the run (0.1 s; the wait is over 1.2 s), and replays as
#                    the trusted program's work; identical output
#   rests            (with AUTOGRAPH_CUPTI=off) a loop that never repeats: the engine rests, most
#                    segments and launches go straight to the driver (AUTOGRAPH_REST=0: none); one novel
#                    for 300 iterations, then repeating: replayed once it repeats, nearly as without
#                    resting; one that also stops syncing then: the rest ends by its operations; and
#                    40 syncing segments per iteration, each new in the first: it rests there at most,
#                    and replays about as much as without resting; identical output in each
# Usage: guard.sh BUILD_DIR CASE
set -euo pipefail
build=$1 case=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export AUTOGRAPH_CUPTI_LIB=$build/tests/cupti/libfake_cupti.so FAKE_CUPTI_REPORT=1
unset AUTOGRAPH_CUPTI FAKE_CUPTI_BUSY
prog=$build/bin/guard_prog
shim=$build/lib/libautograph.so

# plain NAME ARGS...: the program without the shim; its output in $tmp/NAME.plain
plain() {
    local name=$1
    shift
    "$prog" "$@" >"$tmp/$name.plain" 2>"$tmp/$name.plain.err" || { cat "$tmp/$name.plain.err"; exit 1; }
}

# shim NAME ENV... -- ARGS...: under the shim; output, stderr and statistics in $tmp/NAME.{out,err,json}
shim() {
    local name=$1
    shift
    local envs=()
    while [ "$1" != -- ]; do envs+=("$1"); shift; done
    shift
    local rc=0
    env ${envs[@]+"${envs[@]}"} LD_PRELOAD="$shim" AUTOGRAPH_STATS="$tmp/$name.json" "$prog" "$@" \
        >"$tmp/$name.out" 2>"$tmp/$name.err" || rc=$?
    cat "$tmp/$name.err"
    [ "$rc" = 0 ] || { echo "FAILED: $name: exit status $rc"; exit 1; }
}

same() { diff -u "$tmp/$1.plain" "$tmp/$2.out" && echo "ok: $2: output identical"; }

# expect NAME EXPR: the Python expression over s (the statistics) and c (their cupti object) holds
expect() {
    python3 - "$tmp/$1.json" "$2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
c = s.get("cupti") or {}
try:
    ok = eval(sys.argv[2], {"s": s, "c": c})
except Exception as e:
    ok = False
    print(f"{type(e).__name__}: {e}")
if not ok:
    sys.exit(f"FAILED: {sys.argv[2]}\n  cupti: {json.dumps(c)}\n  replay: {json.dumps(s.get('replay'))}")
print(f"ok: {sys.argv[2]}")
PY
}

# fake NAME WHAT: the stand-in libcupti's count WHAT (subscribes, set-ups, costly, finalizes, away,
# overlaps, during, unfinished, ended, faulted, traced: tests/cupti/fake_cupti.c) at exit
fake() { awk -v w="$2" '/^fake_cupti: subscribes/ { for (i = 2; i < NF; i++) if ($i == w) { print $(i + 1); exit } }' "$tmp/$1.err"; }

# expect_fake NAME EXPR: EXPR over the stand-in's counts (python names subscribes, setups, costly,
# finalizes, away, overlaps, during, unfinished, ended, faulted, traced) and the shim's statistics s and c holds
expect_fake() {
    local names="subscribes set-ups costly finalizes away overlaps during unfinished ended faulted traced" vals=() n
    for n in $names; do vals+=("$(fake "$1" "$n")"); done
    expect "$1" "$(printf '(lambda subscribes, setups, costly, finalizes, away, overlaps, during, unfinished, ended, faulted, traced: %s)' "$2")($(IFS=,; echo "${vals[*]}"))"
}

# warnings NAME [PATTERN]: the shim's warning lines (those matching PATTERN)
warnings() { grep '^autograph: warn:' "$tmp/$1.err" | grep -c -- "${2:-}" || true; }

unhooked='c.get("unhooked", 0) > 0 and "cuLaunchKernel" in c.get("unhooked_names", [])'
replayed='s["replay"]["launches_replayed"] > 0'

case $case in
default | guard)
    mode=learn envs=()
    [ "$case" = guard ] && mode=guard envs=(AUTOGRAPH_CUPTI=guard)
    plain p
    shim run ${envs[@]+"${envs[@]}"} --
    same p run
    expect run "c.get('mode') == '$mode' and c.get('state') != 'refused'"
    expect run "$unhooked"
    # A call past the hooks was caught: never trusted, whatever the windows guarded.
    expect run "s['replay']['guard_trusted'] is False"
    if [ "$case" = guard ]; then
        # Callbacks stay on while graphs replay: an unhooked launch that first comes once the loop
        # replays finds work held back, which must be issued before it ...
        plain late --unhooked-from 20
        shim late ${envs[@]+"${envs[@]}"} -- --unhooked-from 20
        same late late
        expect late "$unhooked"
        expect late "s['replay']['launches_deferred'] > 0"
        expect late "s['replay']['fallbacks']['unhooked_call'] >= 1"
        # ... and the shim's own calls never count as unhooked.
        plain q --no-unhooked
        shim clean ${envs[@]+"${envs[@]}"} -- --no-unhooked
        same q clean
        expect clean "c.get('unhooked') == 0 and c.get('unhooked_names') == []"
        expect clean "$replayed"
    fi
    ;;
off)
    plain p
    shim run AUTOGRAPH_CUPTI=off --
    expect run "c.get('mode', 'off') == 'off' and not c.get('unhooked')"
    # Without the guard the unhooked launch runs before the launches the shim still holds back.
    expect run "s['replay']['launches_deferred'] > 0"
    if cmp -s "$tmp/p.plain" "$tmp/run.out"; then
        echo "FAILED: without the guard the output is the plain run's: the unhooked launch overtook nothing"
        exit 1
    fi
    echo "ok: off: output differs from the plain run (the hazard the guard exists for)"
    # The same for an unhooked launch that first comes while the loop replays (guard's "late" run).
    plain late --unhooked-from 20
    shim late AUTOGRAPH_CUPTI=off -- --unhooked-from 20
    if cmp -s "$tmp/late.plain" "$tmp/late.out"; then
        echo "FAILED: without the guard, a late unhooked launch overtook nothing"
        exit 1
    fi
    echo "ok: off: a late unhooked launch changes the output too"
    ;;
learn_detaches)
    # (60 iterations: replay is first sampled after 64 graph launches, 16 in a row)
    plain p --no-unhooked --iters 60
    shim run AUTOGRAPH_CUPTI=learn -- --no-unhooked --iters 60
    same p run
    expect run "c.get('mode') == 'learn' and c.get('attaches', 0) >= 1 and c.get('detaches', 0) >= 1"
    expect run "$replayed"
    expect run "c.get('unhooked') == 0 and c.get('unhooked_names') == []"
    # CUPTI saw the application's launches while learning, and timed the kernels that ran meanwhile.
    expect run "c.get('launches', 0) > 0 and c.get('kernels_timed', 0) > 0"
    expect run "c.get('gpu_busy_learning') is not None and 0.0 <= c['gpu_busy_learning'] <= 1.0"
    # The kernels' records were tied to the engine's operations: the iteration was timed, host-bound.
    # (This failed in about one run in 300 under load until the segment table became set-associative:
    # the iteration's two segments, whose seeds hash function handles that move between runs, met in one
    # slot of the direct-mapped table and took it from each other, so the timed one had no entry left.)
    expect run "c.get('kernels_attributed', 0) > 0 and s['replay']['segments_timed'] >= 1"
    expect run "s['replay']['segments_gpu_bound'] == 0"
    # The first window guarded work and caught nothing: the program is trusted from then on.
    expect run "s['replay']['guard_trusted'] is True"
    # Replay was sampled with events around graph launches.
    expect run "s['replay']['replay_sampled']['windows'] >= 1 and 0.0 < s['replay']['replay_sampled']['graph_busy'] <= 1.0"
    # CUPTI was warmed at cuInit, before any traced driver call: the first window's subscription set
    # nothing up (on the GPU that is 11-20 ms inside the loop); each detach finalized, so each later
    # window set CUPTI up again.
    expect run "c.get('warmed') is True and c.get('finalizes') == c.get('detaches')"
    expect_fake run "setups == c['attaches'] and costly == c['attaches'] - 1 and finalizes == c['finalizes']"
    ;;
timing_off)
    # AUTOGRAPH_CUPTI_TIMING=off: the learning window watches the calls as before (the guard attaches,
    # catches nothing, detaches and finalizes; the program is trusted), but no kernel is timed and no
    # segment is held on plain launches to be timed, so replay starts no later than with timing on.
    plain p --no-unhooked
    shim on AUTOGRAPH_LOG=debug -- --no-unhooked >/dev/null
    shim run AUTOGRAPH_LOG=debug AUTOGRAPH_CUPTI_TIMING=off -- --no-unhooked >/dev/null
    same p on
    same p run
    expect on "c.get('kernels_timed', 0) > 0 and s['replay']['segments_timed'] >= 1"
    expect run "c.get('mode') == 'learn' and c.get('attaches', 0) >= 1 and c.get('finalizes') == c.get('detaches') >= 1"
    expect run "$replayed and s['replay']['guard_trusted'] is True"
    expect run "c.get('kernels_timed', 0) == 0 and c.get('kernels_attributed', 0) == 0"
    # no plan from a timing (replay's own waits may find a segment GPU-paced: under load, or ASan)
    expect run "s['replay']['segments_timed'] == 0 and s['replay']['segments_gpu_paced'] == s['replay']['segments_paced_by_wait']"
    # no segment was even taken for timing (the engine's side: it would have been held to be timed)
    timed_on=$(grep -c 'of [0-9]* operations timed: host' "$tmp/on.err" || true)
    timed_off=$(grep -c 'of [0-9]* operations timed: host' "$tmp/run.err" || true)
    [ "$timed_on" -ge 1 ] && [ "$timed_off" = 0 ] ||
        { echo "FAILED: segments taken for timing: $timed_on with timing on, $timed_off off (want >= 1 and 0)"; exit 1; }
    echo "ok: segments taken for timing: $timed_on with timing on, none off"
    # replay no later: compared under the halving plan, which neither run changes (a plan cut anew, from a
    # timing or from replay's waits, costs an eager sighting of its new chunks)
    shim onh AUTOGRAPH_CHUNK_PLAN=halving -- --no-unhooked
    shim runh AUTOGRAPH_CHUNK_PLAN=halving AUTOGRAPH_CUPTI_TIMING=off -- --no-unhooked
    same p onh
    same p runh
    expect onh "s['replay']['segments_timed'] >= 1"
    on_replayed=$(python3 -c "import json; print(json.load(open('$tmp/onh.json'))['replay']['launches_replayed'])")
    expect runh "s['replay']['launches_replayed'] >= $on_replayed"
    ;;
never_repeats)
    # No window comes: CUPTI, warmed at cuInit, is finalized when the engine first rests (a warm CUPTI
    # slowed never_repeat's launches by 3-4% on an H100 host), once, and never set up again.
    plain p --no-unhooked --never-repeat
    shim run AUTOGRAPH_SEGMENT_KEY=exact -- --no-unhooked --never-repeat
    same p run
    expect run "c.get('mode') == 'learn' and c.get('state') == 'detached' and c.get('attaches') == 0"
    expect run "c.get('warmed') is True and c.get('finalizes') == 1 and c.get('finalized_resting') is True"
    expect_fake run "subscribes == 1 and setups == 1 and costly == 0 and finalizes == 1"
    expect run "s['replay']['launches_deferred'] == 0 and s['replay']['rests'] >= 1"
    # Never resting (AUTOGRAPH_REST=0): it stays warm to the end, as before.
    shim norest AUTOGRAPH_SEGMENT_KEY=exact AUTOGRAPH_REST=0 -- --no-unhooked --never-repeat
    same p norest
    expect norest "c.get('state') == 'warm' and c.get('attaches') == 0 and c.get('finalizes') == 0"
    expect norest "c.get('finalized_resting') is False and s['replay']['rests'] == 0"
    expect_fake norest "subscribes == 1 and setups == 1 and costly == 0 and finalizes == 0"
    # Repeating from iteration 300 on: the rests finalized it, and the first window sets it up again (the
    # one set-up more that a program resting before its loop pays); the loop is learned and replayed.
    plain pn --no-unhooked --novel-until 300 --iters 1000 --no-copy
    shim novel AUTOGRAPH_SEGMENT_KEY=exact -- --no-unhooked --novel-until 300 --iters 1000 --no-copy
    same pn novel
    expect novel "c.get('finalized_resting') is True and c.get('attaches') >= 1 and c.get('finalizes') == c.get('detaches') + 1"
    expect novel "s['replay']['rests'] >= 1 and s['replay']['launches_replayed'] >= 0.5 * s['launches']"
    expect_fake novel "setups == c['attaches'] + 1 and finalizes == c['finalizes']"
    shim sf AUTOGRAPH_SEGMENT_KEY=shape_free -- --no-unhooked --never-repeat
    same p sf
    expect sf "s['replay']['launches_deferred'] == 0 and c.get('attaches') <= 1"
    ;;
detach)
    plain p --no-unhooked
    shim run FAKE_CUPTI_FINALIZE_US=20000 -- --no-unhooked
    same p run
    # (the program's driver calls during the finalize, `during`, are not checked: where the thread gets the
    # CPU only after the program's last call, there are none)
    expect_fake run "finalizes == c['finalizes'] >= 1 and away == finalizes and overlaps == 0 and unfinished == 0"
    expect run "c['finalize_background_ms'] >= 20.0 * c['finalizes'] and $replayed"
    shim inl FAKE_CUPTI_FINALIZE_US=20000 AUTOGRAPH_CUPTI_DETACH=inline -- --no-unhooked
    same p inl
    expect_fake inl "finalizes == c['finalizes'] >= 1 and away == 0 and during == 0 and overlaps == 0"
    expect inl "c['finalize_background_ms'] == 0 and $replayed"
    # A program with graphs of its own: finalized at its first graph launch, and at the window's close
    # after it, 100 ms each here, both in the background: the window closes before the program's graph
    # launch, so none ran under the kernel activity and none waits for a finalize (own_graph and
    # graph_thread below); nothing overlaps
    plain q --no-unhooked --never-repeat --own-graph
    shim og FAKE_CUPTI_FINALIZE_US=100000 -- --no-unhooked --never-repeat --own-graph
    same q og
    expect_fake og "finalizes == 2 and away == 2 and overlaps == 0 and unfinished == 0 and faulted == 0 and c['attaches'] >= 1"
    expect og "c['finalize_background_ms'] >= 200.0 and c['graph_launches_traced'] == 0 and c['finalizes_holding_graphs'] == 0"
    ;;
own_graph)
    plain p --no-unhooked --never-repeat --own-graph
    shim run -- --no-unhooked --never-repeat --own-graph
    same p run
    # Finalized at the first graph launch (iteration 0), before any window: one finalize more than
    # detaches, and every window (the copy-out at the end of each iteration repeats) set CUPTI up again.
    expect run "c.get('state') == 'detached' and c.get('finalizes') == c.get('detaches') + 1"
    expect_fake run "finalizes == c['finalizes'] and costly == c['attaches'] and setups == c['attaches'] + 1"
    # A graph captured before the loop and never launched: finalized at the capture, outside the loop.
    plain pc --no-unhooked --never-repeat --own-capture
    shim cap -- --no-unhooked --never-repeat --own-capture
    same pc cap
    expect cap "c.get('finalizes') == c.get('detaches') + 1 and c.get('warmed') is True"
    expect_fake cap "finalizes == c['finalizes'] and costly == c['attaches']"
    # A loop that repeats, its graph launched after its kernels in every iteration. On the H200 a graph of
    # the program's (torch.cuda.graph's whole step) that it launched while a learning window's kernel
    # activity was on, then launched again while cuptiFinalize ran on the shim's thread, faulted: the
    # stand-in counts such launches (faulted) and aborts at one (FAKE_CUPTI_STRICT); each finalize takes
    # 20 ms and each iteration over 0.5 ms (--host-us), so that later iterations' graph launches come
    # during it (19-37 did, before). A window closes before the program's graph launch (none launched
    # under the activity: traced), so the finalizes run in the background (away) beside the program's
    # graph launches, none held off; the loop still replays.
    plain pr --no-unhooked --own-graph --iters 60 --host-us 500
    shim rep FAKE_CUPTI_STRICT=1 FAKE_CUPTI_FINALIZE_US=20000 -- --no-unhooked --own-graph --iters 60 --host-us 500
    same pr rep
    expect_fake rep "faulted == 0 and traced == 0 and away == finalizes and overlaps == 0 and finalizes == c['finalizes'] >= 2"
    expect rep "c['attaches'] >= 1 and c['graph_launches_traced'] == 0 and c['finalizes_holding_graphs'] == 0 and $replayed"
    ;;
graph_thread)
    # Graph launches under the kernel activity are held off while CUPTI finalizes, whatever thread launches
    # them. AUTOGRAPH_CUPTI=always keeps the activity on from the start: every graph launch is traced, the
    # shim's and the program's, which a thread of the program launches every 100 us on a stream of its own
    # (--graph-thread). Half-way the program subscribes to CUPTI itself (--profiler): the shim detaches and
    # finalizes (20 ms) on its own thread while the graph thread goes on launching. Before, 115 of its
    # launches came during that finalize (faulted); now the finalize holds every graph launch off.
    plain pt --no-unhooked --iters 60 --profiler --graph-thread 100 --host-us 200
    shim thr AUTOGRAPH_CUPTI=always FAKE_CUPTI_STRICT=1 FAKE_CUPTI_FINALIZE_US=20000 -- \
        --no-unhooked --iters 60 --profiler --graph-thread 100 --host-us 200
    same pt thr
    expect_fake thr "faulted == 0 and traced >= 1 and finalizes == 1 and away == 1 and overlaps == 0"
    expect thr "c['released_to_profiler'] is True and c['graph_launches_traced'] >= 1 and c['finalizes_holding_graphs'] == 1"
    # Two contexts in learn mode: one engine's window opens while the other replays. A graph of the other
    # engine launched under that window's activity would make the finalize hold graph launches off (or,
    # before, fault at its next launch); the engine runs such a chunk eagerly instead (fallback other_window).
    # Whether a window meets the other engine's replay depends on timing here; difftest.twoctx_cupti
    # makes it certain.
    plain pc --no-unhooked --contexts 2 --iters 200
    shim ctx FAKE_CUPTI_STRICT=1 FAKE_CUPTI_FINALIZE_US=20000 -- --no-unhooked --contexts 2 --iters 200
    same pc ctx
    expect_fake ctx "faulted == 0 and traced == 0"
    expect ctx "c['graph_launches_traced'] == 0 and c['finalizes_holding_graphs'] == 0 and $replayed"
    ;;
attach_point)
    # CUPTI attaches where a chunk seen the second time ends (iteration 3's first 8 launches: none of them
    # watched). In iteration 4 that chunk must run on plain launches under the guard (only work the
    # guard saw whole may be held back), or its graph would close the window before the unhooked launch,
    # which first comes in iteration 4 right after it, is seen: the output would differ. (A segment
    # longer than the model plans, so that the window's first iteration is not held eager for timing.)
    plain p --after 2100 --unhooked-from 3 --iters 8
    shim run -- --after 2100 --unhooked-from 3 --iters 8
    same p run
    expect run "$unhooked"
    expect run "s['replay']['stopped_by_guard'] is True and s['replay']['guard_trusted'] is False"
    ;;
ahead)
    # One segment per iteration (--no-copy), as launch_bound's: once it has repeated back to back, the
    # window opens at the start of its next sighting (the third iteration) rather than after that
    # sighting's first chunk, so the sighting is watched whole and, without the timing, the fourth
    # iteration is held back. Eager: three iterations of 15 launches and the last chunk of the fourth
    # (cut anew once the length was known, graphed at its second sighting); 60 when the fourth ran eager
    # too, as with the window opened after the chunk.
    plain p --no-unhooked --no-copy --iters 12
    plain p100 --no-unhooked --no-copy --iters 100
    shim untimed AUTOGRAPH_CUPTI_TIMING=off -- --no-unhooked --no-copy --iters 12
    same p untimed
    expect untimed "c['attaches'] == 1 and $replayed"
    expect untimed "s['replay']['launches_eager_through_engine'] <= 3 * 15 + 7"
    # The sighting before the window ran plain, and is judged before CUPTI attaches: with launches of 5 us
    # (graphs clearly pay), one probe and that sighting settle the first series (two probes when the
    # attach made it one that cannot be compared).
    shim plainfirst FAKECUDA_LAUNCH_NS=5000 -- --no-unhooked --no-copy --iters 100
    same p100 plainfirst
    expect plainfirst "s['replay']['profit']['probes'] == 1 and s['replay']['profit']['left_eager'] == 0"
    # With the unhooked launch in every iteration: the window opened ahead sees it.
    plain u --no-copy --iters 12
    shim uh -- --no-copy --iters 12
    same u uh
    expect uh "$unhooked and s['replay']['stopped_by_guard'] is True"
    # With the timing: the iteration the window opened ahead of is not timed (CUPTI's first launches cost
    # the host several times a later one's on the H200); the next is held eager and timed. Here the
    # window's first iteration is made 100 us a launch slower on the host, and the loop (GPU 3 us a
    # kernel) must still be found paced by the GPU. (AUTOGRAPH_GPU_BOUND=0 and up to three runs, as in
    # warmup1_plan.)
    args=(--no-unhooked --no-copy --iters 30 --spin-us 3 --slow-iter 2:100)
    plain ps "${args[@]}"
    for attempt in 1 2 3; do
        shim run AUTOGRAPH_GPU_BOUND=0 AUTOGRAPH_LOG=debug -- "${args[@]}"
        same ps run
        expect run "c['attaches'] == 1 and s['replay']['segments_timed'] == 1 and $replayed" || exit 1
        expect run "s['replay']['segments_gpu_paced'] == 1 and s['replay']['launches_eager_through_engine'] <= 4 * 15 + 7" && break
        grep -E "segment of 15 operations timed|chunk plan for" "$tmp/run.err" | head -3
        [ $attempt = 3 ] && { echo "FAILED: ahead: not found paced by the GPU in 3 runs"; exit 1; }
    done
    ;;
windows)
    plain p --no-unhooked --drift 5 --iters 600
    shim run -- --no-unhooked --drift 5 --iters 600
    same p run
    expect run "s['replay']['guard_trusted'] is True and $replayed"
    expect run "1 <= c['attaches'] <= 12"
    python3 -c "import json, sys; print('windows opened:', json.load(open(sys.argv[1]))['cupti']['attaches'])" "$tmp/run.json"
    ;;
windows_contexts)
    plain p --no-unhooked --iters 300 --contexts 2
    shim run FAKE_CUPTI_SUBSCRIBE_US=40000 -- --no-unhooked --iters 300 --contexts 2
    same p run
    expect run "s['replay']['guard_trusted'] is True and c['attaches'] == 1"
    expect run "sorted(e['learning_windows'] for e in s['replay']['contexts']) == [0, 1]"
    expect run "len(s['replay']['contexts']) == 2 and all(e['launches_replayed'] > 0 for e in s['replay']['contexts'])"
    ;;
rests)
    export AUTOGRAPH_CUPTI=off
    plain p --no-unhooked --never-repeat --iters 1000
    shim run -- --no-unhooked --never-repeat --iters 1000
    same p run
    # 2000 segments: 1000 of 15 launches, 1000 of one copy to the host (too short to count either way)
    expect run "s['replay']['rests'] >= 50 and s['replay']['segments_rested'] >= 1200"
    expect run "s['replay']['launches_eager_through_engine'] <= s['launches'] // 4"
    shim never AUTOGRAPH_REST=0 -- --no-unhooked --never-repeat --iters 1000
    same p never
    expect never "s['replay']['rests'] == 0 and s['replay']['launches_eager_through_engine'] == s['launches']"
    # Repeating from iteration 300 on: the wake-ups see it, and 15 launches x 700 iterations are mostly
    # replayed (about 70% of all launches without resting)
    plain pn --no-unhooked --novel-until 300 --iters 1000 --no-copy
    shim novel AUTOGRAPH_SEGMENT_KEY=exact -- --no-unhooked --novel-until 300 --iters 1000 --no-copy
    same pn novel
    expect novel "s['replay']['rests'] >= 3 and s['replay']['launches_replayed'] >= 0.6 * s['launches']"
    # ... and syncing no more from then on: only the rest's operations end it
    plain ps --no-unhooked --novel-until 300 --sync-until 300 --iters 1000
    shim nosync -- --no-unhooked --novel-until 300 --sync-until 300 --iters 1000
    same ps nosync
    expect nosync "s['replay']['rests_ended_by_operations'] >= 1 and s['replay']['launches_replayed'] >= 0.45 * s['launches']"
    # ... and 40 distinct syncing segments per iteration (about 95% replayed without resting; the probes'
    # plain launches counted with the replayed ones: with the issuer on a machine of two CPUs, the replays'
    # times vary more and the probes ran 350-780 launches of 10500, against 350 inline). Launches of 5 us:
    # at the fake's default (2.4 us a launch as the engine timed it, a graph launch 6.6 us) a segment of 4
    # launches gained about 25% from its graph, and on a loaded machine (two busy loops beside the test on
    # two CPUs) the probes judged 4 segments better eager once in 12 runs (905 sightings left eager); on
    # the H200 host, beside the GPU tests of a ctest -j4 run, 3 segments once (448 sightings). Up to three
    # runs, each with identical output, one of which must hold.
    plain pm --no-unhooked --segments 40 --iters 60
    for attempt in 1 2 3; do
        shim many FAKECUDA_LAUNCH_NS=5000 -- --no-unhooked --segments 40 --iters 60
        same pm many
        expect many "s['replay']['segments_rested'] <= 40 and s['replay']['launches_replayed'] + s['replay']['profit']['launches_probed'] >= 0.9 * s['launches']" && break
        [ $attempt = 3 ] && { echo "FAILED: many: under 90% replayed or probed in 3 runs"; exit 1; }
    done
    ;;
gpu_bound)
    # Kernels of 1 ms: a segment's 15 take 15 ms on the fake GPU, so that the judgement (GPU time at
    # least 3x the host time) holds even if a loaded machine takes the host thread away for a few ms
    # (with 200 us kernels it failed once in a dozen runs next to other tests).
    plain p --no-unhooked --iters 20 --spin-us 1000
    shim run -- --no-unhooked --iters 20 --spin-us 1000
    same p run
    # (the timing arrives when CUPTI detaches, at the first graph launch: that one chunk is replayed)
    expect run "s['replay']['segments_gpu_bound'] >= 1 and s['replay']['launches_replayed'] <= 15"
    expect run "c.get('kernel_us_mean', 0) >= 1000"
    shim forced AUTOGRAPH_GPU_BOUND=0 -- --no-unhooked --iters 20 --spin-us 1000
    same p forced
    expect forced "s['replay']['segments_gpu_bound'] == 0 and s['replay']['launches_replayed'] > 0"
    ;;
warmup1_plan)
    # AUTOGRAPH_WARMUP=1 opens the learning window at a chunk's first sighting, in the first iteration:
    # the next one, the first whole under it, ran 2.4 ms against 1.4 on the H200 (the process's second
    # iteration, the window just opened) and its timing judged launch_bound's replay host-paced, a plan
    # 1.47x slower per iteration. Such a
    # window times two whole sightings and plans from the cheaper: here one of them (iteration 1, then
    # iteration 2) is made 100 us a launch slower on the host, and the loop (GPU 3 us a kernel, the host
    # 1-3 us a launch as replay takes it) must still be found paced by the GPU.
    # (AUTOGRAPH_GPU_BOUND=0: on a loaded machine the fake GPU's spinning kernels can stretch past the
    # GPU-bound line, which would leave the loop eager; and up to three runs each, every one with identical
    # output: a preemption inside the cheaper sighting can still make both look host-paced.)
    for slow in 1 2; do
        args=(--no-unhooked --no-copy --iters 30 --spin-us 3 --slow-iter "$slow:100")
        plain p$slow "${args[@]}"
        for attempt in 1 2 3; do
            shim run$slow AUTOGRAPH_WARMUP=1 AUTOGRAPH_GPU_BOUND=0 AUTOGRAPH_LOG=debug -- "${args[@]}"
            same p$slow run$slow
            expect run$slow "s['replay']['segments_planned'] == 1 and s['replay']['segments_gpu_paced'] == 1 and s['replay']['launches_replayed'] >= 20 * 15" && break
            [ $attempt = 3 ] && { echo "FAILED: warmup1_plan: slow iteration $slow: not found paced by the GPU in 3 runs"; exit 1; }
        done
    done
    ;;
thread_ends)
    # Threads that CUPTI called back keep ending all run long (--side-threads 0: each queries a stream of
    # a context of its own and ends), each end taking 30 ms in the stand-in CUPTI (its per-thread state's
    # destructor) and each finalize 50 ms: no end may come while a finalize runs, nor see one begin
    # (CUPTI's own destructor can crash then; tests/gpu/ctx_stress.sh found it on the H200). Three runs,
    # each with identical output and no such end; in one of them at least the exclusion had to act (a
    # thread's end waited for a finalize, or a finalize for thread ends).
    args=(--no-unhooked --side-threads 0 --iters 40 --host-us 1000)
    plain p "${args[@]}"
    acted=0
    for attempt in 1 2 3; do
        shim run$attempt FAKE_CUPTI_END_US=30000 FAKE_CUPTI_FINALIZE_US=50000 -- "${args[@]}"
        same p run$attempt
        expect_fake run$attempt "ended == 0 and finalizes == c['finalizes'] >= 1 and unfinished == 0"
        expect run$attempt "c['thread_ends_waited'] + c['finalizes_waited_for_ends'] >= 1" >/dev/null 2>&1 && acted=1
    done
    [ $acted = 1 ] || { echo "FAILED: thread_ends: the exclusion never acted in 3 runs (no end met a finalize)"; exit 1; }
    ;;
model_plan)
    args=(--no-unhooked --iters 30 --spin-us 20 --host-us 800)
    plain p "${args[@]}"
    # The plan follows one iteration's timings: in 3-4 of 40 runs on a two-CPU machine the iteration's
    # kernels were timed at about 420 us instead of 300 (the fake's 20 us spins stretched, probably by
    # preemption), and the plan cut elsewhere (ends 8 15).
    # Up to three runs, each with identical output; one of them must cut after the 4th launch. (Replay's
    # waits may later give it the ramp, where the fake's stretched spins make its syncs wait over half the
    # host's time three times in a row: once in a full ctest run under load. Their plan is not counted.)
    for attempt in 1 2 3; do
        shim run AUTOGRAPH_LOG=debug -- "${args[@]}"
        same p run
        expect run "s['replay']['segments_planned'] - s['replay']['segments_paced_by_wait'] == 1 and s['replay']['launches_replayed'] >= 150"
        grep -E "chunk plan for 15 operations: [0-9]+ chunks, ends 4 ([0-9]+ )*15 \(on trial against the default plan\)$" "$tmp/run.err" && break
        grep -E "segment of 15 operations timed|chunk plan for" "$tmp/run.err" | head -2
        [ $attempt = 3 ] && { echo "FAILED: model_plan: no modeled plan cut after the 4th launch in 3 runs"; exit 1; }
    done
    # The trial: 16 pairs of replayed sightings, one under each plan, 80 iterations on the modeled device
    # (the spinning kernels above run only when the host syncs: no plan can overlap them with the host's
    # work, and the trial's verdict there is a coin's toss). Kept, unless replay's waits gave the segment
    # the ramp first (which ends the trial); up to three runs, each with identical output.
    targs=(--no-unhooked --iters 80 --host-us 800)
    plain tp "${targs[@]}"
    for attempt in 1 2 3; do
        shim trial FAKECUDA_DEVICE_NS=20000 AUTOGRAPH_LOG=debug -- "${targs[@]}"
        same tp trial
        expect trial "s['replay']['segments_planned'] - s['replay']['segments_paced_by_wait'] == 1" || exit 1
        expect trial "s['replay']['plan_trials'] == {'begun': 1, 'kept': 1, 'dropped': 0, 'pairs': 16, 'models_refused': 0}" &&
            grep -E "tried against the default plan over 16 pairs .*: kept$" "$tmp/trial.err" && break
        [ $attempt = 3 ] && { echo "FAILED: model_plan: the trial did not keep the modeled plan in 3 runs"; exit 1; }
    done
    shim halving AUTOGRAPH_CHUNK_PLAN=halving AUTOGRAPH_LOG=debug -- "${args[@]}"
    same p halving
    expect halving "s['replay']['segments_planned'] == 0"
    # Only whole segments are timed: the part after CUPTI attached mid-iteration (after the host's gap:
    # all GPU work) once judged this host-bound loop GPU-bound and left it eager.
    expect halving "s['replay']['segments_gpu_bound'] == 0 and s['replay']['launches_replayed'] >= 150"
    if grep -q "modeled plan" "$tmp/halving.err"; then echo "FAILED: halving: a modeled plan"; exit 1; fi
    ;;
scope_off)
    # AUTOGRAPH_SCOPE=off is a pure pass-through: learn mode has nothing to guard and opens no CUPTI
    # (its callbacks would cost the program for the whole run); guard mode still observes.
    plain p --no-unhooked
    shim run AUTOGRAPH_SCOPE=off -- --no-unhooked
    same p run
    expect run "c.get('mode') == 'learn' and c.get('enabled') is False and c.get('attaches') == 0"
    expect run "c.get('warmed') is False"
    if grep -q '^fake_cupti:' "$tmp/run.err"; then echo "FAILED: scope_off: libcupti was opened"; exit 1; fi
    shim watched AUTOGRAPH_SCOPE=off AUTOGRAPH_CUPTI=guard -- --no-unhooked
    same p watched
    expect watched "c.get('state') == 'attached' and c.get('launches', 0) > 0"
    ;;
profiler)
    plain p --profiler
    shim run -- --profiler
    same p run
    grep -q 'guard_prog: profiler attached' "$tmp/run.err"
    expect run "c.get('released_to_profiler') is True and c.get('state') == 'released'"
    ;;
busy)
    plain p --no-unhooked
    shim run FAKE_CUPTI_BUSY=1 -- --no-unhooked
    same p run
    [ "$(warnings run)" = 1 ] && [ "$(warnings run CUPTI)" = 1 ] ||
        { echo "FAILED: expected one warning, about CUPTI; got $(warnings run)"; exit 1; }
    echo "ok: busy: one warning"
    expect run "c.get('state') == 'refused'"
    ;;
bogus)
    plain p
    shim run AUTOGRAPH_CUPTI=bogus --
    same p run
    [ "$(warnings run AUTOGRAPH_CUPTI)" = 1 ] ||
        { echo "FAILED: expected one warning naming AUTOGRAPH_CUPTI; got $(warnings run AUTOGRAPH_CUPTI)"; exit 1; }
    echo "ok: bogus: one warning"
    expect run "c.get('mode') == 'learn'"
    expect run "$unhooked"
    ;;
*)
    echo "guard.sh: unknown case $case" >&2
    exit 2
    ;;
esac
