package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
)

// EpilogueArgs are the per-block values an engine hands to NewEpilogue.
type EpilogueArgs struct {
	// C is a global byte pointer (GPtr) to C[0, 0]: bf16 [rows, N] row-major.
	C value.Value
	// Bias is a global byte pointer to the fp32 bias row [BRows] of the
	// block's expert (B row order), or nil when the spec has no bias.
	Bias value.Value
	// RowEnd (i32) is the exclusive bound of the rows this block may store
	// (the end of its expert's segment, or M for ADense).
	RowEnd value.Value
}

// Epilogue turns fp32 accumulator values into stored bf16 outputs. It is
// the one implementation of bias, activation, rounding and predicated
// stores that every engine uses, so targets agree bit for bit given equal
// accumulators (engines that stage or transpose the tile take Values and
// round with cvt.rn.bf16x2.f32 as the stores do).
type Epilogue struct {
	spec GemmSpec
	args EpilogueArgs
}

// NewEpilogue returns the epilogue of spec for one block.
func NewEpilogue(spec GemmSpec, args EpilogueArgs) *Epilogue {
	return &Epilogue{spec: spec, args: args}
}

// Emit stores a run of outputs of row row (i32, absolute row of C) starting
// at output column col (i32; a multiple of the run length), at b's current
// block, predicated on row < RowEnd and col < N (N is a multiple of 8, so a
// run of 1, 2, 4 or 8 is either wholly inside or wholly outside); with
// GemmSpec.QuantizeCOnly it stores nothing (EmitThen).
//
//   - EpiStore: vals are the accumulators of columns col, col+1, ... (1, 2,
//     4 or 8 of them); C[row, col+i] = bf16(vals[i] + bias[col+i]).
//   - EpiGated: vals are pairs (gate, up) of columns col, col+1, ... (2, 4,
//     8 or 16 values); C[row, col+i] = bf16(act(g_i + bias_g, u_i + bias_u)).
//
// The bf16 rounding is round-to-nearest-even (cvt.rn.bf16.f32).
func (e *Epilogue) Emit(b *Builder, row, col value.Value, vals []value.Value) error {
	return e.EmitThen(b, row, col, vals, nil)
}

// EmitThen is Emit, then, under the same predicate, then(outs) with the
// stored outputs in fp32 (before any bf16 rounding): for an epilogue that
// also keeps them (a fused quantization of C). With GemmSpec.QuantizeCOnly
// nothing is stored: then alone gets the outputs.
func (e *Epilogue) EmitThen(b *Builder, row, col value.Value, vals []value.Value, then func(outs []value.Value)) error {
	n, err := e.outputs(len(vals))
	if err != nil {
		return err
	}
	if n != 1 && n != 2 && n != 4 && n != 8 {
		return fmt.Errorf("codegen: %s: epilogue run of %d outputs (want 1, 2, 4 or 8)", e.spec.Name, n)
	}
	ok := b.And(b.ICmp(enum.IPredSLT, row, e.args.RowEnd), b.ICmp(enum.IPredSLT, col, ir.Int32(int64(e.spec.N))))
	b.If(ok, func() {
		outs := e.values(b, col, vals, n)
		if !e.spec.QuantizeCOnly {
			e.store(b, row, col, outs)
		}
		if then != nil {
			then(outs)
		}
	})
	return nil
}

// Values computes in fp32 the outputs that Emit would store for the run at
// column col (bias, then activation for EpiGated; the same instructions, so
// the same bits), without predication or stores, for engines that stage the
// tile in shared memory and store it later. The caller must only use it for
// col < N (it reads the bias of those columns).
func (e *Epilogue) Values(b *Builder, col value.Value, vals []value.Value) ([]value.Value, error) {
	n, err := e.outputs(len(vals))
	if err != nil {
		return nil, err
	}
	return e.values(b, col, vals, n), nil
}

// packBF16 is how the epilogue rounds two f32 outputs into a bf16x2 (lo
// in the low half): to odd with GemmSpec.CRoundOdd
// (Builder.PackBF16RoundOdd), else to nearest even (Builder.PackBF16).
func (e *Epilogue) packBF16(b *Builder) func(lo, hi value.Value) value.Value {
	if e.spec.CRoundOdd {
		return b.PackBF16RoundOdd
	}
	return b.PackBF16
}

// outputs is the number of outputs of a run of nv accumulator values: nv,
// or nv/2 (gate, up) pairs for EpiGated.
func (e *Epilogue) outputs(nv int) (int, error) {
	if e.spec.Epilogue != EpiGated {
		return nv, nil
	}
	if nv%2 != 0 {
		return 0, fmt.Errorf("codegen: %s: gated epilogue needs (gate, up) pairs, got %d values", e.spec.Name, nv)
	}
	return nv / 2, nil
}

