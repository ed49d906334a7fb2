package ptx

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
	"github.com/mewmew/float/binary16"
)

// Register conventions (the invariants every lowering relies on):
//   - each SSA value owns the registers of its lanes (laneTypes); registers
//     are written once, except the registers of phis, which the phi copies
//     write on every incoming edge;
//   - an i8 lives in the low 8 bits of a .b16 register and its upper 8 bits
//     are undefined: operations whose result depends on them (division,
//     remainder, right shifts, comparisons, extensions, conversions to float,
//     shift amounts, switch) normalize first, as LLVM's type legalizer does;
//   - an i1 lives in a .pred register; in memory it is a byte 0 or 1.
//
// Operands are strings: a register ("%r3") or an immediate in PTX syntax
// ("42", "0f3F800000", "0d3FF0000000000000"; half constants "0x3C00" are only
// used through mov.b16).

func selectInstructions(c *compilation) error {
	for _, f := range c.funcs {
		s := &sel{c: c, f: f, vals: map[value.Value][]string{}, pre: map[value.Value]bool{}}
		f.refs = map[*llir.Global]bool{}
		f.callees = map[*mfunc]bool{}
		if err := s.run(); err != nil {
			return err
		}
	}
	return nil
}

type sel struct {
	c    *compilation
	f    *mfunc
	vals map[value.Value][]string // registers (or immediates) of each lowered value's lanes
	pre  map[value.Value]bool     // registers allocated at a use before the definition
	out  *[]string
	inst interface{ LLString() string } // being lowered, for errors
}

func (s *sel) fail(format string, args ...any) error {
	return s.f.errorf(s.inst, format, args...)
}

func (s *sel) emit(format string, args ...any) {
	*s.out = append(*s.out, "\t"+fmt.Sprintf(format, args...))
}

// reg returns a fresh register for a value of kind k.
func (s *sel) reg(k kind) string {
	return s.regc(k.class())
}

func (s *sel) regc(rc regClass) string {
	s.f.nregs[rc]++
	return fmt.Sprintf("%s%d", regClassInfo[rc].prefix, s.f.nregs[rc])
}

func isReg(op string) bool { return strings.HasPrefix(op, "%") }

func movOp(k kind) string {
	switch k {
	case kPred:
		return "mov.pred"
	case kI8, kI16, kHalf:
		return "mov.b16"
	case kI32:
		return "mov.b32"
	case kF32:
		return "mov.f32"
	case kF64:
		return "mov.f64"
	}
	return "mov.b64"
}

// mov copies operand src (register or immediate) into register dst.
func (s *sel) mov(k kind, dst, src string) {
	if k == kPred && !isReg(src) {
		if src == "0" {
			src = "0"
		} else {
			src = "-1"
		}
	}
	s.emit("%s \t%s, %s;", movOp(k), dst, src)
}

// toReg returns op in a register, materializing an immediate.
func (s *sel) toReg(op string, k kind) string {
	if isReg(op) {
		return op
	}
	r := s.reg(k)
	s.mov(k, r, op)
	return r
}

func (s *sel) run() error {
	f := s.f
	entry := f.blocks[0]
	s.out = &entry.code
	if err := s.lowerParams(); err != nil {
		return err
	}
	for i, b := range f.blocks {
		s.out = &b.code
		var next *mblock
		if i+1 < len(f.blocks) {
			next = f.blocks[i+1]
		}
		s.inst = nil
		if err := s.parallelCopy(b.startCopies); err != nil {
			return err
		}
		for _, inst := range b.insts {
			s.inst = inst
			if err := s.lowerInst(inst); err != nil {
				return err
			}
		}
		s.inst = nil
		if err := s.parallelCopy(b.endCopies); err != nil {
			return err
		}
		if b.term != nil {
			s.inst = b.term
		}
		if err := s.lowerTerm(b, next); err != nil {
			return err
		}
		s.inst = nil
	}
	return nil
}

