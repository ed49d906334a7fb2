package codegen

import (
	"fmt"
	"slices"

	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

// The MXFP8 forward's decode FC1 reading the token rows' MXFP8 form.
//
// In an mxfp8 forward the gather quantizes each dispatched row (T*topk
// rows, the same bytes for the topk copies of a token) and the decode
// variant's FC1 (the promoted operand swap) reads them. In the variant's
// token range the lowering instead quantizes x once per token
// (quantize_x: x_q e4m3 [T, H] and x_scales ue8m0 [T, H/32], the
// lowering's scratch; inside moe_dispatch_small_quantize_x where the small
// dispatch runs, else its own kernel), and FC1 reads each dispatched row's
// bytes and scale codes at its token (GemmSpec.GatherK with MX; named
// moe_fc1_<variant>_gathered). The rows FC1 multiplies are the same bytes
// as the gather's, so the results are the same bits; what goes is the
// gather's launch and its T*topk rows' round trip.
//
// The gathering kernel's code warps copy A's rows themselves (cp.async)
// before each stage's work, which costs more than the gather saves once
// the experts hold more than a few rows: on the H200 (docs/perf.md, gather
// v3) it is faster at T <= 4 (T = 1 on qwen3-30b-a3b: 0.043 against
// 0.059 ms with the gather in the same run) and slower from T = 8 on
// gpt-oss-120b, 32 on qwen3-30b-a3b and 8-13% slower at the decode
// range's top. So it covers T in 1..mxGatherMaxTokens of the variant's
// range.

// mxGatherMaxTokens is the largest token count at which the MXFP8 decode
// FC1 gathers its rows itself (measured on sm_90a, docs/perf.md gather v3).
const mxGatherMaxTokens = 4

// tokenQuant is the per-token quantization of x that the gathering MXFP8
// FC1 reads: its op (quantize_x), the program's quantizing gather it
// replaces, the token counts at which it does (tokens: the decode
// variant's range up to mxGatherMaxTokens) and those where moe_dispatch_small_quantize_x runs it
// (fused, set by lowerSmallDispatch; the rest of tokens runs its kernel).
type tokenQuant struct {
	op     moe.Quantize
	gather moe.Gather
	tokens []launch.TokenRange
	fused  []launch.TokenRange
}

// planTokenQuant sets lw.tokenQuant when the program holds, in order, a
// gather writing the e4m3 rows and scales of x (no routing weight on
// them), the GEMM that alone reads them under the schedule's decode
// variant, and the Quantize of that GEMM's C (the mxfp8 forward's gather,
// fc1 and quantize_h), the engine quantizes C in the variant's epilogue
// (Engine.QuantizesC) and gathers A with it (Engine.GathersA), and the
// schedule lets FC1 gather (schedule.Schedule.Gather is GatherFC1). It
// adds the buffers x_q and x_scales to the plan (rows for the largest T
// it covers).
func (lw *perOp) planTokenQuant() {
	if lw.sched.Gather == schedule.GatherSeparate || !lw.hasVariant {
		return
	}
	ops := lw.src.Ops
	for i := 0; i+2 < len(ops); i++ {
		ga, okA := ops[i].(moe.Gather)
		g, okG := ops[i+1].(moe.GEMM)
		q, okQ := ops[i+2].(moe.Quantize)
		if !okA || !okG || !okQ || ga.Q == nil || ga.S == nil || ga.Weights != nil || ga.X.DType != moe.BF16 ||
			len(ga.X.Shape) != 2 || ga.X.Shape[0] != launch.PerT(1, 0) || // x's rows are the T tokens

			g.A != ga.Q || g.AScales != ga.S || g.Rows != moe.Dispatched || g.BMajor == moe.NMajor ||
			q.X != g.C || q.K != g.N || !lw.usesVariant(g) || !lw.onlyReader(ga.Q, g) || !lw.onlyReader(ga.S, g) {
			continue
		}
		spec := lw.gemmSpec(g, lw.variant)
		spec.Name = "moe_" + g.Name() + "_" + lw.sched.Variant.Name + "_gathered"
		spec.QuantizeC = true
		if !lw.eng.QuantizesC(spec) || !lw.eng.GathersA(spec, lw.d.K) {
			return
		}
		_, variant := lw.variantRanges()
		lo, hi := max(variant[0].Min, 1), min(variant[0].Max, mxGatherMaxTokens)
		if lo > hi {
			return
		}
		H := int64(ga.X.Shape[1].B)
		xq := &moe.Buffer{Name: "x_q", Kind: moe.Scratch, DType: moe.E4M3,
			Shape: []launch.Expr{launch.Const(hi), launch.Const(H)},
			Doc:   fmt.Sprintf("the token rows x quantized (MXFP8 along H) at T <= %d, read by the gathering decode FC1", hi)}
		xs := &moe.Buffer{Name: "x_scales", Kind: moe.Scratch, DType: moe.UE8M0,
			Shape: []launch.Expr{launch.Const(hi), launch.Const(H / 32)},
			Doc:   "x_q's scales, one per 32 along H"}
		for _, b := range []*moe.Buffer{xq, xs} {
			if lw.prog.Buffer(b.Name) != nil {
				return // the program has a buffer of that name: no per-token form
			}
		}
		lw.prog.Buffers = append(lw.prog.Buffers, xq.Plan(), xs.Plan())
		lw.tokenQuant = &tokenQuant{op: moe.Quantize{Op: "quantize_x", X: ga.X, Q: xq, S: xs, K: int(H)}, gather: ga, tokens: []launch.TokenRange{{Min: lo, Max: hi}}}
		return
	}
}

// lowerMXGatheredGEMM lowers the gather, the GEMM and the Quantize of
// lw.tokenQuant (planTokenQuant) when ops begins with them: in the
// variant's token range where tokenQuant reads x's per-token form,
// quantize_x (where moe_dispatch_small_quantize_x did not) and the
// gathering variant kernel, which also quantizes C
// (moe_<gemm>_<variant>_gathered); in the rest of the variant's range the
// quantizing gather and the variant kernel (lowerQuantizedGEMM's); past
// it the base forms of the three (the Quantize inside the GEMM's epilogue
// where the base kernel writes its values: baseQuantizes). It returns 3
// when it lowered them, else 0.
func (lw *perOp) lowerMXGatheredGEMM(ops []moe.Op) (int, error) {
	tq := lw.tokenQuant
	if tq == nil || len(ops) < 3 || ops[0].Name() != tq.gather.Name() {
		return 0, nil
	}
	g, q := ops[1].(moe.GEMM), ops[2].(moe.Quantize)
	base, variant := lw.variantRanges()
	far := variant
	for _, r := range tq.tokens {
		far = without(far, r)
	}
	own := tq.tokens // where quantize_x runs as its own kernel
	for _, r := range tq.fused {
		own = without(own, r)
	}
	if bg := lw.baseForm(tq.gather); bg.Name() == tq.gather.Name() {
		// one form of the gather (promote: no register-fed rows) at
		// every T but tq's
		if err := lw.lowerFor(bg, merge(append(slices.Clone(far), base...))); err != nil {
			return 0, err
		}
	} else {
		if len(far) > 0 {
			if err := lw.lowerFor(tq.gather, far); err != nil {
				return 0, err
			}
		}
		if err := lw.lowerFor(bg, base); err != nil {
			return 0, err
		}
	}
	if len(own) > 0 {
		if err := lw.lowerFor(tq.op, own); err != nil {
			return 0, err
		}
	}
	suffix := "_" + lw.sched.Variant.Name
	bg, bq := lw.baseForm(g).(moe.GEMM), lw.baseForm(q).(moe.Quantize)
	baseFused := lw.baseQuantizes(bg, bq) // the base kernel writes bq's values itself
	if err := lw.emitGEMM(bg, "", lw.sched, base, quantizing(baseFused, bq)); err != nil {
		return 0, err
	}
	if len(far) > 0 {
		if err := lw.emitGEMM(g, suffix, lw.variant, far, fused{quant: &q}); err != nil {
			return 0, err
		}
	}
	src := &gatherSrc{x: tq.op.Q, scales: tq.op.S, slots: tq.gather.SrcSlot}
	if err := lw.emitGEMM(g, suffix+"_gathered", lw.variant, tq.tokens, fused{quant: &q, gather: src}); err != nil {
		return 0, err
	}
	if !baseFused {
		if err := lw.lowerFor(bq, base); err != nil {
			return 0, err
		}
	}
	return 3, nil
}

// without is ranges less the token counts of r.
func without(ranges []launch.TokenRange, r launch.TokenRange) []launch.TokenRange {
	var out []launch.TokenRange
	for _, t := range ranges {
		if r.Max < t.Min || r.Min > t.Max {
			out = append(out, t)
			continue
		}
		if t.Min < r.Min {
			out = append(out, launch.TokenRange{Min: t.Min, Max: r.Min - 1})
		}
		if r.Max < t.Max {
			out = append(out, launch.TokenRange{Min: r.Max + 1, Max: t.Max})
		}
	}
	return out
}
