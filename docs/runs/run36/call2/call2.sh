#!/usr/bin/env bash
# run 36 call 2 (2fc83e7): ncu of moe_fc1 and moe_fc2, default and --cluster 2 (qwen3-30b-a3b bf16
# T = 4096), then the runtime's cluster, chain and item-queue GPU tests.
. scripts/device-env.sh
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
echo "ncu=$NCU" > $OUT/probe.log
M=sm__cycles_active.min,sm__cycles_active.max,sm__cycles_active.avg,sm__ctas_launched.sum,sm__ctas_launched.min,sm__ctas_launched.max,gpu__time_duration.sum,launch__grid_size,launch__cluster_dim_x,lts__t_bytes.sum,dram__bytes_read.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active
for k in moe_fc1 moe_fc2; do
for f in "" "--cluster 2"; do
  echo "=== $k $f" >> $OUT/probe.log
  timeout 120 $NCU --kernel-name $k --launch-skip 3 --launch-count 1 --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --metrics $M \
    $mokc bench --model qwen3-30b-a3b --target sm_90a --tokens 4096 --iters 3 --warmup 2 $f >> $OUT/probe.log 2>&1
  echo "rc=$?" >> $OUT/probe.log
done; done
cd runtime && timeout 380 ../.carry/runtime.test -test.v -test.count=1 -test.run 'TestClusterGPU|TestChainWaitTimeoutGPU|TestChainGPU|TestItemsQueueGPU' > $OUT/tests.log 2>&1; echo "tests rc=$?" >> $OUT/probe.log
