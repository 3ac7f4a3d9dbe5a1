"""A PyTorch training loop written the way users write one, for autograph: a 6-layer MLP (LayerNorm,
GELU, dropout) trained with fp16 autocast and a GradScaler, gradient accumulation over two micro-batches,
micro-batch sizes drawn from six buckets in a seeded random order, gradient clipping, a learning-rate
schedule (warm-up, then cosine) and an evaluation pass under no_grad every few optimizer steps.

What it puts in front of the shim, beside torch_mlp.py's plain step:
- shapes from a small set in no fixed order (each bucket's work is its own variant, and more of them
  follow the same point of the step than the shim matches at once);
- a sync in the middle of the step (each micro-batch's loss.item()) and the scaler's own syncs
  (found_inf.item() in scaler.step, the scale's .item());
- control flow that depends on the GPU: a step whose gradients overflow fp16 is skipped (no optimizer
  kernels) and the scale halves; every GROWTH good steps it doubles again, so skips recur all along;
- scalars that change every step (the learning rate reaches the optimizer's kernels by value);
- the first micro-batch writes fresh gradients and the second adds to them (different kernels);
- evaluation (dropout off, no backward) between training steps.

stdout: per micro-batch "step <k> loss <hex>", per optimizer step "opt <i> scale <hex> lr <hex>", per
evaluation "eval <i> loss <hex>", then "checksum: <16 hex>" (sha256 of the parameters); bit-identical
with and without the shim. stderr: "skipped_steps: <n> last <i>" (optimizer steps the scaler skipped,
the last one's index), "buckets: <size>:<micro-batches> ...", and report.py's timings. One --steps is
one optimizer step (ACCUM micro-batches). --ab B: report.py's in-process A/B (blocks of B optimizer
steps with the shim and paused in turn, after report.AB_WARM steps); the output stays the same.
"""
import argparse
import math
import os
import random
import sys

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from report import ab_report, ab_steps, add_ab_option, deterministic, parse_args, report, timed_steps  # noqa: E402

WIDTH, LAYERS, OUT, POOL = 512, 6, 16, 8
BUCKETS = (256, 224, 192, 160, 128, 96)  # micro-batch sizes: more than the shim matches at once (4)
ACCUM = 2  # micro-batches per optimizer step
EVAL_EVERY = 10  # optimizer steps between evaluations
GROWTH = 12  # good steps before the scaler doubles its scale (PyTorch's default is 2000)
WARMUP = 10  # optimizer steps of linear learning-rate warm-up


def make_model():
    layers = []
    for _ in range(LAYERS - 1):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.LayerNorm(WIDTH), torch.nn.GELU(),
                   torch.nn.Dropout(p=0.1)]
    layers.append(torch.nn.Linear(WIDTH, OUT))
    return torch.nn.Sequential(*layers)


def main():
    ap = argparse.ArgumentParser()
    add_ab_option(ap, "optimizer steps")
    args = parse_args(ap)
    deterministic(args.seed)
    dev = torch.device("cuda")
    model = make_model().to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.01, foreach=True)
    total = args.steps

    def lr_at(i):
        if i < WARMUP:
            return (i + 1) / WARMUP
        return 0.5 * (1.0 + math.cos(math.pi * (i - WARMUP) / max(1, total - WARMUP)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    # A large first scale: the first steps overflow and are skipped, and a short growth interval makes
    # the scale climb back until a step overflows again, all through the run.
    scaler = torch.amp.GradScaler("cuda", init_scale=2.0 ** 20, growth_interval=GROWTH)
    xs = torch.randn(POOL, max(BUCKETS), WIDTH, device=dev)
    ys = torch.randint(0, OUT, (POOL, max(BUCKETS)), device=dev)
    x_eval = torch.randn(max(BUCKETS), WIDTH, device=dev)
    y_eval = torch.randint(0, OUT, (max(BUCKETS),), device=dev)
    order = random.Random(args.seed)
    per_bucket = dict.fromkeys(BUCKETS, 0)

    losses, lines = [], []
    skipped = [0, -1]  # how many, the last one
    k = [0]  # micro-batches so far

    def step(i):
        for _ in range(ACCUM):
            b = order.choice(BUCKETS)
            per_bucket[b] += 1
            j = k[0] % POOL
            k[0] += 1
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(model(xs[j, :b]), ys[j, :b]) / ACCUM
            scaler.scale(loss).backward()
            losses.append(loss.item())
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
        before = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        lr = opt.param_groups[0]["lr"]
        sched.step()
        scale = scaler.get_scale()
        if scale < before:
            skipped[0] += 1
            skipped[1] = i
        lines.append(f"opt {i} scale {float(scale).hex()} lr {float(lr).hex()}")
        if (i + 1) % EVAL_EVERY == 0:
            model.eval()
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
                ev = F.cross_entropy(model(x_eval), y_eval)
            lines.append(f"eval {i} loss {float(ev.item()).hex()}")
            model.train()

    ms, steady_ms = timed_steps(args.steps, ab_steps(step, args.ab) if args.ab else step)
    for line in lines:
        print(line)
    print(f"skipped_steps: {skipped[0]} last {skipped[1]}", file=sys.stderr)
    print("buckets: " + " ".join(f"{b}:{n}" for b, n in per_bucket.items()), file=sys.stderr)
    report(losses, model.parameters(), ms, steady_ms)
    if args.ab:
        ab_report(args.steps, args.ab)


if __name__ == "__main__":
    main()
