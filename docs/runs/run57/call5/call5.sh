#!/usr/bin/env bash
# run 57 call 5 (about 2 minutes; carry: .carry/bins.tgz holding main's CLI, ebcb47a). No
# prediction: a measurement for the next lever of the forward's FC1 (451 µs at qwen3-30b-a3b
# T = 4096 against a DRAM floor near 330; run 48's ncu: L2 throughput 81%, DRAM 69%). The 2-CTA
# clusters sharing A by TMA multicast (`--cluster 2`, fixed walk) cut the L2 read sectors from the
# SMs by 1.8% where half of A's reads, about 17% of the bytes, were to go (run 38). Which L2 counts
# the multicast moves, by source and kind: ncu of per-op moe_fc1 with the fixed walk, unclustered
# and in clusters, sections (Speed of Light, the memory tables) and then the L2 and DRAM counts
# alone, each a separate ncu run so that a metric name one ncu version lacks loses only its part.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
M="lts__t_bytes.sum,lts__t_sectors.sum,lts__t_sectors_op_read.sum,lts__t_sectors_srcunit_tex.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_requests_srcunit_tex_op_read.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum"
for c in 1 2; do
	left 500 || break
	A="--model qwen3-30b-a3b --target sm_90a --tokens 4096 --items fixed --cluster $c --iters 1 --warmup 2"
	timeout 120 ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
		--section MemoryWorkloadAnalysis_Tables -k 'regex:^moe_fc1$' --launch-skip 2 --launch-count 1 \
		"$mokc" bench $A >"$O/ncu-sections-c$c.log" 2>&1
	echo "ncu sections cluster $c rc=$?" >>"$S"
	grep -E "Duration|DRAM Throughput|L2 Cache Throughput|L2 Hit|Compute \(SM\) Throughput" "$O/ncu-sections-c$c.log" | head -5 >>"$S"
	timeout 120 ncu --clock-control none --metrics "$M" -k 'regex:^moe_fc1$' --launch-skip 2 --launch-count 1 \
		"$mokc" bench $A >"$O/ncu-metrics-c$c.log" 2>&1
	echo "ncu metrics cluster $c rc=$?" >>"$S"
	grep -E "lts__|dram__|gpu__time" "$O/ncu-metrics-c$c.log" >>"$S"
done
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
