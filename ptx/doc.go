// Package ptx is mokc's backend: it lowers the LLVM IR subset built by package
// ir (github.com/llir/llvm modules) to PTX text for sm_80, sm_90a and sm_100a.
//
// Anything it does not support is an error naming the instruction and the
// function, never wrong PTX. LLVM's NVPTX backend (llc-19) compiles the same IR
// as a differential check in the tests.
package ptx
