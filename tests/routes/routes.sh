#!/usr/bin/env bash
# CPU integration tests of the shim on fakecuda (one CTest each, see CMakeLists.txt):
#   routes.sh BUILD_DIR SRC_DIR ROUTE_PROG ROUTE_PROG_DIRECT LIBNEXTPROBE TEST
# TEST is a route of route_prog (the program runs plain and under the shim: identical stdout, and the
# statistics count exactly the calls the program says it issued) or one of the shim's rules: scope_off,
# bad_option, stats_pid, log_info, nothing_on_stdout, rtld_next. Exit 0 pass, 1 fail, 77 skip.
set -u
if [ $# -ne 6 ]; then
    echo "usage: $0 BUILD_DIR SRC_DIR ROUTE_PROG ROUTE_PROG_DIRECT LIBNEXTPROBE TEST" >&2
    exit 2
fi
BUILD=$1 SRC=$2 PROG=$3 PROG_DIRECT=$4 NEXTPROBE=$5 TEST=$6
FAKE=$BUILD/fakecuda
SHIM=$BUILD/lib/libautograph.so
HOOKS_DEF=$SRC/shim/hooks.def
ROUTES="direct dlsym dlsym-default dlsym-old procaddr-v2 procaddr-old procaddr-ptsz procaddr-self runtime-like"

for f in "$FAKE/libcuda.so.1" "$SHIM" "$PROG" "$PROG_DIRECT" "$NEXTPROBE" "$HOOKS_DEF"; do
    [ -e "$f" ] || { echo "routes.sh: missing $f (build the whole tree first)" >&2; exit 1; }
done
command -v python3 >/dev/null || { echo "routes.sh: python3 not found" >&2; exit 77; }

# The runs must not inherit the caller's shim settings.
unset LD_PRELOAD
for v in $(compgen -e | grep '^AUTOGRAPH_'); do unset "$v"; done

TMP=$(mktemp -d "${TMPDIR:-/tmp}/routes.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
FAILED=0

fail() {
    echo "FAIL [$TEST]: $*" >&2
    FAILED=1
}

show() { # show NAME: what a run printed, for a failure report
    echo "--- $1: rc $(cat "$TMP/$1.rc"), stdout:" >&2
    cat "$TMP/$1.out" >&2
    echo "--- $1: stderr:" >&2
    cat "$TMP/$1.err" >&2
    echo "---" >&2
}

prog_for() {
    if [ "$1" = direct ]; then echo "$PROG_DIRECT"; else echo "$PROG"; fi
}

# run NAME ROUTE [VAR=VALUE...] [-- PROGRAM ARGS...]: stdout, stderr and rc into $TMP/NAME.{out,err,rc}.
run() {
    local name=$1 route=$2
    shift 2
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    env LD_LIBRARY_PATH="$FAKE" "${envs[@]}" "$(prog_for "$route")" --route "$route" "$@" \
        >"$TMP/$name.out" 2>"$TMP/$name.err"
    echo $? >"$TMP/$name.rc"
}

rc_of() { cat "$TMP/$1.rc"; }

# plain NAME ROUTE: the reference run without the shim; must succeed with nothing on stderr.
# Returns 77 (after which the caller skips) when the route is not available here.
plain() {
    run "$1" "$2" "${@:3}"
    local rc
    rc=$(rc_of "$1")
    [ "$rc" = 77 ] && return 77
    # The only line the program itself writes to stderr on success: the pids of a --fork run.
    if [ "$rc" != 0 ] || grep -qv '^route_prog: parent [0-9]* child [0-9]*$' "$TMP/$1.err"; then
        fail "plain run of route $2 failed"
        show "$1"
        return 1
    fi
    grep -q '^result ok$' "$TMP/$1.out" || { fail "route $2: wrong results without the shim"; show "$1"; return 1; }
    return 0
}

same_stdout() { # same_stdout REF NAME
    if ! cmp -s "$TMP/$1.out" "$TMP/$2.out"; then
        fail "stdout differs between $1 and $2"
        diff "$TMP/$1.out" "$TMP/$2.out" >&2
        return 1
    fi
}

# check_stats OUT JSON [SCOPE]: the statistics count exactly what the program issued.
check_stats() {
    python3 - "$TMP/$1.out" "$2" "$HOOKS_DEF" "${3:-}" <<'EOF' || { fail "statistics $2 do not match $1"; return 1; }
import json, re, sys

out, path, hooks_def, scope = sys.argv[1:5]
hooked = set()
for line in open(hooks_def):
    m = re.match(r'\s*AG_HOOK\(\s*\w+\s*,\s*(\w+)\s*,', line)
    if m:
        hooked.add(m.group(1))
    m = re.match(r'\s*AG_HOOK_PT\(\s*\w+\s*,\s*(\w+)\s*,\s*(\w+)\s*,', line)
    if m:
        hooked.update(m.groups())
errors = []
if len(hooked) < 50:
    errors.append("could not read the hook list from %s (%d names)" % (hooks_def, len(hooked)))
issued = None
for line in open(out):
    if line.startswith("issued"):
        issued = {k: int(v) for k, v in (w.split("=") for w in line.split()[1:])}
if not issued:
    sys.exit("no 'issued' line in %s" % out)
try:
    st = json.load(open(path))
except Exception as e:
    sys.exit("cannot read %s: %s" % (path, e))
calls = st.get("calls", {})
for name, n in sorted(issued.items()):
    if name in hooked:
        if calls.get(name) != n:
            errors.append("%s: issued %d, counted %s" % (name, n, calls.get(name, 0)))
    elif name in calls:
        errors.append("%s is not hooked but counted %d" % (name, calls[name]))
for name, n in sorted(calls.items()):
    if name not in issued:
        errors.append("%s counted %d but never issued" % (name, n))
    if name not in hooked:
        errors.append("%s counted but not in hooks.def" % name)
launches = sum(n for k, n in issued.items() if k.startswith(("cuLaunchKernel", "cuLaunchCooperativeKernel")))
if st.get("launches") != launches:
    errors.append("launches %s, issued %d" % (st.get("launches"), launches))
if st.get("unmatched_proc_addresses") != 0:
    errors.append("unmatched_proc_addresses %s" % st.get("unmatched_proc_addresses"))
if st.get("calls_total") != sum(calls.values()):
    errors.append("calls_total %s != sum of calls %d" % (st.get("calls_total"), sum(calls.values())))
if scope and st.get("scope") != scope:
    errors.append("scope %r, expected %r" % (st.get("scope"), scope))
for e in errors:
    print("  " + e, file=sys.stderr)
sys.exit(1 if errors else 0)
EOF
}

# route_check ROUTE [VAR=VALUE...]: plain vs shim, identical stdout, exact statistics.
route_check() {
    local route=$1 scope=all
    shift
    for kv in "$@"; do [ "${kv%%=*}" = AUTOGRAPH_SCOPE ] && scope=${kv#*=}; done
    plain "plain-$route" "$route"
    case $? in 77) return 77 ;; 0) ;; *) return 1 ;; esac
    rm -f "$TMP/stats.json"
    run "shim-$route" "$route" LD_PRELOAD="$SHIM" AUTOGRAPH_STATS="$TMP/stats-$route.json" "$@"
    if [ "$(rc_of "shim-$route")" != 0 ]; then
        fail "route $route under the shim failed"
        show "shim-$route"
        return 1
    fi
    same_stdout "plain-$route" "shim-$route" || show "shim-$route"
    if [ -s "$TMP/shim-$route.err" ]; then
        fail "route $route: the shim wrote to stderr at the default log level"
        show "shim-$route"
    fi
    check_stats "plain-$route" "$TMP/stats-$route.json" "$scope" || {
        echo "--- statistics:" >&2
        cat "$TMP/stats-$route.json" >&2
    }
}

