package ptx

import (
	"fmt"
	"strings"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/metadata"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// verifyModule refuses, before any lowering, what lies outside the supported
// subset: unsupported instructions and terminators, types without a register
// class, address spaces other than 0/1/3/4/5/101, calls that are neither to
// a defined function, a known intrinsic nor inline asm. Finer restrictions
// (e.g. vector accesses over 16 bytes) are refused by isel, also with the
// instruction named.
func verifyModule(c *compilation) error {
	for _, g := range c.mod.Globals {
		if err := checkAddrSpace(g.AddrSpace); err != nil || g.AddrSpace == asGeneric || g.AddrSpace == asLocal || g.AddrSpace == asParam {
			return &Error{Inst: g.LLString(), Msg: fmt.Sprintf("global in address space %d is not supported (globals live in address space 1 global, 3 shared or 4 const)", g.AddrSpace)}
		}
	}
	if len(c.mod.Aliases) > 0 || len(c.mod.IFuncs) > 0 {
		return &Error{Msg: "aliases and ifuncs are not supported"}
	}
	if len(c.mod.ModuleAsms) > 0 {
		return &Error{Msg: "module-level inline asm is not supported"}
	}
	for _, f := range c.mod.Funcs {
		if len(f.Blocks) == 0 {
			continue
		}
		if err := verifyFunc(f); err != nil {
			return err
		}
	}
	return nil
}

func verifyFunc(f *llir.Func) error {
	errf := func(inst interface{ LLString() string }, format string, args ...any) error {
		e := &Error{Func: f.Name(), Msg: fmt.Sprintf(format, args...)}
		if inst != nil {
			e.Inst = inst.LLString()
		}
		return e
	}
	if f.Sig.Variadic {
		return errf(nil, "variadic functions are not supported")
	}
	for _, p := range f.Params {
		if _, err := paramByval(p); err != nil {
			return errf(p, "%v", err)
		}
		if byval, _ := paramByval(p); byval != nil {
			continue
		}
		if _, err := scalarKind(p.Typ); err != nil {
			return errf(p, "parameter: %v", err)
		}
	}
	if _, ok := f.Sig.RetType.(*types.VoidType); !ok {
		if _, err := scalarKind(f.Sig.RetType); err != nil {
			return errf(nil, "return type: %v", err)
		}
	}
	for _, b := range f.Blocks {
		for _, inst := range b.Insts {
			if err := verifyInst(inst); err != nil {
				return errf(inst, "%v", err)
			}
		}
		if b.Term == nil {
			return errf(nil, "block %s has no terminator", b.Ident())
		}
		switch b.Term.(type) {
		case *llir.TermRet, *llir.TermBr, *llir.TermCondBr, *llir.TermSwitch, *llir.TermUnreachable:
		default:
			return errf(b.Term, "terminator is not supported (br, switch, ret and unreachable are)")
		}
		if err := verifyOperands(b.Term); err != nil {
			return errf(b.Term, "%v", err)
		}
	}
	return nil
}

// paramByval returns the byval type of p, or nil when p is not byval.
func paramByval(p *llir.Param) (types.Type, error) {
	for _, a := range p.Attrs {
		switch a := a.(type) {
		case llir.Byval:
			pt, ok := p.Typ.(*types.PointerType)
			if !ok {
				return nil, fmt.Errorf("byval parameter is not a pointer")
			}
			if pt.AddrSpace != asGeneric {
				return nil, fmt.Errorf("byval parameter must be a generic pointer (address space 0)")
			}
			if a.Typ != nil {
				return a.Typ, nil
			}
			return pt.ElemType, nil
		case llir.ByRef, llir.Preallocated, llir.InAlloca, llir.SRet:
			return nil, fmt.Errorf("parameter attribute %s is not supported", a)
		}
	}
	return nil, nil
}

func verifyInst(inst llir.Instruction) error {
	switch inst := inst.(type) {
	case *llir.InstAdd, *llir.InstSub, *llir.InstMul, *llir.InstUDiv, *llir.InstSDiv,
		*llir.InstURem, *llir.InstSRem, *llir.InstShl, *llir.InstLShr, *llir.InstAShr,
		*llir.InstAnd, *llir.InstOr, *llir.InstXor,
		*llir.InstFAdd, *llir.InstFSub, *llir.InstFMul, *llir.InstFDiv, *llir.InstFNeg,
		*llir.InstTrunc, *llir.InstZExt, *llir.InstSExt, *llir.InstFPTrunc, *llir.InstFPExt,
		*llir.InstFPToUI, *llir.InstFPToSI, *llir.InstUIToFP, *llir.InstSIToFP,
		*llir.InstPtrToInt, *llir.InstIntToPtr, *llir.InstBitCast, *llir.InstAddrSpaceCast,
		*llir.InstAlloca, *llir.InstLoad, *llir.InstStore, *llir.InstFence, *llir.InstCmpXchg,
		*llir.InstGetElementPtr, *llir.InstICmp, *llir.InstFCmp, *llir.InstPhi,
		*llir.InstSelect, *llir.InstFreeze, *llir.InstExtractElement, *llir.InstInsertElement,
		*llir.InstShuffleVector, *llir.InstExtractValue, *llir.InstInsertValue:
	case *llir.InstAtomicRMW:
		if inst.Op == enum.AtomicOpNAnd {
			return fmt.Errorf("atomicrmw nand has no PTX atom operation")
		}
	case *llir.InstFRem:
		return fmt.Errorf("frem is not supported (PTX has no IEEE remainder instruction)")
	case *llir.InstCall:
		if err := verifyCallee(inst); err != nil {
			return err
		}
	default:
		return fmt.Errorf("instruction is not supported")
	}
	if v, ok := inst.(value.Value); ok {
		if _, isVoid := v.Type().(*types.VoidType); !isVoid {
			if _, err := laneTypes(v.Type()); err != nil {
				return err
			}
		}
	}
	return verifyOperands(inst)
}

// verifyOperands checks the types of every operand that is a value (not a
// block, function, inline asm or metadata).
func verifyOperands(u value.User) error {
	for _, op := range u.Operands() {
		if op == nil || *op == nil {
			continue
		}
		switch (*op).(type) {
		case *llir.Block, *llir.Func, *llir.InlineAsm, *metadata.Value:
			continue
		}
		switch (*op).Type().(type) {
		case *types.VoidType, *types.LabelType, *types.MetadataType:
			continue
		}
		t := (*op).Type()
		if _, err := laneTypes(t); err != nil {
			return fmt.Errorf("operand %s: %v", (*op).Ident(), err)
		}
	}
	return nil
}

func verifyCallee(call *llir.InstCall) error {
	switch callee := call.Callee.(type) {
	case *llir.InlineAsm:
		return nil
	case *llir.Func:
		if len(callee.Blocks) > 0 {
			return nil
		}
		name := callee.Name()
		if strings.HasPrefix(name, "llvm.") {
			if _, ok := lookupIntrinsic(name); !ok {
				return fmt.Errorf("unknown intrinsic @%s (anything beyond the intrinsics the package doc lists is inline PTX)", name)
			}
			return nil
		}
		return fmt.Errorf("call to external function @%s (only functions defined in the module, intrinsics and inline asm can be called)", name)
	case constant.Expression:
		return fmt.Errorf("indirect call through a constant expression is not supported")
	}
	return fmt.Errorf("indirect call is not supported")
}
