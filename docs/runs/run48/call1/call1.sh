#!/usr/bin/env bash
# run 48 call 1. Carry: `make device-bins` of the tree. Every part bounded. No prediction for
# parts 1-2 (tests written in run 47 after its last device call; the combine header written by
# lane 0 from shuffles, docs/perf.md "combine v5", which they check for per-op's bits); part 3 is
# a measurement for the next step.
#  1. TestPersistentGPU with its new cases: deepseek-v3 and dsv4-pro-proxy of 16 experts (the bulk
#     combine's column slices, even and uneven) and out-of-range expert ids through the persistent
#     kernel (checkBadIDs); TestLayerForward's bad-ids part through its new helper (the same checks
#     as before, moved).
#  2. racecheck of the bulk combine in column slices (deepseek-v3 of 16 experts, T = 64).
#  3. ncu of the per-op moe_fc1 and the persistent forward side by side (qwen3-30b-a3b T = 4096)
#     with warp-stall samples per SASS instruction: the FC1 code's stall profile in each (the FC1
#     phase's region of the persistent kernel's SASS found by its instructions, as in run 47 call
#     2), where the FC1 phase's 15 µs over its kernel go (run 47: 459.6 against 444.9 µs).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
pkgtest runtime persist-fwd 200 $C/runtime.test -test.v -test.count=1 -test.timeout 190s -test.run 'TestPersistentGPU$'
grep -E "^--- |^    --- FAIL|panic|timed out|persistent T=" "$O/persist-fwd.log" | head -30 >>"$S"
left 260 && pkgtest runtime layer 120 $C/runtime.test -test.v -test.count=1 -test.timeout 110s -test.run 'TestLayerForward$'
[ -f "$O/layer.log" ] && grep -E "^--- |^    --- FAIL|panic|timed out" "$O/layer.log" | head -10 >>"$S"
SAN_BUDGET=470 san racecheck ds3-E16 90 --model deepseek-v3 --experts 16 --tokens 64
for lw in per-op persistent; do
	left 480 || break
	k='regex:^moe_fc1$'
	[ $lw = persistent ] && k='regex:^moe_forward$'
	timeout 100 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
		--section SourceCounters -k "$k" --launch-skip 2 --launch-count 1 -f -o "$O/fc1-$lw" "$mokc" bench \
		--model qwen3-30b-a3b --target sm_90a --tokens 4096 --lowering $lw --iters 1 --warmup 2 >"$O/ncu-$lw.log" 2>&1
	echo "ncu $lw rc=$?" >>"$S"
	ncu --import "$O/fc1-$lw.ncu-rep" >>"$O/ncu-$lw.log" 2>&1
	ncu --import "$O/fc1-$lw.ncu-rep" --page source --print-source sass --csv 2>/dev/null | gzip >"$O/fc1-$lw-sass.csv.gz"
	grep -E "Duration|DRAM Throughput|L2 Hit|Compute \(SM\) Throughput|Warp Cycles Per Issued" "$O/ncu-$lw.log" | head -6 >>"$S"
done
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
