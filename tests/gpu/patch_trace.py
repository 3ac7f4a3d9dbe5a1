#!/usr/bin/env python3
"""Which kernel arguments a replay patches, and how they change: reads the stderr of a run with
AUTOGRAPH_LOG=trace (one "patch graph G node I kernel K: ..." line per patched kernel node) and prints,
per node, how often it was patched, how many distinct argument blocks it took, and whether they take
turns (the block of P patches before comes back: P = 2..4) or are ever new. Not a test.
    AUTOGRAPH_LOG=trace LD_PRELOAD=build/lib/libautograph.so python3 train.py 2>trace.txt
    python3 tests/gpu/patch_trace.py trace.txt
"""
import collections
import re
import sys

LINE = re.compile(r"patch graph (\S+) node (\d+) kernel (\S+): (\d+) of (\d+) bytes changed in \[(\d+), (\d+)\], "
                  r"new bytes (\S+)")


def period(seq):
    """The smallest P in 1..4 such that most blocks equal the one P patches before; 0: none."""
    for p in range(1, 5):
        if len(seq) > 2 * p:
            same = sum(seq[k] == seq[k - p] for k in range(p, len(seq)))
            if same >= 0.9 * (len(seq) - p):
                return p
    return 0


def main():
    nodes = collections.OrderedDict()
    for line in open(sys.argv[1], errors="replace"):
        m = LINE.search(line)
        if m:
            g, i, k, nb, total, first, last, h = m.groups()
            n = nodes.setdefault((g, int(i)), {"kernel": k, "total": int(total), "blocks": [], "spans": set()})
            n["blocks"].append(h)
            n["spans"].add((int(first), int(last), int(nb)))
    if not nodes:
        print("no patch lines (AUTOGRAPH_LOG=trace?)")
        return
    by_kind = collections.Counter()
    bytes_by_kind = collections.Counter()
    for (g, i), n in nodes.items():
        b = n["blocks"]
        p = period(b)
        kind = "ever new" if len(set(b)) > 0.9 * len(b) else f"period {p}" if p else f"{len(set(b))} values"
        by_kind[kind] += len(b)
        bytes_by_kind[kind] += len(b) * n["total"]
        spans = sorted(n["spans"])
        print(f"graph {g} node {i:3d} kernel {n['kernel']}: {len(b)} patches, {n['total']} B, {len(set(b))} distinct "
              f"-> {kind}; changed bytes {spans[:3]}{' ...' if len(spans) > 3 else ''}")
    total = sum(by_kind.values())
    print("patches by kind: " + ", ".join(f"{k} {v} ({100.0 * v / total:.0f}%, {bytes_by_kind[k] / v:.0f} B each)"
                                          for k, v in by_kind.most_common()))


if __name__ == "__main__":
    main()
