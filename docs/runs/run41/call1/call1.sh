#!/usr/bin/env bash
# run 41 call 1 (about 450 s). Carry: .carry/bins.tgz of `make device-bins` and .carry/mokc-old.gz
# of `make device-old-cli REV=29f85a4` (the CLI with one thread per block in moe_quantize*).
#  1. FC2 of 192 token rows with FC1 at its default (docs/perf.md, mxfp8 v38: outcome): the bits of
#     the default at T = 1024 and 4096, memcheck at T = 300; timed against the default and bf16 at
#     T = 4096 on the presets of 512 and more rows per expert, alternated twice.
#  2. What run 40 did not reach: the final quantize build's bits against 29f85a4's CLI on three
#     presets; memcheck of the mxfp8 forward at T = 64; TestLayerBackward's sm_90a cases.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
F192="--fc2-tile 192x128x128"
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
for m in olmoe-1b-7b mixtral-8x7b gpt-oss-20b; do
	run_json default "$mokc" $m mxfp8 1024,4096
	run_json fc2-192 "$mokc" $m mxfp8 1024,4096 $F192
done
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model olmoe-1b-7b --target sm_90a --precision mxfp8 --tokens 300 --repeat 1 $F192 >"$O/memcheck192.log" 2>&1
echo "memcheck fc2-192 olmoe-1b-7b mxfp8 T=300 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck192.log")" >>"$S"
BENCH_BUDGET=${BENCH_BUDGET:-280}
for i in 1 2; do
	for m in olmoe-1b-7b mixtral-8x7b gpt-oss-20b; do
		bench bf "$mokc" 4096 --model $m --iters 20 --kernels
		bench mx "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
		bench mx-fc2-192 "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels $F192
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
for m in deepseek-v3 gpt-oss-20b deepseek-v2-lite; do
	left 330 || break
	run_json old "$C/mokc-old" $m mxfp8 0,1,64,4096
	run_json new "$mokc" $m mxfp8 0,1,64,4096
done
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 64 --repeat 1 >"$O/memcheck.log" 2>&1
echo "memcheck qwen3-30b-a3b mxfp8 T=64 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
left 360 && pkgtest runtime bwd $((450 - $(date +%s) + START)) $C/runtime.test -test.v -test.count=1 -test.run 'TestLayerBackward$/.*/sm_90a'
grep -hE -- "--- FAIL|^(ok|FAIL|PASS)" "$O/bwd.log" 2>/dev/null | head -8 >>"$S"
cat "$S"
