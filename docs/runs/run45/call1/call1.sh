#!/usr/bin/env bash
# run 45 call 1 (LIMIT seconds, 570 by default). Carry: .carry/bins.tgz of `make device-bins` (the
# persistent lowering, --lowering persistent). docs/perf.md, "persistent v1" (prediction written
# before this call):
#  1. TestPersistentGPU (the per-op bits, graph replays) and TestPersistentBackwardGPU (the
#     backward's reference checks) of runtime.test.
#  2. y_sha256 of the CLI, per-op against persistent (the same tiles), T = 0 .. 4096.
#  3. memcheck of the persistent forward.
#  4. Speed: per-op against persistent, T = 64 and 4096, with the phase times of the persistent kernel.
START=$(date +%s)
LIMIT=${LIMIT:-570}
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
pkgtest runtime persist 240 $C/runtime.test -test.v -test.count=1 -test.run 'TestPersistentGPU|TestPersistentBackwardGPU'
grep -E "^\s*--- (FAIL|PASS)|panic|timed out" "$O/persist.log" | head -60 >>"$S"
B="--fc1-tile 128x256x64 --fc2-tile 128x256x64" # the base tiles: no GEMM variant in either lowering
for low in per-op persistent; do
	run_json $low "$mokc" qwen3-30b-a3b bf16 0,1,64,300,1100,4096 --lowering $low
	run_json $low "$mokc" gpt-oss-20b bf16 1,64,2000,4096 --lowering $low $B
	run_json $low "$mokc" deepseek-v2-lite bf16 1,64,4096 --lowering $low $B
	run_json $low "$mokc" qwen3-30b-a3b mxfp8 1,64,1100,4096 --lowering $low --fc1-tile 128x256x128 --fc2-tile 128x256x128
done
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --tokens 1100 --repeat 1 --lowering persistent --wait-limit 0 >"$O/memcheck.log" 2>&1
echo "memcheck persistent qwen3-30b-a3b T=1100 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --tokens 64 --repeat 1 --lowering persistent --wait-limit 0 >"$O/memcheck2.log" 2>&1
echo "memcheck persistent qwen3-30b-a3b T=64 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck2.log")" >>"$S"
BENCH_BUDGET=$((LIMIT - 30))
for i in 1 2; do
	for T in 4096 64; do
		bench per-op "$mokc" $T --model qwen3-30b-a3b --iters 30
		bench persistent "$mokc" $T --model qwen3-30b-a3b --iters 30 --lowering persistent
	done
	bench per-op-base "$mokc" 4096 --model deepseek-v3 --iters 10 $B
	bench persistent "$mokc" 4096 --model deepseek-v3 --iters 10 --lowering persistent
	bench per-op "$mokc" 4096 --model mixtral-8x7b --iters 10
	bench persistent "$mokc" 4096 --model mixtral-8x7b --iters 10 --lowering persistent
done
bench persistent-phases "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
bench per-op-phases "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --phases
bench persistent-phases "$mokc" 64 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
pack_logs
cat "$S"
