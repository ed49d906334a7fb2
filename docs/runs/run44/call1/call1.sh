#!/usr/bin/env bash
# run 44 call 1 (LIMIT seconds, 570 by default). Carry: .carry/bins.tgz of `make device-bins` with
# the branch exp/predicated-epilogue (40a975b, its goldens 4fddf66: the register-fed bf16 epilogues
# with predicated stores, one copy for whole and partial tiles) merged into main, and
# .carry/mokc-old.gz of
# `make device-old-cli REV=<main before the merge>` (the whole-tile copy of 1b1decb). docs/perf.md,
# "Register-fed epilogues with predicated stores" (prediction written in run 43, before this call):
#  1. The old CLI's y_sha256 against the new one's: whole and partial tiles, gate/up halves (FC1),
#     interleaved gate/up rows (gpt-oss-20b's FC1), FC2Large (its band and from 320 rows), shared
#     experts; memcheck of partial tiles.
#  2. TestSM90MXGemmGPU's register-fed cases and TestSM90RoundOddGPU (GPU against the reference).
#  3. Speed: old against new, mxfp8 T = 4096, two alternated rounds, and bf16 beside them.
START=$(date +%s)
LIMIT=${LIMIT:-570}
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
for b in old new; do
	bin=$mokc
	[ $b = old ] && bin=$C/mokc-old
	run_json $b "$bin" qwen3-30b-a3b mxfp8 1,64,100,2048,4095,4096
	run_json $b "$bin" gpt-oss-20b mxfp8 64,1000,2600,4096
	run_json $b "$bin" mixtral-8x7b mxfp8 640,1000,4096
	run_json $b "$bin" olmoe-1b-7b mxfp8 3100
	run_json $b "$bin" qwen2-57b-a14b mxfp8 1024,4096
done
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 4095 --repeat 1 >"$O/memcheck.log" 2>&1
echo "memcheck qwen3-30b-a3b mxfp8 T=4095 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model gpt-oss-20b --target sm_90a --precision mxfp8 --tokens 2600 --repeat 1 >"$O/memcheck2.log" 2>&1
echo "memcheck gpt-oss-20b mxfp8 T=2600 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck2.log")" >>"$S"
pkgtest codegen rf 150 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU/mx_rf|TestSM90RoundOddGPU'
BENCH_BUDGET=$((LIMIT - 40))
for i in 1 2; do
	for m in qwen3-30b-a3b gpt-oss-20b olmoe-1b-7b mixtral-8x7b deepseek-v2-lite qwen2-57b-a14b; do
		bench old "$C/mokc-old" 4096 --model $m --precision mxfp8 --iters 20 --kernels
		bench new "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
		[ $i = 1 ] && bench bf16 "$mokc" 4096 --model $m --iters 20 --kernels
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
pack_logs
cat "$S"
