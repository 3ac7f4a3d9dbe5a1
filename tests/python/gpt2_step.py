"""Hugging Face GPT-2 training loop for autograph: 4 layers, width 256, built from a config (no
download), trained on random tokens with AdamW; dropout on, loss.item() every step.

Same contract as torch_mlp.py: stdout "step <i> loss <float.hex()>" per step and
"checksum: <16 hex>" (sha256 of the parameters), stderr "loop_ms: <float>" and "steady_ms: <float>"
(without the first step). --compile wraps the model in torch.compile; there is no --graph
("graph: unsupported" on stderr, exit 2).
"""
import argparse
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import transformers  # noqa: E402
from report import deterministic, parse_args, report, timed_steps  # noqa: E402

BATCH, SEQ = 8, 128


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile", action="store_true")
    args = parse_args(ap)

    deterministic(args.seed)
    dev = torch.device("cuda")

    config = transformers.GPT2Config(n_layer=4, n_embd=256, n_head=4, vocab_size=1024, n_positions=128,
                                      bos_token_id=0, eos_token_id=0)
    config.loss_type = "ForCausalLM"
    # The plain attention implementation: its backward is deterministic, unlike fused SDPA kernels.
    config._attn_implementation = "eager"
    model = transformers.GPT2LMHeadModel(config).to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, foreach=True)
    tokens = torch.randint(0, config.vocab_size, (4, BATCH, SEQ), device=dev)
    step_model = torch.compile(model) if args.compile else model

    losses = []

    def step(i):
        ids = tokens[i % tokens.shape[0]]
        opt.zero_grad(set_to_none=True)
        loss = step_model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        losses.append(loss.item())

    ms, steady_ms = timed_steps(args.steps, step)
    report(losses, model.parameters(), ms, steady_ms)


if __name__ == "__main__":
    main()
