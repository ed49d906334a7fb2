package moe

import (
	"fmt"
	"strings"

	"github.com/mokc/mokc/layouts"
)

// RegisterFed returns p with its MXFP8 GEMMs over quantized rows in the
// register-fed form (sm_90a's register-fed MXFP8 GEMM,
// codegen.GemmSpec.MXRegisterFed; docs/mxfp8.md): every Gather or Quantize
// whose Q and S only MXFP8 GEMMs read as their A operand writes instead V,
// bf16 [rows, K] named after Q with "_rf" for "_q" (xs_rf, h_rf): the
// MXFP8 values Q and S would hold (each e4m3 element times 2^(scale-127);
// exact in bf16 for every scale of at least 2^-124,
// layouts.TestMXValuesInBF16), each 32-wide block of a row in
// layouts.RegisterFedOrder; those GEMMs read V with ARegisterFed and no
// AScales. The values and every sum are the same; Q and S are dropped from
// the buffers. Quantized rows that another op also reads keep their form.
// The converted Gather and Quantize ops are named with "_rf" added
// (gather_rf, quantize_h_rf); every op keeps its place, so op i of the
// result is op i of p in the register-fed form. p itself is not changed
// (its ops and buffer list are copied; the buffers are shared). Errors:
// the result fails Check (not expected of a checked p).
func RegisterFed(p *Program) (*Program, error) {
	// Which Q buffers only MXFP8 GEMMs read as A.
	gemmA, other := map[*Buffer]bool{}, map[*Buffer]bool{}
	for _, op := range p.Ops {
		g, isGEMM := op.(GEMM)
		for _, o := range op.Operands() {
			if !o.Reads() {
				continue
			}
			if isGEMM && o.Role == "a" && g.AScales != nil {
				gemmA[o.Buffer] = true
			} else if isGEMM && o.Role == "a_scales" && g.AScales != nil {
				continue // the scales of a GEMM's A, which go with it
			} else {
				other[o.Buffer] = true
			}
		}
	}
	convert := func(q, s *Buffer) bool { return q != nil && gemmA[q] && !other[q] && !other[s] }
	values := map[*Buffer]*Buffer{} // Q -> V
	dropped := map[*Buffer]bool{}   // the scales of a converted Q
	out := &Program{Layer: p.Layer}
	newV := func(q, s *Buffer) *Buffer {
		v := &Buffer{Name: strings.TrimSuffix(q.Name, "_q") + "_rf", Kind: Scratch, DType: BF16, Shape: q.Shape,
			Doc: "MXFP8 values of " + q.Name + " as bf16, each 32-wide block in the register-fed order (layouts.RegisterFedOrder)"}
		values[q], dropped[s] = v, true
		return v
	}
	for _, op := range p.Ops {
		switch o := op.(type) {
		case Gather:
			if convert(o.Q, o.S) {
				o.Op, o.V, o.Q, o.S = o.Name()+"_rf", newV(o.Q, o.S), nil, nil
			}
			op = o
		case Quantize:
			if convert(o.Q, o.S) {
				o.Op, o.V, o.Q, o.S = o.Op+"_rf", newV(o.Q, o.S), nil, nil
			}
			op = o
		case GEMM:
			if v := values[o.A]; v != nil && o.AScales != nil {
				o.A, o.AScales, o.ARegisterFed = v, nil, true
			}
			op = o
		}
		out.Ops = append(out.Ops, op)
	}
	// The V buffers take the place of their Q; Q's scales go.
	for _, b := range p.Buffers {
		if v := values[b]; v != nil {
			out.Buffers = append(out.Buffers, v)
		} else if !dropped[b] {
			out.Buffers = append(out.Buffers, b)
		}
	}
	if err := out.Check(); err != nil {
		return nil, fmt.Errorf("moe: %s: the register-fed form: %w", p.Layer.Name, err)
	}
	return out, nil
}

// registerFedValues writes the MXFP8 values vals (rows of whole 32-wide
// blocks) into dst in the register-fed order, rounded to bf16 as the
// kernels store them (exact for scales of at least 2^-124): position p of
// each block holds the block's element layouts.RegisterFedOrder(p).
func registerFedValues(dst, vals []float64) {
	for i := range vals {
		dst[i] = round(BF16, vals[i-i%32+layouts.RegisterFedOrder(i%32)])
	}
}

// naturalOrder undoes registerFedValues: the rows of v [rows, k] in their
// natural order.
func naturalOrder(v []float64) []float64 {
	out := make([]float64, len(v))
	for i := range v {
		out[i-i%32+layouts.RegisterFedOrder(i%32)] = v[i]
	}
	return out
}
