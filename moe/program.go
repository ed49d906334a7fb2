package moe

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/schedule"
)

// Program is a MoE layer as ops over buffers, in execution order.
type Program struct {
	Layer   schedule.Layer // the layer it computes
	Buffers []*Buffer      // every buffer, each declared once
	Ops     []Op           // in execution order
}

// buffer declares a buffer of the program.
func (p *Program) buffer(name string, k Kind, d DType, doc string, shape ...launch.Expr) *Buffer {
	b := &Buffer{Name: name, Kind: k, DType: d, Shape: shape, Doc: doc}
	p.Buffers = append(p.Buffers, b)
	return b
}

func (p *Program) in(name string, d DType, doc string, shape ...launch.Expr) *Buffer {
	return p.buffer(name, Input, d, doc, shape...)
}

func (p *Program) scratch(name string, d DType, doc string, shape ...launch.Expr) *Buffer {
	return p.buffer(name, Scratch, d, doc, shape...)
}

// Buffer returns the buffer named name, or nil.
func (p *Program) Buffer(name string) *Buffer {
	for _, b := range p.Buffers {
		if b.Name == name {
			return b
		}
	}
	return nil
}

// Check verifies the program's structure: buffer names are unique and
// every buffer has a known dtype and a shape with at most one T-dependent
// dimension; op names are unique; every operand is a buffer of the
// program; inputs are never written; every scratch or output buffer is
// written before an op reads (or accumulates into) it, and every output is
// written. InOut buffers (caller-owned, accumulated into) hold values
// before the first op. A GEMM's weights and a WeightGrad's main grad match
// their Storage (checkStorage): the tensor itself (Stacked), or a u64
// pointer table of one entry per expert (Table).
func (p *Program) Check() error {
	seen := map[string]*Buffer{}
	for _, b := range p.Buffers {
		if b.Name == "" || seen[b.Name] != nil {
			return fmt.Errorf("moe: buffer name %q empty or declared twice", b.Name)
		}
		seen[b.Name] = b
		if b.DType.Size() == 0 {
			return fmt.Errorf("moe: buffer %s has unknown dtype %q", b.Name, b.DType)
		}
		nt := 0
		for _, d := range b.Shape {
			if d.A != 0 {
				nt++
			}
		}
		if len(b.Shape) == 0 || nt > 1 {
			return fmt.Errorf("moe: buffer %s: shape %v needs 1+ dimensions, at most one depending on T", b.Name, b.Shape)
		}
	}
	written := map[*Buffer]bool{}
	ops := map[string]bool{}
	for _, op := range p.Ops {
		if ops[op.Name()] {
			return fmt.Errorf("moe: op %s appears twice", op.Name())
		}
		ops[op.Name()] = true
		if err := checkStorage(op); err != nil {
			return err
		}
		if err := checkMXFP8(op); err != nil {
			return err
		}
		if err := checkActivate(op); err != nil {
			return err
		}
		for _, o := range op.Operands() {
			if seen[o.Buffer.Name] != o.Buffer {
				return fmt.Errorf("moe: op %s: operand %s names buffer %s that the program does not declare", op.Name(), o.Role, o.Buffer.Name)
			}
			switch {
			case o.Writes() && o.Buffer.Kind == Input:
				return fmt.Errorf("moe: op %s writes input %s", op.Name(), o.Buffer.Name)
			case o.Reads() && o.Buffer.Kind != Input && o.Buffer.Kind != InOut && !written[o.Buffer]:
				return fmt.Errorf("moe: op %s reads %s %s before any op writes it", op.Name(), o.Buffer.Kind, o.Buffer.Name)
			}
		}
		for _, o := range op.Operands() {
			if o.Writes() {
				written[o.Buffer] = true
			}
		}
	}
	entries := map[*Buffer]tableUse{}
	for _, op := range p.Ops {
		for _, u := range tableUses(op) {
			if first, ok := entries[u.table]; !ok {
				entries[u.table] = u
			} else if first.dtype != u.dtype || !slices.Equal(first.shape, u.shape) {
				return fmt.Errorf("moe: op %s uses the entries of pointer table %s as %s %v, op %s as %s %v",
					u.op, u.table.Name, u.dtype, u.shape, first.op, first.dtype, first.shape)
			}
		}
	}
	for _, b := range p.Buffers {
		if (b.Kind == Output || b.Kind == Scratch) && !written[b] {
			return fmt.Errorf("moe: %s buffer %s is never written", b.Kind, b.Name)
		}
	}
	return nil
}

