#!/usr/bin/env bash
# run 47 call 5 (one command, warm machine after call 4; kept here as it ran): why call 4's per-op
# qwen3-30b-a3b mxfp8 forward at T = 1 had other bits than the persistent one. The old CLI of call 4
# (4ade866) and the new one give the same per-op bits at T = 1, 2, 64: the default per-op schedule
# runs the mxfp8 decode tiles there, which the persistent kernel leaves out (one block shape; the CLI
# notes it), so the two compute differently; run 46 compared them with both on one tile shape.
. scripts/device-env.sh; . scripts/device-lib.sh; START=$(date +%s); C=$PWD/.carry
[ -x $C/mokc-old ] || { gunzip -c $C/mokc-old.gz >$C/mokc-old; chmod +x $C/mokc-old; }
: >$S; RUN_TIMEOUT=40
run_json old-per-op $C/mokc-old qwen3-30b-a3b mxfp8 1,2,64
run_json new-per-op $mokc qwen3-30b-a3b mxfp8 1,2,64
run_json new-per-op-plain $mokc qwen3-30b-a3b mxfp8 1 --launch plain
$mokc run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 1 --repeat 2 >$O/mx1.log 2>&1
tail -30 $O/mx1.log >>$S
cat $S
