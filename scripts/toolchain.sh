#!/usr/bin/env bash
# Installs the external tools mokc's tests and cgo build need into
# $REPO/.toolchain (ignored by git), plus llvm-19 system-wide.
#
#   .toolchain/cuda/include/cuda.h     CUDA 12.5 driver API header (the only header
#                                      gorgonia.org/cu v0.9.6's cgo includes; cuda.h
#                                      itself needs only <stdlib.h> and <stdint.h>)
#   .toolchain/cuda/lib/libcuda.so     link-time stub of the driver (SONAME libcuda.so.1),
#   .toolchain/cuda/lib/libcuda.so.1   and a symlink to it; never load it on a GPU machine
#   .toolchain/cuda/bin/ptxas          ptxas 12.5, for sm_80 and sm_90a
#   .toolchain/nvcc/bin/ptxas          ptxas 12.9, for sm_100a (needs CUDA >= 12.8)
#   /usr/lib/llvm-19/bin/llc, llc-19   LLVM 19 (Debian bookworm main)
#
# Choices (checked with apt-cache madison after adding the suites):
#   - bookworm non-free ships only CUDA 11.8 (nvidia-cuda-dev and nvidia-cuda-toolkit
#     11.8.89~11.8.0-5~deb12u1); trixie non-free has 12.4.1; experimental non-free has 12.5.0.
#     Both .debs are taken from experimental, so header, stub and ptxas come from one
#     release (12.5.0-2+b1), and only one extra apt source is added. apt never installs
#     from experimental by itself (its Release file says NotAutomatic: yes), and this
#     script installs nothing from it: it only runs `apt-get download` and extracts files,
#     so the .debs' dependencies do not matter.
#       nvidia-cuda-dev      12.5.39~12.5.0-2+b1  (917 MB): usr/include/cuda.h,
#                                                  usr/lib/x86_64-linux-gnu/stubs/libcuda.so
#       nvidia-cuda-toolkit  12.5.40~12.5.0-2+b1  (88 MB):  usr/bin/ptxas (static apart
#                                                  from libc, libm, libpthread)
#     gorgonia.org/cu v0.9.6 does not build against CUDA 13 headers, so 12.x it is.
#   - PyPI nvidia-cuda-nvcc-cu12 12.9.86 (41 MB wheel): nvidia/cuda_nvcc/bin/ptxas, the
#     newest CUDA 12 ptxas; it accepts .version 8.8 / .target sm_100a (12.5's does not).
#   - llvm-19 1:19.1.7-3~deb12u1 from bookworm main, installed with apt-get.
# If a pinned version has left the archive, the newest 12.x in the same place is used
# instead (with a warning), and the checks below still have to pass.
#
# Idempotent: when every file is present and runs, it exits in well under a second.
# Needs root (or sudo) only when something is missing. Any failing step stops the
# script with a message saying which step failed.
set -Eeuo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TC="$REPO/.toolchain"

DEB_SUITE=experimental
CUDA_DEV_PKG=nvidia-cuda-dev
CUDA_DEV_VER="12.5.39~12.5.0-2+b1"
CUDA_TK_PKG=nvidia-cuda-toolkit
CUDA_TK_VER="12.5.40~12.5.0-2+b1"
NVCC_WHEEL=nvidia-cuda-nvcc-cu12
NVCC_WHEEL_VER="12.9.86"
LLVM_PKG=llvm-19
APT_SOURCE=/etc/apt/sources.list.d/mokc-debian-experimental-non-free.sources

log() { printf 'toolchain: %s\n' "$*" >&2; }
die() {
	printf 'toolchain: FAILED: %s\n' "$*" >&2
	exit 1
}
# On any unexpected error, name the line so the failing step is obvious.
trap 'rc=$?; printf "toolchain: FAILED (exit %d) at %s:%d: %s\n" "$rc" "${BASH_SOURCE[0]}" "$LINENO" "$BASH_COMMAND" >&2' ERR

SUDO=()
need_root() {
	if [[ $(id -u) -eq 0 ]]; then
		return
	fi
	command -v sudo >/dev/null 2>&1 || die "$1 needs root (or sudo), and this is uid $(id -u) without sudo"
	SUDO=(sudo)
}

# --- checks (the fast path) ---------------------------------------------------------

SM100_PTX='.version 8.8
.target sm_100a
.address_size 64
.visible .entry mokc_probe() { ret; }
'
SM90_PTX='.version 8.0
.target sm_90a
.address_size 64
.visible .entry mokc_probe() { ret; }
'

