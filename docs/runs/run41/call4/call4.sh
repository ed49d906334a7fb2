#!/usr/bin/env bash
# run 41 call 4 (about 125 s, right after call 3 on the same machine; its command, run from the
# repository root): the runtime tests whose schedules now keep FC2Large only where valid
# (TestChainGPU, TestCaptureForward, TestLayerForward) on the GPU.
. scripts/device-env.sh; mkdir -p $OUT/logs; cd runtime && timeout 230 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestCaptureForward|TestChainGPU|TestLayerForward$' > $OUT/logs/rt.log 2>&1; echo rc=$? >> $OUT/logs/rt.log
