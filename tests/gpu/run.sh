#!/usr/bin/env bash
# The whole GPU suite in one call (the device time is scarce): build, every CTest including the GPU
# ones, the pass-through overhead on a PyTorch step, `autograph bench`, and a short table at the end.
# Usage on the GPU machine, from the repository root: bash tests/gpu/run.sh   (logs go to $OUT if set)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/autograph-gpu}
mkdir -p "$OUT"
BUILD=build-gpu
export AG_SUMMARY=$OUT/summary.txt
: >"$AG_SUMMARY"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# Bats travels as a Debian package in .bats (the GPU image has none).
if ! command -v bats >/dev/null && ls .bats/*.deb >/dev/null 2>&1; then
    for f in .bats/*.deb; do dpkg -x "$f" /tmp/bats-root; done
    export PATH=/tmp/bats-root/usr/bin:$PATH
fi
nvidia-smi -L | tee "$OUT/gpu.txt"

gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
{ cmake -S . -B "$BUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 &&
  cmake --build "$BUILD" -j16; } >"$OUT/build.log" 2>&1 || { tail -50 "$OUT/build.log"; echo "BUILD FAILED"; exit 1; }

ctest --test-dir "$BUILD" --output-on-failure -j4 >"$OUT/ctest.log" 2>&1
ctest_rc=$?
grep -E "tests passed|tests failed|\*\*\*Failed|Not Run|Skipped|\(Failed\)|\(SKIPPED\)" "$OUT/ctest.log" | tail -40

# Pass-through overhead on the PyTorch step: medians of interleaved runs (never a timed assertion).
overhead="-"
if python3 -c "import torch" 2>/dev/null; then
    for i in 1 2 3 4 5; do
        python3 tests/python/torch_mlp.py --steps 200 >/dev/null 2>>"$OUT/ovh_plain.err"
        LD_PRELOAD=$PWD/$BUILD/lib/libautograph.so AUTOGRAPH_SCOPE=off \
            python3 tests/python/torch_mlp.py --steps 200 >/dev/null 2>>"$OUT/ovh_shim.err"
    done
    overhead=$(python3 - "$OUT/ovh_plain.err" "$OUT/ovh_shim.err" <<'PY'
import re, statistics, sys
def med(p): return statistics.median(float(m) for m in re.findall(r'loop_ms: ([0-9.]+)', open(p).read()))
a, b = med(sys.argv[1]), med(sys.argv[2])
print(f"plain {a:.1f} ms, shim {b:.1f} ms, overhead {100*(b-a)/a:+.2f}% (medians of 5 interleaved runs, 200 steps)")
PY
)
fi

"$BUILD/bin/autograph" bench --reps 5 >"$OUT/bench.txt" 2>"$OUT/bench.err"
bench_rc=$?

echo
echo "==== autograph GPU suite: $(head -1 "$OUT/gpu.txt") ===="
echo "ctest: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1) (rc $ctest_rc)"
echo "launch coverage (hooks vs CUPTI), from the Bats tests:"
sed 's/^coverage /  /' "$AG_SUMMARY" | column -t
echo "pass-through overhead, PyTorch MLP step: $overhead"
echo "autograph bench (rc $bench_rc):"
cat "$OUT/bench.txt"
