#!/usr/bin/env bats
# Several GPUs: PyTorch DistributedDataParallel, one process per GPU, gradients all-reduced by NCCL
# between the backward pass's kernels. Under the shim every rank's losses and the final parameters must
# be bit-identical to a plain run; NCCL's kernels are never held back (each one issues what was held
# before it), and the work between them is still replayed from graphs in every worker.

load helpers

@test "PyTorch DDP (NCCL, every GPU): bit-identical losses on every rank, replay in every worker" {
    python3 -c "import torch" 2>/dev/null || skip "python module torch is not installed"
    local d=$BATS_TEST_TMPDIR/ddp
    mkdir -p "$d"
    timeout 240 python3 "$SRC_DIR/tests/python/torch_ddp.py" --steps 60 >"$d/plain.out" 2>"$d/plain.err" ||
        { cat "$d/plain.err" >&2; return 1; }
    env LD_PRELOAD="$SHIM${LD_PRELOAD:+:$LD_PRELOAD}" AUTOGRAPH_STATS="$d/stats.%p.json" \
        timeout 240 python3 "$SRC_DIR/tests/python/torch_ddp.py" --steps 60 >"$d/shim.out" 2>"$d/shim.err" ||
        { cat "$d/shim.err" >&2; return 1; }
    same_output "$d"
    grep -q '^checksum: ' "$d/shim.out" # every rank ended with the same parameters
    # The workers' statistics (the launching processes; the parent launches nothing).
    local k=0 f
    for f in "$d"/stats.*.json; do
        [ "$(stat "$f" launches)" -gt 0 ] || continue
        mkdir -p "$d/w$k"
        cp "$f" "$d/w$k/stats.json"
        summary "$d/w$k" "ddp_worker$k"
        replayed_at_least "$d/w$k" 50 # 83.5-83.9% on two H200s
        k=$((k + 1))
    done
    echo "# $k workers; plain $(sed -n 's/^step_us: //p' "$d/plain.err") us, shim $(sed -n 's/^step_us: //p' "$d/shim.err") us per step (rank 0's median)" >&3
    [ "$k" -ge 2 ]
}
