#!/usr/bin/env bash
# run 27 call 2: mxfp8 v28 (the register-fed K loop in two widths by the work item's rows) and v29
# (--mx-gemm regfed keeps the decode variant: both forms of the rows, each in its T range). The MX
# GEMM cases; the standalone GEMM timings (O(1) FC1 pre-activations now); --mx-gemm regfed in whole
# layers: forward at T = 0, 1, 64, 4096 on four presets, 10 runs identical at T = 4096, the backward,
# memcheck; the forward timed at T = 4096 (and 64, 1024, 16384 for qwen3-30b-a3b) beside bf16 and promote.
set -u
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
END=$((SECONDS + ${BUDGET:-400}))
(cd codegen && timeout 120 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU|TestGatherMXGPU|TestQuantizeGPU' > $O/mxgemm.log 2>&1; echo "codegen MX GEMM tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/mxgemm.log | grep -v PASS | head -20 >> $S
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf' > $O/perf.log 2>&1; echo "codegen regfed perf rc=$?" | tee -a $S)
grep -E "µs|Error|FAIL|want" $O/perf.log | head -20 >> $S
r() { # model tokens args...
  local m=$1 T=$2; shift 2
  timeout 90 $mokc run --model $m --target sm_90a --tokens $T --json "$@" >> $O/run.jsonl 2>>$O/run.log; echo "run $m T=$T $* rc=$?" | tee -a $S
}
R="--precision mxfp8 --mx-gemm regfed"
r qwen3-30b-a3b 0,1,64 $R --repeat 3
r qwen3-30b-a3b 4096 $R --repeat 10
r gpt-oss-120b 1,64,4096 $R --repeat 3
r deepseek-v2-lite 0,1,64,4096 $R --repeat 3
r llama4-scout 1,64,4096 $R --repeat 3
r qwen3-30b-a3b 1,64,256 $R --backward --repeat 3
r gpt-oss-120b 64 $R --backward --repeat 3
python3 -c "
import json
for l in open('$O/run.jsonl'):
    try: d=json.loads(l)
    except Exception: continue
    print({k: v for k, v in d.items() if not isinstance(v, (list, dict)) and k not in ('device', 'target', 'schedule')})
" >> $S 2>&1
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 $mokc run --model qwen3-30b-a3b --target sm_90a --tokens 64 $R > $O/memcheck.log 2>&1; echo "memcheck regfed T=64 rc=$?" | tee -a $S
tail -3 $O/memcheck.log >> $S
b() { # label T args...
  local label=$1 T=$2; shift 2
  [ $SECONDS -gt $END ] && { echo "bench $label T=$T $* skipped (budget)" | tee -a $S; return; }
  timeout 60 $mokc bench --target sm_90a --tokens $T --kernels --json --iters 50 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, round(d['median_ms'],4), ' '.join('%s=%.0f' % (k['name'][4:], 1000*k['median_ms']) for k in d['kernel_times'] if k['median_ms'] > 0.003))" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc" | tee -a $S
}
for m in qwen3-30b-a3b gpt-oss-120b deepseek-v3 mixtral-8x7b; do
  b bf16 4096 --model $m; b promote 4096 --model $m --precision mxfp8; b regfed 4096 --model $m $R
done
for T in 64 1024 16384; do b bf16 $T --model qwen3-30b-a3b; b promote $T --model qwen3-30b-a3b --precision mxfp8; b regfed $T --model qwen3-30b-a3b $R; done
grep -hv "^{" $O/bench.jsonl >> $S
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
