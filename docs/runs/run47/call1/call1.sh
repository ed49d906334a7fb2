#!/usr/bin/env bash
# run 47 call 1 (written as run 46 call 4, which found no machine; run here unchanged but for the
# bench budget). Every part bounded. Carry: .carry/bins.tgz of f7ce9ca
# and .carry/exp.tar.xz's mokc-exp: that CLI with the per-op gather at 2 rows per warp and the
# per-op combine at 2 tokens per block (dims set in newPerOp for every lowering; not committed), and
# mokc-w: the combine loading every slot's weight beside its row index (no wait for the
# row; docs/perf.md, "combine v3", has its prediction). Parts 1-3 take no prediction: measurements
# for the next step. mokc-c4: mokc-w with the persistent combine at 4 tokens per virtual
# block (persistCombinePerBlock; not committed): its bits and phase times.
#  1. Where the persistent kernel loses to per-op: each kernel's and each phase's start and duration
#     (--phases) on qwen3-30b-a3b at T = 4096 and 1.
#  2. The experiment: the per-op kernels' times (--kernels) and y_sha256 against the committed CLI;
#     the chained FC1 and FC2 (--chain fc1-fc2) as a phase of the persistent kernel: its bits and
#     phase times.
#  3. TestPersistentBackwardGPU on three of its four layers (gpt-oss-20b-E4's setup and float64
#     references alone take over 90 s).
#  4. combine v3 (mokc-w): its bits against the committed CLI on the presets of each combine form
#     (plain, shared expert, shared gate, weight on the input) and the combine kernel and phase times.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
# the three experimental CLIs, packed with xz into one archive (they share most of their bytes)
python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' $C/exp.tar.xz $C && chmod +x $C/mokc-exp $C/mokc-w $C/mokc-c4
exp=$C/mokc-exp
w=$C/mokc-w
c4=$C/mokc-c4
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
# combine v3's bits first: the committed change (mokc-w) against f7ce9ca's CLI, every combine form
RUN_TIMEOUT=40
run_json per-op "$mokc" qwen3-30b-a3b bf16 63,4095
run_json w "$w" qwen3-30b-a3b bf16 63,4095
run_json w-persistent "$w" qwen3-30b-a3b bf16 63,4095 --lowering persistent
for m in deepseek-v2-lite qwen2-57b-a14b llama4-scout; do
	run_json per-op "$mokc" $m bf16 1,300
	run_json w "$w" $m bf16 1,300
done
BENCH_BUDGET=400
for T in 4096 1; do
	bench per-op-phases "$mokc" $T --model qwen3-30b-a3b --iters 20 --phases
	bench persistent-phases "$mokc" $T --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
done
bench w-persistent-phases "$w" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
bench c4-persistent-phases "$c4" 4096 --model qwen3-30b-a3b --iters 20 --lowering persistent --phases
bench per-op-kernels "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --kernels
bench w-kernels "$w" 4096 --model qwen3-30b-a3b --iters 20 --kernels
bench exp-kernels "$exp" 4096 --model qwen3-30b-a3b --iters 20 --kernels
bench per-op-kernels-b "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --kernels
bench w-kernels-b "$w" 4096 --model qwen3-30b-a3b --iters 20 --kernels
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
left 440 && run_json c4-persistent "$c4" qwen3-30b-a3b bf16 63,4095 --lowering persistent
left 440 && run_json exp "$exp" qwen3-30b-a3b bf16 63,4095
# the chained FC1 and FC2 as a phase (built and assembled, not yet run on a GPU; the CLI notes it)
left 450 && run_json per-op-chain "$mokc" qwen3-30b-a3b bf16 63,4095 --chain fc1-fc2
left 460 && run_json persistent-chain "$mokc" qwen3-30b-a3b bf16 63,4095 --chain fc1-fc2 --lowering persistent --wait-limit 3s
BENCH_BUDGET=470 bench persistent-chain-phases "$mokc" 4096 --model qwen3-30b-a3b --iters 20 --chain fc1-fc2 --lowering persistent --phases
grep -h "^persistent-chain-phases" "$O/bench.jsonl" >>"$S"
left 470 && pkgtest runtime persist-bwd 75 $C/runtime.test -test.v -test.count=1 -test.timeout 70s -test.run 'TestPersistentBackwardGPU/(qwen3-30b-a3b-E16|shared-gate-map-bf16|weight-on-input)$'
[ -f "$O/persist-bwd.log" ] && grep -E "^\s*--- (FAIL|PASS)|panic|timed out" "$O/persist-bwd.log" | head -40 >>"$S"
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
