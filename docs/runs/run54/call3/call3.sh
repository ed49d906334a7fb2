#!/usr/bin/env bash
# run 54 call 3 (about 420 s; same carry as call 1): the cases of TestPersistentBackwardGPU that
# call 1's time bound did not reach (gpt-oss-20b of 4 experts at T = 150, its moe_backward_mid, and
# the small shared-gate layer), then the backward at qwen3-30b-a3b T = 2400 (150 rows per expert:
# moe_backward_mid) persistent against per-op, alternated, two rounds.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
pkgtest runtime persist-bwd2 330 $C/runtime.test -test.v -test.count=1 -test.timeout 325s -test.run 'TestPersistentBackwardGPU$/^(gpt-oss-20b-E4|shared-gate-map-bf16)$'
grep -E "^\s*--- |panic|timed out|rel L2" "$O/persist-bwd2.log" | head -40 >>"$S"
echo "test done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=430
for r in 1 2; do
	bench "pers-bwd-qwen3-30b-a3b-T2400-r$r" "$mokc" 2400 --model qwen3-30b-a3b --iters 10 --backward --lowering persistent
	bench "perop-bwd-qwen3-30b-a3b-T2400-r$r" "$mokc" 2400 --model qwen3-30b-a3b --iters 10 --backward
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
