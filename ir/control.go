package ir

import (
	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Br ends the current block with an unconditional branch to target and moves
// the cursor to target.
func (f *Func) Br(target *llir.Block) {
	f.block("br").NewBr(target)
	f.cur = target
}

// CondBr ends the current block with `br i1 cond, then, else`. The cursor
// stays on the terminated block; move it with SetBlock.
func (f *Func) CondBr(cond value.Value, then, els *llir.Block) {
	if !typeOf(cond).Equal(types.I1) {
		f.errorf("br: condition is %s, want i1", typeOf(cond))
		return
	}
	f.block("br").NewCondBr(cond, then, els)
}

// Ret returns v from the function (nil for void functions) and ends the
// current block.
func (f *Func) Ret(v value.Value) {
	want := f.IR.Sig.RetType
	if (v == nil) != want.Equal(types.Void) || (v != nil && !v.Type().Equal(want)) {
		f.errorf("ret: returning %s from a function returning %s", typeOf(v), want)
		return
	}
	f.block("ret").NewRet(v)
}

// Unreachable ends the current block with `unreachable`.
func (f *Func) Unreachable() { f.block("unreachable").NewUnreachable() }

// If runs then when cond (i1) holds: the blocks then code builds are
// between a conditional branch and a join block, where the cursor ends.
func (f *Func) If(cond value.Value, then func()) {
	if !typeOf(cond).Equal(types.I1) {
		f.errorf("if: condition is %s, want i1", typeOf(cond))
		cond = Bool(false)
	}
	tb, join := f.NewBlock("if.then"), f.detached("if.end")
	f.CondBr(cond, tb, join)
	f.cur = tb
	then()
	if f.cur.Term == nil {
		f.cur.NewBr(join)
	}
	f.cur = f.attach(join)
}

// IfElse builds then when cond holds and els otherwise, joining after both.
func (f *Func) IfElse(cond value.Value, then, els func()) {
	f.IfElseValues(cond, func() []value.Value { then(); return nil }, func() []value.Value { els(); return nil })
}

// IfElseValues builds then and els as IfElse does and returns, for each
// value they return (both must return as many values, of the same types), a
// phi in the join block merging the two.
func (f *Func) IfElseValues(cond value.Value, then, els func() []value.Value) []value.Value {
	if !typeOf(cond).Equal(types.I1) {
		f.errorf("if: condition is %s, want i1", typeOf(cond))
		cond = Bool(false)
	}
	tb, eb, join := f.NewBlock("if.then"), f.detached("if.else"), f.detached("if.end")
	f.CondBr(cond, tb, eb)
	f.cur = tb
	tv := then()
	tEnd := f.cur
	if tEnd.Term == nil {
		tEnd.NewBr(join)
	}
	f.cur = f.attach(eb)
	ev := els()
	eEnd := f.cur
	if eEnd.Term == nil {
		eEnd.NewBr(join)
	}
	f.cur = f.attach(join)
	if len(tv) != len(ev) {
		f.errorf("if/else: then returns %d values, else %d", len(tv), len(ev))
		return nil
	}
	out := make([]value.Value, len(tv))
	for i := range tv {
		if !typeOf(tv[i]).Equal(typeOf(ev[i])) {
			f.errorf("if/else: value %d is %s in then and %s in else", i, typeOf(tv[i]), typeOf(ev[i]))
			out[i] = Undef(typeOf(tv[i]))
			continue
		}
		out[i] = join.NewPhi(llir.NewIncoming(tv[i], tEnd), llir.NewIncoming(ev[i], eEnd))
	}
	return out
}

// For builds `for i := lo; i < hi; i += step { body(i) }` with a signed
// compare; lo, hi and step are integers of one type (i32 or i64) and step is
// positive. The induction variable is a phi in the loop header.
func (f *Func) For(lo, hi, step value.Value, body func(i value.Value)) {
	f.ForCarry(lo, hi, step, nil, func(i value.Value, _ []value.Value) []value.Value {
		body(i)
		return nil
	})
}

// ForCarry is For with loop-carried values: carry starts as init, body gets
// the current values and returns the next ones (same count and types), and
// ForCarry returns the values after the last iteration (init when the loop
// runs zero times). Accumulators are phis in the loop header.
func (f *Func) ForCarry(lo, hi, step value.Value, init []value.Value, body func(i value.Value, carry []value.Value) []value.Value) []value.Value {
	t := typeOf(lo)
	if !isInt(t, 32, 64) || !t.Equal(typeOf(hi)) || !t.Equal(typeOf(step)) {
		f.errorf("for: lo, hi, step must be i32 or i64 of one type, got %s, %s, %s", t, typeOf(hi), typeOf(step))
		return init
	}
	pre := f.block("for")
	header, bodyB, exit := f.NewBlock("for.head"), f.NewBlock("for.body"), f.detached("for.end")
	pre.NewBr(header)
	iv := header.NewPhi(llir.NewIncoming(lo, pre))
	carries := make([]*llir.InstPhi, len(init))
	cv := make([]value.Value, len(init))
	for k, v := range init {
		carries[k] = header.NewPhi(llir.NewIncoming(v, pre))
		cv[k] = carries[k]
	}
	cond := header.NewICmp(enum.IPredSLT, iv, hi)
	header.NewCondBr(cond, bodyB, exit)
	f.cur = bodyB
	next := body(iv, cv)
	if len(next) != len(init) {
		f.errorf("for: body returns %d carried values, want %d", len(next), len(init))
		next = cv
	}
	for k := range next {
		if !typeOf(next[k]).Equal(typeOf(init[k])) {
			f.errorf("for: carried value %d is %s, want %s", k, typeOf(next[k]), typeOf(init[k]))
			next[k] = cv[k]
		}
	}
	latch := f.block("for latch")
	inc := latch.NewAdd(iv, step)
	latch.NewBr(header)
	iv.Incs = append(iv.Incs, llir.NewIncoming(inc, latch))
	for k := range carries {
		carries[k].Incs = append(carries[k].Incs, llir.NewIncoming(next[k], latch))
	}
	f.cur = f.attach(exit)
	return cv
}

// Loop builds `for { if !body() { break } }`: body runs at least once and
// returns an i1; the loop repeats while it is true. Use it for spin-waits
// (mbarrier try_wait, flag polling).
func (f *Func) Loop(body func() value.Value) {
	pre := f.block("loop")
	head, exit := f.NewBlock("loop.body"), f.detached("loop.end")
	pre.NewBr(head)
	f.cur = head
	again := body()
	if !typeOf(again).Equal(types.I1) {
		f.errorf("loop: body returns %s, want i1", typeOf(again))
		again = Bool(false)
	}
	f.block("loop latch").NewCondBr(again, head, exit)
	f.cur = f.attach(exit)
}

// Case is one arm of Switch: Body runs when the switched value equals Value.
type Case struct {
	Value int64  // case value, distinct across the arms of one Switch
	Body  func() // builds the arm in its own block; falls through to the join
}

// Switch builds `switch x` over integer x (i8..i64) with distinct case
// values: each arm's body, then deflt (may be nil) for all other values,
// all joining after the switch, where the cursor ends. Use it for warp-role
// dispatch.
func (f *Func) Switch(x value.Value, deflt func(), cases ...Case) {
	it, ok := typeOf(x).(*types.IntType)
	if !ok || it.BitSize < 8 {
		f.errorf("switch: value is %s, want i8, i16, i32 or i64", typeOf(x))
		return
	}
	seen := map[int64]bool{}
	for _, c := range cases {
		if seen[c.Value] {
			f.errorf("switch: duplicate case %d", c.Value)
			return
		}
		seen[c.Value] = true
	}
	pre := f.block("switch")
	join := f.detached("sw.end")
	def := join
	if deflt != nil {
		def = f.detached("sw.default")
	}
	arms := make([]*llir.Block, len(cases))
	lcs := make([]*llir.Case, len(cases))
	for i, c := range cases {
		arms[i] = f.detached("sw.case")
		lcs[i] = llir.NewCase(Int(it, c.Value), arms[i])
	}
	pre.NewSwitch(x, def, lcs...)
	run := func(b *llir.Block, body func()) {
		f.cur = f.attach(b)
		body()
		if f.cur.Term == nil {
			f.cur.NewBr(join)
		}
	}
	for i, c := range cases {
		run(arms[i], c.Body)
	}
	if deflt != nil {
		run(def, deflt)
	}
	f.cur = f.attach(join)
}
