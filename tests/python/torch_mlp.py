"""PyTorch training loop for autograph: an 8-layer MLP (width 512, batch 256) with dropout and AdamW.

Run it with and without LD_PRELOAD=libautograph.so; stdout must be bit-identical (eager and --compile).
stdout: "step <i> loss <float.hex()>" per step, then "checksum: <16 hex>" (sha256 of the parameters).
stderr: "loop_ms: <float>" for the training loop and "steady_ms: <float>" without its first step.
--graph is the hand-written torch.cuda.graphs ceiling; its losses differ (warm-up steps), so it prints
"graph-mode" and must not be compared with an eager run (only with another --graph run).
--graphed-model graphs the model's forward and backward passes with torch.cuda.make_graphed_callables (the
partial graphs of Megatron-LM and Transformer Engine); the loss, its backward and AdamW stay eager. Its losses
differ from an eager run's too (the capture's warm-up), and it prints "graphed-model".
--compile-mode reduce-overhead (with --compile): torch.compile's CUDA graphs (cudagraph trees).
--profile runs the steps under torch.profiler (CPU and CUDA activities: Kineto takes CUPTI, which the
shim must leave to it) and adds "profiled_cuda_events: <n>" on stderr.
--ab B (under the shim) compares within the one process: after report.AB_WARM steps, blocks of B steps run with
the shim and paused (its autograph_pause: every call straight to the driver) in turn, switched after a
step's loss.item(); stderr gets "ab_step_us: shim <median> paused <median> blocks <n>" (each block's first
step left out). The losses stay bit-identical to a plain run.
--event-timing times each step with two CUDA timing events too (stderr: "event_step_ms: <median>").
--checkpoint runs the model as four checkpointed blocks (torch.utils.checkpoint, non-reentrant): the backward
pass recomputes each block's forward, dropout included, after restoring the CUDA generator's seed and offset
(the dropout kernels get an offset they had before); the losses are those of a plain run.
--pinned-loss reads each step's loss through page-locked memory (a non_blocking device-to-host copy, then
a stream sync) instead of loss.item(): the losses are the same.
--device DEV trains on DEV (default: the current device); --touch DEV first makes a tensor on DEV (another
GPU's context is then the first one the process uses); --split puts the first half of the layers on cuda:0
and the rest on cuda:1 (a pipeline of two GPUs in one process: the activations and their gradients cross
between the devices every step, the backward pass runs on a thread per device); --data-parallel wraps the
model in torch.nn.DataParallel over cuda:0 and cuda:1 (a replica per GPU, each run by a thread of its
own, the gradients summed on cuda:0).
"""
import argparse
import contextlib
import os
import statistics
import sys

# Must be set before torch initializes cuBLAS, or deterministic algorithms refuse to run.
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from report import ab_report, ab_steps, add_ab_option, deterministic, report, timed_steps, timed_sync  # noqa: E402

WIDTH, BATCH, LAYERS, OUT, POOL = 512, 256, 8, 16, 8


def make_model():
    layers = []
    for _ in range(LAYERS - 1):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU(), torch.nn.Dropout(p=0.1)]
    layers.append(torch.nn.Linear(WIDTH, OUT))
    return torch.nn.Sequential(*layers)


