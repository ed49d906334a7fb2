#!/usr/bin/env bash
# run 32 call 1: mxfp8 v35, the register-fed GEMMs as pairs (two blocks per SM,
# --regfed-blocks-per-sm 2). Correctness: TestSM90MXGemmGPU (four pair cases) and
# TestSM90RoundOddGPU; mokc run --json y_sha256 of old (806a092) / new / new with pairs at the
# same seed; memcheck. Bench T = 4096: bf16, mxfp8 new, mxfp8 pairs.
set -u
START=$(date +%s)
left() { [ $(( $(date +%s) - START )) -lt $1 ]; }
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
OLD=$PWD/.carry/mokc-old
(cd codegen && timeout 200 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU|TestSM90RoundOddGPU' > $O/codegen.log 2>&1; echo "codegen MX GEMM + RoundOdd rc=$? ($(( $(date +%s) - START )) s)" | tee -a $S)
grep -E "^--- |pair|FAIL" $O/codegen.log | head -30 >> $S
grep -c -- "--- PASS" $O/codegen.log >> $S
r() { # label bin model tokens args...
  local label=$1 bin=$2 m=$3 T=$4; shift 4
  left 250 || { echo "skipped run $label $m T=$T $*" >> $S; return; }
  timeout 120 $bin run --model $m --target sm_90a --precision mxfp8 --tokens $T --json "$@" > $O/tmp-run.txt 2>>$O/run-err.log
  local rc=$?
  python3 -c "
import json,sys
for line in open('$O/tmp-run.txt'):
    line=line.strip()
    if not line.startswith('{'): continue
    d=json.loads(line)
    if 'tokens' not in d: continue
    print('$label', d['model'], d['tokens'], repr(d['rel_l2']), d.get('y_sha256','')[:16], '%d/%d' % (d['identical_runs'], d['runs']), 'PASS' if d['pass'] else 'FAIL')
" >> $O/runs.txt 2>>$O/run-err.log
  echo "run $label $m T=$T $* rc=$rc ($(( $(date +%s) - START )) s)" >> $S
}
P="--regfed-blocks-per-sm 2"
r old $OLD qwen3-30b-a3b 600,4096 --repeat 2
r new $mokc qwen3-30b-a3b 600,4096 --repeat 2
r pair $mokc qwen3-30b-a3b 64,600,4096 --repeat 3 $P
for m in gpt-oss-20b deepseek-v2-lite mixtral-8x7b; do
  r new $mokc $m 4096 --repeat 2 --sample 32
  r pair $mokc $m 4096 --repeat 2 --sample 32 $P
done
sort -k2,2 -k3,3n -k1,1r $O/runs.txt >> $S
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 600 --repeat 1 $P > $O/memcheck.log 2>&1; echo "memcheck pairs qwen3-30b-a3b T=600 rc=$?" | tee -a $S
tail -1 $O/memcheck.log >> $S
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  left 560 || { echo "skipped bench $label T=$T $*" >> $S; return; }
  timeout 60 $bin bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc ($(( $(date +%s) - START )) s)" >> $S
}
b bf16 $mokc 4096 --model qwen3-30b-a3b
b mx-new $mokc 4096 --model qwen3-30b-a3b --precision mxfp8
b mx-pair $mokc 4096 --model qwen3-30b-a3b --precision mxfp8 $P
b mx-pair64 $mokc 4096 --model qwen3-30b-a3b --precision mxfp8 $P --fc1-tile 64x128x128 --fc2-tile 64x128x128 --mma-warps 4 --stages 3
for m in mixtral-8x7b olmoe-1b-7b deepseek-v2-lite gpt-oss-20b deepseek-v3 qwen2-57b-a14b; do
  b bf16 $mokc 4096 --model $m
  b mx-new $mokc 4096 --model $m --precision mxfp8
  b mx-pair $mokc 4096 --model $m --precision mxfp8 $P
done
b mx-new $mokc 16384 --model qwen3-30b-a3b --precision mxfp8
b mx-pair $mokc 16384 --model qwen3-30b-a3b --precision mxfp8 $P
b mx-pair $mokc 1024 --model qwen3-30b-a3b --precision mxfp8 $P
b mx-new $mokc 1024 --model qwen3-30b-a3b --precision mxfp8
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
