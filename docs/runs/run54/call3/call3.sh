#!/usr/bin/env bash
# run 54 call 3 (about 450 s; same carry as call 1): the forward at qwen3-30b-a3b T = 4096, both
# lowerings with and without --plain-launch, alternated, two rounds (call 1: per-op 1.7% ahead in
# the timed pass, level in the phases pass: is it the programmatic launch of per-op's five
# kernels?); the backward at qwen3-30b-a3b T = 2400 (150 rows per expert: moe_backward_mid)
# persistent against per-op, two rounds; then, in the time left, the cases of
# TestPersistentBackwardGPU that call 1's time bound did not reach (gpt-oss-20b of 4 experts at
# T = 150, its moe_backward_mid, and the small shared-gate layer).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
BENCH_BUDGET=200
P="--lowering persistent"
for r in 1 2; do
	for pl in "" --plain-launch; do
		bench "pers$pl-qwen3-30b-a3b-T4096-r$r" "$mokc" 4096 --model qwen3-30b-a3b --iters 20 $P $pl
		bench "perop$pl-qwen3-30b-a3b-T4096-r$r" "$mokc" 4096 --model qwen3-30b-a3b --iters 20 $pl
	done
done
for r in 1 2; do
	bench "pers-bwd-qwen3-30b-a3b-T2400-r$r" "$mokc" 2400 --model qwen3-30b-a3b --iters 10 --backward --lowering persistent
	bench "perop-bwd-qwen3-30b-a3b-T2400-r$r" "$mokc" 2400 --model qwen3-30b-a3b --iters 10 --backward
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
echo "benches done $(($(date +%s) - START)) s" >>"$S"
T=$((445 - ($(date +%s) - START)))
[ "$T" -gt 60 ] && pkgtest runtime persist-bwd2 $T $C/runtime.test -test.v -test.count=1 -test.timeout $((T - 5))s -test.run 'TestPersistentBackwardGPU$/^(gpt-oss-20b-E4|shared-gate-map-bf16)$'
[ -f "$O/persist-bwd2.log" ] && grep -E "^\s*--- |panic|timed out|rel L2" "$O/persist-bwd2.log" | head -40 >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
