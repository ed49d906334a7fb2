package ir

import (
	"fmt"
	"strconv"
	"strings"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Inline PTX operand constraints (LLVM NVPTX, NVPTXISelLowering
// getConstraintType / getRegForInlineAsmConstraint; CUDA "Inline PTX Assembly
// in CUDA" §Constraints):
//
//	h  16-bit register (.b16/.u16/.s16/.f16/.bf16)  i16
//	r  32-bit register (.b32/.u32/.s32)             i32
//	l  64-bit register (.b64/.u64/.s64)             i64 or a pointer
//	f  32-bit float register (.f32)                 float
//	d  64-bit float register (.f64)                 double
//	n  immediate integer                            integer constant
//
// Outputs are written "=r" (or "=&r", early clobber); an input tied to
// output k is written as the digit k; "~{memory}" is the only clobber. In the
// template, $i names operand i (outputs first, then inputs).

type asmOperand struct {
	output bool
	letter byte // h r l f d n, or 0 for a tied input
	tied   int  // output index for tied inputs
}

type asmConstraints struct {
	outputs []asmOperand
	inputs  []asmOperand
	memory  bool
}

func parseConstraints(c string) (asmConstraints, error) {
	var ac asmConstraints
	if c == "" {
		return ac, nil
	}
	seenInput, seenClobber := false, false
	for _, part := range strings.Split(c, ",") {
		switch {
		case strings.HasPrefix(part, "~"):
			if part != "~{memory}" {
				return ac, fmt.Errorf("clobber %q is not ~{memory}", part)
			}
			ac.memory, seenClobber = true, true
		case strings.HasPrefix(part, "="):
			if seenInput || seenClobber {
				return ac, fmt.Errorf("output %q after inputs or clobbers", part)
			}
			l := strings.TrimPrefix(strings.TrimPrefix(part, "="), "&")
			if len(l) != 1 || !strings.Contains("hrlfd", l) {
				return ac, fmt.Errorf("output constraint %q is not =h, =r, =l, =f or =d", part)
			}
			ac.outputs = append(ac.outputs, asmOperand{output: true, letter: l[0]})
		default:
			if seenClobber {
				return ac, fmt.Errorf("input %q after clobbers", part)
			}
			seenInput = true
			if n, err := strconv.Atoi(part); err == nil {
				if n < 0 || n >= len(ac.outputs) {
					return ac, fmt.Errorf("tied input %q names no output", part)
				}
				ac.inputs = append(ac.inputs, asmOperand{tied: n})
				continue
			}
			if len(part) != 1 || !strings.Contains("hrlfdn", part) {
				return ac, fmt.Errorf("input constraint %q is not h, r, l, f, d, n or an output index", part)
			}
			ac.inputs = append(ac.inputs, asmOperand{letter: part[0]})
		}
	}
	return ac, nil
}

// letterFits reports whether a value of type t fits constraint letter l.
func letterFits(l byte, t types.Type) bool {
	switch l {
	case 'h':
		return isInt(t, 16)
	case 'r':
		return isInt(t, 32)
	case 'l':
		if _, ok := ptrType(t); ok {
			return true
		}
		return isInt(t, 64)
	case 'f':
		return isF32(t)
	case 'd':
		return t.Equal(types.Double)
	case 'n':
		return isInt(t)
	}
	return false
}

// asmResultTypes splits an inline asm return type into its outputs.
func asmResultTypes(ret types.Type) []types.Type {
	if ret.Equal(types.Void) {
		return nil
	}
	if st, ok := ret.(*types.StructType); ok {
		return st.Fields
	}
	return []types.Type{ret}
}

// checkAsm checks an inline asm call: constraints against the result type
// and the argument values, and the $N operand references of the template.
func checkAsm(text, constraints string, ret types.Type, args []value.Value) error {
	ac, err := parseConstraints(constraints)
	if err != nil {
		return err
	}
	outs := asmResultTypes(ret)
	if len(outs) != len(ac.outputs) {
		return fmt.Errorf("%d output constraints for result type %s", len(ac.outputs), ret)
	}
	for i, o := range ac.outputs {
		if !letterFits(o.letter, outs[i]) {
			return fmt.Errorf("output %d: constraint =%c does not fit %s", i, o.letter, outs[i])
		}
	}
	if len(args) != len(ac.inputs) {
		return fmt.Errorf("%d input constraints for %d arguments", len(ac.inputs), len(args))
	}
	for i, in := range ac.inputs {
		t := typeOf(args[i])
		if in.letter == 0 {
			if !t.Equal(outs[in.tied]) {
				return fmt.Errorf("input %d tied to output %d: %s is not %s", i, in.tied, t, outs[in.tied])
			}
			continue
		}
		if !letterFits(in.letter, t) {
			return fmt.Errorf("input %d: constraint %c does not fit %s", i, in.letter, t)
		}
		if in.letter == 'n' && !isConstInt(args[i]) {
			return fmt.Errorf("input %d: constraint n needs an integer constant", i)
		}
	}
	n := len(ac.outputs) + len(ac.inputs)
	for i := 0; i < len(text); i++ {
		if text[i] != '$' {
			continue
		}
		j := i + 1
		if j < len(text) && text[j] == '$' {
			i++
			continue
		}
		for j < len(text) && text[j] >= '0' && text[j] <= '9' {
			j++
		}
		if j == i+1 {
			return fmt.Errorf("template has a '$' not followed by an operand number (write $$ for a literal $)")
		}
		k, _ := strconv.Atoi(text[i+1 : j])
		if k >= n {
			return fmt.Errorf("template names $%d but there are %d operands", k, n)
		}
		i = j - 1
	}
	return nil
}

func withMemoryClobber(c string) string {
	if strings.Contains(c, "~{memory}") {
		return c
	}
	if c == "" {
		return "~{memory}"
	}
	return c + ",~{memory}"
}

// AsmCall emits inline PTX `call ret asm sideeffect text, constraints(args)`
// with a ~{memory} clobber appended (so the compiler neither reorders memory
// accesses across it nor drops it) and returns its result: a single value,
// or a struct for several outputs (see AsmCallN). Constraints are described
// above (h r l f d n, =X outputs, tied digits); text names operands $0, $1...
func (f *Func) AsmCall(text, constraints string, ret types.Type, args ...value.Value) value.Value {
	return f.asmCall(text, withMemoryClobber(constraints), ret, args)
}

// AsmCallNoMemory is AsmCall without the ~{memory} clobber (unless
// constraints names it): the asm stays sideeffect, so it is neither dropped
// nor reordered with other side-effecting instructions, but ordinary loads
// and stores may move across it. For register-only PTX (cvt, ex2, vote,
// mma.sync) and reads of memory that barriers already order (ldmatrix after
// bar.sync).
func (f *Func) AsmCallNoMemory(text, constraints string, ret types.Type, args ...value.Value) value.Value {
	return f.asmCall(text, constraints, ret, args)
}

func (f *Func) asmCall(text, c string, ret types.Type, args []value.Value) value.Value {
	if err := checkAsm(text, c, ret, args); err != nil {
		return f.bad(ret, "inline asm %q: %v", text, err)
	}
	ps := make([]types.Type, len(args))
	for i, a := range args {
		ps[i] = a.Type()
	}
	asm := llir.NewInlineAsm(types.NewPointer(types.NewFunc(ret, ps...)), text, c)
	asm.SideEffect = true
	return f.try("inline asm", ret, func(b *llir.Block) value.Value {
		call := b.NewCall(asm, args...)
		if ret.Equal(types.Void) {
			return nil
		}
		return call
	})
}

// Asm emits inline PTX without outputs (see AsmCall).
func (f *Func) Asm(text, constraints string, args ...value.Value) {
	f.AsmCall(text, constraints, types.Void, args...)
}

// AsmCallN emits inline PTX with one output per entry of rets and returns
// the outputs as separate values.
func (f *Func) AsmCallN(text, constraints string, rets []types.Type, args ...value.Value) []value.Value {
	if len(rets) == 1 {
		return []value.Value{f.AsmCall(text, constraints, rets[0], args...)}
	}
	s := f.AsmCall(text, constraints, Struct(rets...), args...)
	out := make([]value.Value, len(rets))
	for i := range rets {
		out[i] = f.ExtractValue(s, i)
	}
	return out
}

// --- bf16 and fp8 conversions ---

// BF16ToF32 widens a bf16 value (carried as i16) to float, exactly: the bits
// shifted into the high half of an f32 (bf16 is the top 16 bits of binary32).
func (f *Func) BF16ToF32(v value.Value) value.Value {
	if !isInt(typeOf(v), 16) {
		return f.bad(types.Float, "bf16→f32: value is %s, want i16", typeOf(v))
	}
	return f.BitCast(f.Shl(f.ZExt(v, types.I32), Int32(16)), types.Float)
}

// F32ToBF16 rounds float v to bf16 (round to nearest even, NaN kept),
// returned as i16: `cvt.rn.bf16.f32` (PTX ISA §9.7.9.21; sm_80+).
func (f *Func) F32ToBF16(v value.Value) value.Value {
	return f.AsmCall("cvt.rn.bf16.f32 $0, $1;", "=h,f", types.I16, v)
}

// F32x2ToBF16x2 rounds hi and lo to bf16 and packs them into an i32, hi in
// bits 31..16 and lo in bits 15..0: `cvt.rn.bf16x2.f32 d, hi, lo` (sm_80+).
func (f *Func) F32x2ToBF16x2(hi, lo value.Value) value.Value {
	return f.AsmCall("cvt.rn.bf16x2.f32 $0, $1, $2;", "=r,f,f", types.I32, hi, lo)
}

// F32x2ToE4M3x2 rounds hi and lo to FP8 E4M3 (OCP MX spec v1.0 §5.3.3;
// round to nearest even, saturating to ±448) and packs them into an i16, hi
// in bits 15..8 and lo in bits 7..0: `cvt.rn.satfinite.e4m3x2.f32 d, hi, lo`
// (PTX ISA §9.7.9.21; sm_89+).
func (f *Func) F32x2ToE4M3x2(hi, lo value.Value) value.Value {
	return f.AsmCall("cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,f,f", types.I16, hi, lo)
}

// E4M3x2ToF32x2 widens two E4M3 values packed in an i16 (hi in bits 15..8,
// lo in bits 7..0) to floats, exactly, through f16x2:
// `cvt.rn.f16x2.e4m3x2` then `cvt.f32.f16` (sm_89+).
func (f *Func) E4M3x2ToF32x2(v value.Value) (hi, lo value.Value) {
	out := f.AsmCallN("{\n\t.reg .b32 %mokc_t;\n\t.reg .b16 %mokc_lo, %mokc_hi;\n"+
		"\tcvt.rn.f16x2.e4m3x2 %mokc_t, $2;\n\tmov.b32 {%mokc_lo, %mokc_hi}, %mokc_t;\n"+
		"\tcvt.f32.f16 $0, %mokc_hi;\n\tcvt.f32.f16 $1, %mokc_lo;\n}",
		"=f,=f,h", []types.Type{types.Float, types.Float}, v)
	return out[0], out[1]
}

func isConstInt(v value.Value) bool {
	_, ok := v.(*constant.Int)
	return ok
}
