#!/usr/bin/env bash
# run 57 call 3 (about 6 minutes; run 56 call 2 with a third branch). Carry: .carry/bins.tgz holding
# main's CLI (ebcb47a), then three branches' CLIs, each `make device-old-cli REV=<branch>` renamed:
# .carry/mokc-ws.gz (ws-epilogue: wgmma-ws's epilogue with 16 main-grad pairs in flight, not 8),
# .carry/mokc-cgr.gz (combine-grad-rows: combine_grad's dots loaded together, two tokens per
# virtual block persistent) and .carry/mokc-cw.gz (cgr-wpe: combine-grad-rows on ws-phase-end, so
# that combine_grad's timing in the persistent backward is not the spilled loop's). All keep main's
# sums, so main's bits: grads_sha256 of each against main's on qwen3-30b-a3b (T = 300, 4096),
# gpt-oss-20b (T = 200: FC2 biases) and llama4-scout (T = 64: the weight on the input); racecheck of
# ws and cw; then the backward at qwen3-30b-a3b T = 4096 (main, the three branches, per-op) and the
# phases of ws and cw.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
ws=$(carried ws)
cgr=$(carried cgr)
cw=$(carried cw)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=80
P="--lowering persistent"
for v in main ws cgr cw; do
	bin=$mokc
	[ $v = ws ] && bin=$ws
	[ $v = cgr ] && bin=$cgr
	[ $v = cw ] && bin=$cw
	run_json "$v-pers" "$bin" qwen3-30b-a3b bf16 300,4096 --backward $P
	run_json "$v-pers" "$bin" gpt-oss-20b bf16 200 --backward $P
	run_json "$v-pers" "$bin" llama4-scout bf16 64 --backward $P
done
run_json main-perop-ws "$mokc" qwen3-30b-a3b bf16 300 --backward --wgrad wgmma-ws
run_json ws-perop-ws "$ws" qwen3-30b-a3b bf16 300 --backward --wgrad wgmma-ws
echo "bits done $(($(date +%s) - START)) s" >>"$S"
SAN_BUDGET=200
mokc=$ws san racecheck ws-q3-300 50 --model qwen3-30b-a3b --tokens 300 --backward
mokc=$cw san racecheck cw-gptoss-200 50 --model gpt-oss-20b --tokens 200 --backward
BENCH_BUDGET=540
B="--model qwen3-30b-a3b --iters 10 --backward"
bench main-pers-T4096 "$mokc" 4096 $B $P
bench ws-pers-T4096 "$ws" 4096 $B $P
bench cgr-pers-T4096 "$cgr" 4096 $B $P
bench cw-pers-T4096 "$cw" 4096 $B $P
bench main-perop-T4096 "$mokc" 4096 $B
bench ws-phases-T4096 "$ws" 4096 $B $P --phases
bench cw-phases-T4096 "$cw" 4096 $B $P --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
