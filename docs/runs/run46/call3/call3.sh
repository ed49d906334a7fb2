#!/usr/bin/env bash
# run 46 call 3 (every part bounded). Carry: .carry/bins.tgz of `make device-bins` (the persistent
# lowering's gather of 3 rows per warp and combine of 2 tokens per block) and .carry/mokc-old.gz
# (`make device-old-cli REV=45820e5`: persistent v2). docs/perf.md, "persistent v3" (prediction
# written before this call):
#  1. y_sha256, per-op against the new persistent kernel, odd T included, on presets that reach each
#     path of the two kernels (weights on the input, the shared gate, mxfp8's quantizing gather).
#  2. Speed: per-op, persistent v2 (old) and v3 (new), alternated, with phase times.
#  3. TestPersistentGPU, TestPersistentBackwardGPU (its new token counts); memcheck.
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
for low in per-op persistent; do
	run_json $low "$mokc" qwen3-30b-a3b bf16 1,63,301,1100,4095 $B --lowering $low --wait-limit 3s
	run_json $low "$mokc" qwen2-57b-a14b bf16 1,63,2001 $B --lowering $low --wait-limit 3s
	run_json $low "$mokc" llama4-scout bf16 1,63,301 $B --lowering $low --wait-limit 3s
	run_json $low "$mokc" qwen3-30b-a3b mxfp8 1,63,1101,4095 $M --lowering $low --wait-limit 3s
	run_json $low "$mokc" gpt-oss-20b bf16 5,301,2001 $B --lowering $low --wait-limit 3s
done
echo "-- speed" >>"$S"
BENCH_BUDGET=520
for i in 1 2; do
	bench per-op "$mokc" 4096 --model qwen3-30b-a3b --iters 30
	bench persistent-v2 "$old" 4096 --model qwen3-30b-a3b --iters 30 --lowering persistent
	bench persistent-v3 "$mokc" 4096 --model qwen3-30b-a3b --iters 30 --lowering persistent
done
bench persistent-v3-phases "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
echo "-- tests" >>"$S"
left 200 && pkgtest runtime persist-fwd 170 $C/runtime.test -test.v -test.count=1 -test.timeout 160s -test.run 'TestPersistentGPU$'
grep -E "^\s*--- (FAIL|PASS): TestP|panic|timed out" "$O/persist-fwd.log" | head -5 >>"$S"
left 330 && pkgtest runtime persist-bwd 100 $C/runtime.test -test.v -test.count=1 -test.timeout 90s -test.run 'TestPersistentBackwardGPU$'
grep -E "^\s*--- (FAIL|PASS)|panic|timed out" "$O/persist-bwd.log" | head -30 >>"$S"
for m in deepseek-v3 gpt-oss-120b mixtral-8x7b; do
	bench per-op "$mokc" 4096 --model $m --iters 10
	bench persistent-v2 "$old" 4096 --model $m --iters 10 --lowering persistent
	bench persistent-v3 "$mokc" 4096 --model $m --iters 10 --lowering persistent
done
for T in 64 1; do
	bench per-op "$mokc" $T --model qwen3-30b-a3b --iters 30
	bench persistent-v3 "$mokc" $T --model qwen3-30b-a3b --iters 30 --lowering persistent
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
if left 530; then
	timeout -k 5 40 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen2-57b-a14b --target sm_90a --tokens 63 --repeat 1 --lowering persistent --wait-limit 0 >"$O/memcheck-qwen2-63.log" 2>&1
	echo "memcheck qwen2-57b-a14b T=63 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck-qwen2-63.log")" >>"$S"
fi
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
