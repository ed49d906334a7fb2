#!/usr/bin/env bash
# run 28 call 6: the final code (review mends: swapStoreBF16 for the plain store only, its bias
# columns clamped once per slice; moe_fc2 of every mxfp8 sm_90a preset changed by that hoisting). The
# MX GEMM cases (a new register-fed bf16 case with a bias past N); the default mxfp8 forward of
# qwen3-30b-a3b and gpt-oss-120b (FC2 with a bias, H = 2880: a partial last B tile) at T = 1, 4096;
# both timed at T = 4096.
set -u
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
(cd codegen && timeout 90 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU' > $O/mxgemm.log 2>&1; echo "codegen MX GEMM tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/mxgemm.log | grep -v PASS | head -20 >> $S
grep -E "mx_rf_store" $O/mxgemm.log | grep -- "---" | head -4 >> $S
for m in qwen3-30b-a3b gpt-oss-120b; do
  timeout 60 $mokc run --model $m --target sm_90a --tokens 1,4096 --precision mxfp8 --repeat 3 --sample 64 > $O/run-$m.log 2>&1; echo "run $m mxfp8 rc=$?" | tee -a $S
  grep -E "T=|PASS|FAIL" $O/run-$m.log | tail -3 >> $S
  timeout 40 $mokc bench --model $m --target sm_90a --tokens 4096 --iters 30 --precision mxfp8 > $O/bench-$m.log 2>&1; echo "bench $m T=4096 mxfp8 rc=$?" | tee -a $S
  grep -iE "median" $O/bench-$m.log | head -1 >> $S
done
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
