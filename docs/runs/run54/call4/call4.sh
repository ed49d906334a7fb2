#!/usr/bin/env bash
# run 54 call 4: three short commands on the warm H100 after call 3 (carry: `make device-bins` of
# cf56867), kept here as they ran. Call 3 had the persistent backward 26% slower than per-op at
# qwen3-30b-a3b T = 2400 (moe_backward_mid): is it the mid kernel, or every T? Which kernels?
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
BENCH_BUDGET=100
# 1. the backward at T = 1100, 4096, 2400, both lowerings (out/bench-T.jsonl)
for T in 1100 4096 2400; do
	bench "pers-bwd-T$T" "$mokc" $T --model qwen3-30b-a3b --iters 10 --backward --lowering persistent
	bench "perop-bwd-T$T" "$mokc" $T --model qwen3-30b-a3b --iters 10 --backward
done
# 2. per-op's backward kernel by kernel (the output tail is in docs/perf.md, run 54)
"$mokc" bench --target sm_90a --model qwen3-30b-a3b --tokens 4096 --iters 10 --backward --kernels
# 3. the weight-gradient kernels, --wgrad wgmma against wgmma-ws, both lowerings, two rounds
#    (out/bench-wgrad.jsonl; the persistent wgmma-ws backward was refused by codegen then)
for r in 1 2; do
	for w in wgmma wgmma-ws; do
		bench "pers-bwd-$w" "$mokc" 4096 --model qwen3-30b-a3b --iters 10 --backward --lowering persistent --wgrad $w
		bench "perop-bwd-$w" "$mokc" 4096 --model qwen3-30b-a3b --iters 10 --backward --wgrad $w
	done
done
"$mokc" bench --target sm_90a --model qwen3-30b-a3b --tokens 4096 --iters 10 --backward --kernels --wgrad wgmma-ws | grep wgrad
