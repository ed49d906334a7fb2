#!/usr/bin/env bash
# run 28 call 1: mxfp8 v30 (the register-fed GEMMs' bf16 epilogue transposed by movmatrix: 8-byte
# stores of whole 32-byte sectors). The MX GEMM cases; the standalone GEMM timings; the runtime's
# MXFP8 rows test (H = I = 2880: a partial last B tile of FC2); the default mxfp8 forward on four
# presets (gpt-oss-120b's FC2 has a bias), the backward, memcheck at T = 1024 (register-fed range);
# the forward timed at T = 4096 (and 1024, 16384 for qwen3-30b-a3b), bf16 beside mxfp8 with the
# previous binary (f480d84, .carry/mokc-old) and this one.
set -u
# The binaries travel xz-packed (bins.txz: codegen.test, runtime.test, mokc, mokc-old): the tree and
# the carried files must stay under 64 MiB.
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
END=$((SECONDS + ${BUDGET:-480}))
(cd codegen && timeout 120 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU|TestGatherMXGPU|TestQuantizeGPU' > $O/mxgemm.log 2>&1; echo "codegen MX GEMM tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/mxgemm.log | grep -v PASS | head -20 >> $S
(cd codegen && MOKC_MXPERF='p_fc2|p_fc1_regfed2|p_fc1_bf16' timeout 120 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf' > $O/perf.log 2>&1; echo "codegen regfed perf rc=$?" | tee -a $S)
grep -E "µs|Error|FAIL|want" $O/perf.log | head -20 >> $S
(cd runtime && timeout 100 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerMXFP8Rows/default' > $O/rows.log 2>&1; echo "runtime MXFP8 rows test rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/rows.log | head -10 >> $S
r() { # model tokens args...
  local m=$1 T=$2; shift 2
  timeout 90 $mokc run --model $m --target sm_90a --tokens $T --json "$@" >> $O/run.jsonl 2>>$O/run.log; echo "run $m T=$T $* rc=$?" | tee -a $S
}
R="--precision mxfp8"
r qwen3-30b-a3b 0,1,64,1024 $R --repeat 3
r qwen3-30b-a3b 4096 $R --repeat 10
r gpt-oss-120b 1,64,4096 $R --repeat 3
r deepseek-v2-lite 1,4096 $R --repeat 3
r qwen3-30b-a3b 1,1024 $R --backward --repeat 3
python3 -c "
import json
for l in open('$O/run.jsonl'):
    try: d=json.loads(l)
    except Exception: continue
    print(d.get('model'), d.get('tokens'), 'bwd' if 'checked_intermediate_columns' in d else 'fwd', 'rel_l2 %s' % d.get('rel_l2'), '%s/%s identical' % (d.get('identical_runs'), d.get('runs')), 'PASS' if d.get('pass') else 'FAIL')
" >> $S 2>&1
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model qwen3-30b-a3b --target sm_90a --tokens 1024 $R > $O/memcheck.log 2>&1; echo "memcheck mxfp8 T=1024 rc=$?" | tee -a $S
tail -3 $O/memcheck.log >> $S
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  [ $SECONDS -gt $END ] && { echo "bench $label T=$T $* skipped (budget)" | tee -a $S; return; }
  timeout 60 $bin bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc" >> $S
}
OLD=$PWD/.carry/mokc-old
for m in qwen3-30b-a3b gpt-oss-120b deepseek-v3 mixtral-8x7b; do
  b bf16 $mokc 4096 --model $m; b mx-old $OLD 4096 --model $m $R; b mx-new $mokc 4096 --model $m $R
done
for T in 1024 16384; do b bf16 $mokc $T --model qwen3-30b-a3b; b mx-old $OLD $T --model qwen3-30b-a3b $R; b mx-new $mokc $T --model qwen3-30b-a3b $R; done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
