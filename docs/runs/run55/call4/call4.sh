#!/usr/bin/env bash
# run 55 call 4 (about 6 minutes; carry: `make device-bins` of the tree): the persistent backward's
# new defaults (act_grad's blocks of the base GEMMs' 384 threads, four groups of 96 at I = 768; the
# weight gradients on wgmma-ws): reference checks and grads_sha256 against call 3's per-op digests
# on the five layers, the row-wise wgmma form once more, TestPersistentBackwardGPU, racecheck; the
# timings at qwen3-30b-a3b T = 4096, 2400, 1100 against per-op, phases at 4096, deepseek-v2-lite at
# 4096; then ncu of per-op's FC1 weight gradient at T = 4096, wgmma and wgmma-ws (where the
# warp-specialized kernel loses its 13%).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=100
P="--lowering persistent"
run_json pers-bwd "$mokc" qwen3-30b-a3b bf16 300,2400,4096 --backward $P
run_json pers-wgmma-bwd "$mokc" qwen3-30b-a3b bf16 300 --backward $P --wgrad wgmma
run_json pers-bwd "$mokc" deepseek-v2-lite bf16 200,1000 --backward $P
run_json pers-bwd "$mokc" gpt-oss-20b bf16 200,1000 --backward $P
run_json pers-bwd "$mokc" qwen3-30b-a3b mxfp8 300 --backward $P
run_json pers-bwd "$mokc" llama4-scout bf16 64,300 --backward $P
echo "bits done $(($(date +%s) - START)) s" >>"$S"
SAN_BUDGET=200 san racecheck q3-bwd-300 60 --model qwen3-30b-a3b --tokens 300 --backward
T=$((200 - ($(date +%s) - START)))
[ "$T" -gt 40 ] && pkgtest runtime persist-bwd $T $C/runtime.test -test.v -test.count=1 -test.timeout $((T - 5))s -test.run 'TestPersistentBackwardGPU$'
BENCH_BUDGET=400
B="--model qwen3-30b-a3b --iters 10 --backward"
for r in 1 2; do
	for T in 4096 1100; do
		bench "perop-T$T-r$r" "$mokc" $T $B
		bench "pers-T$T-r$r" "$mokc" $T $B $P
	done
done
bench "perop-T2400" "$mokc" 2400 $B
bench "pers-T2400" "$mokc" 2400 $B $P
bench pers-phases-T4096 "$mokc" 4096 $B $P --phases
bench dsv2-perop-T4096 "$mokc" 4096 --model deepseek-v2-lite --iters 10 --backward
bench dsv2-pers-T4096 "$mokc" 4096 --model deepseek-v2-lite --iters 10 --backward $P
grep -hv "^{" "$O/bench.jsonl" >>"$S"
tail -3 "$O/bench.log" >>"$S"
rm -f "$O/tmp.json"
for w in wgmma wgmma-ws; do
	left 480 && timeout 60 ncu --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy \
		-k regex:moe_fc1_wgrad -c 1 "$mokc" bench --target sm_90a --tokens 4096 $B --iters 1 --wgrad $w >"$O/ncu-$w.log" 2>&1
	echo "ncu $w rc=$?" >>"$S"
done
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
