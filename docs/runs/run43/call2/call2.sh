#!/usr/bin/env bash
# run 43 call 2 (about 300 s; any card, say which). Carry: .carry/bins.tgz of `make device-bins`.
# How much of the register-fed mxfp8 FC2's time is its epilogue (the stores that do not overlap the
# next item's K loop, the lever of a staged epilogue for the operand swap: docs/perf.md, "FC2Large
# from 320 rows, and issue #11's table", and the run 42 notes): ncu's warp-stall sampling per SASS
# instruction of qwen3-30b-a3b's moe_fc2 at T = 4096 (the third forward's), beside bf16's moe_fc2
# (its staged epilogue) under the same sections. Read the CSVs as run 38 call 1 read FC1's: the
# samples in the consumers' K loops (between the first and last wgmma of the loop) against those
# after it up to the item's next start.
. scripts/device-env.sh
mkdir -p "$OUT/logs"
MODELS= NCU_MODELS= MX_MODEL=qwen3-30b-a3b MX_TOKENS=4096 MX_FLAGS= MX_KERNELS='^moe_fc2$' MX_SKIP=2 MX_COUNT=1 \
	MX_TIMEOUT=200 bash scripts/device-profile.sh
timeout 200 ncu --clock-control none --section SpeedOfLight --section WarpStateStats --section SourceCounters \
	-k 'regex:^moe_fc2$' --launch-skip 2 --launch-count 1 -f -o "$OUT/bf16-fc2" \
	"$mokc" bench --model qwen3-30b-a3b --target sm_90a --tokens 4096 --iters 1 --warmup 2 >"$OUT/logs/ncu-bf16.log" 2>&1
echo "rc=$? ncu bf16 moe_fc2" >>"$OUT/summary.txt"
ncu --import "$OUT/bf16-fc2.ncu-rep" --page source --print-source sass --csv 2>>"$OUT/logs/ncu-bf16.log" | gzip >"$OUT/bf16-fc2-sass.csv.gz"
[ -f "$OUT/mx-fc1-sass.csv" ] && gzip -f "$OUT/mx-fc1-sass.csv" # named mx-fc1 by device-profile.sh: here moe_fc2
rm -f "$OUT"/*.ncu-rep
cat "$OUT/summary.txt"
ls -la "$OUT"
