# Source this file (`. scripts/env.sh`) from bash to point the cgo build and the tests at
# the tools that `make toolchain` (scripts/toolchain.sh) installs under .toolchain/.
#
#   CGO_CFLAGS        -O2 -g -I$REPO/.toolchain/cuda/include   (cuda.h, CUDA 12.5)
#   CGO_LDFLAGS       -O2 -g -L$REPO/.toolchain/cuda/lib       (link-time libcuda.so stub, for -lcuda)
#   MOKC_PTXAS        ptxas 12.x, for sm_80 and sm_90a
#   MOKC_PTXAS_SM100  ptxas 12.9, for sm_100a
#   MOKC_LLC          llc from LLVM 19
#
# A MOKC_* variable is exported only when its tool exists (internal/toolchain rejects a
# variable that names a missing file); a missing tool is reported on stderr. The stub
# libcuda.so is for linking only: at run time on a GPU machine the driver's own
# libcuda.so.1 must be found instead, so .toolchain/cuda/lib never goes on
# LD_LIBRARY_PATH there.

_mokc_repo="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
_mokc_tc="$_mokc_repo/.toolchain"

export CGO_ENABLED=1
export CGO_CFLAGS="-O2 -g -I$_mokc_tc/cuda/include"
export CGO_LDFLAGS="-O2 -g -L$_mokc_tc/cuda/lib"

_mokc_missing=""
if [ -x "$_mokc_tc/cuda/bin/ptxas" ]; then
	export MOKC_PTXAS="$_mokc_tc/cuda/bin/ptxas"
else
	_mokc_missing="$_mokc_missing ptxas"
fi
if [ -x "$_mokc_tc/nvcc/bin/ptxas" ]; then
	export MOKC_PTXAS_SM100="$_mokc_tc/nvcc/bin/ptxas"
else
	_mokc_missing="$_mokc_missing ptxas(sm_100a)"
fi
if [ -x /usr/lib/llvm-19/bin/llc ]; then
	export MOKC_LLC=/usr/lib/llvm-19/bin/llc
elif command -v llc-19 >/dev/null 2>&1; then
	MOKC_LLC="$(command -v llc-19)"
	export MOKC_LLC
else
	_mokc_missing="$_mokc_missing llc-19"
fi
if [ ! -f "$_mokc_tc/cuda/include/cuda.h" ] || [ ! -f "$_mokc_tc/cuda/lib/libcuda.so" ]; then
	_mokc_missing="$_mokc_missing cuda.h/libcuda.so"
fi
if [ -n "$_mokc_missing" ]; then
	echo "scripts/env.sh: missing:$_mokc_missing (run \`make toolchain\`)" >&2
fi
unset _mokc_repo _mokc_tc _mokc_missing
