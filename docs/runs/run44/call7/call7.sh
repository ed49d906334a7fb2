#!/usr/bin/env bash
# run 44 call 7 (LIMIT seconds, 240 by default). No carry but the tree: the Triton fused-MoE peer
# (bench/triton_moe.py) at T = 4096 with five block sizes each, to find its best in the same kind of
# run as call 6's mokc numbers (an untuned peer would flatter mokc). docs/perf.md, "A Triton
# fused-MoE peer in the same run", outcome of call 6.
START=$(date +%s)
LIMIT=${LIMIT:-240}
OUT=${OUT:-$PWD/device-out}
O=$OUT/logs
mkdir -p "$O"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >"$O/summary.txt"
timeout $((LIMIT - 10)) python3 bench/triton_moe.py --no-check --models qwen3-30b-a3b,gpt-oss-120b,mixtral-8x7b,deepseek-v3 \
	--tokens 4096 --large 128x128x64x8x4,128x256x64x8x3,64x128x64x4x4,128x128x64x4x4,64x256x64x8x4 \
	--json "$O/triton.json" >"$O/triton.log" 2>&1
echo "triton rc=$? after $(($(date +%s) - START)) s" >>"$O/summary.txt"
grep -E "ceilings|fused_moe|Error|error" "$O/triton.log" | tail -60 >>"$O/summary.txt"
cat "$O/summary.txt"
