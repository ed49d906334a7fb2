#!/usr/bin/env bash
# run 31 call 3: mxfp8 v33 (GPT-OSS's interleaved FC1 stores h as bf16 rounded to odd). Correctness:
# TestSM90MXGemmGPU (three new interleaved _odd cases), TestLayerMXFP8Rows (gpt-oss dims H = I = 2880,
# ragged rows, forward and backward), old (4a199a6) and new CLI at the same seed on both gpt-oss
# presets (rel L2 and max abs to every digit), memcheck. Bench: gpt-oss T = 4096 bf16 / old / new, and
# a second sample of the large presets whose medians spread in call 2 (bf16 and new alternated).
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OLD=$PWD/.carry/mokc-old
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU' > $O/codegen.log 2>&1; echo "codegen TestSM90MXGemmGPU rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^--- |_odd|FAIL" $O/codegen.log | head -20 >> $S
grep -c -- "--- PASS" $O/codegen.log >> $S
(cd runtime && timeout 200 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestLayerMXFP8Rows' > $O/layer.log 2>&1; echo "runtime TestLayerMXFP8Rows rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/layer.log | head -10 >> $S
r() { # label bin model tokens args...
  local label=$1 bin=$2 m=$3 T=$4; shift 4
  left 300 || { echo "skipped run $label $m T=$T $*" >> $S; return; }
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
for m in gpt-oss-20b gpt-oss-120b; do
  r old $OLD $m 64,600,1024,4096 --repeat 2 --sample 64
  r new $mokc $m 64,600,1024,4096 --repeat 3 --sample 64
done
r new $mokc qwen3-30b-a3b 4096 --repeat 2
sort -k2,2 -k3,3n -k1,1r $O/runs.txt >> $S
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model gpt-oss-20b --target sm_90a --precision mxfp8 --tokens 600 --repeat 1 --sample 16 > $O/memcheck.log 2>&1; echo "memcheck mxfp8 gpt-oss-20b T=600 rc=$?" | tee -a $S
tail -1 $O/memcheck.log >> $S
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  left 560 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 60 $bin bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), 'p10-p90', round(d.get('min_ms',0),3), round(d.get('p90_ms',0),3), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc ($(( $(date +%s) - START )) s)" >> $S
}
for m in gpt-oss-120b gpt-oss-20b; do
  b bf16 $mokc 4096 --model $m
  b mx-old $OLD 4096 --model $m --precision mxfp8
  b mx-new $mokc 4096 --model $m --precision mxfp8
done
for m in qwen3-235b-a22b llama4-scout qwen2-57b-a14b kimi-k2; do
  b bf16 $mokc 4096 --model $m
  b mx-new $mokc 4096 --model $m --precision mxfp8
  b bf16 $mokc 4096 --model $m
  b mx-new $mokc 4096 --model $m --precision mxfp8
done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
