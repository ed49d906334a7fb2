#!/usr/bin/env bash
# run 46 call 1 (every part bounded; the known-good parts first). Carry: .carry/bins.tgz of `make
# device-bins` (the combine's loads issued together; the persistent lowering with shared experts
# allowed) and .carry/mokc-old.gz (`make device-old-cli REV=16e20f0`, main before). docs/perf.md,
# "persistent v2" (prediction written before this call):
#  1. y_sha256 of the per-op forward, old against new binary (the combine's bits unchanged).
#  2. Speed: the per-op combine kernel, old against new; the persistent qwen3-30b-a3b's phases.
#  3. The persistent forward: qwen3-30b-a3b bf16 and mxfp8 (first run), then every preset with
#     shared experts, per-op against persistent on the same tiles, each run stopped with SIGQUIT
#     (a Go stack dump) if it does not finish; deepseek-v2-lite three times at each T, with and
#     without split-K.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
old=$C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
B="--fc1-tile 128x256x64 --fc2-tile 128x256x64"
M="--fc1-tile 128x256x128 --fc2-tile 128x256x128"
RUN_TIMEOUT=60
for bin in old new; do
	x=$mokc
	[ $bin = old ] && x=$old
	run_json per-op-$bin $x qwen3-30b-a3b bf16 1,64,300,4096
	run_json per-op-$bin $x qwen2-57b-a14b bf16 1,300 $B
	run_json per-op-$bin $x qwen3-30b-a3b mxfp8 64,1100 $M
done
echo "-- speed" >>"$S"
BENCH_BUDGET=200
bench per-op-old "$old" 4096 --model qwen3-30b-a3b --iters 30 --kernels $B
bench per-op-new "$mokc" 4096 --model qwen3-30b-a3b --iters 30 --kernels $B
bench per-op-old "$old" 4096 --model deepseek-v3 --iters 10 --kernels $B
bench per-op-new "$mokc" 4096 --model deepseek-v3 --iters 10 --kernels $B
bench persistent-new "$mokc" 4096 --model qwen3-30b-a3b --iters 30 --lowering persistent --phases
bench persistent-old "$old" 4096 --model qwen3-30b-a3b --iters 30 --lowering persistent --phases
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
echo "-- persistent forward" >>"$S"
RUN_TIMEOUT=45
run_json persistent "$mokc" qwen3-30b-a3b bf16 1,64,300,4096 --lowering persistent --wait-limit 3s
run_json per-op "$mokc" qwen3-30b-a3b mxfp8 1,64,1100,4096 $M
run_json persistent "$mokc" qwen3-30b-a3b mxfp8 1,64,1100,4096 $M --lowering persistent --wait-limit 3s
D=deepseek-v2-lite
run_json per-op "$mokc" $D bf16 1,64,300,2000,4096 $B
run_json per-op-nosplit "$mokc" $D bf16 1,64 $B --split-k off
for rep in 1 2 3; do
	left 420 || break
	for T in 1 64 300 2000 4096; do
		run_json persistent "$mokc" $D bf16 $T $B --lowering persistent --wait-limit 3s
	done
	run_json persistent-nosplit "$mokc" $D bf16 1,64 $B --lowering persistent --wait-limit 3s --split-k off
done
for m in qwen2-57b-a14b:1,64,300,2000 llama4-scout:1,64,300 deepseek-v3:1,64,300 kimi-k2:1,64 deepseek-v4-flash:1,64,300; do
	left 500 || break
	run_json per-op "$mokc" ${m%%:*} bf16 ${m#*:} $B
	run_json persistent "$mokc" ${m%%:*} bf16 ${m#*:} $B --lowering persistent --wait-limit 3s
done
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
