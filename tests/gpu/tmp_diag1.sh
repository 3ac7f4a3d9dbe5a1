R=$OUT
cmake -S . -B build-dbg -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_FLAGS=-g -DCMAKE_CUDA_ARCHITECTURES=90 >/tmp/b.log 2>&1 && cmake --build build-dbg -j16 >>/tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
gcc -O1 -g -shared -fPIC -o /tmp/segv_bt.so tests/gpu/segv_bt.c || exit 1
B=build-dbg/bin; L=$PWD/build-dbg/lib/libautograph.so
cp $L $R/libautograph.so
$B/driver_api --iters 40 --contexts 3 --threads 1 > /tmp/plain.out 2>/tmp/plain.err; echo "plain rc $?"
for k in $(seq 1 20); do timeout 140 sh -c 'while :; do :; done' & done
( for j in $(seq 1 300); do $B/launch_bound --iters 300 >/dev/null 2>&1; done ) & nb=$!
fails=0; n=0; bad=0; t0=$SECONDS
while [ $((SECONDS - t0)) -lt 130 ] && [ $fails -lt 2 ]; do
    LD_PRELOAD="/tmp/segv_bt.so $L" $B/driver_api --iters 40 --contexts 3 --threads 1 > /tmp/shim.out 2>/tmp/shim.err; rc=$?
    n=$((n+1))
    if [ $rc != 0 ] || ! cmp -s /tmp/plain.out /tmp/shim.out; then
      bad=$((bad+1)); fails=$((fails+1)); cp /tmp/shim.err $R/fail$fails.err; echo "FAIL run $n rc $rc"; grep -v "^[0-9a-f]*-[0-9a-f]* " /tmp/shim.err | head -40
    fi
done
echo "under load: $bad of $n runs differ or failed"
kill $nb 2>/dev/null; pkill -f 'while :; do :; done'; wait 2>/dev/null
