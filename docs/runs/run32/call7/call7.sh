#!/usr/bin/env bash
# run 32 call 7: ncu of the mxfp8 decode GEMMs at T = 64 (olmoe-1b-7b: fc1_decode and fc2_decode,
# which stream at 3.3-3.7 TB/s), the full section set of one launch each, for the next step.
set -u
python3 -c "import tarfile; tarfile.open('.carry/bins.txz').extractall('.carry')"
. scripts/device-env.sh
O=$OUT/logs; mkdir -p $O
S=$O/summary.txt
for k in moe_fc1_decode moe_fc2_decode; do
  timeout 150 ncu --set full --import-source no -k regex:"^$k\$" -s 3 -c 1 -o $O/$k $mokc bench --model olmoe-1b-7b --target sm_90a --precision mxfp8 --tokens 64 --iters 2 --warmup 2 > $O/ncu-$k.log 2>&1; echo "ncu $k rc=$?" | tee -a $S
  timeout 60 ncu -i $O/$k.ncu-rep --page details > $O/$k-details.txt 2>&1
  grep -E 'Duration|DRAM Throughput|Memory Throughput|L2 Cache Throughput|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Stall' $O/$k-details.txt | head -30 >> $S
  rm -f $O/$k.ncu-rep
done
cd $OUT && tar czf logs.tgz logs && cp logs/summary.txt .