def host_batches(xs, ys, dev, args):
    """--loader: batch(i) gives the next batch of a DataLoader over the pool's samples on the host."""
    from torch.utils.data import DataLoader, TensorDataset
    data = TensorDataset(xs.reshape(-1, WIDTH).cpu(), ys.reshape(-1, OUT).cpu())
    loader = DataLoader(data, batch_size=BATCH, shuffle=True, drop_last=True, num_workers=2,
                        persistent_workers=True, pin_memory=args.loader == "pinned",
                        generator=torch.Generator().manual_seed(args.seed))
    nb = args.loader != "sync"

    def endless():
        while True:
            yield from loader

    it = endless()

    def batch(_i):
        x, y = next(it)
        return x.to(dev, non_blocking=nb), y.to(dev, non_blocking=nb)
    return batch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compile", action="store_true", help="wrap the model in torch.compile")
    ap.add_argument("--graph", action="store_true", help="hand-captured torch.cuda.graphs ceiling")
    ap.add_argument("--graphed-model", action="store_true",
                    help="the model's forward and backward as CUDA graphs of its own (make_graphed_callables)")
    ap.add_argument("--compile-mode", default="default", choices=["default", "reduce-overhead"],
                    help="torch.compile's mode (with --compile; reduce-overhead: its CUDA graphs)")
    ap.add_argument("--profile", action="store_true", help="run the steps under torch.profiler")
    ap.add_argument("--pinned-loss", action="store_true",
                    help="read each step's loss through page-locked memory (a non_blocking copy, then a "
                         "stream sync) instead of loss.item()")
    ap.add_argument("--event-timing", action="store_true",
                    help="time each step with CUDA events (enable_timing) as well; stderr gets "
                         "event_step_ms: <median>")
    ap.add_argument("--device", default="cuda", help="the device to train on")
    ap.add_argument("--touch", default=None, metavar="DEV", help="a tensor on DEV before anything else")
    ap.add_argument("--split", action="store_true", help="half the layers on cuda:0, half on cuda:1")
    ap.add_argument("--data-parallel", action="store_true", help="torch.nn.DataParallel over cuda:0 and cuda:1")
    ap.add_argument("--loader", choices=["pinned", "pageable", "sync"], default=None,
                    help="batches from host memory through a DataLoader (see above)")
    ap.add_argument("--checkpoint", action="store_true",
                    help="the model as checkpointed blocks whose forward the backward pass recomputes")
    add_ab_option(ap)
    args = ap.parse_args()
    if args.steps < 1:
        sys.exit("--steps must be >= 1")
    if sum((args.compile, args.graph, args.graphed_model)) > 1:
        sys.exit("--compile, --graph and --graphed-model are exclusive")
    if args.compile_mode != "default" and not args.compile:
        sys.exit("--compile-mode needs --compile")
    own = args.compile or args.graph or args.graphed_model
    if args.split and (own or args.device != "cuda"):
        sys.exit("--split takes neither --compile, --graph, --graphed-model nor --device")
    if args.data_parallel and (args.split or own or args.device != "cuda"):
        sys.exit("--data-parallel takes neither --split, --compile, --graph, --graphed-model nor --device")
    if args.loader and (own or args.split or args.data_parallel):
        sys.exit("--loader takes neither --compile, --graph, --graphed-model, --split nor --data-parallel")
    if args.checkpoint and (own or args.split or args.data_parallel):
        sys.exit("--checkpoint takes neither --compile, --graph, --graphed-model, --split nor --data-parallel")
    if (args.split or args.data_parallel) and torch.cuda.device_count() < 2:
        sys.exit("--split and --data-parallel need two GPUs")
    if args.touch:
        torch.ones(4, device=args.touch).sum().item()  # that device's context is the process's first

    deterministic(args.seed)
    devs = [torch.device("cuda:0"), torch.device("cuda:1")] if args.split else [torch.device(args.device)]
    if args.data_parallel:
        devs = [torch.device("cuda:0")]
    dev = devs[0]
    if devs[-1].index is not None:
        torch.cuda.set_device(devs[-1])  # the loss's device: loss.item() and the timing events use its stream

    model = make_model()
    half = len(model) // 2 if args.split else len(model)
    model[:half].to(devs[0])
    model[half:].to(devs[-1])
    # A small pool of batches generated on the GPU: eager steps see alternating input addresses.
    xs = torch.randn(POOL, BATCH, WIDTH, device=dev)
    proj = torch.randn(WIDTH, OUT, device=dev) / WIDTH ** 0.5
    ys = torch.sin(xs @ proj).to(devs[-1])
    losses = []
    event_ms = []  # --event-timing
    batch = lambda i: (xs[i % POOL], ys[i % POOL])  # noqa: E731
    if args.loader:
        batch = host_batches(xs, ys, dev, args)

    if args.graph:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True, capturable=True)
        static_x, static_y = xs[0].clone(), ys[0].clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                opt.zero_grad(set_to_none=True)
                F.mse_loss(model(static_x), static_y).backward()
                opt.step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = F.mse_loss(model(static_x), static_y)
            static_loss.backward()
            opt.step()
        def step(i):
            static_x.copy_(xs[i % POOL])
            static_y.copy_(ys[i % POOL])
            graph.replay()
            losses.append(timed_sync(static_loss.item))
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
        step_model = torch.compile(model, mode=args.compile_mode) if args.compile else model
        if args.graphed_model:
            # captured before the loop (after warm-up passes on a side stream); every call replays the
            # forward graph, and autograd the backward one, on the current stream
            step_model = torch.cuda.make_graphed_callables(model, (xs[0].clone(),))
        if args.data_parallel:
            step_model = torch.nn.DataParallel(model, device_ids=[0, 1])
        if args.checkpoint:
            from torch.utils.checkpoint import checkpoint
            blocks = [model[k:k + 6] for k in range(0, len(model), 6)]  # two layers (Linear, ReLU, Dropout) each

            def step_model(x):
                for b in blocks:
                    x = checkpoint(b, x, use_reentrant=False)
                return x
        if args.split:
            def step_model(x):
                return model[half:](model[:half](x).to(devs[1]))
        # --pinned-loss: two page-locked slots in turn (the copy's destination moves every step)
        pinned = torch.empty(2, pin_memory=True) if args.pinned_loss else None

        def read_pinned(loss, i):
            pinned[i % 2].copy_(loss.detach(), non_blocking=True)
            torch.cuda.current_stream().synchronize()
            return pinned[i % 2].item()

        # --event-timing: the step between two timing events, read after the step's sync
        events = [torch.cuda.Event(enable_timing=True) for _ in range(2)] if args.event_timing else None

        def step(i):
            if events:
                events[0].record()
            opt.zero_grad(set_to_none=True)
            x, y = batch(i)
            loss = F.mse_loss(step_model(x), y)
            loss.backward()
            opt.step()
            if events:
                events[1].record()
            if pinned is not None:
                losses.append(timed_sync(lambda: read_pinned(loss, i)))
            else:
                losses.append(timed_sync(loss.item))  # D2H copy + sync every step, like real training loops
            if events:
                event_ms.append(events[0].elapsed_time(events[1]))

    if args.ab > 0:
        step = ab_steps(step, args.ab)

    prof = None
    if args.profile:
        from torch.profiler import ProfilerActivity, profile
        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    with prof if prof is not None else contextlib.nullcontext():
        ms, steady_ms = timed_steps(args.steps, step)
    if args.graph:
        print("graph-mode")
    if args.graphed_model:
        print("graphed-model")
    if prof is not None:
        # Zero when the profiler got no CUDA activity (it could not take CUPTI).
        cuda = sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
        print(f"profiled_cuda_events: {cuda}", file=sys.stderr)

    report(losses, model.parameters(), ms, steady_ms)
    if event_ms:
        print(f"event_step_ms: {statistics.median(event_ms):.4f}", file=sys.stderr)
    if args.ab > 0:
        ab_report(args.steps, args.ab)


if __name__ == "__main__":
    main()
