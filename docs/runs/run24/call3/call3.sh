#!/usr/bin/env bash
# run 24 call 3: v21 (gather batches) beside 0b3733b, then kimi-k2's mxfp8 backward at T = 4096.
set -u
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
old=$PWD/.carry/mokc-old
(cd codegen && timeout 60 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestGatherMXGPU|TestQuantizeGPU' > $O/tests.log 2>&1; echo "tests rc=$?" | tee -a $O/summary.txt)
for bin in new old; do
  b=$mokc; [ $bin = old ] && b=$old
  for pr in bf16 mxfp8; do
    for m in qwen3-30b-a3b llama4-scout; do
      timeout 60 $b run --precision $pr --model $m --target sm_90a --tokens 1,64,256 --repeat 3 --json >> $O/run-$bin.jsonl 2>>$O/run.log; echo "run $bin $pr $m rc=$?" | tee -a $O/summary.txt
    done
  done
  timeout 60 $b run --backward --model qwen3-30b-a3b --target sm_90a --tokens 1,64 --repeat 3 --json >> $O/run-$bin.jsonl 2>>$O/run.log; echo "run $bin bwd bf16 rc=$?" | tee -a $O/summary.txt
done
for m in qwen3-30b-a3b olmoe-1b-7b qwen2-57b-a14b deepseek-v2-lite; do
  for pr in bf16 mxfp8; do
    timeout 60 $mokc bench --precision $pr --model $m --target sm_90a --tokens 64 --kernels --json >> $O/bench-new.jsonl 2>>$O/bench.log
    timeout 60 $old bench --precision $pr --model $m --target sm_90a --tokens 64 --kernels --json >> $O/bench-old.jsonl 2>>$O/bench.log
    echo "bench $m $pr rc=$?" | tee -a $O/summary.txt
  done
done
OUT=$OUT/kimi MX_LANES=kimi-k2 MX_DIRS=bwd TOKENS=4096 MX_ARGS="--sample 32" BUDGET=${KIMI_BUDGET:-280} bash scripts/device-verify.sh mxfp8run
