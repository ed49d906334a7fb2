#!/usr/bin/env bash
# run 28 call 3: mxfp8 v31 (the register-fed FC1 quantizes h in its epilogue; a fused epilogue leaves
# h unstored). The MX GEMM cases (two new: c_v bit for bit from the kernel's own C, and c_v alone);
# the runtime's MXFP8 rows test; the default mxfp8 forward on qwen3-30b-a3b, deepseek-v2-lite,
# mixtral-8x7b (fused) and gpt-oss-120b (interleaved: not fused; its decode FC1 leaves h unstored);
# the backward; memcheck at T = 64 and 1024; the forward timed beside bf16 and call 1's binary (v30,
# .carry/mokc-old).
set -u
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
END=$((SECONDS + ${BUDGET:-400}))
(cd codegen && timeout 120 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU|TestGatherMXGPU|TestQuantizeGPU' > $O/mxgemm.log 2>&1; echo "codegen MX GEMM tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/mxgemm.log | grep -v PASS | head -20 >> $S
grep -E "quant" $O/mxgemm.log | head -6 >> $S
(cd runtime && timeout 110 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerMXFP8Rows' > $O/rows.log 2>&1; echo "runtime MXFP8 rows test rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/rows.log | head -10 >> $S
r() { # model tokens args...
  local m=$1 T=$2; shift 2
  timeout 90 $mokc run --model $m --target sm_90a --tokens $T --json "$@" >> $O/run.jsonl 2>>$O/run.log; echo "run $m T=$T $* rc=$?" | tee -a $S
}
R="--precision mxfp8"
r qwen3-30b-a3b 0,1,64,1024 $R --repeat 3
r qwen3-30b-a3b 4096 $R --repeat 10
r deepseek-v2-lite 1,64,4096 $R --repeat 3
r mixtral-8x7b 1,64,4096 $R --repeat 3 --sample 64
r gpt-oss-120b 1,64,4096 $R --repeat 3 --sample 64
r qwen3-30b-a3b 1,64,1024 $R --backward --repeat 3
r deepseek-v2-lite 4096 $R --backward --repeat 3
python3 -c "
import json
for l in open('$O/run.jsonl'):
    try: d=json.loads(l)
    except Exception: continue
    print(d.get('model'), d.get('tokens'), 'bwd' if 'checked_intermediate_columns' in d else 'fwd', 'rel_l2 %s' % d.get('rel_l2'), '%s/%s identical' % (d.get('identical_runs'), d.get('runs')), 'PASS' if d.get('pass') else 'FAIL')
" >> $S 2>&1
for T in 64 1024; do
  timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model qwen3-30b-a3b --target sm_90a --tokens $T $R > $O/memcheck$T.log 2>&1; echo "memcheck mxfp8 T=$T rc=$?" | tee -a $S
  tail -1 $O/memcheck$T.log >> $S
done
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  [ $SECONDS -gt $END ] && { echo "bench $label T=$T $* skipped (budget)" | tee -a $S; return; }
  timeout 60 $bin bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc" >> $S
}
OLD=$PWD/.carry/mokc-old
for m in qwen3-30b-a3b deepseek-v3 mixtral-8x7b deepseek-v4-flash; do
  b bf16 $mokc 4096 --model $m; b mx-v30 $OLD 4096 --model $m $R; b mx-v31 $mokc 4096 --model $m $R
done
for T in 64 1024 16384; do b bf16 $mokc $T --model qwen3-30b-a3b; b mx-v30 $OLD $T --model qwen3-30b-a3b $R; b mx-v31 $mokc $T --model qwen3-30b-a3b $R; done
b bf16 $mokc 64 --model deepseek-v3; b mx-v30 $OLD 64 --model deepseek-v3 $R; b mx-v31 $mokc 64 --model deepseek-v3 $R
grep -hv "^{" $O/bench.jsonl >> $S
rm -f $O/tmp.json
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
