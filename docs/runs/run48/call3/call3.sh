#!/usr/bin/env bash
# run 48 call 3. Carry: `make device-bins` of the tree and .carry/mokc-old.gz (the CLI before the
# decode tiles). Every part bounded. Prediction: docs/perf.md, "decode v1".
#  1. Correctness: TestLayerForward (the default schedules, the decode tiles at T <= 4 mean rows per
#     expert); the per-op forward's y_sha256 and rel L2 of the new and the old CLI at T in and
#     just past the decode range on seven bf16 presets; memcheck of the decode kernels.
#  2. Speed: the forward old / new at T = 1, 8, 64 (and 16 on qwen3-30b-a3b), with
#     each kernel's time; a second round on qwen3-30b-a3b and gpt-oss-120b.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
old=$C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
pkgtest runtime layer 150 $C/runtime.test -test.v -test.count=1 -test.timeout 140s -test.run 'TestLayerForward$'
grep -E "^--- |^    --- FAIL|panic|timed out" "$O/layer.log" | head -10 >>"$S"
RUN_TIMEOUT=60
for m in qwen3-30b-a3b gpt-oss-120b deepseek-v2-lite mixtral-8x7b olmoe-1b-7b gpt-oss-20b; do
	run_json new "$mokc" $m bf16 1,7,64,65,300
	run_json old "$old" $m bf16 1,7,64,65,300
done
run_json new "$mokc" deepseek-v3 bf16 1,64
run_json old "$old" deepseek-v3 bf16 1,64
for T in 1 64; do
	timeout -k 10 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --target sm_90a --repeat 1 \
		--model qwen3-30b-a3b --tokens $T >"$O/memcheck-$T.log" 2>&1
	echo "memcheck qwen3 T=$T rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck-$T.log" | tail -1)" >>"$S"
done
echo "part 1 done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=540
for r in 1 2; do
	models="qwen3-30b-a3b gpt-oss-120b deepseek-v3 mixtral-8x7b olmoe-1b-7b"
	[ $r = 2 ] && models="qwen3-30b-a3b gpt-oss-120b"
	for m in $models; do
		for T in 1 8 64; do
			bench "old-$m-T$T" "$old" $T --model $m --iters 30 --kernels
			bench "new-$m-T$T" "$mokc" $T --model $m --iters 30 --kernels
		done
	done
	bench old-qwen3-30b-a3b-T16 "$old" 16 --model qwen3-30b-a3b --iters 30 --kernels
	bench new-qwen3-30b-a3b-T16 "$mokc" 16 --model qwen3-30b-a3b --iters 30 --kernels
done
bench_kernels
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
