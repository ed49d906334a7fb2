#!/usr/bin/env bash
# run 26 call 5: the register-fed MXFP8 GEMM with its loads one group ahead and tiles of 256 token rows (activations in
# layouts.RegisterFedOrder): the MX GEMM cases on the GPU, qwen3-30b-a3b's routed GEMMs at T = 4096
# timed bf16 / promote / register-fed.
set -u
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
(cd codegen && timeout 120 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU' > $O/mxgemm.log 2>&1; echo "codegen MX GEMM tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/mxgemm.log | grep -v PASS | head -20 >> $S
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf' > $O/perf.log 2>&1; echo "codegen regfed perf rc=$?" | tee -a $S)
grep -E "µs|Error|FAIL|want" $O/perf.log | head -20 >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
