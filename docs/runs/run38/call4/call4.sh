#!/usr/bin/env bash
# run 38 call 4 (about 330 s). Carry: .carry/bins.tgz of `make device-bins` (items v4: the queue walk
# of work items as the sm_90a default, docs/perf.md) and .carry/old.tgz (mokc-old: 66d34a7, the
# fixed walk by default).
#  1. The same bits: y_sha256 of old and new defaults on four (preset, precision) at T = 0, 1, 64, 4096.
#  2. TestItemsQueueGPU (the fixed walk's bits, graph replays), memcheck of the mxfp8 forward at T = 64.
#  3. The backward under the queue, which no run has timed: forward + backward at T = 4096, default
#     (queue) against --items fixed, qwen3-30b-a3b bf16 and mxfp8, alternated.
#  4. TestLayerForward and TestLayerBackward (the default schedules, now the queue's) in what is left.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
tar -C "$C" -xzf "$C/old.tgz"
old=$C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
for mp in "qwen3-30b-a3b bf16" "qwen3-30b-a3b mxfp8" "gpt-oss-20b mxfp8" "mixtral-8x7b bf16"; do
	read -r m p <<<"$mp"
	run_json old "$old" $m $p 0,1,64,4096
	run_json new "$mokc" $m $p 0,1,64,4096
done
pkgtest runtime itemsq 90 $C/runtime.test -test.v -test.count=1 -test.run 'TestItemsQueueGPU'
grep -hE "^\s+--- (FAIL|PASS)|differ" "$O/itemsq.log" | head -8 >>"$S"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 64 --repeat 1 >"$O/memcheck.log" 2>&1
echo "memcheck qwen3-30b-a3b mxfp8 T=64 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
BENCH_BUDGET=${BENCH_BUDGET:-320}
for i in 1 2; do
	for p in bf16 mxfp8; do
		bench bwd-queue "$mokc" 4096 --model qwen3-30b-a3b --precision $p --iters 10 --backward
		bench bwd-fixed "$mokc" 4096 --model qwen3-30b-a3b --precision $p --iters 10 --backward --items fixed
	done
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
left 300 && pkgtest runtime fwd 60 $C/runtime.test -test.v -test.count=1 -test.run 'TestLayerForward$'
left 320 && pkgtest runtime bwd $((440 - $(date +%s) + START)) $C/runtime.test -test.v -test.count=1 -test.run 'TestLayerBackward$'
grep -hE -- "--- FAIL|^(ok|FAIL|PASS)" "$O/fwd.log" "$O/bwd.log" 2>/dev/null | head -12 >>"$S"
cat "$S"
