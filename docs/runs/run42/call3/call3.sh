#!/usr/bin/env bash
# run 42 call 3 (about 330 s). Carry: .carry/bins.tgz of `make device-bins` at the commit that made
# FC2Large the default from 384 rows per expert on every sm_90a mxfp8 layer (shared experts too),
# and .carry/mokc-old.gz of `make device-old-cli REV=df07a45` (the default from 512 rows, layers
# without shared experts only). docs/perf.md, "FC2Large from 384 rows, and the clocks" (prediction
# written before this call):
#  1. The old CLI's y_sha256 where the new default moved the range (T around 384 and 512 rows per
#     expert) and below it (T = 0, 1, 64); memcheck of the new default at T = 3100 on olmoe-1b-7b.
#  2. The SM clock, power and throttle reasons sampled every 50 ms while bf16 and mxfp8 forwards run
#     back to back at T = 4096 (mixtral-8x7b, olmoe-1b-7b, qwen3-30b-a3b): does the mxfp8 forward
#     run at a lower clock than bf16's (the register-fed widening's ALU work under the power cap)?
#  3. 320 rows per expert: --fc2-large-min-rows 320 against the default (olmoe-1b-7b and gpt-oss-20b
#     T = 2560, qwen3-30b-a3b T = 5120), alternated twice.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
run_json old "$C/mokc-old" olmoe-1b-7b mxfp8 0,1,64,3071,3072,4096
run_json new "$mokc" olmoe-1b-7b mxfp8 0,1,64,3071,3072,4096
run_json old "$C/mokc-old" qwen2-57b-a14b mxfp8 1,64,3072,4096
run_json new "$mokc" qwen2-57b-a14b mxfp8 1,64,3072,4096
run_json old "$C/mokc-old" mixtral-8x7b mxfp8 1535,1536
run_json new "$mokc" mixtral-8x7b mxfp8 1535,1536
run_json old "$C/mokc-old" qwen3-30b-a3b mxfp8 6144
run_json new "$mokc" qwen3-30b-a3b mxfp8 6144
run_json old "$C/mokc-old" deepseek-v2-lite mxfp8 4608
run_json new "$mokc" deepseek-v2-lite mxfp8 4608
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model olmoe-1b-7b --target sm_90a --precision mxfp8 --tokens 3100 --repeat 1 >"$O/memcheck.log" 2>&1
echo "memcheck olmoe-1b-7b mxfp8 T=3100 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
# clocks: one sampler per bench, its samples summarized (median SM MHz, median W, share of samples
# with any throttle reason active, and with the software power cap bit 0x4)
clocked() {
	local label=$1
	shift
	nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active,temperature.gpu --format=csv,noheader,nounits -lms 50 >"$O/smi-$label.csv" 2>/dev/null &
	local pid=$!
	timeout 90 "$mokc" bench --target sm_90a --json "$@" >"$O/clk-$label.json" 2>>"$O/bench.log"
	kill $pid 2>/dev/null
	wait $pid 2>/dev/null
	LABEL=$label python3 - "$O/smi-$label.csv" "$O/clk-$label.json" >>"$S" <<'PY'
import json, os, statistics, sys
rows = []
for line in open(sys.argv[1]):
    p = [x.strip() for x in line.split(",")]
    try:
        rows.append((float(p[0]), float(p[1]), int(p[2], 16), float(p[3])))
    except (ValueError, IndexError):
        pass
med = json.load(open(sys.argv[2]))["median_ms"] if os.path.getsize(sys.argv[2]) else float("nan")
busy = [r for r in rows if r[1] > 150] or rows
print("clocks", os.environ["LABEL"], "median_ms", round(med, 4), "samples", len(busy), "of", len(rows),
      "sm_mhz", statistics.median(r[0] for r in busy) if busy else 0, "min", min((r[0] for r in busy), default=0),
      "watts", statistics.median(r[1] for r in busy) if busy else 0,
      "throttled", round(sum(1 for r in busy if r[2] & ~1) / max(len(busy), 1), 2),
      "sw_power_cap", round(sum(1 for r in busy if r[2] & 4) / max(len(busy), 1), 2),
      "temp", max((r[3] for r in busy), default=0))
PY
}
for i in 1 2; do
	clocked mixtral-bf16-$i --model mixtral-8x7b --tokens 4096 --iters 200
	clocked mixtral-mx-$i --model mixtral-8x7b --precision mxfp8 --tokens 4096 --iters 200
	clocked olmoe-bf16-$i --model olmoe-1b-7b --tokens 4096 --iters 1000
	clocked olmoe-mx-$i --model olmoe-1b-7b --precision mxfp8 --tokens 4096 --iters 1000
	clocked qwen3-bf16-$i --model qwen3-30b-a3b --tokens 4096 --iters 1000
	clocked qwen3-mx-$i --model qwen3-30b-a3b --precision mxfp8 --tokens 4096 --iters 1000
done
BENCH_BUDGET=${BENCH_BUDGET:-420}
for i in 1 2; do
	for mt in olmoe-1b-7b:2560 gpt-oss-20b:2560 qwen3-30b-a3b:5120; do
		bench mx "$mokc" ${mt#*:} --model ${mt%%:*} --precision mxfp8 --iters 20 --kernels
		bench mx-320 "$mokc" ${mt#*:} --model ${mt%%:*} --precision mxfp8 --iters 20 --kernels --fc2-large-min-rows 320
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
cat "$S"
