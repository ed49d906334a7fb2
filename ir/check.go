package ir

import (
	"errors"
	"fmt"
	"strings"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/metadata"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// maxErrors bounds the number of problems Check reports.
const maxErrors = 50

// Check reports the constructs of m that are outside the subset the ptx
// backend accepts (described in doc.go): every instruction, type, intrinsic,
// calling form, global and metadata node is either in the subset or named in
// an error together with its function; structural rules (terminators, phis
// against predecessors, definitions dominating uses, operand types, kernel
// annotations) are checked too. The error joins up to 50 problems, each
// starting with "ir: ". Check never modifies m (except llir's numbering of
// unnamed values, as printing does) and never panics.
func Check(m *llir.Module) (err error) {
	c := &checker{m: m, kernels: map[*llir.Func]bool{}, globals: map[*llir.Global]bool{}, funcs: map[*llir.Func]bool{}}
	defer func() {
		if r := recover(); r != nil {
			c.errs = append(c.errs, fmt.Errorf("ir: malformed module: %v", r))
			err = errors.Join(c.errs...)
		}
	}()
	if m == nil {
		return errors.New("ir: nil module")
	}
	c.module()
	return errors.Join(c.errs...)
}

type checker struct {
	m       *llir.Module
	errs    []error
	kernels map[*llir.Func]bool
	globals map[*llir.Global]bool
	funcs   map[*llir.Func]bool

	// per function
	fn     *llir.Func
	blocks map[*llir.Block]int
	pos    map[value.Value]instPos
	params map[*llir.Param]bool
	idom   []int
}

type instPos struct{ block, index int }

func (c *checker) add(err error) {
	if len(c.errs) < maxErrors {
		c.errs = append(c.errs, err)
	} else if len(c.errs) == maxErrors {
		c.errs = append(c.errs, errors.New("ir: too many errors"))
	}
}

func (c *checker) modErr(format string, args ...any) {
	c.add(fmt.Errorf("ir: "+format, args...))
}

func (c *checker) fnErr(format string, args ...any) {
	c.add(fmt.Errorf("ir: function @%s: %s", c.fn.Name(), fmt.Sprintf(format, args...)))
}

// instErr reports a problem with instruction (or terminator) inst.
func (c *checker) instErr(inst any, format string, args ...any) {
	c.add(fmt.Errorf("ir: function @%s: %s: %s", c.fn.Name(), instText(inst), fmt.Sprintf(format, args...)))
}

// instText returns the LLVM text of an instruction, or a description when
// it cannot be printed.
func instText(inst any) (s string) {
	defer func() {
		if r := recover(); r != nil {
			s = fmt.Sprintf("<%T>", inst)
		}
	}()
	if l, ok := inst.(interface{ LLString() string }); ok {
		return strings.TrimSpace(l.LLString())
	}
	return fmt.Sprint(inst)
}

func safeType(v value.Value) (t types.Type) {
	defer func() {
		if r := recover(); r != nil {
			t = nil
		}
	}()
	return v.Type()
}

// --- module ---

func (c *checker) module() {
	m := c.m
	if m.TargetTriple != Triple {
		c.modErr("target triple %q, want %q", m.TargetTriple, Triple)
	}
	if m.DataLayout != DataLayout {
		c.modErr("data layout %q, want %q", m.DataLayout, DataLayout)
	}
	for _, t := range m.TypeDefs {
		c.modErr("named type %s is not in the subset (use literal types)", t)
	}
	if len(m.ModuleAsms) > 0 {
		c.modErr("module-level asm is not in the subset")
	}
	if len(m.ComdatDefs) > 0 || len(m.Aliases) > 0 || len(m.IFuncs) > 0 || len(m.AttrGroupDefs) > 0 ||
		len(m.UseListOrders) > 0 || len(m.UseListOrderBBs) > 0 {
		c.modErr("comdats, aliases, ifuncs, attribute groups and use-list orders are not in the subset")
	}
	if err := m.AssignGlobalIDs(); err != nil {
		c.modErr("%v", err)
	}
	names := map[string]bool{}
	for _, g := range m.Globals {
		c.globals[g] = true
		if names[g.Name()] {
			c.modErr("global @%s defined twice", g.Name())
		}
		names[g.Name()] = true
	}
	for _, f := range m.Funcs {
		c.funcs[f] = true
		if names[f.Name()] {
			c.modErr("symbol @%s defined twice", f.Name())
		}
		names[f.Name()] = true
	}
	c.annotations()
	for _, g := range m.Globals {
		c.global(g)
	}
	for _, f := range m.Funcs {
		c.function(f)
	}
}

// unwrapMD returns the value inside a metadata field (llir keeps module
// values either directly or wrapped in *metadata.Value).
func unwrapMD(f metadata.Field) any {
	if v, ok := f.(*metadata.Value); ok {
		return v.Value
	}
	return f
}

func mdInt(f metadata.Field) (int64, bool) {
	if i, ok := unwrapMD(f).(*constant.Int); ok && i.Typ.BitSize == 32 {
		return i.X.Int64(), true
	}
	return 0, false
}

func (c *checker) annotations() {
	for name := range c.m.NamedMetadataDefs {
		if name != "nvvm.annotations" {
			c.modErr("named metadata !%s is not in the subset (only !nvvm.annotations)", name)
		}
	}
	for _, md := range c.m.MetadataDefs {
		if _, ok := md.(*metadata.Tuple); !ok {
			c.modErr("metadata node %s is not a tuple", md.Ident())
		}
	}
	nd := c.m.NamedMetadataDefs["nvvm.annotations"]
	if nd == nil {
		return
	}
	for _, node := range nd.Nodes {
		t, ok := node.(*metadata.Tuple)
		if !ok || len(t.Fields) < 3 || len(t.Fields)%2 != 1 {
			c.modErr("nvvm.annotations node %s is not !{fn, key, value, ...}", node.Ident())
			continue
		}
		fn, ok := unwrapMD(t.Fields[0]).(*llir.Func)
		if !ok || !c.funcs[fn] {
			c.modErr("nvvm.annotations node %s does not start with a function of the module", node.Ident())
			continue
		}
		fnName := fn.Name()
		kernel := false
		for i := 1; i+1 < len(t.Fields); i += 2 {
			key, ok := t.Fields[i].(*metadata.String)
			if !ok {
				c.modErr("nvvm.annotations for @%s: key %s is not a string", fnName, t.Fields[i])
				continue
			}
			val := t.Fields[i+1]
			switch key.Value {
			case "kernel":
				if n, ok := mdInt(val); !ok || n != 1 {
					c.modErr("nvvm.annotations for @%s: \"kernel\" must be i32 1", fnName)
				}
				kernel = true
			case "maxntidx", "maxntidy", "maxntidz", "reqntidx", "reqntidy", "reqntidz":
				if n, ok := mdInt(val); !ok || n < 1 || n > 1024 {
					c.modErr("nvvm.annotations for @%s: %q must be i32 in [1, 1024]", fnName, key.Value)
				}
			case "minctasm":
				if n, ok := mdInt(val); !ok || n < 1 || n > 32 {
					c.modErr("nvvm.annotations for @%s: \"minctasm\" must be i32 in [1, 32]", fnName)
				}
			case "maxnreg":
				if n, ok := mdInt(val); !ok || n < 16 || n > 255 {
					c.modErr("nvvm.annotations for @%s: \"maxnreg\" must be i32 in [16, 255]", fnName)
				}
			case "cluster_dim_x", "cluster_dim_y", "cluster_dim_z":
				if n, ok := mdInt(val); !ok || n < 1 || n > 8 {
					c.modErr("nvvm.annotations for @%s: %q must be i32 in [1, 8]", fnName, key.Value)
				}
			case "grid_constant":
				idx, ok := unwrapMD(val).(*metadata.Tuple)
				if !ok {
					c.modErr("nvvm.annotations for @%s: \"grid_constant\" must be a tuple of i32", fnName)
					continue
				}
				for _, e := range idx.Fields {
					n, ok := mdInt(e)
					if !ok || n < 1 || int(n) > len(fn.Params) || byvalType(fn.Params[n-1]) == nil {
						c.modErr("nvvm.annotations for @%s: grid_constant index %s is not a byval parameter (1-based)", fnName, e)
					}
				}
			default:
				c.modErr("nvvm.annotations for @%s: key %q is not in the subset", fnName, key.Value)
			}
		}
		if !kernel {
			c.modErr("nvvm.annotations for @%s lacks !\"kernel\", i32 1", fnName)
			continue
		}
		if c.kernels[fn] {
			c.modErr("nvvm.annotations lists kernel @%s twice", fnName)
		}
		c.kernels[fn] = true
		if len(fn.Blocks) == 0 {
			c.modErr("kernel @%s is only declared", fnName)
		}
		if !fn.Sig.RetType.Equal(types.Void) {
			c.modErr("kernel @%s returns %s, want void", fnName, fn.Sig.RetType)
		}
		for i, p := range fn.Params {
			if byvalType(p) != nil && !gridConstant(t, i+1) {
				c.modErr("kernel @%s: byval parameter %%%s is not listed under grid_constant", fnName, p.Name())
			}
		}
	}
}

func gridConstant(t *metadata.Tuple, idx int) bool {
	for i := 1; i+1 < len(t.Fields); i += 2 {
		if k, ok := t.Fields[i].(*metadata.String); ok && k.Value == "grid_constant" {
			if tup, ok := unwrapMD(t.Fields[i+1]).(*metadata.Tuple); ok {
				for _, e := range tup.Fields {
					if n, ok := mdInt(e); ok && int(n) == idx {
						return true
					}
				}
			}
		}
	}
	return false
}

func byvalType(p *llir.Param) types.Type {
	for _, a := range p.Attrs {
		if b, ok := a.(llir.Byval); ok {
			if b.Typ == nil {
				if pt, ok := p.Typ.(*types.PointerType); ok {
					return pt.ElemType
				}
				return types.Void
			}
			return b.Typ
		}
	}
	return nil
}

// --- types ---

// valueType reports whether t can be the type of an SSA value.
func valueType(t types.Type) bool {
	switch t := t.(type) {
	case *types.IntType:
		switch t.BitSize {
		case 1, 8, 16, 32, 64:
			return true
		}
	case *types.FloatType:
		return isFloat(t)
	case *types.PointerType:
		return okSpace(t.AddrSpace) && pointeeType(t.ElemType)
	case *types.VectorType:
		return vectorType(t)
	}
	return false
}

// memType reports whether t can be loaded or stored.
func memType(t types.Type) bool {
	if isInt(t, 1) {
		return false
	}
	return valueType(t)
}

func vectorType(t *types.VectorType) bool {
	if t.Len != 2 && t.Len != 4 {
		return false
	}
	switch e := t.ElemType.(type) {
	case *types.IntType:
		if e.BitSize != 8 && e.BitSize != 16 && e.BitSize != 32 {
			return false
		}
	case *types.FloatType:
		if e.Kind != types.FloatKindHalf && e.Kind != types.FloatKindFloat {
			return false
		}
	default:
		return false
	}
	return bits(t) <= 128
}

// sizedType reports whether t can be an element type of memory: a scalar,
// pointer or vector of the subset, or arrays and literal structs of those.
func sizedType(t types.Type) bool {
	switch t := t.(type) {
	case *types.ArrayType:
		return sizedType(t.ElemType)
	case *types.StructType:
		if t.TypeName != "" || t.Opaque {
			return false
		}
		for _, f := range t.Fields {
			if !sizedType(f) {
				return false
			}
		}
		return true
	}
	return memType(t)
}

// pointeeType reports whether a pointer may point to t.
func pointeeType(t types.Type) bool {
	if sizedType(t) {
		return true
	}
	_, isFunc := t.(*types.FuncType)
	return isFunc || isInt(t, 1)
}

// sizeOf returns the store size of t in bytes (natural layout of the data
// layout above: scalars aligned to their size, vectors to their size).
func sizeOf(t types.Type) uint64 {
	switch t := t.(type) {
	case *types.ArrayType:
		return t.Len * sizeOf(t.ElemType)
	case *types.StructType:
		var off, maxAlign uint64 = 0, 1
		for _, f := range t.Fields {
			a := alignOf(f)
			off = (off + a - 1) / a * a
			off += sizeOf(f)
			maxAlign = max(maxAlign, a)
		}
		return (off + maxAlign - 1) / maxAlign * maxAlign
	}
	return (bits(t) + 7) / 8
}

func alignOf(t types.Type) uint64 {
	switch t := t.(type) {
	case *types.ArrayType:
		return alignOf(t.ElemType)
	case *types.StructType:
		var a uint64 = 1
		for _, f := range t.Fields {
			a = max(a, alignOf(f))
		}
		return a
	}
	return max(1, sizeOf(t))
}

// --- globals ---

func (c *checker) global(g *llir.Global) {
	name := g.Name()
	gerr := func(format string, args ...any) {
		c.modErr("global @%s: %s", name, fmt.Sprintf(format, args...))
	}
	if g.TLSModel != enum.TLSModelNone || g.Section != "" || g.Partition != "" || g.Comdat != nil ||
		g.ExternallyInitialized || len(g.Metadata) > 0 || len(g.FuncAttrs) > 0 {
		gerr("thread-local, section, partition, comdat, externally_initialized, metadata and attributes are not in the subset")
	}
	switch g.Linkage {
	case enum.LinkageNone, enum.LinkageInternal, enum.LinkagePrivate, enum.LinkageExternal:
	default:
		gerr("linkage %s is not in the subset", g.Linkage)
	}
	if g.Align != 0 && !isPow2(int(g.Align)) {
		gerr("alignment %d is not a power of two", g.Align)
	}
	if !sizedType(g.ContentType) {
		gerr("type %s is not in the subset", g.ContentType)
		return
	}
	if pt, ok := safeType(g).(*types.PointerType); !ok || pt.AddrSpace != g.AddrSpace || !pt.ElemType.Equal(g.ContentType) {
		gerr("pointer type %s does not match %s in address space %d", safeType(g), g.ContentType, g.AddrSpace)
	}
	switch g.AddrSpace {
	case Shared:
		if g.Immutable {
			gerr("shared variables cannot be constant")
		}
		switch init := g.Init.(type) {
		case nil:
			at, ok := g.ContentType.(*types.ArrayType)
			if !ok || at.Len != 0 || !isInt(at.ElemType, 8) || g.Linkage != enum.LinkageExternal {
				gerr("a shared declaration must be dynamic shared memory: external addrspace(3) global [0 x i8]")
			}
		case *constant.ZeroInitializer, *constant.Undef:
		default:
			gerr("shared initializer %s is not zeroinitializer or undef", init.Ident())
		}
	case Global, Const:
		if g.Init == nil {
			gerr("external global declarations are not in the subset")
			return
		}
		if !intInit(g.Init) {
			gerr("initializer %s is not zeroinitializer, undef, an integer or an array of integers", g.Init.Ident())
		}
	default:
		gerr("address space %d is not shared (3), global (1) or const (4)", g.AddrSpace)
	}
}

func intInit(c constant.Constant) bool {
	switch c := c.(type) {
	case *constant.ZeroInitializer, *constant.Undef, *constant.CharArray:
		return true
	case *constant.Int:
		return c.Typ.BitSize >= 8
	case *constant.Array:
		for _, e := range c.Elems {
			if i, ok := e.(*constant.Int); !ok || i.Typ.BitSize < 8 {
				return false
			}
		}
		return true
	}
	return false
}

// --- functions ---

var okParamAttrs = map[enum.ParamAttr]bool{
	enum.ParamAttrNoAlias: true, enum.ParamAttrNoCapture: true, enum.ParamAttrReadOnly: true,
	enum.ParamAttrWriteOnly: true, enum.ParamAttrNoUndef: true, enum.ParamAttrNonNull: true,
	enum.ParamAttrReadNone: true, enum.ParamAttrNoFree: true,
}

func (c *checker) function(f *llir.Func) {
	c.fn = f
	if len(f.Blocks) == 0 {
		c.declaration(f)
		return
	}
	if f.Sig.Variadic {
		c.fnErr("variadic functions are not in the subset")
	}
	if f.CallingConv != enum.CallingConvNone || f.GC != "" || f.Prefix != nil || f.Prologue != nil ||
		f.Personality != nil || f.Section != "" || f.Partition != "" || f.Comdat != nil || len(f.Metadata) > 0 ||
		len(f.ReturnAttrs) > 0 || f.AddrSpace != 0 || len(f.UseListOrders) > 0 {
		c.fnErr("calling conventions, gc, prefix, prologue, personality, section, partition, comdat, metadata, return attributes and address spaces are not in the subset")
	}
	for _, a := range f.FuncAttrs {
		if _, ok := a.(enum.FuncAttr); !ok {
			c.fnErr("function attribute %s is not in the subset", a)
		}
	}
	switch f.Linkage {
	case enum.LinkageNone, enum.LinkageExternal, enum.LinkageInternal, enum.LinkagePrivate:
	default:
		c.fnErr("linkage %s is not in the subset", f.Linkage)
	}
	if rt := f.Sig.RetType; !rt.Equal(types.Void) && !memType(rt) {
		c.fnErr("return type %s is not in the subset", rt)
	}
	c.params = map[*llir.Param]bool{}
	for _, p := range f.Params {
		c.params[p] = true
		c.param(f, p)
	}
	if err := assignIDs(f); err != nil {
		c.fnErr("%v", err)
		return
	}
	c.body(f)
}

func assignIDs(f *llir.Func) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return f.AssignIDs()
}

