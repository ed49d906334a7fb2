#!/usr/bin/env bash
# Prints the SASS that ptxas makes of one kernel of a PTX file, without a GPU: what the warp-stall
# samples of ncu's source page (scripts/device-profile.sh, per SASS instruction) point at, and
# where ptxas put each instruction of our inline PTX.
#
#   bash scripts/sass.sh FILE.ptx KERNEL [ARCH]      (ARCH: sm_90a, the default, or sm_100a)
#
# e.g. go run ./cmd/mokc build --model qwen3-30b-a3b --precision mxfp8 --target sm_90a -o moe.ptx &&
#      bash scripts/sass.sh moe.ptx moe_fc1_decode | grep -E 'QGMMA|DEPBAR|LDS|FMUL'
#
# Assembles with ptxas 12.9 ($MOKC_PTXAS_SM100, from `make toolchain`) and disassembles with
# cuobjdump and the nvdisasm it runs from PyPI's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm
# (CUDA 13; there are no CUDA 12 wheels of them), which it fetches into .toolchain/cuobjdump on
# first use (about 5.5 MB). Not needed by the tests.
#
# With MOKC_SASS_JIT=1 it assembles with ptxas 13.0 instead (PyPI nvidia-cuda-nvcc 13.0.88,
# fetched into .toolchain/cuobjdump/ptxas-13.0 on first use, a 37 MB wheel): the offsets of its
# SASS then matched those compute-sanitizer reported for the kernels the device machines' driver
# compiled from our PTX (racecheck's moe_backward+0x21a80, docs/runs/run56/call1), so a hazard's
# offsets can be read here, without device time.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '6p' "$0" >&2; exit 2; }
ptx=$1 kernel=$2 arch=${3:-sm_90a}
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=scripts/env.sh
. "$repo/scripts/env.sh"
[ -n "${MOKC_PTXAS_SM100:-}" ] || { echo "sass.sh: no ptxas 12.9 (run make toolchain)" >&2; exit 1; }
dir="$repo/.toolchain/cuobjdump"
version=13.5.37
# fetch WHEEL==VERSION MEMBER DEST: the one file MEMBER of a PyPI wheel, executable, at DEST
fetch() {
	local work
	work=$(mktemp -d)
	python3 -m pip download -q --no-deps --only-binary=:all: -d "$work" "$1" >&2
	python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); open(sys.argv[2], "wb").write(z.read(sys.argv[3]))' \
		"$work"/*.whl "$3" "$2"
	chmod +x "$3"
	rm -rf "$work"
}
if [ ! -x "$dir/cuobjdump" ] || [ ! -x "$dir/nvdisasm" ]; then
	mkdir -p "$dir"
	for t in cuobjdump nvdisasm; do
		fetch "nvidia-cuda-$t==$version" "nvidia/cu13/bin/$t" "$dir/$t"
	done
	echo "nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm $version (PyPI)" >"$dir/VERSION"
fi
ptxas=$MOKC_PTXAS_SM100
if [ "${MOKC_SASS_JIT:-}" = 1 ]; then
	ptxas=$dir/ptxas-13.0
	[ -x "$ptxas" ] || fetch "nvidia-cuda-nvcc==13.0.88" "nvidia/cu13/bin/ptxas" "$ptxas"
fi
cubin=$(mktemp --suffix=.cubin)
trap 'rm -f "$cubin"' EXIT
"$ptxas" -arch="$arch" -o "$cubin" "$ptx"
out=$(NVDISASM_PATH="$dir" PATH="$dir:$PATH" "$dir/cuobjdump" -sass -fun "$kernel" "$cubin")
grep -q "Function : $kernel\$" <<<"$out" || { echo "sass.sh: no kernel $kernel in $ptx" >&2; exit 1; }
printf '%s\n' "$out"
