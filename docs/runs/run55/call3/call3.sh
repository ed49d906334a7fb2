#!/usr/bin/env bash
# run 55 call 3 (about 6 minutes; carry: `make device-bins` of the tree, then `make device-old-cli
# REV=ffacf01`): the backward's act_grad in the persistent kernel on several rows per virtual block
# (two per group of a row's warps, their loads issued together) and combine_grad's dxs chunks
# loaded before the first sum (both lowerings). First the bits: per-op (one row per block) against
# persistent by grads_sha256, and the old per-op's relative errors against the new per-op's, on
# layers that take each act_grad shape (qwen3-30b-a3b I = 768: 4 groups of 96 threads;
# deepseek-v2-lite I = 1408 and its shared experts' 2816 without offsets; gpt-oss-20b I = 2880
# interleaved, two chunks per thread; qwen3-30b-a3b mxfp8; llama4-scout's weight on the input);
# racecheck of the persistent backward; then the timings at qwen3-30b-a3b T = 4096, 2400, 1100 of
# per-op (old and new), persistent and persistent --wgrad wgmma-ws, and the phases at 4096.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
old_cli
C=$PWD/.carry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=100
P="--lowering persistent"
run_json perop-bwd "$mokc" qwen3-30b-a3b bf16 300,2400,4096 --backward
run_json pers-bwd "$mokc" qwen3-30b-a3b bf16 300,2400,4096 --backward $P
run_json pers-ws-bwd "$mokc" qwen3-30b-a3b bf16 300,2400,4096 --backward $P --wgrad wgmma-ws
run_json old-perop-bwd "$old" qwen3-30b-a3b bf16 300,2400 --backward
for m in deepseek-v2-lite gpt-oss-20b; do
	run_json perop-bwd "$mokc" $m bf16 200,1000 --backward
	run_json pers-bwd "$mokc" $m bf16 200,1000 --backward $P
	run_json old-perop-bwd "$old" $m bf16 200 --backward
done
run_json perop-bwd "$mokc" qwen3-30b-a3b mxfp8 300 --backward
run_json pers-bwd "$mokc" qwen3-30b-a3b mxfp8 300 --backward $P
run_json perop-bwd "$mokc" llama4-scout bf16 64,300 --backward
run_json pers-bwd "$mokc" llama4-scout bf16 64,300 --backward $P
echo "bits done $(($(date +%s) - START)) s" >>"$S"
SAN_BUDGET=260 san racecheck q3-bwd-300 60 --model qwen3-30b-a3b --tokens 300 --backward
BENCH_BUDGET=420
B="--model qwen3-30b-a3b --iters 10 --backward"
for r in 1 2; do
	for T in 4096 1100; do
		bench "perop-T$T-r$r" "$mokc" $T $B
		bench "pers-T$T-r$r" "$mokc" $T $B $P
		bench "pers-ws-T$T-r$r" "$mokc" $T $B $P --wgrad wgmma-ws
		bench "old-perop-T$T-r$r" "$old" $T $B
	done
done
for T in 2400; do
	bench "perop-T$T" "$mokc" $T $B
	bench "pers-T$T" "$mokc" $T $B $P
	bench "pers-ws-T$T" "$mokc" $T $B $P --wgrad wgmma-ws
done
bench pers-phases-T4096 "$mokc" 4096 $B $P --phases
bench pers-ws-phases-T4096 "$mokc" 4096 $B $P --wgrad wgmma-ws --phases
bench perop-phases-T4096 "$mokc" 4096 $B --phases
bench old-perop-phases-T4096 "$old" 4096 $B --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
tail -3 "$O/bench.log" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