// define binds the lanes of v to regs; when v's registers were allocated by
// an earlier use (a use that precedes the definition in the layout), the
// values are moved there instead.
func (s *sel) define(v value.Value, regs []string) error {
	if old, ok := s.vals[v]; ok {
		if !s.pre[v] {
			return s.fail("internal: %s defined twice", v.Ident())
		}
		ks, err := laneKinds(v.Type())
		if err != nil {
			return s.fail("%v", err)
		}
		for i := range old {
			if old[i] != regs[i] {
				s.mov(ks[i], old[i], regs[i])
			}
		}
		delete(s.pre, v)
		return nil
	}
	// A lane that is an immediate (e.g. a folded constant) gets a register so
	// that every lowered value is in registers.
	ks, err := laneKinds(v.Type())
	if err != nil {
		return s.fail("%v", err)
	}
	if len(ks) != len(regs) {
		return s.fail("internal: %s has %d lanes, lowering made %d", v.Ident(), len(ks), len(regs))
	}
	out := make([]string, len(regs))
	for i, r := range regs {
		out[i] = s.toReg(r, ks[i])
	}
	s.vals[v] = out
	return nil
}

// lanes returns v's lane registers (constants materialized in registers).
func (s *sel) lanes(v value.Value) ([]string, []kind, error) {
	ops, ks, err := s.ops(v)
	if err != nil {
		return nil, nil, err
	}
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = s.toReg(op, ks[i])
	}
	return out, ks, nil
}

// lane1 is lanes for a scalar value.
func (s *sel) lane1(v value.Value) (string, kind, error) {
	rs, ks, err := s.lanes(v)
	if err != nil {
		return "", 0, err
	}
	if len(rs) != 1 {
		return "", 0, s.fail("%s: expected a scalar, got %s", v.Ident(), v.Type())
	}
	return rs[0], ks[0], nil
}

// op1 is ops for a scalar value.
func (s *sel) op1(v value.Value) (string, kind, error) {
	rs, ks, err := s.ops(v)
	if err != nil {
		return "", 0, err
	}
	if len(rs) != 1 {
		return "", 0, s.fail("%s: expected a scalar, got %s", v.Ident(), v.Type())
	}
	return rs[0], ks[0], nil
}

// ops2 is ops of x then of y (in that order, as their registers are
// emitted): the lanes of both operands of a binary instruction and x's lane
// kinds.
func (s *sel) ops2(x, y value.Value) (xs, ys []string, ks []kind, err error) {
	if xs, ks, err = s.ops(x); err != nil {
		return nil, nil, nil, err
	}
	if ys, _, err = s.ops(y); err != nil {
		return nil, nil, nil, err
	}
	return xs, ys, ks, nil
}

// ops returns v's lanes as operands: registers, or immediates for constant
// lanes.
func (s *sel) ops(v value.Value) ([]string, []kind, error) {
	ks, err := laneKinds(v.Type())
	if err != nil {
		return nil, nil, s.fail("%s: %v", v.Ident(), err)
	}
	if r, ok := s.vals[v]; ok {
		return r, ks, nil
	}
	val := v
	switch v := v.(type) {
	case *llir.Global:
		s.f.refs[v] = true
		r := s.reg(kPtr)
		s.emit("mov.u64 \t%s, %s;", r, s.c.syms[v])
		return []string{r}, ks, nil
	case *llir.Func:
		return nil, nil, s.fail("the address of function @%s cannot be used as a value (indirect calls are not supported)", v.Name())
	case *llir.Param:
		return nil, nil, s.fail("internal: parameter %s not loaded", v.Ident())
	case constant.Expression:
		r, err := s.constExpr(v)
		if err != nil {
			return nil, nil, err
		}
		return r, ks, nil
	case constant.Constant:
		imms, err := s.constLanes(v, ks)
		if err != nil {
			return nil, nil, err
		}
		return imms, ks, nil
	case llir.Instruction:
		_ = v
		// Used before its definition in the layout: allocate now.
		regs := make([]string, len(ks))
		for i, k := range ks {
			regs[i] = s.reg(k)
		}
		s.vals[val] = regs
		s.pre[val] = true
		return regs, ks, nil
	}
	return nil, nil, s.fail("operand %s (%T) is not supported", v.Ident(), v)
}

