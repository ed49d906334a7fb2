#!/usr/bin/env bash
# run 45 call 6 (the last device time of the session; each part bounded): 1. speed, per-op against
# persistent, on the presets whose persistent runs finish (qwen3-30b-a3b, mixtral-8x7b; phase times of
# the persistent kernel); 2. which of deepseek-v2-lite's persistent runs finish (call 3: T = 300 and
# 2000 did not with the shared experts' split-K phases in the kernel, T = 2000 did without them), a
# qwen3-30b-a3b run after each that does not, to tell a stuck device; 3. where T = 2000 stops, under
# cuda-gdb (interrupted after 20 s: the warps' PCs and instructions).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
BENCH_BUDGET=110
for T in 4096 64; do
	bench per-op "$mokc" $T --model qwen3-30b-a3b --iters 30 --fc1-tile 128x256x64 --fc2-tile 128x256x64
	bench persistent "$mokc" $T --model qwen3-30b-a3b --iters 30 --lowering persistent
done
bench per-op "$mokc" 4096 --model mixtral-8x7b --iters 10
bench persistent "$mokc" 4096 --model mixtral-8x7b --iters 10 --lowering persistent
bench persistent-phases "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
grep -hv "^{" "$O/bench.jsonl" >>"$S"
r() { # LABEL ARGS...: one bounded run, its verdict line
	local label=$1
	shift
	timeout 20 "$mokc" run --target sm_90a --repeat 2 --lowering persistent --wait-limit 2s "$@" >"$O/$label.log" 2>&1
	local rc=$?
	echo "$label rc=$rc $(grep -E 'PASS:|FAIL' "$O/$label.log" | tail -1 | cut -c1-160)" >>"$S"
	if [ $rc != 0 ]; then
		timeout 20 "$mokc" run --target sm_90a --repeat 1 --lowering persistent --model qwen3-30b-a3b --tokens 1 >"$O/sane-$label.log" 2>&1
		echo "  sane after $label rc=$?" >>"$S"
	fi
}
D="--model deepseek-v2-lite"
r ds2000-nosplit $D --tokens 2000 --split-k off
r ds300-nosplit $D --tokens 300 --split-k off
r ds4096 $D --tokens 4096
r ds2048 $D --tokens 2048
r ds64 $D --tokens 64,1
G=$(command -v cuda-gdb || ls /usr/local/cuda*/bin/cuda-gdb 2>/dev/null | head -1)
echo "cuda-gdb: ${G:-none}" >>"$S"
if [ -n "$G" ] && left 330; then
	cat >"$O/gdb.cmds" <<'C'
set pagination off
set confirm off
run
info cuda kernels
info cuda warps
cuda block 0 thread 0
x/6i $pc
cuda block 0 thread 128
x/6i $pc
cuda block 0 thread 256
x/6i $pc
cuda block 9 thread 0
x/6i $pc
cuda block 9 thread 128
x/6i $pc
cuda block 9 thread 288
x/6i $pc
kill
quit
C
	(sleep 20; pkill -INT -f "tokens 2000 --repeat 1 --lowering persistent --wait-limit 0") &
	timeout 90 "$G" -q -batch -x "$O/gdb.cmds" --args "$mokc" run --model deepseek-v2-lite --target sm_90a --tokens 2000 --repeat 1 --lowering persistent --wait-limit 0 >"$O/gdb.log" 2>&1
	echo "gdb rc=$?" >>"$S"
	grep -vE "^\s*$|New Thread|Thread 0x|libthread|Using host" "$O/gdb.log" | tail -80 >>"$S"
fi
pack_logs
cat "$S"
