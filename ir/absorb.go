package ir

import (
	"slices"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/metadata"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Absorption says how (*Func).Absorb rewrites the body it moves.
type Absorption struct {
	// Args replaces the source function's parameters, one value per
	// parameter in order, each of the parameter's type.
	Args []value.Value
	// Intrinsics replaces the result of every call of the named
	// intrinsics (e.g. "llvm.nvvm.read.ptx.sreg.ctaid.x") by the value
	// given, of the call's type; the calls themselves are dropped.
	Intrinsics map[string]value.Value
	// Barrier, when set, replaces every call of llvm.nvvm.barrier0 (PTX
	// `bar.sync 0`) by this inline PTX (e.g. "bar.sync 1, 256;", a named
	// barrier of fewer threads), with a ~{memory} clobber.
	Barrier string
	// Prefix is put before the names of the moved blocks, which must stay
	// unique in the function.
	Prefix string
	// Copy absorbs a copy of the source's body: the source stays in the
	// module as it was, so that several functions (or one, several times)
	// can absorb it. The copy's instructions are new values; constants,
	// globals, types and metadata are shared.
	Copy bool
}

// Absorb moves the body of src, a void function of the same module that
// is not f, into f: it ends f's current block with a branch to src's
// entry, appends src's blocks (renamed with a.Prefix) after f's, rewrites
// their operands as a says, turns each of src's returns into a branch to a
// new block, on which it leaves the cursor, and removes src from the
// module (a call of src elsewhere would be left dangling: Absorb is for
// kernels, which nothing calls); with a.Copy it moves a copy of the body
// and leaves src as it was. Unnamed values keep no local IDs: the
// module numbers them again when it is printed. The caller picks a
// Prefix that no block of f starts with, so that the moved blocks' names
// stay unique. Errors (recorded in the module): a source without a body
// (absorbed already), one that returns a value or takes a different
// number of arguments, a replacement of another type.
func (f *Func) Absorb(src *Func, a Absorption) {
	switch {
	case src == f || src.M != f.M:
		f.errorf("absorb: @%s is not another function of the module", src.IR.Name())
		return
	case !src.IR.Sig.RetType.Equal(types.Void):
		f.errorf("absorb: @%s returns %s", src.IR.Name(), src.IR.Sig.RetType)
		return
	case len(src.IR.Blocks) == 0:
		f.errorf("absorb: @%s has no body (absorbed already?)", src.IR.Name())
		return
	case len(a.Args) != len(src.IR.Params):
		f.errorf("absorb: @%s takes %d parameters, given %d", src.IR.Name(), len(src.IR.Params), len(a.Args))
		return
	}
	repl := map[value.Value]value.Value{}
	for i, p := range src.IR.Params {
		if !p.Type().Equal(a.Args[i].Type()) {
			f.errorf("absorb: @%s parameter %d is %s, given %s", src.IR.Name(), i, p.Type(), a.Args[i].Type())
			return
		}
		repl[p] = a.Args[i]
	}
	var barrier *llir.InlineAsm
	if a.Barrier != "" {
		barrier = llir.NewInlineAsm(types.NewPointer(types.NewFunc(types.Void)), a.Barrier, "~{memory}")
		barrier.SideEffect = true
	}
	blocks := src.IR.Blocks
	if a.Copy {
		var err error
		if blocks, err = copyBlocks(blocks); err != nil {
			f.errorf("absorb: @%s: %v", src.IR.Name(), err)
			return
		}
	}
	// The calls whose results are replaced, found before any is rewritten.
	for _, b := range blocks {
		for _, inst := range b.Insts {
			if name := calledIntrinsic(inst); name != "" {
				if v, ok := a.Intrinsics[name]; ok {
					if !v.Type().Equal(inst.(*llir.InstCall).Type()) {
						f.errorf("absorb: @%s: %s replaced by a %s", src.IR.Name(), name, v.Type())
						return
					}
					repl[inst.(value.Value)] = v
				}
			}
		}
	}
	remap := func(ops []*value.Value) {
		for _, op := range ops {
			if v, ok := repl[*op]; ok {
				*op = v
			}
		}
	}
	exit := f.detached(a.Prefix + "absorb.exit") // no source block's name: those are a.Prefix + their own
	from := f.block("absorb")
	from.NewBr(blocks[0])
	for _, b := range blocks {
		b.Parent = f.IR
		b.SetName(a.Prefix + b.Name()) // an unnamed block's Name is its number
		insts := b.Insts[:0]
		for _, inst := range b.Insts {
			name := calledIntrinsic(inst)
			if _, ok := a.Intrinsics[name]; ok && name != "" {
				continue // its result was replaced
			}
			if name == "llvm.nvvm.barrier0" && barrier != nil {
				inst = llir.NewCall(barrier)
			}
			remap(inst.Operands())
			if n, ok := inst.(interface {
				IsUnnamed() bool
				Name() string
				SetName(string)
				SetID(int64)
			}); ok {
				if n.IsUnnamed() {
					n.SetID(0)
				} else {
					n.SetName(a.Prefix + n.Name())
				}
			}
			insts = append(insts, inst)
		}
		b.Insts = insts
		if _, ok := b.Term.(*llir.TermRet); ok {
			b.Term = llir.NewBr(exit)
		} else {
			remap(b.Term.Operands())
		}
	}
	f.IR.Blocks = append(f.IR.Blocks, blocks...)
	if !a.Copy {
		src.IR.Blocks = nil
		f.M.Remove(src)
	}
	f.cur = f.attach(exit)
}

// calledIntrinsic is the name of the function inst calls directly, or "".
func calledIntrinsic(inst llir.Instruction) string {
	c, ok := inst.(*llir.InstCall)
	if !ok {
		return ""
	}
	if g, ok := c.Callee.(*llir.Func); ok {
		return g.Name()
	}
	return ""
}

// Remove takes function fn out of the module: its definition, its
// builder and its nvvm.annotations entry.
func (m *Module) Remove(fn *Func) {
	m.IR.Funcs = slices.DeleteFunc(m.IR.Funcs, func(g *llir.Func) bool { return g == fn.IR })
	m.funcs = slices.DeleteFunc(m.funcs, func(g *Func) bool { return g == fn })
	md, ok := m.annotations[fn.IR]
	if !ok {
		return
	}
	delete(m.annotations, fn.IR)
	m.IR.MetadataDefs = slices.DeleteFunc(m.IR.MetadataDefs, func(d metadata.Definition) bool { return d == md })
	if nd := m.IR.NamedMetadataDefs["nvvm.annotations"]; nd != nil {
		nd.Nodes = slices.DeleteFunc(nd.Nodes, func(n metadata.Node) bool { return n == md })
	}
}

// Annotation returns the integer value of nvvm annotation key (e.g.
// "maxnreg", "maxntidx", "minctasm") of kernel name, and whether it has
// one.
func (m *Module) Annotation(name, key string) (int, bool) {
	f := m.FuncNamed(name)
	if f == nil {
		return 0, false
	}
	md := m.annotations[f.IR]
	if md == nil {
		return 0, false
	}
	for i := 0; i+1 < len(md.Fields); i++ {
		if s, ok := md.Fields[i].(*metadata.String); ok && s.Value == key {
			if c, ok := md.Fields[i+1].(*constant.Int); ok {
				return int(c.X.Int64()), true
			}
		}
	}
	return 0, false
}
