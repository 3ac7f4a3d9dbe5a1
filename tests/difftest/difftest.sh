#!/usr/bin/env bash
# difftest.sh: runs the differential tests plain and under LD_PRELOAD=libautograph.so on fakecuda and
# compares every output line; a difference is work the shim reordered, dropped, delayed or patched wrong.
#   difftest.sh BUILD_DIR FIRST COUNT       random programs FIRST .. FIRST+COUNT-1
#   difftest.sh BUILD_DIR --directed NAME   one directed test
#   difftest.sh BUILD_DIR --directed-sweep NAME...   directed tests under several chunkings and schedules
#   difftest.sh BUILD_DIR --self-check      proves that a sabotaged run is caught (exits 0 when it is)
#   difftest.sh BUILD_DIR --fresh FIRST COUNT   random programs, each in a process of its own
set -u
build=${1:?usage: difftest.sh BUILD_DIR FIRST COUNT | --directed NAME | --self-check}
build=$(cd "$build" && pwd)
shift
shim=$build/lib/libautograph.so
bin=$build/bin
export LD_LIBRARY_PATH=$build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# events handed out again after their destroy, and a destroyed one given to the fake aborts (fakecuda.h)
export FAKECUDA_REUSE_EVENTS=${FAKECUDA_REUSE_EVENTS:-1} FAKECUDA_STRICT_EVENTS=${FAKECUDA_STRICT_EVENTS:-1}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/difftest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

[[ -f $shim ]] || { echo "difftest: $shim not built" >&2; exit 1; }

# run_pair NAME CMD...: CMD plain, then CMD under the shim; stdout and exit codes must match.
# DT_SHIM_ENV (self-check only) adds an environment assignment to the shim side.
run_pair() {
    local name=$1
    shift
    "$@" >"$tmp/$name.plain" 2>"$tmp/$name.plain.err"
    plain_rc=$?
    env ${DT_SHIM_ENV:-} LD_PRELOAD="$shim" AUTOGRAPH_STATS="$tmp/$name.stats" "$@" \
        >"$tmp/$name.shim" 2>"$tmp/$name.shim.err"
    shim_rc=$?
}

repro() { # the commands that rerun one case alone
    echo "  (DT_TRACE_SEED=SEED prints to stderr each call's return code and each read's digest of program SEED:"
    echo "   diff a plain and a shim run of the same batch to find the first difference)"
    echo "  reproduce: LD_LIBRARY_PATH=$build/fakecuda $*"
    echo "             LD_LIBRARY_PATH=$build/fakecuda ${DT_SHIM_ENV:-}${DT_SHIM_ENV:+ }LD_PRELOAD=$shim AUTOGRAPH_STATS=/tmp/ag.stats $*"
}

# expect_stats FILE: DT_EXPECT, a Python expression over the shim run's statistics (s), must hold (where
# set), so that a test meant to exercise some path is known to have taken it.
expect_stats() {
    [[ -z ${DT_EXPECT:-} ]] && return 0
    python3 - "$1" "$DT_EXPECT" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
ok = eval(sys.argv[2], {"s": s})
print(f"difftest: {'ok' if ok else 'FAILED'}: {sys.argv[2]} (replay: {json.dumps(s['replay'])[:300]})")
if not ok:  # all of it: which part of the expression fell short
    print(f"difftest: replay {json.dumps(s['replay'])}\ndifftest: cupti {json.dumps(s.get('cupti'))}")
sys.exit(0 if ok else 1)
PY
}

