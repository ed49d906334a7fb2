package codegen

import (
	"fmt"
	"slices"
	"strings"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
)

// phaseRecord is the instrumentation's inline PTX, $0 the buffer's
// address plus the record's byte offset (launch.BufPhaseTimes): with end
// false thread 0 of each block (lane 0 of each warp with lanes, for an
// inner phase) records its start, with end true lane 0 of each warp its
// end, by red.global.min / max.u64 into the block's slot.
func phaseRecord(end, lanes bool) string {
	who, op, off := "%tid.x", "min", 0
	if lanes {
		who = "%laneid"
	}
	if end {
		who, op, off = "%laneid", "max", 8*launch.PhaseSlots
	}
	return fmt.Sprintf("{\n\t.reg .pred %%pts;\n\t.reg .b32 %%tts;\n\t.reg .b64 %%gts, %%ats;\n\t"+
		"mov.u32 %%tts, %s;\n\tsetp.eq.u32 %%pts, %%tts, 0;\n\tmov.u64 %%gts, %%globaltimer;\n\t"+
		"mov.u32 %%tts, %%ctaid.x;\n\trem.u32 %%tts, %%tts, %d;\n\tmul.wide.u32 %%ats, %%tts, 8;\n\tadd.u64 %%ats, %%ats, $0;\n\t"+
		"@%%pts red.global.%s.u64 [%%ats+%d], %%gts;\n\t}", who, launch.PhaseSlots, op, off)
}

// phaseMarkText is the placeholder of an inner phase's record
// (phaseMark), which phaseTimes replaces or removes.
const phaseMarkText = "// mokc phase mark "

// phaseMark emits the placeholder of a record of inner phase i of the
// kernel (launch.Kernel.Phases): its start (a warp entering it) or its end
// (a warp leaving it). phaseTimes turns it into the record when the
// schedule asks for phase times and removes it otherwise.
func (b *Builder) phaseMark(i int, end bool) {
	what := "start"
	if end {
		what = "end"
	}
	b.Asm(fmt.Sprintf("%s%d %s", phaseMarkText, i, what), "~{memory}")
}

// phaseMarkOf parses a phaseMark placeholder: the phase, end, and ok.
func phaseMarkOf(inst llir.Instruction) (i int, end, ok bool) {
	call, isCall := inst.(*llir.InstCall)
	if !isCall {
		return 0, false, false
	}
	asm, isAsm := call.Callee.(*llir.InlineAsm)
	if !isAsm || !strings.HasPrefix(asm.Asm, phaseMarkText) {
		return 0, false, false
	}
	var what string
	if _, err := fmt.Sscanf(strings.TrimPrefix(asm.Asm, phaseMarkText), "%d %s", &i, &what); err != nil {
		return 0, false, false
	}
	return i, what == "end", true
}

// removePhaseMarks removes f's phaseMark placeholders.
func removePhaseMarks(f *ir.Func) {
	for _, blk := range f.IR.Blocks {
		blk.Insts = slices.DeleteFunc(blk.Insts, func(inst llir.Instruction) bool { _, _, ok := phaseMarkOf(inst); return ok })
	}
}

// phaseTimes instruments every kernel of lw's program when the schedule
// asks for it (schedule.Schedule.PhaseTimes): the buffer launch.BufPhaseTimes,
// one more parameter per kernel, the start record first in the entry
// (programmaticLaunch, which runs after this pass, puts its wait before
// it), the end record before every return, and in a kernel with inner
// phases (launch.Kernel.Phases) each phaseMark replaced by its phase's
// record (records after the kernels', in the kernels' order). Without
// phase times it removes the phaseMarks.
func (lw *perOp) phaseTimes() error {
	if !lw.sched.PhaseTimes {
		for _, k := range lw.prog.Kernels {
			if f := lw.mod.FuncNamed(k.Name); f != nil && len(k.Phases) > 0 { // only those mark their phases
				removePhaseMarks(f)
			}
		}
		return nil
	}
	n, inner := int64(len(lw.prog.Kernels)), int64(0)
	for _, k := range lw.prog.Kernels {
		inner += int64(len(k.Phases))
	}
	buf := &moe.Buffer{Name: launch.BufPhaseTimes, Kind: moe.Scratch, DType: moe.U64,
		Shape: []launch.Expr{launch.Const(2 * launch.PhaseSlots * (n + inner))},
		Doc:   "device timestamps (ns) of each kernel's start and end, then of the kernels' inner phases (launch.BufPhaseTimes; set before a run whose records are read), for mokc bench --phases"}
	lw.prog.Buffers = append(lw.prog.Buffers, buf.Plan())
	row := n // the next inner phase's record
	for i := range lw.prog.Kernels {
		k := &lw.prog.Kernels[i]
		f := lw.mod.FuncNamed(k.Name)
		if f == nil || len(f.IR.Blocks) == 0 {
			return fmt.Errorf("codegen: kernel %s has no function in the module", k.Name)
		}
		p := f.AppendParam(ir.P(launch.BufPhaseTimes, GPtr))
		k.Params = append(k.Params, Param{Name: launch.BufPhaseTimes, Type: ParamPtr, Size: 8, Buffer: launch.BufPhaseTimes})
		call := func(r int64, text string) []llir.Instruction {
			gep := llir.NewGetElementPtr(types.I8, p, constant.NewInt(types.I64, r*2*launch.PhaseSlots*8))
			asm := llir.NewInlineAsm(types.NewPointer(types.NewFunc(types.Void, GPtr)), text, "l,~{memory}")
			asm.SideEffect = true
			return []llir.Instruction{gep, llir.NewCall(asm, gep)}
		}
		entry := f.IR.Blocks[0]
		entry.Insts = append(call(int64(i), phaseRecord(false, false)), entry.Insts...)
		for _, blk := range f.IR.Blocks {
			var insts []llir.Instruction
			for _, inst := range blk.Insts {
				ph, end, ok := phaseMarkOf(inst)
				if !ok {
					insts = append(insts, inst)
					continue
				}
				if ph >= len(k.Phases) {
					return fmt.Errorf("codegen: kernel %s marks inner phase %d of %d", k.Name, ph, len(k.Phases))
				}
				insts = append(insts, call(row+int64(ph), phaseRecord(end, true))...)
			}
			blk.Insts = insts
			if _, ok := blk.Term.(*llir.TermRet); ok {
				blk.Insts = append(blk.Insts, call(int64(i), phaseRecord(true, false))...)
			}
		}
		row += int64(len(k.Phases))
	}
	return nil
}