// constLanes returns the immediates of a constant's lanes.
func (s *sel) constLanes(c constant.Constant, ks []kind) ([]string, error) {
	var out []string
	var walk func(c constant.Constant) error
	walk = func(c constant.Constant) error {
		switch c := c.(type) {
		case *constant.Int:
			out = append(out, immInt(c.X, len(out), ks))
		case *constant.Float:
			imm, err := immFloat(c)
			if err != nil {
				return err
			}
			out = append(out, imm)
		case *constant.Null, *constant.ZeroInitializer, *constant.Undef, *constant.Poison:
			n, err := laneKinds(c.Type())
			if err != nil {
				return err
			}
			for _, k := range n {
				out = append(out, zeroImm(k))
			}
		case *constant.Vector:
			for _, e := range c.Elems {
				if err := walk(e); err != nil {
					return err
				}
			}
		case *constant.Struct:
			for _, e := range c.Fields {
				if err := walk(e); err != nil {
					return err
				}
			}
		case *constant.Array:
			for _, e := range c.Elems {
				if err := walk(e); err != nil {
					return err
				}
			}
		case *constant.CharArray:
			for _, b := range c.X {
				out = append(out, strconv.Itoa(int(int8(b))))
			}
		default:
			return fmt.Errorf("constant %s is not supported as an operand", c.Ident())
		}
		return nil
	}
	if err := walk(c); err != nil {
		return nil, s.fail("%v", err)
	}
	if len(out) != len(ks) {
		return nil, s.fail("internal: constant %s: %d lanes for %d kinds", c.Ident(), len(out), len(ks))
	}
	return out, nil
}

// zeroImm is the immediate of a zero of kind k (undef and poison lanes are
// zero too).
func zeroImm(k kind) string {
	switch k {
	case kF32:
		return "0f00000000"
	case kF64:
		return "0d0000000000000000"
	case kHalf:
		return "0x0000"
	}
	return "0"
}

// immInt is the immediate of integer constant x for lane i: its value at the
// lane's width, as a signed decimal (i1: "1" or "0").
func immInt(x *big.Int, i int, ks []kind) string {
	k := kI64
	if i < len(ks) {
		k = ks[i]
	}
	bits := k.bits()
	m := new(big.Int).Lsh(big.NewInt(1), uint(bits))
	v := new(big.Int).Mod(x, m) // 0 <= v < 2^bits
	if k == kPred {
		return v.String()
	}
	if v.Cmp(new(big.Int).Rsh(m, 1)) >= 0 {
		v.Sub(v, m)
	}
	return v.String()
}

// immFloat is the PTX immediate of a float constant: 0fXXXXXXXX (f32),
// 0dXXXXXXXXXXXXXXXX (f64), or the raw bits 0xXXXX of a half (for mov.b16).
func immFloat(c *constant.Float) (string, error) {
	switch c.Typ.Kind {
	case types.FloatKindFloat:
		if c.NaN {
			b := uint32(0x7FC00000)
			if c.X != nil && c.X.Signbit() {
				b |= 0x80000000
			}
			return fmt.Sprintf("0f%08X", b), nil
		}
		f, _ := c.X.Float32()
		return fmt.Sprintf("0f%08X", math.Float32bits(f)), nil
	case types.FloatKindDouble:
		if c.NaN {
			b := uint64(0x7FF8000000000000)
			if c.X != nil && c.X.Signbit() {
				b |= 1 << 63
			}
			return fmt.Sprintf("0d%016X", b), nil
		}
		f, _ := c.X.Float64()
		return fmt.Sprintf("0d%016X", math.Float64bits(f)), nil
	case types.FloatKindHalf:
		if c.NaN {
			b := uint16(0x7E00)
			if c.X != nil && c.X.Signbit() {
				b |= 0x8000
			}
			return fmt.Sprintf("0x%04X", b), nil
		}
		h, _ := binary16.NewFromBig(c.X)
		return fmt.Sprintf("0x%04X", h.Bits()), nil
	}
	return "", fmt.Errorf("float constant of type %s is not supported", c.Typ)
}

// immValue parses an integer immediate.
func immValue(op string) (int64, bool) {
	if isReg(op) {
		return 0, false
	}
	v, err := strconv.ParseInt(op, 0, 64)
	return v, err == nil
}

