#!/usr/bin/env bash
# run 56 call 1 (about 1.5 minutes; carry: `make device-bins` of the tree; written in run 55, not run): the final tree's bits
# against calls 3 and 8's digests (act_grad's per-op form without its dead trailing barrier, the
# FC2 biases' chunks through loadRow8, the persistent default wgmma-ws only for 384-thread GEMM
# blocks): both lowerings at qwen3-30b-a3b T = 300 and gpt-oss-20b T = 200 (its FC2 biases), the
# persistent deepseek-v2-lite at T = 200; racecheck of the persistent backward at qwen3-30b-a3b T = 300.
START=$(date +%s)
. scripts/device-env.sh
. scripts/device-lib.sh
RUN_TIMEOUT=60
run_json perop-bwd "$mokc" qwen3-30b-a3b bf16 300 --backward
run_json pers-bwd "$mokc" qwen3-30b-a3b bf16 300 --backward --lowering persistent
run_json perop-bwd "$mokc" gpt-oss-20b bf16 200 --backward
run_json pers-bwd "$mokc" gpt-oss-20b bf16 200 --backward --lowering persistent
run_json pers-bwd "$mokc" deepseek-v2-lite bf16 200 --backward --lowering persistent
SAN_BUDGET=140 san racecheck q3-bwd-300 50 --model qwen3-30b-a3b --tokens 300 --backward
echo "done $(($(date +%s) - START)) s" >>"$S"
pack_logs
cat "$S"