// String lists the buffers and the ops, one per line:
//
//	input x bf16[T,7168]
//	...
//	count(ids:ids, counts+=counts, row_of_slot=row_of_slot, err+=err)
func (p *Program) String() string {
	var sb strings.Builder
	for _, b := range p.Buffers {
		fmt.Fprintf(&sb, "%-7s %s\n", b.Kind, b)
	}
	for _, op := range p.Ops {
		var os []string
		for _, o := range op.Operands() {
			os = append(os, o.String())
		}
		fmt.Fprintf(&sb, "%s(%s)\n", op.Name(), strings.Join(os, ", "))
	}
	return sb.String()
}

// checkActivate checks an Activate's operands: f32 rows of 2N in, bf16 or
// f32 rows of N (a multiple of 8) out, as many rows (dispatched: Offsets
// set). Other ops pass.
func checkActivate(op Op) error {
	o, ok := op.(Activate)
	switch {
	case !ok:
		return nil
	case o.GU == nil || o.H == nil || o.Offsets == nil:
		return fmt.Errorf("moe: op %s: needs gu, h and offsets", o.Name())
	case !slices.Equal(o.GU.Shape[:len(o.GU.Shape)-1], o.H.Shape[:len(o.H.Shape)-1]):
		return fmt.Errorf("moe: op %s: gu %s and h %s have different rows", o.Name(), o.GU, o.H)
	case o.GU.DType != F32 || (o.H.DType != BF16 && o.H.DType != F32):
		return fmt.Errorf("moe: op %s: reads f32 and writes bf16 or f32, not %s and %s", o.Name(), o.GU.DType, o.H.DType)
	case o.N%8 != 0 || o.GU.Shape[len(o.GU.Shape)-1] != c(2*o.N) || o.H.Shape[len(o.H.Shape)-1] != c(o.N):
		return fmt.Errorf("moe: op %s: rows of 2N = %d in and N = %d (a multiple of 8) out", o.Name(), 2*o.N, o.N)
	}
	return nil
}

