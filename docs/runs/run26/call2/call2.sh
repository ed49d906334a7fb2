#!/usr/bin/env bash
# run 26 call 2: the register-fed MXFP8 GEMM (GemmSpec.MXRegisterFed) at the GEMM level: the MX GEMM
# cases (every way, the register-fed ones included) on the GPU, then qwen3-30b-a3b's routed GEMMs at
# T = 4096 timed bf16 / promote / register-fed; the decode variant's new bound (mxfp8 v24) timed.
set -u
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
END=$((SECONDS + ${BUDGET:-200}))
(cd codegen && timeout 120 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU' > $O/mxgemm.log 2>&1; echo "codegen MX GEMM tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/mxgemm.log | grep -v PASS | head -20 >> $S
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf' > $O/perf.log 2>&1; echo "codegen regfed perf rc=$?" | tee -a $S)
grep -E "µs|Error|FAIL|want" $O/perf.log | head -20 >> $S
b() { # label T args...
  local label=$1 T=$2; shift 2
  [ $SECONDS -gt $END ] && { echo "bench $label T=$T $* skipped (budget)" | tee -a $S; return; }
  timeout 40 $mokc bench --target sm_90a --tokens $T --kernels --json --iters 50 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', T, d['median_ms'])" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc" | tee -a $S
}
b new 1024 --model qwen3-30b-a3b --precision mxfp8
b new 2048 --model deepseek-v3 --precision mxfp8
b new 256 --model mixtral-8x7b --precision mxfp8
grep -h "^new" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
