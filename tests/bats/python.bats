#!/usr/bin/env bats
# Python workloads on the GPU (PyTorch eager with cuBLAS, torch.compile with Triton, CuPy): identical
# results with and without the shim, and every launch CUPTI saw reached a hook.

load helpers

need() {
    python3 -c "import $1" 2>/dev/null || skip "python module $1 is not installed"
}

@test "PyTorch eager training step: identical losses, every launch seen" {
    need torch
    AUTOGRAPH_CUPTI=always run_pair "$BATS_TEST_TMPDIR/eager" python3 "$SRC_DIR/tests/python/torch_mlp.py" --steps 20
    same_output "$BATS_TEST_TMPDIR/eager"
    coverage_ok "$BATS_TEST_TMPDIR/eager" torch_eager
    [ "$(stat "$BATS_TEST_TMPDIR/eager/stats.json" calls.cuLaunchKernelEx)" != null ]  # cuBLASLt
}

@test "PyTorch MLP with dropout, 200 steps: bit-identical losses, most launches replayed" {
    need torch
    run_pair "$BATS_TEST_TMPDIR/mlp200" python3 "$SRC_DIR/tests/python/torch_mlp.py" --steps 200
    same_output "$BATS_TEST_TMPDIR/mlp200"
    summary "$BATS_TEST_TMPDIR/mlp200" torch_mlp_200
    replayed_at_least "$BATS_TEST_TMPDIR/mlp200" 90
}

@test "GPT-2 (4 layers) training steps: identical losses" {
    need torch
    need transformers
    run_pair "$BATS_TEST_TMPDIR/gpt2" python3 "$SRC_DIR/tests/python/gpt2_step.py" --steps 30
    same_output "$BATS_TEST_TMPDIR/gpt2"
    summary "$BATS_TEST_TMPDIR/gpt2" gpt2
}

@test "torch.compile training step (Triton): identical losses, every launch seen" {
    need torch
    need triton
    AUTOGRAPH_CUPTI=always run_pair "$BATS_TEST_TMPDIR/compile" python3 "$SRC_DIR/tests/python/torch_mlp.py" --steps 20 --compile
    same_output "$BATS_TEST_TMPDIR/compile"
    coverage_ok "$BATS_TEST_TMPDIR/compile" torch_compile
}

@test "CuPy loop: identical result, every launch seen" {
    need cupy
    AUTOGRAPH_CUPTI=always run_pair "$BATS_TEST_TMPDIR/cupy" python3 "$SRC_DIR/tests/python/cupy_loop.py" --iters 20
    same_output "$BATS_TEST_TMPDIR/cupy"
    coverage_ok "$BATS_TEST_TMPDIR/cupy" cupy_loop
}
