#!/usr/bin/env bash
# run 29 call 5: gather v1e. All four producer warps copy the gathered rows (a row per thread, as
# call 2 per lane, through L1), so FC1 runs without the staged epilogue (whose store warps they were).
# The GEMM cases, the forward on three presets, and the bench: old (73f273d), v1b (call 2,
# .carry/mokc-s1) and v1e (and v1e with 4 stages on qwen3-30b-a3b).
set -u
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90GemmGPU' > $O/gemm.log 2>&1; echo "codegen sm90 GEMM tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/gemm.log | grep -v PASS | head -20 >> $S
grep -E "^\s+--- .*gather" $O/gemm.log | head -10 >> $S
grep -E "wrong|want" $O/gemm.log | head -10 >> $S
for m in qwen3-30b-a3b gpt-oss-120b deepseek-v2-lite; do
  timeout 100 $mokc run --model $m --target sm_90a --tokens 1,64,2048,4096 --repeat 3 >> $O/run.log 2>&1; echo "run $m rc=$?" | tee -a $S
done
grep -E "PASS|FAIL" $O/run.log >> $S
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  timeout 60 $bin bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc" >> $S
}
OLD=$PWD/.carry/mokc-old; S1=$PWD/.carry/mokc-s1
for m in qwen3-30b-a3b deepseek-v3; do b old $OLD 4096 --model $m; b v1b $S1 4096 --model $m; b v1e $mokc 4096 --model $m; done
b v1e-s4 $mokc 4096 --model qwen3-30b-a3b --stages 4
for T in 64 16384; do b old $OLD $T --model qwen3-30b-a3b; b v1e $mokc $T --model qwen3-30b-a3b; done
for m in gpt-oss-120b mixtral-8x7b; do b old $OLD 4096 --model $m; b v1e $mokc 4096 --model $m; done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
