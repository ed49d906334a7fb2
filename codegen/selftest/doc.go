// Package selftest holds small hardware self-test kernels, each built
// through package ir and compiled by package ptx: a bf16 elementwise kernel,
// a block reduction with warp shuffles and shared memory, a kernel with
// more than 48 KB of dynamic shared memory, and one bf16 mma.sync m16n8k16
// tile (sm_80); the sm_90a wgmma tile lives in wgmma*.go. The GPU test
// (build tag cuda) runs every kernel on fresh random inputs with poisoned
// outputs against a Go reference, and runs llc-19's PTX of the same IR
// (testdata/llc/*.ptx, kept fresh by TestGenerateLLCPTX) to check that both
// backends give bit-identical results.
//
// A kernel file adds its Case to the list with register from an init
// function; Cases returns them sorted by name.
package selftest