issued_launches() { # issued_launches NAME
    python3 -c '
import sys
for line in open(sys.argv[1]):
    if line.startswith("issued"):
        print(sum(int(v) for k, v in (w.split("=") for w in line.split()[1:])
                  if k.startswith(("cuLaunchKernel", "cuLaunchCooperativeKernel"))))' "$TMP/$1.out"
}

case $TEST in
direct | dlsym | dlsym-default | dlsym-old | procaddr-v2 | procaddr-old | procaddr-ptsz | procaddr-self | runtime-like)
    route_check "$TEST"
    [ $? = 77 ] && exit 77
    ;;

scope_off)
    # 'off' passes everything straight through, yet still counts every call.
    for r in $ROUTES; do
        route_check "$r" AUTOGRAPH_SCOPE=off
    done
    ;;

bad_option)
    # A malformed value: exactly one warning naming the variable and the accepted values, the default
    # used, the program's output unchanged.
    for r in direct procaddr-v2; do
        plain "plain-$r" "$r" || continue
        run "bad-$r" "$r" LD_PRELOAD="$SHIM" AUTOGRAPH_LOG=verbose AUTOGRAPH_STATS="$TMP/bad-$r.json"
        [ "$(rc_of "bad-$r")" = 0 ] || { fail "route $r with AUTOGRAPH_LOG=verbose failed"; show "bad-$r"; }
        same_stdout "plain-$r" "bad-$r"
        lines=$(wc -l <"$TMP/bad-$r.err")
        line=$(head -n 1 "$TMP/bad-$r.err")
        if [ "$lines" != 1 ]; then
            fail "route $r: $lines lines on stderr, expected exactly one warning"
            show "bad-$r"
        fi
        case $line in
        "autograph: warn: "*AUTOGRAPH_LOG*verbose*"error|warn|info|debug|trace"*) ;;
        *) fail "route $r: the warning does not name AUTOGRAPH_LOG, the value and the accepted values: $line" ;;
        esac
        check_stats "plain-$r" "$TMP/bad-$r.json"
    done
    ;;