// checkMXFP8 checks the dtypes and shapes of the MXFP8 operands: a GEMM
// with scales reads e4m3 A and B with ue8m0 scales of K/32 columns (K a
// multiple of 32), one without reads no e4m3; Quantize turns bf16 or f32
// rows of K (a Gather with Q and S bf16 rows) into e4m3 rows and K/32
// scales, Dequantize e4m3 rows with
// their scales into bf16; an ActGrad's MXFP8 dot needs whole blocks.
func checkMXFP8(op Op) error {
	scales := func(what string, s *Buffer, k int) error {
		if s.DType != UE8M0 || s.Shape[len(s.Shape)-1] != c(k/32) {
			return fmt.Errorf("moe: op %s: %s scales %s must be ue8m0 with %d columns (one per 32 of K = %d)", op.Name(), what, s, k/32, k)
		}
		return nil
	}
	switch o := op.(type) {
	case GEMM:
		if o.ARegisterFed {
			switch {
			case o.AScales != nil || o.BScales == nil:
				return fmt.Errorf("moe: op %s: a register-fed MXFP8 GEMM has B's scales and no A scales", o.Op)
			case o.A.DType != BF16 || o.B.DType != E4M3:
				return fmt.Errorf("moe: op %s: a register-fed MXFP8 GEMM reads bf16 A (MXFP8 values) and e4m3 B, not %s and %s", o.Op, o.A.DType, o.B.DType)
			case o.K%32 != 0 || o.BMajor != KMajor || o.Storage != Stacked:
				return fmt.Errorf("moe: op %s: a register-fed MXFP8 GEMM needs K = %d a multiple of 32 and grouped K-major weights", o.Op, o.K)
			}
			return scales("B", o.BScales, o.K)
		}
		if o.AScales == nil && o.BScales == nil {
			if o.A.DType == E4M3 || o.B.DType == E4M3 {
				return fmt.Errorf("moe: op %s: e4m3 operands need their scales (AScales, BScales)", o.Op)
			}
			return nil
		}
		switch {
		case o.AScales == nil || o.BScales == nil:
			return fmt.Errorf("moe: op %s: an MXFP8 GEMM needs the scales of both A and B", o.Op)
		case o.A.DType != E4M3 || o.B.DType != E4M3:
			return fmt.Errorf("moe: op %s: an MXFP8 GEMM reads e4m3 A and B, not %s and %s", o.Op, o.A.DType, o.B.DType)
		case o.K%32 != 0:
			return fmt.Errorf("moe: op %s: an MXFP8 GEMM needs K = %d to be a multiple of 32", o.Op, o.K)
		case o.BMajor != KMajor || o.Storage != Stacked:
			return fmt.Errorf("moe: op %s: an MXFP8 GEMM reads grouped K-major weights", o.Op)
		}
		if err := scales("A", o.AScales, o.K); err != nil {
			return err
		}
		return scales("B", o.BScales, o.K)
	case Gather:
		if o.V != nil {
			return checkValues(o.Name(), o.X, o.V, o.Q == nil && o.S == nil && o.XS == nil)
		}
		switch {
		case o.Q == nil && o.S == nil:
			return nil
		case o.Q == nil || o.S == nil || o.XS != nil:
			return fmt.Errorf("moe: op %s: a quantizing gather writes both Q and S and no XS", o.Name())
		case o.X.DType != BF16:
			return fmt.Errorf("moe: op %s: a quantizing gather reads bf16 rows, not %s", o.Name(), o.X.DType)
		case o.Q.DType != E4M3 || o.X.Shape[len(o.X.Shape)-1] != o.Q.Shape[len(o.Q.Shape)-1]:
			return fmt.Errorf("moe: op %s: writes e4m3 rows as long as x's, not %s", o.Name(), o.Q)
		}
		k := int(o.Q.Shape[len(o.Q.Shape)-1].B)
		if k%32 != 0 {
			return fmt.Errorf("moe: op %s: rows of %d elements are not whole blocks of 32", o.Name(), k)
		}
		return scales("its", o.S, k)
	case Quantize:
		if o.V != nil {
			return checkValues(o.Op, o.X, o.V, o.Q == nil && o.S == nil)
		}
		switch {
		case o.X.DType != BF16 && o.X.DType != F32:
			return fmt.Errorf("moe: op %s: quantizes bf16 or f32 rows, not %s", o.Op, o.X.DType)
		case o.Q.DType != E4M3:
			return fmt.Errorf("moe: op %s: writes e4m3 data, not %s", o.Op, o.Q.DType)
		case o.K%32 != 0 || o.X.Shape[len(o.X.Shape)-1] != c(o.K) || o.Q.Shape[len(o.Q.Shape)-1] != c(o.K):
			return fmt.Errorf("moe: op %s: rows of K = %d (a multiple of 32) in and out", o.Op, o.K)
		}
		return scales("its", o.S, o.K)
	case Dequantize:
		switch {
		case o.Q.DType != E4M3 || o.Out.DType != BF16:
			return fmt.Errorf("moe: op %s: turns e4m3 data into bf16, not %s into %s", o.Op, o.Q.DType, o.Out.DType)
		case o.Cols%32 != 0 || o.Q.Shape[len(o.Q.Shape)-1] != c(o.Cols) || o.Out.Shape[len(o.Out.Shape)-1] != c(o.Cols):
			return fmt.Errorf("moe: op %s: rows of %d columns (a multiple of 32) in and out", o.Op, o.Cols)
		}
		return scales("its", o.S, o.Cols)
	case ActGrad:
		if o.MX && (o.FC1X != nil || o.N%32 != 0) {
			return fmt.Errorf("moe: op %s: the dot over MXFP8 values of h needs N = %d a multiple of 32 and no FC1X", o.Op, o.N)
		}
	}
	return nil
}

// checkValues checks the register-fed output v of op (a Gather's or a
// Quantize's V) beside its input rows x: bf16 rows as long as x's, whole
// blocks of 32, and no other output (alone).
func checkValues(op string, x, v *Buffer, alone bool) error {
	k := v.Shape[len(v.Shape)-1]
	switch {
	case !alone:
		return fmt.Errorf("moe: op %s: writes its MXFP8 values (V) and nothing else", op)
	case x.DType != BF16 && x.DType != F32:
		return fmt.Errorf("moe: op %s: quantizes bf16 or f32 rows, not %s", op, x.DType)
	case v.DType != BF16 || x.Shape[len(x.Shape)-1] != k || k.A != 0 || k.B%32 != 0:
		return fmt.Errorf("moe: op %s: writes bf16 rows as long as x's, whole blocks of 32, not %s", op, v)
	}
	return nil
}

