#!/usr/bin/env bash
# run 34 call 1: items v1 (the routed GEMMs' work items from a queue, --items queue) beside the
# fixed walk in the same binary: y_sha256 and the reference check at T = 0, 1, 64, 4096 (forward,
# bf16 and mxfp8), the backward's check, memcheck/racecheck/synccheck on the queue kernels, then
# forward medians alternated at T = 64 and 4096 and the decode phase times.
set -u
START=$(date +%s)
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
. scripts/device-lib.sh
for m in olmoe-1b-7b qwen3-30b-a3b gpt-oss-20b deepseek-v2-lite; do
  for p in bf16 mxfp8; do
    for it in fixed queue; do run_json $it $mokc $m $p 0,1,64,4096 --items $it; done
  done
done
for p in bf16 mxfp8; do
  timeout 120 $mokc run --backward --model qwen3-30b-a3b --target sm_90a --precision $p --tokens 1,64,1000 --items queue > $O/bwd-$p.log 2>&1
  echo "backward $p rc=$? $(grep -ciE 'fail' $O/bwd-$p.log) fail lines" >> $S
done
for tool in memcheck racecheck synccheck; do
  timeout 100 compute-sanitizer --tool $tool $mokc run --model olmoe-1b-7b --target sm_90a --precision mxfp8 --tokens 64 --repeat 1 --items queue > $O/san-$tool.log 2>&1
  echo "$tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san-$tool.log | head -1)" >> $S
done
echo "checks done at $(( $(date +%s) - START )) s" >> $S
for i in 1 2; do
  for m in olmoe-1b-7b deepseek-v2-lite qwen2-57b-a14b qwen3-30b-a3b; do
    for p in bf16 mxfp8; do
      for it in fixed queue; do bench $it-$p $mokc 64 --model $m --precision $p --items $it --iters 50; done
    done
  done
done
for p in bf16 mxfp8; do
  for it in fixed queue fixed queue; do bench $it-$p $mokc 4096 --model qwen3-30b-a3b --precision $p --items $it --iters 30; done
done
for it in fixed queue; do bench ph-$it $mokc 64 --model olmoe-1b-7b --precision mxfp8 --items $it --phases --iters 30; done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
