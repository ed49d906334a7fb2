package ptx

import (
	"fmt"
	"math/big"
	"strings"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// gep computes base + sum(index * stride) + constant offset in 64-bit
// arithmetic. Indices are sign-extended (LLVM LangRef, getelementptr);
// strides come from the data layout (types.go).
func (s *sel) gep(elem types.Type, src value.Value, indices []value.Value) (string, error) {
	base, k, err := s.lane1(src)
	if err != nil {
		return "", err
	}
	if k != kPtr {
		return "", s.fail("getelementptr on a non-pointer")
	}
	var off int64
	acc := base
	cur := elem
	for i, idx := range indices {
		var stride int64
		if i == 0 {
			if stride, err = typeSize(cur); err != nil {
				return "", s.fail("%v", err)
			}
		} else {
			switch t := cur.(type) {
			case *types.StructType:
				ci, ok := idx.(*constant.Int)
				if !ok || !ci.X.IsInt64() || ci.X.Int64() < 0 || ci.X.Int64() >= int64(len(t.Fields)) {
					return "", s.fail("struct index %s must be an in-range constant", idx.Ident())
				}
				var offs []int64
				if _, _, err := structLayout(t, &offs); err != nil {
					return "", s.fail("%v", err)
				}
				off += offs[ci.X.Int64()]
				cur = t.Fields[ci.X.Int64()]
				continue
			case *types.ArrayType:
				cur = t.ElemType
			case *types.VectorType:
				cur = t.ElemType
			default:
				return "", s.fail("getelementptr index into non-aggregate %s", cur)
			}
			if stride, err = typeSize(cur); err != nil {
				return "", s.fail("%v", err)
			}
		}
		if ci, ok := idx.(*constant.Int); ok {
			v := signedValue(ci)
			off += v * stride
			continue
		}
		if _, ok := idx.(*constant.ZeroInitializer); ok {
			continue
		}
		term, err := s.scaledIndex(idx, stride)
		if err != nil {
			return "", err
		}
		if term == "" {
			continue
		}
		n := s.reg(kPtr)
		s.emit("add.s64 \t%s, %s, %s;", n, acc, term)
		acc = n
	}
	if off != 0 {
		n := s.reg(kPtr)
		s.emit("add.s64 \t%s, %s, %d;", n, acc, off)
		acc = n
	}
	return acc, nil
}

// signedValue is the value of an integer constant sign-extended from its
// width.
func signedValue(c *constant.Int) int64 {
	bits := c.Typ.BitSize
	if bits >= 64 {
		return c.X.Int64()
	}
	m := new(big.Int).Lsh(big.NewInt(1), uint(bits))
	v := new(big.Int).Mod(c.X, m)
	if v.Cmp(new(big.Int).Rsh(m, 1)) >= 0 {
		v.Sub(v, m)
	}
	return v.Int64()
}

// scaledIndex returns a 64-bit register holding sext(idx) * stride ("" when
// stride is 0).
func (s *sel) scaledIndex(idx value.Value, stride int64) (string, error) {
	if stride == 0 {
		return "", nil
	}
	r, k, err := s.lane1(idx)
	if err != nil {
		return "", err
	}
	var x string
	switch k {
	case kI32:
		t := s.reg(kI64)
		switch {
		case stride == 1:
			s.emit("cvt.s64.s32 \t%s, %s;", t, r)
			return t, nil
		case stride < 1<<31:
			s.emit("mul.wide.s32 \t%s, %s, %d;", t, r, stride)
			return t, nil
		}
		s.emit("cvt.s64.s32 \t%s, %s;", t, r)
		x = t
	case kI64:
		x = r
	case kI16, kI8:
		t := s.reg(kI64)
		s.emit("cvt.s64.s%d \t%s, %s;", k.bits(), t, r)
		x = t
	default:
		return "", s.fail("getelementptr index of type %s is not supported", idx.Type())
	}
	if stride == 1 {
		return x, nil
	}
	t := s.reg(kI64)
	if isPow2(stride) {
		s.emit("shl.b64 \t%s, %s, %d;", t, x, log2(stride))
	} else {
		s.emit("mul.lo.s64 \t%s, %s, %d;", t, x, stride)
	}
	return t, nil
}

// ldstType is the type suffix of a scalar ld/st.
func ldstType(k kind) string {
	switch k {
	case kPred, kI8:
		return "u8"
	case kI16:
		return "u16"
	case kHalf:
		return "b16"
	case kI32:
		return "u32"
	case kF32:
		return "f32"
	case kF64:
		return "f64"
	}
	return "u64"
}

// memChunk is one ld/st instruction of an access: vec elements (1, 2 or 4)
// of type typ at byte offset off. With pack > 0 the elements are 32-bit
// words each holding pack lanes (8 halves in ld.v4.b32); lanes lists the
// value lanes the chunk covers.
type memChunk struct {
	off   int64
	vec   int
	typ   string
	pack  int
	lanes []int
}

// memPlan splits an access of type t with alignment align into ld/st
// instructions: a scalar is one access; a vector of at most 16 bytes is
// accessed in pieces of min(align, size) bytes, as .v2/.v4 when a piece has
// several lanes and as 32-bit words when it has more than four (PTX ISA
// 9.7.9.8: vectors up to 128 bits, naturally aligned).
func memPlan(t types.Type, align int64) ([]memChunk, error) {
	vt, ok := t.(*types.VectorType)
	if !ok {
		k, err := scalarKind(t)
		if err != nil {
			return nil, err
		}
		size := int64(k.bits()+7) / 8
		if align != 0 && align < size {
			return nil, fmt.Errorf("access of %s aligned to %d bytes (needs %d)", t, align, size)
		}
		return []memChunk{{vec: 1, typ: ldstType(k), lanes: []int{0}}}, nil
	}
	ek, err := scalarKind(vt.ElemType)
	if err != nil {
		return nil, err
	}
	if ek == kPred {
		return nil, fmt.Errorf("vectors of i1 cannot be loaded or stored")
	}
	esz := int64(ek.bits() / 8)
	n := int64(vt.Len)
	size := esz * n
	if !isPow2(n) {
		return nil, fmt.Errorf("vector %s: only 1, 2, 4, 8 or 16 lanes can be loaded or stored", t)
	}
	if size > 16 {
		return nil, fmt.Errorf("vector access of %d bytes (%s) exceeds the 16-byte maximum of ld/st.v4", size, t)
	}
	if align == 0 {
		align = size
	}
	if align < esz {
		return nil, fmt.Errorf("access of %s aligned to %d bytes (needs %d)", t, align, esz)
	}
	piece := min(align, size)
	per := int(piece / esz)
	var out []memChunk
	for lane := 0; lane < int(n); lane += per {
		c := memChunk{off: int64(lane) * esz}
		for j := 0; j < per; j++ {
			c.lanes = append(c.lanes, lane+j)
		}
		if per <= 4 {
			c.vec, c.typ = per, ldstType(ek)
		} else {
			c.vec, c.typ, c.pack = int(piece/4), "b32", int(4/esz)
		}
		out = append(out, c)
	}
	return out, nil
}

func vecSuffix(n int) string {
	if n == 1 {
		return ""
	}
	return fmt.Sprintf(".v%d", n)
}

func addr(base string, off int64) string {
	if off == 0 {
		return "[" + base + "]"
	}
	return fmt.Sprintf("[%s+%d]", base, off)
}

func braces(rs []string) string {
	if len(rs) == 1 {
		return rs[0]
	}
	return "{" + strings.Join(rs, ", ") + "}"
}

func ptrSpace(t types.Type) types.AddrSpace {
	if pt, ok := t.(*types.PointerType); ok {
		return pt.AddrSpace
	}
	return 0
}

// syncScope maps an LLVM syncscope to a PTX scope (LLVM NVPTX usage: ""
// (system) .sys, "device" .gpu, "block" .cta, "cluster" .cluster).
func (s *sel) syncScope(ss string) (string, error) {
	switch ss {
	case "":
		return ".sys", nil
	case "device":
		return ".gpu", nil
	case "block", "singlethread":
		return ".cta", nil
	case "cluster":
		if s.c.target.ComputeCapability() < 90 {
			return "", s.fail("syncscope(\"cluster\") needs sm_90a or newer")
		}
		return ".cluster", nil
	}
	return "", s.fail("syncscope(%q) is not supported", ss)
}

func (s *sel) load(inst *llir.InstLoad) error {
	base, _, err := s.lane1(inst.Src)
	if err != nil {
		return err
	}
	as := ptrSpace(inst.Src.Type())
	space := spaceSuffix(as)
	if inst.Atomic {
		return s.atomicLoad(inst, base, space)
	}
	plan, err := memPlan(inst.ElemType, int64(inst.Align))
	if err != nil {
		return s.fail("%v", err)
	}
	ks, err := laneKinds(inst.ElemType)
	if err != nil {
		return s.fail("%v", err)
	}
	vol := ""
	if inst.Volatile && as != asConst && as != asParam {
		vol = ".volatile"
	}
	res := make([]string, len(ks))
	for _, c := range plan {
		if c.pack == 0 {
			var rs []string
			for _, l := range c.lanes {
				k := ks[l]
				if k == kPred {
					k = kI16
				}
				r := s.reg(k)
				rs = append(rs, r)
				res[l] = r
			}
			s.emit("ld%s%s%s.%s \t%s, %s;", vol, space, vecSuffix(c.vec), c.typ, braces(rs), addr(base, c.off))
			if len(c.lanes) == 1 && ks[c.lanes[0]] == kPred {
				res[c.lanes[0]] = s.lowBit(rs[0], kI16)
			}
			continue
		}
		words := make([]string, c.vec)
		for i := range words {
			words[i] = s.reg(kI32)
		}
		s.emit("ld%s%s%s.%s \t%s, %s;", vol, space, vecSuffix(c.vec), c.typ, braces(words), addr(base, c.off))
		lks := make([]kind, len(c.lanes))
		for i, l := range c.lanes {
			lks[i] = ks[l]
		}
		for i, r := range s.unpackWords(words, lks) {
			res[c.lanes[i]] = r
		}
	}
	return s.define(inst, res)
}

func (s *sel) store(inst *llir.InstStore) error {
	base, _, err := s.lane1(inst.Dst)
	if err != nil {
		return err
	}
	as := ptrSpace(inst.Dst.Type())
	if as == asConst || as == asParam {
		return s.fail("store to the read-only address space %d", as)
	}
	space := spaceSuffix(as)
	vals, ks, err := s.ops(inst.Src)
	if err != nil {
		return err
	}
	if inst.Atomic {
		return s.atomicStore(inst, base, space, vals[0], ks[0])
	}
	plan, err := memPlan(inst.Src.Type(), int64(inst.Align))
	if err != nil {
		return s.fail("%v", err)
	}
	vol := ""
	if inst.Volatile {
		vol = ".volatile"
	}
	for _, c := range plan {
		var rs []string
		for _, l := range c.lanes {
			k := ks[l]
			v := vals[l]
			switch {
			case k == kPred:
				b := s.reg(kI16)
				s.emit("selp.u16 \t%s, 1, 0, %s;", b, s.toReg(v, kPred))
				v = b
			case c.vec > 1 || c.pack > 0 || !k.isInt():
				v = s.toReg(v, k)
			}
			rs = append(rs, v)
		}
		if c.pack > 0 {
			lks := make([]kind, len(c.lanes))
			for i, l := range c.lanes {
				lks[i] = ks[l]
			}
			rs = s.packWords(rs, lks)
		}
		s.emit("st%s%s%s.%s \t%s, %s;", vol, space, vecSuffix(c.vec), c.typ, addr(base, c.off), braces(rs))
	}
	return nil
}

func atomicScalar(k kind) bool {
	return k == kI32 || k == kI64 || k == kF32 || k == kF64 || k == kPtr
}

// atomicLoad: monotonic/unordered ld.relaxed, acquire ld.acquire, seq_cst
// fence.sc + ld.acquire (the C++ -> PTX mapping of the PTX memory model,
// PTX ISA 8.x "Memory Consistency Model").
func (s *sel) atomicLoad(inst *llir.InstLoad, base, space string) error {
	k, err := scalarKind(inst.ElemType)
	if err != nil || !atomicScalar(k) {
		return s.fail("atomic load of %s is not supported (32- and 64-bit scalars are)", inst.ElemType)
	}
	if space == ".const" || space == ".param" || space == ".local" {
		return s.fail("atomic load from the %s space", space[1:])
	}
	sem, scope, err := s.atomicSem("atomic load", inst.Ordering, inst.SyncScope, enum.AtomicOrderingAcquire, ".acquire", ".acquire")
	if err != nil {
		return err
	}
	r := s.reg(k)
	s.emit("ld%s%s%s.%s \t%s, [%s];", sem, scope, space, ldstType(k), r, base)
	return s.define(inst, []string{r})
}

// atomicStore: monotonic/unordered st.relaxed, release st.release, seq_cst
// fence.sc + st.relaxed.
func (s *sel) atomicStore(inst *llir.InstStore, base, space, v string, k kind) error {
	if !atomicScalar(k) {
		return s.fail("atomic store of %s is not supported (32- and 64-bit scalars are)", inst.Src.Type())
	}
	if space == ".local" {
		return s.fail("atomic store to the local space")
	}
	sem, scope, err := s.atomicSem("atomic store", inst.Ordering, inst.SyncScope, enum.AtomicOrderingRelease, ".release", ".relaxed")
	if err != nil {
		return err
	}
	s.emit("st%s%s%s.%s \t[%s], %s;", sem, scope, space, ldstType(k), base, s.toReg(v, k))
	return nil
}

// atomicSem returns the .sem and .scope qualifiers of an atomic load or
// store (what) with ordering ord and sync scope ss: .relaxed for unordered
// and monotonic, strongSem for the ordering strong (acquire for loads,
// release for stores), and for seq_cst a fence.sc (emitted here) then
// seqSem.
func (s *sel) atomicSem(what string, ord enum.AtomicOrdering, ss string, strong enum.AtomicOrdering, strongSem, seqSem string) (sem, scope string, err error) {
	if scope, err = s.syncScope(ss); err != nil {
		return "", "", err
	}
	switch ord {
	case enum.AtomicOrderingUnordered, enum.AtomicOrderingMonotonic:
		return ".relaxed", scope, nil
	case strong:
		return strongSem, scope, nil
	case enum.AtomicOrderingSequentiallyConsistent:
		s.emit("fence.sc%s;", scope)
		return seqSem, scope, nil
	}
	return "", "", s.fail("%s with ordering %s", what, ord)
}

// atomSem returns the .sem.scope qualifiers of an atom for an LLVM ordering,
// emitting the leading fence.sc of seq_cst.
func (s *sel) atomSem(ord enum.AtomicOrdering, ss string) (string, error) {
	scope, err := s.syncScope(ss)
	if err != nil {
		return "", err
	}
	switch ord {
	case enum.AtomicOrderingMonotonic:
		return ".relaxed" + scope, nil
	case enum.AtomicOrderingAcquire:
		return ".acquire" + scope, nil
	case enum.AtomicOrderingRelease:
		return ".release" + scope, nil
	case enum.AtomicOrderingAcquireRelease:
		return ".acq_rel" + scope, nil
	case enum.AtomicOrderingSequentiallyConsistent:
		s.emit("fence.sc%s;", scope)
		return ".acquire" + scope, nil
	}
	return "", s.fail("atomic ordering %s is not supported", ord)
}

func (s *sel) atomSpace(ptr value.Value) (string, error) {
	as := ptrSpace(ptr.Type())
	switch as {
	case asGeneric, asGlobal, asShared:
		return spaceSuffix(as), nil
	}
	return "", s.fail("atomics on address space %d are not supported (generic, global and shared are)", as)
}

// ptrOp is lane1 of the pointer ptr then op1 of the operand v (in that
// order, as their registers are emitted): the address, the operand and its
// kind of an atomic instruction.
func (s *sel) ptrOp(ptr, v value.Value) (p, x string, k kind, err error) {
	if p, _, err = s.lane1(ptr); err != nil {
		return "", "", 0, err
	}
	if x, k, err = s.op1(v); err != nil {
		return "", "", 0, err
	}
	return p, x, k, nil
}

// atomicRMW maps atomicrmw to atom (PTX ISA 9.7.13.5); sub and fsub add the
// negation. Orderings: monotonic .relaxed, acquire/release/acq_rel the same
// .sem, seq_cst fence.sc + .acquire; scopes from syncscope (system = .sys).
func (s *sel) atomicRMW(inst *llir.InstAtomicRMW) error {
	p, x, k, err := s.ptrOp(inst.Dst, inst.X)
	if err != nil {
		return err
	}
	space, err := s.atomSpace(inst.Dst)
	if err != nil {
		return err
	}
	w := k.bits()
	var op string
	switch inst.Op {
	case enum.AtomicOpXChg:
		if w == 32 || w == 64 {
			op = fmt.Sprintf("exch.b%d", w)
		}
	case enum.AtomicOpAdd, enum.AtomicOpSub:
		if k == kI32 || k == kI64 {
			op = fmt.Sprintf("add.u%d", w)
			if inst.Op == enum.AtomicOpSub {
				n := s.reg(k)
				s.emit("neg.s%d \t%s, %s;", w, n, s.toReg(x, k))
				x = n
			}
		}
	case enum.AtomicOpAnd, enum.AtomicOpOr, enum.AtomicOpXor:
		if k == kI32 || k == kI64 {
			op = fmt.Sprintf("%s.b%d", inst.Op, w)
		}
	case enum.AtomicOpMax, enum.AtomicOpMin:
		if k == kI32 || k == kI64 {
			op = fmt.Sprintf("%s.s%d", inst.Op, w)
		}
	case enum.AtomicOpUMax, enum.AtomicOpUMin:
		if k == kI32 || k == kI64 {
			op = fmt.Sprintf("%s.u%d", strings.TrimPrefix(inst.Op.String(), "u"), w)
		}
	case enum.AtomicOpFAdd, enum.AtomicOpFSub:
		switch k {
		case kF32, kF64:
			op = "add." + k.fsuf()
		case kHalf:
			op = "add.noftz.f16"
		}
		if op != "" && inst.Op == enum.AtomicOpFSub {
			n := s.reg(k)
			s.emit("neg.%s \t%s, %s;", k.fsuf(), n, s.toReg(x, k))
			x = n
		}
	}
	if op == "" {
		return s.fail("atomicrmw %s on %s is not supported", inst.Op, inst.X.Type())
	}
	if !k.isInt() {
		x = s.toReg(x, k)
	}
	sem, err := s.atomSem(inst.Ordering, inst.SyncScope)
	if err != nil {
		return err
	}
	d := s.reg(k)
	s.emit("atom%s%s.%s \t%s, [%s], %s;", sem, space, op, d, p, x)
	return s.define(inst, []string{d})
}

// cmpxchg is atom.cas plus a comparison of the old value for the success
// flag; the stronger of the two orderings is used.
func (s *sel) cmpxchg(inst *llir.InstCmpXchg) error {
	p, cmp, k, err := s.ptrOp(inst.Ptr, inst.Cmp)
	if err != nil {
		return err
	}
	nv, _, err := s.op1(inst.New)
	if err != nil {
		return err
	}
	if k != kI32 && k != kI64 && k != kPtr {
		return s.fail("cmpxchg on %s is not supported (i32, i64 and pointers are)", inst.Cmp.Type())
	}
	space, err := s.atomSpace(inst.Ptr)
	if err != nil {
		return err
	}
	ord := inst.SuccessOrdering
	if inst.FailureOrdering == enum.AtomicOrderingSequentiallyConsistent ||
		(inst.FailureOrdering == enum.AtomicOrderingAcquire && ord == enum.AtomicOrderingRelease) {
		if ord == enum.AtomicOrderingRelease {
			ord = enum.AtomicOrderingAcquireRelease
		} else {
			ord = inst.FailureOrdering
		}
	}
	sem, err := s.atomSem(ord, inst.SyncScope)
	if err != nil {
		return err
	}
	w := k.bits()
	old, ok := s.reg(k), s.reg(kPred)
	s.emit("atom%s%s.cas.b%d \t%s, [%s], %s, %s;", sem, space, w, old, p, cmp, nv)
	s.emit("setp.eq.s%d \t%s, %s, %s;", w, ok, old, cmp)
	// llir's text parser types the result { T, i8 } (LLVM: { T, i1 }); give
	// the flag the declared type so every use sees consistent registers.
	if ks, err := laneKinds(inst.Type()); err == nil && len(ks) == 2 && ks[1] == kI8 {
		b := s.reg(kI8)
		s.emit("selp.u16 \t%s, 1, 0, %s;", b, ok)
		ok = b
	}
	return s.define(inst, []string{old, ok})
}

// fence: acquire, release and acq_rel are fence.acq_rel, seq_cst is
// fence.sc (PTX ISA 9.7.13.4), at the syncscope's scope.
func (s *sel) fence(inst *llir.InstFence) error {
	scope, err := s.syncScope(inst.SyncScope)
	if err != nil {
		return err
	}
	switch inst.Ordering {
	case enum.AtomicOrderingAcquire, enum.AtomicOrderingRelease, enum.AtomicOrderingAcquireRelease:
		s.emit("fence.acq_rel%s;", scope)
	case enum.AtomicOrderingSequentiallyConsistent:
		s.emit("fence.sc%s;", scope)
	default:
		return s.fail("fence ordering %s is not supported", inst.Ordering)
	}
	return nil
}

// alloca reserves a .local array in the function (static size, entry block
// only); its address is generic (cvta.local) for address space 0 and a
// local-window address for address space 5.
func (s *sel) alloca(inst *llir.InstAlloca) error {
	if s.out != &s.f.blocks[0].code {
		return s.fail("alloca outside the entry block (a dynamic allocation) is not supported")
	}
	n := int64(1)
	if inst.NElems != nil {
		ci, ok := inst.NElems.(*constant.Int)
		if !ok || !ci.X.IsInt64() || ci.X.Int64() < 0 {
			return s.fail("alloca with a non-constant element count is not supported")
		}
		n = ci.X.Int64()
	}
	size, err := typeSize(inst.ElemType)
	if err != nil {
		return s.fail("%v", err)
	}
	align, err := typeAlign(inst.ElemType)
	if err != nil {
		return s.fail("%v", err)
	}
	if int64(inst.Align) > align {
		align = int64(inst.Align)
	}
	total := size * n
	if total == 0 {
		total = 1
	}
	if total > 512*1024 {
		return s.fail("alloca of %d bytes exceeds the 512 KiB local memory per thread", total)
	}
	name := fmt.Sprintf("__local_depot%d", len(s.f.locals))
	for s.c.symUsed[name] {
		name += "_"
	}
	s.f.locals = append(s.f.locals, fmt.Sprintf(".local .align %d .b8 \t%s[%d];", align, name, total))
	r := s.reg(kPtr)
	s.emit("mov.u64 \t%s, %s;", r, name)
	if inst.Typ.AddrSpace == asLocal {
		return s.define(inst, []string{r})
	}
	if inst.Typ.AddrSpace != asGeneric {
		return s.fail("alloca in address space %d", inst.Typ.AddrSpace)
	}
	g := s.reg(kPtr)
	s.emit("cvta.local.u64 \t%s, %s;", g, r)
	return s.define(inst, []string{g})
}
