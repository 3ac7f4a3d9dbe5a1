"""A small residual CNN trained for autograph: cuDNN's convolutions (forward, backward data, backward
filter), batch norm in training mode (running statistics updated every step), ReLU, residual adds,
strided convolutions to go down in size, a mean over the pixels, dropout and a linear head, with AdamW
(foreach) and loss.item() every step. Four batches of random images (fixed seed, no download) are
taken in turn, so the input's address changes from step to step.

What it puts in front of the shim, beside the MLP's cuBLAS chain: the kernels of cuDNN's convolution
engines (each launched with its own grid and argument layout), batch norm's per-channel kernels and
their running-statistics updates, and a launch stream of about 300 launches a step.

--channels-last: the model and the images in NHWC memory format (cuDNN's NHWC kernels);
--bf16: the forward under bf16 autocast (cuDNN's and cuBLAS's reduced-precision kernels, the casts).

Same contract as torch_mlp.py: stdout "step <i> loss <float.hex()>" per step and "checksum: <16 hex>"
(sha256 of the parameters, then of the batch norms' running statistics), stderr "loop_ms: <float>" and
"steady_ms: <float>". There is no --graph ("graph: unsupported" on stderr, exit 2). --ab B: the A/B
within one process, as in torch_mlp.py.
"""
import argparse
import contextlib
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from report import add_ab_option, deterministic, parse_args, run_and_report  # noqa: E402

BATCH, SIZE, CLASSES, BATCHES = 64, 32, 10, 4
WIDTHS = (32, 64, 128)  # channels of the three stages; the second and third halve the size


class Block(torch.nn.Module):
    """Two 3x3 convolutions with batch norm, and the shortcut (a strided 1x1 convolution where the size
    or the width changes)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = torch.nn.BatchNorm2d(cout)
        self.c2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = torch.nn.BatchNorm2d(cout)
        self.short = None
        if stride != 1 or cin != cout:
            self.short = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, 1, stride, bias=False),
                                             torch.nn.BatchNorm2d(cout))

    def forward(self, x):
        h = F.relu(self.b1(self.c1(x)))
        h = self.b2(self.c2(h))
        return F.relu(h + (x if self.short is None else self.short(x)))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(torch.nn.Conv2d(3, WIDTHS[0], 3, 1, 1, bias=False),
                                        torch.nn.BatchNorm2d(WIDTHS[0]), torch.nn.ReLU())
        blocks, cin = [], WIDTHS[0]
        for i, w in enumerate(WIDTHS):
            blocks.append(Block(cin, w, 1 if i == 0 else 2))
            cin = w
        self.blocks = torch.nn.Sequential(*blocks)
        self.head = torch.nn.Linear(WIDTHS[-1], CLASSES)

    def forward(self, x):
        h = self.blocks(self.stem(x))
        # the mean over the pixels, not adaptive pooling: its backward has no deterministic CUDA kernel
        h = h.mean(dim=(2, 3))
        return self.head(F.dropout(h, p=0.2, training=self.training))


def main():
    ap = argparse.ArgumentParser()
    add_ab_option(ap)
    ap.add_argument("--channels-last", action="store_true", help="NHWC model and images")
    ap.add_argument("--bf16", action="store_true", help="the forward under bf16 autocast")
    args = parse_args(ap)

    deterministic(args.seed)
    dev = torch.device("cuda")
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format

    images = [torch.randn(BATCH, 3, SIZE, SIZE, device=dev).contiguous(memory_format=fmt) for _ in range(BATCHES)]
    labels = [torch.randint(0, CLASSES, (BATCH,), device=dev) for _ in range(BATCHES)]
    model = Net().to(dev).to(memory_format=fmt)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    losses = []

    def autocast():
        if args.bf16:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def step(i):
        opt.zero_grad(set_to_none=True)
        with autocast():
            out = model(images[i % BATCHES])
            loss = F.cross_entropy(out.float(), labels[i % BATCHES])
        loss.backward()
        opt.step()
        losses.append(loss.item())

    # the running statistics are the batch norms' state too: a wrong update shows in the checksum
    run_and_report(args, step, losses, list(model.parameters()) + list(model.buffers()))


if __name__ == "__main__":
    main()