random_programs() {
    local first=$1 count=$2 extra=${3:-}
    local cmd=("$bin/difftest" --first "$first" --count "$count" $extra)
    run_pair rand "${cmd[@]}"
    if [[ $plain_rc -ne 0 ]]; then
        echo "difftest: the plain run failed (exit $plain_rc): a generated program is invalid, a tester bug"
        tail -n 20 "$tmp/rand.plain.err"
        return 1
    fi
    local n
    n=$(wc -l <"$tmp/rand.plain")
    if [[ $n -ne $count ]]; then
        echo "difftest: the plain run printed $n lines, expected $count"
        return 1
    fi
    # Seeds whose line differs or is missing on the shim side, in order.
    local bad
    bad=$(awk 'NR == FNR { want[$2] = $0; order[++k] = $2; next }
               { got[$2] = $0 }
               END { for (i = 1; i <= k; i++) { s = order[i]; if (got[s] != want[s]) print s } }' \
          "$tmp/rand.plain" "$tmp/rand.shim")
    if [[ -z $bad && $shim_rc -eq 0 ]]; then
        echo "difftest: seeds $first..$((first + count - 1)): $count programs identical with and without the shim"
        expect_stats "$tmp/rand.stats"
        return
    fi
    echo "difftest: FAILED: seeds $first..$((first + count - 1)), shim exit code $shim_rc (plain 0)"
    local s nbad=0
    for s in $bad; do
        nbad=$((nbad + 1))
        [[ $nbad -le 20 ]] || continue
        echo "FAIL: seed $s"
        echo "  plain: $(grep -m1 "^seed $s " "$tmp/rand.plain")"
        echo "  shim:  $(grep -m1 "^seed $s " "$tmp/rand.shim" || echo '(missing)')"
    done
    [[ $nbad -le 20 ]] || echo "... and $((nbad - 20)) more seeds"
    [[ -s $tmp/rand.shim.err ]] && { echo "shim side stderr (tail):"; tail -n 10 "$tmp/rand.shim.err"; }
    s=$(echo "$bad" | head -n1)
    [[ -n $s ]] && repro "$bin/difftest" --first "$s" --count 1 --verbose $extra
    if [[ $nbad -eq 0 ]]; then
        echo "difftest: every program's output is identical, but the shim side exited $shim_rc (its stderr above)"
    else
        echo "difftest: $nbad of $count programs differ"
    fi
    return 1
}

# Each program in a process of its own, plain and under the shim: what the engine does early in a process
# (its first repeats, the first window of replay sampling, CUPTI's first attach) meets every program's
# start, not only the first one's of a shard.
fresh_programs() {
    local first=$1 count=$2 s fails=0
    for ((s = first; s < first + count; s++)); do
        run_pair fresh "$bin/difftest" --first "$s" --count 1
        if [[ $plain_rc -ne 0 ]]; then
            echo "difftest: the plain run of seed $s failed (exit $plain_rc): a tester bug"
            return 1
        fi
        if [[ $shim_rc -ne 0 ]] || ! cmp -s "$tmp/fresh.plain" "$tmp/fresh.shim"; then
            fails=$((fails + 1))
            echo "FAIL: seed $s (shim exit code $shim_rc)"
            repro "$bin/difftest" --first "$s" --count 1 --verbose
        fi
    done
    echo "difftest: seeds $first..$((first + count - 1)), each in a fresh process: $((count - fails)) of $count identical"
    [[ $fails -eq 0 ]]
}

directed() {
    local name=$1
    run_pair "dir" "$bin/difftest_directed" "$name"
    if [[ $plain_rc -ne 0 && $plain_rc -ne 77 ]]; then
        echo "difftest: directed $name: the plain run failed (exit $plain_rc): a tester bug"
        cat "$tmp/dir.plain.err"
        return 1
    fi
    [[ $plain_rc -eq 77 ]] && { echo "difftest: directed $name skipped"; return 77; }
    if [[ $plain_rc -eq $shim_rc ]] && cmp -s "$tmp/dir.plain" "$tmp/dir.shim"; then
        # A held operation issued too late can fail without changing what the host sees (an event record
        # after the event was destroyed): the shim logs that as a warning, and none is expected here but
        # those DT_WARNS (an extended regular expression) matches, a test's own injected failure's.
        if grep -E '^autograph: (warn|error):' "$tmp/dir.shim.err" | grep -qvE "${DT_WARNS:-^\$}"; then
            echo "difftest: FAILED: directed $name: identical output, but the shim warned:"
            grep -E '^autograph: (warn|error):' "$tmp/dir.shim.err" | grep -vE "${DT_WARNS:-^\$}" | head -n 5
            return 1
        fi
        echo "difftest: directed $name: $(wc -l <"$tmp/dir.plain") observations identical with and without the shim"
        expect_stats "$tmp/dir.stats"
        return
    fi
    echo "difftest: FAILED: directed $name (exit codes: plain $plain_rc, shim $shim_rc)"
    diff "$tmp/dir.plain" "$tmp/dir.shim" | head -n 20
    [[ -s $tmp/dir.shim.err ]] && { echo "shim side stderr (tail):"; tail -n 10 "$tmp/dir.shim.err"; }
    repro "$bin/difftest_directed" "$name"
    return 1
}

# Every named directed test again under other chunkings and fakecuda schedules: warm-up 1 and 2, first
# chunks of 0, 3 and 5 operations, chunks of 4 to 128, two schedules each. Where a chunk ends right after
# an event record, a copy or just before a sync is where an ordering bug shows (a sweep like this found
# one in a launcher thread that was measured and reverted).
directed_sweep() {
    local name cfg w cf ch seed out rc runs=0 fails=0
    local cfgs=("1 0 4" "1 3 5" "1 5 5" "1 5 7" "1 0 128" "2 0 128" "2 3 7" "2 5 4")
    for name in "$@"; do
        for cfg in "${cfgs[@]}"; do
            read -r w cf ch <<<"$cfg"
            for seed in 3 11; do
                out=$(export AUTOGRAPH_WARMUP=$w AUTOGRAPH_CHUNK_FIRST=$cf AUTOGRAPH_CHUNK=$ch FAKECUDA_SEED=$seed
                      directed "$name" 2>&1)
                rc=$?
                runs=$((runs + 1))
                if [[ $rc -ne 0 && $rc -ne 77 ]]; then
                    fails=$((fails + 1))
                    echo "FAIL: $name with AUTOGRAPH_WARMUP=$w AUTOGRAPH_CHUNK_FIRST=$cf AUTOGRAPH_CHUNK=$ch FAKECUDA_SEED=$seed"
                    head -n 20 <<<"$out"
                fi
            done
        done
    done
    echo "difftest: directed sweep: $((runs - fails)) of $runs runs identical with and without the shim"
    [[ $fails -eq 0 ]]
}

# A sabotaged shim side (one launch dropped, patched with stale arguments, swapped or issued late in
# iteration 7) must be reported, with the seeds named. Passes only if every kind is caught.
self_check() {
    local mode out rc ok=0 seeds
    for mode in drop stale reorder late; do
        out=$(DT_SHIM_ENV="DIFFTEST_SABOTAGE=$mode" "$0" "$build" 0 40 --sabotage 2>&1)
        rc=$?
        seeds=$(grep -c '^FAIL: seed' <<<"$out")
        total=$(grep -o '[0-9]* of 40 programs differ' <<<"$out" | cut -d' ' -f1)
        if [[ $rc -ne 0 && $seeds -gt 0 ]] && grep -q 'reproduce:' <<<"$out"; then
            echo "self-check: sabotage '$mode' caught in ${total:-?} of 40 programs, e.g. $(grep -m1 '^FAIL: seed' <<<"$out")"
        else
            echo "self-check: sabotage '$mode' NOT caught (exit $rc)"
            tail -n 5 <<<"$out"
            ok=1
        fi
    done
    # The control: the same flag without a sabotage in the environment must pass.
    if ! out=$("$0" "$build" 0 40 --sabotage 2>&1); then
        echo "self-check: the unsabotaged control failed"
        tail -n 5 <<<"$out"
        ok=1
    fi
    return $ok
}

case ${1:-} in
--directed) directed "${2:?directed test name}" ;;
--directed-sweep) shift; directed_sweep "${@:?directed test names}" ;;
--self-check) self_check ;;
--fresh) fresh_programs "${2:?first seed}" "${3:?count}" ;;
*) random_programs "${1:?first seed}" "${2:?count}" "${3:-}" ;;
esac
