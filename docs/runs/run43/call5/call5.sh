#!/usr/bin/env bash
# run 43 call 5 (LIMIT seconds, 480 by default). Carry: .carry/bins.tgz of `make device-bins` with
# FC2Large's band (the default's moe_fc2_large also in 120..200 mean rows per expert) and
# .carry/mokc-old.gz of `make device-old-cli REV=cb97623` (no band). docs/perf.md, "FC2Large in
# 120..200 rows per expert by default" (prediction written before this call):
#  1. The old CLI's y_sha256 against the new default's in the band, at its edges and just past them;
#     memcheck in the band.
#  2. Speed, old against new, alternated twice, where call 4 did not time the band: mixtral-8x7b
#     (8 experts), the shared-expert layers qwen2-57b-a14b and deepseek-v2-lite, and the band's
#     edges on qwen3-30b-a3b.
#  3. TestCaptureForward and TestLayerForward with the time left (the whole-tile epilogue's build).
START=$(date +%s)
LIMIT=${LIMIT:-480}
. scripts/device-env.sh
. scripts/device-lib.sh
C=$PWD/.carry
gunzip -c $C/mokc-old.gz >$C/mokc-old && chmod +x $C/mokc-old
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit --format=csv,noheader >>"$S"
for b in old new; do
	bin=$mokc
	[ $b = old ] && bin=$C/mokc-old
	run_json $b "$bin" qwen3-30b-a3b mxfp8 1919,1920,2560,3200,3201
	run_json $b "$bin" mixtral-8x7b mxfp8 480,640,800
	run_json $b "$bin" olmoe-1b-7b mxfp8 1000
	run_json $b "$bin" qwen2-57b-a14b mxfp8 1024
	run_json $b "$bin" deepseek-v2-lite mxfp8 1400
done
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 9 "$mokc" run --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --tokens 1930 --repeat 1 >"$O/memcheck.log" 2>&1
echo "memcheck qwen3-30b-a3b mxfp8 T=1930 rc=$? $(grep -E 'ERROR SUMMARY' "$O/memcheck.log")" >>"$S"
BENCH_BUDGET=$((LIMIT - 150))
points="mixtral-8x7b:512 mixtral-8x7b:640 mixtral-8x7b:768 qwen2-57b-a14b:1024 qwen2-57b-a14b:1280 deepseek-v2-lite:1400 deepseek-v2-lite:1707 qwen3-30b-a3b:1920 qwen3-30b-a3b:3200"
for i in 1 2; do
	for p in $points; do
		m=${p%:*} t=${p#*:}
		if [ $i = 1 ]; then
			bench old "$C/mokc-old" $t --model $m --precision mxfp8 --iters 20 --kernels
			bench new "$mokc" $t --model $m --precision mxfp8 --iters 20 --kernels
		else
			bench new "$mokc" $t --model $m --precision mxfp8 --iters 20 --kernels
			bench old "$C/mokc-old" $t --model $m --precision mxfp8 --iters 20 --kernels
		fi
	done
done
bench_kernels
grep -hv "^{" "$O/bench.jsonl" >>"$S"
if left $((LIMIT - 120)); then
	pkgtest runtime rt $((LIMIT - 10 - $(date +%s) + START)) $C/runtime.test -test.v -test.count=1 -test.run 'TestCaptureForward|TestLayerForward$'
else
	echo "skipped rt: $(($(date +%s) - START)) s of $LIMIT gone" >>"$S"
fi
pack_logs
cat "$S"
