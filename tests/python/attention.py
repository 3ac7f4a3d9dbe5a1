"""Fused attention with dropout for autograph: torch.nn.functional.scaled_dot_product_attention through
each fused backend PyTorch has on this GPU (flash, memory-efficient, cuDNN), causal, dropout 0.1, in bf16,
followed by a learned projection trained with AdamW. The fused kernels take the generator's seed and
offset in a parameter block of their own (or, with cuDNN, in device tensors written for each call), and
the offset grows at every call: replays must give the same dropout masks as eager.

stdout: "backends: <names>" (the fused backends that ran, probed before the loop), "step <i> loss <hex>"
per step (one loss per backend and step, the attention's output through the projection), and
"checksum: <16 hex>" (the projection's weights). --backward trains the projection through the attention's
backward pass too (the inputs get gradients); without it only the projection's own gradient flows.
"""
import argparse
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from report import deterministic, parse_args, report, timed_steps, timed_sync  # noqa: E402

BATCH, HEADS, SEQ, DIM, POOL = 4, 8, 256, 64, 4


def usable_backends(dev):
    """The fused backends that run a causal attention with dropout here (the same in every run)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    names = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION"}
    q = torch.randn(1, HEADS, 64, DIM, device=dev, dtype=torch.bfloat16)
    found = []
    for name, attr in names.items():
        b = getattr(SDPBackend, attr, None)
        if b is None:
            continue
        try:
            with sdpa_kernel(b):
                F.scaled_dot_product_attention(q, q, q, dropout_p=0.1, is_causal=True)
            torch.cuda.synchronize()
            found.append((name, b))
        except RuntimeError:
            pass
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backward", action="store_true", help="gradients through the attention too")
    args = parse_args(ap)
    deterministic(args.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)  # a fused backward may have no such mode
    dev = torch.device("cuda")
    from torch.nn.attention import sdpa_kernel

    backends = usable_backends(dev)
    print("backends: " + (" ".join(n for n, _ in backends) or "none"), flush=True)
    if not backends:
        return
    qkv = torch.randn(POOL, 3, BATCH, HEADS, SEQ, DIM, device=dev, dtype=torch.bfloat16)
    proj = torch.nn.Linear(DIM, DIM, device=dev, dtype=torch.bfloat16)
    opt = torch.optim.AdamW(proj.parameters(), lr=1e-3, foreach=True)
    losses = []

    def step(i):
        q, k, v = (t.detach().requires_grad_(args.backward) for t in qkv[i % POOL])
        for _, b in backends:
            opt.zero_grad(set_to_none=True)
            with sdpa_kernel(b):
                out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.1, is_causal=True)
            loss = proj(out).float().square().mean()
            loss.backward()
            opt.step()
            losses.append(timed_sync(loss.item))

    ms, steady_ms = timed_steps(args.steps, step)
    report(losses, proj.parameters(), ms, steady_ms)


if __name__ == "__main__":
    main()
