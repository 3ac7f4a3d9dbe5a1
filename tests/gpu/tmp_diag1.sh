R=$OUT
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/tmp/b.log 2>&1 && cmake --build build-gpu -j16 >>/tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
B=build-gpu/bin; L=$PWD/build-gpu/lib/libautograph.so
$B/driver_api --iters 40 --contexts 3 --threads 1 > /tmp/plain.out 2>/tmp/plain.err; echo "plain rc $?"
for k in $(seq 1 20); do timeout 150 sh -c 'while :; do :; done' & done
# a GPU neighbour as in ctest -j4: another sample running alongside
( for j in $(seq 1 200); do $B/launch_bound --iters 300 >/dev/null 2>&1; done ) & nb=$!
fails=0; n=0; bad=0; t0=$SECONDS
while [ $((SECONDS - t0)) -lt 110 ]; do
    LD_PRELOAD=$L AUTOGRAPH_STATS=/tmp/s.json $B/driver_api --iters 40 --contexts 3 --threads 1 > /tmp/shim.out 2>/tmp/shim.err; rc=$?
    n=$((n+1))
    if [ $rc != 0 ] || ! cmp -s /tmp/plain.out /tmp/shim.out; then
      bad=$((bad+1))
      if [ $fails -lt 3 ]; then fails=$((fails+1)); cp /tmp/shim.out $R/fail$fails.out; cp /tmp/shim.err $R/fail$fails.err; cp /tmp/s.json $R/fail$fails.json 2>/dev/null; echo "FAIL run $n rc $rc"; diff /tmp/plain.out /tmp/shim.out | head -10; tail -5 /tmp/shim.err; fi
    fi
done
echo "under load: $bad of $n runs differ or failed"
kill $nb 2>/dev/null; pkill -f 'while :; do :; done'; wait 2>/dev/null
cp /tmp/plain.out $R/plain.out
