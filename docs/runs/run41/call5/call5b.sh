#!/usr/bin/env bash
# run 41 call 5, cut to what the remaining device time allows (about 120 s; carry as call5.sh):
# FC2Large on layers with shared experts: the old CLI's y_sha256 on qwen2-57b-a14b and
# deepseek-v2-lite below and above the switch, one timed round old against new.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
run_json old "$C/mokc-old" qwen2-57b-a14b mxfp8 4095,4096
run_json new "$mokc" qwen2-57b-a14b mxfp8 4095,4096
run_json old "$C/mokc-old" deepseek-v2-lite mxfp8 5461,6000
run_json new "$mokc" deepseek-v2-lite mxfp8 5461,6000
BENCH_BUDGET=${BENCH_BUDGET:-110}
for i in 1 2; do
	bench mx-old "$C/mokc-old" 4096 --model qwen2-57b-a14b --precision mxfp8 --iters 20 --kernels
	bench mx-new "$mokc" 4096 --model qwen2-57b-a14b --precision mxfp8 --iters 20 --kernels
	bench mx-old "$C/mokc-old" 6144 --model deepseek-v2-lite --precision mxfp8 --iters 20 --kernels
	bench mx-new "$mokc" 6144 --model deepseek-v2-lite --precision mxfp8 --iters 20 --kernels
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
cat "$S"