func (c *checker) param(f *llir.Func, p *llir.Param) {
	if !p.Typ.Equal(f.Sig.Params[indexOfParam(f, p)]) {
		c.fnErr("parameter %%%s has type %s but the signature says %s", p.Name(), p.Typ, f.Sig.Params[indexOfParam(f, p)])
	}
	if isInt(p.Typ, 1) || !memType(p.Typ) {
		c.fnErr("parameter %%%s: type %s is not in the subset", p.Name(), p.Typ)
	}
	byval := false
	for _, a := range p.Attrs {
		switch a := a.(type) {
		case llir.Byval:
			byval = true
		case llir.Align:
			if !isPow2(int(a)) {
				c.fnErr("parameter %%%s: alignment %d is not a power of two", p.Name(), a)
			}
		case llir.Dereferenceable:
		case enum.ParamAttr:
			if !okParamAttrs[a] {
				c.fnErr("parameter %%%s: attribute %s is not in the subset", p.Name(), a)
			}
		default:
			c.fnErr("parameter %%%s: attribute %s is not in the subset", p.Name(), a)
		}
	}
	if byval {
		bt := byvalType(p)
		pt, ok := p.Typ.(*types.PointerType)
		if !c.kernels[f] {
			c.fnErr("byval parameter %%%s: byval is only allowed on kernels", p.Name())
		} else if !ok || pt.AddrSpace != Generic || !bt.Equal(TensorMapType) || !pt.ElemType.Equal(bt) {
			c.fnErr("byval parameter %%%s: only [128 x i8]* byval([128 x i8]) align 64 (a tensor map) is in the subset", p.Name())
		}
	}
}

