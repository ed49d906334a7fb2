package ptx

import (
	"fmt"
	"strings"

	llir "github.com/llir/llvm/ir"
)

// intrinsicFn lowers one call of an intrinsic.
type intrinsicFn func(s *sel, call *llir.InstCall) error

// intrinsics maps the LLVM intrinsic names the backend lowers (the NVVM
// names llc-19 accepts, plus generic LLVM math intrinsics) to their
// lowering. Everything else (wgmma, mma, ldmatrix, cp.async, TMA, mbarrier,
// tcgen05, cvt to bf16/e4m3, setmaxnreg, elect.sync ...) is inline PTX.
var intrinsics = map[string]intrinsicFn{}

// Intrinsics that generate no code: hints and debug info.
var noopIntrinsicPrefixes = []string{
	"llvm.assume", "llvm.lifetime.", "llvm.dbg.", "llvm.donothing", "llvm.sideeffect",
	"llvm.experimental.noalias.scope.decl", "llvm.var.annotation", "llvm.invariant.",
}

func lookupIntrinsic(name string) (intrinsicFn, bool) {
	if fn, ok := intrinsics[name]; ok {
		return fn, true
	}
	for _, p := range noopIntrinsicPrefixes {
		if strings.HasPrefix(name, p) {
			return func(*sel, *llir.InstCall) error { return nil }, true
		}
	}
	if strings.HasPrefix(name, "llvm.expect.") {
		return func(s *sel, call *llir.InstCall) error {
			ops, _, err := s.ops(call.Args[0])
			if err != nil {
				return err
			}
			return s.define(call, ops)
		}, true
	}
	return nil, false
}

// args returns the call's arguments in registers.
func (s *sel) args(call *llir.InstCall, n int) ([]string, []kind, error) {
	if len(call.Args) != n {
		return nil, nil, s.fail("expected %d arguments", n)
	}
	var rs []string
	var ks []kind
	for _, a := range call.Args {
		r, k, err := s.lane1(a)
		if err != nil {
			return nil, nil, err
		}
		rs = append(rs, r)
		ks = append(ks, k)
	}
	return rs, ks, nil
}

func (s *sel) resultKind(call *llir.InstCall) (kind, error) {
	k, err := scalarKind(call.Typ)
	if err != nil {
		return 0, s.fail("%v", err)
	}
	return k, nil
}

// simple returns a lowering "op d, a0, a1, ...;" over register operands;
// n is the number of arguments used (extra ones, such as the i1 flag of
// llvm.ctlz, are ignored).
func simple(op string, n int) intrinsicFn {
	return func(s *sel, call *llir.InstCall) error {
		if len(call.Args) < n {
			return s.fail("expected %d arguments", n)
		}
		k, err := s.resultKind(call)
		if err != nil {
			return err
		}
		var rs []string
		for _, a := range call.Args[:n] {
			r, _, err := s.lane1(a)
			if err != nil {
				return err
			}
			rs = append(rs, r)
		}
		d := s.reg(k)
		s.emit("%s \t%s, %s;", op, d, strings.Join(rs, ", "))
		return s.define(call, []string{d})
	}
}

// statement returns a lowering of a void intrinsic "op a0, ...;".
func statement(op string, n int) intrinsicFn {
	return func(s *sel, call *llir.InstCall) error {
		var ops []string
		if len(call.Args) != n {
			return s.fail("expected %d arguments", n)
		}
		for _, a := range call.Args {
			o, k, err := s.op1(a)
			if err != nil {
				return err
			}
			if k != kI32 {
				return s.fail("operand of type %s (want i32)", a.Type())
			}
			ops = append(ops, o)
		}
		if n == 0 {
			s.emit("%s;", op)
		} else {
			s.emit("%s \t%s;", op, strings.Join(ops, ", "))
		}
		return nil
	}
}

func sreg(reg string, minSM int) intrinsicFn {
	return func(s *sel, call *llir.InstCall) error {
		if s.c.target.ComputeCapability() < minSM {
			return s.fail("%s needs sm_%d or newer", reg, minSM)
		}
		k, err := s.resultKind(call)
		if err != nil {
			return err
		}
		d := s.reg(k)
		s.emit("mov.u%d \t%s, %s;", k.bits(), d, reg)
		return s.define(call, []string{d})
	}
}

// byType registers op for each LLVM type suffix of a generic intrinsic:
// name.<suf> -> fmt.Sprintf(op, ptx type).
func byType(name string, n int, op string, sufs map[string]string) {
	for suf, t := range sufs {
		intrinsics[name+"."+suf] = simple(fmt.Sprintf(op, t), n)
	}
}

var (
	floatSufs = map[string]string{"f32": "f32", "f64": "f64"}
	halfSufs  = map[string]string{"f16": "f16", "f32": "f32", "f64": "f64"}
)

