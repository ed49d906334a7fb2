#!/usr/bin/env bash
# run 34 call 4: items v3 (the fixed walk's rounds but the last, then the queue) beside the fixed
# walk in the same binary: y_sha256 (compare with calls 1-3), medians alternated at T = 4096 and 64.
set -u
START=$(date +%s)
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
. scripts/device-lib.sh
for m in olmoe-1b-7b gpt-oss-20b qwen3-30b-a3b; do
  for p in bf16 mxfp8; do run_json queue $mokc $m $p 0,1,64,4096 --items queue; done
done
echo "checks done at $(( $(date +%s) - START )) s" >> $S
BENCH_BUDGET=330
for i in 1 2; do
  for m in qwen3-30b-a3b gpt-oss-20b mixtral-8x7b olmoe-1b-7b; do
    for p in bf16 mxfp8; do
      for it in fixed queue; do bench $it-$p $mokc 4096 --model $m --precision $p --items $it --iters 20; done
    done
  done
  for m in olmoe-1b-7b deepseek-v2-lite qwen2-57b-a14b; do
    for it in fixed queue; do bench $it-mxfp8 $mokc 64 --model $m --precision mxfp8 --items $it --iters 50; done
  done
done
for it in fixed queue; do bench ph-$it $mokc 4096 --model gpt-oss-20b --precision bf16 --items $it --phases --iters 20; done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
