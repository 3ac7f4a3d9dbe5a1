# Shared by the Bats files: where the build is, running a program plain and under the shim, and reading
# the shim's statistics. BUILD_DIR comes from CTest; the defaults serve a manual `bats` run.
BUILD_DIR=${BUILD_DIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)/build}
SRC_DIR=${SRC_DIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
SHIM=$BUILD_DIR/lib/libautograph.so
BIN=$BUILD_DIR/bin

# run_pair OUTDIR CMD...: runs CMD plain (OUTDIR/plain.out) and under the shim (OUTDIR/shim.out,
# statistics in OUTDIR/stats.json); extra AUTOGRAPH_* settings come from the caller's environment.
run_pair() {
    local dir=$1; shift
    mkdir -p "$dir"
    "$@" >"$dir/plain.out" 2>"$dir/plain.err" || { cat "$dir/plain.err" >&2; return 1; }
    env LD_PRELOAD="$SHIM${LD_PRELOAD:+:$LD_PRELOAD}" AUTOGRAPH_STATS="$dir/stats.json" "$@" \
        >"$dir/shim.out" 2>"$dir/shim.err" || { cat "$dir/shim.err" >&2; return 1; }
}

# stat FILE KEY: a value from the statistics JSON; KEY is dotted ("cupti.launches"); "null" if absent.
stat() {
    python3 - "$1" "$2" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split('.'):
    v = v.get(k) if isinstance(v, dict) else None
print('null' if v is None else v)
PY
}

# same_output DIR: plain and shim stdout identical, with a diff on failure.
same_output() {
    diff -u "$1/plain.out" "$1/shim.out"
}

# coverage_ok DIR [LABEL]: the hooks saw every launch CUPTI saw, and nothing bypassed the resolver.
coverage_ok() {
    local hooked cupti unmatched
    hooked=$(stat "$1/stats.json" launches)
    cupti=$(stat "$1/stats.json" cupti.launches)
    unmatched=$(stat "$1/stats.json" unmatched_proc_addresses)
    echo "launches: hooks $hooked, CUPTI $cupti, unmatched resolver answers $unmatched"
    # tests/gpu/run.sh collects these lines into its closing table.
    [ -z "${AG_SUMMARY:-}" ] || echo "coverage ${2:-$1} hooks=$hooked cupti=$cupti unmatched=$unmatched" >>"$AG_SUMMARY"
    [ "$hooked" -gt 0 ] && [ "$hooked" = "$cupti" ] && [ "$unmatched" = 0 ]
}