ok_cuda_headers() {
	[[ -s $TC/cuda/include/cuda.h && -s $TC/cuda/lib/libcuda.so && -L $TC/cuda/lib/libcuda.so.1 ]] &&
		grep -qE '^#define CUDA_VERSION 12[0-9]{3}$' "$TC/cuda/include/cuda.h"
}
ok_ptxas() { # ok_ptxas PATH VERSION-REGEX
	[[ -x $1 ]] && "$1" --version 2>/dev/null | grep -E "release $2" >/dev/null
}
ok_ptxas12() { ok_ptxas "$TC/cuda/bin/ptxas" '12\.'; }
ok_ptxas_sm100() { ok_ptxas "$TC/nvcc/bin/ptxas" '12\.(8|9|[1-9][0-9])'; }
find_llc() {
	if [[ -x /usr/lib/llvm-19/bin/llc ]]; then
		echo /usr/lib/llvm-19/bin/llc
	elif command -v llc-19 >/dev/null 2>&1; then
		command -v llc-19
	else
		return 1
	fi
}
ok_llc() { find_llc >/dev/null; }

# assemble PTXAS TARGET PTX-TEXT: the given ptxas must accept the PTX.
assemble() {
	local d rc=0
	d=$(mktemp -d)
	printf '%s' "$3" >"$d/probe.ptx"
	"$1" -arch="$2" -o "$d/probe.cubin" "$d/probe.ptx" >"$d/log" 2>&1 || rc=$?
	if [[ $rc -ne 0 ]]; then
		cat "$d/log" >&2
	fi
	rm -rf "$d"
	return "$rc"
}

if ok_cuda_headers && ok_ptxas12 && ok_ptxas_sm100 && ok_llc; then
	log "all tools present in $TC (cuda.h, libcuda stub, ptxas $("$TC/cuda/bin/ptxas" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), sm_100a ptxas $("$TC/nvcc/bin/ptxas" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), $(find_llc))"
	exit 0
fi

# --- slow path ----------------------------------------------------------------------

mkdir -p "$TC"
exec 9>"$TC/.lock"
flock 9 # one install at a time; a second `make toolchain` waits, then finds the files

