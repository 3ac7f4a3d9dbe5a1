#!/usr/bin/env bash
# The directed tests (tests/difftest/directed.c) under the shim and valgrind's memcheck: any memory error,
# and any block of the shim's definitely lost at exit (a per-thread buffer of a thread that never made a
# hooked call, a forgotten kernel layout), fails. Skipped (77) where valgrind is not installed.
#   directed.sh BUILD_DIR NAME...
# The tests that end contexts are left out by the caller: the fake keeps an ended context's page-locked
# memory unreadable and out of the heap on purpose (tests/fakecuda/fc_mem.c), which memcheck counts as lost.
set -u
build=$(cd "${1:?usage: directed.sh BUILD_DIR NAME...}" && pwd)
shift
command -v valgrind >/dev/null || { echo "valgrind is not installed: skipped"; exit 77; }
export LD_LIBRARY_PATH=$build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export FAKECUDA_REUSE_EVENTS=${FAKECUDA_REUSE_EVENTS:-1} FAKECUDA_STRICT_EVENTS=${FAKECUDA_STRICT_EVENTS:-1}
failed=0 ran=0
for t in "$@"; do
    out=$(LD_PRELOAD=$build/lib/libautograph.so valgrind -q --leak-check=full --errors-for-leak-kinds=definite \
        --show-leak-kinds=definite --error-exitcode=9 "$build/bin/difftest_directed" "$t" 2>&1 >/dev/null)
    rc=$?
    case $rc in
    0) ran=$((ran + 1)) ;;
    77) echo "$t: skipped by the test itself" ;;
    9)
        echo "$t: memcheck found a memory error or a definite leak:"
        printf '%s\n' "$out" | grep '==' | tail -60
        failed=1
        ;;
    *)
        echo "$t: exit $rc under valgrind:"
        printf '%s\n' "$out" | tail -30
        failed=1
        ;;
    esac
done
echo "valgrind: $ran directed tests under the shim, $([ $failed = 0 ] && echo "no memory error and no definite leak" || echo "FAILED")"
exit $failed
