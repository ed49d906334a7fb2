package ir

import (
	"fmt"
	"reflect"
	"slices"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/value"
)

// copyBlocks returns a copy of a function's blocks: new blocks holding new
// instructions and terminators, whose operands that named a block or an
// instruction of blocks name its copy; every other operand (parameters,
// constants, globals, other functions) is shared, as are types and
// metadata. The copies keep the originals' names and IDs (Absorb renames
// them). Errors: an instruction whose copy would still share an operand
// slot with the original (a kind that copyValue does not know).
func copyBlocks(blocks []*llir.Block) ([]*llir.Block, error) {
	repl := map[value.Value]value.Value{}
	out := make([]*llir.Block, len(blocks))
	for i, b := range blocks {
		nb := &llir.Block{LocalIdent: b.LocalIdent, Parent: b.Parent}
		repl[b], out[i] = nb, nb
	}
	var ops [][]*value.Value
	for i, b := range blocks {
		nb := out[i]
		nb.Insts = make([]llir.Instruction, len(b.Insts))
		for j, inst := range b.Insts {
			c, err := copyValue(inst, inst.Operands())
			if err != nil {
				return nil, err
			}
			nb.Insts[j] = c.(llir.Instruction)
			if v, ok := inst.(value.Value); ok {
				repl[v] = c.(value.Value)
			}
			ops = append(ops, nb.Insts[j].Operands())
		}
		c, err := copyValue(b.Term, b.Term.Operands())
		if err != nil {
			return nil, err
		}
		nb.Term = c.(llir.Terminator)
		ops = append(ops, nb.Term.Operands())
	}
	for _, os := range ops {
		for _, op := range os {
			if v, ok := repl[*op]; ok {
				*op = v
			}
		}
	}
	return out, nil
}

// copyValue copies instruction or terminator x (a pointer to a struct)
// whose operand slots are orig: the struct itself, the slices of operands
// a call, getelementptr, phi or switch holds, and no cached successors (a
// terminator's are computed again from its copied targets). It fails where
// a slot of the copy is still one of orig's.
func copyValue(x any, orig []*value.Value) (any, error) {
	v := reflect.ValueOf(x)
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	out := c.Interface()
	switch t := out.(type) {
	case *llir.InstCall:
		t.Args = slices.Clone(t.Args)
	case *llir.InstGetElementPtr:
		t.Indices = slices.Clone(t.Indices)
	case *llir.InstPhi:
		t.Incs = slices.Clone(t.Incs)
		for i, inc := range t.Incs {
			t.Incs[i] = &llir.Incoming{X: inc.X, Pred: inc.Pred}
		}
	case *llir.TermSwitch:
		t.Cases = slices.Clone(t.Cases)
		for i, cs := range t.Cases {
			t.Cases[i] = &llir.Case{X: cs.X, Target: cs.Target}
		}
		t.Successors = nil
	case *llir.TermBr:
		t.Successors = nil
	case *llir.TermCondBr:
		t.Successors = nil
	case *llir.TermRet, *llir.TermUnreachable:
	default:
		if _, ok := out.(llir.Terminator); ok {
			return nil, fmt.Errorf("cannot copy terminator %T", x)
		}
	}
	if ops, ok := out.(interface{ Operands() []*value.Value }); ok {
		for _, op := range ops.Operands() {
			if slices.Contains(orig, op) {
				return nil, fmt.Errorf("cannot copy %T: its copy shares an operand with it", x)
			}
		}
	}
	return out, nil
}
