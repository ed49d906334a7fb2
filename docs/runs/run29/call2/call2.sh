#!/usr/bin/env bash
# run 29 call 2: gather v1b. Call 1's FC1 was correct (bit for bit) but 2.8x slower: its copying
# warp shuffled each row's token and rebuilt its address per chunk. Now each lane copies whole rows
# of its own (rows lane + 32i: four addresses per lane, the chunks at constant offsets, through L1),
# and skips the rows past the expert's segment. The sm_90a GEMM cases, qwen3-30b-a3b's forward,
# and the bench old (73f273d) / new.
set -u
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90GemmGPU' > $O/gemm.log 2>&1; echo "codegen sm90 GEMM tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/gemm.log | grep -v PASS | head -20 >> $S
grep -E "^\s+--- .*gather" $O/gemm.log | head -10 >> $S
timeout 100 $mokc run --model qwen3-30b-a3b --target sm_90a --tokens 1,64,2048,4096 --repeat 3 > $O/run.log 2>&1; echo "run qwen3 rc=$?" | tee -a $S
grep -E "PASS|FAIL" $O/run.log >> $S
b() { # label bin T args...
  local label=$1 bin=$2 T=$3; shift 3
  timeout 60 $bin bench --target sm_90a --tokens $T --kernels --json --iters 30 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc" >> $S
}
OLD=$PWD/.carry/mokc-old
for m in qwen3-30b-a3b gpt-oss-120b deepseek-v3 mixtral-8x7b; do b old $OLD 4096 --model $m; b new $mokc 4096 --model $m; done
for T in 64 2048 16384; do b old $OLD $T --model qwen3-30b-a3b; b new $mokc $T --model qwen3-30b-a3b; done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
