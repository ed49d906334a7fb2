#!/usr/bin/env bash
# run 60 call 2 (about 3 minutes): the bulk-copy act_grad's untested shapes, against per-op's bits
# in the same call (the carries of call 1: .carry/bins.tgz holding main's CLI, .carry/mokc-pf.gz,
# .carry/mokc-abw.gz):
#  1. one row per stage: qwen3-30b-a3b with --intermediate 4096 (a row's f32 gu and dh are 48 KB,
#     two rows leave one stage in the phases' 148 KB: actGradBulkPlan), main's and abw's
#     persistent backward (abw runs the row on all eight consumer warps) against main's per-op,
#     T = 300; and --intermediate 2048 (two rows a stage);
#  2. the persistent mxfp8 backward, whose shared experts' act_grads take the bulk form
#     (deepseek-v2-lite T = 200, llama4-scout T = 64), against per-op;
#  3. the persistent backward reading the forward's FC1 output (--save-fc1) at qwen3-30b-a3b
#     T = 300, against per-op.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
pf=$(carried pf)
abw=$(carried abw)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=80
P="--lowering persistent"
for I in 4096 2048; do
	run_json "main-perop-I$I" "$mokc" qwen3-30b-a3b bf16 300 --backward --intermediate $I
	run_json "main-pers-I$I" "$mokc" qwen3-30b-a3b bf16 300 --backward $P --intermediate $I
	run_json "abw-pers-I$I" "$abw" qwen3-30b-a3b bf16 300 --backward $P --intermediate $I
done
run_json main-perop "$mokc" deepseek-v2-lite mxfp8 200 --backward
run_json main-pers "$mokc" deepseek-v2-lite mxfp8 200 --backward $P
run_json abw-pers "$abw" deepseek-v2-lite mxfp8 200 --backward $P
run_json main-perop "$mokc" llama4-scout mxfp8 64 --backward
run_json main-pers "$mokc" llama4-scout mxfp8 64 --backward $P
run_json main-perop-save "$mokc" qwen3-30b-a3b bf16 300 --backward --save-fc1
run_json main-pers-save "$mokc" qwen3-30b-a3b bf16 300 --backward $P --save-fc1
run_json pf-pers-save "$pf" qwen3-30b-a3b bf16 300 --backward $P --save-fc1
echo "bits done $(($(date +%s) - START)) s" >>"$S"
SAN_BUDGET=300
mokc=$abw san racecheck abw-I4096 60 --model qwen3-30b-a3b --tokens 300 --backward --intermediate 4096
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
