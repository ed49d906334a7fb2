#!/usr/bin/env bash
# run 46 call 4: NOT RUN (four tries found no machine and run 46's device time ran out); kept
# for the next run. Every part bounded. Carry: .carry/bins.tgz of call 3
# (6d13d67's code) and .carry/mokc-exp.gz: that CLI with the per-op gather at 2 rows per warp and the
# per-op combine at 2 tokens per block (dims set in newPerOp for every lowering; not committed). No
# prediction: measurements for the next step.
#  1. Where the persistent kernel loses to per-op: each kernel's and each phase's start and duration
#     (--phases) on qwen3-30b-a3b at T = 4096 and 1.
#  2. The experiment: the per-op kernels' times (--kernels) and y_sha256 against the committed CLI;
#     the chained FC1 and FC2 (--chain fc1-fc2) as a phase of the persistent kernel: its bits and
#     phase times.
#  3. TestPersistentBackwardGPU on three of its four layers (gpt-oss-20b-E4's setup and float64
#     references alone take over 90 s).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-exp.gz >$C/mokc-exp && chmod +x $C/mokc-exp
exp=$C/mokc-exp
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
BENCH_BUDGET=70
for T in 4096 1; do
	bench per-op-phases "$mokc" $T --model qwen3-30b-a3b --iters 20 --phases
	bench persistent-phases "$mokc" $T --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
done
bench per-op-kernels "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --kernels
bench exp-kernels "$exp" 4096 --model qwen3-30b-a3b --iters 20 --kernels
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
RUN_TIMEOUT=40
run_json per-op "$mokc" qwen3-30b-a3b bf16 63,4095
run_json exp "$exp" qwen3-30b-a3b bf16 63,4095
# the chained FC1 and FC2 as a phase (built and assembled, not yet run on a GPU; the CLI notes it)
run_json per-op-chain "$mokc" qwen3-30b-a3b bf16 63,4095 --chain fc1-fc2
run_json persistent-chain "$mokc" qwen3-30b-a3b bf16 63,4095 --chain fc1-fc2 --lowering persistent --wait-limit 3s
BENCH_BUDGET=200 bench persistent-chain-phases "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --chain fc1-fc2 --lowering persistent --phases
grep -h "persistent-chain-phases" "$O/bench.jsonl" | grep -v "^{" >>"$S"
pkgtest runtime persist-bwd 75 $C/runtime.test -test.v -test.count=1 -test.timeout 70s -test.run 'TestPersistentBackwardGPU/(qwen3-30b-a3b-E16|shared-gate-map-bf16|weight-on-input)$'
grep -E "^\s*--- (FAIL|PASS)|panic|timed out" "$O/persist-bwd.log" | head -40 >>"$S"
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
