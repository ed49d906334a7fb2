package codegen

import (
	"fmt"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/types"

	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/target"
)

// Programmatic dependent launch (PTX ISA "Parallel Synchronization and
// Communication Instructions: griddepcontrol", sm_90): every kernel on a
// target that has it begins with griddepcontrol.wait (wait until the
// previous kernel in the stream has finished and its memory is visible; it
// returns at once for a plain launch), so every memory access comes after
// it and reading and overwriting the previous kernels' buffers stays
// ordered as in a plain launch. The next kernel's blocks may launch once
// every block of this one has issued griddepcontrol.launch_dependents or
// exited; a block has issued it when its first thread does, so a kernel
// triggers early by issuing it right after the wait and at its end by not
// issuing it at all (a block that exits counts as triggered; issuing it
// before the returns would trigger at the first thread's return, which in
// a warp-specialized GEMM is an idle producer lane's, near the start).
// Where a kernel triggers decides how early the next one's blocks take the
// SMs. Measured on the H200 (docs/perf.md, "launch v2"):
//   - the persistent GEMMs (KernelInfo.GridPerSM) trigger at their end:
//     the mxfp8 forward 0.5% (T = 4096) to 3% (deepseek-v2-lite, T = 64)
//     faster than triggering early;
//   - a row-wise kernel that runs at large T (a token range open to
//     launch.MaxTokens, or only past the one-block dispatch's T) triggers
//     at its end too: early, the next GEMM's blocks take the SMs of its
//     last wave and the bf16 forward at qwen3-30b-a3b T = 4096 ran 3%
//     slower (and the four routing kernels between the one-block dispatch
//     and moe_dispatch, early, 0.3% slower at T = 300: docs/perf.md,
//     dispatch v2);
//   - the others (the decode-size and every-T row-wise kernels) trigger
//     right after the wait, which hides the next launch where the kernels
//     are a few µs long (T = 64: 1-3% faster than at their end).

// triggersAtExit reports whether kernel k triggers its dependents' launch
// only by exiting (see above): a persistent GEMM, or a kernel launched in
// token ranges of which one is open-ended or all start at large (not a
// decode-size kernel, not one that runs at every T); large is the first
// T past the one-block dispatch (smallDispatchTokens + 1; 1 or less: none).
func triggersAtExit(k *Kernel, large int64) bool {
	if k.GridPerSM {
		return true
	}
	above := len(k.Tokens) > 0 && large > 1
	for _, r := range k.Tokens {
		if r.Max == launch.MaxTokens {
			return true
		}
		above = above && r.Min >= large
	}
	return above
}

// programmaticLaunch puts griddepcontrol.wait at the entry of every kernel
// of lw's program, followed by griddepcontrol.launch_dependents unless
// the kernel triggers by exiting (triggersAtExit), and marks the kernels
// launch.Kernel.Programmatic, on targets that have it.
func (lw *perOp) programmaticLaunch() error {
	if !lw.sched.Target.Has(target.GridDepControl) {
		return nil
	}
	asm := func(text string) *llir.InstCall {
		a := llir.NewInlineAsm(types.NewPointer(types.NewFunc(types.Void)), text, "~{memory}")
		a.SideEffect = true
		return llir.NewCall(a)
	}
	const wait, trigger = "griddepcontrol.wait;", "griddepcontrol.launch_dependents;"
	for i := range lw.prog.Kernels {
		k := &lw.prog.Kernels[i]
		f := lw.mod.FuncNamed(k.Name)
		if f == nil || len(f.IR.Blocks) == 0 {
			return fmt.Errorf("codegen: kernel %s has no function in the module", k.Name)
		}
		text := wait + "\n\t" + trigger
		if triggersAtExit(k, smallDispatchTokens(lw.d)+1) {
			text = wait
		}
		entry := f.IR.Blocks[0]
		entry.Insts = append([]llir.Instruction{asm(text)}, entry.Insts...)
		k.Programmatic = true
	}
	return nil
}
