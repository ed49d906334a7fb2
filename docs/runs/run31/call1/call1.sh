#!/usr/bin/env bash
# run 31 call 1: the checks last run's code did not get on the GPU (TestSM90SplitKGPU; the mxfp8
# x_q/x_scales sized [4, H]: mxfp8 forwards at T = 1, 4, 5, 64), TestLayerForward/deepseek-v2-lite,
# TestCaptureForward, TestLayerMXFP8Rows; then a calibration grid of the shared experts' split
# kernels at T = 64 (FC2 tile and stages: B bytes in flight per SM) and the unsplit small-tile form.
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw --format=csv >> $S 2>&1
(cd codegen && timeout 120 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90SplitKGPU' > $O/codegen.log 2>&1; echo "codegen TestSM90SplitKGPU rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/codegen.log | head -20 >> $S
(cd runtime && timeout 200 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerForward/deepseek-v2-lite|TestCaptureForward|TestLayerMXFP8Rows' > $O/layer.log 2>&1; echo "runtime TestLayerForward/deepseek-v2-lite TestCaptureForward TestLayerMXFP8Rows rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/layer.log | head -30 >> $S
r() { # model tokens args...
  local m=$1 T=$2; shift 2
  left 200 || { echo "skipped run $m T=$T $*" >> $S; return; }
  timeout 100 $mokc run --model $m --target sm_90a --tokens $T "$@" > $O/tmp-run.txt 2>&1
  local rc=$?
  cat $O/tmp-run.txt >> $O/run.log
  echo "run $m T=$T $* rc=$rc ($(( $(date +%s) - START )) s)" >> $S
  grep -E "T=.*(PASS|FAIL)|FAIL" $O/tmp-run.txt | sed 's/  */ /g' >> $S
}
r qwen3-30b-a3b 1,4,5,64 --repeat 3 --precision mxfp8
r deepseek-v2-lite 1,4,5,64 --repeat 3 --precision mxfp8
r gpt-oss-120b 1,4,5 --repeat 2 --precision mxfp8
r olmoe-1b-7b 1,4,5,64 --repeat 2 --precision mxfp8
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 1,4,5 --repeat 1 > $O/memcheck.log 2>&1; echo "memcheck mxfp8 qwen3-30b-a3b T=1,4,5 rc=$?" | tee -a $S
tail -1 $O/memcheck.log >> $S
b() { # label T args...
  local label=$1 T=$2; shift 2
  left 430 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 60 $mokc bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.1f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc ($(( $(date +%s) - START )) s)" >> $S
}
for m in qwen2-57b-a14b deepseek-v2-lite; do
  b default 64 --model $m
  b st4 64 --model $m --stages 4
  b n128s4 64 --model $m --fc2-tile 128x128x64 --stages 4
  b n128s6 64 --model $m --fc1-tile 128x128x64 --fc2-tile 128x128x64 --stages 6
  b n64s8 64 --model $m --fc1-tile 128x64x64 --fc2-tile 128x64x64 --stages 8
  b off 64 --model $m --split-k off
  b off-n64s8 64 --model $m --split-k off --fc1-tile 128x64x64 --fc2-tile 128x64x64 --stages 8
  b off-n32s8 64 --model $m --split-k off --fc1-tile 128x64x64 --fc2-tile 128x32x64 --stages 8
  b mx 64 --model $m --precision mxfp8
done
grep -hv "^{" $O/bench.jsonl >> $S
r deepseek-v2-lite 64 --repeat 2 --fc1-tile 128x64x64 --fc2-tile 128x64x64 --stages 8
r qwen2-57b-a14b 64 --repeat 2 --split-k off --fc1-tile 128x64x64 --fc2-tile 128x32x64 --stages 8
if left 450; then timeout 140 $mokc run --model kimi-k2 --target sm_90a --precision mxfp8 --tokens 1 --repeat 2 > $O/kimi.log 2>&1; echo "run kimi-k2 mxfp8 T=1 rc=$? ($(( $(date +%s) - START )) s)" >> $S; grep -E "PASS|FAIL" $O/kimi.log >> $S; fi
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
