#!/usr/bin/env bash
# The whole GPU suite in one call (the device time is scarce): build, every CTest including the GPU
# ones, the pass-through overhead on a PyTorch step, `autograph bench`, and a short table at the end.
# Usage on the GPU machine, from the repository root: OUT=$OUT/r bash tests/gpu/run.sh > $OUT/r.txt 2>&1
# (OUT: where the logs, the statistics files and progress.txt go; under the device tool's $OUT they come
# back even from a run cut off at the call's limit, but only 8 files come back from a call, fewer than
# the parts write: the table on stdout and progress.txt hold the results). The whole suite takes well
# over 10 minutes on an H200, more than one device call allows: split it with RUN_PARTS. Measured
# (whole calls): ctest 380-435 s, bats.python 290-350 s of it (407 s on a two-GPU host); the build with
# issuer (3 reps), never_repeat and bench 204 s; the build, ctest and issuer (2 reps) 520 s; the build,
# bats.python, gcn and issuer (1 rep) did not end in 480 s; gcn (2 reps) 92 s. By part (twenty-second
# session, one H200): build 12-13 s (warm), ctest with CTEST_EXCLUDE=bats.python 123 s, bats.python 367 s,
# torch 114 s (2 reps) or 75 s (1), issuer 89-92 s (2 reps), gcn 79 s (2 reps), never_repeat 31 s, match
# 17-19 s, bench 73 s (thirty-first session: ctest 485 s whole, never_repeat 34 s with 3 in-process A/B runs,
# amp 102-118 s with 2 reps). The `part times:` line at the end (and progress.txt) say what each part took.
# The Python Bats tests are a CTest each (bats.python.<id>: eager, mlp200, async, pinned, events, ab,
# amp, gpt2, gcn, cnn, cnnbf16, compile, owngraph, graphed, reduceoverhead, cupy, profiler), run one at a time: CTEST_REGEX='bats.python.(gcn|ab)' picks some,
# CTEST_EXCLUDE='bats.python' leaves them out. They no longer fit one device call together (forty-first
# session: 697 s in all; gcn 89 s, cnn 82, cnnbf16 75, reduceoverhead 60, compile 55, gpt2 39, profiler
# 34, pinned 32, graphed 31, events 30, ab 30, amp 29, mlp200 29, owngraph 28, eager 26, async 24, cupy
# 5; the forty-third session added checkpoint 27 s, attention 26, generate 38 and generatestatic 78;
# forty-sixth session: generatestatic 75, cnn 64, reduceoverhead 52, compile 45, generate 41, mlp200 34,
# gpt2 28, async 28, eager 28, profiler 28, attention 26, graphed 26, pinned 26, amp 25, owngraph 22,
# events 22, ab 20, cupy 5; the 11 bats.sample.* 6-10 s each, 172 s with four of those beside them):
# PY_HALF splits the suite into three device calls that together run every CTest (a call has 600 s):
#   first: the 11 samples and the Python tests the issue names (mlp200, ab), gpt2 and generatestatic, with
#          the parts match, bench, never_repeat and torch (TORCH_REPS 1 unless set): the one call that says
#          most where device time is short (390 s without torch on a slow H100 host, sixtieth session);
#   rest:  every CTest the other two leave out: the CPU tests (on a many-core host: it found a
#          threading test's failure that two cores hide), the GPU Bats tests but the samples, and the
#          lighter Python tests (357 of 358 in 600 s on that host before the long tests were given a
#          COST, so that ctest starts them first: 340 s of Python tests one at a time, and tsan.threads,
#          which builds a tree of its own, 398 s);
#   heavy: bats.python.(gcn, cnn, cnnbf16, reduceoverhead, compile, generate) (6 + profiler in 422 s
#          there).
# On an H200 host (sixty-first session), whole calls: first with TORCH_REPS=3 and parts ctest, torch,
# never_repeat, match 407 s (ctest 166, torch 159); heavy with part bench 403 s (ctest 308, bench 93); rest
# 347 s (ctest 345, tsan.threads 299 of it).
# RUN_PARTS given beside PY_HALF replaces its parts.
# RUN_PARTS (default "all") runs only some parts: ctest (CTEST_REGEX and CTEST_EXCLUDE restrict it), torch, amp,
# graphed (OWN_REPS, OLD_SRC), issuer, gcn, cnn (CNN_REPS), probes, plans (PLAN_REPS), own_graph, plan_stats, never_repeat, match, rules, multi (MULTI_REPS; 2 GPUs), gen (GEN_REPS, GEN_STEPS, GEN_LAUNCH), bench; the
# build always.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/autograph-gpu}
want() { [[ " ${RUN_PARTS:-all} " == *" all "* || " ${RUN_PARTS:-all} " == *" $1 "* ]]; }
py_heavy='bats[.]python[.](gcn|cnn|cnnbf16|reduceoverhead|compile|generate)$'
py_first='bats[.](sample[.].*|python[.](mlp200|ab|generatestatic|gpt2))$'
case ${PY_HALF:-} in
'') ;;
first)
    CTEST_REGEX=$py_first
    RUN_PARTS=${RUN_PARTS:-ctest match bench never_repeat torch}
    TORCH_REPS=${TORCH_REPS:-1}
    ;;
rest)
    CTEST_EXCLUDE="$py_first|$py_heavy"
    RUN_PARTS=${RUN_PARTS:-ctest}
    ;;
heavy)
    CTEST_REGEX=$py_heavy
    RUN_PARTS=${RUN_PARTS:-ctest}
    ;;