func init() {
	// Special registers (PTX ISA 10).
	for _, d := range []string{"x", "y", "z"} {
		for _, r := range []string{"tid", "ntid", "ctaid", "nctaid"} {
			intrinsics["llvm.nvvm.read.ptx.sreg."+r+"."+d] = sreg("%"+r+"."+d, 0)
		}
		intrinsics["llvm.nvvm.read.ptx.sreg.clusterid."+d] = sreg("%clusterid."+d, 90)
		intrinsics["llvm.nvvm.read.ptx.sreg.nclusterid."+d] = sreg("%nclusterid."+d, 90)
		intrinsics["llvm.nvvm.read.ptx.sreg.cluster.ctaid."+d] = sreg("%cluster_ctaid."+d, 90)
		intrinsics["llvm.nvvm.read.ptx.sreg.cluster.nctaid."+d] = sreg("%cluster_nctaid."+d, 90)
	}
	for name, reg := range map[string]string{
		"laneid": "%laneid", "warpid": "%warpid", "nwarpid": "%nwarpid", "smid": "%smid", "nsmid": "%nsmid",
		"gridid": "%gridid", "clock": "%clock", "clock64": "%clock64", "globaltimer": "%globaltimer",
		"lanemask.eq": "%lanemask_eq", "lanemask.le": "%lanemask_le", "lanemask.lt": "%lanemask_lt",
		"lanemask.ge": "%lanemask_ge", "lanemask.gt": "%lanemask_gt", "warpsize": "WARP_SZ",
	} {
		intrinsics["llvm.nvvm.read.ptx.sreg."+name] = sreg(reg, 0)
	}
	intrinsics["llvm.nvvm.read.ptx.sreg.cluster.ctarank"] = sreg("%cluster_ctarank", 90)
	intrinsics["llvm.nvvm.read.ptx.sreg.cluster.nctarank"] = sreg("%cluster_nctarank", 90)

	// Barriers and fences (PTX ISA 9.7.13).
	intrinsics["llvm.nvvm.barrier0"] = func(s *sel, call *llir.InstCall) error {
		s.emit("bar.sync \t0;")
		return nil
	}
	intrinsics["llvm.nvvm.bar.sync"] = statement("bar.sync", 1)
	intrinsics["llvm.nvvm.barrier.sync"] = statement("barrier.sync", 1)
	intrinsics["llvm.nvvm.barrier.sync.cnt"] = statement("barrier.sync", 2)
	intrinsics["llvm.nvvm.bar.warp.sync"] = statement("bar.warp.sync", 1)
	intrinsics["llvm.nvvm.membar.cta"] = statement("membar.cta", 0)
	intrinsics["llvm.nvvm.membar.gl"] = statement("membar.gl", 0)
	intrinsics["llvm.nvvm.membar.sys"] = statement("membar.sys", 0)
	intrinsics["llvm.trap"] = statement("trap", 0)
	intrinsics["llvm.nvvm.barrier0.popc"] = barrierReduce("popc")
	intrinsics["llvm.nvvm.barrier0.and"] = barrierReduce("and")
	intrinsics["llvm.nvvm.barrier0.or"] = barrierReduce("or")

	// Warp-level primitives (PTX ISA 9.7.8.6, 9.7.12.x).
	for _, mode := range []string{"bfly", "down", "up", "idx"} {
		for _, t := range []string{"i32", "f32"} {
			intrinsics["llvm.nvvm.shfl.sync."+mode+"."+t] = shfl(mode, false)
			intrinsics["llvm.nvvm.shfl.sync."+mode+"."+t+"p"] = shfl(mode, true)
		}
	}
	intrinsics["llvm.nvvm.vote.ballot.sync"] = vote("ballot.b32", kI32)
	intrinsics["llvm.nvvm.vote.all.sync"] = vote("all.pred", kPred)
	intrinsics["llvm.nvvm.vote.any.sync"] = vote("any.pred", kPred)
	intrinsics["llvm.nvvm.vote.uni.sync"] = vote("uni.pred", kPred)
	intrinsics["llvm.nvvm.activemask"] = simple("activemask.b32", 0)
	for name, op := range map[string]string{"add": "add.u32", "min": "min.s32", "max": "max.s32",
		"umin": "min.u32", "umax": "max.u32", "and": "and.b32", "or": "or.b32", "xor": "xor.b32"} {
		intrinsics["llvm.nvvm.redux.sync."+name] = simple("redux.sync."+op, 2)
	}

	// Floating point (PTX ISA 9.7.3, 9.7.4).
	byType("llvm.fma", 3, "fma.rn.%s", halfSufs)
	byType("llvm.fmuladd", 3, "fma.rn.%s", halfSufs)
	byType("llvm.maxnum", 2, "max.%s", halfSufs)
	byType("llvm.minnum", 2, "min.%s", halfSufs)
	byType("llvm.maximum", 2, "max.NaN.%s", map[string]string{"f16": "f16", "f32": "f32"})
	byType("llvm.minimum", 2, "min.NaN.%s", map[string]string{"f16": "f16", "f32": "f32"})
	byType("llvm.fabs", 1, "abs.%s", halfSufs)
	byType("llvm.sqrt", 1, "sqrt.rn.%s", floatSufs)
	byType("llvm.floor", 1, "cvt.rmi.%[1]s.%[1]s", floatSufs)
	byType("llvm.ceil", 1, "cvt.rpi.%[1]s.%[1]s", floatSufs)
	byType("llvm.trunc", 1, "cvt.rzi.%[1]s.%[1]s", floatSufs)
	byType("llvm.rint", 1, "cvt.rni.%[1]s.%[1]s", floatSufs)
	byType("llvm.nearbyint", 1, "cvt.rni.%[1]s.%[1]s", floatSufs)
	byType("llvm.roundeven", 1, "cvt.rni.%[1]s.%[1]s", floatSufs)
	for suf, t := range floatSufs {
		t := t
		// copysign.fN d, a, b takes the sign of a and the rest of b.
		intrinsics["llvm.copysign."+suf] = func(s *sel, call *llir.InstCall) error {
			rs, ks, err := s.args(call, 2)
			if err != nil {
				return err
			}
			d := s.reg(ks[0])
			s.emit("copysign.%s \t%s, %s, %s;", t, d, rs[1], rs[0])
			return s.define(call, []string{d})
		}
	}
	for name, op := range map[string]string{
		"fmax.f": "max.f32", "fmin.f": "min.f32", "fmax.d": "max.f64", "fmin.d": "min.f64",
		"fmax.ftz.f": "max.ftz.f32", "fmin.ftz.f": "min.ftz.f32",
		"fmax.nan.f": "max.NaN.f32", "fmin.nan.f": "min.NaN.f32",
		"fabs.f": "abs.f32", "fabs.d": "abs.f64",
		"ex2.approx.f": "ex2.approx.f32", "ex2.approx.ftz.f": "ex2.approx.ftz.f32",
		"ex2.approx.f32": "ex2.approx.f32", "ex2.approx.ftz.f32": "ex2.approx.ftz.f32",
		"lg2.approx.f": "lg2.approx.f32", "lg2.approx.ftz.f": "lg2.approx.ftz.f32",
		"rsqrt.approx.f": "rsqrt.approx.f32", "rsqrt.approx.ftz.f": "rsqrt.approx.ftz.f32",
		"rsqrt.approx.d": "rsqrt.approx.f64",
		"rcp.rn.f":       "rcp.rn.f32", "rcp.rn.d": "rcp.rn.f64",
		"rcp.approx.ftz.f": "rcp.approx.ftz.f32", "rcp.approx.ftz.d": "rcp.approx.ftz.f64",
		"sin.approx.f": "sin.approx.f32", "sin.approx.ftz.f": "sin.approx.ftz.f32",
		"cos.approx.f": "cos.approx.f32", "cos.approx.ftz.f": "cos.approx.ftz.f32",
		"sqrt.rn.f": "sqrt.rn.f32", "sqrt.rn.d": "sqrt.rn.f64", "sqrt.approx.f": "sqrt.approx.f32",
		"sqrt.f": "sqrt.rn.f32", "saturate.f": "cvt.sat.f32.f32",
	} {
		n := 1
		if strings.HasPrefix(name, "fmax") || strings.HasPrefix(name, "fmin") {
			n = 2
		}
		intrinsics["llvm.nvvm."+name] = simple(op, n)
	}
	intrinsics["llvm.nvvm.fma.rn.f"] = simple("fma.rn.f32", 3)
	intrinsics["llvm.nvvm.fma.rn.d"] = simple("fma.rn.f64", 3)

	// Integer (PTX ISA 9.7.1, 9.7.2).
	intSufs := map[string]string{"i16": "16", "i32": "32", "i64": "64"}
	byType("llvm.smax", 2, "max.s%s", intSufs)
	byType("llvm.smin", 2, "min.s%s", intSufs)
	byType("llvm.umax", 2, "max.u%s", intSufs)
	byType("llvm.umin", 2, "min.u%s", intSufs)
	byType("llvm.abs", 1, "abs.s%s", intSufs)
	byType("llvm.bitreverse", 1, "brev.b%s", map[string]string{"i32": "32", "i64": "64"})
	intrinsics["llvm.ctlz.i32"] = simple("clz.b32", 1)
	intrinsics["llvm.ctpop.i32"] = simple("popc.b32", 1)
	intrinsics["llvm.ctlz.i64"] = countBits64("clz.b64", false)
	intrinsics["llvm.ctpop.i64"] = countBits64("popc.b64", false)
	intrinsics["llvm.cttz.i64"] = countBits64("clz.b64", true)
	intrinsics["llvm.cttz.i32"] = func(s *sel, call *llir.InstCall) error {
		r, _, err := s.lane1(call.Args[0])
		if err != nil {
			return err
		}
		t, d := s.reg(kI32), s.reg(kI32)
		s.emit("brev.b32 \t%s, %s;", t, r)
		s.emit("clz.b32 \t%s, %s;", d, t)
		return s.define(call, []string{d})
	}
	intrinsics["llvm.bswap.i32"] = func(s *sel, call *llir.InstCall) error {
		r, _, err := s.lane1(call.Args[0])
		if err != nil {
			return err
		}
		d := s.reg(kI32)
		s.emit("prmt.b32 \t%s, %s, 0, 291;", d, r) // selector 0x0123
		return s.define(call, []string{d})
	}
	// fshl(a, b, c): high half of {a:b} << c%32 = shf.l.wrap d, b, a, c;
	// fshr(a, b, c): low half of {a:b} >> c%32 = shf.r.wrap d, b, a, c.
	for name, op := range map[string]string{"llvm.fshl.i32": "shf.l.wrap.b32", "llvm.fshr.i32": "shf.r.wrap.b32"} {
		op := op
		intrinsics[name] = func(s *sel, call *llir.InstCall) error {
			rs, _, err := s.args(call, 3)
			if err != nil {
				return err
			}
			d := s.reg(kI32)
			s.emit("%s \t%s, %s, %s, %s;", op, d, rs[1], rs[0], rs[2])
			return s.define(call, []string{d})
		}
	}
	for name, op := range map[string]string{"mulhi.i": "mul.hi.s32", "mulhi.ui": "mul.hi.u32",
		"mulhi.ll": "mul.hi.s64", "mulhi.ull": "mul.hi.u64"} {
		intrinsics["llvm.nvvm."+name] = simple(op, 2)
	}
	intrinsics["llvm.nvvm.prmt"] = simple("prmt.b32", 3)
	for _, sp := range []string{"global", "shared", "local", "const"} {
		intrinsics["llvm.nvvm.isspacep."+sp] = simple("isspacep."+sp, 1)
	}
}

