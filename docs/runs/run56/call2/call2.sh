#!/usr/bin/env bash
# run 56 call 2 (about 5 minutes; written in run 55, cut to one timed round at T = 4096 in run 56,
# whose device time went on failed starts). Carry: `make device-bins` of main (or its CLI alone), then
# the CLIs of two branches, each built with `make device-old-cli REV=<branch>` and renamed:
# .carry/mokc-ws.gz (branch ws-epilogue: wgmma-ws's epilogue with 16 main-grad pairs in flight, not
# 8) and .carry/mokc-cgr.gz (branch combine-grad-rows: combine_grad's dots loaded together, two
# tokens per virtual block persistent). Both keep main's sums, so main's bits: grads_sha256 of each
# against main's on qwen3-30b-a3b (T = 300, 4096), gpt-oss-20b (T = 200: FC2 biases) and
# llama4-scout (T = 64: the weight on the input); racecheck of each persistent backward; then the
# backward at qwen3-30b-a3b T = 4096 (main, both branches, per-op) and the phases at 4096.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
ws=$(carried ws)
cgr=$(carried cgr)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=80
P="--lowering persistent"
for v in main ws cgr; do
	bin=$mokc
	[ $v = ws ] && bin=$ws
	[ $v = cgr ] && bin=$cgr
	run_json "$v-pers" "$bin" qwen3-30b-a3b bf16 300,4096 --backward $P
	run_json "$v-pers" "$bin" gpt-oss-20b bf16 200 --backward $P
	run_json "$v-pers" "$bin" llama4-scout bf16 64 --backward $P
done
run_json main-perop-ws "$mokc" qwen3-30b-a3b bf16 300 --backward --wgrad wgmma-ws
run_json ws-perop-ws "$ws" qwen3-30b-a3b bf16 300 --backward --wgrad wgmma-ws
echo "bits done $(($(date +%s) - START)) s" >>"$S"
SAN_BUDGET=240
mokc=$ws san racecheck ws-q3-300 50 --model qwen3-30b-a3b --tokens 300 --backward
mokc=$cgr san racecheck cgr-gptoss-200 50 --model gpt-oss-20b --tokens 200 --backward
BENCH_BUDGET=500
B="--model qwen3-30b-a3b --iters 10 --backward"
bench main-pers-T4096 "$mokc" 4096 $B $P
bench ws-pers-T4096 "$ws" 4096 $B $P
bench cgr-pers-T4096 "$cgr" 4096 $B $P
bench main-perop-T4096 "$mokc" 4096 $B
bench ws-phases-T4096 "$ws" 4096 $B $P --phases
bench cgr-phases-T4096 "$cgr" 4096 $B $P --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
