#!/usr/bin/env bash
# run 55 call 1 (about 90 s; carry: `make device-bins` of the tree): where the persistent backward
# loses its 21-26% against per-op (run 54, calls 3 and 4): both lowerings' backward at qwen3-30b-a3b
# T = 4096 and 2400 with --phases (the backward's kernels and phases on the device's timer), and the
# persistent backward with --wgrad wgmma-ws (the weight gradients as GEMM phases of one block per
# SM instead of virtual blocks of 256 threads) against the default, alternated, two rounds; first
# that backward's reference checks and bits against per-op's at T = 300 and 2400 (mokc run).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=60
run_json pers-ws-bwd "$mokc" qwen3-30b-a3b bf16 300,2400 --backward --lowering persistent --wgrad wgmma-ws
run_json perop-ws-bwd "$mokc" qwen3-30b-a3b bf16 300,2400 --backward --wgrad wgmma-ws
BENCH_BUDGET=200
P="--lowering persistent"
for T in 4096 2400; do
	bench "pers-bwd-phases-T$T" "$mokc" $T --model qwen3-30b-a3b --iters 10 --backward $P --phases
	bench "perop-bwd-phases-T$T" "$mokc" $T --model qwen3-30b-a3b --iters 10 --backward --phases
done
for r in 1 2; do
	bench "pers-bwd-ws-T4096-r$r" "$mokc" 4096 --model qwen3-30b-a3b --iters 10 --backward $P --wgrad wgmma-ws
	bench "pers-bwd-T4096-r$r" "$mokc" 4096 --model qwen3-30b-a3b --iters 10 --backward $P
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
tail -3 "$O/bench.log" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
