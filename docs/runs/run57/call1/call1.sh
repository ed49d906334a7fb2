#!/usr/bin/env bash
# run 57 call 1 (about 5 minutes; run 56 call 5, written in run 56 and not run there: no machine started). Carry:
# .carry/bins.tgz with main's CLI (`make device-bins`, or mokc of `make device-old-cli REV=main`
# alone), and branch ws-phase-end's CLI as .carry/mokc-wpe.gz (`make device-old-cli
# REV=ws-phase-end`, renamed). Branch ws-phase-end: the warp-specialized weight gradients (the
# persistent backward's default on sm_90a) give their roles' registers back at the phase's end and
# invalidate their ring's mbarriers, as the GEMM phases do; without it the later phases' code (the
# combine_grad loop) is compiled for the producer's 56 registers and spills (ptxas 13.0: 344 bytes
# at qwen3-30b-a3b, none with the branch). Its bits against main's (the persistent backward of
# qwen3-30b-a3b T = 300 and 4096, deepseek-v2-lite T = 200, llama4-scout T = 64), racecheck and
# synccheck at qwen3-30b-a3b T = 300, then the persistent backward at T = 4096, main and branch
# alternated, two rounds, and its phases.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
wpe=$(carried wpe)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=80
P="--lowering persistent"
for v in main wpe; do
	bin=$mokc
	[ $v = wpe ] && bin=$wpe
	run_json "$v-pers" "$bin" qwen3-30b-a3b bf16 300,4096 --backward $P
	run_json "$v-pers" "$bin" deepseek-v2-lite bf16 200 --backward $P
	run_json "$v-pers" "$bin" llama4-scout bf16 64 --backward $P
done
echo "bits done $(($(date +%s) - START)) s" >>"$S"
SAN_BUDGET=200
mokc=$wpe san racecheck wpe-q3-300 50 --model qwen3-30b-a3b --tokens 300 --backward
mokc=$wpe san synccheck wpe-q3-300 40 --model qwen3-30b-a3b --tokens 300 --backward
BENCH_BUDGET=500
B="--model qwen3-30b-a3b --iters 10 --backward $P"
for r in 1 2; do
	bench "main-pers-T4096-r$r" "$mokc" 4096 $B
	bench "wpe-pers-T4096-r$r" "$wpe" 4096 $B
done
bench wpe-phases-T4096 "$wpe" 4096 $B --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
