package moe

import (
	"fmt"

	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/schedule"
)

// Names of the buffers Backward adds to those of Forward (caller's
// buffers; its scratch is named where it is declared).
const (
	BufDY             = "dy"               // bf16 [T,H] upstream gradient (input)
	BufDX             = "dx"               // bf16 [T,H] input gradient (output)
	BufDW             = "dw"               // f32 [T,K] routing-weight gradient (output for RoutingIDs, scratch for RoutingMap)
	BufDProbs         = "dprobs"           // f32 [T,E] probs gradient (output, RoutingMap)
	BufFC1Grad        = "fc1_grad"         // f32/bf16 [E,2I,H] main grad of fc1 (inout, GroupedWeights)
	BufFC2Grad        = "fc2_grad"         // f32/bf16 [E,H,I] main grad of fc2 (inout, GroupedWeights)
	BufFC1GradTable   = "fc1_grad_table"   // u64 [E] device pointers to each expert's f32/bf16 [2I,H] main grad of fc1 (inout, PerExpertWeights)
	BufFC2GradTable   = "fc2_grad_table"   // u64 [E] device pointers to each expert's f32/bf16 [H,I] main grad of fc2 (inout, PerExpertWeights)
	BufFC1BiasGrad    = "fc1_bias_grad"    // f32/bf16 [E,2I] main grad of fc1_bias (inout, Biases)
	BufFC2BiasGrad    = "fc2_bias_grad"    // f32/bf16 [E,H] main grad of fc2_bias (inout, Biases)
	BufSharedFC1Grad  = "shared_fc1_grad"  // f32/bf16 [2*S*I_s,H] main grad of shared_fc1 (inout)
	BufSharedFC2Grad  = "shared_fc2_grad"  // f32/bf16 [H,S*I_s] main grad of shared_fc2 (inout)
	BufSharedGateGrad = "shared_gate_grad" // f32/bf16 [H] main grad of shared_gate (inout, SharedGate)
)

