#!/usr/bin/env bash
# run 59 call 1 (about 6 minutes; written in run 58, whose device time ran out): branch ws-n128
# (on main bc1c6eb; wsN 128 and wsPairGroup 16 in codegen/kernels_wgrad_ws.go, were 256 and 6):
# wgmma-ws's tiles 128 x 128, not 128 x 256, so a consumer thread holds 64 accumulators and loads
# all 32 of its main-grad pairs in one round. (Branch ws-n128-s6, the ring six stages deep, was
# left out for device time.) Carry: .carry/bins.tgz holding main's CLI and .carry/mokc-n128.gz
# (`make device-old-cli REV=ws-n128`, renamed).
#  1. bits against main's (run 58 calls 1-3): the persistent backward at qwen3-30b-a3b T = 300 and 4096,
#     gpt-oss-20b T = 200 (M = N = 2880: partial tiles), n128's; n128's per-op --wgrad
#     wgmma-ws at deepseek-v2-lite T = 200; n128's with --main-grad bf16 at qwen3-30b-a3b T = 300;
#  2. forward + backward at qwen3-30b-a3b T = 4096: main and n128 persistent, two rounds;
#     main's and n128's phases; per-op --wgrad wgmma-ws, main and n128; main's phases at
#     T = 1100 and its per-op kernels' times; main and n128 at T = 1100 (n128's bits there too);
#  3. memcheck (gpt-oss-20b T = 200: partial tiles) and racecheck (qwen3-30b-a3b T = 300) of n128's
#     persistent backward, as time allows.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
n128=$(carried n128)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=80
P="--lowering persistent"
run_json n128-pers "$n128" qwen3-30b-a3b bf16 300,1100,4096 --backward $P
run_json n128-pers "$n128" gpt-oss-20b bf16 200 --backward $P
run_json n128-perop-ws "$n128" deepseek-v2-lite bf16 200 --backward --wgrad wgmma-ws
# bf16 main grads (wgradStoreBF16 on n128's one group of 32 pairs): main's c7c4247e9893ba1d (run 58 call 3)
run_json n128-pers-mgbf16 "$n128" qwen3-30b-a3b bf16 300 --backward $P --main-grad bf16
echo "bits done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=420
B="--model qwen3-30b-a3b --iters 10 --backward"
for r in 1 2; do
	bench "main-pers-r$r" "$mokc" 4096 $B $P
	bench "n128-pers-r$r" "$n128" 4096 $B $P
done
bench main-phases "$mokc" 4096 $B $P --phases
bench n128-phases "$n128" 4096 $B $P --phases
bench main-perop-ws "$mokc" 4096 $B --wgrad wgmma-ws
bench n128-perop-ws "$n128" 4096 $B --wgrad wgmma-ws
bench main-perop "$mokc" 4096 $B
# where the gap at T = 1100 (8-9% in run 58) lies: main's phases against its per-op kernels
bench main-phases-T1100 "$mokc" 1100 $B $P --phases
bench main-perop-kernels-T1100 "$mokc" 1100 $B --kernels
# n128 at T = 1100, where the main grads' read-modify-write is most of the weight gradients' time
bench main-pers-T1100 "$mokc" 1100 $B $P
bench n128-pers-T1100 "$n128" 1100 $B $P
bench n128-phases-T1100 "$n128" 1100 $B $P --phases
bench main-perop-T1100 "$mokc" 1100 $B
bench n128-perop-ws-T1100 "$n128" 1100 $B --wgrad wgmma-ws
grep -hv "^{" "$O/bench.jsonl" >>"$S"
bench_kernels
SAN_BUDGET=560
mokc=$n128 san memcheck n128-oss-200 70 --model gpt-oss-20b --tokens 200 --backward
mokc=$n128 san racecheck n128-q3-300 70 --model qwen3-30b-a3b --tokens 300 --backward
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
