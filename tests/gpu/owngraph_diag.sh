#!/usr/bin/env bash
# A PyTorch program that graphs itself, under the shim with each CUPTI setting: torch_mlp.py --graph (the
# step captured whole by the program) or OWN_ARGS. Not a test (nothing is asserted); on the GPU machine:
#   bash tests/gpu/owngraph_diag.sh [STEPS]
# Per setting: the exit status, whether the losses match the plain run's, the error the program died of,
# and the shim's debug lines about CUPTI and the program's captures and graph launches (first 12).
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/shim_built.sh
steps=${1:-30}
args=(${OWN_ARGS:---graph})
T=$(mktemp -d)
python3 tests/python/torch_mlp.py --steps "$steps" "${args[@]}" >"$T/plain.out" 2>"$T/plain.err"
echo "plain: rc $?"
for setting in ${OWN_SETTINGS:-- AUTOGRAPH_CUPTI=off AUTOGRAPH_CUPTI_DETACH=inline AUTOGRAPH_CUPTI_TIMING=off AUTOGRAPH_CUPTI=always AUTOGRAPH_SCOPE=off}; do
    env=()
    [ "$setting" = - ] || env=(${setting//,/ })
    env "${env[@]}" LD_PRELOAD=$lib AUTOGRAPH_LOG=debug AUTOGRAPH_STATS=$T/s.json python3 tests/python/torch_mlp.py \
        --steps "$steps" "${args[@]}" >"$T/shim.out" 2>"$T/shim.err"
    rc=$?
    same=no
    cmp -s "$T/plain.out" "$T/shim.out" && same=yes
    echo "== $setting: rc $rc, identical $same, steps printed $(grep -c '^step' "$T/shim.out")"
    grep -m1 -E "Error|error:" "$T/shim.err"
    grep -E "CUPTI (attached|detached|finalized|observer)|program's own|fallback|disabled" "$T/shim.err" | head -12
done
