package ptx

import (
	"fmt"
	"strconv"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// binary lowers an integer or floating-point binary instruction, lane by
// lane for vectors.
func (s *sel) binary(inst value.Value, op string, x, y value.Value) error {
	xs, ks, err := s.ops(x)
	if err != nil {
		return err
	}
	ys, _, err := s.ops(y)
	if err != nil {
		return err
	}
	res := make([]string, len(xs))
	for i := range xs {
		if res[i], err = s.binScalar(op, ks[i], xs[i], ys[i]); err != nil {
			return err
		}
	}
	return s.define(inst, res)
}

func (s *sel) binScalar(op string, k kind, a, b string) (string, error) {
	switch {
	case k == kPred:
		return s.predBin(op, a, b)
	case k.isInt():
		return s.intBin(op, k, a, b)
	case k.isFloat():
		return s.floatBin(op, k, a, b)
	}
	return "", s.fail("%s on pointers is not supported", op)
}

// predBin is i1 arithmetic: modulo 2, add/sub/xor are xor and mul is and;
// division by the only non-poison divisor (1, or -1 when signed) is the
// identity and the remainder 0; a shift by the only non-poison amount 0 is
// the identity.
func (s *sel) predBin(op, a, b string) (string, error) {
	a = s.toReg(a, kPred)
	b = s.toReg(b, kPred)
	d := s.reg(kPred)
	switch op {
	case "add", "sub", "xor":
		s.emit("xor.pred \t%s, %s, %s;", d, a, b)
	case "mul", "and":
		s.emit("and.pred \t%s, %s, %s;", d, a, b)
	case "or":
		s.emit("or.pred \t%s, %s, %s;", d, a, b)
	case "udiv", "sdiv", "shl", "lshr", "ashr":
		return a, nil
	case "urem", "srem":
		s.mov(kPred, d, "0")
	default:
		return "", s.fail("%s on i1 is not supported", op)
	}
	return d, nil
}

// intBin is integer arithmetic on i8/i16/i32/i64 (PTX ISA 9.7.1, 9.7.8).
// Shift amounts are converted to the .u32 PTX requires; PTX clamps amounts
// >= the width (shl/shr.u give 0, shr.s the sign), where LLVM's result is
// poison, so any result is correct. Division and remainder by zero and
// INT_MIN / -1 are undefined behaviour in LLVM.
func (s *sel) intBin(op string, k kind, a, b string) (string, error) {
	w := k.regBits()
	d := s.reg(k)
	switch op {
	case "add", "sub":
		s.emit("%s.s%d \t%s, %s, %s;", op, w, d, s.toReg(a, k), b)
	case "mul":
		s.emit("mul.lo.s%d \t%s, %s, %s;", w, d, s.toReg(a, k), b)
	case "and", "or", "xor":
		s.emit("%s.b%d \t%s, %s, %s;", op, w, d, s.toReg(a, k), b)
	case "udiv", "urem":
		a, b = s.zext8(s.toReg(a, k), k), s.toReg(s.zext8(b, k), k)
		s.emit("%s.u%d \t%s, %s, %s;", map[string]string{"udiv": "div", "urem": "rem"}[op], w, d, a, b)
	case "sdiv", "srem":
		a, b = s.sext8(s.toReg(a, k), k), s.toReg(s.sext8(b, k), k)
		s.emit("%s.s%d \t%s, %s, %s;", map[string]string{"sdiv": "div", "srem": "rem"}[op], w, d, a, b)
	case "shl":
		s.emit("shl.b%d \t%s, %s, %s;", w, d, s.toReg(a, k), s.shiftAmount(b, k))
	case "lshr":
		s.emit("shr.u%d \t%s, %s, %s;", w, d, s.zext8(s.toReg(a, k), k), s.shiftAmount(b, k))
	case "ashr":
		s.emit("shr.s%d \t%s, %s, %s;", w, d, s.sext8(s.toReg(a, k), k), s.shiftAmount(b, k))
	default:
		return "", s.fail("%s is not an integer operation", op)
	}
	return d, nil
}

// shiftAmount converts a shift amount of kind k to a .u32 operand.
func (s *sel) shiftAmount(b string, k kind) string {
	if v, ok := immValue(b); ok {
		u := uint64(v) & (1<<uint(k.bits()) - 1)
		if u > uint64(k.bits()) {
			u = uint64(k.bits()) // poison in LLVM; PTX clamps the same way
		}
		return strconv.FormatUint(u, 10)
	}
	switch k {
	case kI8:
		r := s.reg(kI32)
		s.emit("cvt.u32.u8 \t%s, %s;", r, b)
		return r
	case kI16:
		r := s.reg(kI32)
		s.emit("cvt.u32.u16 \t%s, %s;", r, b)
		return r
	case kI64:
		r := s.reg(kI32)
		s.emit("cvt.u32.u64 \t%s, %s;", r, b)
		return r
	}
	return b
}

// floatBin is IEEE arithmetic with round-to-nearest-even written out
// (.rn), which also keeps ptxas from contracting mul+add into fma, as LLVM's
// NVPTX backend does without fast-math (PTX ISA 9.7.3). Half division goes
// through f32 (exact: 24 >= 2*11+2 bits, so the double rounding is
// innocuous), as llc does.
func (s *sel) floatBin(op string, k kind, a, b string) (string, error) {
	f := k.fsuf()
	a = s.toReg(a, k)
	if k == kHalf {
		b = s.toReg(b, k)
	}
	d := s.reg(k)
	switch op {
	case "fadd":
		s.emit("add.rn.%s \t%s, %s, %s;", f, d, a, b)
	case "fsub":
		s.emit("sub.rn.%s \t%s, %s, %s;", f, d, a, b)
	case "fmul":
		s.emit("mul.rn.%s \t%s, %s, %s;", f, d, a, b)
	case "fdiv":
		if k == kHalf {
			fa, fb, fd := s.reg(kF32), s.reg(kF32), s.reg(kF32)
			s.emit("cvt.f32.f16 \t%s, %s;", fa, a)
			s.emit("cvt.f32.f16 \t%s, %s;", fb, b)
			s.emit("div.rn.f32 \t%s, %s, %s;", fd, fa, fb)
			s.emit("cvt.rn.f16.f32 \t%s, %s;", d, fd)
		} else {
			s.emit("div.rn.%s \t%s, %s, %s;", f, d, a, b)
		}
	default:
		return "", s.fail("%s is not a floating-point operation", op)
	}
	return d, nil
}

// fneg is neg.fN, as llc emits (PTX leaves the sign of a negated NaN
// unspecified; the hardware flips it).
func (s *sel) fneg(inst *llir.InstFNeg) error {
	xs, ks, err := s.lanes(inst.X)
	if err != nil {
		return err
	}
	res := make([]string, len(xs))
	for i, x := range xs {
		if !ks[i].isFloat() {
			return s.fail("fneg of a non-float")
		}
		res[i] = s.reg(ks[i])
		s.emit("neg.%s \t%s, %s;", ks[i].fsuf(), res[i], x)
	}
	return s.define(inst, res)
}

var icmpOps = map[enum.IPred]struct {
	cmp  string
	sign byte // 's' signed, 'u' unsigned, 'e' equality
}{
	enum.IPredEQ: {"eq", 'e'}, enum.IPredNE: {"ne", 'e'},
	enum.IPredSGT: {"gt", 's'}, enum.IPredSGE: {"ge", 's'}, enum.IPredSLT: {"lt", 's'}, enum.IPredSLE: {"le", 's'},
	enum.IPredUGT: {"gt", 'u'}, enum.IPredUGE: {"ge", 'u'}, enum.IPredULT: {"lt", 'u'}, enum.IPredULE: {"le", 'u'},
}

func (s *sel) icmp(inst *llir.InstICmp) error {
	xs, ys, ks, err := s.ops2(inst.X, inst.Y)
	if err != nil {
		return err
	}
	res := make([]string, len(xs))
	for i := range xs {
		if res[i], err = s.icmpScalar(inst.Pred, ks[i], xs[i], ys[i]); err != nil {
			return err
		}
	}
	return s.define(inst, res)
}

// icmpScalar compares integers or pointers with setp (PTX ISA 9.7.7.1). i1
// operands are widened to 16 bits (1 or -1 for true, by signedness).
func (s *sel) icmpScalar(pred enum.IPred, k kind, a, b string) (string, error) {
	op, ok := icmpOps[pred]
	if !ok {
		return "", s.fail("icmp predicate %s is not supported", pred)
	}
	if k == kPred {
		t := "1"
		if op.sign == 's' {
			t = "-1"
		}
		wa, wb := s.reg(kI16), s.reg(kI16)
		s.emit("selp.s16 \t%s, %s, 0, %s;", wa, t, s.toReg(a, kPred))
		s.emit("selp.s16 \t%s, %s, 0, %s;", wb, t, s.toReg(b, kPred))
		a, b, k = wa, wb, kI16
	}
	if k.isFloat() {
		return "", s.fail("icmp on floating point")
	}
	a = s.toReg(a, k)
	if op.sign == 's' {
		a, b = s.sext8(a, k), s.sext8(b, k)
	} else {
		a, b = s.zext8(a, k), s.zext8(b, k)
	}
	t := "s"
	if op.sign == 'u' {
		t = "u"
	}
	d := s.reg(kPred)
	s.emit("setp.%s.%s%d \t%s, %s, %s;", op.cmp, t, k.regBits(), d, a, b)
	return d, nil
}

// fcmpOps maps LLVM's ordered predicates to PTX's ordered comparisons (false
// when an operand is NaN) and unordered ones to the u-suffixed forms (true
// when an operand is NaN); ord is num, uno is nan (PTX ISA 9.7.7.1,
// "Floating Point Comparison Operators").
var fcmpOps = map[enum.FPred]string{
	enum.FPredOEQ: "eq", enum.FPredONE: "ne", enum.FPredOLT: "lt", enum.FPredOLE: "le", enum.FPredOGT: "gt", enum.FPredOGE: "ge",
	enum.FPredUEQ: "equ", enum.FPredUNE: "neu", enum.FPredULT: "ltu", enum.FPredULE: "leu", enum.FPredUGT: "gtu", enum.FPredUGE: "geu",
	enum.FPredORD: "num", enum.FPredUNO: "nan",
}

func (s *sel) fcmp(inst *llir.InstFCmp) error {
	xs, ys, ks, err := s.ops2(inst.X, inst.Y)
	if err != nil {
		return err
	}
	res := make([]string, len(xs))
	for i := range xs {
		k := ks[i]
		d := s.reg(kPred)
		res[i] = d
		switch inst.Pred {
		case enum.FPredFalse:
			s.mov(kPred, d, "0")
			continue
		case enum.FPredTrue:
			s.mov(kPred, d, "1")
			continue
		}
		op, ok := fcmpOps[inst.Pred]
		if !ok || !k.isFloat() {
			return s.fail("fcmp %s on %s is not supported", inst.Pred, inst.X.Type())
		}
		a, b := s.toReg(xs[i], k), ys[i]
		if k == kHalf {
			b = s.toReg(b, k)
		}
		s.emit("setp.%s.%s \t%s, %s, %s;", op, k.fsuf(), d, a, b)
	}
	return s.define(inst, res)
}

func selpType(k kind) string {
	switch k {
	case kI8, kI16, kHalf:
		return "b16"
	case kI32:
		return "b32"
	case kF32:
		return "f32"
	case kF64:
		return "f64"
	}
	return "b64"
}

func (s *sel) selectInst(inst *llir.InstSelect) error {
	cs, cks, err := s.ops(inst.Cond)
	if err != nil {
		return err
	}
	ts, fs, ks, err := s.ops2(inst.ValueTrue, inst.ValueFalse)
	if err != nil {
		return err
	}
	if cks[0] != kPred {
		return s.fail("select condition is not i1")
	}
	res := make([]string, len(ts))
	for i := range ts {
		c := cs[0]
		if len(cs) > 1 {
			c = cs[i]
		}
		res[i] = s.selectScalar(ks[i], c, ts[i], fs[i])
	}
	return s.define(inst, res)
}

// selectScalar is c ? a : b: selp for values in registers, predicate logic
// for i1 (selp has no .pred form).
func (s *sel) selectScalar(k kind, c, a, b string) string {
	if !isReg(c) {
		if c == "0" {
			return b
		}
		return a
	}
	if k == kPred {
		a, b = s.toReg(a, kPred), s.toReg(b, kPred)
		t1, nc, t2, d := s.reg(kPred), s.reg(kPred), s.reg(kPred), s.reg(kPred)
		s.emit("and.pred \t%s, %s, %s;", t1, c, a)
		s.emit("not.pred \t%s, %s;", nc, c)
		s.emit("and.pred \t%s, %s, %s;", t2, nc, b)
		s.emit("or.pred \t%s, %s, %s;", d, t1, t2)
		return d
	}
	if !k.isInt() && k != kPtr {
		a, b = s.toReg(a, k), s.toReg(b, k)
	}
	d := s.reg(k)
	s.emit("selp.%s \t%s, %s, %s, %s;", selpType(k), d, a, b, c)
	return d
}

// conv lowers a conversion instruction.
func (s *sel) conv(inst value.Value, op string, from value.Value, to types.Type) error {
	r, err := s.convLanes(op, from, to)
	if err != nil {
		return err
	}
	return s.define(inst, r)
}

func (s *sel) convLanes(op string, from value.Value, to types.Type) ([]string, error) {
	if op == "addrspacecast" {
		if r, ok, err := s.paramSpaceCast(from, to); ok || err != nil {
			return r, err
		}
	}
	xs, fks, err := s.ops(from)
	if err != nil {
		return nil, err
	}
	tks, err := laneKinds(to)
	if err != nil {
		return nil, s.fail("%v", err)
	}
	if len(tks) != len(xs) {
		return nil, s.fail("%s changes the number of lanes", op)
	}
	res := make([]string, len(xs))
	for i := range xs {
		var fas, tas types.AddrSpace
		if op == "addrspacecast" {
			fas, tas = laneAddrSpace(from.Type(), i), laneAddrSpace(to, i)
		}
		if res[i], err = s.convScalar(op, fks[i], tks[i], s.toReg(xs[i], fks[i]), fas, tas); err != nil {
			return nil, err
		}
	}
	return res, nil
}

func laneAddrSpace(t types.Type, i int) types.AddrSpace {
	lts, _ := laneTypes(t)
	if i < len(lts) {
		if pt, ok := lts[i].(*types.PointerType); ok {
			return pt.AddrSpace
		}
	}
	return 0
}

// convScalar converts register a of kind fk to kind tk (PTX ISA 9.7.9.21,
// cvt). fptosi/fptoui use .rzi (round toward zero): out-of-range inputs
// saturate in PTX where LLVM's result is poison, and NaN gives 0.
func (s *sel) convScalar(op string, fk, tk kind, a string, fas, tas types.AddrSpace) (string, error) {
	bad := func() (string, error) {
		return "", s.fail("%s from %s to %s is not supported", op, kindName(fk), kindName(tk))
	}
	d := func() string { return s.reg(tk) }
	w := tk.regBits()
	switch op {
	case "trunc":
		if !fk.isInt() || (!tk.isInt() && tk != kPred) || fk.bits() <= tk.bits() {
			return bad()
		}
		if tk == kPred {
			return s.lowBit(a, fk), nil
		}
		if fk.regBits() == tk.regBits() {
			return a, nil // i16 -> i8: the low bits are the value
		}
		r := d()
		s.emit("cvt.u%d.u%d \t%s, %s;", w, fk.regBits(), r, a)
		return r, nil
	case "zext", "sext":
		if (!fk.isInt() && fk != kPred) || !tk.isInt() || fk.bits() >= tk.bits() {
			return bad()
		}
		r := d()
		if fk == kPred {
			if op == "zext" {
				s.emit("selp.u%d \t%s, 1, 0, %s;", w, r, a)
			} else {
				s.emit("selp.s%d \t%s, -1, 0, %s;", w, r, a)
			}
			return r, nil
		}
		t := "u"
		if op == "sext" {
			t = "s"
		}
		if fk == kI8 && tk == kI16 {
			if op == "zext" {
				s.emit("and.b16 \t%s, %s, 255;", r, a)
			} else {
				s.emit("cvt.s16.s8 \t%s, %s;", r, a)
			}
			return r, nil
		}
		s.emit("cvt.%s%d.%s%d \t%s, %s;", t, w, t, fk.bits(), r, a)
		return r, nil
	case "fptrunc", "fpext":
		if !fk.isFloat() || !tk.isFloat() || (op == "fptrunc") != (fk.bits() > tk.bits()) || fk == tk {
			return bad()
		}
		r := d()
		if op == "fptrunc" {
			s.emit("cvt.rn.%s.%s \t%s, %s;", tk.fsuf(), fk.fsuf(), r, a)
		} else {
			s.emit("cvt.%s.%s \t%s, %s;", tk.fsuf(), fk.fsuf(), r, a)
		}
		return r, nil
	case "fptosi", "fptoui":
		if !fk.isFloat() || (!tk.isInt() && tk != kPred) {
			return bad()
		}
		t := "s"
		if op == "fptoui" {
			t = "u"
		}
		if tk == kPred {
			// The only defined results are 0 and 1 (-1 signed): any non-zero
			// truncation is true.
			i, p := s.reg(kI32), s.reg(kPred)
			s.emit("cvt.rzi.s32.%s \t%s, %s;", fk.fsuf(), i, a)
			s.emit("setp.ne.s32 \t%s, %s, 0;", p, i)
			return p, nil
		}
		r := d()
		s.emit("cvt.rzi.%s%d.%s \t%s, %s;", t, w, fk.fsuf(), r, a)
		return r, nil
	case "sitofp", "uitofp":
		if (!fk.isInt() && fk != kPred) || !tk.isFloat() {
			return bad()
		}
		t := "s"
		if op == "uitofp" {
			t = "u"
		}
		fw := fk.regBits()
		switch fk {
		case kPred:
			i := s.reg(kI32)
			if t == "s" {
				s.emit("selp.s32 \t%s, -1, 0, %s;", i, a)
			} else {
				s.emit("selp.u32 \t%s, 1, 0, %s;", i, a)
			}
			a, fw = i, 32
		case kI8:
			if t == "s" {
				a = s.sext8(a, fk)
			} else {
				a = s.zext8(a, fk)
			}
		}
		r := d()
		s.emit("cvt.rn.%s.%s%d \t%s, %s;", tk.fsuf(), t, fw, r, a)
		return r, nil
	case "ptrtoint":
		if fk != kPtr || (!tk.isInt() && tk != kPred) {
			return bad()
		}
		switch tk {
		case kI64:
			return a, nil
		case kPred:
			return s.lowBit(a, kI64), nil
		}
		r := d()
		s.emit("cvt.u%d.u64 \t%s, %s;", w, r, a)
		return r, nil
	case "inttoptr":
		if !fk.isInt() || tk != kPtr {
			return bad()
		}
		if fk == kI64 {
			return a, nil
		}
		r := d()
		s.emit("cvt.u64.u%d \t%s, %s;", fk.bits(), r, a)
		return r, nil
	case "addrspacecast":
		if fk != kPtr || tk != kPtr {
			return bad()
		}
		if fas == tas {
			return a, nil
		}
		space := map[types.AddrSpace]string{asGlobal: "global", asShared: "shared", asLocal: "local", asConst: "const", asParam: "param"}
		r := d()
		switch {
		case fas == asGeneric && space[tas] != "" && tas != asParam:
			s.emit("cvta.to.%s.u64 \t%s, %s;", space[tas], r, a)
		case tas == asGeneric && space[fas] != "":
			s.emit("cvta.%s.u64 \t%s, %s;", space[fas], r, a)
		default:
			return "", s.fail("addrspacecast from address space %d to %d is not supported (casts go through the generic space 0)", fas, tas)
		}
		return r, nil
	}
	return bad()
}

// lowBit is trunc to i1: the lowest bit of a.
func (s *sel) lowBit(a string, k kind) string {
	t, p := s.reg(k), s.reg(kPred)
	w := k.regBits()
	s.emit("and.b%d \t%s, %s, 1;", w, t, a)
	s.emit("setp.eq.b%d \t%s, %s, 1;", w, p, t)
	return p
}

// paramSpaceCast handles addrspacecast of a kernel's byval parameter to the
// param space (101): the address of the parameter itself, `mov.b64 %rd,
// name` (PTX ISA 5.1.6.1, kernel parameters).
func (s *sel) paramSpaceCast(from value.Value, to types.Type) ([]string, bool, error) {
	pt, ok := to.(*types.PointerType)
	if !ok || pt.AddrSpace != asParam {
		return nil, false, nil
	}
	p, ok := from.(*llir.Param)
	if !ok {
		return nil, true, s.fail("addrspacecast to the param space (101) works only on a byval kernel parameter itself")
	}
	for _, pi := range s.f.params {
		if pi.ir == p && pi.info.ByVal && s.f.kernel {
			r := s.reg(kPtr)
			s.emit("mov.b64 \t%s, %s;", r, pi.info.Name)
			return []string{r}, true, nil
		}
	}
	return nil, true, s.fail("addrspacecast to the param space (101) works only on a byval kernel parameter")
}

func kindName(k kind) string {
	return [...]string{"i1", "i8", "i16", "half", "i32", "float", "i64", "double", "ptr"}[k]
}

// bitcast reinterprets the bits of from as type to. Scalars of one register
// class are renamed; others move through mov.bN, vectors through 32-bit
// words (mov.b32 {a,b} packs and unpacks 16-bit lanes, bfe/bfi 8-bit lanes,
// mov.b64 {lo,hi} 64-bit lanes).
func (s *sel) bitcast(from value.Value, to types.Type) ([]string, error) {
	xs, fks, err := s.lanes(from)
	if err != nil {
		return nil, err
	}
	tks, err := laneKinds(to)
	if err != nil {
		return nil, s.fail("%v", err)
	}
	bitsOf := func(ks []kind) int {
		n := 0
		for _, k := range ks {
			n += k.bits()
		}
		return n
	}
	if bitsOf(fks) != bitsOf(tks) {
		return nil, s.fail("bitcast between types of different sizes")
	}
	if len(xs) == len(tks) {
		same := true
		for i := range fks {
			if fks[i].class() != tks[i].class() {
				same = false
			}
		}
		if same {
			return xs, nil
		}
		if len(xs) == 1 && fks[0].bits() == tks[0].bits() && fks[0] != kPred {
			r := s.reg(tks[0])
			s.emit("mov.b%d \t%s, %s;", fks[0].bits(), r, xs[0])
			return []string{r}, nil
		}
	}
	for _, k := range append(append([]kind{}, fks...), tks...) {
		if k == kPred {
			return nil, s.fail("bitcast of i1 vectors is not supported")
		}
	}
	if bitsOf(fks)%32 != 0 {
		return nil, s.fail("bitcast of a %d-bit vector is not supported (multiples of 32 bits are)", bitsOf(fks))
	}
	words := s.packWords(xs, fks)
	return s.unpackWords(words, tks), nil
}

// packWords packs lanes into 32-bit words, lowest lane in the lowest bits
// (little-endian, as LLVM lays out vectors).
func (s *sel) packWords(xs []string, ks []kind) []string {
	var words []string
	for i := 0; i < len(xs); {
		switch ks[i].bits() {
		case 64:
			lo, hi := s.reg(kI32), s.reg(kI32)
			s.emit("mov.b64 \t{%s, %s}, %s;", lo, hi, xs[i])
			words = append(words, lo, hi)
			i++
		case 32:
			if ks[i] == kF32 {
				r := s.reg(kI32)
				s.emit("mov.b32 \t%s, %s;", r, xs[i])
				words = append(words, r)
			} else {
				words = append(words, xs[i])
			}
			i++
		case 16:
			r := s.reg(kI32)
			s.emit("mov.b32 \t%s, {%s, %s};", r, xs[i], xs[i+1])
			words = append(words, r)
			i += 2
		case 8:
			var acc string
			for j := 0; j < 4; j++ {
				t := s.reg(kI32)
				s.emit("cvt.u32.u16 \t%s, %s;", t, xs[i+j])
				if j == 0 {
					acc = t
					continue
				}
				n := s.reg(kI32)
				s.emit("bfi.b32 \t%s, %s, %s, %d, 8;", n, t, acc, 8*j)
				acc = n
			}
			words = append(words, acc)
			i += 4
		}
	}
	return words
}

// unpackWords is the inverse of packWords for lanes of kinds ks.
func (s *sel) unpackWords(words []string, ks []kind) []string {
	var out []string
	w := 0
	for i := 0; i < len(ks); {
		k := ks[i]
		switch k.bits() {
		case 64:
			r := s.reg(k)
			s.emit("mov.b64 \t%s, {%s, %s};", r, words[w], words[w+1])
			out = append(out, r)
			w += 2
			i++
		case 32:
			if k == kF32 {
				r := s.reg(k)
				s.emit("mov.b32 \t%s, %s;", r, words[w])
				out = append(out, r)
			} else {
				out = append(out, words[w])
			}
			w++
			i++
		case 16:
			a, b := s.reg(k), s.reg(ks[i+1])
			s.emit("mov.b32 \t{%s, %s}, %s;", a, b, words[w])
			out = append(out, a, b)
			w++
			i += 2
		case 8:
			for j := 0; j < 4; j++ {
				t, r := s.reg(kI32), s.reg(k)
				s.emit("bfe.u32 \t%s, %s, %d, 8;", t, words[w], 8*j)
				s.emit("cvt.u16.u32 \t%s, %s;", r, t)
				out = append(out, r)
			}
			w++
			i += 4
		}
	}
	return out
}

// aggregate lowers extractvalue/insertvalue/extractelement/insertelement/
// shufflevector: pure lane renaming (constant indices only).
func (s *sel) aggregate(inst llir.Instruction) error {
	switch inst := inst.(type) {
	case *llir.InstExtractValue:
		xs, _, err := s.ops(inst.X)
		if err != nil {
			return err
		}
		lo, n, err := laneRange(inst.X.Type(), inst.Indices)
		if err != nil {
			return s.fail("%v", err)
		}
		return s.define(inst, xs[lo:lo+n])
	case *llir.InstInsertValue:
		xs, es, _, err := s.ops2(inst.X, inst.Elem)
		if err != nil {
			return err
		}
		lo, n, err := laneRange(inst.X.Type(), inst.Indices)
		if err != nil {
			return s.fail("%v", err)
		}
		out := append([]string{}, xs...)
		copy(out[lo:lo+n], es)
		return s.define(inst, out)
	case *llir.InstExtractElement:
		xs, _, err := s.ops(inst.X)
		if err != nil {
			return err
		}
		i, err := s.constIndex(inst.Index, len(xs))
		if err != nil {
			return err
		}
		return s.define(inst, xs[i:i+1])
	case *llir.InstInsertElement:
		xs, _, err := s.ops(inst.X)
		if err != nil {
			return err
		}
		e, _, err := s.op1(inst.Elem)
		if err != nil {
			return err
		}
		i, err := s.constIndex(inst.Index, len(xs))
		if err != nil {
			return err
		}
		out := append([]string{}, xs...)
		out[i] = e
		return s.define(inst, out)
	case *llir.InstShuffleVector:
		xs, ys, _, err := s.ops2(inst.X, inst.Y)
		if err != nil {
			return err
		}
		all := append(append([]string{}, xs...), ys...)
		var mask []constant.Constant
		switch m := inst.Mask.(type) {
		case *constant.Vector:
			mask = m.Elems
		case *constant.ZeroInitializer:
			for i := uint64(0); i < inst.Typ.Len; i++ {
				mask = append(mask, constant.NewInt(types.I32, 0))
			}
		default:
			return s.fail("shufflevector mask must be a constant vector")
		}
		out := make([]string, len(mask))
		for i, m := range mask {
			switch m := m.(type) {
			case *constant.Int:
				j := int(m.X.Int64())
				if j < 0 || j >= len(all) {
					return s.fail("shufflevector index %d out of range", j)
				}
				out[i] = all[j]
			default: // undef lane
				ks, _ := laneKinds(inst.Typ)
				out[i] = zeroImm(ks[i])
			}
		}
		return s.define(inst, out)
	}
	return s.fail("instruction is not supported")
}

func (s *sel) constIndex(v value.Value, n int) (int, error) {
	c, ok := v.(*constant.Int)
	if !ok {
		return 0, s.fail("vector index must be a constant")
	}
	if !c.X.IsInt64() || c.X.Int64() < 0 || c.X.Int64() >= int64(n) {
		return 0, s.fail("vector index %s out of range", c.X)
	}
	return int(c.X.Int64()), nil
}

// laneRange is the range of lanes [lo, lo+n) that an aggregate index path
// selects in t.
func laneRange(t types.Type, idx []uint64) (lo, n int, err error) {
	for _, i := range idx {
		switch tt := t.(type) {
		case *types.StructType:
			if i >= uint64(len(tt.Fields)) {
				return 0, 0, fmt.Errorf("index %d out of range", i)
			}
			for _, f := range tt.Fields[:i] {
				l, err := laneTypes(f)
				if err != nil {
					return 0, 0, err
				}
				lo += len(l)
			}
			t = tt.Fields[i]
		case *types.ArrayType:
			if i >= tt.Len {
				return 0, 0, fmt.Errorf("index %d out of range", i)
			}
			l, err := laneTypes(tt.ElemType)
			if err != nil {
				return 0, 0, err
			}
			lo += len(l) * int(i)
			t = tt.ElemType
		default:
			return 0, 0, fmt.Errorf("index into non-aggregate %s", t)
		}
	}
	l, err := laneTypes(t)
	if err != nil {
		return 0, 0, err
	}
	return lo, len(l), nil
}
