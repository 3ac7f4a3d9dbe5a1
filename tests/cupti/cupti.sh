#!/usr/bin/env bash
# The CUPTI observer's loading on the CPU (fakecuda, a stand-in libcupti): found through
# AUTOGRAPH_CUPTI_LIB, found beside a PyTorch installation's wheels, and a refused subscription
# (a profiler holds CUPTI) gives one warning and identical results. Usage: cupti.sh BUILD_DIR
set -euo pipefail
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LD_LIBRARY_PATH=$build/fakecuda${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
prog="$build/bin/engine_prog sync 10"
fake=$build/tests/cupti/libfake_cupti.so
shim=$build/lib/libautograph.so
$prog >"$tmp/plain.out"

field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['cupti'].get(sys.argv[2]))" "$@"; }

# 1. AUTOGRAPH_CUPTI_LIB
AUTOGRAPH_CUPTI=always AUTOGRAPH_CUPTI_LIB=$fake AUTOGRAPH_STATS=$tmp/a.json LD_PRELOAD=$shim $prog >"$tmp/a.out"
diff "$tmp/plain.out" "$tmp/a.out"
[ "$(field "$tmp/a.json" enabled)" = True ] && [ "$(field "$tmp/a.json" library)" = "$fake" ]
echo "ok: AUTOGRAPH_CUPTI_LIB"

# 2. beside a PyTorch installation: site-packages/torch/lib/<lib> loaded, nvidia/cu13/lib/libcupti.so.13
sp=$tmp/venv/lib/python3/site-packages
mkdir -p "$sp/torch/lib" "$sp/nvidia/cu13/lib"
cp "$build/tests/cupti/libag_stub.so" "$sp/torch/lib/libtorch_stub.so"
cp "$fake" "$sp/nvidia/cu13/lib/libcupti.so.13"
AUTOGRAPH_CUPTI=always AUTOGRAPH_STATS=$tmp/b.json LD_PRELOAD="$shim $sp/torch/lib/libtorch_stub.so" $prog >"$tmp/b.out"
diff "$tmp/plain.out" "$tmp/b.out"
lib=$(field "$tmp/b.json" library)
[ "$(field "$tmp/b.json" enabled)" = True ] && [ "$lib" = "$sp/nvidia/cu13/lib/libcupti.so.13" ] || { echo "found: $lib"; exit 1; }
echo "ok: libcupti beside the wheels"

# 3. a profiler holds CUPTI: one warning, the observer off, identical results
FAKE_CUPTI_BUSY=1 AUTOGRAPH_CUPTI=always AUTOGRAPH_CUPTI_LIB=$fake AUTOGRAPH_STATS=$tmp/c.json LD_PRELOAD=$shim \
    $prog >"$tmp/c.out" 2>"$tmp/c.err"
diff "$tmp/plain.out" "$tmp/c.out"
[ "$(grep -c 'CUPTI subscription refused' "$tmp/c.err")" = 1 ]
[ "$(field "$tmp/c.json" enabled)" = False ]
echo "ok: a refused subscription"
