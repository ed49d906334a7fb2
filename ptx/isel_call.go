package ptx

import (
	"fmt"
	"strconv"
	"strings"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// paramInfo is one parameter of the function being compiled.
type paramInfo struct {
	ir   *llir.Param
	decl string // its declaration in the signature
	info Param
}

// kernelParamType is the PTX type and size of a scalar kernel parameter
// (i1 travels as a byte 0 or 1, as in CUDA C++).
func kernelParamType(k kind) (string, int) {
	switch k {
	case kPred, kI8:
		return ".u8", 1
	case kI16:
		return ".u16", 2
	case kHalf:
		return ".b16", 2
	case kI32:
		return ".u32", 4
	case kF32:
		return ".f32", 4
	case kF64:
		return ".f64", 8
	}
	return ".u64", 8
}

// funcParamType is the PTX type of a .func parameter or return value: 32 or
// 64 bits (our own calling convention between functions of one module).
func funcParamType(k kind) string {
	if k.bits() > 32 {
		return ".b64"
	}
	return ".b32"
}

// usedValues is the set of values used as operands in f.
func usedValues(f *llir.Func) map[value.Value]bool {
	used := map[value.Value]bool{}
	for _, b := range f.Blocks {
		for _, inst := range b.Insts {
			if u, ok := inst.(value.User); ok {
				for _, op := range u.Operands() {
					if op != nil && *op != nil {
						used[*op] = true
					}
				}
			}
		}
		if b.Term != nil {
			for _, op := range b.Term.Operands() {
				if op != nil && *op != nil {
					used[*op] = true
				}
			}
		}
	}
	return used
}

// lowerParams declares the parameters and loads the used ones at the top of
// the entry block. Kernel parameters keep their IR names when those are PTX
// identifiers that shadow no module symbol, else <fn>_param_<i>; a byval
// kernel parameter is `.param .align A .b8 name[size]` and its value (the
// generic address of the parameter) is mov.b64 + cvta.param.u64 (PTX ISA
// 5.1.6.1, 9.7.9.20; PTX 7.7+).
func (s *sel) lowerParams() error {
	f := s.f
	used := usedValues(f.ir)
	taken := map[string]bool{}
	offset := 0
	for i, p := range f.ir.Params {
		s.inst = p
		name := fmt.Sprintf("%s_param_%d", f.name, i)
		if f.kernel && ptxIdent.MatchString(p.Name()) && !s.c.symUsed[p.Name()] && !taken[p.Name()] &&
			!strings.HasPrefix(p.Name(), "__local_depot") {
			name = p.Name()
		}
		taken[name] = true
		byval, err := paramByval(p)
		if err != nil {
			return s.fail("%v", err)
		}
		if byval != nil {
			if !f.kernel {
				return s.fail("byval parameters are supported on kernels only")
			}
			size, err := typeSize(byval)
			if err != nil {
				return s.fail("%v", err)
			}
			align, err := typeAlign(byval)
			if err != nil {
				return s.fail("%v", err)
			}
			for _, a := range p.Attrs {
				if al, ok := a.(llir.Align); ok && int64(al) > align {
					align = int64(al)
				}
			}
			offset = int(roundUp(int64(offset), align))
			pi := paramInfo{ir: p, decl: fmt.Sprintf(".param .align %d .b8 %s[%d]", align, name, size),
				info: Param{Name: name, Type: ".b8", Size: int(size), Align: int(align), Offset: offset, ByVal: true}}
			offset += int(size)
			f.params = append(f.params, pi)
			if used[p] {
				r, g := s.reg(kPtr), s.reg(kPtr)
				s.emit("mov.b64 \t%s, %s;", r, name)
				s.emit("cvta.param.u64 \t%s, %s;", g, r)
				s.vals[p] = []string{g}
			}
			continue
		}
		k, err := scalarKind(p.Typ)
		if err != nil {
			return s.fail("%v", err)
		}
		if !f.kernel {
			f.params = append(f.params, paramInfo{ir: p, decl: fmt.Sprintf(".param %s %s", funcParamType(k), name),
				info: Param{Name: name, Type: funcParamType(k)}})
			if used[p] {
				s.vals[p] = []string{s.loadParam(k, name)}
			}
			continue
		}
		t, size := kernelParamType(k)
		offset = int(roundUp(int64(offset), int64(size)))
		f.params = append(f.params, paramInfo{ir: p, decl: fmt.Sprintf(".param %s %s", t, name),
			info: Param{Name: name, Type: t, Size: size, Align: size, Offset: offset}})
		offset += size
		if !used[p] {
			continue
		}
		switch k {
		case kPred:
			b := s.reg(kI16)
			s.emit("ld.param.u8 \t%s, [%s];", b, name)
			s.vals[p] = []string{s.lowBit(b, kI16)}
		default:
			r := s.reg(k)
			s.emit("ld.param.%s \t%s, [%s];", ldstType(k), r, name)
			s.vals[p] = []string{r}
		}
	}
	s.inst = nil
	if rt := f.ir.Sig.RetType; !f.kernel {
		if _, ok := rt.(*types.VoidType); !ok {
			k, err := scalarKind(rt)
			if err != nil {
				return s.fail("return type: %v", err)
			}
			f.retDecl = fmt.Sprintf(".param %s func_retval0", funcParamType(k))
		}
	}
	return nil
}

// storeParam writes x of kind k to the .func parameter (or return value)
// name declared with funcParamType.
func (s *sel) storeParam(k kind, name, x string) {
	switch k {
	case kPred:
		t := s.reg(kI32)
		s.emit("selp.u32 \t%s, 1, 0, %s;", t, x)
		s.emit("st.param.b32 \t[%s], %s;", name, t)
	case kI8, kI16, kHalf:
		s.emit("st.param.b16 \t[%s], %s;", name, x)
	case kF32:
		s.emit("st.param.f32 \t[%s], %s;", name, x)
	case kF64:
		s.emit("st.param.f64 \t[%s], %s;", name, x)
	case kI32:
		s.emit("st.param.b32 \t[%s], %s;", name, x)
	default:
		s.emit("st.param.b64 \t[%s], %s;", name, x)
	}
}

// loadParam reads a value of kind k from the .func parameter (or return
// value) name.
func (s *sel) loadParam(k kind, name string) string {
	switch k {
	case kPred:
		t, p := s.reg(kI32), s.reg(kPred)
		s.emit("ld.param.b32 \t%s, [%s];", t, name)
		s.emit("setp.ne.s32 \t%s, %s, 0;", p, t)
		return p
	}
	r := s.reg(k)
	t := map[kind]string{kI8: "b16", kI16: "b16", kHalf: "b16", kI32: "b32", kF32: "f32", kF64: "f64"}[k]
	if t == "" {
		t = "b64"
	}
	s.emit("ld.param.%s \t%s, [%s];", t, r, name)
	return r
}

func (s *sel) call(call *llir.InstCall) error {
	switch callee := call.Callee.(type) {
	case *llir.InlineAsm:
		return s.inlineAsm(call, callee)
	case *llir.Func:
		if mf := s.c.byIR[callee]; mf != nil {
			return s.callFunc(call, mf)
		}
		name := callee.Name()
		if fn, ok := lookupIntrinsic(name); ok {
			return fn(s, call)
		}
		if strings.HasPrefix(name, "llvm.") {
			return s.fail("unknown intrinsic @%s", name)
		}
		return s.fail("call to external function @%s", name)
	}
	return s.fail("indirect call is not supported")
}

// callFunc calls a .func of the module: arguments and result go through
// .param variables declared in a { } scope (PTX ISA 9.7.12.2, call).
func (s *sel) callFunc(call *llir.InstCall, callee *mfunc) error {
	if callee.kernel {
		return s.fail("call to kernel @%s (a .entry cannot be called)", callee.ir.Name())
	}
	if len(call.Args) != len(callee.ir.Params) {
		return s.fail("call with %d arguments to a function of %d parameters", len(call.Args), len(callee.ir.Params))
	}
	s.f.callees[callee] = true
	type arg struct {
		x string
		k kind
	}
	var args []arg
	for _, a := range call.Args {
		x, k, err := s.lane1(a)
		if err != nil {
			return err
		}
		args = append(args, arg{x, k})
	}
	var rk kind
	hasRet := false
	if _, ok := call.Typ.(*types.VoidType); !ok {
		var err error
		if rk, err = scalarKind(call.Typ); err != nil {
			return s.fail("%v", err)
		}
		hasRet = true
	}
	s.emit("{ // callseq")
	var names []string
	for i, a := range args {
		n := fmt.Sprintf("param%d", i)
		names = append(names, n)
		s.emit(".param %s %s;", funcParamType(a.k), n)
		s.storeParam(a.k, n, a.x)
	}
	ret := ""
	if hasRet {
		s.emit(".param %s retval0;", funcParamType(rk))
		ret = "(retval0), "
	}
	s.emit("call.uni %s%s, (%s);", ret, callee.name, strings.Join(names, ", "))
	var r string
	if hasRet {
		r = s.loadParam(rk, "retval0")
	}
	s.emit("} // callseq")
	if hasRet {
		return s.define(call, []string{r})
	}
	return nil
}

// asmOperand is one operand of an inline asm constraint string.
type asmOperand struct {
	output bool
	class  byte // r h l f d b n
	tied   int  // input tied to output #tied, or -1
}

// parseConstraints parses an LLVM inline asm constraint string (LLVM
// LangRef, "Inline Assembler Expressions"; NVPTX classes: r .b32, h .b16,
// l .b64, f .f32, d .f64, b .pred, n immediate).
func parseConstraints(cs string) ([]asmOperand, error) {
	var out []asmOperand
	if cs == "" {
		return nil, nil
	}
	nout := 0
	for _, c := range strings.Split(cs, ",") {
		switch {
		case strings.HasPrefix(c, "~"):
			continue
		case strings.HasPrefix(c, "="):
			cl := strings.TrimPrefix(strings.TrimPrefix(c, "="), "&")
			if len(cl) != 1 || !strings.Contains("rhlfdb", cl) {
				return nil, fmt.Errorf("inline asm output constraint %q is not supported (=r =h =l =f =d =b are)", c)
			}
			if len(out) != nout {
				return nil, fmt.Errorf("inline asm outputs must come before inputs")
			}
			out = append(out, asmOperand{output: true, class: cl[0], tied: -1})
			nout++
		default:
			if n, err := strconv.Atoi(c); err == nil {
				if n < 0 || n >= nout {
					return nil, fmt.Errorf("inline asm input tied to %d, which is not an output", n)
				}
				out = append(out, asmOperand{class: out[n].class, tied: n})
				continue
			}
			if c == "i" {
				c = "n"
			}
			if len(c) != 1 || !strings.Contains("rhlfdbn", c) {
				return nil, fmt.Errorf("inline asm constraint %q is not supported (r h l f d b n, =..., tied digits and ~{clobbers} are)", c)
			}
			out = append(out, asmOperand{class: c[0], tied: -1})
		}
	}
	return out, nil
}

// classKind is the register kind an inline asm constraint class names.
func classKind(c byte) kind {
	return map[byte]kind{'r': kI32, 'h': kI16, 'l': kI64, 'f': kF32, 'd': kF64, 'b': kPred}[c]
}

// asmCompatible reports whether a value of kind k can sit directly in the
// register of constraint class c (same PTX register declaration).
func asmCompatible(c byte, k kind) bool {
	switch c {
	case 'h':
		return k == kI16 || k == kI8 || k == kHalf
	case 'l':
		return k == kI64 || k == kPtr
	}
	return classKind(c) == k
}

// reinterpret moves x of kind from into a register of kind to: the same
// bits for equal widths, zero extension / truncation for i8/i16 <-> i32.
func (s *sel) reinterpret(x string, from, to kind) (string, error) {
	if from.class() == to.class() {
		return x, nil
	}
	r := s.reg(to)
	switch {
	case from.regBits() == to.regBits() && from != kPred && to != kPred:
		s.emit("mov.b%d \t%s, %s;", from.regBits(), r, x)
	case from.regBits() == 16 && to == kI32:
		s.emit("cvt.u32.u16 \t%s, %s;", r, x)
	case from == kI32 && to.regBits() == 16:
		s.emit("cvt.u16.u32 \t%s, %s;", r, x)
	default:
		return "", s.fail("inline asm operand of type %s cannot use a %s register", kindName(from), kindName(to))
	}
	return r, nil
}

// inlineAsm substitutes operands into the asm text ($N, ${N}; $$ is a
// literal $) and emits it between markers, as llc does. Tied inputs are
// copied into their output register first; values whose type differs from
// the constraint's register class are converted around the asm.
func (s *sel) inlineAsm(call *llir.InstCall, a *llir.InlineAsm) error {
	cons, err := parseConstraints(a.Constraint)
	if err != nil {
		return s.fail("%v", err)
	}
	var outKinds []kind
	if _, ok := call.Typ.(*types.VoidType); !ok {
		if outKinds, err = laneKinds(call.Typ); err != nil {
			return s.fail("%v", err)
		}
	}
	nout := 0
	for _, c := range cons {
		if c.output {
			nout++
		}
	}
	if nout != len(outKinds) {
		return s.fail("inline asm has %d output constraints for a result of %d values", nout, len(outKinds))
	}
	if len(cons)-nout != len(call.Args) {
		return s.fail("inline asm has %d input constraints for %d arguments", len(cons)-nout, len(call.Args))
	}
	text := make([]string, len(cons))
	outRegs := make([]string, nout)
	for i := 0; i < nout; i++ {
		k := outKinds[i]
		if !asmCompatible(cons[i].class, k) {
			k = classKind(cons[i].class)
		}
		outRegs[i] = s.reg(k)
		text[i] = outRegs[i]
	}
	for j, arg := range call.Args {
		i := nout + j
		c := cons[i]
		if c.class == 'n' {
			ci, ok := arg.(*constant.Int)
			if !ok {
				return s.fail("inline asm operand %d has constraint n but is not an integer constant", i)
			}
			text[i] = ci.X.String()
			continue
		}
		x, k, err := s.op1(arg)
		if err != nil {
			return err
		}
		x = s.toReg(x, k)
		want := k
		if c.tied >= 0 {
			want = kindOfReg(outRegs[c.tied])
		} else if !asmCompatible(c.class, k) {
			want = classKind(c.class)
		}
		if x, err = s.reinterpret(x, k, want); err != nil {
			return err
		}
		if c.tied >= 0 {
			s.mov(want, outRegs[c.tied], x)
			x = outRegs[c.tied]
		}
		text[i] = x
	}
	body, err := substituteAsm(a.Asm, text)
	if err != nil {
		return s.fail("%v", err)
	}
	s.emit("// begin inline asm")
	for _, line := range strings.Split(body, "\n") {
		s.emit("%s", line)
	}
	s.emit("// end inline asm")
	if nout == 0 {
		return nil
	}
	res := make([]string, nout)
	for i, r := range outRegs {
		if res[i], err = s.reinterpret(r, kindOfReg(r), outKinds[i]); err != nil {
			return err
		}
	}
	return s.define(call, res)
}

// kindOfReg recovers a representative kind from a register's class prefix
// (regClassInfo); kPred for anything else.
func kindOfReg(r string) kind {
	p := strings.TrimRight(r, "0123456789")
	for _, c := range regClassInfo {
		if p == c.prefix {
			return c.kind
		}
	}
	return kPred
}

func substituteAsm(asm string, ops []string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(asm); i++ {
		ch := asm[i]
		if ch != '$' || i+1 >= len(asm) {
			b.WriteByte(ch)
			continue
		}
		nx := asm[i+1]
		switch {
		case nx == '$':
			b.WriteByte('$')
			i++
		case nx >= '0' && nx <= '9':
			j := i + 1
			for j < len(asm) && asm[j] >= '0' && asm[j] <= '9' {
				j++
			}
			n, _ := strconv.Atoi(asm[i+1 : j])
			if n >= len(ops) {
				return "", fmt.Errorf("inline asm refers to operand $%d of %d", n, len(ops))
			}
			b.WriteString(ops[n])
			i = j - 1
		case nx == '{':
			end := strings.IndexByte(asm[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated ${ in inline asm")
			}
			inner := asm[i+2 : i+end]
			n, err := strconv.Atoi(inner)
			if err != nil {
				return "", fmt.Errorf("inline asm operand modifier ${%s} is not supported", inner)
			}
			if n >= len(ops) {
				return "", fmt.Errorf("inline asm refers to operand $%d of %d", n, len(ops))
			}
			b.WriteString(ops[n])
			i += end
		default:
			b.WriteByte(ch)
		}
	}
	return b.String(), nil
}
