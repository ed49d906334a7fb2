#!/usr/bin/env bash
# run 26 call 1 (7cdf882: run 25 call 3 code after PTX-identical refactors): the dispatch
# test and a forward again, the runtime's forward and graph-capture tests under programmatic launch, gpt-oss-120b at T = 64, and the decode variant's new range (up to 64 mean
# rows per expert) against its old bound (--variant-max-rows 16).
set -u
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
END=$((SECONDS + ${BUDGET:-200}))
(cd codegen && timeout 30 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestDispatchSmallGPU' > $O/tests.log 2>&1; echo "codegen dispatch test rc=$?" | tee -a $S)
timeout 40 $mokc run --model qwen3-30b-a3b --target sm_90a --tokens 0,1,64,300 --repeat 3 --json > $O/run.jsonl 2>>$O/run.log; echo "run qwen3-30b-a3b bf16 T=0,1,64,300 rc=$?" | tee -a $S
(cd runtime && timeout 100 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestCaptureForward|TestLayerForward' >> $O/tests.log 2>&1; echo "runtime forward + capture tests rc=$?" | tee -a $S)
b() { # label T args...
  local label=$1 T=$2; shift 2
  [ $SECONDS -gt $END ] && { echo "bench $label T=$T $* skipped (budget)" | tee -a $S; return; }
  timeout 40 $mokc bench --target sm_90a --tokens $T --kernels --json --iters 50 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc" | tee -a $S
}
b new 64 --model deepseek-v2-lite --precision mxfp8
b new 64 --model deepseek-v2-lite
b new 64 --model gpt-oss-120b --precision mxfp8
b new 64 --model gpt-oss-120b
for m in olmoe-1b-7b mixtral-8x7b; do b new 256 --model $m --precision mxfp8; b new16 256 --model $m --precision mxfp8 --variant-max-rows 16; b new 256 --model $m; done
for T in 512 1024; do b new $T --model qwen3-30b-a3b --precision mxfp8; b new16 $T --model qwen3-30b-a3b --precision mxfp8 --variant-max-rows 16; b new $T --model qwen3-30b-a3b; done
b new 2048 --model deepseek-v3 --precision mxfp8; b new16 2048 --model deepseek-v3 --precision mxfp8 --variant-max-rows 16; b new 2048 --model deepseek-v3
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
