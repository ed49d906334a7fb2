package codegen

import (
	"fmt"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/types"

	"github.com/mokc/mokc/target"
)

// gridDepControl is the first instruction of every kernel on targets with
// programmatic dependent launch (target.GridDepControl): wait until the
// previous kernel in the stream has finished and its memory is visible
// (griddepcontrol.wait: it returns at once for a plain launch), then let
// the next kernel's blocks launch (griddepcontrol.launch_dependents), so
// that the next launch and the scheduling of its blocks overlap this
// kernel's run instead of following its end. Every memory access of the
// kernel comes after the wait, so reading and overwriting the previous
// kernels' buffers stays ordered as in a plain launch (PTX ISA "Parallel
// Synchronization and Communication Instructions: griddepcontrol", sm_90).
const gridDepControl = "griddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;"

// programmaticLaunch puts gridDepControl at the entry of every kernel of
// lw's program and marks them launch.Kernel.Programmatic, on targets that
// have it.
func (lw *perOp) programmaticLaunch() error {
	if !lw.sched.Target.Has(target.GridDepControl) {
		return nil
	}
	funcs := map[string]*llir.Func{}
	for _, f := range lw.mod.IR.Funcs {
		funcs[f.Name()] = f
	}
	for i := range lw.prog.Kernels {
		k := &lw.prog.Kernels[i]
		f := funcs[k.Name]
		if f == nil || len(f.Blocks) == 0 {
			return fmt.Errorf("codegen: kernel %s has no function in the module", k.Name)
		}
		asm := llir.NewInlineAsm(types.NewPointer(types.NewFunc(types.Void)), gridDepControl, "~{memory}")
		asm.SideEffect = true
		entry := f.Blocks[0]
		entry.Insts = append([]llir.Instruction{llir.NewCall(asm)}, entry.Insts...)
		k.Programmatic = true
	}
	return nil
}
