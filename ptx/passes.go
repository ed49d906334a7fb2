package ptx

import (
	"fmt"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/value"
	"github.com/mokc/mokc/target"
)

// The backend is a fixed table of small passes over one compilation, in the
// style of Go's ssa package and Triton's pass pipeline. Each pass may have a
// checker of the invariants it establishes; runPasses runs the checker right
// after the pass, so a broken invariant is reported at the pass that broke
// it (as an internal error) instead of surfacing as wrong PTX later.
type pass struct {
	name  string
	run   func(*compilation) error
	check func(*compilation) error // nil: nothing to check
}

var passes = []pass{
	// Refuse everything outside the supported IR subset, with errors naming
	// the function and the instruction.
	{"verify", verifyModule, nil},
	// Kernel annotations, PTX symbol names, machine CFG mirroring the IR.
	{"cfg", buildCFG, checkCFG},
	// Put a fresh block on every edge p->s where p has several successors,
	// s several predecessors and s has phis.
	{"split-critical-edges", splitCriticalEdges, checkNoCriticalEdges},
	// Replace phis by parallel copies at the end of the (now unique-successor)
	// predecessors, or at the start of single-predecessor blocks.
	{"phi-elim", eliminatePhis, checkPhiCopies},
	// Instruction selection to PTX over virtual registers, per function.
	{"isel", selectInstructions, checkMachineCode},
	// Module text: header, globals, prototypes, functions.
	{"emit", emitModule, checkText},
}

func runPasses(c *compilation, ps []pass) error {
	for _, p := range ps {
		if err := p.run(c); err != nil {
			return err
		}
		if p.check != nil {
			if err := p.check(c); err != nil {
				return fmt.Errorf("ptx: internal error: invariant of pass %s broken: %v", p.name, err)
			}
		}
	}
	return nil
}

// compilation is the state the passes share.
type compilation struct {
	mod     *llir.Module
	target  target.Target
	version string

	// cfg
	funcs   []*mfunc               // defined functions, in module order
	byIR    map[*llir.Func]*mfunc  // defined function -> its machine function
	syms    map[value.Value]string // PTX symbol of each global and function
	symUsed map[string]bool        // every module-scope PTX symbol
	annots  map[*llir.Func]*annotations

	// emit
	text    string
	kernels []KernelInfo
}

// mfunc is one function being compiled.
type mfunc struct {
	ir      *llir.Func
	name    string // PTX symbol
	index   int    // among defined functions: labels are $L__BB<index>_<block>
	kernel  bool
	annot   *annotations
	blocks  []*mblock // layout order; blocks[0] is the entry
	blockOf map[*llir.Block]*mblock

	// isel
	nregs   [numRegClasses]int // registers %x1..%x<n> of each class are used
	locals  []string           // .local array declarations
	params  []paramInfo
	retDecl string // ".param .b32 func_retval0" for .func with a result
	refs    map[*llir.Global]bool
	callees map[*mfunc]bool
}

// mblock is a machine basic block: an IR block, or an edge block inserted by
// split-critical-edges (ir == nil, jump set).
type mblock struct {
	ir     *llir.Block
	origin *llir.Block // the IR block phis name for edges leaving this block
	label  string
	insts  []llir.Instruction // without phis once phi-elim ran
	phis   []*llir.InstPhi
	term   llir.Terminator // nil for an edge block
	jump   *mblock         // edge block: its only successor

	// retarget redirects IR successor blocks of term to edge blocks.
	retarget map[*llir.Block]*mblock

	// Parallel copies implementing phis: startCopies run before the block's
	// first instruction, endCopies after its last one, before the branch.
	startCopies, endCopies []pcopy

	code []string // PTX instructions (isel)
}

// pcopy is one phi copy: dst receives src on the edge the copy sits on.
type pcopy struct {
	dst *llir.InstPhi
	src value.Value
}

// target maps an IR successor of b's terminator to the machine block control
// reaches.
func (f *mfunc) target(b *mblock, t value.Value) (*mblock, error) {
	ib, ok := t.(*llir.Block)
	if !ok {
		return nil, fmt.Errorf("branch target %s is not a block", t.Ident())
	}
	if r, ok := b.retarget[ib]; ok {
		return r, nil
	}
	mb, ok := f.blockOf[ib]
	if !ok {
		return nil, fmt.Errorf("branch target %s is not a block of the function", ib.Ident())
	}
	return mb, nil
}

// succs are b's distinct successors in terminator order.
func (f *mfunc) succs(b *mblock) ([]*mblock, error) {
	if b.jump != nil {
		return []*mblock{b.jump}, nil
	}
	var ts []value.Value
	switch t := b.term.(type) {
	case *llir.TermBr:
		ts = []value.Value{t.Target}
	case *llir.TermCondBr:
		ts = []value.Value{t.TargetTrue, t.TargetFalse}
	case *llir.TermSwitch:
		ts = append(ts, t.TargetDefault)
		for _, c := range t.Cases {
			ts = append(ts, c.Target)
		}
	}
	var out []*mblock
	seen := map[*mblock]bool{}
	for _, t := range ts {
		mb, err := f.target(b, t)
		if err != nil {
			return nil, err
		}
		if !seen[mb] {
			seen[mb] = true
			out = append(out, mb)
		}
	}
	return out, nil
}

// preds maps each block to its distinct predecessors in layout order.
func (f *mfunc) preds() (map[*mblock][]*mblock, error) {
	p := map[*mblock][]*mblock{}
	for _, b := range f.blocks {
		ss, err := f.succs(b)
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			p[s] = append(p[s], b)
		}
	}
	return p, nil
}

func (f *mfunc) errorf(inst interface{ LLString() string }, format string, args ...any) error {
	e := &Error{Func: f.ir.Name(), Msg: fmt.Sprintf(format, args...)}
	if inst != nil {
		e.Inst = inst.LLString()
	}
	return e
}
