#!/usr/bin/env bash
# run 52 call 2 (same carry as call 1): speed, alternated, of old's persistent kernel, the tree's
# persistent kernels and the tree's per-op kernels where the kernels per block shape change what runs:
# qwen3-30b-a3b T = 1 and 64 (moe_forward_decode), 2000 (moe_forward_mid), 4096 (unchanged),
# gpt-oss-120b T = 4096 (moe_forward_mid); then the phases of the new kernels at T = 64 and 2000.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
old_cli
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
P="--lowering persistent"
BENCH_BUDGET=480
for r in 1 2; do
	for c in "qwen3-30b-a3b 1 200" "qwen3-30b-a3b 64 100" "qwen3-30b-a3b 2000 30" "qwen3-30b-a3b 4096 20" "gpt-oss-120b 4096 20"; do
		set -- $c
		bench "old-pers-$1-T$2-r$r" "$old" $2 --model $1 --iters $3 $P
		bench "new-pers-$1-T$2-r$r" "$mokc" $2 --model $1 --iters $3 $P
		bench "new-perop-$1-T$2-r$r" "$mokc" $2 --model $1 --iters $3
	done
done
bench new-phases-T64 "$mokc" 64 --model qwen3-30b-a3b --iters 50 $P --phases
bench new-phases-T2000 "$mokc" 2000 --model qwen3-30b-a3b --iters 20 $P --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
