package codegen

import (
	"fmt"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/types"

	"github.com/mokc/mokc/target"
)

// Programmatic dependent launch (PTX ISA "Parallel Synchronization and
// Communication Instructions: griddepcontrol", sm_90): every kernel on a
// target that has it begins with griddepcontrol.wait (wait until the
// previous kernel in the stream has finished and its memory is visible; it
// returns at once for a plain launch), so every memory access comes after
// it and reading and overwriting the previous kernels' buffers stays
// ordered as in a plain launch. griddepcontrol.launch_dependents lets the
// next kernel's blocks launch once every block of this one has issued it
// or exited; where a kernel issues it decides how early the next one's
// blocks take the SMs. Measured on the H200 (docs/perf.md, "launch v2"):
//   - the persistent GEMMs (KernelInfo.GridPerSM) issue it at their
//     return: the forward 0.5% (T = 4096) to 3% (deepseek-v2-lite mxfp8,
//     T = 64) faster than issuing it first;
//   - a kernel that runs only at large T (every token range it has starts
//     above triggerEarlyMaxT) issues it at its return too: issued first,
//     the next GEMM's blocks take the SMs of its last wave early and the
//     bf16 forward at qwen3-30b-a3b T = 4096 ran 3% slower;
//   - the others (the decode-size and every-T row-wise kernels) issue it
//     right after the wait, which hides the next launch where the kernels
//     are a few µs long (T = 64: 1-3% faster than at their return).

// triggerEarlyMaxT is the largest token count at which a row-wise kernel's
// early trigger was measured to pay (decode sizes; moe_dispatch_small's
// range is T·K <= 2048).
const triggerEarlyMaxT = 256

// triggersAtExit reports whether kernel k issues launch_dependents at its
// return rather than after its wait (see above).
func triggersAtExit(k *Kernel) bool {
	if k.GridPerSM {
		return true
	}
	if len(k.Tokens) == 0 {
		return false // runs at every T
	}
	for _, r := range k.Tokens {
		if r.Min <= triggerEarlyMaxT {
			return false
		}
	}
	return true
}

// programmaticLaunch puts griddepcontrol.wait at the entry of every kernel
// of lw's program and griddepcontrol.launch_dependents after it or before
// every return (triggersAtExit), and marks the kernels
// launch.Kernel.Programmatic, on targets that have it.
func (lw *perOp) programmaticLaunch() error {
	if !lw.sched.Target.Has(target.GridDepControl) {
		return nil
	}
	funcs := map[string]*llir.Func{}
	for _, f := range lw.mod.IR.Funcs {
		funcs[f.Name()] = f
	}
	asm := func(text string) *llir.InstCall {
		a := llir.NewInlineAsm(types.NewPointer(types.NewFunc(types.Void)), text, "~{memory}")
		a.SideEffect = true
		return llir.NewCall(a)
	}
	const wait, trigger = "griddepcontrol.wait;", "griddepcontrol.launch_dependents;"
	for i := range lw.prog.Kernels {
		k := &lw.prog.Kernels[i]
		f := funcs[k.Name]
		if f == nil || len(f.Blocks) == 0 {
			return fmt.Errorf("codegen: kernel %s has no function in the module", k.Name)
		}
		entry := f.Blocks[0]
		if !triggersAtExit(k) {
			entry.Insts = append([]llir.Instruction{asm(wait + "\n\t" + trigger)}, entry.Insts...)
		} else {
			entry.Insts = append([]llir.Instruction{asm(wait)}, entry.Insts...)
			for _, b := range f.Blocks {
				if _, ok := b.Term.(*llir.TermRet); ok {
					b.Insts = append(b.Insts, asm(trigger))
				}
			}
		}
		k.Programmatic = true
	}
	return nil
}
