#!/usr/bin/env bats
# The CUPTI coverage guard on the GPU, with the elf_launch sample: once per iteration it launches a kernel
# through a cuLaunchKernel read from libcuda's ELF symbol table, which no hook sees, between launches the
# shim may defer. With the guard (AUTOGRAPH_CUPTI=learn, the default, or guard) the output is identical
# to the plain run and CUPTI names the unhooked entry point. sample.bats's coverage check (hooks = CUPTI
# + replayed) cannot hold here, since CUPTI sees launches that the hooks do not.

load helpers

setup() {
    [ -x "$BIN/elf_launch" ] || skip "$BIN/elf_launch is not built (nvcc missing?)"
    OUT=$BATS_TEST_TMPDIR/elf_launch
}

# unhooked_seen DIR: CUPTI counted launches that reached the driver past every hook, cuLaunchKernel among
# the entry points they came through.
unhooked_seen() {
    python3 - "$1/stats.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
c = s.get("cupti") or {}
print(f"cupti: mode {c.get('mode')} state {c.get('state')} launches {c.get('launches')} "
      f"unhooked {c.get('unhooked')} {c.get('unhooked_names')}; hooked launches {s.get('launches')}, "
      f"replayed {s.get('replay', {}).get('launches_replayed')}")
sys.exit(0 if (c.get("unhooked") or 0) > 0 and "cuLaunchKernel" in (c.get("unhooked_names") or []) else 1)
PY
}

@test "elf_launch, default CUPTI mode (learn): identical output, the unhooked launch caught" {
    unset AUTOGRAPH_CUPTI
    run_pair "$OUT" "$BIN/elf_launch" --iters "${ITERS:-40}"
    same_output "$OUT"
    unhooked_seen "$OUT"
    [ "$(stat "$OUT/stats.json" cupti.mode)" = learn ]
    summary "$OUT" elf_launch
}

@test "elf_launch, AUTOGRAPH_CUPTI=guard: identical output, the unhooked launch caught" {
    AUTOGRAPH_CUPTI=guard run_pair "$OUT" "$BIN/elf_launch" --iters "${ITERS:-40}"
    same_output "$OUT"
    unhooked_seen "$OUT"
}

@test "elf_launch, AUTOGRAPH_CUPTI=off: nothing sees the launch (logged, not asserted)" {
    AUTOGRAPH_CUPTI=off run_pair "$OUT" "$BIN/elf_launch" --iters "${ITERS:-40}"
    local replayed
    replayed=$(stat "$OUT/stats.json" replay.launches_replayed)
    if cmp -s "$OUT/plain.out" "$OUT/shim.out"; then
        echo "# elf_launch with AUTOGRAPH_CUPTI=off: output identical ($replayed launches replayed)" >&3
    else
        echo "# elf_launch with AUTOGRAPH_CUPTI=off: output DIFFERS, the unhooked launch overtook deferred" \
             "work ($replayed launches replayed); this is what the guard prevents" >&3
    fi
}
