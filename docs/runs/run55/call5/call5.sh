#!/usr/bin/env bash
# run 55 call 5 (about 2 minutes; carry: `make device-bins` of 8dbf411): call 4's racecheck found 2
# hazards in moe_backward (qwen3-30b-a3b T = 300) between shared-memory writes at +0x20b70, +0x20c70
# and reads at +0x20d20..+0x20db0; call 3's, with act_grad on 192 threads and the row-wise weight
# gradients, found none. The kernel's SASS around those offsets (its PTX from mokc build through
# this machine's ptxas), then racecheck with --wgrad wgmma (the row-wise weight gradients, act_grad
# on 384 threads), and the default again at T = 300 and 64.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
"$mokc" build --model qwen3-30b-a3b --target sm_90a --backward --lowering persistent -o "$O/q3pb.ptx" 2>/dev/null
ptxas -arch=sm_90a -o "$O/q3pb.cubin" "$O/q3pb.ptx" && cuobjdump -sass "$O/q3pb.cubin" >"$O/q3pb.sass"
echo "ptxas+sass rc=$? $(ptxas --version | tail -1)" >>"$S"
grep -nE '/\*2(0[a-e][0-9a-f])0\*/' "$O/q3pb.sass" >"$O/sass-window.txt"
python3 - "$O/q3pb.sass" >"$O/sass-around.txt" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
for i, l in enumerate(lines):
    m = re.search(r'/\*([0-9a-f]{4,})\*/', l)
    if m and 0x20900 <= int(m.group(1), 16) <= 0x20e80:
        print(l.strip())
PY
rm -f "$O/q3pb.ptx" "$O/q3pb.cubin" "$O/q3pb.sass"
SAN_BUDGET=170
san racecheck q3-bwd-300-wgmma 50 --model qwen3-30b-a3b --tokens 300 --backward --wgrad wgmma
san racecheck q3-bwd-300 50 --model qwen3-30b-a3b --tokens 300 --backward
san racecheck q3-bwd-64 50 --model qwen3-30b-a3b --tokens 64 --backward
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"; head -c 6000 "$O/sass-around.txt"
