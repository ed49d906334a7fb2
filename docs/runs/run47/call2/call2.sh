#!/usr/bin/env bash
# run 47 call 2: where the persistent forward's phases wait (no prediction: a profile for the next
# step). Carry: call 1's (.carry/bins.tgz of f7ce9ca, .carry/exp.tar.xz with mokc-w, the code of
# 586ae40). Every part bounded.
#  1. ncu of the persistent bf16 forward moe_forward (qwen3-30b-a3b T = 4096, mokc-w, the third
#     launch) with warp-stall sampling per SASS instruction: the samples of each phase's code
#     (the row-wise phases' loads, the GEMM phases' waits, the grid barriers' polls).
#  2. ncu of the per-op moe_gather and moe_combine at the same T (speed of light, memory, stalls),
#     the kernels the gather and combine phases are measured against.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
[ -x $C/mokc-w ] || python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' $C/exp.tar.xz $C
chmod +x $C/mokc-w
w=$C/mokc-w
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
timeout 200 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
	--section SourceCounters -k 'regex:^moe_forward$' --launch-skip 2 --launch-count 1 -f -o "$O/persist" \
	"$w" bench --model qwen3-30b-a3b --target sm_90a --tokens 4096 --lowering persistent --iters 1 --warmup 2 >"$O/ncu-persist.log" 2>&1
echo "rc=$? ncu persistent forward" >>"$S"
ncu --import "$O/persist.ncu-rep" >>"$O/ncu-persist.log" 2>&1
ncu --import "$O/persist.ncu-rep" --page source --print-source sass --csv >"$O/persist-sass.csv" 2>>"$O/ncu-persist.log"
echo "rc=$? source page" >>"$S"
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit|Warp Cycles Per Issued" "$O/ncu-persist.log" | head -12 >>"$S"
left 330 && timeout 150 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
	--section Occupancy -k 'regex:^moe_(gather|combine)$' --launch-skip 4 --launch-count 2 \
	"$w" bench --model qwen3-30b-a3b --target sm_90a --tokens 4096 --iters 1 --warmup 2 >"$O/ncu-rowwise.log" 2>&1
echo "rc=$? ncu per-op gather and combine" >>"$S"
grep -E "^  moe_|Duration|Memory Throughput|DRAM Throughput|L2 Hit|Warp Cycles Per Issued|Achieved Occupancy" "$O/ncu-rowwise.log" | head -24 >>"$S"
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
gzip -f "$O/persist-sass.csv"
pack_logs
cat "$S"
