#!/usr/bin/env bash
# run 40 call 1 (about 330 s). Carry: .carry/bins.tgz of `make device-bins` and .carry/mokc-old.gz
# of `make device-old-cli REV=29f85a4` (the CLI with one thread per block in moe_quantize*).
#  1. The quantize kernels of 4555151 (four lanes per block; run 39 call 3's (a)): the same y_sha256
#     as 29f85a4's CLI (mxfp8, T = 0, 1, 64, 4096, four presets); TestQuantizeGPU, TestGatherMXGPU;
#     memcheck of the mxfp8 forward at T = 64.
#  2. Why the register-fed FC2 takes 255 µs in the layer and 206 standalone (run 39): the standalone
#     GEMMs with the layer's rows per expert (MOKC_MXPERF_ROUTED: each expert's last row tile
#     ragged) beside uniform rows, bf16 and register-fed (docs/perf.md, "ragged items").
#  3. TestLayerBackward's sm_90a cases (the queue walk's backward).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
# In order of value, so that a call cut short (timeout_s) still returns the first parts.
run_json old "$C/mokc-old" qwen3-30b-a3b mxfp8 0,1,64,4096
run_json new "$mokc" qwen3-30b-a3b mxfp8 0,1,64,4096
pkgtest codegen quant 90 $C/codegen.test -test.v -test.count=1 -test.run 'TestQuantizeGPU|TestGatherMXGPU'
perf() {
	MOKC_MXPERF='p_fc[12]_(bf16|regfed2)$' pkgtest codegen perf-uniform-$1 60 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf'
	MOKC_MXPERF_ROUTED=1 MOKC_MXPERF='p_fc[12]_(bf16|regfed2)$' pkgtest codegen perf-routed-$1 60 $C/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf'
	grep -hE "µs|rows per expert" "$O/perf-uniform-$1.log" "$O/perf-routed-$1.log" | sed 's/^ *//' >>"$S"
}
perf 1
for m in deepseek-v3 gpt-oss-20b deepseek-v2-lite; do
	run_json old "$C/mokc-old" $m mxfp8 0,1,64,4096
	run_json new "$mokc" $m mxfp8 0,1,64,4096
done
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 64 --repeat 1 >"$O/memcheck.log" 2>&1
echo "memcheck qwen3-30b-a3b mxfp8 T=64 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
perf 2
left 150 && pkgtest runtime bwd $((330 - $(date +%s) + START)) $C/runtime.test -test.v -test.count=1 -test.run 'TestLayerBackward$/.*/sm_90a'
grep -hE -- "--- FAIL|^(ok|FAIL|PASS)" "$O/bwd.log" 2>/dev/null | head -8 >>"$S"
cat "$S"
