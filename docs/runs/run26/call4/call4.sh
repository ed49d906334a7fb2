#!/usr/bin/env bash
# run 26 call 4: the register-fed MXFP8 GEMM loading 8 bytes per row and block (activations in
# layouts.RegisterFedOrder): the MX GEMM cases on the GPU, qwen3-30b-a3b's routed GEMMs at T = 4096
# timed bf16 / promote / register-fed, then ncu of the two-warpgroup FC1.
set -u
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
(cd codegen && timeout 120 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU' > $O/mxgemm.log 2>&1; echo "codegen MX GEMM tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/mxgemm.log | grep -v PASS | head -20 >> $S
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf' > $O/perf.log 2>&1; echo "codegen regfed perf rc=$?" | tee -a $S)
grep -E "µs|Error|FAIL|want" $O/perf.log | head -20 >> $S
(cd codegen && MOKC_MXPERF='p_fc1_regfed2' timeout 150 ncu --section SpeedOfLight --section WarpStateStats --section InstructionStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis -k regex:p_fc1_regfed2 -c 1 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf' > $O/ncu.log 2>&1; echo "ncu rc=$?" | tee -a $S)
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