*) echo "run.sh: PY_HALF must be first, rest or heavy, not '$PY_HALF'" >&2; exit 2 ;;
esac
own_line=- lb_line=- nr_line=- demo_rc=- bench_rc=- lbc_line=- match_line=-
mkdir -p "$OUT"
BUILD=build-gpu
export AG_SUMMARY=$OUT/summary.txt
: >"$AG_SUMMARY"
# What each part took, and its result as soon as it has one, in $OUT/progress.txt: a run cut off at the
# device call's limit still leaves them there (so give OUT a folder under the device tool's own $OUT).
: >"$OUT/progress.txt"
t_last=$SECONDS part_times=""
mark() {
    local took=$((SECONDS - t_last))
    t_last=$SECONDS
    part_times+="$1 $took s, "
    echo "[$1: $took s] ${2:-}" >>"$OUT/progress.txt"
}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# Bats travels as a Debian package in .bats (the GPU image has none: on the CPU machine,
# `mkdir -p .bats && cd .bats && apt-get download bats`, and pass .bats in the device call's carry).
if ! command -v bats >/dev/null && ls .bats/*.deb >/dev/null 2>&1; then
    for f in .bats/*.deb; do dpkg -x "$f" /tmp/bats-root; done
    export PATH=/tmp/bats-root/usr/bin:$PATH
fi
# Without it every GPU Bats test skips and ctest still says 100%: said here and in the table's ctest line.
no_bats=""
command -v bats >/dev/null || no_bats="; NO BATS: every Bats test skipped (carry .bats with its .deb)"
[ -z "$no_bats" ] || echo "WARNING${no_bats#;}"
nvidia-smi -L | tee "$OUT/gpu.txt"

gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
{ cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build "$BUILD" -j16; } >"$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }
mark build

ctest_rc=skipped
if want ctest; then
    ctest --test-dir "$BUILD" --output-on-failure -j4 --timeout 300 ${CTEST_REGEX:+-R "$CTEST_REGEX"} \
        ${CTEST_EXCLUDE:+-E "$CTEST_EXCLUDE"} >"$OUT/ctest.log" 2>&1
    ctest_rc=$?
fi
grep -sE "tests passed|tests failed|\*\*\*Failed|Not Run|Skipped|\(Failed\)|\(SKIPPED\)" "$OUT/ctest.log" | tail -40
want ctest && mark ctest "$(grep -sE 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"

# The Python parts' runs are pinned to the same cores (TORCH_CPUS, default 2-5: between processes, where
# the threads land moved plain runs' median step by up to 25%), with one source of layout noise less.
lib=$PWD/$BUILD/lib/libautograph.so
export PYTHONHASHSEED=0
tpin=()
command -v taskset >/dev/null && tpin=(taskset -c "${TORCH_CPUS:-2-5}")

# The PyTorch MLP step: plain, shim passing through (AUTOGRAPH_SCOPE=off: the interposition overhead),
# shim replaying (the speed-up), replaying without probes (AUTOGRAPH_PROBE=off: what the probes
# cost), and the shim against itself paused within one process (torch_mlp.py --ab 10: free of the
# spread between processes); TORCH_REPS (3) interleaved runs each, pinned as above (and no ASLR: one
# more source of layout noise out). Ratios of medians of each run's median step (step_us), never a
# timed assertion.
torch_line="-"
T=$(mktemp -d) # the per-run outputs stay here: only a few files come back from $OUT
# loop_ms FILE [VAR=value...] PROGRAM [ARGS...]: runs a sample (with those settings) and appends the loop
# time it reports (its `loop_ms:` line) to FILE. SHIM is the LD_PRELOAD setting of the shim.
SHIM=LD_PRELOAD=$PWD/$BUILD/lib/libautograph.so
loop_ms() {
    local out=$1
    shift
    env "$@" 2>&1 >/dev/null | sed -n 's/^loop_ms: //p' >>"$out"
}
# and the same address layout in every process (no ASLR), where setarch can turn it off
pin=("${tpin[@]}")
setarch "$(uname -m)" -R true 2>/dev/null && pin=(setarch "$(uname -m)" -R "${pin[@]}")
if want torch && python3 -c "import torch" 2>/dev/null; then
    for i in $(seq "${TORCH_REPS:-3}"); do
        "${pin[@]}" python3 tests/python/torch_mlp.py --steps 200 >"$T/t_plain.out" 2>>"$T/t_plain.err"
        LD_PRELOAD=$lib AUTOGRAPH_SCOPE=off AUTOGRAPH_STATS=$T/t_off.json "${pin[@]}" python3 tests/python/torch_mlp.py --steps 200 \
            >"$T/t_off.out" 2>>"$T/t_off.err"
        LD_PRELOAD=$lib AUTOGRAPH_STATS=$T/t_all.json "${pin[@]}" python3 tests/python/torch_mlp.py --steps 200 \
            >"$T/t_all.out" 2>>"$T/t_all.err"
        LD_PRELOAD=$lib AUTOGRAPH_PROBE=off AUTOGRAPH_STATS=$T/t_noprobe.json "${pin[@]}" python3 \
            tests/python/torch_mlp.py --steps 200 >"$T/t_noprobe.out" 2>>"$T/t_noprobe.err"
        LD_PRELOAD=$lib AUTOGRAPH_STATS=$T/t_ab.json "${pin[@]}" python3 tests/python/torch_mlp.py --steps 200 --ab 10 >"$T/t_ab.out" \
            2>>"$T/t_ab.err"
    done
    same=no
    cmp -s "$T/t_plain.out" "$T/t_all.out" && cmp -s "$T/t_plain.out" "$T/t_off.out" &&
        cmp -s "$T/t_plain.out" "$T/t_noprobe.out" && cmp -s "$T/t_plain.out" "$T/t_ab.out" && same=yes
    torch_line=$(python3 - "$T" "$same" <<'PY'
import json, re, statistics, sys
sys.path.insert(0, "tests/gpu")
from ratios import ab_runs, ab_summary
d = sys.argv[1]
def med(k, key="step_us"): return statistics.median(float(m) for m in re.findall(key + r': ([0-9.]+)', open(f"{d}/t_{k}.err").read()))
p, o, a, h = med("plain"), med("off"), med("all"), med("noprobe")
s = json.load(open(f"{d}/t_all.json"))
r = s["replay"]
hr = json.load(open(f"{d}/t_noprobe.json"))["replay"]
# within the one process, measured: blocks of 10 steps with the shim and paused in turn (--ab), each
# run's medians
ab_text = open(f"{d}/t_ab.err").read()
ab = ab_runs(ab_text)
paused = statistics.median(y for _, y in ab) if ab else 0.0
def ab_part():
    return f" | in-process, blocks of 10 steps: {ab_summary(ab_text) or 'A/B -'}"
# What any tool that leaves Python running can gain at most here: the step's time inside the driver's
# launch calls (every 16th launch that went straight through timed: the A/B run's paused blocks, and the
# whole pass-through run) and in its memset, copy and event calls (every 16th timed, counted apart), as a share of the paused
# step. Calls per step from the pass-through run, driver time per call from the paused blocks.
def ceiling_part():
    try:
        off, abs_ = json.load(open(f"{d}/t_off.json")), json.load(open(f"{d}/t_ab.json"))
    except (OSError, ValueError):
        off, abs_ = {}, {}
    if not paused or not abs_.get("passthrough_launches_timed") or "launches" not in off:
        return " | in the driver's launch calls: -"
    launches, drv = off["launches"] / 200, abs_["passthrough_launch_ns_mean"]
    memops, mdrv = off.get("passthrough_memops_timed", 0) * 16 / 200, abs_.get("passthrough_memop_ns_mean", 0)
    us = (launches * drv + memops * mdrv) / 1e3
    return (f" | in the driver's launch calls: {launches:.0f} launches per step x {drv:.0f} ns (mean of the paused blocks; "
            f"median {abs_['passthrough_launch_ns_median']:.0f}; pass-through run: mean {off['passthrough_launch_ns_mean']:.0f}, "
            f"median {off['passthrough_launch_ns_median']:.0f}) = {launches * drv / 1e3:.0f} us, and its memset, copy and event "
            f"calls: {memops:.1f} per step x {mdrv:.0f} ns = {memops * mdrv / 1e3:.0f} us; together {100 * us / paused:.1f}% of "
            f"the paused step: at most {paused / (paused - us):.3f}x for a tool that removes all of it")
print(f"median step: plain {p:.0f} us | pass-through {o:.0f} us ({100*(o-p)/p:+.2f}%) | replaying {a:.0f} us "
      f"(speed-up {p/a:.3f}x; without probes {h:.0f} us, {p/h:.3f}x) | in loss.item(): plain {med('plain', 'sync_us'):.0f} us, "
      f"replaying {med('all', 'sync_us'):.0f} us, without probes {med('noprobe', 'sync_us'):.0f} us | steady loop speed-up "
      f"{med('plain', 'steady_ms') / med('all', 'steady_ms'):.3f}x, without probes {med('plain', 'steady_ms') / med('noprobe', 'steady_ms'):.3f}x"
      f" | probes {r['profit']} | stall flushes {r.get('stall_flushes', '-')} (0 expected: the step never waits 100 ms with work held)"
      f" | identical losses: {sys.argv[2]} | replayed "
      f"{100.0*r['launches_replayed']/max(1,s['launches']):.1f}% | {r['host_ns_per_match']:.0f} ns per matched launch (median {r.get('host_ns_per_match_median', 0):.0f}; {r['host_ns_per_match_to_lock']:.0f} until the lock is held; by phase "
      + ", ".join(f"{k} {v:.0f}" for k, v in r['host_ns_per_match_phases'].items()) + ") | per step: patch "
      f"{1e3*r['host_ms']['patch']/200:.0f} us ({r['nodes_patched']/200:.0f} nodes; in the driver: "
      + ", ".join(f"{k} {1e3*r['host_ms_patch_driver_by_kind'][k]/200:.0f} us for {r['nodes_patched_by_kind'][k]/200:.1f}"
                  for k in ("kernel", "memset", "copy")) + "), graph launches "
      f"{1e3*r['host_ms']['graph_launch']/200:.0f} us ({r['graph_launches']/200:.1f}; without probes "
      f"{hr['graph_launches']/200:.1f}) | segments planned {r['segments_planned']} of {r['segments_timed']} timed"
      f" (plans weighed with the graph launch cost assumed / measured: {r.get('plans_weighed', {}).get('launch_cost_assumed', '-')}"
      f" / {r.get('plans_weighed', {}).get('launch_cost_measured', '-')}; trials {r.get('plan_trials', '-')})"
      # within the one process, free of the spread between processes: the eager driver time of the launches
      # replayed (sampled in the same process) less the engine's matching and replay host time
      f" | host time saved, in-process estimate: {1e3*r['host_ms_saved_estimate']/200:.0f} us per step "
      f"({p/(p - 1e3*r['host_ms_saved_estimate']/200):.3f}x of the plain median step)"
      + ab_part() + ceiling_part())
PY
)
fi
want torch && mark torch "$torch_line"

# The PyTorch loop as users write it (torch_amp.py: fp16 autocast with GradScaler, accumulation, bucketed
# micro-batch sizes, clipping, LR schedule, evaluation): AMP_REPS (3) interleaved runs of plain, the shim,
# and the shim against itself paused in the one process (--ab 10), pinned as above; and, where AMP_ALT
# (default AUTOGRAPH_RENAME=off: what renaming a new point after a known one gains; empty: none) gives other
# settings, the shim with them. Ratios of medians.
amp_line="-"
if want amp && python3 -c "import torch" 2>/dev/null; then
    for i in $(seq "${AMP_REPS:-3}"); do
        "${pin[@]}" python3 tests/python/torch_amp.py --steps 160 >"$T/a_plain.out" 2>>"$T/a_plain.err"
        LD_PRELOAD=$lib AUTOGRAPH_STATS=$T/a_all.json "${pin[@]}" python3 tests/python/torch_amp.py --steps 160 \
            >"$T/a_all.out" 2>>"$T/a_all.err"
        LD_PRELOAD=$lib "${pin[@]}" python3 tests/python/torch_amp.py --steps 160 --ab 10 >"$T/a_ab.out" 2>>"$T/a_ab.err"
        alt=(${AMP_ALT-AUTOGRAPH_RENAME=off})
        [ ${#alt[@]} -gt 0 ] && env LD_PRELOAD=$lib "${alt[@]}" AUTOGRAPH_STATS=$T/a_alt.json "${pin[@]}" \
            python3 tests/python/torch_amp.py --steps 160 >"$T/a_alt.out" 2>>"$T/a_alt.err"
    done
    same=no
    cmp -s "$T/a_plain.out" "$T/a_all.out" && cmp -s "$T/a_plain.out" "$T/a_ab.out" && same=yes
    [ -e "$T/a_alt.out" ] && ! cmp -s "$T/a_plain.out" "$T/a_alt.out" && same=no
    [ -e "$T/a_alt.out" ] && echo "${AMP_ALT-AUTOGRAPH_RENAME=off}" >"$T/a_alt.settings"
    amp_line=$(python3 tests/gpu/ratios.py amp "$T" 160 "$same")
fi
want amp && mark amp "$amp_line"

# Programs that make CUDA graphs of their own: the MLP whose forward and backward the program graphs
# (torch_mlp.py --graphed-model, make_graphed_callables: the loss, its backward and AdamW eager between its
# graphs) plain, under the shim and against the shim paused in the one process (--ab 10); and the step the
# program captures whole (--graph) plain and under the shim (nothing left for the shim: what passing costs).
# OWN_REPS (2) interleaved runs each, pinned as above. Ratios of medians, never asserted. OLD_SRC: the source
# tree of an earlier version (a git archive, carried to the GPU machine under an ignored path): its library
# is built and run beside this one on the graphed model, the same way, interleaved (what a change gained).
graphed_line="-"
old_lib=
if want graphed && [ -n "${OLD_SRC:-}" ] && [ -f "$OLD_SRC/CMakeLists.txt" ]; then
    . tests/gpu/shim_built.sh # lib_built (this tree's library is built already)
    old_lib=$(lib_built "$OLD_SRC" "$OLD_SRC-build" "$OUT/build_old.log") || old_lib=
fi
if want graphed && python3 -c "import torch" 2>/dev/null; then
    for i in $(seq "${OWN_REPS:-2}"); do
        "${pin[@]}" python3 tests/python/torch_mlp.py --steps 200 --graphed-model >"$T/g_plain.out" 2>>"$T/g_plain.err"
        LD_PRELOAD=$lib AUTOGRAPH_STATS=$T/g_all.json "${pin[@]}" python3 tests/python/torch_mlp.py --steps 200 \
            --graphed-model >"$T/g_all.out" 2>>"$T/g_all.err"
        LD_PRELOAD=$lib "${pin[@]}" python3 tests/python/torch_mlp.py --steps 200 --graphed-model --ab 10 \
            >"$T/g_ab.out" 2>>"$T/g_ab.err"
        if [ -n "$old_lib" ]; then
            LD_PRELOAD=$old_lib AUTOGRAPH_STATS=$T/g_old.json "${pin[@]}" python3 tests/python/torch_mlp.py --steps 200 \
                --graphed-model >"$T/g_old.out" 2>>"$T/g_old.err"
            LD_PRELOAD=$old_lib "${pin[@]}" python3 tests/python/torch_mlp.py --steps 200 --graphed-model --ab 10 \
                >"$T/g_abold.out" 2>>"$T/g_abold.err"
        fi
        "${pin[@]}" python3 tests/python/torch_mlp.py --steps 200 --graph >"$T/w_plain.out" 2>>"$T/w_plain.err"
        LD_PRELOAD=$lib "${pin[@]}" python3 tests/python/torch_mlp.py --steps 200 --graph >"$T/w_all.out" 2>>"$T/w_all.err"
    done
    same=no
    cmp -s "$T/g_plain.out" "$T/g_all.out" && cmp -s "$T/g_plain.out" "$T/g_ab.out" &&
        cmp -s "$T/w_plain.out" "$T/w_all.out" && same=yes
    [ -n "$old_lib" ] && ! { cmp -s "$T/g_plain.out" "$T/g_old.out" && cmp -s "$T/g_plain.out" "$T/g_abold.out"; } && same=no
    # What breaks the match (AUTOGRAPH_LOG=trace), 100 steps: $OUT/graphed_mismatch.txt
    bash tests/gpu/mismatch_diag.sh 100 --graphed-model >"$OUT/graphed_mismatch.txt" 2>&1
    graphed_line=$(python3 - "$T" "$same" <<'PY'
import json, os, re, statistics, sys
sys.path.insert(0, "tests/gpu")
from ratios import ab_summary, replayed
d = sys.argv[1]
def med(k): return statistics.median(float(m) for m in re.findall(r"step_us: ([0-9.]+)", open(f"{d}/{k}.err").read()))
s = json.load(open(f"{d}/g_all.json"))
p, a, wp, wa = med("g_plain"), med("g_all"), med("w_plain"), med("w_all")
def engine(s, steps=200):
    r = s["replay"]
    dead = r.get("event_destroys_in_segment", {})
    return (f"replayed {replayed(s)} of {s['launches'] / steps:.1f} launches a step, {r['graphs_built']} graphs, "
            f"{r['host_ns_per_match']:.0f} ns per matched launch, mismatches {r['fallbacks']['mismatch'] / steps:.1f} a "
            f"step ({r.get('chunk_starts_unmatched', 0) / steps:.1f} at a chunk's start), destroys kept "
            f"{dead.get('after_held_work', '-')}")
old = ""
if os.path.exists(f"{d}/g_old.json"):
    o = med("g_old")
    old = (f" | before (OLD_SRC): shim {o:.0f} us ({p / o:.3f}x), in-process "
           f"{ab_summary(open(f'{d}/g_abold.err').read()) or 'A/B -'}, {engine(json.load(open(f'{d}/g_old.json')))}")
print(f"graphed model: median step plain {p:.0f} us, shim {a:.0f} us ({p / a:.3f}x) | in-process "
      f"{ab_summary(open(f'{d}/g_ab.err').read()) or 'A/B -'} | {engine(s)} | whole step captured by "
      f"the program: plain {wp:.0f} us, shim {wa:.0f} us ({wa / wp:.3f}x of plain){old} | identical: {sys.argv[2]}")
PY
)
fi
want graphed && mark graphed "$graphed_line"

# The issuer (AUTOGRAPH_ISSUER): graphs patched and launched by the shim's thread against the program's
# own, ISSUER_REPS (3) interleaved runs each: the PyTorch step's in-process A/B (shim against paused, blocks
# of 10 steps) and launch_bound against its hand graph (loop ms); and a third mode, 'poll', the thread
# polling ISSUER_POLL_US (3000) for the next chunk instead of the default's 20 us (AUTOGRAPH_ISSUER_SPIN_US:
# it paid on one host and cost on two, so each run adds its data). Ratios of medians, never asserted.
issuer_line="-"
if want issuer && python3 -c "import torch" 2>/dev/null; then
    for i in $(seq "${ISSUER_REPS:-3}"); do
        for m in thread inline poll; do
            mode=(AUTOGRAPH_ISSUER=$m)
            [ $m = poll ] && mode=(AUTOGRAPH_ISSUER=thread AUTOGRAPH_ISSUER_SPIN_US="${ISSUER_POLL_US:-3000}")
            env LD_PRELOAD=$lib "${mode[@]}" AUTOGRAPH_STATS=$T/i_$m.json "${tpin[@]}" python3 tests/python/torch_mlp.py \
                --steps 200 --ab 10 >"$T/i_$m.out" 2>>"$T/i_$m.err"
            cp "$T/i_$m.json" "$OUT/issuer_$m.json" 2>/dev/null
            loop_ms "$T/il_$m" "$SHIM" "${mode[@]}" AUTOGRAPH_STATS="$T/il_$m.json" "$BUILD/bin/launch_bound"
        done
        loop_ms "$T/il_graph" "$BUILD/bin/launch_bound" --graph
        loop_ms "$T/il_eager" "$BUILD/bin/launch_bound"
    done
    same=no
    cmp -s "$T/i_thread.out" "$T/i_inline.out" && cmp -s "$T/i_thread.out" "$T/i_poll.out" && same=yes
    issuer_line=$(python3 - "$T" "$same" <<'PY'
import json, statistics, sys
sys.path.insert(0, "tests/gpu")
from ratios import ab_summary
d = sys.argv[1]
out = []
for m in ("thread", "inline", "poll"):
    r = json.load(open(f"{d}/i_{m}.json"))["replay"]
    iss = r.get("issuer", {})
    out.append(f"{m}: {ab_summary(open(f'{d}/i_{m}.err').read()) or 'no A/B line'}, "
               f"{r['host_ns_per_match']:.0f} ns per matched launch (median {r.get('host_ns_per_match_median', 0):.0f}), "
               f"per step on any thread: patch {1e3*r['host_ms']['patch']/200:.0f} us, graph launches {1e3*r['host_ms']['graph_launch']/200:.0f} us "
               f"({r['graph_launches']/200:.1f}), issuer {iss}")
def lm(k):
    try:
        v = [float(x) for x in open(f"{d}/il_{k}").read().split()]
        return statistics.median(v) if v else 0
    except OSError:
        return 0
g = lm("graph")
lb = ", ".join(f"{k} {lm(k):.1f} ms" + (f" ({lm(k) / g:.3f}x of the hand graph)" if g and k != "graph" else "") for k in ("eager", "thread", "inline", "poll", "graph"))
try:
    lr = json.load(open(f"{d}/il_thread.json"))["replay"]
    lb += f" (thread mode: issuer {lr['issuer']}, segments the GPU paces {lr['segments_gpu_paced']})"
except (OSError, ValueError, KeyError):
    pass
print(" | ".join(out) + f" | identical losses: {sys.argv[2]} | launch_bound: {lb}")
PY
)
fi
want issuer && mark issuer "$issuer_line"

# ab_line TAG REPS SCRIPT [ARGS...]: a workload's in-process A/B (--ab 10) after a plain run for its losses,
# REPS runs of 200 steps, pinned as the PyTorch part is; prints the A/B, the replay's statistics and whether
# the losses were identical. The GCN (tests/python/gcn_step.py: scatters, a mid-step sync) and the CNN
# (tests/python/cnn_step.py: cuDNN's convolutions and batch norm; again in NHWC under bf16 autocast).
ab_line() {
    local tag=$1 reps=$2 same=no
    shift 2
    : >"$T/$tag.ab.err"
    for i in $(seq "$reps"); do
        "${tpin[@]}" python3 "$@" --steps 200 >"$T/$tag.plain.out" 2>"$T/$tag.plain.err"
        LD_PRELOAD=$lib AUTOGRAPH_STATS=$T/$tag.ab.json "${tpin[@]}" python3 "$@" --steps 200 --ab 10 \
            >"$T/$tag.ab.out" 2>>"$T/$tag.ab.err"
    done
    cp "$T/$tag.ab.json" "$OUT/${tag}_ab.json" 2>/dev/null
    cmp -s "$T/$tag.plain.out" "$T/$tag.ab.out" && same=yes
    python3 - "$T" "$tag" "$same" <<'PY'
import json, sys
sys.path.insert(0, "tests/gpu")
from ratios import ab_summary
d, tag, same = sys.argv[1:]
ab = ab_summary(open(f"{d}/{tag}.ab.err").read())
try:
    s = json.load(open(f"{d}/{tag}.ab.json"))
except (OSError, ValueError):
    s = None
if ab and s:
    r = s["replay"]
    print(f"{ab}, {100.0 * r['launches_replayed'] / max(1, s['launches']):.1f}% replayed (half the steps paused), "
          f"{s['launches'] / 200:.0f} launches and {r['graph_launches'] / 200:.1f} graph launches per step "
          f"({r.get('graphs_mixing_legacy', '-')} graphs mix the legacy stream with others), "
          f"{r['host_ns_per_match']:.0f} ns per matched launch (median {r.get('host_ns_per_match_median', 0):.0f}), "
          f"fallbacks {dict((k, v) for k, v in r['fallbacks'].items() if v)} | identical losses: {same}")
else:
    print(f"no A/B line | identical losses: {same}")
PY
}
gcn_line="-"
if want gcn && python3 -c "import torch_geometric" 2>/dev/null; then
    gcn_line=$(ab_line gcn "${GCN_REPS:-3}" tests/python/gcn_step.py)
fi
want gcn && mark gcn "$gcn_line"
cnn_line="-"
if want cnn && python3 -c "import torch" 2>/dev/null; then
    cnn_line="NCHW fp32: $(ab_line cnn "${CNN_REPS:-3}" tests/python/cnn_step.py) || NHWC bf16: $(ab_line \
        cnn_nhwc "${CNN_REPS:-3}" tests/python/cnn_step.py --channels-last --bf16)"
fi
want cnn && mark cnn "$cnn_line"

# Probes (AUTOGRAPH_PROBE): plain, the default, and the shim without probes, loop ms, medians of 3
# interleaved runs each, with the default runs' probe counts (probes, verdicts against the graphs,
# judgements for them, sightings run plain by a verdict) and replayed share.
probe_line=""
want probes && for smp in memops launch_bound two_streams mlp_train jacobi nvtx_ranges curand_host shape_change; do
    : >"$T/qe"; : >"$T/qd"; : >"$T/qo"
    for i in 1 2 3; do
        loop_ms "$T/qe" "$BUILD/bin/$smp"
        loop_ms "$T/qd" "$SHIM" AUTOGRAPH_STATS="$T/qd.json" "$BUILD/bin/$smp"
        loop_ms "$T/qo" "$SHIM" AUTOGRAPH_PROBE=off "$BUILD/bin/$smp"
    done
    probe_line+=$(python3 - "$T" "$smp" <<'PY'
import json, statistics, sys
d, smp = sys.argv[1], sys.argv[2]
e, q, o = ([float(x) for x in open(f"{d}/{k}")] for k in ("qe", "qd", "qo"))
s = json.load(open(f"{d}/qd.json")); r = s["replay"]
if e and q and o:
    me, mq, mo = statistics.median(e), statistics.median(q), statistics.median(o)
    print(f"  {smp}: plain {me:.1f} ms | default {mq:.1f} ms ({me / mq:.3f}x of plain) | probes off {mo:.1f} ms "
          f"({me / mo:.3f}x; default {mo / mq:.3f}x of it) | probes {r['profit']} | replayed "
          f"{100.0 * r['launches_replayed'] / max(1, s['launches']):.1f}%")
PY
)$'\n'
done
want probes && mark probes "$probe_line"

# The modeled chunk plan against the halving one on the samples where they differ most: loop ms, medians
# of PLAN_REPS (3) interleaved runs each, how many segments got a modeled plan, and how many of those the
# ramp with no tail (the GPU sets their pace).
plan_line=""
want plans && for smp in launch_bound driver_api memops two_streams nvtx_ranges mlp_train jacobi curand_host; do
    : >"$T/pm"; : >"$T/ph"
    for i in $(seq "${PLAN_REPS:-3}"); do
        loop_ms "$T/pm" "$SHIM" AUTOGRAPH_STATS="$T/pm.json" "$BUILD/bin/$smp"
        loop_ms "$T/ph" "$SHIM" AUTOGRAPH_CHUNK_PLAN=halving "$BUILD/bin/$smp"
    done
    plan_line+=$(python3 - "$T" "$smp" <<'PY'
import json, statistics, sys
d, smp = sys.argv[1], sys.argv[2]
m = [float(x) for x in open(f"{d}/pm")]; h = [float(x) for x in open(f"{d}/ph")]
r = json.load(open(f"{d}/pm.json"))["replay"]
if m and h:
    print(f"  {smp}: modeled {statistics.median(m):.1f} ms, halving {statistics.median(h):.1f} ms "
          f"({statistics.median(h) / statistics.median(m):.3f}x); planned {r['segments_planned']} of "
          f"{r['segments_timed']} timed ({r.get('segments_gpu_paced', 0)} paced by the GPU); graph launches "
          f"{r['graph_launches']}")
PY
)$'\n'
done

# launch_bound against its hand-written graph under other chunkings (loop ms, medians of PLAN_REPS (3)
# interleaved runs): the default (the ramp of 8, doubling, with no tail once CUPTI timed the segment as
# paced by the GPU: 6 graphs per iteration), the halving plan (AUTOGRAPH_CHUNK_PLAN=halving: the ramp,
# then halving toward the sync, about 10 graphs per iteration), one graph per iteration
# (AUTOGRAPH_CHUNK_FIRST=0 AUTOGRAPH_CHUNK=256: the GPU waits until all 200 launches are matched), and
# CUPTI off (no timing: the halving plan, and no learning window). Where its gap to the hand graph comes from.
lbc_line=-
if want plans; then
    for k in graph def half one off; do : >"$T/lbc_$k"; done
    for i in $(seq "${PLAN_REPS:-3}"); do
        loop_ms "$T/lbc_graph" "$BUILD/bin/launch_bound" --graph
        loop_ms "$T/lbc_def" "$SHIM" "$BUILD/bin/launch_bound"
        loop_ms "$T/lbc_half" "$SHIM" AUTOGRAPH_CHUNK_PLAN=halving "$BUILD/bin/launch_bound"
        loop_ms "$T/lbc_one" "$SHIM" AUTOGRAPH_CHUNK_FIRST=0 AUTOGRAPH_CHUNK=256 "$BUILD/bin/launch_bound"
        loop_ms "$T/lbc_off" "$SHIM" AUTOGRAPH_CUPTI=off "$BUILD/bin/launch_bound"
    done
    lbc_line=$(python3 - "$T" <<'PY'
import statistics, sys
d = sys.argv[1]
v = {k: [float(x) for x in open(f"{d}/lbc_{k}")] for k in ("graph", "def", "half", "one", "off")}
if all(v.values()):
    g = statistics.median(v["graph"])
    print(f"hand graph {g:.1f} ms | " + " | ".join(f"{n} {statistics.median(v[k]):.1f} ms ({statistics.median(v[k]) / g:.3f}x)"
          for k, n in (("def", "default"), ("half", "halving plan"), ("one", "one graph per iteration"),
                       ("off", "CUPTI off"))))
else:
    print("no loop_ms")
PY
)
fi
want plans && mark plans "$plan_line | $lbc_line"

# A program that launches graphs of its own (launch_bound --graph): what the shim costs it, medians of 5
# interleaved runs (CUPTI's idle subscriber would slow each of its graph launches).
if want own_graph; then
: >"$T/own_plain"; : >"$T/own_shim"
for i in 1 2 3 4 5; do
    loop_ms "$T/own_plain" "$BUILD/bin/launch_bound" --graph
    loop_ms "$T/own_shim" "$SHIM" "$BUILD/bin/launch_bound" --graph
done
own_line=$(python3 - "$T" <<'PY'
import statistics, sys
d = sys.argv[1]
v = {k: [float(x) for x in open(f"{d}/own_{k}")] for k in ("plain", "shim")}
if all(v.values()):
    p, s = statistics.median(v["plain"]), statistics.median(v["shim"])
    print(f"plain {p:.1f} ms | under the shim {s:.1f} ms ({s / p:.3f}x)")
else:
    print("no loop_ms")
PY
)
fi
want own_graph && mark own_graph "$own_line"

# What a CUPTI learning window costs, step by step (the observer's debug lines), on launch_bound, and
# its chunk plan (graph launches per iteration).
if want plan_stats; then
LD_PRELOAD=$PWD/$BUILD/lib/libautograph.so AUTOGRAPH_LOG=debug AUTOGRAPH_STATS=$T/lb.json "$BUILD/bin/launch_bound" \
    2>&1 >/dev/null | grep -E "libcupti took|CUPTI (subscribe|attached|watching|detached|warmed|finalized)" \
    >"$OUT/cupti_costs.txt"
lb_line=$(python3 - "$T/lb.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1])); r = s["replay"]; c = s["cupti"]
iters = 600  # launch_bound's default iteration count (200 kernels each)
print(f"{r['graph_launches'] / iters:.2f} graph launches per iteration, {r['nodes_patched'] / iters:.1f} nodes patched; "
      f"segments timed {r['segments_timed']}; CUPTI warm at cuInit "
      f"{c.get('warm_ms', '-')} ms, set-up in the loop {c.get('setup_ms', '-')} ms")
PY
)
fi
want plan_stats && mark plan_stats "$lb_line"

# never_repeat (nothing can be replayed; the issue's bound is 3% slower at most): 9 rounds, each one run
# of plain, pass-through (AUTOGRAPH_SCOPE=off), the default and AUTOGRAPH_CUPTI=off, in an order rotated
# every round (in the fixed order plain, pass-through, default, CUPTI off, on one H100 host in the
# sixtieth session, pass-through, which does a part of what the CUPTI=off run does, came out 1.119x and
# 1.149x of plain where CUPTI=off came out 0.987x and 0.975x: a fixed order ties a run's place in the
# round, and whatever drifts with it, to its mode); medians of the loop times, medians of each
# round's ratios to its plain run, every run's time in the order run; and from the statistics the
# engine's own time per launch against the driver's (less noisy than the loop times).
if want never_repeat; then
: >"$T/nr_runs"
nr_modes=(plain off shim coff)
for i in 1 2 3 4 5 6 7 8 9; do
    for k in 0 1 2 3; do
        m=${nr_modes[$(((i - 1 + k) % 4))]}
        case $m in
        plain) nr_cmd=() ;;
        off) nr_cmd=("$SHIM" AUTOGRAPH_SCOPE=off) ;;
        shim) nr_cmd=("$SHIM" AUTOGRAPH_STATS="$T/nr$i.json") ;;
        coff) nr_cmd=("$SHIM" AUTOGRAPH_CUPTI=off) ;;
        esac
        : >"$T/nr_one"
        loop_ms "$T/nr_one" "${nr_cmd[@]}" "$BUILD/bin/never_repeat"
        echo "$i $m $(head -1 "$T/nr_one")" >>"$T/nr_runs"
    done
done
# and the shim against itself paused inside one process (kernels/common.h AG_AB): blocks of 10 iterations
# each way in turn, free of the spread between processes that the loop times above carry; medians of the
# time per kernel (the iterations' kernel counts differ), a seed of its own each run
: >"$T/nr_ab"
for i in 1 2 3 4 5; do
    env "$SHIM" AG_AB=10 "$BUILD/bin/never_repeat" --iters 600 --seed "$i" 2>&1 >/dev/null |
        sed -n 's/^ab_iter_us: //p' >>"$T/nr_ab"
done
nr_line=$(python3 - "$T" <<'PY'
import json, re, statistics, sys
d = sys.argv[1]
runs = [ln.split() for ln in open(f"{d}/nr_runs")]
runs = [(int(r[0]), r[1], float(r[2])) for r in runs if len(r) == 3]
v = {k: [ms for _, m, ms in runs if m == k] for k in ("plain", "off", "shim", "coff")}
rnd = {}
for i, m, ms in runs:
    rnd.setdefault(i, {})[m] = ms
def paired(k):
    r = [x[k] / x["plain"] for x in rnd.values() if k in x and "plain" in x]
    return f"{statistics.median(r):.3f}x" if r else "-"
if all(v.values()):
    p, o, s, c = (statistics.median(v[k]) for k in ("plain", "off", "shim", "coff"))
    st = [json.load(open(f"{d}/nr{i}.json")) for i in range(1, 10)]
    r = [x["replay"] for x in st]
    wins = statistics.median(sum(ctx.get("learning_windows", 0) for ctx in x["replay"].get("contexts", [])) for x in st)
    own = statistics.median(x["host_ns_engine_per_eager_launch"] for x in r)
    own_med = statistics.median(x["host_ns_engine_per_eager_launch_median"] for x in r)
    lng = [x["eager_launches_engine_long"] for x in r]
    lng_n = statistics.median(x["10us_1ms"] + x["over_1ms"] for x in lng)
    lng_ms = statistics.median(x["10us_1ms_ms"] + x["over_1ms_ms"] for x in lng)
    clk = statistics.median(x.get("host_ns_clock_read", 0) for x in r)
    per = statistics.median(x["host_ns_engine_per_launch"] for x in r)
    drv = statistics.median(x["host_ns_per_eager_launch"] for x in r)
    through = statistics.median(x["launches_eager_through_engine"] for x in r)
    print(f"plain {p:.1f} ms | pass-through {o:.1f} ms ({o / p:.3f}x) | default {s:.1f} ms ({s / p:.3f}x; "
          f"{wins:.0f} CUPTI learning windows) | AUTOGRAPH_CUPTI=off {c:.1f} ms ({c / p:.3f}x); "
          f"plain min-max {min(v['plain']):.0f}-{max(v['plain']):.0f} | engine {per:.0f} ns per launch against "
          f"the driver's {drv:.0f} ns ({100 * per / drv:.1f}%): {own:.0f} ns on each of the {through:.0f} launches "
          f"it saw (median {own_med:.0f}; sampled launches over 10 us: {lng_n:.0f}, {lng_ms:.2f} ms), the others passed while it rested ({statistics.median(x['rests'] for x in r):.0f} rests, "
          f"{statistics.median(x['segments_rested'] for x in r):.0f} segments; a clock read {clk:.0f} ns)")
    print(f"| each round against its own plain run, medians of 9: pass-through {paired('off')}, default "
          f"{paired('shim')}, AUTOGRAPH_CUPTI=off {paired('coff')}; every run in the order run (ms): "
          + " ".join(f"{m}={ms:.0f}" for _, m, ms in runs))
else:
    print("no loop_ms")
ab = [(float(a), float(b)) for a, b in re.findall(r"shim ([0-9.]+) paused ([0-9.]+)", open(f"{d}/nr_ab").read())]
if ab:
    print(f"| in one process (AG_AB=10, {len(ab)} runs): the shim {statistics.median(a / b for a, b in ab):.4f}x of "
          f"itself paused, a kernel's share of an iteration (" + ", ".join(f"{a:.3f}/{b:.3f} us" for a, b in ab) + ")")
else:
    print("| in one process: no ab_iter_us")
PY
)
fi
want never_repeat && mark never_repeat "$nr_line"

# CUDA's capture rules on this driver (tests/fakecuda/capture_rules.c): which calls of one thread break another
# thread's capture, per capture mode; run plain and under the library (the program's own captures: the two
# tables must be the same), and set beside fakecuda's (tests/fakecuda/capture_rules.expected is this
# table from a GPU run). A few seconds.
rules_line=-
if want rules; then
    "$BUILD/bin/capture_rules" >"$OUT/rules.txt" 2>&1
    rules_rc=$?
    LD_PRELOAD=$PWD/$BUILD/lib/libautograph.so "$BUILD/bin/capture_rules" >"$T/rules_shim.txt" 2>&1
    LD_LIBRARY_PATH=$PWD/$BUILD/fakecuda "$BUILD/bin/capture_rules" >"$T/rules_fake.txt" 2>&1
    rules_line="rc $rules_rc, $(wc -l <"$OUT/rules.txt") rows; under the library: $(cmp -s "$OUT/rules.txt" "$T/rules_shim.txt" && echo same || echo DIFFERENT); fakecuda: $(cmp -s "$OUT/rules.txt" "$T/rules_fake.txt" && echo same || echo "$(diff "$OUT/rules.txt" "$T/rules_fake.txt" | grep -c '^<') rows differ")"
fi
want rules && mark rules "$rules_line"

# The matched launch on this host's CPU (fakecuda: no GPU in the timing): match_bench, shaped like a PyTorch
# step, 5 runs each with warm caches and with 2 MB swept between launches (as cold as a PyTorch step),
# the issuer inline (on fakecuda the issuer's graph launches share the fake's lock with the launches
# timed). Medians of host_ns_per_match, and the phases of the last run; the engine's own time on the
# launches it learns where nothing repeats (match_bench --novel: beside never_repeat's on the GPU, the
# same path without the driver's footprint in the caches). Then what 16 and 32 cold lines
# cost on this CPU (tests/engine/line_floor.c): the floor under a cold launch that touches that many.
if want match; then
    match_line=$(for sweep in 0 2048; do
        printf 'sweep %s KB: ' "$sweep"
        AUTOGRAPH_ISSUER=inline bash tests/engine/match_bench.sh "$BUILD" measure 5 --iters 300 --thrash "$sweep" | tr '\n' ' '
        AUTOGRAPH_ISSUER=inline bash tests/engine/match_bench.sh "$BUILD" check --iters 300 --thrash "$sweep" | grep phases | tr '\n' ' '
        printf '| '
    done
    printf 'nothing repeating (--novel), 2 MB swept: '
    AUTOGRAPH_ISSUER=inline bash tests/engine/match_bench.sh "$BUILD" novel --iters 300 --thrash 2048 | tr '\n' ' '
    printf '| '
    "$BUILD/bin/line_floor" 16 | tr '\n' ' '
    "$BUILD/bin/line_floor" 32)
fi
want match && mark match "$match_line"

# Two GPUs in one process (tests/gpu/multi_diag.sh: the MLP under DataParallel and split over two GPUs;
# plain, default, probes off and CUPTI off, MULTI_REPS (3) interleaved runs each): plain's median steady
# loop over the shim's, and CUPTI off's. Needs 2 GPUs; about 13 s a run on a two-H200 host (24 runs).
multi_line="-"
if want multi; then
    ngpus=$(nvidia-smi -L | grep -c '^GPU')
    if [ "$ngpus" -lt 2 ]; then
        multi_line="skipped: needs 2 GPUs, this machine has $ngpus"
    elif ! python3 -c "import torch" 2>/dev/null; then
        multi_line="skipped: no PyTorch"
    else
        OUT=$T/multi REPS=${MULTI_REPS:-3} bash tests/gpu/multi_diag.sh >"$OUT/multi.txt" 2>&1
        multi_line=$(python3 tests/gpu/ratios.py multi "$T/multi")
    fi
fi
want multi && mark multi "$multi_line"

# Text generation with a static cache (generate.py --static --sample: the program's own graph per token,
# torch.compile's): the shim was 1.16x slower in the one pair of runs the forty-third session made.
# GEN_REPS (2) interleaved rounds of py_diag.sh with PASSTHRU=1 (GEN_STEPS, 12, generate() rounds a run, the
# test's 6 being mostly learning; about 50 s a run by the Bats test's 78 s for two of 6 rounds, so 300 s for
# the part: a device call of its own; plain, the shim, the shim passing every
# call through); medians of the steady loop, the syncs' driver time (their wait for the GPU) and engine
# time, and the engine's long eager launches: where the shim's time goes, with the wait beside it.
gen_line="-"
if want gen && python3 -c "import transformers" 2>/dev/null; then
    for r in $(seq "${GEN_REPS:-2}"); do
        OUT=$T/gen/rep$r PASSTHRU=1 PLAIN_TWICE=0 PY_RUNS="python3 tests/python/generate.py --steps ${GEN_STEPS:-12} --static --sample" \
            bash tests/gpu/py_diag.sh >"$OUT/gen_rep$r.txt" 2>&1
        # GEN_LAUNCH=1: plain and the shim once more with the graphs built by the program's thread
        # (AUTOGRAPH_ISSUER=launch), to tell the issuer's builds apart (about 100 s more a round)
        [ "${GEN_LAUNCH:-0}" = 1 ] &&
            OUT=$T/genl/rep$r AUTOGRAPH_ISSUER=launch PLAIN_TWICE=0 \
                PY_RUNS="python3 tests/python/generate.py --steps ${GEN_STEPS:-12} --static --sample" \
                bash tests/gpu/py_diag.sh >"$OUT/genl_rep$r.txt" 2>&1
    done
    gen_line=$(python3 tests/gpu/ratios.py gen "$T/gen")
    [ "${GEN_LAUNCH:-0}" = 1 ] && gen_line="$gen_line | AUTOGRAPH_ISSUER=launch: $(python3 tests/gpu/ratios.py gen "$T/genl")"
fi
want gen && mark gen "$gen_line"

if want bench; then
"$BUILD/bin/autograph" demo >"$OUT/demo.txt" 2>&1
demo_rc=$?
"$BUILD/bin/autograph" bench --cupti-compare --ab 10 --reps "${BENCH_REPS:-3}" --timeout 120 >"$OUT/bench.txt" 2>"$OUT/bench.err"
bench_rc=$?
fi
want bench && mark bench "demo rc $demo_rc, bench rc $bench_rc"

echo
echo "==== autograph GPU suite: $(head -1 "$OUT/gpu.txt") ===="
n_skipped=$(grep -scE '\(Skipped\)$' "$OUT/ctest.log")
echo "ctest: $(grep -sE 'tests passed|tests failed' "$OUT/ctest.log" | tail -1) (rc $ctest_rc; ${n_skipped:-0} skipped$no_bats)"
echo "launch coverage (hooks vs CUPTI), from the Bats tests:"
cat "$AG_SUMMARY"
echo "PyTorch MLP (8 layers, dropout, AdamW), 200 steps: $torch_line"
echo "PyTorch loop as users write it (torch_amp.py), 160 steps: $amp_line"
echo "PyTorch programs with CUDA graphs of their own (torch_mlp.py --graphed-model, --graph), 200 steps: $graphed_line"
echo "issuer (AUTOGRAPH_ISSUER) thread, inline and polling (poll), medians of ${ISSUER_REPS:-3}: $issuer_line"
echo "torch_geometric GCN, in-process A/B, medians of ${GCN_REPS:-3}: $gcn_line"
echo "residual CNN (cuDNN), in-process A/B, medians of ${CNN_REPS:-3}: $cnn_line"
echo "probes: plain, default and AUTOGRAPH_PROBE=off (loop ms, medians of 3):"
printf '%s' "$probe_line"
echo "text generation, static cache (generate.py --static --sample), medians of ${GEN_REPS:-2}: $gen_line"
echo "chunk plans, modeled against halving (loop ms, medians of ${PLAN_REPS:-3}):"
printf '%s' "$plan_line"
echo "launch_bound against its hand graph, by chunking (medians of ${PLAN_REPS:-3}): $lbc_line"
echo "launch_bound --graph (its own graphs): $own_line"
echo "never_repeat, medians of 9: $nr_line"
echo "matched launch on this host's CPU (match_bench, fakecuda, inline): $match_line"
echo "launch_bound's plan: $lb_line"
echo "capture rules (capture_rules: plain, under the library, fakecuda): $rules_line"
[ -f "$OUT/rules.txt" ] && cat "$OUT/rules.txt"
echo "two GPUs in one process, steady loop, medians of ${MULTI_REPS:-3}: $multi_line"
# (parts RUN_PARTS left out have no files)
echo "CUPTI window costs (launch_bound, AUTOGRAPH_LOG=debug):"
[ -f "$OUT/cupti_costs.txt" ] && sed 's/^autograph: debug: /  /' "$OUT/cupti_costs.txt"
echo "autograph demo (rc $demo_rc):"
[ -f "$OUT/demo.txt" ] && cat "$OUT/demo.txt"
echo "autograph bench (rc $bench_rc):"
[ -f "$OUT/bench.txt" ] && cat "$OUT/bench.txt"
echo "part times: ${part_times%, }"
# the exit status: CTest's, where it ran
[ "$ctest_rc" = skipped ] || [ "$ctest_rc" = 0 ]