func indexOfParam(f *llir.Func, p *llir.Param) int {
	for i, q := range f.Params {
		if q == p {
			return i
		}
	}
	return 0
}

func (c *checker) declaration(f *llir.Func) {
	s, ok := intrinsicSigs[f.Name()]
	if !ok {
		if strings.HasPrefix(f.Name(), "llvm.") {
			c.modErr("intrinsic @%s is not in the subset", f.Name())
		} else {
			c.modErr("declaration of external function @%s: only intrinsics of the subset may be declared", f.Name())
		}
		return
	}
	want := types.NewFunc(s.ret, s.params...)
	if !f.Sig.Equal(want) {
		c.modErr("intrinsic @%s declared as %s, want %s", f.Name(), f.Sig, want)
	}
}

// --- bodies ---

func termTargets(t llir.Terminator) []value.Value {
	switch t := t.(type) {
	case *llir.TermBr:
		return []value.Value{t.Target}
	case *llir.TermCondBr:
		return []value.Value{t.TargetTrue, t.TargetFalse}
	case *llir.TermSwitch:
		ts := []value.Value{t.TargetDefault}
		for _, cs := range t.Cases {
			ts = append(ts, cs.Target)
		}
		return ts
	}
	return nil
}

func (c *checker) body(f *llir.Func) {
	c.blocks = map[*llir.Block]int{}
	c.pos = map[value.Value]instPos{}
	for i, b := range f.Blocks {
		if _, dup := c.blocks[b]; dup {
			c.fnErr("block %%%s appears twice", b.Name())
		}
		c.blocks[b] = i
	}
	// Successors and predecessors.
	n := len(f.Blocks)
	succs := make([][]int, n)
	preds := make([][]int, n)
	for i, b := range f.Blocks {
		if b.Term == nil {
			c.fnErr("block %%%s does not end in a terminator", b.Name())
			continue
		}
		for _, tv := range termTargets(b.Term) {
			tb, ok := tv.(*llir.Block)
			j, in := c.blocks[tb]
			if !ok || !in {
				c.instErr(b.Term, "branch target is not a block of this function")
				continue
			}
			if j == 0 {
				c.instErr(b.Term, "the entry block cannot be a branch target")
			}
			succs[i] = append(succs[i], j)
			preds[j] = append(preds[j], i)
		}
		for k, inst := range b.Insts {
			if v, ok := inst.(value.Value); ok {
				c.pos[v] = instPos{i, k}
			}
		}
	}
	c.idom = dominators(succs, preds)
	for i, b := range f.Blocks {
		phisDone := false
		for k, inst := range b.Insts {
			if phi, ok := inst.(*llir.InstPhi); ok {
				if phisDone {
					c.instErr(inst, "phi after a non-phi instruction")
				}
				c.phi(phi, i, preds[i])
				continue
			}
			phisDone = true
			c.operands(inst, i, k)
			c.inst(inst, i)
		}
		if b.Term != nil {
			c.operands(b.Term, i, len(b.Insts))
			c.term(b.Term)
		}
	}
}

