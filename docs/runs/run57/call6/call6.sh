#!/usr/bin/env bash
# run 57 call 6 (about 6 minutes; carry: .carry/bins.tgz holding main's CLI, ebcb47a, and branch
# cluster-share-b's CLI as .carry/mokc-csb.gz, `make device-old-cli REV=cluster-share-b` renamed).
# Branch cluster-share-b: `--cluster 2 --cluster-share b`, CTA pairs on two row tiles of one expert
# sharing the column block's weights by TMA multicast (FC1 at T = 4096 is L2-bound: run 48's ncu
# L2 throughput 81%, and B is two thirds of a stage's bytes).
#  1. bits: the per-op forward with the pairs against main's (the fixed walk and the default queue:
#     the same bits) on qwen3-30b-a3b (T = 1: every pair's second half empty; 300; 4096: half the
#     experts with an odd tile count), gpt-oss-20b (T = 200, 4096), mixtral-8x7b (T = 300),
#     deepseek-v2-lite (T = 200);
#  2. racecheck and synccheck of the pairs (qwen3-30b-a3b T = 300);
#  3. the per-op forward at T = 4096 with --kernels: main's queue, main's fixed walk, main's A
#     pairs (--cluster 2), the B pairs, on qwen3-30b-a3b and mixtral-8x7b (1024 rows per expert: no
#     empty halves);
#  4. ncu of FC1's L2 counts, main's fixed walk against the B pairs (qwen3-30b-a3b T = 4096).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
csb=$(carried csb)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=80
CB="--cluster 2 --cluster-share b"
run_json main-queue "$mokc" qwen3-30b-a3b bf16 1,300,4096
run_json main-fixed "$mokc" qwen3-30b-a3b bf16 1,300,4096 --items fixed
run_json csb-b "$csb" qwen3-30b-a3b bf16 1,300,4096 $CB
for m in gpt-oss-20b:200,4096 mixtral-8x7b:300 deepseek-v2-lite:200; do
	run_json main-queue "$mokc" "${m%%:*}" bf16 "${m##*:}"
	run_json csb-b "$csb" "${m%%:*}" bf16 "${m##*:}" $CB
done
echo "bits done $(($(date +%s) - START)) s" >>"$S"
for tool in racecheck synccheck; do
	timeout -k 10 60 compute-sanitizer --tool $tool --error-exitcode 9 "$csb" run --target sm_90a --repeat 1 --model qwen3-30b-a3b \
		--tokens 300 $CB >"$O/$tool-csb.log" 2>&1
	echo "$tool csb rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$O/$tool-csb.log" | tail -1)" >>"$S"
done
BENCH_BUDGET=300
for m in qwen3-30b-a3b mixtral-8x7b; do
	B="--model $m --iters 20 --kernels"
	bench "main-queue-$m" "$mokc" 4096 $B
	bench "main-fixed-$m" "$mokc" 4096 $B --items fixed
	bench "main-a-$m" "$mokc" 4096 $B --cluster 2
	bench "csb-b-$m" "$csb" 4096 $B $CB
done
bench_kernels
M="lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,dram__bytes_read.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum"
for v in fixed csb; do
	left 380 || break
	bin=$mokc A="--items fixed"
	[ $v = csb ] && bin=$csb A=$CB
	timeout 60 ncu --clock-control none --metrics "$M" -k 'regex:^moe_fc1$' --launch-skip 2 --launch-count 1 \
		"$bin" bench --model qwen3-30b-a3b --target sm_90a --tokens 4096 --iters 1 --warmup 2 $A >"$O/ncu-$v.log" 2>&1
	echo "ncu $v rc=$?" >>"$S"
	grep -E "lts__|dram__|gpu__time" "$O/ncu-$v.log" >>"$S"
done
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