// values emits the n outputs of the run at column col: bias, then the
// activation for EpiGated.
func (e *Epilogue) values(b *Builder, col value.Value, vals []value.Value, n int) []value.Value {
	outs := make([]value.Value, n)
	for i := 0; i < n; i++ {
		if e.spec.Epilogue == EpiGated {
			outs[i] = e.gated(b, col, i, vals[2*i], vals[2*i+1])
		} else {
			v := vals[i]
			if e.spec.Bias {
				v = b.FAdd(v, e.bias(b, b.AddI(col, int64(i))))
			}
			outs[i] = v
		}
	}
	return outs
}

// bias loads the fp32 bias of B row r (i32).
func (e *Epilogue) bias(b *Builder, r value.Value) value.Value {
	return b.LoadAt(ir.F32, b.ByteOffset(e.args.Bias, b.MulI(b.Wide(r), 4)), 4)
}

// gated applies bias and activation to output column col+i.
func (e *Epilogue) gated(b *Builder, col value.Value, i int, g, u value.Value) value.Value {
	if e.spec.Bias {
		c := b.AddI(col, int64(i))
		var rg, ru value.Value
		if e.spec.Gate == GateInterleaved {
			rg = b.MulI(c, 2)
			ru = b.AddI(rg, 1)
		} else {
			rg = c
			ru = b.AddI(c, int64(e.spec.N))
		}
		g = b.FAdd(g, e.bias(b, rg))
		u = b.FAdd(u, e.bias(b, ru))
	}
	return Activate(b, e.spec.Act, g, u)
}

// Activate emits h = act(g, u) in fp32 (the formulas and their sources are
// those of schedule.Activation's constants; silu(x) = x * sigmoid(x), sigmoid
// with ex2.approx and an IEEE division).
func Activate(b *Builder, a Activation, g, u value.Value) value.Value {
	switch a.Kind {
	case ActClampedSwiGLU:
		l := ir.Float32(a.Limit)
		g = b.FMin(g, l)
		u = b.FMax(b.FMin(u, l), ir.Float32(-a.Limit))
		return b.FMul(b.FMul(g, b.Sigmoid(g)), u)
	case ActGPTOSS:
		l := ir.Float32(a.Limit)
		g = b.FMin(g, l)
		u = b.FMax(b.FMin(u, l), ir.Float32(-a.Limit))
		s := b.Sigmoid(b.FMul(g, ir.Float32(a.Alpha)))
		return b.FMul(b.FMul(g, s), b.FAdd(u, ir.Float32(1)))
	default:
		return b.FMul(b.FMul(g, b.Sigmoid(g)), u)
	}
}

// store writes outs (1, 2, 4 or 8 fp32) as bf16 (or, with COutF32, as
// f32) to C[row, col..] with one aligned store (two for 8 f32).
func (e *Epilogue) store(b *Builder, row, col value.Value, outs []value.Value) {
	size := int64(2)
	if e.spec.COutF32 {
		size = 4
	}
	off := b.MulI(b.Add(b.MulI(b.Wide(row), int64(e.spec.N)), b.Wide(col)), size)
	p := b.ByteOffset(e.args.C, off)
	if e.spec.COutF32 {
		StoreF32(b, p, outs)
		return
	}
	StoreBF16(b, p, outs)
}

// StoreF32 stores 1, 2, 4 or 8 f32 values at the byte pointer p (aligned
// to 4*len(vals)) as their bits, in 16-byte stores (one store for fewer).
func StoreF32(b *Builder, p value.Value, vals []value.Value) {
	if len(vals) == 1 {
		b.StoreAt(b.BitCast(vals[0], ir.I32), p, 4)
		return
	}
	for q := 0; q < len(vals); q += 4 {
		run := vals[q:min(q+4, len(vals))]
		var v value.Value = ir.Undef(ir.Vec(len(run), ir.I32))
		for i, x := range run {
			v = b.InsertElement(v, b.BitCast(x, ir.I32), i)
		}
		b.StoreAt(v, b.ByteOffsetC(p, int64(4*q)), 4*len(run))
	}
}

// StoreBF16 rounds 1, 2, 4 or 8 fp32 values to bf16 and stores them at the
// byte pointer p (aligned to 2*len(vals)) with a single store.
func StoreBF16(b *Builder, p value.Value, vals []value.Value) {
	switch len(vals) {
	case 1:
		b.StoreAt(b.ToBF16(vals[0]), p, 2)
	case 2:
		b.StoreAt(b.PackBF16(vals[0], vals[1]), p, 4)
	default:
		n := len(vals) / 2
		var v value.Value = ir.Undef(ir.Vec(n, ir.I32))
		for i := 0; i < n; i++ {
			v = b.InsertElement(v, b.PackBF16(vals[2*i], vals[2*i+1]), i)
		}
		b.StoreAt(v, p, 2*len(vals))
	}
}
