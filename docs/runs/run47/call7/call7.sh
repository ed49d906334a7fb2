#!/usr/bin/env bash
# run 47 call 7 (one command, warm machine after call 6; kept here as it ran): the parts of call 6's
# tests its time bounds cut off (call 6 reached TestPersistentGPU's qwen3-30b-a3b mxfp8 case and
# TestPersistentBackwardGPU's weight-on-input layer, each still loading or checking, no failure).
. scripts/device-env.sh; . scripts/device-lib.sh; START=$(date +%s); C=$PWD/.carry; : >$S
pkgtest runtime fwd-mx 80 $C/runtime.test -test.v -test.count=1 -test.timeout 75s -test.run 'TestPersistentGPU/qwen3-30b-a3b_mxfp8'
grep -E "^--- |^    --- |panic" $O/fwd-mx.log | head -12 >>$S
pkgtest runtime bwd-woi 60 $C/runtime.test -test.v -test.count=1 -test.timeout 55s -test.run 'TestPersistentBackwardGPU/weight-on-input$'
grep -E "^\s*--- |panic" $O/bwd-woi.log | head -10 >>$S
echo "elapsed $(($(date +%s) - START)) s" >>$S
pack_logs
cat $S
