package layouts

import (
	"fmt"

	"github.com/mokc/mokc/target"
)

// GateUp says how the B tile of a grouped GEMM holds the rows of B_e (the
// expert's [BRows, K] weight): a plain GEMM's BN output rows, or a gated
// FC1's gate and up rows, whose global order is either halves (rows 0..N-1
// gate, N..2N-1 up: Mixtral, DeepSeek, Qwen) or interleaved (row 2n gate,
// 2n+1 up: GPT-OSS).
type GateUp int

// The B-tile layouts.
const (
	GateUpNone        GateUp = iota // plain GEMM: BN rows n0..n0+BN-1
	GateUpHalves                    // gated, halves in global memory
	GateUpInterleaved               // gated, (gate, up) pairs in global memory
	// GateUpHalvesInPairs: gated, halves in global memory loaded as (gate,
	// up) pairs (codegen.GemmSpec.BHalvesInPairs: sm_90a's register-fed
	// tiles of 192 and 256 token rows).
	GateUpHalvesInPairs
)

// String returns "plain", "gate/up halves", "gate/up interleaved" or
// "gate/up halves in pairs".
func (g GateUp) String() string {
	switch g {
	case GateUpHalvesInPairs:
		return "gate/up halves in pairs"
	case GateUpHalves:
		return "gate/up halves"
	case GateUpInterleaved:
		return "gate/up interleaved"
	}
	return "plain"
}

// GateUpRows returns the row map of the B tile of a CTA whose first output
// column is n0, for bn output columns of an N-column GEMM on target t:
// smem row r of the tile holds row origin*n0 + L(r) of B_e. The
// accumulator column of B-tile row r is r, so the same map says which
// accumulator columns are gate and up of one output column.
//
//	plain:                  L = (bn):(1),        origin 1
//	interleaved (any):      L = (2*bn):(1),      origin 2 (pair (2c, 2c+1) = gate, up of n0+c)
//	halves, sm_90a/sm_100a: L = (bn,2):(1,N),    origin 1 (rows 0..bn-1 gate, bn..2bn-1 up: two TMA boxes)
//	halves, sm_80:          L = (2,bn):(N,1),    origin 1 (smem row 2c gate, 2c+1 up of n0+c: the
//	                                             cp.async loader interleaves, so each thread's
//	                                             mma.sync accumulator pair is (gate, up))
//	halves in pairs (any):  L = (2,bn):(N,1),    origin 1 (the same rows, by one 4-D TMA box)
func GateUpRows(t target.Target, g GateUp, bn, n int) (l Layout, origin int, err error) {
	if bn <= 0 || n <= 0 {
		return Layout{}, 0, fmt.Errorf("layouts: B tile of %d columns of %d", bn, n)
	}
	switch {
	case g == GateUpNone:
		l, err = MakeLayout(Int(bn), Int(1))
		return l, 1, err
	case g == GateUpInterleaved:
		l, err = MakeLayout(Int(2*bn), Int(1))
		return l, 2, err
	case t == target.SM80 || g == GateUpHalvesInPairs:
		l, err = MakeLayout(Ints(2, bn), Ints(n, 1))
		return l, 1, err
	}
	l, err = MakeLayout(Ints(bn, 2), Ints(1, n))
	return l, 1, err
}
