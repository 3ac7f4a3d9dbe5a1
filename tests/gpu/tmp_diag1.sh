R=$OUT; mkdir -p /tmp/r
OUT=/tmp/r RUN_PARTS="ctest torch bench" CTEST_EXCLUDE=bats.python TORCH_REPS=2 bash tests/gpu/run.sh > /tmp/r/run.txt 2>&1
cp /tmp/r/progress.txt /tmp/r/run.txt $R/
LB_MODES="hand default AUTOGRAPH_PROBE=off" LB_LOG_LINES=0 timeout 120 bash tests/gpu/lb_diag.sh 7 > $R/lb.txt 2>&1
cat $R/progress.txt; grep -A3 "^PyTorch MLP" /tmp/r/run.txt | head -5; grep -A16 "^autograph bench" /tmp/r/run.txt; head -10 $R/lb.txt