// dominators returns the immediate dominator of each block (Cooper, Harvey,
// Kennedy, "A Simple, Fast Dominance Algorithm"); -1 for unreachable blocks
// and the entry.
func dominators(succs, preds [][]int) []int {
	n := len(succs)
	// Reverse postorder.
	order := make([]int, 0, n)
	seen := make([]bool, n)
	var dfs func(int)
	dfs = func(b int) {
		seen[b] = true
		for _, s := range succs[b] {
			if !seen[s] {
				dfs(s)
			}
		}
		order = append(order, b)
	}
	if n > 0 {
		dfs(0)
	}
	rpo := make([]int, n)
	for i := range rpo {
		rpo[i] = -1
	}
	for i, b := range order {
		rpo[b] = len(order) - 1 - i
	}
	idom := make([]int, n)
	for i := range idom {
		idom[i] = -1
	}
	if n == 0 {
		return idom
	}
	idom[0] = 0
	intersect := func(a, b int) int {
		for a != b {
			for rpo[a] > rpo[b] {
				a = idom[a]
			}
			for rpo[b] > rpo[a] {
				b = idom[b]
			}
		}
		return a
	}
	for changed := true; changed; {
		changed = false
		for i := len(order) - 1; i >= 0; i-- {
			b := order[i]
			if b == 0 {
				continue
			}
			nd := -1
			for _, p := range preds[b] {
				if idom[p] == -1 {
					continue
				}
				if nd == -1 {
					nd = p
				} else {
					nd = intersect(p, nd)
				}
			}
			if nd != -1 && idom[b] != nd {
				idom[b] = nd
				changed = true
			}
		}
	}
	idom[0] = -1
	return idom
}

// dominates reports whether block a dominates block b (unreachable blocks
// are dominated by every block).
func (c *checker) dominates(a, b int) bool {
	if b != 0 && c.idom[b] == -1 {
		return true // b unreachable
	}
	for {
		if a == b {
			return true
		}
		if b == 0 || c.idom[b] == -1 {
			return false
		}
		b = c.idom[b]
	}
}

