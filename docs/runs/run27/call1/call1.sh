#!/usr/bin/env bash
# run 27 call 1: mxfp8 v26 and v27. The register-fed GEMM's two-warpgroup forms with four A-register
# sets (producer at 56 registers, consumers at 224) beside two sets, bf16 and promote at qwen3-30b-a3b
# T = 4096 (GEMMs alone); the MX GEMM cases; the register-fed program (--mx-gemm regfed: xs_rf and
# h_rf written as bf16 MXFP8 values) checked in whole layers and timed at T = 4096 beside bf16 and
# promote; then ncu's full set with per-instruction stall samples of the four-set FC1.
set -u
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
END=$((SECONDS + ${BUDGET:-330}))
(cd codegen && timeout 120 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXGemmGPU' > $O/mxgemm.log 2>&1; echo "codegen MX GEMM tests rc=$?" | tee -a $S)
grep -E "^(\s+--- |--- )" $O/mxgemm.log | grep -v PASS | head -20 >> $S
(cd codegen && timeout 150 ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf' > $O/perf.log 2>&1; echo "codegen regfed perf rc=$?" | tee -a $S)
grep -E "µs|Error|FAIL|want" $O/perf.log | head -20 >> $S
r() { # model tokens args...
  local m=$1 T=$2; shift 2
  timeout 60 $mokc run --model $m --target sm_90a --tokens $T --repeat 3 --json "$@" >> $O/run.jsonl 2>>$O/run.log; echo "run $m T=$T $* rc=$?" | tee -a $S
}
r qwen3-30b-a3b 0,1,64,4096 --precision mxfp8 --mx-gemm regfed
r gpt-oss-120b 1,64,4096 --precision mxfp8 --mx-gemm regfed
r deepseek-v2-lite 1,64,4096 --precision mxfp8 --mx-gemm regfed
python3 -c "
import json
for l in open('$O/run.jsonl'):
    try: d=json.loads(l)
    except Exception: continue
    print({k: d.get(k) for k in ('layer','tokens','rel_l2','ok','identical','pass','status') if k in d})
" >> $S 2>&1
b() { # label T args...
  local label=$1 T=$2; shift 2
  [ $SECONDS -gt $END ] && { echo "bench $label T=$T $* skipped (budget)" | tee -a $S; return; }
  timeout 40 $mokc bench --target sm_90a --tokens $T --kernels --json --iters 50 "$@" > $O/tmp.json 2>>$O/bench.log
  local rc=$?
  python3 -c "import json; d=json.load(open('$O/tmp.json')); d['label']='$label'; print(json.dumps(d)); print('$label', '$*', $T, d['median_ms'])" >> $O/bench.jsonl 2>>$O/bench.log
  echo "bench $label T=$T $* rc=$rc" | tee -a $S
}
for m in qwen3-30b-a3b gpt-oss-120b mixtral-8x7b deepseek-v3; do
  b bf16 4096 --model $m; b promote 4096 --model $m --precision mxfp8; b regfed 4096 --model $m --precision mxfp8 --mx-gemm regfed
done
b regfed 64 --model qwen3-30b-a3b --precision mxfp8 --mx-gemm regfed
grep -hv "^{" $O/bench.jsonl >> $S
for k in p_fc1_regfed2s4; do
  (cd codegen && MOKC_MXPERF="^$k\$" timeout 200 ncu --set full --import-source no -k regex:$k -c 1 -o $O/$k ../.carry/codegen.test -test.v -test.count=1 -test.run 'TestSM90MXRegFedPerf' > $O/ncu-$k.log 2>&1; echo "ncu $k rc=$?" | tee -a $S)
  timeout 60 ncu -i $O/$k.ncu-rep --page source --csv --print-source sass > $O/$k-sass.csv 2> $O/$k-sass.err; echo "ncu source $k rc=$?" | tee -a $S
  timeout 60 ncu -i $O/$k.ncu-rep --page details > $O/$k-details.txt 2>&1
  rm -f $O/$k.ncu-rep
done
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
