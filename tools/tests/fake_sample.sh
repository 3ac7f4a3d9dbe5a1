#!/bin/sh
# fake_sample.sh: stands in for a bundled CUDA sample in the bench/demo tests; installed under each
# sample's name, the name picks the behaviour. "Under the shim" means libautograph.so is in LD_PRELOAD;
# "cupti off" means that and AUTOGRAPH_CUPTI=off (bench --cupti-compare); "in-process" means under the shim
# with AG_AB set (bench --ab).
name=$(basename "$0")
shim=0
case "$LD_PRELOAD" in *libautograph.so*) shim=1 ;; esac
cupti_off=0
if [ $shim = 1 ] && [ "$AUTOGRAPH_CUPTI" = off ]; then cupti_off=1; fi
ab=0
if [ $shim = 1 ] && [ -n "$AG_AB" ]; then ab=1; fi
graph=0
iters=100
while [ $# -gt 0 ]; do
    case "$1" in
    --graph) graph=1 ;;
    --iters) iters=$2; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
if [ $graph = 1 ] && [ "$name" != launch_bound ]; then
    echo "graph: unsupported" >&2
    exit 2
fi
if [ $shim = 1 ] && [ -n "$AUTOGRAPH_STATS" ] && [ "$name" = launch_bound ]; then
    printf '{"autograph": 1, "launches": 1000, "calls": {"cuLaunchKernel": 1000},\n "replay": {"launches_replayed": 900, "host_ns_per_match": 150.5}}\n' > "$AUTOGRAPH_STATS"
fi
if [ $shim = 1 ] && [ "$name" = nosync_loop ]; then
    echo "boom: the fake sample fails under the shim" >&2
    exit 3
fi
if [ $cupti_off = 1 ] && [ "$name" = memops ]; then
    echo "boom: the fake sample fails with CUPTI off" >&2
    exit 4
fi
echo "iters: $iters"
if [ $shim = 1 ] && [ "$name" = shape_change ]; then
    echo "checksum: 0xbad"
elif [ $cupti_off = 1 ] && [ "$name" = two_streams ]; then
    echo "checksum: 0xoff"
elif [ $ab = 1 ] && [ "$name" = memops ]; then
    echo "checksum: 0xab"
else
    echo "checksum: 0x1234"
fi
if [ $graph = 1 ]; then
    echo "loop_ms: 4.0" >&2
    echo "setup_ms: 1.0" >&2 # its capture and instantiation before the loop (kernels/common.h)
elif [ $cupti_off = 1 ]; then
    echo "loop_ms: 6.25" >&2
elif [ $ab = 1 ]; then
    echo "loop_ms: 99.0" >&2 # both sides mixed: never a column
elif [ $shim = 1 ]; then
    echo "loop_ms: 5.0" >&2
else
    echo "loop_ms: 10.0" >&2
fi
# launch_bound also reports its loop's second half, the same with and without CUPTI
if [ "$name" = launch_bound ] && [ $graph = 0 ] && [ $shim = 1 ]; then
    echo "steady_ms: 2.0" >&2
fi
# the in-process comparison (kernels/common.h): launch_bound's shim 1.25x faster than paused; mlp_train's
# too short for a block each way; shape_change's line comes twice (the last counts)
if [ $ab = 1 ] && [ "$name" = launch_bound ]; then
    echo "ab_iter_us: shim 8.000 paused 10.000 blocks 12" >&2
elif [ $ab = 1 ] && [ "$name" = mlp_train ]; then
    echo "ab_iter_us: shim 8.000 paused 0.000 blocks 1" >&2
elif [ $ab = 1 ] && [ "$name" = two_streams ]; then
    echo "ab_iter_us: shim 1.000 paused 9.000 blocks 4" >&2
    echo "ab_iter_us: shim 10.000 paused 9.000 blocks 4" >&2
fi