// operand checks one operand value used in block bi at index k (for phis,
// the use is at the end of the incoming block: k = -1 means "end of bi").
func (c *checker) operand(inst any, v value.Value, bi, k int, callee bool) {
	if a, ok := v.(*llir.Arg); ok {
		v = a.Value
	}
	switch v := v.(type) {
	case nil:
		c.instErr(inst, "missing operand")
	case *llir.Param:
		if !c.params[v] {
			c.instErr(inst, "parameter %%%s belongs to another function", v.Name())
		}
	case *llir.Global:
		if !c.globals[v] {
			c.instErr(inst, "global @%s is not in the module", v.Name())
		}
	case *llir.Func:
		if !callee {
			c.instErr(inst, "function @%s used as a value", v.Name())
		} else if !c.funcs[v] {
			c.instErr(inst, "function @%s is not in the module", v.Name())
		}
	case *llir.InlineAsm:
		if !callee {
			c.instErr(inst, "inline asm used as a value")
		}
	case *llir.Block:
		if _, ok := c.blocks[v]; !ok {
			c.instErr(inst, "block %%%s belongs to another function", v.Name())
		}
	case constant.Constant:
		c.constOperand(inst, v)
	default:
		p, ok := c.pos[v]
		if !ok {
			c.instErr(inst, "operand %s is not defined in this function", v.Ident())
			return
		}
		if p.block == bi {
			if k >= 0 && p.index >= k {
				c.instErr(inst, "operand %s is used before its definition", v.Ident())
			}
			return
		}
		if !c.dominates(p.block, bi) {
			c.instErr(inst, "operand %s does not dominate this use", v.Ident())
		}
	}
}

func (c *checker) constOperand(inst any, v constant.Constant) {
	switch v := v.(type) {
	case *constant.Int:
		if !valueType(v.Typ) {
			c.instErr(inst, "constant of type %s is not in the subset", v.Typ)
		}
	case *constant.Float:
		if !isFloat(v.Typ) {
			c.instErr(inst, "constant of type %s is not in the subset", v.Typ)
		}
	case *constant.Null:
		if !valueType(v.Typ) {
			c.instErr(inst, "null of type %s is not in the subset", v.Typ)
		}
	case *constant.Undef, *constant.Poison, *constant.ZeroInitializer:
		if !valueType(v.Type()) {
			c.instErr(inst, "%s of type %s is not in the subset", v.Ident(), v.Type())
		}
	case *constant.Vector:
		if v.Typ == nil || !vectorType(v.Typ) {
			c.instErr(inst, "vector constant of type %s is not in the subset", v.Typ)
		}
		for _, e := range v.Elems {
			switch e.(type) {
			case *constant.Int, *constant.Float, *constant.Undef:
			default:
				c.instErr(inst, "vector constant element %s is not an integer or float", e.Ident())
			}
		}
	default:
		c.instErr(inst, "constant %s is not in the subset (constant expressions must be instructions)", v.Ident())
	}
}

func (c *checker) operands(inst any, bi, k int) {
	u, ok := inst.(value.User)
	if !ok {
		return
	}
	call, isCall := inst.(*llir.InstCall)
	for _, op := range u.Operands() {
		if op == nil {
			c.instErr(inst, "missing operand")
			continue
		}
		c.operand(inst, *op, bi, k, isCall && *op == call.Callee)
	}
}

func (c *checker) phi(phi *llir.InstPhi, bi int, preds []int) {
	t := phi.Typ
	if t == nil && len(phi.Incs) > 0 {
		t = safeType(phi.Incs[0].X)
	}
	if t == nil || !valueType(t) {
		c.instErr(phi, "phi of type %s is not in the subset", t)
	}
	predSet := map[int]bool{}
	for _, p := range preds {
		predSet[p] = true
	}
	got := map[int]value.Value{}
	for _, inc := range phi.Incs {
		pb, ok := inc.Pred.(*llir.Block)
		pi, in := c.blocks[pb]
		if !ok || !in {
			c.instErr(phi, "incoming block is not a block of this function")
			continue
		}
		if !predSet[pi] {
			c.instErr(phi, "incoming block %%%s is not a predecessor of %%%s", pb.Name(), c.fn.Blocks[bi].Name())
			continue
		}
		if prev, dup := got[pi]; dup && prev != inc.X && prev.Ident() != inc.X.Ident() {
			c.instErr(phi, "block %%%s comes in twice with different values", pb.Name())
		}
		got[pi] = inc.X
		if it := safeType(inc.X); it == nil || t == nil || !it.Equal(t) {
			c.instErr(phi, "incoming value of type %s in a phi of type %s", it, t)
		}
		c.operand(phi, inc.X, pi, -1, false)
	}
	for p := range predSet {
		if _, ok := got[p]; !ok {
			c.instErr(phi, "no incoming value from predecessor %%%s", c.fn.Blocks[p].Name())
		}
	}
}

// --- instructions ---

func (c *checker) sameTypes(inst any, want func(types.Type) bool, what string, vs ...value.Value) types.Type {
	t := safeType(vs[0])
	for _, v := range vs {
		vt := safeType(v)
		if vt == nil || !vt.Equal(t) {
			c.instErr(inst, "operands have different types")
			return nil
		}
	}
	if !want(t) {
		c.instErr(inst, "operands of type %s, want %s", t, what)
		return nil
	}
	return t
}

func scalarInt(t types.Type) bool   { return isInt(t, 8, 16, 32, 64) }
func logicInt(t types.Type) bool    { return isInt(t, 1, 8, 16, 32, 64) }
func scalarFloat(t types.Type) bool { return isFloat(t) }

