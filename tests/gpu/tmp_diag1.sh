R=$OUT
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/tmp/b.log 2>&1 && cmake --build build-gpu -j16 >>/tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
LB_MODES="hand default AUTOGRAPH_CUPTI_DETACH=inline" LB_LOG_LINES=45 bash tests/gpu/lb_diag.sh 7 > $R/lb.txt 2>&1
for smp in driver_api mlp_train; do LB_MODES="hand default AUTOGRAPH_CUPTI_DETACH=inline" LB_LOG_LINES=0 bash tests/gpu/lb_diag.sh 5 build-gpu $smp > $R/lb_$smp.txt 2>&1; done
cat $R/lb.txt; for smp in driver_api mlp_train; do head -9 $R/lb_$smp.txt; done