stats_pid)
    # '%p' names the file after the pid; a forked child writes its own file only with '%p'.
    plain plain direct || exit 1
    mkdir -p "$TMP/one" "$TMP/pid" "$TMP/nopid"
    run one direct LD_PRELOAD="$SHIM" AUTOGRAPH_STATS="$TMP/one/s-%p.json"
    [ "$(rc_of one)" = 0 ] || { fail "run with %p failed"; show one; }
    same_stdout plain one
    files=$(cd "$TMP/one" && ls)
    if [ "$(echo "$files" | wc -w)" != 1 ] || ! [[ $files =~ ^s-[0-9]+\.json$ ]]; then
        fail "AUTOGRAPH_STATS=s-%p.json wrote: $files"
    else
        pid=${files#s-}
        pid=${pid%.json}
        python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["pid"] != int(sys.argv[2]))' \
            "$TMP/one/$files" "$pid" || fail "$files: its \"pid\" is not $pid"
        check_stats plain "$TMP/one/$files"
    fi

    plain plainfork direct -- --fork || exit 1
    run fork direct LD_PRELOAD="$SHIM" AUTOGRAPH_STATS="$TMP/pid/s-%p.json" -- --fork
    [ "$(rc_of fork)" = 0 ] || { fail "forking run with %p failed"; show fork; }
    same_stdout plainfork fork
    read -r parent child < <(sed -n 's/^route_prog: parent \([0-9]*\) child \([0-9]*\)$/\1 \2/p' "$TMP/fork.err")
    files=$(cd "$TMP/pid" && ls | sort | tr '\n' ' ')
    want=$(printf 's-%s.json\ns-%s.json\n' "${parent:-?}" "${child:-?}" | sort | tr '\n' ' ')
    if [ -z "${parent:-}" ] || [ "$files" != "$want" ]; then
        fail "forking run with %p: files '$files', expected '$want'"
        show fork
    else
        check_stats plainfork "$TMP/pid/s-$parent.json"
        python3 - "$TMP/pid/s-$child.json" "$child" <<'EOF' || fail "the child's statistics are not empty"
import json, sys
st = json.load(open(sys.argv[1]))
bad = st["pid"] != int(sys.argv[2]) or st["calls"] or st["launches"] or st["calls_total"]
if bad:
    print(st, file=sys.stderr)
