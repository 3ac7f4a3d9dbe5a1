"""Data-parallel training for autograph: the MLP of torch_mlp.py (dropout, AdamW) under
DistributedDataParallel, one process per GPU (all the GPUs of the machine, at least 2), NCCL's
all-reduce between them, `loss.item()` every step.

Run it with and without LD_PRELOAD=libautograph.so (the worker processes inherit it); stdout must be
bit-identical: "rank <r> step <i> loss <float.hex()>" for every rank and step, then one
"checksum: <16 hex>" of the parameters, which every rank must agree on ("checksums differ" otherwise).
stderr: "loop_ms: <float>" (rank 0's training loop) and "step_us: <float>" (its median step).
"""
import argparse
import os
import sys
import tempfile

# Must be set before torch initializes cuBLAS, or deterministic algorithms refuse to run.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
# No NVLink multicast (the test machines' rule: it can put a shared host's GPUs out of service).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import timed_steps, timed_sync, STEP_US  # noqa: E402
from torch_mlp import BATCH, OUT, POOL, WIDTH, make_model  # noqa: E402


def worker(rank, world, steps, port, outdir):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=torch.device("cuda", rank))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.use_deterministic_algorithms(True)
    dev = torch.device("cuda", rank)
    torch.manual_seed(0)  # the same initial model everywhere (DDP also broadcasts rank 0's)
    model = torch.nn.parallel.DistributedDataParallel(make_model().to(dev), device_ids=[rank])
    torch.manual_seed(1 + rank)  # each rank its own data and dropout masks
    xs = torch.randn(POOL, BATCH, WIDTH, device=dev)
    proj = torch.randn(WIDTH, OUT, device=dev) / WIDTH ** 0.5
    ys = torch.sin(xs @ proj)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    losses = []

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = F.mse_loss(model(xs[i % POOL]), ys[i % POOL])
        loss.backward()  # the gradients' all-reduce runs on NCCL's stream, ordered by events
        opt.step()
        losses.append(timed_sync(loss.item))

    ms, _ = timed_steps(steps, step)
    import hashlib
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    with open(os.path.join(outdir, f"rank{rank}.txt"), "w") as f:
        for i, loss in enumerate(losses):
            f.write(f"rank {rank} step {i} loss {float(loss).hex()}\n")
        f.write(f"checksum {h.hexdigest()[:16]}\n")
        if rank == 0:
            tail = sorted(STEP_US[len(STEP_US) // 10:])
            f.write(f"loop_ms {ms:.3f}\nstep_us {tail[len(tail) // 2] if tail else 0.0:.1f}\n")
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--port", type=int, default=0, help="the rendezvous port (0: a free one)")
    args = ap.parse_args()
    if not args.port:
        import socket
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            args.port = s.getsockname()[1]
    world = torch.cuda.device_count()
    if world < 2:
        sys.exit(f"needs at least 2 GPUs, found {world}")
    with tempfile.TemporaryDirectory() as outdir:
        mp.spawn(worker, args=(world, args.steps, args.port, outdir), nprocs=world, join=True)
        sums = set()
        for r in range(world):
            for line in open(os.path.join(outdir, f"rank{r}.txt")):
                key, _, value = line.rstrip("\n").partition(" ")
                if key == "checksum":
                    sums.add(value)
                elif key in ("loop_ms", "step_us"):
                    print(f"{key}: {value}", file=sys.stderr)
                else:
                    print(line, end="")
        print(f"checksum: {sums.pop()}" if len(sums) == 1 else f"checksums differ: {sorted(sums)}")


if __name__ == "__main__":
    main()
