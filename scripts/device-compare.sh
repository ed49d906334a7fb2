#!/usr/bin/env bash
# Old and new mokc side by side in one device run: the proof a refactor gives of unchanged results
# and speed. Run from the repository root on the GPU machine; builds nothing. Logs go to $OUT.
#
# Usage: OLD=path/to/old/mokc [NEW=.carry/mokc] [MODELS="a b"] [ROUNDS=3] bash scripts/device-compare.sh
#   results  `mokc run --json` of both binaries on each model, sm_80 and sm_90a, T = 1, 64, 4096, same seed:
#            identical outputs give identical rel L2 and max |err| to the last digit
#   speed    `mokc bench --json` at T = 4096 on sm_90a, old and new alternated ROUNDS times per model
#            (alternation spreads clock and thermal drift over both), median of 100 CUDA-event timings each
# compare.txt gets one line per model: both rel L2, both median times (median over rounds), new/old.
set -u
. "$(dirname "$0")/device-env.sh"
OLD=${OLD:?set OLD to the old mokc binary}
NEW=${NEW:-$PWD/.carry/mokc}
MODELS=${MODELS:-qwen3-30b-a3b deepseek-v3 gpt-oss-120b}
ROUNDS=${ROUNDS:-3}
log=$OUT/compare.log
for m in $MODELS; do
	for which in old new; do
		bin=$OLD
		[[ $which == new ]] && bin=$NEW
		echo "=== $which run $m" >>"$log"
		timeout 300 "$bin" run --model "$m" --target sm_80,sm_90a --tokens 1,64,4096 --repeat 3 --json 2>>"$log" |
			sed "s/^/{\"bin\":\"$which\",\"kind\":\"run\",\"line\":/; s/\$/}/" >>"$OUT/compare.jsonl"
	done
	for r in $(seq "$ROUNDS"); do
		for which in old new; do
			bin=$OLD
			[[ $which == new ]] && bin=$NEW
			echo "=== $which bench $m round $r" >>"$log"
			timeout 120 "$bin" bench --model "$m" --target sm_90a --tokens 4096 --iters 100 --json 2>>"$log" |
				sed "s/^/{\"bin\":\"$which\",\"kind\":\"bench\",\"line\":/; s/\$/}/" >>"$OUT/compare.jsonl"
		done
	done
done
python3 - "$OUT/compare.jsonl" <<'PY' | tee "$OUT/compare.txt"
import json, statistics, sys
runs, bench = {}, {}
for ln in open(sys.argv[1]):
    try:
        r = json.loads(ln)
    except ValueError:
        continue
    x = r["line"]
    if r["kind"] == "run":
        runs[(r["bin"], x["model"], x["target"], x["tokens"])] = x
    else:
        bench.setdefault((r["bin"], x["model"]), []).append(x["median_ms"])
same = True
for (b, m, t, T), x in sorted(runs.items()):
    if b != "new":
        continue
    o = runs.get(("old", m, t, T))
    eq = o is not None and o["rel_l2"] == x["rel_l2"] and o["max_abs_err"] == x["max_abs_err"]
    same &= eq
    print(f"results {m:16s} {t:7s} T={T:<5d} rel L2 old {o['rel_l2'] if o else None!s:>22s} new {x['rel_l2']!s:>22s} pass {x['pass']} {'identical' if eq else 'DIFFERENT'}")
for m in sorted({m for (_, m) in bench}):
    o, n = bench.get(("old", m), []), bench.get(("new", m), [])
    if o and n:
        mo, mn = statistics.median(o), statistics.median(n)
        print(f"speed   {m:16s} sm_90a T=4096 old {mo:.3f} ms {o} new {mn:.3f} ms {n} new/old {mn/mo:.3f}")
print("results identical" if same else "RESULTS DIFFER")
PY
