#!/usr/bin/env bash
# run 30 call 5: split-K v1 (docs/perf.md): the sm_90a shared experts' GEMMs split their reduction
# at T <= 128 (moe_shared_fc*_splitk writing f32 parts, moe_shared_fc*_reduce summing them in order
# and applying the epilogue), and gather v3 limited to T <= 4 (the mxfp8 decode FC1 gathering x_q).
# Correctness: TestLayerForward/deepseek-v2-lite (sm_80, sm_90a), TestCaptureForward; mokc run of
# the presets with shared experts in both precisions around the split's edge (128/129) and the
# gather's (4/5); memcheck. Bench: new against old (8e82a73) at T = 64 (and a few edges).
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OLD=$PWD/.carry/mokc-old
(cd runtime && timeout 120 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerForward/deepseek-v2-lite|TestCaptureForward' > $O/layer.log 2>&1; echo "runtime TestLayerForward/deepseek-v2-lite TestCaptureForward rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/layer.log | head -20 >> $S
r() { # model tokens args...
  local m=$1 T=$2; shift 2
  left 220 || { echo "skipped run $m T=$T $*" >> $S; return; }
  timeout 100 $mokc run --model $m --target sm_90a --tokens $T "$@" > $O/tmp-run.txt 2>&1
  local rc=$?
  cat $O/tmp-run.txt >> $O/run.log
  echo "run $m T=$T $* rc=$rc ($(( $(date +%s) - START )) s)" >> $S
  grep -E "T=.*(PASS|FAIL)|FAIL" $O/tmp-run.txt | sed 's/  */ /g' >> $S
}
r deepseek-v2-lite 1,64,128,129 --repeat 3
r deepseek-v2-lite 1,4,5,64,128,129 --repeat 3 --precision mxfp8
r qwen2-57b-a14b 1,64,128,129 --repeat 2
r qwen2-57b-a14b 4,5,128 --repeat 2 --precision mxfp8
r deepseek-v3 1,64,128 --repeat 2 --sample 32
r llama4-scout 1,64,128 --repeat 2
r deepseek-v4-flash 64,128 --repeat 2 --precision mxfp8 --sample 64
r qwen3-30b-a3b 1,4,5,64 --repeat 3 --precision mxfp8
r gpt-oss-120b 4,5 --repeat 2 --precision mxfp8
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model deepseek-v2-lite --target sm_90a --tokens 1,64,128 > $O/memcheck.log 2>&1; echo "memcheck bf16 dsv2-lite T=1,64,128 rc=$?" | tee -a $S
tail -1 $O/memcheck.log >> $S
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model deepseek-v2-lite --target sm_90a --precision mxfp8 --tokens 1,4,5,64 > $O/memcheck2.log 2>&1; echo "memcheck mxfp8 dsv2-lite T=1,4,5,64 rc=$?" | tee -a $S
tail -1 $O/memcheck2.log >> $S
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  left 400 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 60 $bin bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc ($(( $(date +%s) - START )) s)" >> $S
}
for m in deepseek-v2-lite qwen2-57b-a14b llama4-scout deepseek-v4-flash deepseek-v3; do
  b old-bf16 $OLD 64 --model $m
  b new-bf16 $mokc 64 --model $m
  b old-mx $OLD 64 --model $m --precision mxfp8
  b new-mx $mokc 64 --model $m --precision mxfp8
done
b old-mx $OLD 1 --model qwen3-30b-a3b --precision mxfp8
b new-mx $mokc 1 --model qwen3-30b-a3b --precision mxfp8
b old-bf16 $OLD 128 --model qwen2-57b-a14b
b new-bf16 $mokc 128 --model qwen2-57b-a14b
b old-bf16 $OLD 1 --model deepseek-v2-lite
b new-bf16 $mokc 1 --model deepseek-v2-lite
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
