"""torch_geometric GCN training loop for autograph: two GCNConv layers with dropout on a random graph
(fixed seed, no download), full-batch node classification with AdamW, loss.item() every step.

Message passing scatters edge messages into nodes (index and scatter kernels whose grids follow the edge
count) and normalizes the adjacency again every step (gcn_norm, not cached): a launch stream unlike the
MLP's GEMM chain; the loss over the training mask (out[train]) syncs in the middle of every step, as
PyG programs do. Deterministic algorithms are asked for, so that the scatter sums run in a fixed order
(the Bats test compares two plain runs first, and skips where they differ).

Same contract as torch_mlp.py: stdout "step <i> loss <float.hex()>" per step and "checksum: <16 hex>"
(sha256 of the parameters), stderr "loop_ms: <float>" and "steady_ms: <float>" (without the first step).
There is no --graph ("graph: unsupported" on stderr, exit 2). --ab B: the A/B within one process, as in
torch_mlp.py (report.ab_steps; stderr "ab_step_us: shim <median> paused <median> blocks <n>").
"""
import argparse
import os

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import torch  # noqa: E402
from report import add_ab_option, deterministic, parse_args, run_and_report  # noqa: E402

NODES, EDGES, FEATURES, HIDDEN, CLASSES = 4096, 32768, 64, 128, 8


def main():
    ap = argparse.ArgumentParser()
    add_ab_option(ap)
    args = parse_args(ap)

    from torch_geometric.nn import GCNConv

    deterministic(args.seed)
    dev = torch.device("cuda")

    x = torch.randn(NODES, FEATURES, device=dev)
    edge_index = torch.randint(0, NODES, (2, EDGES), device=dev)
    y = torch.randint(0, CLASSES, (NODES,), device=dev)
    train = torch.rand(NODES, device=dev) < 0.5

    class GCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = GCNConv(FEATURES, HIDDEN)
            self.conv2 = GCNConv(HIDDEN, CLASSES)

        def forward(self, x, edge_index):
            h = torch.nn.functional.dropout(x, p=0.2, training=self.training)
            h = torch.relu(self.conv1(h, edge_index))
            h = torch.nn.functional.dropout(h, p=0.5, training=self.training)
            return self.conv2(h, edge_index)

    model = GCN().to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
    losses = []

    def step(i):
        opt.zero_grad(set_to_none=True)
        out = model(x, edge_index)
        loss = torch.nn.functional.cross_entropy(out[train], y[train])
        loss.backward()
        opt.step()
        losses.append(loss.item())

    run_and_report(args, step, losses, model.parameters())


if __name__ == "__main__":
    main()
