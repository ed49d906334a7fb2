#!/usr/bin/env bash
# run 31 call 4: mxfp8 v34 (the register-fed GEMMs give a weight row holding an e4m3 NaN byte the
# factor NaN). Correctness: TestSM90MXGemmGPU (two new _nan cases), v33 (mokc-v33: 4678dac) and new
# CLI at the same seed (rel L2 and max abs to every digit), memcheck. Bench: T = 4096, v33 and new
# alternated twice per preset (the cost of the test in the K loop).
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OLD=$PWD/.carry/mokc-v33
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU' > $O/codegen.log 2>&1; echo "codegen TestSM90MXGemmGPU rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^--- |_nan|FAIL" $O/codegen.log | head -20 >> $S
grep -c -- "--- PASS" $O/codegen.log >> $S
r() { # label bin model tokens args...
  local label=$1 bin=$2 m=$3 T=$4; shift 4
  left 200 || { echo "skipped run $label $m T=$T $*" >> $S; return; }
  timeout 120 $bin run --model $m --target sm_90a --precision mxfp8 --tokens $T --json "$@" > $O/tmp-run.txt 2>>$O/run-err.log
  local rc=$?
  python3 -c "
import json,sys
for line in open('$O/tmp-run.txt'):
    line=line.strip()
    if not line.startswith('{'): continue
    d=json.loads(line)
    if 'tokens' not in d: continue
    print('$label', d['model'], d['tokens'], repr(d['rel_l2']), repr(d['max_abs_err']), '%d/%d' % (d['identical_runs'], d['runs']), 'PASS' if d['pass'] else 'FAIL')
" >> $O/runs.txt 2>>$O/run-err.log
  echo "run $label $m T=$T $* rc=$rc ($(( $(date +%s) - START )) s)" >> $S
}
r v33 $OLD qwen3-30b-a3b 1024,4096 --repeat 2
r new $mokc qwen3-30b-a3b 1024,4096 --repeat 3
r v33 $OLD gpt-oss-20b 4096 --repeat 2 --sample 64
r new $mokc gpt-oss-20b 4096 --repeat 3 --sample 64
r v33 $OLD deepseek-v2-lite 4096 --repeat 2
r new $mokc deepseek-v2-lite 4096 --repeat 3
sort -k2,2 -k3,3n -k1,1r $O/runs.txt >> $S
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 600 --repeat 1 > $O/memcheck.log 2>&1; echo "memcheck mxfp8 qwen3-30b-a3b T=600 rc=$?" | tee -a $S
tail -1 $O/memcheck.log >> $S
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  left 470 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 60 $bin bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), 'min-p90', round(d.get('min_ms',0),3), round(d.get('p90_ms',0),3), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc ($(( $(date +%s) - START )) s)" >> $S
}
for m in qwen3-30b-a3b deepseek-v2-lite gpt-oss-20b mixtral-8x7b; do
  b v33 $OLD 4096 --model $m --precision mxfp8
  b new $mokc 4096 --model $m --precision mxfp8
  b v33 $OLD 4096 --model $m --precision mxfp8
  b new $mokc 4096 --model $m --precision mxfp8
done
b bf16 $mokc 4096 --model qwen3-30b-a3b
b v33 $OLD 16384 --model qwen3-30b-a3b --precision mxfp8
b new $mokc 16384 --model qwen3-30b-a3b --precision mxfp8
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
