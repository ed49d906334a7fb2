package codegen

import (
	"github.com/mokc/mokc/moe"
)

// h stored as bf16 rounded to odd (GemmSpec.CRoundOdd).
//
// The register-fed MXFP8 forward's FC1 computes h in f32 and quantize_h_rf
// reads it back to write its MXFP8 values: at T = 4096 on qwen3-30b-a3b
// 100 MB written by scattered 4-byte stores and read again (docs/perf.md,
// mxfp8 v27-v30). Stored as bf16 rounded to odd, h is half the bytes, the
// FC1 epilogue stores it as the bf16 FC2 does (sm90Layout.swapStoreBF16;
// swapStoreBF16Interleaved for interleaved gate/up rows),
// and the quantization reads bf16: the same MXFP8 bytes as from the f32
// values (docs/mxfp8.md, "h stored as bf16 rounded to odd"). The moe
// program, and so the reference, keep h as f32; only the plan's buffer
// and the kernels on either side of it change.

// planRoundOdd chooses the f32 scratch the lowering stores as bf16 rounded
// to odd (lw.roundOdd, by buffer name) and makes its planned buffer bf16
// of the same shape: the C of a register-fed GEMM (the forward's FC1 under
// schedule.MXGemmRegFed) that no op reads but Quantize ops, where no other
// kernel stores it as f32: the program's other form of the GEMM, when it
// has one (the decode variant's promote GEMM), must quantize C in its
// epilogue and leave it unstored (variantQuantizesC). emitGEMM refuses any
// other kernel storing such a C.
func (lw *perOp) planRoundOdd() {
	gemms := lw.src.Ops
	if lw.rfOps != nil {
		gemms = nil
		for _, op := range lw.rfOps {
			gemms = append(gemms, op)
		}
	}
	all := lw.allForms()
	for _, op := range gemms {
		g, ok := op.(moe.GEMM)
		if !ok || !g.ARegisterFed || g.C.DType != moe.F32 || g.C.Kind != moe.Scratch {
			continue
		}
		if lw.rfOps != nil && !lw.variantQuantizesC(g.Name()) {
			continue
		}
		if !lw.onlyQuantized(g.C, all) {
			continue
		}
		if lw.roundOdd == nil {
			lw.roundOdd = map[string]bool{}
		}
		lw.roundOdd[g.C.Name] = true
		stored := *g.C
		stored.DType = moe.BF16
		stored.Doc = "activations of the routed rows (f32), stored as bf16 rounded to odd: the quantization next reads them to the same MXFP8 bytes as the f32 values (docs/mxfp8.md)"
		for i := range lw.prog.Buffers {
			if lw.prog.Buffers[i].Name == stored.Name {
				lw.prog.Buffers[i] = stored.Plan()
			}
		}
	}
}

// onlyQuantized reports whether every op of ops that reads buf is a
// Quantize (or a GEMM writing it, which reads nothing of it).
func (lw *perOp) onlyQuantized(buf *moe.Buffer, ops []moe.Op) bool {
	for _, op := range ops {
		if _, ok := op.(moe.Quantize); ok {
			continue
		}
		for _, o := range op.Operands() {
			if o.Buffer == buf && o.Reads() {
				return false
			}
		}
	}
	return true
}

// variantQuantizesC reports whether the program's own (not register-fed)
// form of the GEMM named name runs as the decode variant's kernel alone
// (usesVariant) and that kernel quantizes C in its epilogue without
// storing it: the GEMM is followed by the Quantize of its C
// (lowerQuantizedGEMM's pair) and the engine quantizes C there
// (Engine.QuantizesC), and no op but that Quantize reads C.
func (lw *perOp) variantQuantizesC(name string) bool {
	for i, op := range lw.src.Ops {
		g, ok := op.(moe.GEMM)
		if !ok || g.Name() != name {
			continue
		}
		if i+1 >= len(lw.src.Ops) {
			return false
		}
		q, ok := lw.src.Ops[i+1].(moe.Quantize)
		return ok && lw.quantizedPair(g, q) && lw.onlyReader(g.C, q)
	}
	return false
}

// roundOddForm is op with the f32 buffers the lowering stores as bf16
// rounded to odd read as bf16 (a Quantize of h; planRoundOdd).
func (lw *perOp) roundOddForm(op moe.Op) moe.Op {
	q, ok := op.(moe.Quantize)
	if !ok || !lw.roundOdd[q.X.Name] {
		return op
	}
	x := *q.X
	x.DType = moe.BF16
	q.X = &x
	return q
}
