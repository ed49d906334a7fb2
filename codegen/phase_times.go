package codegen

import (
	"fmt"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
)

// phaseRecord is the instrumentation's inline PTX, $0 the buffer's
// address plus the kernel's byte offset (launch.BufPhaseTimes): with end
// false thread 0 of each block records its start, with end true lane 0 of
// each warp its end (at every return), by red.global.min / max.u64 into
// the block's slot.
func phaseRecord(end bool) string {
	who, op, off := "%tid.x", "min", 0
	if end {
		who, op, off = "%laneid", "max", 8*launch.PhaseSlots
	}
	return fmt.Sprintf("{\n\t.reg .pred %%pts;\n\t.reg .b32 %%tts;\n\t.reg .b64 %%gts, %%ats;\n\t"+
		"mov.u32 %%tts, %s;\n\tsetp.eq.u32 %%pts, %%tts, 0;\n\tmov.u64 %%gts, %%globaltimer;\n\t"+
		"mov.u32 %%tts, %%ctaid.x;\n\trem.u32 %%tts, %%tts, %d;\n\tmul.wide.u32 %%ats, %%tts, 8;\n\tadd.u64 %%ats, %%ats, $0;\n\t"+
		"@%%pts red.global.%s.u64 [%%ats+%d], %%gts;\n\t}", who, launch.PhaseSlots, op, off)
}

// phaseTimes instruments every kernel of lw's program when the schedule
// asks for it (schedule.Schedule.PhaseTimes): the buffer launch.BufPhaseTimes,
// one more parameter per kernel, the start record first in the entry
// (programmaticLaunch, which runs after this pass, puts its wait before
// it) and the end record before every return.
func (lw *perOp) phaseTimes() error {
	if !lw.sched.PhaseTimes {
		return nil
	}
	n := int64(len(lw.prog.Kernels))
	buf := &moe.Buffer{Name: launch.BufPhaseTimes, Kind: moe.Scratch, DType: moe.U64,
		Shape: []launch.Expr{launch.Const(2 * launch.PhaseSlots * n)},
		Doc:   "device timestamps (ns) of each kernel's start and end (launch.BufPhaseTimes; set before a run whose records are read), for mokc bench --phases"}
	lw.prog.Buffers = append(lw.prog.Buffers, buf.Plan())
	for i := range lw.prog.Kernels {
		k := &lw.prog.Kernels[i]
		f := lw.mod.FuncNamed(k.Name)
		if f == nil || len(f.IR.Blocks) == 0 {
			return fmt.Errorf("codegen: kernel %s has no function in the module", k.Name)
		}
		p := f.AppendParam(ir.P(launch.BufPhaseTimes, GPtr))
		k.Params = append(k.Params, Param{Name: launch.BufPhaseTimes, Type: ParamPtr, Size: 8, Buffer: launch.BufPhaseTimes})
		off := int64(i) * 2 * launch.PhaseSlots * 8
		call := func(text string) (*llir.InstGetElementPtr, *llir.InstCall) {
			gep := llir.NewGetElementPtr(types.I8, p, constant.NewInt(types.I64, off))
			asm := llir.NewInlineAsm(types.NewPointer(types.NewFunc(types.Void, GPtr)), text, "l,~{memory}")
			asm.SideEffect = true
			return gep, llir.NewCall(asm, gep)
		}
		entry := f.IR.Blocks[0]
		gep, c := call(phaseRecord(false))
		entry.Insts = append([]llir.Instruction{gep, c}, entry.Insts...)
		for _, blk := range f.IR.Blocks {
			if _, ok := blk.Term.(*llir.TermRet); ok {
				gep, c := call(phaseRecord(true))
				blk.Insts = append(blk.Insts, gep, c)
			}
		}
	}
	return nil
}