WORK=$(mktemp -d "${TMPDIR:-/tmp}/mokc-toolchain.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
START=$SECONDS

APT_UPDATED=0
apt_update() {
	if [[ $APT_UPDATED -eq 0 ]]; then
		log "apt-get update"
		"${SUDO[@]}" apt-get update -q >"$WORK/apt-update.log" 2>&1 ||
			{ cat "$WORK/apt-update.log" >&2; die "apt-get update"; }
		APT_UPDATED=1
	fi
}

# Adds Debian experimental non-free as an apt source (only that suite and component).
add_experimental_source() {
	if [[ ! -f $APT_SOURCE ]]; then
		need_root "adding the apt source $APT_SOURCE"
		log "adding apt source $APT_SOURCE (Debian $DEB_SUITE non-free; apt never installs from it unasked)"
		"${SUDO[@]}" tee "$APT_SOURCE" >/dev/null <<-EOF
			# Added by mokc scripts/toolchain.sh: only for \`apt-get download\` of the CUDA 12.5
			# .debs, whose files are extracted into the repository's .toolchain/.
			Types: deb
			URIs: http://deb.debian.org/debian
			Suites: $DEB_SUITE
			Components: non-free
			Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
		EOF
		APT_UPDATED=0
	fi
	# apt-get update only when apt does not know the suite's packages yet.
	if ! apt-cache madison "$CUDA_TK_PKG" 2>/dev/null | grep "$DEB_SUITE/non-free" >/dev/null; then
		need_root "apt-get update"
		apt_update
	fi
	apt-cache madison "$CUDA_TK_PKG" | grep "$DEB_SUITE/non-free" >/dev/null ||
		die "$CUDA_TK_PKG is not in Debian $DEB_SUITE non-free after apt-get update (see $APT_SOURCE)"
}

# pick_version PKG PINNED: PINNED when the suite has it, else the newest 12.x there.
pick_version() {
	local avail
	avail=$(apt-cache madison "$1" | awk -F'|' -v s="$DEB_SUITE/non-free" 'index($3, s) { gsub(/ /, "", $2); print $2 }')
	if grep -qxF "$2" <<<"$avail"; then
		echo "$2"
		return
	fi
	local alt
	alt=$(grep -E '^12\.' <<<"$avail" | sort -V | tail -1 || true)
	[[ -n $alt ]] || die "no CUDA 12.x $1 in Debian $DEB_SUITE non-free (have: ${avail//$'\n'/ })"
	log "warning: $1=$2 is gone from $DEB_SUITE; using $alt"
	echo "$alt"
}

# extract DEB DEST MEMBER...: extracts only MEMBERs (paths as in the .deb) under DEST.
extract() {
	local deb=$1 dest=$2
	shift 2
	mkdir -p "$dest"
	dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$dest" "$@" ||
		die "extracting $* from $(basename "$deb")"
}

install_debs() {
	local want_dev=$1 want_tk=$2 pkgs=() dev_ver tk_ver
	add_experimental_source
	if [[ $want_dev == 1 ]]; then
		dev_ver=$(pick_version "$CUDA_DEV_PKG" "$CUDA_DEV_VER")
		pkgs+=("$CUDA_DEV_PKG=$dev_ver")
	fi
	if [[ $want_tk == 1 ]]; then
		tk_ver=$(pick_version "$CUDA_TK_PKG" "$CUDA_TK_VER")
		pkgs+=("$CUDA_TK_PKG=$tk_ver")
	fi
	log "apt-get download ${pkgs[*]} (about $([[ $want_dev == 1 ]] && echo 1 || echo 0.1) GB)"
	mkdir -p "$WORK/debs"
	(cd "$WORK/debs" && apt-get download -q -o APT::Sandbox::User=root "${pkgs[@]}" >"$WORK/apt-download.log" 2>&1) ||
		{ cat "$WORK/apt-download.log" >&2; die "apt-get download ${pkgs[*]}"; }

	# Extract both in parallel: the 917 MB cuda-dev .deb takes ~20 s to decompress.
	local pid_dev="" pid_tk=""
	if [[ $want_dev == 1 ]]; then
		extract "$WORK"/debs/"$CUDA_DEV_PKG"_*.deb "$WORK/dev" \
			./usr/include/cuda.h ./usr/lib/x86_64-linux-gnu/stubs/libcuda.so &
		pid_dev=$!
	fi
	if [[ $want_tk == 1 ]]; then
		extract "$WORK"/debs/"$CUDA_TK_PKG"_*.deb "$WORK/tk" ./usr/bin/ptxas &
		pid_tk=$!
	fi
	if [[ -n $pid_dev ]]; then
		wait "$pid_dev" || die "extracting cuda.h and libcuda.so from $CUDA_DEV_PKG"
		grep -qE '^#define CUDA_VERSION 12[0-9]{3}$' "$WORK/dev/usr/include/cuda.h" ||
			die "extracted cuda.h is not CUDA 12.x: $(grep -m1 'define CUDA_VERSION' "$WORK/dev/usr/include/cuda.h")"
		mkdir -p "$TC/cuda/include" "$TC/cuda/lib"
		install -m 0644 "$WORK/dev/usr/include/cuda.h" "$TC/cuda/include/cuda.h"
		install -m 0644 "$WORK/dev/usr/lib/x86_64-linux-gnu/stubs/libcuda.so" "$TC/cuda/lib/libcuda.so"
		ln -sfn libcuda.so "$TC/cuda/lib/libcuda.so.1"
		ok_cuda_headers || die "cuda.h / libcuda.so not in place after install"
		echo "$CUDA_DEV_PKG=$dev_ver (Debian $DEB_SUITE non-free)" >"$TC/cuda/VERSION.dev"
		log "installed cuda.h (CUDA $(sed -n 's/^#define CUDA_VERSION //p' "$TC/cuda/include/cuda.h")) and the libcuda.so stub from $CUDA_DEV_PKG=$dev_ver"
	fi
	if [[ -n $pid_tk ]]; then
		wait "$pid_tk" || die "extracting ptxas from $CUDA_TK_PKG"
		# ptxas links only libc, libm and libpthread; a missing library shows up here.
		if ldd "$WORK/tk/usr/bin/ptxas" | grep 'not found' >/dev/null; then
			ldd "$WORK/tk/usr/bin/ptxas" >&2
			die "ptxas from $CUDA_TK_PKG needs shared libraries that are not on this machine"
		fi
		mkdir -p "$TC/cuda/bin"
		install -m 0755 "$WORK/tk/usr/bin/ptxas" "$TC/cuda/bin/ptxas.new"
		mv -f "$TC/cuda/bin/ptxas.new" "$TC/cuda/bin/ptxas"
		ok_ptxas12 || { "$TC/cuda/bin/ptxas" --version >&2 || true; die "$TC/cuda/bin/ptxas --version is not a 12.x ptxas"; }
		assemble "$TC/cuda/bin/ptxas" sm_90a "$SM90_PTX" || die "ptxas 12.x refuses a minimal sm_90a kernel"
		echo "$CUDA_TK_PKG=$tk_ver (Debian $DEB_SUITE non-free)" >"$TC/cuda/VERSION.toolkit"
		log "installed ptxas ($("$TC/cuda/bin/ptxas" --version | grep -o 'release [0-9.]*')) from $CUDA_TK_PKG=$tk_ver"
	fi
}

install_nvcc_wheel() {
	local pip
	if command -v pip3 >/dev/null 2>&1; then
		pip=(pip3)
	elif command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1; then
		pip=(python3 -m pip)
	else
		die "pip is needed to fetch $NVCC_WHEEL from PyPI (apt-get install python3-pip)"
	fi
	command -v unzip >/dev/null 2>&1 || {
		need_root "installing unzip"
		apt_update
		"${SUDO[@]}" apt-get install -y -q unzip >/dev/null || die "apt-get install unzip"
	}
	log "pip download $NVCC_WHEEL==$NVCC_WHEEL_VER (about 41 MB)"
	"${pip[@]}" download -q --no-deps --only-binary=:all: -d "$WORK/whl" "$NVCC_WHEEL==$NVCC_WHEEL_VER" >"$WORK/pip.log" 2>&1 ||
		{ cat "$WORK/pip.log" >&2; die "pip download $NVCC_WHEEL==$NVCC_WHEEL_VER"; }
	unzip -q -o -j -d "$WORK/nvcc" "$WORK"/whl/*.whl nvidia/cuda_nvcc/bin/ptxas ||
		die "unzip nvidia/cuda_nvcc/bin/ptxas from the $NVCC_WHEEL wheel"
	mkdir -p "$TC/nvcc/bin"
	install -m 0755 "$WORK/nvcc/ptxas" "$TC/nvcc/bin/ptxas.new"
	mv -f "$TC/nvcc/bin/ptxas.new" "$TC/nvcc/bin/ptxas"
	ok_ptxas_sm100 || { "$TC/nvcc/bin/ptxas" --version >&2 || true; die "$TC/nvcc/bin/ptxas is not ptxas 12.8 or newer"; }
	assemble "$TC/nvcc/bin/ptxas" sm_100a "$SM100_PTX" || die "$TC/nvcc/bin/ptxas refuses .version 8.8 / .target sm_100a"
	echo "$NVCC_WHEEL==$NVCC_WHEEL_VER (PyPI)" >"$TC/nvcc/VERSION"
	log "installed ptxas ($("$TC/nvcc/bin/ptxas" --version | grep -o 'release [0-9.]*')) from $NVCC_WHEEL==$NVCC_WHEEL_VER; it accepts sm_100a"
}

install_llvm() {
	need_root "apt-get install $LLVM_PKG"
	if ! apt-cache show "$LLVM_PKG" >/dev/null 2>&1; then
		apt_update
	fi
	log "apt-get install $LLVM_PKG"
	DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -q --no-install-recommends "$LLVM_PKG" >"$WORK/apt-llvm.log" 2>&1 ||
		{ tail -30 "$WORK/apt-llvm.log" >&2; die "apt-get install $LLVM_PKG"; }
	ok_llc || die "$LLVM_PKG is installed but neither /usr/lib/llvm-19/bin/llc nor llc-19 is there"
	"$(find_llc)" --version | grep nvptx64 >/dev/null || die "$(find_llc) has no nvptx64 target"
	log "installed $(find_llc) ($(dpkg-query -W -f '${Package} ${Version}' "$LLVM_PKG"))"
}

need_dev=0 need_tk=0
ok_cuda_headers || need_dev=1
ok_ptxas12 || need_tk=1
if [[ $need_dev == 1 || $need_tk == 1 ]]; then
	need_root "fetching CUDA .debs with apt"
	install_debs "$need_dev" "$need_tk"
fi
ok_ptxas_sm100 || install_nvcc_wheel
ok_llc || install_llvm

ok_cuda_headers && ok_ptxas12 && ok_ptxas_sm100 && ok_llc || die "some tool is still missing after install"
log "done in $((SECONDS - START)) s; tools under $TC, llc at $(find_llc)"