// constExpr lowers a constant expression operand into registers.
func (s *sel) constExpr(e constant.Expression) ([]string, error) {
	switch e := e.(type) {
	case *constant.ExprGetElementPtr:
		idx := make([]value.Value, len(e.Indices))
		for i, x := range e.Indices {
			if ix, ok := x.(*constant.Index); ok {
				x = ix.Constant
			}
			idx[i] = x
		}
		r, err := s.gep(e.ElemType, e.Src, idx)
		if err != nil {
			return nil, err
		}
		return []string{r}, nil
	case *constant.ExprBitCast:
		return s.bitcast(e.From, e.To)
	case *constant.ExprAddrSpaceCast:
		return s.convLanes("addrspacecast", e.From, e.To)
	case *constant.ExprPtrToInt:
		return s.convLanes("ptrtoint", e.From, e.To)
	case *constant.ExprIntToPtr:
		return s.convLanes("inttoptr", e.From, e.To)
	}
	return nil, s.fail("constant expression %s is not supported", e.Ident())
}

// parallelCopy performs the copies of one edge simultaneously: register
// moves are ordered so that no register is overwritten before every copy
// reading it ran; a cycle (e.g. a swap) is broken by saving one destination
// in a fresh register. Immediates are written last.
func (s *sel) parallelCopy(cps []pcopy) error {
	var regMoves, immMoves []move
	for _, cp := range cps {
		dsts, ks, err := s.lanes(cp.dst)
		if err != nil {
			return err
		}
		srcs, _, err := s.ops(cp.src)
		if err != nil {
			return err
		}
		for i := range dsts {
			switch {
			case srcs[i] == dsts[i]:
			case isReg(srcs[i]):
				regMoves = append(regMoves, move{dsts[i], srcs[i], ks[i]})
			default:
				immMoves = append(immMoves, move{dsts[i], srcs[i], ks[i]})
			}
		}
	}
	for _, m := range sequentialize(regMoves, func(k kind) string { return s.reg(k) }) {
		s.mov(m.k, m.dst, m.src)
	}
	for _, m := range immMoves {
		s.mov(m.k, m.dst, m.src)
	}
	return nil
}

// move is one register copy dst <- src of kind k.
type move struct {
	dst, src string
	k        kind
}

// sequentialize orders the parallel copies ms (distinct destinations) into
// sequential moves with the same effect, using temp for fresh registers to
// break cycles.
func sequentialize(ms []move, temp func(kind) string) []move {
	pending := append([]move(nil), ms...)
	var out []move
	for len(pending) > 0 {
		progress := false
		for i := 0; i < len(pending); i++ {
			m := pending[i]
			blocked := false
			for j, o := range pending {
				if j != i && o.src == m.dst {
					blocked = true
					break
				}
			}
			if blocked {
				continue
			}
			out = append(out, m)
			pending = append(pending[:i], pending[i+1:]...)
			progress = true
			break
		}
		if progress {
			continue
		}
		// Every pending destination is still read: all form cycles. Save one
		// destination and let its readers read the copy.
		m := pending[0]
		t := temp(m.k)
		out = append(out, move{t, m.dst, m.k})
		for j := range pending {
			if pending[j].src == m.dst {
				pending[j].src = t
			}
		}
	}
	return out
}

// branch jumps to t unless t is the next block in the layout.
func (s *sel) branch(t, next *mblock) {
	if t != next {
		s.emit("bra.uni \t%s;", t.label)
	}
}

func (s *sel) lowerTerm(b *mblock, next *mblock) error {
	f := s.f
	if b.jump != nil {
		s.branch(b.jump, next)
		return nil
	}
	succs, err := f.succs(b)
	if err != nil {
		return s.fail("%v", err)
	}
	switch t := b.term.(type) {
	case *llir.TermBr:
		s.branch(succs[0], next)
	case *llir.TermCondBr:
		tt, _ := f.target(b, t.TargetTrue)
		ft, _ := f.target(b, t.TargetFalse)
		if tt == ft {
			s.branch(tt, next)
			return nil
		}
		c, ck, err := s.op1(t.Cond)
		if err != nil {
			return err
		}
		if ck != kPred {
			return s.fail("branch condition is not i1")
		}
		if !isReg(c) {
			if c == "0" {
				s.branch(ft, next)
			} else {
				s.branch(tt, next)
			}
			return nil
		}
		if tt == next {
			s.emit("@!%s bra \t%s;", c, ft.label)
			return nil
		}
		s.emit("@%s bra \t%s;", c, tt.label)
		s.branch(ft, next)
	case *llir.TermSwitch:
		return s.lowerSwitch(b, t, next)
	case *llir.TermRet:
		if t.X != nil {
			if f.kernel {
				return s.fail("a kernel cannot return a value")
			}
			x, k, err := s.lane1(t.X)
			if err != nil {
				return err
			}
			s.storeParam(k, "func_retval0", x)
		}
		s.emit("ret;")
	case *llir.TermUnreachable:
		s.emit("trap;")
		s.emit("exit;")
	default:
		return s.fail("terminator is not supported")
	}
	return nil
}

