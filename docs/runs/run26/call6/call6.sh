#!/usr/bin/env bash
# run 26 call 6: the register-fed MXFP8 GEMM with the producer storing each row's bf16x2 factor
# (no f32 scale to convert per block): the MX GEMM cases, the T = 4096 timings, then ncu's stall
# reasons and pipe use of the two-warpgroup FC1 beside the bf16 FC1.
set -u
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
(cd codegen && timeout 120 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU' > $O/mxgemm.log 2>&1; echo "codegen MX GEMM tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/mxgemm.log | grep -v PASS | head -20 >> $S
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf' > $O/perf.log 2>&1; echo "codegen regfed perf rc=$?" | tee -a $S)
grep -E "µs|Error|FAIL|want" $O/perf.log | head -20 >> $S
M='regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$,regex:^sm__pipe_tensor.*cycles_active\.avg\.pct_of_peak_sustained_active$,regex:^sm__inst_executed_pipe_(alu|fma|fmaheavy|lsu|uniform)\.avg\.pct_of_peak_sustained_active$,smsp__issue_active.avg.pct_of_peak_sustained_active'
for k in p_fc1_regfed2 p_fc1_bf16; do
  (cd codegen && MOKC_MXPERF="^$k\$" timeout 100 ncu --metrics "$M" -k regex:$k -c 1 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf' > $O/ncu-$k.log 2>&1; echo "ncu $k rc=$?" | tee -a $S)
done
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
