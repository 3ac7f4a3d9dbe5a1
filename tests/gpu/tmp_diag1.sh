R=$OUT
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/tmp/b.log 2>&1 && cmake --build build-gpu -j16 >>/tmp/b.log 2>&1 || { tail -30 /tmp/b.log; exit 1; }
LB_MODES="hand default cupti_off warmup1 AUTOGRAPH_CUPTI_DETACH=inline" LB_LOG_LINES=60 bash tests/gpu/lb_diag.sh 5 > $R/lb.txt 2>&1
cat $R/lb.txt
