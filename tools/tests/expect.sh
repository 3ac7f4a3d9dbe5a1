#!/bin/sh
# expect.sh RC REGEX... -- COMMAND [ARGS...]: runs COMMAND, then passes (exit 0) when its exit code
# matches RC (an extended regular expression over the whole code) and its stdout+stderr matches every
# REGEX (grep -E, any line). Used by the CTest tests of the autograph CLI.
rc_want=$1
shift
n=0
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    n=$((n + 1))
    eval "re_$n=\$1"
    shift
done
[ "$1" = "--" ] || { echo "expect.sh: missing -- before the command" >&2; exit 2; }
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
echo "--- exit code $rc"
fail=0
if ! printf '%s\n' "$rc" | grep -Eqx -e "$rc_want"; then
    echo "FAIL: exit code $rc, expected $rc_want"
    fail=1
fi
i=1
while [ $i -le $n ]; do
    eval "re=\$re_$i"
    if ! printf '%s\n' "$out" | grep -Eq -e "$re"; then
        echo "FAIL: output does not match: $re"
        fail=1
    fi
    i=$((i + 1))
done
exit $fail
