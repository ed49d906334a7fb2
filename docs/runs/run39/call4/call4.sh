#!/usr/bin/env bash
# run 39 call 4 (about 240 s). Carry: .carry/bins.tgz of `make device-bins` (four lanes per block in
# moe_quantize*, the register-fed stores as 29f85a4's: call 3's (a)) and .carry/mokc-old.gz (29f85a4's CLI).
#  1. The same y_sha256 as 29f85a4's CLI (mxfp8, T = 0, 1, 64, 4096, four presets); TestQuantizeGPU,
#     TestGatherMXGPU; memcheck of the mxfp8 forward at T = 64.
#  2. TestLayerBackward's sm_90a cases (the queue walk's backward; its sm_80 cases ran in run 38 and
#     39 before the time ran out).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader >>"$S"
for m in qwen3-30b-a3b deepseek-v3 gpt-oss-20b deepseek-v2-lite; do
	run_json old "$C/mokc-old" $m mxfp8 0,1,64,4096
	run_json new "$mokc" $m mxfp8 0,1,64,4096
done
pkgtest codegen quant 90 $C/codegen.test -test.v -test.count=1 -test.run 'TestQuantizeGPU|TestGatherMXGPU'
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 64 --repeat 1 >"$O/memcheck.log" 2>&1
echo "memcheck qwen3-30b-a3b mxfp8 T=64 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
pkgtest runtime bwd $((240 - $(date +%s) + START)) $C/runtime.test -test.v -test.count=1 -test.run 'TestLayerBackward$/.*/sm_90a'
grep -hE -- "--- FAIL|^(ok|FAIL|PASS)" "$O/bwd.log" 2>/dev/null | head -8 >>"$S"
cat "$S"
