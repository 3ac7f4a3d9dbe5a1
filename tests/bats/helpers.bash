# Shared by the Bats files: where the build is, running a program plain and under the shim, and reading
# the shim's statistics. BUILD_DIR comes from CTest; the defaults serve a manual `bats` run.
BUILD_DIR=${BUILD_DIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)/build}
SRC_DIR=${SRC_DIR:-$(cd "$BATS_TEST_DIRNAME/../.." && pwd)}
SHIM=$BUILD_DIR/lib/libautograph.so
BIN=$BUILD_DIR/bin

# run_pair OUTDIR CMD...: runs CMD plain (OUTDIR/plain.out) and under the shim (OUTDIR/shim.out,
# statistics in OUTDIR/stats.json); extra AUTOGRAPH_* settings come from the caller's environment.
run_pair() {
    local dir=$1; shift
    mkdir -p "$dir"
    "$@" >"$dir/plain.out" 2>"$dir/plain.err" || { cat "$dir/plain.err" >&2; return 1; }
    env LD_PRELOAD="$SHIM${LD_PRELOAD:+:$LD_PRELOAD}" AUTOGRAPH_STATS="$dir/stats.json" "$@" \
        >"$dir/shim.out" 2>"$dir/shim.err" || { cat "$dir/shim.err" >&2; return 1; }
}

# stat FILE KEY: a value from the statistics JSON; KEY is dotted ("cupti.launches"); "null" if absent.
# Strings come bare, anything else as JSON (true, false, ["cuLaunchKernel"]).
stat() {
    python3 - "$1" "$2" <<'PY'
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split('.'):
    v = v.get(k) if isinstance(v, dict) else None
print(v if isinstance(v, str) else json.dumps(v))
PY
}

# same_output DIR: plain and shim stdout identical, with a diff on failure.
same_output() {
    diff -u "$1/plain.out" "$1/shim.out"
}

# coverage_ok DIR [LABEL]: the hooks saw every launch CUPTI saw, and nothing bypassed the resolver. CUPTI
# sees each launch that reaches the driver as a launch; launches replayed inside a graph reach it as a
# graph launch instead, so hooks == CUPTI + replayed.
coverage_ok() {
    local f=$1/stats.json hooked cupti unmatched replayed
    hooked=$(stat "$f" launches)
    cupti=$(stat "$f" cupti.launches)
    unmatched=$(stat "$f" unmatched_proc_addresses)
    replayed=$(stat "$f" replay.launches_replayed)
    [ "$replayed" != null ] || replayed=0
    echo "launches: hooks $hooked, CUPTI $cupti, replayed from graphs $replayed, unmatched resolver answers $unmatched"
    summary "$1" "${2:-$1}"
    [ "$hooked" -gt 0 ] && [ "$hooked" = "$((cupti + replayed))" ] && [ "$unmatched" = 0 ]
}

# summary DIR LABEL: one line for tests/gpu/run.sh's closing table (when AG_SUMMARY is set).
summary() {
    [ -n "${AG_SUMMARY:-}" ] || return 0
    python3 - "$1/stats.json" "$2" >>"$AG_SUMMARY" <<'PY'
import json, os, re, sys
s = json.load(open(sys.argv[1]))
r = s.get("replay", {})
c = s.get("cupti", {})
n = s["launches"]
def steady(run):  # a workload's loop without its first step, one run each: a hint, not a measurement
    f = os.path.join(os.path.dirname(sys.argv[1]), run + ".err")
    m = re.search(r"steady_ms: ([0-9.]+)", open(f).read()) if os.path.exists(f) else None
    return m.group(1) if m else "-"
rep = r.get("launches_replayed", 0)
fb = {k: v for k, v in r.get("fallbacks", {}).items() if v}
print(f"{sys.argv[2]:<14} launches={n:<7} cupti={c.get('launches', '-'):<7} replayed={rep:<7} "
      f"({100.0 * rep / max(1, n):5.1f}%) graphs={r.get('graphs_built', 0):<4} "
      f"ns/match={r.get('host_ns_per_match', 0):.0f}(median {r.get('host_ns_per_match_median', 0):.0f}, {r.get('host_ns_per_match_to_lock', 0):.0f} to lock) fallbacks={fb or '-'} "
      f"unmatched={s.get('unmatched_proc_names') or '-'} unhooked={c.get('unhooked', '-')}"
      f"{c.get('unhooked_names') or ''} cupti={c.get('mode', '-')}/{c.get('state', '-')}"
      f" det={c.get('detaches', '-')} busy={c.get('gpu_busy_learning', '-')}"
      f" setup_ms={c.get('setup_ms', '-')} warm_ms={c.get('warm_ms', '-')} gpu_bound={r.get('segments_gpu_bound', '-')}/{r.get('segments_timed', '-')}"
      f" sampled_busy={(r.get('replay_sampled') or {}).get('graph_busy', '-')}"
      f" rests={r.get('rests', '-')}/{r.get('segments_rested', '-')}"
      f" probes={'/'.join(str(v) for v in (r.get('profit') or {}).values()) or '-'}"
      f" observer={r.get('observer_syncs_passed', '-')}/{r.get('observer_syncs_flushed', '-')}"
      f" stalls={r.get('stall_flushes', '-')} pinned_d2h={r.get('pinned_d2h_copies_held', '-')}"
      f" memcpy_async={s.get('calls', {}).get('cuMemcpyAsync', 0)}"
      f" fattr(barriers/passed)={'/'.join(str(v) for v in (s.get('function_attribute_sets') or {}).values()) or '-'}"
      f" refused={r.get('reissue_failures', '-')} attrs={s.get('launch_attribute_ids', '-')}"
      f" mixing_legacy={r.get('graphs_mixing_legacy', '-')}"
      f" issuer(jobs/builds/waited)={'/'.join(str(int((r.get('issuer') or {}).get(k, 0))) for k in ('jobs', 'builds', 'waited'))}"
      f" build_ms={(r.get('host_ms') or {}).get('graph_build', '-')}"
      f" variants={r.get('variants', '-')} graph_launches={r.get('graph_launches', '-')}"
      f" evicted/build_refused={r.get('graphs_evicted', '-')}/{r.get('graph_builds_refused', '-')}"
      f" planned={r.get('segments_planned', '-')} starts_unmatched={r.get('chunk_starts_unmatched', '-')}"
      f" primary_retains={s.get('calls', {}).get('cuDevicePrimaryCtxRetain', 0)}"
      f" steady_ms(plain/shim)={steady('plain')}/{steady('shim')}")
PY
}

# replayed_at_least DIR PERCENT: the share of launches replayed from graphs, of those the probes did not
# make (a probe runs a graphed segment on plain launches on purpose, to time it: AUTOGRAPH_PROBE); the
# probes themselves may make at most a tenth of the launches.
replayed_at_least() {
    python3 - "$1/stats.json" "$2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
r = s["replay"]
probed = r["profit"]["launches_probed"]
frac = 100.0 * r["launches_replayed"] / max(1, s["launches"] - probed)
print(f"replayed {frac:.1f}% of {s['launches']} launches, less the {probed} the probes made "
      f"({100.0 * r['launches_replayed'] / max(1, s['launches']):.1f}% of all)")
sys.exit(0 if frac >= float(sys.argv[2]) and probed <= s["launches"] / 10 else 1)
PY
}
