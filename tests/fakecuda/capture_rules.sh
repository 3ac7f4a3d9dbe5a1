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
[ "$n" -ge 264 ] || { cat "$tmp/plain"; echo "capture_rules: $n rows, 264 expected"; fail=1; }
# Row by row (a row is named by its mode and call: the first two words): the rows the GPU's table holds must
# read the same on fakecuda; rows it does not hold yet (calls added since it was recorded) are named.
if [ -f "$here/capture_rules.expected" ]; then
    cmp_out=$(python3 - "$here/capture_rules.expected" "$tmp/plain" <<'PY'
import sys
def rows(path):
    return {tuple(l.split()[:2]): l.rstrip("\n") for l in open(path) if l.strip()}
gpu, fake = rows(sys.argv[1]), rows(sys.argv[2])
bad = [k for k in gpu if fake.get(k) != gpu[k]]
for k in bad:
    print(f"< {gpu[k]}\n> {fake.get(k, '(no such row on fakecuda)')}")
new = [" ".join(k) for k in fake if k not in gpu]
more = f" and {len(new) - 8} more" if len(new) > 8 else ""
print(f"rows: {len(gpu) - len(bad)} of the GPU's {len(gpu)} the same on fakecuda"
      + (f"; {len(new)} not recorded on a GPU yet: {', '.join(new[:8])}{more}" if new else ""))
sys.exit(1 if bad else 0)
PY
    ) || {
        fail=1
        echo "capture_rules: fakecuda's table differs from the GPU's (< the GPU, capture_rules.expected; > fakecuda)"
    }
    echo "$cmp_out"
fi
[ "$fail" = 0 ] && echo "capture_rules: $n rows, the same plain and under the library"
exit "$fail"
