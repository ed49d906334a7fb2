#!/usr/bin/env bash
set -u
export LD_LIBRARY_PATH=/usr/local/nvidia/lib64 MOKC_REQUIRE_GPU=1 MOKC_CACHE_DIR=off PYTHONUNBUFFERED=1
M=$PWD/.carry/mokc; S=$OUT/summary.txt; : > $S
st(){ n=$1; l=$2; shift 2; t0=$SECONDS; echo "=== $n: $*" >> $OUT/$l; timeout 60 "$@" >> $OUT/$l 2>&1; printf '%-40s rc=%-3d %3ds\n' "$n" $? $((SECONDS-t0)) | tee -a $S; }
st "memcheck qwen3 sm_90a T=64" memcheck.log compute-sanitizer --tool memcheck --error-exitcode 9 $M run --model qwen3-30b-a3b --target sm_90a --tokens 64
st "memcheck gpt-oss-120b sm_90a T=64" memcheck.log compute-sanitizer --tool memcheck --error-exitcode 9 $M run --model gpt-oss-120b --target sm_90a --tokens 64
for m in qwen3-30b-a3b gpt-oss-120b deepseek-v3; do st "bench $m sm_90a" bench.log $M bench --model $m --target sm_90a --tokens 4096 --json; done
st "torch" torch.log python3 bench/torch_moe.py --models qwen3-30b-a3b,gpt-oss-120b,deepseek-v3 --tokens 4096 --json $OUT/torch.json
for T in 0 1 64 4096; do st "run qwen3 sm_90a T=$T" run.log $M run --model qwen3-30b-a3b --target sm_90a --tokens $T; done
(cd runtime && st "runtime tests" tests.log ../.carry/runtime.test -test.run 'TestLayer' -test.v)
for T in 1 4096; do st "run deepseek-v2-lite sm_90a T=$T" run.log $M run --model deepseek-v2-lite --target sm_90a --tokens $T; done
cat $S
