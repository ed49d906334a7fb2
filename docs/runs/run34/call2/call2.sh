#!/usr/bin/env bash
# run 34 call 2: items v1 with the item ring rounded up to 128 bytes (call 1's bf16 forwards
# faulted: the 88-byte ring of a 3-stage ring left the staging tile 8-byte aligned): y_sha256 fixed
# against queue (bf16 and mxfp8, T = 0, 1, 64, 4096), the bf16 backward, racecheck of the fixed
# walk beside call 1's 20 reports on the queue's moe_fc1_decode, then T = 4096 and 64 medians.
set -u
START=$(date +%s)
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
. scripts/device-lib.sh
for m in olmoe-1b-7b qwen3-30b-a3b deepseek-v2-lite mixtral-8x7b; do
  for it in fixed queue; do run_json $it $mokc $m bf16 0,1,64,4096 --items $it; done
done
for it in fixed queue; do run_json $it $mokc mixtral-8x7b mxfp8 1,64,4096 --items $it; done
timeout 120 $mokc run --backward --model qwen3-30b-a3b --target sm_90a --precision bf16 --tokens 1,64,1000 --items queue > $O/bwd-bf16.log 2>&1
echo "backward bf16 rc=$? $(grep -E 'PASS|FAIL' $O/bwd-bf16.log | tail -1)" >> $S
echo "backward mxfp8 (call 1) see call 1" >> $S
for it in fixed queue; do
  timeout 100 compute-sanitizer --tool racecheck $mokc run --model olmoe-1b-7b --target sm_90a --precision mxfp8 --tokens 64 --repeat 1 --items $it > $O/san-racecheck-$it.log 2>&1
  echo "racecheck $it rc=$? $(grep -E 'RACECHECK SUMMARY' $O/san-racecheck-$it.log | head -1)" >> $S
done
timeout 100 compute-sanitizer --tool memcheck $mokc run --model qwen3-30b-a3b --target sm_90a --precision bf16 --tokens 64,4096 --repeat 1 --items queue > $O/san-memcheck.log 2>&1
echo "memcheck bf16 queue rc=$? $(grep -E 'ERROR SUMMARY' $O/san-memcheck.log | head -1)" >> $S
echo "checks done at $(( $(date +%s) - START )) s" >> $S
for i in 1 2; do
  for m in qwen3-30b-a3b olmoe-1b-7b deepseek-v2-lite gpt-oss-20b mixtral-8x7b; do
    for p in bf16 mxfp8; do
      for it in fixed queue; do bench $it-$p $mokc 4096 --model $m --precision $p --items $it --iters 20; done
    done
  done
done
for p in bf16 mxfp8; do
  for it in fixed queue; do bench $it-$p $mokc 64 --model olmoe-1b-7b --precision $p --items $it --iters 50; done
done
for it in fixed queue; do bench ph-$it $mokc 4096 --model qwen3-30b-a3b --precision mxfp8 --items $it --phases --iters 20; done
for it in fixed queue; do bench ph-$it $mokc 4096 --model qwen3-30b-a3b --precision bf16 --items $it --phases --iters 20; done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
