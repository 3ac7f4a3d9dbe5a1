"""Text generation for autograph: a small Llama (4 layers, width 256, grouped-query attention, built from a
config: no download) in bf16 generates with Hugging Face's generate(), round after round from the same two
batches of prompts in turn. Each new token is a forward pass over a cache that grows by one position, and
generate() reads the tokens back at every one of them (its stopping check), so every token is a segment
of its own: with the default dynamic cache its shapes change from token to token and repeat only from
one round to the next; with --static (cache_implementation="static") the cache has a fixed size and
every token has the same shapes. --sample samples the tokens (top-k 50, seeded at each round) instead of
taking the most likely one: torch.multinomial draws from the generator, whose offset grows.

stdout: "round <r> tokens <16 hex>" (sha256 of the round's generated ids) per round, and "checksum: <16
hex>" of the model's weights; stderr: "loop_ms" and "steady_ms" (without the first round).
"""
import argparse
import hashlib
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
import transformers  # noqa: E402
from report import deterministic, parse_args, report, timed_steps  # noqa: E402

BATCH, PROMPT, NEW = 4, 16, 24


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--static", action="store_true", help="a cache of fixed size (the same shapes every token)")
    ap.add_argument("--sample", action="store_true", help="sample the tokens instead of the most likely")
    args = parse_args(ap)
    deterministic(args.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    transformers.logging.set_verbosity_error()
    dev = torch.device("cuda")

    config = transformers.LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=512,
                                      num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                                      max_position_embeddings=256, bos_token_id=0, eos_token_id=1,
                                      pad_token_id=0)
    model = transformers.LlamaForCausalLM(config).to(dev, dtype=torch.bfloat16).eval()
    prompts = torch.randint(2, config.vocab_size, (2, BATCH, PROMPT), device=dev)
    mask = torch.ones(BATCH, PROMPT, dtype=torch.long, device=dev)
    extra = {"cache_implementation": "static"} if args.static else {}
    if args.sample:
        extra.update(do_sample=True, top_k=50, temperature=1.0)
    else:
        extra.update(do_sample=False)
    rounds = []

    def step(r):
        if args.sample:
            torch.manual_seed(args.seed + r)
        with torch.no_grad():
            out = model.generate(input_ids=prompts[r % 2], attention_mask=mask, max_new_tokens=NEW,
                                 min_new_tokens=NEW, pad_token_id=0, **extra)
        ids = out[:, PROMPT:].cpu()
        rounds.append(hashlib.sha256(ids.numpy().tobytes()).hexdigest()[:16])

    ms, steady_ms = timed_steps(args.steps, step)
    for r, h in enumerate(rounds):
        print(f"round {r} tokens {h}")
    report([], model.parameters(), ms, steady_ms)


if __name__ == "__main__":
    main()
