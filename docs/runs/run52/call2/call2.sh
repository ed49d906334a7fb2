#!/usr/bin/env bash
# run 52 call 2 (same carry as call 1): speed, alternated, of old's persistent kernel, the tree's
# persistent kernels and the tree's per-op kernels where the kernels per block shape change what runs:
# qwen3-30b-a3b T = 1 and 64 (moe_forward_decode), 2000 (moe_forward_mid), 4096 (unchanged),
# gpt-oss-120b T = 4096 (moe_forward_mid); then the phases of the new kernels at T = 64 and 2000.
# First TestPersistentBackwardGPU (moe_backward_mid).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
old_cli
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
P="--lowering persistent"
# the backward's kernel per block shape (moe_backward_mid at 150 mean rows per expert)
pkgtest runtime persist-bwd 150 $C/runtime.test -test.v -test.count=1 -test.timeout 145s -test.run 'TestPersistentBackwardGPU$'
[ -f "$O/persist-bwd.log" ] && grep -E "^--- |^    --- FAIL|panic|timed out" "$O/persist-bwd.log" | head -20 >>"$S"
BENCH_BUDGET=520
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