sys.exit(1 if bad else 0)
EOF
    fi

    run forknopid direct LD_PRELOAD="$SHIM" AUTOGRAPH_STATS="$TMP/nopid/s.json" -- --fork
    [ "$(rc_of forknopid)" = 0 ] || { fail "forking run without %p failed"; show forknopid; }
    same_stdout plainfork forknopid
    parent=$(sed -n 's/^route_prog: parent \([0-9]*\) child .*/\1/p' "$TMP/forknopid.err")
    files=$(cd "$TMP/nopid" && ls | tr '\n' ' ')
    if [ "$files" != "s.json " ]; then
        fail "forking run without %p wrote '$files', expected only s.json"
    else
        python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["pid"] != int(sys.argv[2]))' \
            "$TMP/nopid/s.json" "${parent:-0}" || fail "s.json was not written by the parent ($parent)"
        check_stats plainfork "$TMP/nopid/s.json"
    fi

    # A helper the program runs with the shim preloaded too (a shell, a compiler), making no driver call
    # and exiting after the program, leaves the program's statistics at the same path alone; alone, it
    # writes its own (empty) ones.
    env LD_PRELOAD="$SHIM" AUTOGRAPH_STATS="$TMP/nopid/s.json" python3 -c pass
    check_stats plainfork "$TMP/nopid/s.json"
    env LD_PRELOAD="$SHIM" AUTOGRAPH_STATS="$TMP/nopid/helper.json" python3 -c pass
    python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["calls_total"] != 0)' \
        "$TMP/nopid/helper.json" || fail "a helper alone did not write its statistics"
    ;;

log_info)
    # 'info': one summary line at exit, on stderr, with the number of kernel launches.
    for r in direct runtime-like; do
        plain "plain-$r" "$r" || continue
        run "info-$r" "$r" LD_PRELOAD="$SHIM" AUTOGRAPH_LOG=info
        [ "$(rc_of "info-$r")" = 0 ] || { fail "route $r with AUTOGRAPH_LOG=info failed"; show "info-$r"; }
        same_stdout "plain-$r" "info-$r"
        n=$(issued_launches "plain-$r")
        summary=$(grep -c 'kernel launches' "$TMP/info-$r.err")
        last=$(tail -n 1 "$TMP/info-$r.err")
        if [ "$summary" != 1 ]; then
            fail "route $r: $summary summary lines on stderr, expected one"
            show "info-$r"
        elif ! [[ $last == "autograph: info: "*" $n kernel launches"* ]]; then
            fail "route $r: the last line on stderr is not the summary with $n kernel launches: $last"
            show "info-$r"
        fi
        if grep -v '^autograph: ' "$TMP/info-$r.err" | grep -q .; then
            fail "route $r: stderr lines without the 'autograph:' prefix"
            show "info-$r"
        fi
    done
    ;;

nothing_on_stdout)
    # The most verbose level writes to stderr only: stdout stays byte-identical.
    for r in $ROUTES; do
        plain "plain-$r" "$r"
        case $? in 77) continue ;; 0) ;; *) continue ;; esac
        run "trace-$r" "$r" LD_PRELOAD="$SHIM" AUTOGRAPH_LOG=trace
        [ "$(rc_of "trace-$r")" = 0 ] || { fail "route $r with AUTOGRAPH_LOG=trace failed"; show "trace-$r"; }
        same_stdout "plain-$r" "trace-$r"
    done
    ;;

rtld_next)
    # A library preloaded after the shim asks dlsym(RTLD_NEXT, "cuInit"): the answer must be the next
    # definition after that library (libcuda's), at start-up and at exit. First without the shim, to
    # prove the probe itself.
    plain plain direct || exit 1
    for mode in alone shim; do
        if [ $mode = alone ]; then pre=$NEXTPROBE; else pre="$SHIM:$NEXTPROBE"; fi
        run "next-$mode" direct LD_PRELOAD="$pre"
        [ "$(rc_of "next-$mode")" = 0 ] || { fail "run with LD_PRELOAD=$pre failed"; show "next-$mode"; }
        same_stdout plain "next-$mode"
        line=$(grep "^nextprobe: ctor-default " "$TMP/next-$mode.err")
        case $line in
        "nextprobe: ctor-default ok "*) ;;
        *) fail "LD_PRELOAD=$pre: dlsym(RTLD_DEFAULT, getpid) from libnextprobe's constructor: ${line:-no report}" ;;
        esac
        for when in ctor exit; do
            line=$(grep "^nextprobe: $when " "$TMP/next-$mode.err")
            case $line in
            "nextprobe: $when ok "*"$FAKE/libcuda.so.1"*) ;;
            *)
                fail "LD_PRELOAD=$pre: dlsym(RTLD_NEXT, cuInit) from libnextprobe at $when: ${line:-no report}"
                show "next-$mode"
                ;;
            esac
        done
    done
    ;;

*)
    echo "routes.sh: unknown test $TEST" >&2
    exit 2
    ;;
esac

if [ $FAILED = 0 ]; then echo "PASS [$TEST]"; fi
exit $FAILED