// checkStorage verifies how a GEMM finds its weights B_e and a WeightGrad
// its main grads Main_e. Stacked: B is the bf16 weights of every expert
// (Experts x rows of B_e x K elements), Main the f32 or bf16 main grads
// (Experts x M x N elements; GradDType empty or Main's dtype). Table: B or
// Main is a u64 [Experts] table of device pointers, and a WeightGrad's
// GradDType (the dtype behind the pointers) is f32 or bf16. Other ops pass.
func checkStorage(op Op) error {
	table := func(role string, b *Buffer, experts int) error {
		if b.DType != U64 || len(b.Shape) != 1 || b.Shape[0] != c(experts) {
			return fmt.Errorf("moe: op %s: %s %s with Table storage must be a u64 [%d] pointer table (one entry per expert)", op.Name(), role, b, experts)
		}
		return nil
	}
	count := func(role string, b *Buffer, want int64) error {
		if n := b.Len(0); b.Len(1) != n || n != want {
			return fmt.Errorf("moe: op %s: %s %s with Stacked storage must hold %d elements (every expert's), not depending on T", op.Name(), role, b, want)
		}
		return nil
	}
	switch o := op.(type) {
	case GEMM:
		if o.Storage == Table {
			return table("b", o.B, o.Experts)
		}
		rows := o.N
		if o.Gated {
			rows = 2 * o.N
		}
		if o.B.DType != BF16 && o.B.DType != E4M3 {
			return fmt.Errorf("moe: op %s: b %s with Stacked storage must be bf16 or e4m3 weights (a u64 pointer table needs Table storage)", op.Name(), o.B)
		}
		return count("b", o.B, int64(o.Experts)*int64(rows)*int64(o.K))
	case WeightGrad:
		if d := o.MainDType(); d != F32 && d != BF16 {
			if o.Storage == Table {
				return fmt.Errorf("moe: op %s: main grads behind the pointer table %s must be f32 or bf16 (GradDType %q)", op.Name(), o.Main.Name, o.GradDType)
			}
			return fmt.Errorf("moe: op %s: main %s with Stacked storage must be f32 or bf16 main grads (a u64 pointer table needs Table storage)", op.Name(), o.Main)
		}
		if o.Storage == Table {
			return table("main", o.Main, o.Experts)
		}
		if o.GradDType != "" && o.GradDType != o.Main.DType {
			return fmt.Errorf("moe: op %s: GradDType %s differs from main %s's dtype", op.Name(), o.GradDType, o.Main)
		}
		return count("main", o.Main, int64(o.Experts)*int64(o.M)*int64(o.N))
	}
	return nil
}

// tableUse is an op's use of a pointer table (Table storage): what each
// entry points at, one expert's tensor of dtype and shape (row-major).
type tableUse struct {
	op    string
	table *Buffer
	dtype DType
	shape []int
}

// tableUses lists the pointer tables op uses: a GEMM's B (B_e bf16 [rows
// of B_e, K] as stored, whatever BMajor says of its use) and a
// WeightGrad's Main (Main_e [M, N] of MainDType).
func tableUses(op Op) []tableUse {
	switch o := op.(type) {
	case GEMM:
		if o.Storage != Table {
			return nil
		}
		rows, cols := o.N, o.K
		switch {
		case o.Gated:
			rows = 2 * o.N
		case o.BMajor == NMajor:
			rows, cols = o.K, o.N
		}
		return []tableUse{{op: o.Name(), table: o.B, dtype: BF16, shape: []int{rows, cols}}}
	case WeightGrad:
		if o.Storage != Table {
			return nil
		}
		return []tableUse{{op: o.Name(), table: o.Main, dtype: o.MainDType(), shape: []int{o.M, o.N}}}
	}
	return nil
}

// TableEntry says what each entry of the pointer table named name points
// at: one expert's own allocation, a row-major tensor of dtype and shape,
// as the program's ops use it (the weights FC1 bf16 [2I,H] and FC2 bf16
// [H,I] behind fc1_table and fc2_table; the backward's main grads f32 or
// bf16 [2I,H] and [H,I] behind fc1_grad_table and fc2_grad_table). ok is
// false when no op of p uses a buffer of that name as a pointer table.
func (p *Program) TableEntry(name string) (dtype DType, shape []int, ok bool) {
	for _, op := range p.Ops {
		for _, u := range tableUses(op) {
			if u.table.Name == name {
				return u.dtype, slices.Clone(u.shape), true
			}
		}
	}
	return "", nil, false
}
