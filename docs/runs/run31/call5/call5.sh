#!/usr/bin/env bash
# run 31 call 5: e4m3 NaN bytes in the MXFP8 GEMMs' weights: TestSM90MXGemmGPU with three "_nan"
# cases (promoted, expanded, the operand swap of the decode tiles; three NaN bytes put in B), whose
# outputs must be NaN exactly where the float64 GEMM's are; the register-fed form is documented as
# reading them as finite values (v34's in-loop test cost 3-5%: call 4, not kept).
set -u
START=$(date +%s)
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU' > $O/codegen.log 2>&1; echo "codegen TestSM90MXGemmGPU rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^--- |_nan|FAIL|wrong|want" $O/codegen.log | head -30 >> $S
grep -c -- "--- PASS" $O/codegen.log >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
