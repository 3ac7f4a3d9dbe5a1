R=$OUT
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/tmp/b.log 2>&1 && cmake --build build-gpu -j16 >>/tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
LB_MODES="hand default first2 first4 AUTOGRAPH_PROBE=off" LB_LOG_LINES=22 bash tests/gpu/lb_diag.sh 7 > $R/lb.txt 2>&1
LB_MODES="hand default first2 first4 AUTOGRAPH_PROBE=off" LB_LOG_LINES=0 bash tests/gpu/lb_diag.sh 5 build-gpu driver_api > $R/lb_driver_api.txt 2>&1
cat $R/lb.txt | grep -v "^iter "; head -14 $R/lb_driver_api.txt
