// Package toolchain finds the external tools mokc's tests use: ptxas 12.x for
// sm_80/sm_90a, a ptxas from CUDA 12.8 or newer for sm_100a, and llc-19. The
// tools are installed by `make toolchain` (scripts/toolchain.sh) under
// .toolchain/ at the repository root, or named by environment variables.
package toolchain
