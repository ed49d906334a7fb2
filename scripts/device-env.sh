# The common start of the device scripts (scripts/device-*.sh), sourced from the repository root on
# the GPU machine: $OUT (default ./device-out) exists, the driver's libcuda.so.1 is found through
# LD_LIBRARY_PATH where ldconfig does not know it, the compiled-module cache is off (every run
# compiles), and $mokc is the CLI that `make device-bins` packed into .carry/bins.tgz (unpacked here
# once). The one-off scripts of docs/runs source scripts/device-lib.sh next (run_json, bench, left).
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}:/usr/local/nvidia/lib64
export MOKC_CACHE_DIR=off
[ -f .carry/bins.tgz ] && [ ! -x .carry/mokc ] && tar -C .carry -xzf .carry/bins.tgz
mokc=$PWD/.carry/mokc
