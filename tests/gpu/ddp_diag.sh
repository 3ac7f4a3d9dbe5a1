#!/usr/bin/env bash
# Are the probes right about DDP? tests/python/torch_ddp.py (the MLP under DistributedDataParallel, one
# process per GPU) run plain, under the shim, and under the shim without probes (AUTOGRAPH_PROBE=off),
# interleaved, REPS times (default 3), STEPS steps each (default 200). Not a test (nothing is asserted);
# run on a machine with 2 GPUs: bash tests/gpu/ddp_diag.sh
# Prints per mode the median of rank 0's median steps, and per shim mode each rank's replayed share and
# probes (the last run's statistics); losses must be identical to plain in every run.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/gpu/shim_built.sh
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
STEPS=${STEPS:-200}
T=$(mktemp -d)
py=tests/python/torch_ddp.py
for rep in $(seq "${REPS:-3}"); do
    python3 $py --steps "$STEPS" >"$T/plain.out" 2>>"$T/plain.err"
    for mode in default noprobe; do
        rm -f "$T/$mode".*.json
        probe=()
        [ $mode = noprobe ] && probe=(AUTOGRAPH_PROBE=off)
        env "${probe[@]}" AUTOGRAPH_STATS="$T/$mode.%p.json" LD_PRELOAD="$lib" python3 $py --steps "$STEPS" \
            >"$T/$mode.out" 2>>"$T/$mode.err"
        cmp -s "$T/plain.out" "$T/$mode.out" || echo "[$mode] rep $rep: LOSSES DIFFER"
    done
done
python3 - "$T" <<'PY'
import glob, json, re, statistics, sys
d = sys.argv[1]
def med(mode, key):
    v = [float(x) for x in re.findall(rf"^{key}: ([0-9.]+)", open(f"{d}/{mode}.err").read(), re.M)]
    return statistics.median(v) if v else float("nan")
plain = med("plain", "step_us")
print(f"plain: rank 0's step {plain:.0f} us, loop {med('plain', 'loop_ms'):.0f} ms")
for mode in ("default", "noprobe"):
    st = med(mode, "step_us")
    ranks = []
    for f in sorted(glob.glob(f"{d}/{mode}.*.json")):
        j = json.load(open(f))
        r = j.get("replay")
        if r and j.get("launches", 0) > 1000:  # the workers, not the launcher process
            ranks.append(f"{100.0 * r['launches_replayed'] / j['launches']:.1f}% replayed, probes {r['profit']}")
    print(f"{mode}: rank 0's step {st:.0f} us ({plain / st:.3f}x of plain), loop {med(mode, 'loop_ms'):.0f} ms | "
          + " | ".join(ranks))
PY
