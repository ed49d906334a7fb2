#!/usr/bin/env bash
# run 37 call 2 (two blocks per SM, v1), ordered by need, for a call of about 480 s. Carry:
# .carry/bins.tgz of `make device-bins` (codegen.test, driver.test, runtime.test, mokc: 19 MB).
#  1. GPU correctness of the kernels built two per SM: the driver's occupancy query, the bf16 and
#     register-fed GEMM cases (*_2sm, each checking that two blocks fit an SM), round-to-odd bits,
#     and the layers (TestSharesSMGPU: the bits of the same tiles one per SM, graph replays).
#  2. Standalone speed: TestSM90MXRegFedPerf (qwen3-30b-a3b's routed GEMMs at T = 4096: bf16, the
#     two-warpgroup regfed (and FC2's 256 token rows), bf16 and regfed two blocks per SM, FC1 also
#     quantizing h in its epilogue).
#  3. Layer correctness with --blocks-per-sm 2 (y_sha256 beside the same tiles one per SM: the same
#     bits), bf16 and mxfp8, and a bf16 backward with a shared expert.
#  4. Layer speed alternated: default, the 2/SM tiles one per SM, and two per SM.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
step() { # step DIR NAME TIMEOUT CMD...: run in package directory DIR, log to $O/NAME.log, a summary line
	local dir=$1 name=$2 t=$3
	shift 3
	(cd "$dir" && timeout "$t" "$@") >"$O/$name.log" 2>&1
	echo "$name rc=$? $(grep -cE '^\s*--- PASS' "$O/$name.log") pass $(grep -cE '^\s*--- FAIL' "$O/$name.log") fail" >>"$S"
}
step driver driver 60 $C/driver.test -test.v -test.count=1 -test.run 'TestDynamicShared100K'
step codegen gemm 90 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90GemmGPU'
step codegen mx 120 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU|TestSM90RoundOddGPU'
grep -hE "^\s+--- FAIL|fit an SM|want" "$O/gemm.log" "$O/mx.log" | head -20 >>"$S"
step runtime shares 150 $C/runtime.test -test.v -test.count=1 -test.run 'TestSharesSMGPU'
left 300 && MOKC_MXPERF='_bf16$|regfed2$|regfed3$|_2sm' step codegen perf 200 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf'
grep -E "µs, .* TFLOP/s|FAIL" "$O/perf.log" >>"$S"
BF="--fc1-tile 64x256x64 --fc2-tile 64x192x64 --stages 2 --mma-warps 4"
MX="--fc1-tile 64x128x128 --fc2-tile 64x128x128 --stages 3 --mma-warps 4"
for m in qwen3-30b-a3b mixtral-8x7b; do
	left 300 || break
	run_json bf-tiles "$mokc" $m bf16 1,64,300,4096 $BF
	run_json bf-2sm "$mokc" $m bf16 1,64,300,4096 $BF --blocks-per-sm 2
done
for m in qwen3-30b-a3b gpt-oss-20b; do
	left 330 || break
	run_json mx-tiles "$mokc" $m mxfp8 1,64,300,4096 $MX
	run_json mx-2sm "$mokc" $m mxfp8 1,64,300,4096 $MX --blocks-per-sm 2
done
left 360 && timeout 120 "$mokc" run --backward --model deepseek-v2-lite --target sm_90a --tokens 64,1000 --repeat 2 $BF --blocks-per-sm 2 >"$O/bwd.log" 2>&1
echo "backward deepseek-v2-lite --blocks-per-sm 2 rc=$? $(grep -cE 'PASS' "$O/bwd.log") PASS $(grep -cE 'FAIL' "$O/bwd.log") FAIL" >>"$S"
BENCH_BUDGET=${BENCH_BUDGET:-450}
for i in 1 2; do
	for m in qwen3-30b-a3b mixtral-8x7b; do
		bench default "$mokc" 4096 --model $m --iters 20 --kernels
		bench bf-tiles "$mokc" 4096 --model $m --iters 20 --kernels $BF
		bench bf-2sm "$mokc" 4096 --model $m --iters 20 --kernels $BF --blocks-per-sm 2
	done
	for m in qwen3-30b-a3b gpt-oss-20b; do
		bench mx-default "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels
		bench mx-tiles "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels $MX
		bench mx-2sm "$mokc" 4096 --model $m --precision mxfp8 --iters 20 --kernels $MX --blocks-per-sm 2
	done
done
grep -hv "^{" "$O/bench.jsonl" >>"$S"
cat "$S"
