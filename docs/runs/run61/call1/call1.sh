#!/usr/bin/env bash
# run 61 call 1 (about 3 minutes; written in run 60 as its call 3, which five failed starts left
# unrun): branch ws-mg-prefetch-short (on ws-mg-prefetch, itself one commit on main):
# wgmma-ws loads a tile's f32 main grads before its K loop only where the loop has at most two
# stages of 64 expert rows (wsEarlyKTiles), after it otherwise (call 1: loading them before every K
# loop made the weight gradients 4.5% faster at qwen3-30b-a3b T = 1100 and 1.7% slower at 4096:
# run 60, call 1). Carry: .carry/bins.tgz (main's CLI), .carry/mokc-pf.gz (ws-mg-prefetch),
# .carry/mokc-pfs.gz (ws-mg-prefetch-short).
#  1. bits against main's (run 59/60): qwen3-30b-a3b T = 300, 1100, 4096, gpt-oss-20b and
#     deepseek-v2-lite T = 200, the persistent backward;
#  2. forward + backward at qwen3-30b-a3b, main / pf / pfs alternated: T = 4096 and 1100 twice,
#     2400 once; pfs's phases at 4096, 1100 and 2400; per-op (main) at 2400, its kernels timed.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
pf=$(carried pf)
pfs=$(carried pfs)
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
RUN_TIMEOUT=80
P="--lowering persistent"
run_json pfs-pers "$pfs" qwen3-30b-a3b bf16 300,1100,4096 --backward $P
run_json pfs-pers "$pfs" gpt-oss-20b bf16 200 --backward $P
run_json pfs-pers "$pfs" deepseek-v2-lite bf16 200 --backward $P
echo "bits done $(($(date +%s) - START)) s" >>"$S"
BENCH_BUDGET=420
B="--model qwen3-30b-a3b --iters 10 --backward $P"
for r in 1 2; do
	for T in 4096 1100; do
		bench "main-T$T-r$r" "$mokc" $T $B
		bench "pf-T$T-r$r" "$pf" $T $B
		bench "pfs-T$T-r$r" "$pfs" $T $B
	done
done
bench main-T2400 "$mokc" 2400 $B
bench pf-T2400 "$pf" 2400 $B
bench pfs-T2400 "$pfs" 2400 $B
for T in 4096 1100 2400; do
	bench "pfs-phases-T$T" "$pfs" $T $B --phases
done
bench main-perop-T2400 "$mokc" 2400 --model qwen3-30b-a3b --iters 10 --backward
bench main-perop-kernels-T2400 "$mokc" 2400 --model qwen3-30b-a3b --iters 10 --backward --kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
bench_kernels
SAN_BUDGET=480
mokc=$pfs san racecheck pfs-q3-300 70 --model qwen3-30b-a3b --tokens 300 --backward
rm -f "$O/tmp.json"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