func shfl(mode string, withPred bool) intrinsicFn {
	return func(s *sel, call *llir.InstCall) error {
		rs, ks, err := s.args(call, 4)
		if err != nil {
			return err
		}
		d := s.reg(ks[1])
		if !withPred {
			s.emit("shfl.sync.%s.b32 \t%s, %s, %s, %s, %s;", mode, d, rs[1], rs[2], rs[3], rs[0])
			return s.define(call, []string{d})
		}
		p := s.reg(kPred)
		s.emit("shfl.sync.%s.b32 \t%s|%s, %s, %s, %s, %s;", mode, d, p, rs[1], rs[2], rs[3], rs[0])
		return s.define(call, []string{d, p})
	}
}

func vote(op string, rk kind) intrinsicFn {
	return func(s *sel, call *llir.InstCall) error {
		rs, _, err := s.args(call, 2)
		if err != nil {
			return err
		}
		d := s.reg(rk)
		s.emit("vote.sync.%s \t%s, %s, %s;", op, d, rs[1], rs[0])
		return s.define(call, []string{d})
	}
}

// barrierReduce is bar.red on barrier 0 with predicate (arg != 0).
func barrierReduce(op string) intrinsicFn {
	return func(s *sel, call *llir.InstCall) error {
		rs, _, err := s.args(call, 1)
		if err != nil {
			return err
		}
		p := s.reg(kPred)
		s.emit("setp.ne.s32 \t%s, %s, 0;", p, rs[0])
		d := s.reg(kI32)
		if op == "popc" {
			s.emit("bar.red.popc.u32 \t%s, 0, %s;", d, p)
		} else {
			q := s.reg(kPred)
			s.emit("bar.red.%s.pred \t%s, 0, %s;", op, q, p)
			s.emit("selp.u32 \t%s, 1, 0, %s;", d, q)
		}
		return s.define(call, []string{d})
	}
}

// countBits64 is clz/popc of an i64 (a .u32 count widened to i64); with
// reverse, cttz via brev first.
func countBits64(op string, reverse bool) intrinsicFn {
	return func(s *sel, call *llir.InstCall) error {
		r, _, err := s.lane1(call.Args[0])
		if err != nil {
			return err
		}
		if reverse {
			t := s.reg(kI64)
			s.emit("brev.b64 \t%s, %s;", t, r)
			r = t
		}
		c, d := s.reg(kI32), s.reg(kI64)
		s.emit("%s \t%s, %s;", op, c, r)
		s.emit("cvt.u64.u32 \t%s, %s;", d, c)
		return s.define(call, []string{d})
	}
}
