#!/usr/bin/env bash
# run 47 call 3 (one command, warm machine after call 2; kept here as it ran): the whole of
# TestPersistentBackwardGPU, gpt-oss-20b-E4 included, within 280 s. Carry: call 1's.
. scripts/device-env.sh; . scripts/device-lib.sh; START=$(date +%s)
pkgtest runtime persist-bwd-all 280 $PWD/.carry/runtime.test -test.v -test.count=1 -test.timeout 270s -test.run 'TestPersistentBackwardGPU'
grep -E "^\s*--- (FAIL|PASS)|panic|timed out|rel" "$O/persist-bwd-all.log" | head -60 >>"$S"
echo "elapsed $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
