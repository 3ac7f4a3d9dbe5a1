#!/usr/bin/env python3
"""Ratios that tests/gpu/run.sh reports, read from the runs' outputs (never asserted: printed).
  ab_runs(text), ab_summary(text): the in-process A/B (the workloads' "ab_step_us: shim S paused P" lines, one a run):
    paused over shim, the median over the runs, with the medians of each and every run's ratio.
  ratios.py multi DIR: tests/gpu/multi_diag.sh's per-run files (DIR/MODE.CFG, one steady_ms a line): for
    each two-GPU mode, plain's median steady loop over the shim's and over CUPTI off's (above 1: faster).
  ratios.py amp DIR STEPS SAME: run.sh's part amp (torch_amp.py runs of STEPS steps: DIR/a_plain.err,
    a_all.err and a_all.json, a_ab.err; SAME: whether their outputs were identical): plain's median step
    over the shim's, the in-process A/B, and what the shim's statistics say of the replay.
  ratios.py gen DIR: run.sh's part gen (py_diag.sh rounds with PASSTHRU=1 in DIR/rep*/run1): plain's median
    steady loop over the shim's and over pass-through's, whether every output was identical, the syncs'
    driver time (their wait for the GPU) and engine time under each, the engine's long eager launches."""
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


def steady_ms(path):
    try:
        with open(path) as f:
            m = re.search(r"steady_ms: ([0-9.]+)", f.read())
        return float(m.group(1)) if m else None
    except OSError:
        return None


def gen(d):
    reps = sorted(os.path.join(d, r, "run1") for r in os.listdir(d) if r.startswith("rep")) if os.path.isdir(d) else []
    ms = {k: [] for k in ("plain", "shim", "passthru")}
    syncs = {k: [] for k in ("stats", "passthru")}
    longs, windows, same = [], [], True
    for run in reps:
        for k in ms:
            v = steady_ms(os.path.join(run, k + ".err"))
            if v is not None:
                ms[k].append(v)
        outs = []
        for k in ("plain", "shim", "passthru"):
            try:
                with open(os.path.join(run, k + ".out")) as f:
                    outs.append(f.read())
            except OSError:
                outs.append(None)
        same &= bool(outs[0]) and all(o == outs[0] for o in outs)
        for k in syncs:
            try:
                with open(os.path.join(run, k + ".json")) as f:
                    s = json.load(f)
            except (OSError, ValueError):
                continue
            syncs[k].append(s.get("barrier_host_ms", {}).get("syncs", {}))
            if k == "stats" and "eager_launches_engine_long" in s.get("replay", {}):
                longs.append(s["replay"]["eager_launches_engine_long"])
            if k == "stats" and "attached_ms" in s.get("cupti", {}):
                windows.append(s["cupti"]["attached_ms"])
    if not ms["plain"] or not ms["shim"]:
        return "- (no runs)"
    p = statistics.median(ms["plain"])
    line = f"steady ms plain {p:.1f}, the shim {statistics.median(ms['shim']):.1f} ({p / statistics.median(ms['shim']):.3f}x)"
    if ms["passthru"]:
        line += f", pass-through {statistics.median(ms['passthru']):.1f} ({p / statistics.median(ms['passthru']):.3f}x)"
    line += f"; identical {'yes' if same else 'NO'}"
    for k, name in (("stats", "the shim"), ("passthru", "pass-through")):
        if syncs[k]:
            line += (f"; syncs under {name}: driver {statistics.median(x.get('driver', 0) for x in syncs[k]):.1f} ms, "
                     f"engine {statistics.median(x.get('engine', 0) for x in syncs[k]):.1f} ms")
    if longs:
        line += "; long eager launches " + ", ".join(
            f"{x.get('10us_1ms', 0)}+{x.get('over_1ms', 0)} of {x.get('sampled', 0)} "
            f"({x.get('10us_1ms_ms', 0) + x.get('over_1ms_ms', 0):.1f} ms)" for x in longs)
    if windows:
        line += "; CUPTI windows open " + ", ".join(f"{w:.1f}" for w in windows) + " ms"
    return line + f"; {len(reps)} rounds"


def replayed(s):
    return f"{100.0 * s['replay']['launches_replayed'] / max(1, s['launches']):.1f}%"


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "multi":
        print(multi(sys.argv[2]))
    elif len(sys.argv) == 5 and sys.argv[1] == "amp":
        print(amp(sys.argv[2], int(sys.argv[3]), sys.argv[4]))
    elif len(sys.argv) == 3 and sys.argv[1] == "gen":
        print(gen(sys.argv[2]))
    else:
        sys.exit("usage: ratios.py multi DIR | ratios.py amp DIR STEPS SAME | ratios.py gen DIR")
