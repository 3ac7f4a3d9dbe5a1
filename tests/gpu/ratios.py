#!/usr/bin/env python3
"""Ratios that tests/gpu/run.sh reports, read from the runs' outputs (never asserted: printed).
  ab_runs(text), ab_summary(text): the in-process A/B (the workloads' "ab_step_us: shim S paused P" lines, one a run):
    paused over shim, the median over the runs, with the medians of each and every run's ratio.
  ratios.py multi DIR: tests/gpu/multi_diag.sh's per-run files (DIR/MODE.CFG, one steady_ms a line): for
    each two-GPU mode, plain's median steady loop over the shim's and over CUPTI off's (above 1: faster).
  ratios.py amp DIR STEPS SAME: run.sh's part amp (torch_amp.py runs of STEPS steps: DIR/a_plain.err,
    a_all.err and a_all.json, a_ab.err; SAME: whether their outputs were identical): plain's median step
    over the shim's, the in-process A/B, and what the shim's statistics say of the replay."""
import json
import os
import re
import statistics
import sys


def ab_runs(text):
    """text's A/B runs: (shim, paused) median step times in us, one pair a run."""
    return [(float(x), float(y)) for x, y in re.findall(r"ab_step_us: shim ([0-9.]+) paused ([0-9.]+)", text)]


def ab_summary(text):
    """The A/B line of text's runs, or None where it has none."""
    ab = ab_runs(text)
    if not ab:
        return None
    return (f"A/B {statistics.median(y / x for x, y in ab):.3f}x (shim {statistics.median(x for x, _ in ab):.0f} us, "
            f"paused {statistics.median(y for _, y in ab):.0f} us; runs {', '.join(f'{y / x:.3f}' for x, y in ab)})")


def runs(d, mode, cfg):
    try:
        with open(os.path.join(d, f"{mode}.{cfg}")) as f:
            return [float(x) for x in f if x.strip()]
    except (OSError, ValueError):
        return []


def multi(d):
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
    return "; ".join(out)


def amp(d, steps, same):
    def med(name, key="step_us"):
        with open(os.path.join(d, name)) as f:
            return statistics.median(float(m) for m in re.findall(key + r": ([0-9.]+)", f.read()))
    p, a = med("a_plain.err"), med("a_all.err")
    with open(os.path.join(d, "a_all.json")) as f:
        s = json.load(f)
    with open(os.path.join(d, "a_ab.err")) as f:
        ab = ab_summary(f.read()) or "A/B -"
    r = s["replay"]
    fb = {k: v for k, v in r["fallbacks"].items() if v}
    line = (f"median step: plain {p:.0f} us, the shim {a:.0f} us ({p / a:.3f}x) | in-process, blocks of 10 steps: "
            f"{ab} | identical: {same} | replayed {replayed(s)} of {s['launches'] / steps:.0f} launches a step | graphs "
            f"built {r['graphs_built']}, variants {r['variants']} | fallbacks {fb or '-'} | probes {r['profit']} | "
            f"{r['host_ns_per_match']:.0f} ns per matched launch (median {r['host_ns_per_match_median']:.0f})")
    # the shim with other settings (run.sh's AMP_ALT), where it ran
    if os.path.exists(os.path.join(d, "a_alt.settings")):
        with open(os.path.join(d, "a_alt.settings")) as f:
            settings = f.read().strip()
        with open(os.path.join(d, "a_alt.json")) as f:
            t = json.load(f)
        alt = med("a_alt.err")
        line += (f" | with {settings}: {alt:.0f} us ({p / alt:.3f}x), replayed {replayed(t)}, graphs built "
                 f"{t['replay']['graphs_built']}")
    return line


def replayed(s):
    return f"{100.0 * s['replay']['launches_replayed'] / max(1, s['launches']):.1f}%"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "multi":
        print(multi(sys.argv[2]))
    elif len(sys.argv) == 5 and sys.argv[1] == "amp":
        print(amp(sys.argv[2], int(sys.argv[3]), sys.argv[4]))
    else:
        sys.exit("usage: ratios.py multi DIR | ratios.py amp DIR STEPS SAME")
