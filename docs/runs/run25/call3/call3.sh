#!/usr/bin/env bash
# run 25 call 3: moe_dispatch_small (dispatch v1), the decode variant up to 64 rows per expert
# (mxfp8 v22), programmatic dependent launch (launch v1) and quantize_h in the decode FC1's
# epilogue (mxfp8 v23) beside c9e1523's binary: GPU tests,
# runs (forward where the variant's range grew, backward), sanitizers, then timed (the new binary
# also with --plain-launch).
set -u
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
old=$PWD/.carry/mokc-old
S=$O/summary.txt
END=$((SECONDS + ${BUDGET:-440})) # later steps are skipped past this, so the logs come back
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >> $S
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestDispatchSmallGPU|TestForwardSM80|TestSM90MXGemmGPU|TestQuantizeGPU' > $O/tests.log 2>&1; echo "codegen dispatch + forward tests rc=$?" | tee -a $S)
(cd driver && timeout 60 ../.carry/driver.test -test.v -test.count=1 -test.run 'TestProgrammaticLaunch|TestClusterLaunch|TestKernelsAssemble' >> $O/tests.log 2>&1; echo "driver programmatic launch tests rc=$?" | tee -a $S)
(cd runtime && timeout 150 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerForward|TestCaptureForward|TestLayerBackward' >> $O/tests.log 2>&1; echo "runtime layer tests rc=$?" | tee -a $S)
r() { # label binary args...
  local label=$1 bin=$2; shift 2
  [ $SECONDS -gt $END ] && { echo "run $label $* skipped (budget)" | tee -a $S; return; }
  timeout 90 $bin run --target sm_90a --json "$@" >> $O/run-$label.jsonl 2>>$O/run.log; echo "run $label $* rc=$?" | tee -a $S
}
for m in qwen3-30b-a3b olmoe-1b-7b mixtral-8x7b gpt-oss-120b; do
  r new $mokc --model $m --precision mxfp8 --tokens 0,1,64,256,1024 --repeat 3
done
for m in qwen3-30b-a3b gpt-oss-120b; do
  r old $old --model $m --precision mxfp8 --tokens 1,64 --repeat 3
  r new $mokc --model $m --tokens 0,1,64,256 --repeat 3
  r old $old --model $m --tokens 1,64,256 --repeat 3
done
r new $mokc --model deepseek-v3 --precision mxfp8 --tokens 2048 --repeat 3 --sample 32
r new $mokc --model qwen3-30b-a3b --backward --tokens 1,64,256 --repeat 3
r old $old --model qwen3-30b-a3b --backward --tokens 1,64,256 --repeat 3
r new $mokc --model qwen3-30b-a3b --backward --precision mxfp8 --tokens 1,64 --repeat 3
r new $mokc --model olmoe-1b-7b --routing map --tokens 1,64 --repeat 3
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model qwen3-30b-a3b --target sm_90a --tokens 64 > $O/sanitize.log 2>&1; echo "memcheck fwd rc=$?" | tee -a $S
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 9 $mokc run --model qwen3-30b-a3b --target sm_90a --tokens 200 >> $O/sanitize.log 2>&1; echo "racecheck fwd rc=$?" | tee -a $S
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --precision mxfp8 --model mixtral-8x7b --target sm_90a --tokens 256 >> $O/sanitize.log 2>&1; echo "memcheck mxfp8 mixtral T=256 rc=$?" | tee -a $S
b() { # label binary T args...
  local label=$1 bin=$2 T=$3; shift 3
  [ $SECONDS -gt $END ] && { echo "bench $label T=$T $* skipped (budget)" | tee -a $S; return; }
  timeout 60 $bin bench --target sm_90a --tokens $T --kernels --json "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc" | tee -a $S
}
for m in olmoe-1b-7b qwen2-57b-a14b qwen3-30b-a3b mixtral-8x7b gpt-oss-120b; do
  for bin in new plain old; do
    x=$mokc; [ $bin = old ] && x=$old
    p=""; [ $bin = plain ] && p=--plain-launch
    b $bin $x 64 --model $m $p
    b $bin $x 64 --model $m --precision mxfp8 $p
  done
done
for m in olmoe-1b-7b mixtral-8x7b; do
  b new $mokc 256 --model $m; b new $mokc 256 --model $m --precision mxfp8; b old $old 256 --model $m --precision mxfp8
done
for T in 512 1024; do
  b new $mokc $T --model qwen3-30b-a3b; b new $mokc $T --model qwen3-30b-a3b --precision mxfp8; b new16 $mokc $T --model qwen3-30b-a3b --precision mxfp8 --variant-max-rows 16
done
b new $mokc 2048 --model deepseek-v3; b new $mokc 2048 --model deepseek-v3 --precision mxfp8; b new16 $mokc 2048 --model deepseek-v3 --precision mxfp8 --variant-max-rows 16
b new $mokc 2048 --model gpt-oss-120b --precision mxfp8; b new16 $mokc 2048 --model gpt-oss-120b --precision mxfp8 --variant-max-rows 16
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