func (s *sel) lowerSwitch(b *mblock, t *llir.TermSwitch, next *mblock) error {
	f := s.f
	def, err := f.target(b, t.TargetDefault)
	if err != nil {
		return s.fail("%v", err)
	}
	type arm struct {
		v  *big.Int
		to *mblock
	}
	var arms []arm
	same := true
	for _, c := range t.Cases {
		ci, ok := c.X.(*constant.Int)
		if !ok {
			return s.fail("switch case %s is not an integer constant", c.X.Ident())
		}
		to, err := f.target(b, c.Target)
		if err != nil {
			return s.fail("%v", err)
		}
		if to != def {
			same = false
		}
		arms = append(arms, arm{ci.X, to})
	}
	if same {
		s.branch(def, next)
		return nil
	}
	x, k, err := s.op1(t.X)
	if err != nil {
		return err
	}
	if !isReg(x) {
		v, _ := new(big.Int).SetString(x, 10)
		to := def
		for _, a := range arms {
			if immInt(a.v, 0, []kind{k}) == immInt(v, 0, []kind{k}) {
				to = a.to
				break
			}
		}
		s.branch(to, next)
		return nil
	}
	if k == kPred {
		for _, a := range arms {
			if a.to == def {
				continue
			}
			if a.v.Bit(0) == 1 {
				s.emit("@%s bra \t%s;", x, a.to.label)
			} else {
				s.emit("@!%s bra \t%s;", x, a.to.label)
			}
		}
		s.branch(def, next)
		return nil
	}
	x = s.zext8(x, k)
	for _, a := range arms {
		if a.to == def {
			continue
		}
		imm := immInt(a.v, 0, []kind{k})
		if k == kI8 {
			v, _ := strconv.ParseInt(imm, 10, 64)
			imm = strconv.FormatInt(v&0xFF, 10)
		}
		p := s.reg(kPred)
		s.emit("setp.eq.s%d \t%s, %s, %s;", k.regBits(), p, x, imm)
		s.emit("@%s bra \t%s;", p, a.to.label)
	}
	s.branch(def, next)
	return nil
}

// zext8 returns op with an i8's undefined upper bits cleared (other kinds
// unchanged).
func (s *sel) zext8(op string, k kind) string {
	if k != kI8 {
		return op
	}
	if v, ok := immValue(op); ok {
		return strconv.FormatInt(v&0xFF, 10)
	}
	r := s.reg(kI16)
	s.emit("and.b16 \t%s, %s, 255;", r, op)
	return r
}

// sext8 returns op with an i8 sign-extended to the whole .b16 register.
func (s *sel) sext8(op string, k kind) string {
	if k != kI8 {
		return op
	}
	if v, ok := immValue(op); ok {
		return strconv.FormatInt(int64(int8(v)), 10)
	}
	r := s.reg(kI16)
	s.emit("cvt.s16.s8 \t%s, %s;", r, op)
	return r
}