func (c *checker) inst(inst llir.Instruction, bi int) {
	if md, ok := inst.(interface{ MDAttachments() []*metadata.Attachment }); ok && len(md.MDAttachments()) > 0 {
		c.instErr(inst, "metadata attachments are not in the subset")
	}
	switch i := inst.(type) {
	case *llir.InstAdd:
		c.sameTypes(i, scalarInt, "i8, i16, i32 or i64", i.X, i.Y)
	case *llir.InstSub:
		c.sameTypes(i, scalarInt, "i8, i16, i32 or i64", i.X, i.Y)
	case *llir.InstMul:
		c.sameTypes(i, scalarInt, "i8, i16, i32 or i64", i.X, i.Y)
	case *llir.InstUDiv:
		c.sameTypes(i, scalarInt, "i8, i16, i32 or i64", i.X, i.Y)
	case *llir.InstSDiv:
		c.sameTypes(i, scalarInt, "i8, i16, i32 or i64", i.X, i.Y)
	case *llir.InstURem:
		c.sameTypes(i, scalarInt, "i8, i16, i32 or i64", i.X, i.Y)
	case *llir.InstSRem:
		c.sameTypes(i, scalarInt, "i8, i16, i32 or i64", i.X, i.Y)
	case *llir.InstShl:
		c.sameTypes(i, scalarInt, "i8, i16, i32 or i64", i.X, i.Y)
	case *llir.InstLShr:
		c.sameTypes(i, scalarInt, "i8, i16, i32 or i64", i.X, i.Y)
	case *llir.InstAShr:
		c.sameTypes(i, scalarInt, "i8, i16, i32 or i64", i.X, i.Y)
	case *llir.InstAnd:
		c.sameTypes(i, logicInt, "i1, i8, i16, i32 or i64", i.X, i.Y)
	case *llir.InstOr:
		c.sameTypes(i, logicInt, "i1, i8, i16, i32 or i64", i.X, i.Y)
	case *llir.InstXor:
		c.sameTypes(i, logicInt, "i1, i8, i16, i32 or i64", i.X, i.Y)
	case *llir.InstFAdd:
		c.sameTypes(i, scalarFloat, "half, float or double", i.X, i.Y)
	case *llir.InstFSub:
		c.sameTypes(i, scalarFloat, "half, float or double", i.X, i.Y)
	case *llir.InstFMul:
		c.sameTypes(i, scalarFloat, "half, float or double", i.X, i.Y)
	case *llir.InstFDiv:
		c.sameTypes(i, scalarFloat, "half, float or double", i.X, i.Y)
	case *llir.InstFNeg:
		c.sameTypes(i, scalarFloat, "half, float or double", i.X)
	case *llir.InstFRem:
		c.instErr(i, "frem is not in the subset")
	case *llir.InstICmp:
		c.sameTypes(i, func(t types.Type) bool {
			_, p := t.(*types.PointerType)
			return logicInt(t) || p
		}, "integers or pointers", i.X, i.Y)
	case *llir.InstFCmp:
		c.sameTypes(i, scalarFloat, "half, float or double", i.X, i.Y)
	case *llir.InstSelect:
		if ct := safeType(i.Cond); ct == nil || !ct.Equal(types.I1) {
			c.instErr(i, "condition of type %s, want i1", ct)
		}
		c.sameTypes(i, func(t types.Type) bool {
			_, vec := t.(*types.VectorType)
			return valueType(t) && !vec
		}, "a scalar or pointer", i.ValueTrue, i.ValueFalse)
	case *llir.InstTrunc:
		c.conv(i, i.From, i.To, func(a, b types.Type) bool { return logicInt(a) && logicInt(b) && bits(b) < bits(a) })
	case *llir.InstZExt:
		c.conv(i, i.From, i.To, func(a, b types.Type) bool { return logicInt(a) && scalarInt(b) && bits(b) > bits(a) })
	case *llir.InstSExt:
		c.conv(i, i.From, i.To, func(a, b types.Type) bool { return logicInt(a) && scalarInt(b) && bits(b) > bits(a) })
	case *llir.InstFPTrunc:
		c.conv(i, i.From, i.To, func(a, b types.Type) bool { return isFloat(a) && isFloat(b) && bits(b) < bits(a) })
	case *llir.InstFPExt:
		c.conv(i, i.From, i.To, func(a, b types.Type) bool { return isFloat(a) && isFloat(b) && bits(b) > bits(a) })
	case *llir.InstFPToUI:
		c.conv(i, i.From, i.To, func(a, b types.Type) bool { return isFloat(a) && scalarInt(b) })
	case *llir.InstFPToSI:
		c.conv(i, i.From, i.To, func(a, b types.Type) bool { return isFloat(a) && scalarInt(b) })
	case *llir.InstUIToFP:
		c.conv(i, i.From, i.To, func(a, b types.Type) bool { return logicInt(a) && isFloat(b) })
	case *llir.InstSIToFP:
		c.conv(i, i.From, i.To, func(a, b types.Type) bool { return logicInt(a) && isFloat(b) })
	case *llir.InstPtrToInt:
		c.conv(i, i.From, i.To, func(a, b types.Type) bool { _, p := a.(*types.PointerType); return p && isInt(b, 64) })
	case *llir.InstIntToPtr:
		c.conv(i, i.From, i.To, func(a, b types.Type) bool { _, p := b.(*types.PointerType); return isInt(a, 64) && p })
	case *llir.InstBitCast:
		c.conv(i, i.From, i.To, func(a, b types.Type) bool {
			pa, aPtr := a.(*types.PointerType)
			pb, bPtr := b.(*types.PointerType)
			if aPtr || bPtr {
				return aPtr && bPtr && pa.AddrSpace == pb.AddrSpace
			}
			return bits(a) != 0 && bits(a) == bits(b)
		})
	case *llir.InstAddrSpaceCast:
		c.conv(i, i.From, i.To, func(a, b types.Type) bool {
			pa, aPtr := a.(*types.PointerType)
			pb, bPtr := b.(*types.PointerType)
			return aPtr && bPtr && (pa.AddrSpace == Generic) != (pb.AddrSpace == Generic)
		})
	case *llir.InstGetElementPtr:
		c.gep(i)
	case *llir.InstLoad:
		c.memAccess(i, i.Src, i.ElemType, i.Align, i.Atomic || i.Ordering != enum.AtomicOrderingNone, i.SyncScope, true)
	case *llir.InstStore:
		c.memAccess(i, i.Dst, safeType(i.Src), i.Align, i.Atomic || i.Ordering != enum.AtomicOrderingNone, i.SyncScope, false)
	case *llir.InstAlloca:
		if bi != 0 {
			c.instErr(i, "alloca outside the entry block")
		}
		if !sizedType(i.ElemType) || i.InAlloca || i.SwiftError || i.Typ == nil || i.Typ.AddrSpace != Generic {
			c.instErr(i, "alloca of %s is not in the subset (sized element type, generic result)", i.ElemType)
		}
		if i.NElems != nil {
			if _, ok := i.NElems.(*constant.Int); !ok {
				c.instErr(i, "alloca with a variable element count")
			}
		}
		if i.Align != 0 && !isPow2(int(i.Align)) {
			c.instErr(i, "alignment %d is not a power of two", i.Align)
		}
	case *llir.InstExtractElement:
		vt, ok := safeType(i.X).(*types.VectorType)
		idx, isC := i.Index.(*constant.Int)
		if !ok || !vectorType(vt) || !isC || idx.X.Sign() < 0 || idx.X.Uint64() >= vt.Len {
			c.instErr(i, "extractelement needs a vector of the subset and a constant index in range")
		}
	case *llir.InstInsertElement:
		vt, ok := safeType(i.X).(*types.VectorType)
		idx, isC := i.Index.(*constant.Int)
		if !ok || !vectorType(vt) || !isC || idx.X.Sign() < 0 || idx.X.Uint64() >= vt.Len || !vt.ElemType.Equal(safeType(i.Elem)) {
			c.instErr(i, "insertelement needs a vector of the subset, an element of its type and a constant index in range")
		}
	case *llir.InstExtractValue:
		st, ok := safeType(i.X).(*types.StructType)
		if !ok || st.TypeName != "" || len(i.Indices) != 1 || i.Indices[0] >= uint64(len(st.Fields)) {
			c.instErr(i, "extractvalue needs a literal struct and one index in range")
		}
	case *llir.InstInsertValue:
		st, ok := safeType(i.X).(*types.StructType)
		if !ok || st.TypeName != "" || len(i.Indices) != 1 || i.Indices[0] >= uint64(len(st.Fields)) ||
			!st.Fields[i.Indices[0]].Equal(safeType(i.Elem)) {
			c.instErr(i, "insertvalue needs a literal struct, one index in range and an element of the field's type")
		}
	case *llir.InstAtomicRMW:
		pt, ok := safeType(i.Dst).(*types.PointerType)
		if !ok || !pt.ElemType.Equal(safeType(i.X)) {
			c.instErr(i, "atomicrmw value type does not match the pointer")
			return
		}
		if why := checkAtomicRMW(i.Op, pt, i.Ordering); why != "" {
			c.instErr(i, "%s", why)
		}
		if i.SyncScope != "" {
			c.instErr(i, "sync scope %q is not in the subset (default system scope only)", i.SyncScope)
		}
	case *llir.InstCmpXchg:
		pt, ok := safeType(i.Ptr).(*types.PointerType)
		if !ok || !isInt(pt.ElemType, 32, 64) || !pt.ElemType.Equal(safeType(i.Cmp)) || !pt.ElemType.Equal(safeType(i.New)) {
			c.instErr(i, "cmpxchg needs i32 or i64 operands matching the pointer")
			return
		}
		if !atomicSpace(pt.AddrSpace) {
			c.instErr(i, "address space %d is not generic, global or shared", pt.AddrSpace)
		}
		if i.SuccessOrdering != enum.AtomicOrderingMonotonic || i.FailureOrdering != enum.AtomicOrderingMonotonic {
			c.instErr(i, "orderings %s/%s are not in the subset: only monotonic (llc-19 drops orderings)", i.SuccessOrdering, i.FailureOrdering)
		}
		if i.SyncScope != "" {
			c.instErr(i, "sync scope %q is not in the subset (default system scope only)", i.SyncScope)
		}
	case *llir.InstFence:
		c.instErr(i, "fence is not in the subset (llc-19 cannot select it for NVPTX; use FenceAcqRel/FenceSC inline PTX or the membar intrinsics)")
	case *llir.InstCall:
		c.call(i)
	default:
		c.instErr(inst, "instruction is not in the subset")
		return
	}
	// Result type.
	if v, ok := inst.(value.Value); ok {
		t := safeType(v)
		switch inst.(type) {
		case *llir.InstCmpXchg, *llir.InstInsertValue, *llir.InstCall, *llir.InstStore, *llir.InstFence:
			return
		}
		if t == nil || !valueType(t) {
			c.instErr(inst, "result type %s is not in the subset", t)
		}
	}
}

