#!/usr/bin/env bash
# What CUPTI's kernel timing in the learning window buys, against the pace taken from replay itself
# (ag_learner_waited: a segment whose barrier waits over half the time replay took to issue it, three
# sightings in a row, keeps the ramp and loses the tail). Not a test (nothing is asserted); on the GPU machine, after a build:
#   bash tests/gpu/pace_diag.sh [REPS (5)] [BUILD (build-gpu)]
# 1. launch_bound against its hand graph (lb_diag.sh): default, AUTOGRAPH_CUPTI_TIMING=off, AUTOGRAPH_CUPTI=off;
# 2. one run of each of those with AUTOGRAPH_LOG=debug: which plan each segment got, and from what;
# 3. the PyTorch MLP step in-process A/B (torch_mlp.py --ab 10: blocks of 10 steps with the shim and
#    paused in turn), REPS runs of each setting interleaved, losses compared with a plain run.
# PACE_PARTS (default "lb log torch") picks the parts; PACE_SETTINGS the settings (default "default
# AUTOGRAPH_CUPTI_TIMING=off AUTOGRAPH_CUPTI=off"; a setting is VAR=value[,VAR=value...], where
# LD_PRELOAD=PATH runs another build of the shim).
set -uo pipefail
cd "$(dirname "$0")/../.."
reps=${1:-5}
B=${2:-build-gpu}
L=$(cd "$B" && pwd)/lib/libautograph.so
T=$(mktemp -d)
want() { [[ " ${PACE_PARTS:-lb log torch} " == *" $1 "* ]]; }
read -r -a settings <<<"${PACE_SETTINGS:-default AUTOGRAPH_CUPTI_TIMING=off AUTOGRAPH_CUPTI=off}"
# env_of SETTING: the assignments of a setting (none for default), one word each
env_of() { [ "$1" = default ] || echo "${1//,/ }"; }

if want lb; then
    LB_LOG_LINES=0 LB_MODES="hand ${settings[*]}" bash tests/gpu/lb_diag.sh "$reps" "$B" 2>&1 | grep -v '^debug log'
fi

if want log; then
    echo "launch_bound's plans, one debug run per setting (the lines that say how a segment was planned):"
    for s in "${settings[@]}"; do
        # shellcheck disable=SC2046 # a setting is one VAR=value word, or none
        k=${s//\//_} # the setting's files (a path in it, LD_PRELOAD=PATH, made a name)
        env LD_PRELOAD="$L" AUTOGRAPH_LOG=debug AUTOGRAPH_STATS="$T/lb.$k.json" $(env_of "$s") "$B/bin/launch_bound" \
            2>&1 >/dev/null | grep -E 'GPU sets its pace|chunk plan for|segment of [0-9]+ operations timed' |
            sed "s|^|  $s: |" | head -6
        python3 - "$T/lb.$k.json" "$s" <<'PY'
import json, sys
try:
    r = json.load(open(sys.argv[1]))["replay"]
except (OSError, ValueError, KeyError):
    sys.exit(0)
print(f"  {sys.argv[2]}: segments timed {r['segments_timed']}, planned {r['segments_planned']}, "
      f"GPU-paced {r['segments_gpu_paced']} (from replay's waits {r['segments_paced_by_wait']}), "
      f"graph launches {r['graph_launches']}, replayed {r['launches_replayed']}, waits {r.get('pace_waits')}")
PY
    done
fi

if want torch; then
    export PYTHONHASHSEED=0
    pin=()
    command -v taskset >/dev/null && pin=(taskset -c "${TORCH_CPUS:-2-5}")
    "${pin[@]}" python3 tests/python/torch_mlp.py --steps 200 >"$T/plain.out" 2>/dev/null
    for i in $(seq "$reps"); do
        for s in "${settings[@]}"; do
            # shellcheck disable=SC2046
            k=${s//\//_}
            env LD_PRELOAD="$L" AUTOGRAPH_STATS="$T/t.$k.json" $(env_of "$s") "${pin[@]}" python3 \
                tests/python/torch_mlp.py --steps 200 --ab 10 >"$T/t.$k.out" 2>>"$T/t.$k.err"
            cmp -s "$T/plain.out" "$T/t.$k.out" || echo "  $s run $i: losses differ from the plain run"
            cp "$T/t.$k.json" "$T/t.$k.$i.json" 2>/dev/null
        done
    done
    echo "PyTorch MLP step, in-process A/B (shim against paused), $reps runs each:"
    for s in "${settings[@]}"; do
        k=${s//\//_}
        python3 - "$T/t.$k.err" "$T/t.$k.json" "$s" "$T/t.$k" "$reps" <<'PY'
import json, statistics, sys
sys.path.insert(0, "tests/gpu")
from ratios import ab_runs, ab_summary
line = ab_summary(open(sys.argv[1]).read()) or "A/B -"
ab = ab_runs(open(sys.argv[1]).read())
try:
    s = json.load(open(sys.argv[2]))
    r = s["replay"]
    line += (f"; last run: replayed {100.0 * r['launches_replayed'] / max(1, s['launches']):.1f}%, "
             f"planned {r['segments_planned']}, GPU-paced {r['segments_gpu_paced']} "
             f"(by waits {r['segments_paced_by_wait']}; {r.get('pace_waits')}), graph launches {r['graph_launches']}"
             + "; by phase " + ", ".join(f"{k} {v:.0f}" for k, v in r["host_ns_per_match_phases"].items()))
except (OSError, ValueError, KeyError):
    pass
# the matched launch in each run (ns: mean/median), and the median of the runs' means; then each run's
# A/B with the plans it ended with (segments planned, graph launches): the plan varies from run to run
ns, plans = [], []
for i in range(1, int(sys.argv[5]) + 1):
    try:
        s = json.load(open(f"{sys.argv[4]}.{i}.json"))
        r = s["replay"]
        ns.append((r["host_ns_per_match"], r["host_ns_per_match_median"]))
        ratio = f"{ab[i - 1][1] / ab[i - 1][0]:.3f}x" if i <= len(ab) else "-"
        plans.append(f"{ratio} planned {r['segments_planned']} graph launches {r['graph_launches']}")
    except (OSError, ValueError, KeyError):
        pass
if ns:
    line += (f"; matched launch {statistics.median(m for m, _ in ns):.0f} ns (runs "
             + " ".join(f"{m:.0f}/{d:.0f}" for m, d in ns) + ")")
print(f"  {sys.argv[3]}: {line}")
for i, p in enumerate(plans):
    print(f"    run {i + 1}: {p}")
PY
    done
fi
rm -rf "$T"
