#!/usr/bin/env bash
# run 48 call 2. Carry: `make device-bins` of the tree and .carry/mokc-old.gz (fc02b84's CLI:
# combine v4's header). Every part bounded.
#  1. combine v5 (docs/perf.md): the persistent forward's bits against the per-op kernels' and
#     fc02b84's, and its combine phase against fc02b84's (qwen3-30b-a3b T = 4096, 1).
#  2. Decode tiles (docs/perf.md "Decode tiles, a sweep"; prediction there): the bf16 forward's
#     per-op kernels at T = 1, 8 and 64 under five GEMM tile shapes (the default's 128x256 and four
#     narrower ones, more stages), qwen3-30b-a3b, deepseek-v3 and gpt-oss-120b: which shape streams
#     the weights of the few routed experts fastest.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
old=$C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=40
run_json per-op "$mokc" qwen3-30b-a3b bf16 1,63,4095
run_json persistent "$mokc" qwen3-30b-a3b bf16 1,63,4095 --lowering persistent
run_json old-persistent "$old" qwen3-30b-a3b bf16 1,63,4095 --lowering persistent
run_json persistent "$mokc" deepseek-v2-lite bf16 1,300 --lowering persistent
run_json per-op "$mokc" deepseek-v2-lite bf16 1,300
BENCH_BUDGET=150
for r in 1 2; do
	bench old-persistent "$old" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
	bench persistent "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
done
bench old-persistent "$old" 1 --model qwen3-30b-a3b --iters 50 --lowering persistent --phases
bench persistent "$mokc" 1 --model qwen3-30b-a3b --iters 50 --lowering persistent --phases
echo "part 1 done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=520
tiles=(
	""
	"--fc1-tile 128x128x64 --fc2-tile 128x128x64 --stages 4"
	"--fc1-tile 128x64x64 --fc2-tile 128x64x64 --stages 6"
	"--fc1-tile 64x128x64 --fc2-tile 64x128x64 --mma-warps 4 --stages 6"
	"--fc1-tile 64x64x64 --fc2-tile 64x64x64 --mma-warps 4 --stages 8"
)
for m in qwen3-30b-a3b deepseek-v3 gpt-oss-120b; do
	for T in 1 8 64; do
		for i in 0 1 2 3 4; do
			# shellcheck disable=SC2086
			bench "tile$i-$m" "$mokc" $T --model $m --iters 30 --kernels ${tiles[$i]}
		done
	done
done
bench_kernels
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