func (s *sel) lowerInst(inst llir.Instruction) error {
	switch inst := inst.(type) {
	case *llir.InstAdd:
		return s.binary(inst, "add", inst.X, inst.Y)
	case *llir.InstSub:
		return s.binary(inst, "sub", inst.X, inst.Y)
	case *llir.InstMul:
		return s.binary(inst, "mul", inst.X, inst.Y)
	case *llir.InstUDiv:
		return s.binary(inst, "udiv", inst.X, inst.Y)
	case *llir.InstSDiv:
		return s.binary(inst, "sdiv", inst.X, inst.Y)
	case *llir.InstURem:
		return s.binary(inst, "urem", inst.X, inst.Y)
	case *llir.InstSRem:
		return s.binary(inst, "srem", inst.X, inst.Y)
	case *llir.InstShl:
		return s.binary(inst, "shl", inst.X, inst.Y)
	case *llir.InstLShr:
		return s.binary(inst, "lshr", inst.X, inst.Y)
	case *llir.InstAShr:
		return s.binary(inst, "ashr", inst.X, inst.Y)
	case *llir.InstAnd:
		return s.binary(inst, "and", inst.X, inst.Y)
	case *llir.InstOr:
		return s.binary(inst, "or", inst.X, inst.Y)
	case *llir.InstXor:
		return s.binary(inst, "xor", inst.X, inst.Y)
	case *llir.InstFAdd:
		return s.binary(inst, "fadd", inst.X, inst.Y)
	case *llir.InstFSub:
		return s.binary(inst, "fsub", inst.X, inst.Y)
	case *llir.InstFMul:
		return s.binary(inst, "fmul", inst.X, inst.Y)
	case *llir.InstFDiv:
		return s.binary(inst, "fdiv", inst.X, inst.Y)
	case *llir.InstFNeg:
		return s.fneg(inst)
	case *llir.InstICmp:
		return s.icmp(inst)
	case *llir.InstFCmp:
		return s.fcmp(inst)
	case *llir.InstSelect:
		return s.selectInst(inst)
	case *llir.InstFreeze:
		ops, _, err := s.ops(inst.X)
		if err != nil {
			return err
		}
		return s.define(inst, ops)
	case *llir.InstTrunc:
		return s.conv(inst, "trunc", inst.From, inst.To)
	case *llir.InstZExt:
		return s.conv(inst, "zext", inst.From, inst.To)
	case *llir.InstSExt:
		return s.conv(inst, "sext", inst.From, inst.To)
	case *llir.InstFPTrunc:
		return s.conv(inst, "fptrunc", inst.From, inst.To)
	case *llir.InstFPExt:
		return s.conv(inst, "fpext", inst.From, inst.To)
	case *llir.InstFPToUI:
		return s.conv(inst, "fptoui", inst.From, inst.To)
	case *llir.InstFPToSI:
		return s.conv(inst, "fptosi", inst.From, inst.To)
	case *llir.InstUIToFP:
		return s.conv(inst, "uitofp", inst.From, inst.To)
	case *llir.InstSIToFP:
		return s.conv(inst, "sitofp", inst.From, inst.To)
	case *llir.InstPtrToInt:
		return s.conv(inst, "ptrtoint", inst.From, inst.To)
	case *llir.InstIntToPtr:
		return s.conv(inst, "inttoptr", inst.From, inst.To)
	case *llir.InstAddrSpaceCast:
		return s.conv(inst, "addrspacecast", inst.From, inst.To)
	case *llir.InstBitCast:
		r, err := s.bitcast(inst.From, inst.To)
		if err != nil {
			return err
		}
		return s.define(inst, r)
	case *llir.InstGetElementPtr:
		if _, ok := inst.Typ.(*types.VectorType); ok {
			return s.fail("vector getelementptr is not supported")
		}
		r, err := s.gep(inst.ElemType, inst.Src, inst.Indices)
		if err != nil {
			return err
		}
		return s.define(inst, []string{r})
	case *llir.InstLoad:
		return s.load(inst)
	case *llir.InstStore:
		return s.store(inst)
	case *llir.InstAlloca:
		return s.alloca(inst)
	case *llir.InstAtomicRMW:
		return s.atomicRMW(inst)
	case *llir.InstCmpXchg:
		return s.cmpxchg(inst)
	case *llir.InstFence:
		return s.fence(inst)
	case *llir.InstExtractValue, *llir.InstInsertValue, *llir.InstExtractElement,
		*llir.InstInsertElement, *llir.InstShuffleVector:
		return s.aggregate(inst)
	case *llir.InstCall:
		return s.call(inst)
	}
	return s.fail("instruction is not supported")
}