func (c *checker) conv(inst any, from value.Value, to types.Type, ok func(a, b types.Type) bool) {
	ft := safeType(from)
	if ft == nil || to == nil || !valueType(ft) || !valueType(to) || !ok(ft, to) {
		c.instErr(inst, "conversion from %s to %s is not in the subset", ft, to)
	}
}

func (c *checker) gep(i *llir.InstGetElementPtr) {
	pt, ok := safeType(i.Src).(*types.PointerType)
	if !ok {
		c.instErr(i, "base is not a pointer (vectors of pointers are not in the subset)")
		return
	}
	if !pt.ElemType.Equal(i.ElemType) {
		c.instErr(i, "source element type %s does not match the base pointer %s", i.ElemType, pt)
	}
	if len(i.Indices) == 0 {
		c.instErr(i, "getelementptr without indices")
		return
	}
	t := i.ElemType
	for k, idx := range i.Indices {
		if !isInt(safeType(idx), 32, 64) {
			c.instErr(i, "index %d is not an i32 or i64", k)
			return
		}
		if k == 0 {
			continue
		}
		switch tt := t.(type) {
		case *types.ArrayType:
			t = tt.ElemType
		case *types.StructType:
			ci, ok := idx.(*constant.Int)
			if !ok || !isInt(ci.Typ, 32) || ci.X.Sign() < 0 || ci.X.Uint64() >= uint64(len(tt.Fields)) {
				c.instErr(i, "struct index %d must be an i32 constant in range", k)
				return
			}
			t = tt.Fields[ci.X.Uint64()]
		default:
			c.instErr(i, "index %d steps into %s, which is not an array or struct", k, t)
			return
		}
	}
	want := PtrTo(t, pt.AddrSpace)
	if got := safeType(i); got == nil || !got.Equal(want) {
		c.instErr(i, "result type %s, want %s", got, want)
	}
	if !pointeeType(t) {
		c.instErr(i, "element type %s is not in the subset", t)
	}
}

