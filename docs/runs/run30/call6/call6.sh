#!/usr/bin/env bash
# run 30 call 6: split-K v2 (docs/perf.md): the combine adds the shared FC2's split parts itself at
# T <= 128 (moe_combine_splitk; no moe_shared_fc2_reduce). mokc-mid is call 5's CLI (split-K v1),
# mokc-old 8e82a73's. Correctness: TestLayerForward/deepseek-v2-lite, TestCaptureForward; mokc run
# new and mid (the same seed: equal rel L2 and max abs mean the same bits); memcheck; bench mid/new.
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
MID=$PWD/.carry/mokc-mid
(cd runtime && timeout 90 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerForward/deepseek-v2-lite|TestCaptureForward' > $O/layer.log 2>&1; echo "runtime TestLayerForward/deepseek-v2-lite TestCaptureForward rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/layer.log | head -20 >> $S
r() { # label bin model tokens args...
  local label=$1 bin=$2 m=$3 T=$4; shift 4
  left 120 || { echo "skipped run $label $m T=$T $*" >> $S; return; }
  timeout 60 $bin run --model $m --target sm_90a --tokens $T --seed 7 "$@" > $O/tmp-run.txt 2>&1
  local rc=$?
  cat $O/tmp-run.txt >> $O/run.log
  echo "run $label $m T=$T $* rc=$rc ($(( $(date +%s) - START )) s)" >> $S
  grep -E "T=.*(PASS|FAIL)|FAIL" $O/tmp-run.txt | sed 's/  */ /g' >> $S
}
r new $mokc deepseek-v2-lite 1,64,128,129 --repeat 3
r mid $MID deepseek-v2-lite 1,64,128,129 --repeat 1
r new $mokc qwen2-57b-a14b 64,128 --repeat 2
r mid $MID qwen2-57b-a14b 64,128 --repeat 1
r new $mokc deepseek-v2-lite 4,64 --repeat 2 --precision mxfp8
r new $mokc llama4-scout 64 --repeat 2
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model deepseek-v2-lite --target sm_90a --tokens 64,128 > $O/memcheck.log 2>&1; echo "memcheck bf16 dsv2-lite T=64,128 rc=$?" | tee -a $S
tail -1 $O/memcheck.log >> $S
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  left 220 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 40 $bin bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc ($(( $(date +%s) - START )) s)" >> $S
}
for m in deepseek-v2-lite qwen2-57b-a14b; do
  b mid-bf16 $MID 64 --model $m
  b new-bf16 $mokc 64 --model $m
  b mid-mx $MID 64 --model $m --precision mxfp8
  b new-mx $mokc 64 --model $m --precision mxfp8
done
b mid-bf16 $MID 64 --model llama4-scout
b new-bf16 $mokc 64 --model llama4-scout
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
