#!/usr/bin/env python3
"""Reads tests/gpu/multi_diag.sh's per-run files (DIR/MODE.CFG: one steady_ms a line) and prints, for each
two-GPU mode, plain's median steady loop over the shim's and over CUPTI off's (above 1: faster than plain).
Usage: multi_ratio.py DIR"""
import os
import statistics
import sys


def runs(d, mode, cfg):
    try:
        with open(os.path.join(d, f"{mode}.{cfg}")) as f:
            return [float(x) for x in f if x.strip()]
    except (OSError, ValueError):
        return []


def main():
    d = sys.argv[1]
    out = []
    for mode in ("data-parallel", "split"):
        plain, shim, off = (runs(d, mode, c) for c in ("plain", "shim", "cupti_off"))
        if not plain or not shim:
            out.append(f"{mode} - (no runs)")
            continue
        p, s = statistics.median(plain), statistics.median(shim)
        line = f"{mode} {p / s:.3f}x (plain {p:.0f} ms, {min(plain):.0f}-{max(plain):.0f}; shim {s:.0f} ms"
        if off:
            line += f"; CUPTI off {p / statistics.median(off):.3f}x"
        out.append(line + f"; {len(shim)} runs)")
    print("; ".join(out))


if __name__ == "__main__":
    main()
