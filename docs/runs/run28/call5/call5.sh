#!/usr/bin/env bash
# run 28 call 5 (call 4 again, its new case fixed: three experts for three counts): after v31's revert (the register-fed FC1 quantizes h again in moe_quantize_h_rf;
# the decode FC1 keeps call 3's kernel, h unstored). The MX GEMM cases, with the new
# mx_swap_swiglu_f32_qonly (QuantizeCOnly: C never written, c_q within e4m3's rounding of the
# reference); the default mxfp8 forward of qwen3-30b-a3b at T = 0, 1, 64, 4096; the forward timed
# at T = 4096 beside bf16.
set -u
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
(cd codegen && timeout 90 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU' > $O/mxgemm.log 2>&1; echo "codegen MX GEMM tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/mxgemm.log | grep -v PASS | head -20 >> $S
grep -E "qonly" $O/mxgemm.log | head -4 >> $S
timeout 60 $mokc run --model qwen3-30b-a3b --target sm_90a --tokens 0,1,64,4096 --precision mxfp8 --repeat 3 > $O/run.log 2>&1; echo "run qwen3-30b-a3b mxfp8 rc=$?" | tee -a $S
grep -E "T=|PASS|FAIL" $O/run.log | tail -6 >> $S
for a in "" "--precision mxfp8"; do
  timeout 60 $mokc bench --model qwen3-30b-a3b --target sm_90a --tokens 4096 --iters 30 $a > $O/bench.log 2>&1; echo "bench qwen3-30b-a3b T=4096 $a rc=$?" | tee -a $S
  grep -iE "median" $O/bench.log | head -2 >> $S
done
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
