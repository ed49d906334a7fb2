#!/usr/bin/env bash
# run 45 call 2: why the persistent CLI runs of call 1 did not finish: the device's ptxas on the
# persistent PTX (qwen3-30b-a3b) against the per-op PTX, then one short CLI run if ptxas was quick.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
ptxas --version | tail -1 >>"$S"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >>"$S"
slow=0
for f in po_qwen3-30b-a3b pp_qwen3-30b-a3b; do
	t0=$(date +%s%N)
	timeout 130 ptxas -arch=sm_90a -v $C/ptx/$f.ptx -o /tmp/$f.cubin >"$O/ptxas-$f.log" 2>&1
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	echo "ptxas $f rc=$rc $ms ms $(grep -E 'spill|Used' "$O/ptxas-$f.log" | tr '\n' ' ' | cut -c1-200)" >>"$S"
	[ $ms -gt 60000 ] && slow=1
done
if [ $slow = 0 ]; then
	timeout 120 "$mokc" run --model qwen3-30b-a3b --target sm_90a --tokens 1 --repeat 1 --lowering persistent --wait-limit 2s --json >"$O/run1.json" 2>"$O/run1.err"
	echo "run qwen3 T=1 persistent rc=$? $(grep -v note: "$O/run1.err" | tail -2 | tr '\n' ' ')" >>"$S"
fi
pack_logs
cat "$S"