// Backward is the BF16 backward of layer l: from the forward's inputs (see
// Forward) and the upstream gradient dy bf16 [T,H] it computes
//
//	dx bf16 [T,H]            the input gradient
//	dw f32 [T,K]             the routing-weight gradient (RoutingIDs), or
//	dprobs f32 [T,E]         the same in the dense form (RoutingMap)
//
// and accumulates the weight gradients into the caller's main-grad buffers
// (InOut, dtype f32 or bf16 after Layer.MainGrad; main += dW): fc1_grad
// [E,2I,H] and fc2_grad [E,H,I] (in FC1's row order), fc1_bias_grad [E,2I]
// and fc2_bias_grad [E,H] (Biases), shared_fc1_grad [2*S*I_s,H],
// shared_fc2_grad [H,S*I_s] and shared_gate_grad [H] (in the layouts of the
// shared weights). The gradients are those of schedule.Backward. An expert
// without routes is never touched.
//
// With per-expert weight storage (PerExpertWeights: the weights come as the
// pointer tables fc1_table and fc2_table, see Forward) the routed main
// grads are per expert too: fc1_grad_table and fc2_grad_table, u64 [E]
// device pointers, entry e to the caller's allocation of expert e's [2I,H]
// resp. [H,I] main grad in the main-grad dtype (InOut: the entries' targets
// are added to; the table itself is only read). The bias and shared-expert
// main grads keep their grouped forms. The data-gradient GEMMs read the
// weights through their tables (WeightStorage Table on the GEMMs and the
// weight gradients; Check verifies it).
//
// Saved state: by default none. The backward re-runs the dispatch and
// recomputes the FC1 output from the forward's inputs, so the forward keeps
// nothing for it (0 bytes per token); the routing-weight gradient needs no
// expert output either, since <dy, FC2·h> = <FC2ᵀ·dy, h> (ActGrad). With
// schedule.Layer.SaveFC1 the backward reads the forward's routed FC1 output
// instead, the input fc1_out f32 [T*K, 2I] (8·K·I bytes per token; Forward
// writes it from the same sums the recompute would make: the gradients are
// the same bits), and skips the recompute (and, for MXFP8, quantize_xs).
// Shared experts are recomputed either way. The FC1 output, dh = dy·FC2 and the per-row input gradients are
// kept in f32: a bf16 FC1 output moves values across a clamp
// (ClampedSwiGLU, GPTOSS), where the activation's derivative jumps, by
// enough to cost several percent of the gradients against the float64
// reference; and the routing-weight and shared-gate gradients are dots
// <dh, h> that cancel (with a bf16 dh, one token's shared-gate gradient is
// off by more than 1% for one random layer in ten).
//
// MXFP8 layers (the routed weights e4m3 with fc1_scales and fc2_scales, as
// in Forward; schedule.Backward's semantics): FC1 is recomputed from the
// same bytes the forward's quantizing gather writes (the bf16 gather, then
// quantize_xs; then the MXFP8 GEMM); the data
// gradients and FC1·x read the forward's weights exactly, as bf16 copies
// that Dequantize ops write into scratch (fc1_bf16 [E,2I,H], fc2_bf16
// [E,H,I]: twice the e4m3 bytes), from the unquantized dy and dgu (the
// activation quantizers pass gradients straight through); the routing-weight
// gradient's dot reads the MXFP8 values of h the forward's FC2 read
// (ActGrad.MX); the weight gradients are those of the bf16 layer, from the
// unquantized rows and activations. Shared experts stay bf16.
//
// Errors: l invalid, or MXFP8 with per-expert storage (no forward either).
func Backward(l schedule.Layer) (*Program, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	mx := l.Precision == schedule.MXFP8
	if mx && l.Storage == schedule.PerExpertWeights {
		return nil, fmt.Errorf("moe: %s: mxfp8 weights with per-expert storage have no backward program yet (grouped only)", l.Name)
	}
	p := &Program{Layer: l}
	H, I, K := l.Hidden, l.Intermediate, l.TopK
	T, TK := launch.PerT(1, 0), launch.PerT(int64(K), 0)
	in := p.inputs()
	dy := p.in(BufDY, BF16, "upstream gradient dL/dy", T, c(H))
	g := p.mainGrads()
	dx := p.buffer(BufDX, Output, BF16, "input gradient dL/dx", T, c(H))
	dw := p.routingGrad()
	errw := p.errorWord()

	// Re-dispatch x and dispatch dy the same way.
	d := p.dispatch(in, errw, false)
	dys := p.scratch("dys", BF16, "routed rows of dy grouped by expert", TK, c(H))
	p.Ops = append(p.Ops, Gather{Op: "gather_dy", X: dy, SrcSlot: d.srcSlot, Offsets: d.offsets, XS: dys})

	// Routed experts: recompute FC1, then dh = dy·FC2, the activation's
	// backward, dxs = dgu·FC1, and the weight gradients.
	var wts *Buffer
	if !l.RouterWeightOnInput {
		wts = in.weights
	}
	var mxo *mxOperands
	fc1Data := in.fc1 // the weights the data gradients and FC1·x read
	if mx {
		E := c(l.Experts)
		mxo = &mxOperands{fc1Scales: in.fc1Scales,
			fc1: p.scratch("fc1_bf16", BF16, "fc1 as bf16 (the exact MXFP8 values) for the data gradients", E, c(2*I), c(H)),
			fc2: p.scratch("fc2_bf16", BF16, "fc2 as bf16 (the exact MXFP8 values) for the data gradients", E, c(H), c(I))}
		p.Ops = append(p.Ops,
			Dequantize{Op: "dequantize_fc1", Q: in.fc1, S: in.fc1Scales, Out: mxo.fc1, Experts: l.Experts, Rows: 2 * I, Cols: H},
			Dequantize{Op: "dequantize_fc2", Q: in.fc2, S: in.fc2Scales, Out: mxo.fc2, Experts: l.Experts, Rows: H, Cols: I})
		fc1Data = mxo.fc1
	}
	var saved *Buffer
	if l.SaveFC1 {
		saved = p.in(BufFC1Out, F32, "the forward's routed FC1 output before the activation (SaveFC1)", TK, c(2*I))
	}
	r := p.expertGrad("", in.fc1, in.fc2, in.fc1Bias, d.xs, dys, d.offsets, TK, I, in.storage, mxo, saved)
	var fc1x *Buffer
	if l.RouterWeightOnInput {
		// dw = <dL/d(expert input), x> = <dgu, FC1·x>: FC1 of the unweighted rows.
		xu := p.scratch("xu", BF16, "routed rows of x without the routing weight", TK, c(H))
		fc1x = p.scratch("fc1x", F32, "FC1·x of the unweighted routed rows (no bias)", TK, c(2*I))
		p.Ops = append(p.Ops, Gather{Op: "gather_x", X: in.x, SrcSlot: d.srcSlot, Offsets: d.offsets, XS: xu},
			GEMM{Op: "fc1_x", A: xu, B: fc1Data, C: fc1x, Offsets: d.offsets, Rows: Dispatched, Storage: in.storage,
				N: 2 * I, K: H, Experts: l.Experts, RowsPerToken: K})
	}
	p.Ops = append(p.Ops, ActGrad{Op: "act_grad", GU: r.gu, DH: r.dh, Weights: wts, SrcSlot: d.srcSlot,
		Offsets: d.offsets, FC1X: fc1x, MX: mx && fc1x == nil, DGU: r.dgu, HS: r.hs, Dot: r.dot, N: I, GateUp: in.gateUp, Act: in.act})
	r.grads(p, g.fc1, g.fc2, g.fc1Bias, g.fc2Bias, g.storage, g.dtype, wts, d.srcSlot)

	// Shared expert: the same over every token, scaled by its output gate.
	var sharedDX, sharedDot, gate, dz *Buffer
	if Is := l.SharedWidth(); Is > 0 {
		if in.sharedGate != nil {
			gate = p.scratch("g", F32, "shared-expert output gate sigmoid(x·shared_gate)", T)
			p.Ops = append(p.Ops, GateSigmoid{X: in.x, Gate: in.sharedGate, G: gate})
		}
		s := p.expertGrad("shared_", in.sharedFC1, in.sharedFC2, nil, in.x, dy, nil, T, Is, Stacked, nil, nil)
		p.Ops = append(p.Ops, ActGrad{Op: "shared_act_grad", GU: s.gu, DH: s.dh, Scale: gate,
			DGU: s.dgu, HS: s.hs, Dot: s.dot, N: Is, Act: in.sharedAct})
		s.grads(p, g.sharedFC1, g.sharedFC2, nil, nil, Stacked, g.dtype, nil, nil)
		sharedDX, sharedDot = s.dxs, s.dot
		if gate != nil {
			dz = p.scratch("dz", F32, "gradient of the shared gate's logit x·shared_gate", T)
		}
	}

	// Combine the rows' gradients per token.
	var fc2Bias *Buffer
	if !l.RouterWeightOnInput {
		fc2Bias = in.fc2Bias
	}
	p.Ops = append(p.Ops, CombineGrad{DXS: r.dxs, RowOfSlot: d.rowOfSlot, IDs: in.ids, Weights: in.weights, DY: dy,
		Dot: r.dot, FC2Bias: fc2Bias, SharedDX: sharedDX, SharedDot: sharedDot, G: gate, Gate: in.sharedGate,
		DX: dx, DW: dw.dw, DZ: dz, WeightOnInput: l.RouterWeightOnInput})
	if dz != nil {
		p.Ops = append(p.Ops, WeightGrad{Op: "shared_gate_wgrad", A: dz, B: in.x, Main: g.sharedGate,
			M: 1, N: H, Experts: 1})
	}
	if dw.dprobs != nil {
		p.Ops = append(p.Ops, ScatterProbs{IDs: in.ids, DW: dw.dw, DProbs: dw.dprobs})
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	return p, nil
}

// mainGradBufs are the main-grad buffers of Backward (nil where the layer
// has no such weight), with how the routed fc1 and fc2 main grads are
// stored (Table: fc1 and fc2 are pointer tables) and the main grads' dtype.
type mainGradBufs struct {
	fc1, fc2, fc1Bias, fc2Bias, sharedFC1, sharedFC2, sharedGate *Buffer
	storage                                                      WeightStorage
	dtype                                                        DType
}

// mainGrads declares the caller's main-grad buffers: the routed fc1 and fc2
// ones grouped, or as pointer tables for per-expert weight storage.
func (p *Program) mainGrads() mainGradBufs {
	l := p.Layer
	H, I, E, Is := l.Hidden, l.Intermediate, l.Experts, l.SharedWidth()
	dt := F32
	if l.MainGrad == schedule.GradBF16 {
		dt = BF16
	}
	grad := func(name, doc string, shape ...launch.Expr) *Buffer {
		return p.buffer(name, InOut, dt, "main grad of "+doc+" (main += dW)", shape...)
	}
	g := mainGradBufs{dtype: dt}
	if l.Storage == schedule.PerExpertWeights {
		table := func(name, weight, shape string) *Buffer {
			return p.buffer(name, InOut, U64, "device pointers to each expert's main grad of "+weight+", "+string(dt)+" "+shape+
				" (main += dW; an expert without routes is not touched)", c(E))
		}
		g.fc1 = table(BufFC1GradTable, BufFC1, "[2I,H]")
		g.fc2 = table(BufFC2GradTable, BufFC2, "[H,I]")
		g.storage = Table
	} else {
		g.fc1 = grad(BufFC1Grad, BufFC1, c(E), c(2*I), c(H))
		g.fc2 = grad(BufFC2Grad, BufFC2, c(E), c(H), c(I))
	}
	if l.Biases {
		g.fc1Bias = grad(BufFC1BiasGrad, BufFC1Bias, c(E), c(2*I))
		g.fc2Bias = grad(BufFC2BiasGrad, BufFC2Bias, c(E), c(H))
	}
	if Is > 0 {
		g.sharedFC1 = grad(BufSharedFC1Grad, BufSharedFC1, c(2*Is), c(H))
		g.sharedFC2 = grad(BufSharedFC2Grad, BufSharedFC2, c(H), c(Is))
		if l.SharedGate {
			g.sharedGate = grad(BufSharedGateGrad, BufSharedGate, c(H))
		}
	}
	return g
}

// routingGrads are the routing-weight gradient outputs.
type routingGrads struct{ dw, dprobs *Buffer }

// routingGrad declares dw [T,K] (an output for RoutingIDs, scratch before
// dprobs [T,E] for RoutingMap).
func (p *Program) routingGrad() routingGrads {
	l := p.Layer
	T := launch.PerT(1, 0)
	if l.Routing != schedule.RoutingMap {
		return routingGrads{dw: p.buffer(BufDW, Output, F32, "routing-weight gradient (0 for slots without a route)", T, c(l.TopK))}
	}
	return routingGrads{
		dprobs: p.buffer(BufDProbs, Output, F32, "probs gradient (0 where the routing map is 0)", T, c(l.Experts)),
		dw:     p.scratch(BufDW, F32, "routing-weight gradient of the fixed-width slots", T, c(l.TopK)),
	}
}

// mlpGrad are the buffers of one MLP's backward (routed experts over the
// dispatched rows, or the shared expert over every token).
type mlpGrad struct {
	fc1, fc2, x, dy, offsets *Buffer       // operands: weights, inputs, upstream gradient, row groups
	storage                  WeightStorage // how the weights fc1 and fc2 are found
	gu, dh, dgu, hs, dot     *Buffer       // scratch of ActGrad
	dxs                      *Buffer       // input gradient per row
	n, h, e                  int           // intermediate size, hidden size, experts
}

// mxOperands are the extra operands of an MXFP8 layer's routed backward:
// fc1's scales (the FC1 recompute is the forward's MXFP8 GEMM) and the
// bf16 copies of fc1 and fc2 the data gradients read.
type mxOperands struct {
	fc1Scales, fc1, fc2 *Buffer
}

// expertGrad declares the scratch of one MLP's backward (names prefixed
// by pre) over rows (T·K dispatched rows or T tokens) with intermediate
// size n and weights stored as storage says, and appends its GEMMs: FC1
// recomputed (gu), dh = dy·FC2 and dxs = dgu·FC1 (dgu is written by the
// caller's ActGrad, which runs between them: the GEMM that reads dgu is
// appended by grads). With mx (routed experts of an MXFP8 layer) FC1 runs
// on the quantized rows (quantize_xs) and the e4m3 fc1, and the data
// gradients on mx's bf16 copies. With saved (the forward's FC1 output,
// schedule.Layer.SaveFC1) FC1 is read, not recomputed.
func (p *Program) expertGrad(pre string, fc1, fc2, fc1Bias, x, dy, offsets *Buffer, rows launch.Expr, n int, storage WeightStorage, mx *mxOperands, saved *Buffer) *mlpGrad {
	l := p.Layer
	H := l.Hidden
	m := &mlpGrad{fc1: fc1, fc2: fc2, x: x, dy: dy, offsets: offsets, storage: storage, n: n, h: H, e: 1}
	r := Dense
	if offsets != nil {
		r, m.e = Dispatched, l.Experts
	}
	m.gu = saved
	if saved == nil {
		m.gu = p.scratch(pre+"gu", F32, "FC1 output before the activation, recomputed (f32: the clamped activations' derivative jumps at the clamp)", rows, c(2*n))
	}
	m.dh = p.scratch(pre+"dh", F32, "dL/dh before the row scale: dy·FC2 (f32: the routing-weight and shared-gate gradients are its dot with h, which cancels)", rows, c(n))
	m.dgu = p.scratch(pre+"dgu", BF16, "dL/d(FC1 output), FC1 row order", rows, c(2*n))
	m.hs = p.scratch(pre+"hs_scaled", BF16, "activation times the row scale", rows, c(n))
	m.dot = p.scratch(pre+"dot", F32, "<dh, h> per row", rows)
	m.dxs = p.scratch(pre+"dxs", F32, "dL/d(expert input) per row (f32: summed per token, and dotted with x for the weight on the input)", rows, c(H))
	per := 1
	if offsets != nil {
		per = l.TopK
	}
	if saved == nil {
		recompute := GEMM{Op: pre + "fc1", A: x, B: fc1, Bias: fc1Bias, C: m.gu, Offsets: offsets, Rows: r, Storage: storage,
			N: 2 * n, K: H, Experts: m.e, RowsPerToken: per}
		if mx != nil {
			q := p.quantize("quantize_xs", x, BufXSQ, BufXSScales, "dispatched rows of x", rows, H)
			recompute.A, recompute.AScales, recompute.BScales = q.Q, q.S, mx.fc1Scales
			p.Ops = append(p.Ops, q)
		}
		p.Ops = append(p.Ops, recompute)
	}
	if mx != nil {
		m.fc1, fc2 = mx.fc1, mx.fc2
	}
	p.Ops = append(p.Ops,
		GEMM{Op: pre + "fc2_dgrad", A: dy, B: fc2, C: m.dh, Offsets: offsets, Rows: r, Storage: storage, BMajor: NMajor,
			N: n, K: H, Experts: m.e, RowsPerToken: per})
	return m
}

// grads appends, after the ActGrad, the data gradient dxs = dgu·FC1 and
// the weight gradients fc2 += dyᵀ·hs (bias: the row-scaled sum of dy) and
// fc1 += dguᵀ·x (bias: the sum of dgu), into main grads fc1Grad and fc2Grad
// of dtype dt stored as storage says (Table: pointer tables).
func (m *mlpGrad) grads(p *Program, fc1Grad, fc2Grad, fc1BiasGrad, fc2BiasGrad *Buffer, storage WeightStorage, dt DType, weights, srcSlot *Buffer) {
	pre, r, per, offsets, experts := "shared_", Dense, 1, m.offsets, m.e
	if offsets != nil {
		pre, r, per = "", Dispatched, p.Layer.TopK
	}
	H, n := m.h, m.n
	p.Ops = append(p.Ops,
		GEMM{Op: pre + "fc1_dgrad", A: m.dgu, B: m.fc1, C: m.dxs, Offsets: offsets, Rows: r, Storage: m.storage, BMajor: NMajor,
			N: H, K: 2 * n, Experts: experts, RowsPerToken: per},
		WeightGrad{Op: pre + "fc2_wgrad", A: m.dy, B: m.hs, Main: fc2Grad, Bias: fc2BiasGrad,
			Weights: weights, SrcSlot: srcSlot, Offsets: offsets, Storage: storage, GradDType: dt, M: H, N: n, Experts: experts},
		WeightGrad{Op: pre + "fc1_wgrad", A: m.dgu, B: m.x, Main: fc1Grad, Bias: fc1BiasGrad,
			Offsets: offsets, Storage: storage, GradDType: dt, M: 2 * n, N: H, Experts: experts})
}
