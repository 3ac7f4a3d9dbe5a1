#!/bin/sh
# no_gpu.sh AUTOGRAPH SUBCOMMAND [ARGS...]: on a machine without a usable GPU, passes when the
# subcommand prints the plain "no CUDA GPU found ... Run the tests instead: <command>" message and
# exits 77. Where a GPU is present the subcommand does real work instead: exit 77 so CTest skips.
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
echo "--- exit code $rc"
if [ $rc -ne 77 ]; then
    if printf '%s\n' "$out" | grep -q "no CUDA GPU found" || ! [ -e /dev/nvidiactl ]; then
        echo "FAIL: no GPU here, but the command exited with $rc instead of 77"
        exit 1
    fi
    echo "a GPU is present (exit code $rc): this no-GPU test is skipped"
    exit 77
fi
sub=$2
want="autograph $sub: no CUDA GPU found \\(.+\\)\\. Run the tests instead: cmake -S \\. -B build && cmake --build build -j4 && ctest --test-dir build --output-on-failure"
if printf '%s\n' "$out" | grep -Eq -e "$want"; then
    exit 0
fi
echo "FAIL: exit code 77 but not the expected message: $want"
exit 1
