#!/usr/bin/env bash
# run 54 call 2 (about 450 s; same carry as call 1): the two forward GPU tests that run 53's time
# bounds stopped in their float64 references, with room for them: TestPersistentGPU (the kernels per
# block shape, deepseek-v3 and dsv4-pro-proxy of 16 experts, the out-of-range ids through the
# persistent kernel) and TestStoreGatherGPU (the default's store-gathering form at 4095/4096/5000).
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
pkgtest runtime persist-fwd 300 $C/runtime.test -test.v -test.count=1 -test.timeout 295s -test.run 'TestPersistentGPU$'
grep -E "^\s*--- |panic|timed out" "$O/persist-fwd.log" | head -20 >>"$S"
T=$((440 - ($(date +%s) - START)))
[ "$T" -gt 40 ] && pkgtest runtime store-gather $T $C/runtime.test -test.v -test.count=1 -test.timeout $((T - 5))s -test.run 'TestStoreGatherGPU$'
[ -f "$O/store-gather.log" ] && grep -E "^\s*--- |panic|timed out" "$O/store-gather.log" | head -20 >>"$S"
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
