package ir

import (
	"maps"
	"slices"

	"github.com/llir/llvm/ir/types"
)

type intrinsicSig struct {
	ret    types.Type
	params []types.Type
}

func sig(ret types.Type, params ...types.Type) intrinsicSig {
	return intrinsicSig{ret: ret, params: params}
}

// intrinsicSigs lists every intrinsic of the subset with its signature, as
// declared for llc-19's NVPTX backend (llvm/include/llvm/IR/IntrinsicsNVVM.td
// and the generic LangRef intrinsics). None of them mangles a pointer type.
var intrinsicSigs = map[string]intrinsicSig{}

func init() {
	i1, i32, i64, f32, f64 := types.I1, types.I32, types.I64, types.Float, types.Double
	for _, r := range []string{"tid", "ntid", "ctaid", "nctaid"} {
		for _, d := range []string{"x", "y", "z"} {
			intrinsicSigs["llvm.nvvm.read.ptx.sreg."+r+"."+d] = sig(i32)
		}
	}
	for _, r := range []string{"laneid", "warpid", "smid", "nsmid"} {
		intrinsicSigs["llvm.nvvm.read.ptx.sreg."+r] = sig(i32)
	}
	intrinsicSigs["llvm.nvvm.read.ptx.sreg.clock64"] = sig(i64)
	intrinsicSigs["llvm.nvvm.read.ptx.sreg.globaltimer"] = sig(i64)

	intrinsicSigs["llvm.nvvm.barrier0"] = sig(types.Void)
	intrinsicSigs["llvm.nvvm.barrier.sync"] = sig(types.Void, i32)
	intrinsicSigs["llvm.nvvm.barrier.sync.cnt"] = sig(types.Void, i32, i32)
	intrinsicSigs["llvm.nvvm.bar.warp.sync"] = sig(types.Void, i32)
	for _, s := range []string{"cta", "gl", "sys"} {
		intrinsicSigs["llvm.nvvm.membar."+s] = sig(types.Void)
	}

	for _, k := range []string{"bfly", "down", "up", "idx"} {
		intrinsicSigs["llvm.nvvm.shfl.sync."+k+".i32"] = sig(i32, i32, i32, i32, i32)
		intrinsicSigs["llvm.nvvm.shfl.sync."+k+".f32"] = sig(f32, i32, f32, i32, i32)
	}
	intrinsicSigs["llvm.nvvm.vote.ballot.sync"] = sig(i32, i32, i1)

	intrinsicSigs["llvm.fma.f32"] = sig(f32, f32, f32, f32)
	intrinsicSigs["llvm.fma.f64"] = sig(f64, f64, f64, f64)
	intrinsicSigs["llvm.maxnum.f32"] = sig(f32, f32, f32)
	intrinsicSigs["llvm.minnum.f32"] = sig(f32, f32, f32)
	intrinsicSigs["llvm.fabs.f32"] = sig(f32, f32)
	intrinsicSigs["llvm.sqrt.f32"] = sig(f32, f32)
	intrinsicSigs["llvm.nvvm.ex2.approx.f"] = sig(f32, f32)
	intrinsicSigs["llvm.nvvm.ex2.approx.ftz.f"] = sig(f32, f32)
	intrinsicSigs["llvm.nvvm.rcp.rn.f"] = sig(f32, f32)
	intrinsicSigs["llvm.nvvm.fmax.f"] = sig(f32, f32, f32)
	intrinsicSigs["llvm.nvvm.fmin.f"] = sig(f32, f32, f32)
	for _, op := range []string{"smax", "smin", "umax", "umin"} {
		intrinsicSigs["llvm."+op+".i32"] = sig(i32, i32, i32)
		intrinsicSigs["llvm."+op+".i64"] = sig(i64, i64, i64)
	}
	intrinsicSigs["llvm.ctlz.i32"] = sig(i32, i32, i1)
	intrinsicSigs["llvm.ctpop.i32"] = sig(i32, i32)
}

// Intrinsics returns the names of the intrinsics of the subset, sorted.
func Intrinsics() []string { return slices.Sorted(maps.Keys(intrinsicSigs)) }

// IntrinsicSignature returns the return and parameter types of intrinsic
// name, and false when it is not in the subset.
func IntrinsicSignature(name string) (ret types.Type, params []types.Type, ok bool) {
	s, ok := intrinsicSigs[name]
	if !ok {
		return nil, nil, false
	}
	return s.ret, append([]types.Type(nil), s.params...), true
}
