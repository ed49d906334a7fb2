# Helpers of the one-off device scripts (docs/runs/runNN/callK/callK.sh), sourced after
# scripts/device-env.sh on the GPU machine. They expect $OUT/logs to exist and append to
# $OUT/logs/summary.txt ($S), one line per result:
#
#   START=$(date +%s)       # set once at the top of the script, for left
#   left N                  # true while fewer than N seconds have passed since START
#   run_json LABEL BIN MODEL PRECISION TOKENS [FLAGS...]
#                           # `BIN run --json --repeat 2` on sm_90a: per T, rel L2, the first 16 hex
#                           # digits of y_sha256 (equal between two binaries computing the same bits),
#                           # identical runs, PASS/FAIL, the error word; stopped with SIGQUIT after
#                           # RUN_TIMEOUT seconds (150 by default: the Go runtime's stack dump of every
#                           # goroutine goes to run-err.log); a run that exits with an error adds a line
#                           # "LABEL MODEL PRECISION exit rc=N (asked for T = TOKENS)"
#   pkgtest DIR NAME TIMEOUT CMD...
#                           # a test binary run in package directory DIR (Go tests read testdata/
#                           # relative to it), its output to $O/NAME.log, a line with its exit status
#                           # and counts of PASS and FAIL
#   bench LABEL BIN T [FLAGS...]
#                           # `BIN bench --json` on sm_90a: the JSON (with "label") to bench.jsonl and a
#                           # line with the median, min, p90, and with --phases each kernel as
#                           # name@start+duration (µs) and the span; skipped once left 540 fails
#                           # (BENCH_BUDGET overrides 540)
#   san TOOL LABEL SECONDS [MOKC RUN FLAGS...]
#                           # one compute-sanitizer TOOL (memcheck, racecheck, synccheck) run of the
#                           # persistent forward (`mokc run --lowering persistent --wait-limit 0`,
#                           # more flags after it), bounded by SECONDS, its log to $O/TOOL-LABEL.log and
#                           # its summary line to $S; skipped once left (SAN_BUDGET - SECONDS) fails
#                           # (SAN_BUDGET: 560 by default; SAN_FLAGS: more compute-sanitizer flags,
#                           # e.g. "--racecheck-report hazard --print-limit 100" for each hazard's
#                           # threads, block and address); `mokc=BIN san ...` checks another CLI
#   carried NAME            # prints the path of the CLI carried as .carry/mokc-NAME.gz (`make
#                           # device-old-cli REV=...`, renamed), unpacked to .carry/mokc-NAME
#   old_cli                 # carried old: sets $old to the CLI of .carry/mokc-old.gz
#   bench_kernels           # per bench.jsonl entry timed with --kernels: its label, median and each
#                           # kernel's median (µs), to $S
#   pack_logs               # every file of $O but summary.txt, bench.jsonl and earlier packs into
#                           # $O/logsN.tgz (N = the packs before it: logs0.tgz, logs1.tgz, ...); the
#                           # device tool returns at most 8 files from $OUT, so call it at the end
#
# The summary lines of bench go to bench.jsonl first (lines not starting with "{"); end the script
# with `grep -hv "^{" $O/bench.jsonl >> $S`.
O=$OUT/logs
S=$O/summary.txt
mkdir -p "$O"

left() { [ $(($(date +%s) - START)) -lt "$1" ]; }

pkgtest() {
	local dir=$1 name=$2 t=$3
	shift 3
	(cd "$dir" && timeout "$t" "$@") >"$O/$name.log" 2>&1
	echo "$name rc=$? $(grep -cE '^\s*--- PASS' "$O/$name.log") pass $(grep -cE '^\s*--- FAIL' "$O/$name.log") fail" >>"$S"
}

