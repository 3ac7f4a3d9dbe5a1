#!/usr/bin/env bats
# Several CUDA contexts in one process, each replayed by an engine of its own: the driver_api sample in
# three contexts of one GPU (in turn in one thread, and a thread each), in 24 more contexts made and
# destroyed one after another (more than the 16 engines a process keeps), and on a machine with two GPUs a
# PyTorch MLP trained on the second GPU after a tensor on the first, one split over both GPUs, and one
# under torch.nn.DataParallel (a thread per GPU). Output identical with and without the shim, and every
# context's own work replayed from graphs (DataParallel's threads sync each other's engines at will:
# identical output is what it must show).

load helpers

gpus() {
    nvidia-smi -L 2>/dev/null | grep -c '^GPU '
}

# contexts_replayed DIR COUNT PERCENT: COUNT contexts had an engine, each replayed at least PERCENT of
# the launches it deferred or ran (what replay.contexts lists per context).
contexts_replayed() {
    python3 - "$1/stats.json" "$2" "$3" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
ctx = s["replay"]["contexts"]
for c in ctx:
    print(f"context on device {c['device']}: {c['launches_replayed']} launches replayed, "
          f"{c['launches_deferred']} operations held, {c['graph_launches']} graph launches")
want, least = int(sys.argv[2]), float(sys.argv[3])
ok = len(ctx) >= want and all(c["launches_replayed"] > 0 for c in ctx[:want])
sys.exit(0 if ok and 100.0 * s["replay"]["launches_replayed"] / max(1, s["launches"]) >= least else 1)
PY
}

@test "driver_api in three contexts in turn (one thread): identical output, every context replayed" {
    [ -x "$BIN/driver_api" ] || skip "$BIN/driver_api is not built (nvcc missing?)"
    run_pair "$BATS_TEST_TMPDIR/ctx3" "$BIN/driver_api" --iters 40 --contexts 3
    same_output "$BATS_TEST_TMPDIR/ctx3"
    summary "$BATS_TEST_TMPDIR/ctx3" driver_api_ctx3
    contexts_replayed "$BATS_TEST_TMPDIR/ctx3" 3 60
}

@test "driver_api in three contexts, a thread each: identical output, every context replayed" {
    [ -x "$BIN/driver_api" ] || skip "$BIN/driver_api is not built (nvcc missing?)"
    run_pair "$BATS_TEST_TMPDIR/ctx3t" "$BIN/driver_api" --iters 40 --contexts 3 --threads 1
    same_output "$BATS_TEST_TMPDIR/ctx3t"
    summary "$BATS_TEST_TMPDIR/ctx3t" driver_api_ctx3t
    contexts_replayed "$BATS_TEST_TMPDIR/ctx3t" 3 60
}

@test "driver_api in three contexts under the CUPTI guard throughout: identical output, every launch seen" {
    [ -x "$BIN/driver_api" ] || skip "$BIN/driver_api is not built (nvcc missing?)"
    AUTOGRAPH_CUPTI=always run_pair "$BATS_TEST_TMPDIR/ctx3g" "$BIN/driver_api" --iters 40 --contexts 3 --threads 1
    same_output "$BATS_TEST_TMPDIR/ctx3g"
    coverage_ok "$BATS_TEST_TMPDIR/ctx3g" driver_api_ctx3g
    contexts_replayed "$BATS_TEST_TMPDIR/ctx3g" 3 60
}

@test "driver_api in 24 more contexts, each made and destroyed in turn: identical output, the ones past 16 engines replayed too" {
    [ -x "$BIN/driver_api" ] || skip "$BIN/driver_api is not built (nvcc missing?)"
    local d=$BATS_TEST_TMPDIR/lives
    run_pair "$d" "$BIN/driver_api" --iters 20 --lives 24
    same_output "$d"
    grep -q "^lives: 24" "$d/shim.out"
    summary "$d" driver_api_lives
    # the primary context's engine, and 15 more taken over by later contexts as earlier ones ended: the
    # last 15 lives hold them at exit, and each replayed
    contexts_replayed "$d" 16 60
    [ "$(stat "$d/stats.json" replay.contexts_retired)" -ge 9 ]
}

@test "PyTorch MLP on the second GPU after a tensor on the first, 200 steps: bit-identical losses, replayed" {
    python3 -c "import torch" 2>/dev/null || skip "python module torch is not installed"
    [ "$(gpus)" -ge 2 ] || skip "needs 2 GPUs, this machine has $(gpus)"
    local d=$BATS_TEST_TMPDIR/second
    run_pair "$d" python3 "$SRC_DIR/tests/python/torch_mlp.py" --steps 200 --device cuda:1 --touch cuda:0
    same_output "$d"
    summary "$d" torch_mlp_second_gpu
    # the first context (cuda:0's, one kernel) has an engine too; the training is the second one's
    [ "$(python3 -c "import json; print(len(json.load(open('$d/stats.json'))['replay']['contexts']))")" -ge 2 ]
    replayed_at_least "$d" 90
}

@test "PyTorch MLP split over two GPUs in one process, 200 steps: bit-identical losses, both GPUs replayed" {
    python3 -c "import torch" 2>/dev/null || skip "python module torch is not installed"
    [ "$(gpus)" -ge 2 ] || skip "needs 2 GPUs, this machine has $(gpus)"
    local d=$BATS_TEST_TMPDIR/split
    run_pair "$d" python3 "$SRC_DIR/tests/python/torch_mlp.py" --steps 200 --split
    same_output "$d"
    summary "$d" torch_mlp_split
    echo "# split: plain $(sed -n 's/^steady_ms: //p' "$d/plain.err") ms, shim $(sed -n 's/^steady_ms: //p' "$d/shim.err") ms (steady)" >&3
    contexts_replayed "$d" 2 50
}

@test "PyTorch MLP under torch.nn.DataParallel over two GPUs (a thread per replica), 100 steps: bit-identical losses" {
    python3 -c "import torch" 2>/dev/null || skip "python module torch is not installed"
    [ "$(gpus)" -ge 2 ] || skip "needs 2 GPUs, this machine has $(gpus)"
    local d=$BATS_TEST_TMPDIR/dp
    run_pair "$d" python3 "$SRC_DIR/tests/python/torch_mlp.py" --steps 100 --data-parallel
    same_output "$d"
    summary "$d" torch_mlp_dp
    echo "# data-parallel: plain $(sed -n 's/^steady_ms: //p' "$d/plain.err") ms, shim $(sed -n 's/^steady_ms: //p' "$d/shim.err") ms (steady)" >&3
    contexts_replayed "$d" 2 0
}
