#!/usr/bin/env bash
# What breaks the shim's match in a PyTorch program: AUTOGRAPH_LOG=trace names each mismatch's place (chunk
# position, segment operation), the operation that came and the one the first candidate's graph holds
# there; counted here by those (streams and sighting counts folded), the most frequent first, with the
# program's captures and graph launches and CUPTI's windows among them. Not a test; on the GPU machine:
#   bash tests/gpu/mismatch_diag.sh [STEPS] [ARGS...]   (default: 100 steps of torch_mlp.py --graphed-model)
# Then the operations, barriers and mismatches around the 50th mismatch, as they came.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/shim_built.sh
steps=${1:-100}
shift || true
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--graphed-model)
T=$(mktemp -d)
LD_PRELOAD=$lib AUTOGRAPH_LOG=trace AUTOGRAPH_STATS=$T/s.json python3 tests/python/torch_mlp.py --steps "$steps" \
    "${args[@]}" 2>"$T/err" >/dev/null
echo "rc $?; fallbacks: $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['replay']['fallbacks'])" "$T/s.json")"
grep -E "no candidate|CUPTI (at|de)tached|program's own" "$T/err" |
    sed -E 's/^autograph: [a-z]+: \[[0-9.]+ ms\] //; s/stream 0x[0-9a-f]+/stream S/g; s/seen [0-9]+/seen N/' |
    sed -E 's/(CUPTI (at|de)tached).*/\1/' | sort | uniq -c | sort -rn | head -40
# The sequence around the 50th mismatch (each operation, barrier and mismatch at trace level)
grep -E "engine [0-9]+: (operation|barrier|no candidate)" "$T/err" | sed -E 's/^autograph: trace: //' >"$T/seq"
n=$(grep -n "no candidate" "$T/seq" | sed -n 50p | cut -d: -f1)
[ -n "$n" ] && { echo "== around the 50th mismatch (line $n)"; sed -n "$((n > 80 ? n - 80 : 1)),$((n + 10))p" "$T/seq" | cut -c1-260; }
