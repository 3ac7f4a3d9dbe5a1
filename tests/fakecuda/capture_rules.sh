#!/usr/bin/env bash
# fakecuda.capture_rules: capture_rules (which calls of one thread break another thread's capture, per mode)
# on fakecuda, plain and under the library: the tables must be the same (the library must not change what
# CUDA does to a program's own captures, nor its answers), and the same as the GPU's where
# capture_rules.expected holds the GPU's table. Usage: capture_rules.sh BUILD_DIR
set -u
build=$(cd "${1:?usage: capture_rules.sh BUILD_DIR}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/capture_rules.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$build/fakecuda
"$build/bin/capture_rules" >"$tmp/plain" 2>&1 || { cat "$tmp/plain"; echo "capture_rules: plain run failed"; exit 1; }
LD_PRELOAD=$build/lib/libautograph.so AUTOGRAPH_STATS=$tmp/stats "$build/bin/capture_rules" >"$tmp/shim" 2>&1 ||
    { cat "$tmp/shim"; echo "capture_rules: run under the library failed"; exit 1; }
fail=0
if ! diff "$tmp/plain" "$tmp/shim"; then
    echo "capture_rules: the table under the library differs (< plain, > under the library)"
    fail=1
fi
n=$(grep -c . "$tmp/plain")
[ "$n" -ge 54 ] || { cat "$tmp/plain"; echo "capture_rules: $n rows, 54 expected"; fail=1; }
if [ -f "$here/capture_rules.expected" ] && ! diff "$here/capture_rules.expected" "$tmp/plain"; then
    echo "capture_rules: fakecuda's table differs from the GPU's (< the GPU, capture_rules.expected; > fakecuda)"
    fail=1
fi
[ "$fail" = 0 ] && echo "capture_rules: $n rows, the same plain and under the library"
exit "$fail"
