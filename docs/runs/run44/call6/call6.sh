#!/usr/bin/env bash
# run 44 call 6 (LIMIT seconds, 330 by default). Carry: .carry/mokc.gz, main's CLI (no test
# binaries). Issue #12's shapes, bf16 forward: mokc bench, then the Triton fused-MoE peer
# (bench/triton_moe.py: vLLM's design, written here; checked against the float64 reference first)
# in the same run. docs/perf.md, "A Triton fused-MoE peer in the same run" (prediction written
# before this call).
START=$(date +%s)
LIMIT=${LIMIT:-330}
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
export MOKC_CACHE_DIR=off
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc.gz >$C/mokc && chmod +x $C/mokc
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' >>"$S" 2>&1
BENCH_BUDGET=$((LIMIT - 250))
for p in qwen3-30b-a3b:64 qwen3-30b-a3b:4096 deepseek-v3:64 deepseek-v3:4096 gpt-oss-120b:4096 mixtral-8x7b:4096; do
	bench mokc $C/mokc ${p#*:} --model ${p%:*} --iters 30
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
left=$((LIMIT - 10 - $(date +%s) + START))
timeout $left python3 bench/triton_moe.py --models qwen3-30b-a3b,deepseek-v3,gpt-oss-120b,mixtral-8x7b --tokens 64,4096 \
	--json "$O/triton.json" >"$O/triton.log" 2>&1
echo "triton rc=$? after $(($(date +%s) - START)) s" >>"$S"
grep -E "check|ceilings|fused_moe|Error|error" "$O/triton.log" | tail -30 >>"$S"
pack_logs
cat "$S"