run_json() {
	local label=$1 bin=$2 model=$3 prec=$4 tokens=$5
	shift 5
	echo "== $label $model $prec $tokens $*" >>"$O/run-err.log"
	timeout -s QUIT -k 10 "${RUN_TIMEOUT:-150}" "$bin" run --model "$model" --target sm_90a --precision "$prec" --tokens "$tokens" --repeat 2 --json "$@" 2>>"$O/run-err.log" |
		LABEL=$label PREC=$prec python3 -c '
import json, os, sys
for line in sys.stdin:
    line = line.strip()
    if not line.startswith("{"):
        continue
    d = json.loads(line)
    if "tokens" not in d:
        continue
    if "checks" in d:  # a backward: its largest relative L2 over the checked gradients
        d["rel_l2"] = max(c["rel_l2"] for c in d["checks"])
    print(os.environ["LABEL"], d["model"], os.environ["PREC"], d["tokens"], repr(d["rel_l2"]), d.get("y_sha256", d.get("grads_sha256", ""))[:16],
          "%d/%d" % (d["identical_runs"], d["runs"]), "PASS" if d["pass"] else "FAIL", d.get("error_word", ""))
' >>"$S"
	local rc=${PIPESTATUS[0]}
	[ "$rc" = 0 ] || echo "$label $model $prec exit rc=$rc (asked for T = $tokens)" >>"$S"
}

bench() {
	local label=$1 bin=$2 T=$3
	shift 3
	left "${BENCH_BUDGET:-540}" || {
		echo "skipped bench $label T=$T $*" >>"$S"
		return
	}
	timeout 90 "$bin" bench --target sm_90a --tokens "$T" --json "$@" >"$O/tmp.json" 2>>"$O/bench.log" || return
	LABEL=$label ARGS="$*" T=$T python3 -c '
import json, os
d = json.load(open(os.environ["O"] + "/tmp.json"))
d["label"] = os.environ["LABEL"]
print(json.dumps(d))
ph = " ".join("%s@%.1f+%.1f" % (p["name"][4:], 1000 * p["start_ms"], 1000 * p["ms"]) for p in d.get("phases", []))
print(os.environ["LABEL"], os.environ["ARGS"], os.environ["T"], "median", round(d["median_ms"], 4), "min", round(d["min_ms"], 4),
      "p90", round(d["p90_ms"], 4), "span", round(d.get("phase_span_ms", 0), 4), ph)
' >>"$O/bench.jsonl" 2>>"$O/bench.log"
}
export O

san() {
	local tool=$1 label=$2 t=$3
	shift 3
	left $((${SAN_BUDGET:-560} - t)) || {
		echo "skipped $tool $label" >>"$S"
		return
	}
	# shellcheck disable=SC2086 # SAN_FLAGS holds several flags
	timeout -k 10 "$t" compute-sanitizer --tool "$tool" --error-exitcode 9 ${SAN_FLAGS:-} "$mokc" run --target sm_90a --repeat 1 \
		--lowering persistent --wait-limit 0 "$@" >"$O/$tool-$label.log" 2>&1
	echo "$tool $label rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$O/$tool-$label.log" | tail -1)" >>"$S"
}

carried() {
	gunzip -c "$PWD/.carry/mokc-$1.gz" >"$PWD/.carry/mokc-$1" && chmod +x "$PWD/.carry/mokc-$1" && echo "$PWD/.carry/mokc-$1"
}

old_cli() {
	old=$(carried old)
}

bench_kernels() {
	python3 - "$O/bench.jsonl" >>"$S" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        d = json.loads(line)
        print("kernels", d["label"], round(d["median_ms"], 4), " ".join("%s=%.1f" % (k["name"][4:], 1000 * k["median_ms"]) for k in d.get("kernel_times", [])))
PY
}

pack_logs() {
	local files n
	mapfile -t files < <(cd "$O" && ls | grep -vxE 'summary.txt|bench.jsonl|logs[0-9]*\.tgz')
	[ ${#files[@]} -gt 0 ] || return 0
	n=$(cd "$O" && ls | grep -cxE 'logs[0-9]*\.tgz')
	(cd "$O" && tar -czf "logs$n.tgz" -- "${files[@]}" && rm -f -- "${files[@]}")
}
