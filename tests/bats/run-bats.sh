#!/usr/bin/env bash
# Runs one Bats file that needs a GPU; exits 77 (CTest's skip code for these tests) with the reason when
# this machine has none (or fewer than MIN_GPUS), so CI without a GPU reports the test as skipped, not
# passed.
set -u
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
    echo "SKIP: no NVIDIA GPU on this machine (nvidia-smi -L lists none)"
    exit 77
fi
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
if [ "$gpus" -lt "${MIN_GPUS:-1}" ]; then
    echo "SKIP: needs ${MIN_GPUS} GPUs, this machine has $gpus"
    exit 77
fi
if ! command -v bats >/dev/null 2>&1; then
    echo "SKIP: bats is not installed"
    exit 77
fi
exec bats --print-output-on-failure "$@"
