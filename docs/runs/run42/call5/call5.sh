#!/usr/bin/env bash
# run 42 call 5 (about 400 s). Carry: .carry/bins.tgz of `make device-bins` at the commit with
# FC2Large from 320 rows per expert (ffce64e or later), .carry/mokc-old.gz of `make device-old-cli
# REV=df07a45`. docs/perf.md, "FC2Large from 320 rows, and issue #11's table" (prediction written
# before this call):
#  1. The old CLI's y_sha256 where the default's range moved (T at 320 rows per expert and below);
#     memcheck of gpt-oss-20b mxfp8 at T = 2600.
#  2. The runtime tests over the default schedules: TestChainGPU, TestCaptureForward,
#     TestLayerForward.
#  3. Issue #11's T = 4096 table, bf16 and mxfp8 on eight presets, two rounds.
#  4. 128 rows per expert (deepseek-v3, gpt-oss-120b T = 4096): --fc2-large-min-rows 100 against the
#     default, as far as the time allows.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
run_json old "$C/mokc-old" olmoe-1b-7b mxfp8 2559,2560
run_json new "$mokc" olmoe-1b-7b mxfp8 2559,2560
run_json old "$C/mokc-old" gpt-oss-20b mxfp8 2560,3000
run_json new "$mokc" gpt-oss-20b mxfp8 2560,3000
run_json old "$C/mokc-old" mixtral-8x7b mxfp8 1280
run_json new "$mokc" mixtral-8x7b mxfp8 1280
run_json old "$C/mokc-old" qwen2-57b-a14b mxfp8 2560
run_json new "$mokc" qwen2-57b-a14b mxfp8 2560
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model gpt-oss-20b --target sm_90a --precision mxfp8 --tokens 2600 --repeat 1 >"$O/memcheck.log" 2>&1
echo "memcheck gpt-oss-20b mxfp8 T=2600 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
pkgtest runtime rt 200 $C/runtime.test -test.v -test.count=1 -test.run 'TestCaptureForward|TestChainGPU|TestLayerForward$'
BENCH_BUDGET=${BENCH_BUDGET:-440}
for i in 1 2; do
	for m in qwen3-30b-a3b mixtral-8x7b deepseek-v2-lite olmoe-1b-7b gpt-oss-20b qwen2-57b-a14b deepseek-v3 gpt-oss-120b; do
		bench bf16 "$mokc" 4096 --model $m --iters 20 --kernels
		bench mx "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
	done
done
BENCH_BUDGET=330
for i in 1 2; do
	for m in gpt-oss-120b deepseek-v3; do
		bench mx-100 "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels --fc2-large-min-rows 100
		bench mx "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
cat "$S"