func (c *checker) memAccess(inst any, p value.Value, t types.Type, align llir.Align, atomic bool, scope string, isLoad bool) {
	if atomic || scope != "" {
		c.instErr(inst, "atomic loads and stores are not in the subset (use atomicrmw or inline PTX ld.acquire/st.release)")
	}
	pt, ok := safeType(p).(*types.PointerType)
	if !ok {
		c.instErr(inst, "address is not a pointer")
		return
	}
	if t == nil || !pt.ElemType.Equal(t) {
		c.instErr(inst, "value type %s does not match the pointer %s", t, pt)
		return
	}
	if !memType(t) {
		if vt, ok := t.(*types.VectorType); ok && bits(vt) > 128 {
			c.instErr(inst, "vector access of %d bytes (at most 16 bytes)", bits(vt)/8)
		} else {
			c.instErr(inst, "access of type %s is not in the subset", t)
		}
		return
	}
	switch pt.AddrSpace {
	case Generic, Global, Shared, Local:
	case Const:
		if !isLoad {
			c.instErr(inst, "store to the const address space")
		}
	default:
		c.instErr(inst, "address space %d is not in the subset (0, 1, 3, 4, 5)", pt.AddrSpace)
	}
	if align != 0 {
		if !isPow2(int(align)) {
			c.instErr(inst, "alignment %d is not a power of two", align)
		} else if uint64(align) < sizeOf(t) {
			c.instErr(inst, "alignment %d is below the access size %d", align, sizeOf(t))
		}
	}
}

func (c *checker) call(i *llir.InstCall) {
	if len(i.OperandBundles) > 0 || i.CallingConv != enum.CallingConvNone || len(i.ReturnAttrs) > 0 || i.AddrSpace != 0 {
		c.instErr(i, "operand bundles, calling conventions, return attributes and address spaces on calls are not in the subset")
	}
	for _, a := range i.FuncAttrs {
		if _, ok := a.(enum.FuncAttr); !ok {
			c.instErr(i, "call attribute %s is not in the subset", a)
		}
	}
	pt, ok := safeType(i.Callee).(*types.PointerType)
	var sig *types.FuncType
	if ok {
		sig, ok = pt.ElemType.(*types.FuncType)
	}
	if !ok {
		c.instErr(i, "callee is not a function")
		return
	}
	if sig.Variadic {
		c.instErr(i, "variadic calls are not in the subset")
		return
	}
	args := make([]value.Value, len(i.Args))
	for k, a := range i.Args {
		if arg, ok := a.(*llir.Arg); ok {
			if len(arg.Attrs) > 0 {
				c.instErr(i, "argument attributes are not in the subset")
			}
			args[k] = arg.Value
		} else {
			args[k] = a
		}
	}
	if len(args) != len(sig.Params) {
		c.instErr(i, "%d arguments for %d parameters", len(args), len(sig.Params))
		return
	}
	for k, a := range args {
		if at := safeType(a); at == nil || !at.Equal(sig.Params[k]) {
			c.instErr(i, "argument %d is %s, want %s", k, at, sig.Params[k])
			return
		}
	}
	switch callee := i.Callee.(type) {
	case *llir.Func:
		if len(callee.Blocks) == 0 {
			if _, ok := intrinsicSigs[callee.Name()]; !ok {
				if strings.HasPrefix(callee.Name(), "llvm.") {
					c.instErr(i, "intrinsic @%s is not in the subset", callee.Name())
				} else {
					c.instErr(i, "call to external function @%s (only intrinsics of the subset and functions defined in the module)", callee.Name())
				}
			}
			return
		}
		if c.kernels[callee] {
			c.instErr(i, "call to kernel @%s", callee.Name())
		}
	case *llir.InlineAsm:
		if callee.AlignStack || callee.IntelDialect {
			c.instErr(i, "alignstack and inteldialect inline asm are not in the subset")
		}
		if rt := sig.RetType; !rt.Equal(types.Void) {
			for _, t := range asmResultTypes(rt) {
				if !memType(t) {
					c.instErr(i, "inline asm output of type %s is not in the subset", t)
					return
				}
			}
		}
		if err := checkAsm(callee.Asm, callee.Constraint, sig.RetType, args); err != nil {
			c.instErr(i, "inline asm: %v", err)
		}
	default:
		c.instErr(i, "indirect calls are not in the subset")
	}
	if rt := sig.RetType; !rt.Equal(types.Void) {
		if _, isAsm := i.Callee.(*llir.InlineAsm); !isAsm && !memType(rt) {
			c.instErr(i, "result type %s is not in the subset", rt)
		}
	}
}

func (c *checker) term(t llir.Terminator) {
	if md, ok := t.(interface{ MDAttachments() []*metadata.Attachment }); ok && len(md.MDAttachments()) > 0 {
		c.instErr(t, "metadata attachments are not in the subset")
	}
	switch t := t.(type) {
	case *llir.TermRet:
		want := c.fn.Sig.RetType
		if t.X == nil {
			if !want.Equal(types.Void) {
				c.instErr(t, "ret void in a function returning %s", want)
			}
		} else if xt := safeType(t.X); xt == nil || !xt.Equal(want) {
			c.instErr(t, "returns %s from a function returning %s", xt, want)
		}
	case *llir.TermBr:
	case *llir.TermCondBr:
		if ct := safeType(t.Cond); ct == nil || !ct.Equal(types.I1) {
			c.instErr(t, "condition of type %s, want i1", ct)
		}
	case *llir.TermSwitch:
		xt := safeType(t.X)
		if !scalarInt(xt) {
			c.instErr(t, "switch on %s, want i8, i16, i32 or i64", xt)
			return
		}
		seen := map[string]bool{}
		for _, cs := range t.Cases {
			ci, ok := cs.X.(*constant.Int)
			if !ok || !ci.Typ.Equal(xt) {
				c.instErr(t, "case value %s is not an integer constant of type %s", cs.X.Ident(), xt)
				continue
			}
			if seen[ci.X.String()] {
				c.instErr(t, "duplicate case value %s", ci.X)
			}
			seen[ci.X.String()] = true
		}
	case *llir.TermUnreachable:
	default:
		c.instErr(t, "terminator is not in the subset")
	}
}
