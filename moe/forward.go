package moe

import (
	"fmt"

	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/schedule"
)

// Names of the buffers Forward declares, each declared once under its name
// (the keys of runtime.Bindings and the manifest's buffer names). Which of
// them a layer has depends on its routing form, weight storage, biases and
// shared experts (Forward's comment).
const (
	// Caller inputs.
	BufX          = "x"           // bf16 [T,H] tokens
	BufIDs        = "ids"         // i32 [T,K] expert ids, -1 = none (RoutingIDs input; RoutingMap scratch)
	BufWeights    = "weights"     // f32 [T,K] routing weights (RoutingIDs input; RoutingMap scratch)
	BufRoutingMap = "routing_map" // u8 [T,E] dense routing map, nonzero = routed (RoutingMap)
	BufProbs      = "probs"       // f32 [T,E] routing probabilities (RoutingMap)
	BufFC1        = "fc1"         // bf16 [E,2I,H] routed FC1 weights (GroupedWeights)
	BufFC2        = "fc2"         // bf16 [E,H,I] routed FC2 weights (GroupedWeights)
	BufFC1Table   = "fc1_table"   // u64 [E] device pointers to each expert's FC1 [2I,H] (PerExpertWeights)
	BufFC2Table   = "fc2_table"   // u64 [E] device pointers to each expert's FC2 [H,I] (PerExpertWeights)
	BufFC1Scales  = "fc1_scales"  // ue8m0 [E,2I,H/32] block scales of fc1 (MXFP8: fc1 is e4m3)
	BufFC2Scales  = "fc2_scales"  // ue8m0 [E,H,I/32] block scales of fc2 (MXFP8: fc2 is e4m3)
	BufFC1Bias    = "fc1_bias"    // f32 [E,2I] FC1 bias, FC1 row order (Biases)
	BufFC2Bias    = "fc2_bias"    // f32 [E,H] FC2 bias (Biases)
	BufSharedFC1  = "shared_fc1"  // bf16 [2*S*I_s,H] shared-expert FC1: gate rows, then up rows
	BufSharedFC2  = "shared_fc2"  // bf16 [H,S*I_s] shared-expert FC2
	BufSharedGate = "shared_gate" // bf16 [H] shared-expert output gate (SharedGate)

	// Outputs.
	BufY   = "y"              // bf16 [T,H] layer output
	BufErr = launch.ErrBuffer // u32 [2] error words (launch.ErrBuffer: launch.ErrBadExpertID, launch.ErrTooManyRoute, launch.ErrWaitTimeout)

	// Scratch.
	BufCounts    = "counts"      // i32 [E] slots per expert
	BufOffsets   = "offsets"     // i32 [E+1] first dispatched row of each expert
	BufRowOfSlot = "row_of_slot" // i32 [T*K] row of slot t*K+k, -1 = none
	BufSrcSlot   = "src_slot"    // i32 [T*K] slot of each dispatched row
	BufXS        = "xs"          // bf16 [T*K,H] dispatched rows of x (bf16 forward; the backward)
	BufH         = "h"           // bf16 [T*K,I] routed activations
	BufOutRows   = "out_rows"    // bf16 [T*K,H] unweighted expert outputs
	BufHS        = "hs"          // bf16 [T,S*I_s] shared-expert activations
	BufSharedOut = "shared_out"  // bf16 [T,H] shared-expert output
	// MXFP8 scratch: the quantized GEMM inputs.
	BufXSQ      = "xs_q"      // e4m3 [T*K,H] dispatched rows of x, quantized
	BufXSScales = "xs_scales" // ue8m0 [T*K,H/32] their block scales
	BufHQ       = "h_q"       // e4m3 [T*K,I] routed activations, quantized
	BufHScales  = "h_scales"  // ue8m0 [T*K,I/32] their block scales
	// Saved state (schedule.Layer.SaveFC1): the forward's scratch that the
	// backward reads as an input of the same name.
	BufFC1Out = "fc1_out" // f32 [T*K,2I] routed FC1 output before the activation, bias included, GateUp order
)

// Forward is the forward program of layer l. Buffers the caller binds (Input,
// Output): x bf16 [T,H]; ids i32 [T,K] + weights f32 [T,K] (RoutingIDs) or
// routing_map u8 [T,E] + probs f32 [T,E] (RoutingMap); fc1 bf16 [E,2I,H]
// and fc2 bf16 [E,H,I] (GroupedWeights) or fc1_table / fc2_table u64 [E]
// device pointers to per-expert [2I,H] / [H,I] matrices (PerExpertWeights);
// fc1_bias f32 [E,2I] and fc2_bias f32 [E,H] (Biases, in FC1 row order);
// shared_fc1 bf16 [2*S*I_s, H] (gate rows, then up rows), shared_fc2 bf16
// [H, S*I_s], shared_gate bf16 [H] (SharedGate); y bf16 [T,H]. The error
// words err u32 [2] (BufErr, launch.ErrBuffer) are an Output too, but not
// the caller's: the init op clears word 0 and the routing ops OR
// launch.ErrBadExpertID and launch.ErrTooManyRoute into it (a co-resident
// kernel's timeout, launch.ErrWaitTimeout, goes into both words), so a
// launcher of the manifest allocates them (zeroed) and reads them after the
// forward, and runtime.Layer owns them (CheckErrors reports them; Forward
// refuses a binding of them).
//
// MXFP8 layers (docs/mxfp8.md): fc1 and fc2 are e4m3 with the ue8m0 block
// scales fc1_scales [E,2I,H/32] and fc2_scales [E,H,I/32] (K-major, one
// per 32 along K); the dispatched rows are quantized as they are gathered
// (the gather writes xs_q and xs_scales; there is no xs) and the
// activations (kept f32 in h) by a Quantize op (h_q, h_scales), before the
// routed GEMMs; the shared experts stay bf16.
//
// With schedule.Layer.SaveFC1 the routed FC1 is a plain GEMM into the
// scratch fc1_out f32 [T*K, 2I] (the backward's input of that name: whoever
// runs the pair keeps the forward's fc1_out until the backward; runtime.Layer
// does) and an Activate op writes h from it; y is the same.
//
// Errors: l invalid (schedule.Layer Validate), an MXFP8 layer with
// per-expert storage (not defined yet).
func Forward(l schedule.Layer) (*Program, error) {
	if err := l.Validate(); err != nil {
		return nil, err
	}
	mx := l.Precision == schedule.MXFP8
	if mx && l.Storage == schedule.PerExpertWeights {
		return nil, fmt.Errorf("moe: %s: mxfp8 weights need grouped storage (per-expert mxfp8 storage has no forward program yet)", l.Name)
	}
	p := &Program{Layer: l}
	H, I, E, K, Is := l.Hidden, l.Intermediate, l.Experts, l.TopK, l.SharedWidth()
	T, TK := launch.PerT(1, 0), launch.PerT(int64(K), 0)
	in := p.inputs()
	y := p.buffer(BufY, Output, BF16, "layer output", T, c(H))
	errw := p.errorWord()

	// Routing and dispatch.
	d := p.dispatch(in, errw, mx)
	outRows := p.scratch(BufOutRows, BF16, "unweighted expert outputs per routed row", TK, c(H))

	// Routed experts: grouped GEMMs over the dispatched rows (MXFP8: of
	// their quantized forms).
	fc1 := GEMM{Op: "fc1", A: d.xs, B: in.fc1, Bias: in.fc1Bias, Offsets: d.offsets, Rows: Dispatched,
		Storage: in.storage, N: I, K: H, Experts: E, RowsPerToken: K, Gated: true, GateUp: in.gateUp, Act: in.act}
	fc2 := GEMM{Op: "fc2", B: in.fc2, Bias: in.fc2Bias, C: outRows, Offsets: d.offsets, Rows: Dispatched,
		Storage: in.storage, N: H, K: I, Experts: E, RowsPerToken: K}
	var h *Buffer
	if mx {
		h = p.scratch(BufH, F32, "activations of the routed rows (f32: quantized next)", TK, c(I))
	} else {
		h = p.scratch(BufH, BF16, "activations of the routed rows", TK, c(I))
	}
	fc1.C, fc2.A = h, h
	if mx {
		fc1.A, fc1.AScales, fc1.BScales = d.xsQ, d.xsScales, in.fc1Scales
	}
	if l.SaveFC1 {
		gu := p.scratch(BufFC1Out, F32, "routed FC1 output before the activation, kept for the backward (SaveFC1)", TK, c(2*I))
		fc1.C, fc1.N, fc1.Gated, fc1.GateUp, fc1.Act = gu, 2*I, false, GateUpHalves, Activation{}
		p.Ops = append(p.Ops, fc1, Activate{GU: gu, H: h, Offsets: d.offsets, N: I, GateUp: in.gateUp, Act: in.act})
	} else {
		p.Ops = append(p.Ops, fc1)
	}
	if mx {
		qh := p.quantize("quantize_h", h, BufHQ, BufHScales, "routed activations", TK, I)
		fc2.A, fc2.AScales, fc2.BScales = qh.Q, qh.S, in.fc2Scales
		p.Ops = append(p.Ops, qh)
	}
	p.Ops = append(p.Ops, fc2)

	// Shared expert: dense GEMMs over every token.
	var sharedOut, gateX *Buffer
	if Is > 0 {
		hs := p.scratch(BufHS, BF16, "shared-expert activations", T, c(Is))
		sharedOut = p.scratch(BufSharedOut, BF16, "shared-expert output", T, c(H))
		p.Ops = append(p.Ops,
			GEMM{Op: "shared_fc1", A: in.x, B: in.sharedFC1, C: hs, Rows: Dense, N: Is, K: H, Experts: 1, RowsPerToken: 1,
				Gated: true, Act: in.sharedAct},
			GEMM{Op: "shared_fc2", A: hs, B: in.sharedFC2, C: sharedOut, Rows: Dense, N: H, K: Is, Experts: 1, RowsPerToken: 1})
		if in.sharedGate != nil {
			gateX = in.x
		}
	}

	// Combine: weighted sum of the expert outputs per token.
	p.Ops = append(p.Ops, Combine{OutRows: outRows, RowOfSlot: d.rowOfSlot, Weights: in.weights, Y: y,
		SharedOut: sharedOut, X: gateX, SharedGate: in.sharedGate, WeightOnInput: l.RouterWeightOnInput})
	if err := p.Check(); err != nil {
		return nil, err
	}
	return p, nil
}

// layerInputs are the caller's buffers that the forward and the backward
// both read, with the layer's GEMM attributes.
type layerInputs struct {
	x, ids, weights                  *Buffer
	route                            *Route // dense routing map only (Err unset)
	fc1, fc2, fc1Bias, fc2Bias       *Buffer
	fc1Scales, fc2Scales             *Buffer // MXFP8 only
	sharedFC1, sharedFC2, sharedGate *Buffer
	storage                          WeightStorage
	gateUp                           GateUp
	act, sharedAct                   Activation
}

// inputs declares the layer's inputs (see Forward for their shapes).
func (p *Program) inputs() layerInputs {
	l := p.Layer
	H, I, E, Is := l.Hidden, l.Intermediate, l.Experts, l.SharedWidth()
	var in layerInputs
	in.x = p.in(BufX, BF16, "tokens", launch.PerT(1, 0), c(H))
	in.ids, in.weights, in.route = p.routing()
	in.fc1, in.fc2, in.storage = p.expertWeights()
	if l.Precision == schedule.MXFP8 {
		in.fc1Scales = p.in(BufFC1Scales, UE8M0, "block scales of fc1, one per 32 along H", c(E), c(2*I), c(H/32))
		in.fc2Scales = p.in(BufFC2Scales, UE8M0, "block scales of fc2, one per 32 along I", c(E), c(H), c(I/32))
	}
	if l.Biases {
		in.fc1Bias = p.in(BufFC1Bias, F32, "FC1 bias (FC1 row order)", c(E), c(2*I))
		in.fc2Bias = p.in(BufFC2Bias, F32, "FC2 bias", c(E), c(H))
	}
	if Is > 0 {
		in.sharedFC1 = p.in(BufSharedFC1, BF16, "shared-expert FC1 (gate rows, then up rows)", c(2*Is), c(H))
		in.sharedFC2 = p.in(BufSharedFC2, BF16, "shared-expert FC2", c(H), c(Is))
		if l.SharedGate {
			in.sharedGate = p.in(BufSharedGate, BF16, "shared-expert output gate vector", c(H))
		}
	}
	if l.GateUpInterleaved {
		in.gateUp = GateUpInterleaved
	}
	in.act = Activation{Kind: l.Activation, Limit: l.SwiGLULimit, Alpha: l.GPTOSSAlpha}
	in.sharedAct = Activation{Kind: l.SharedActivation, Limit: l.SharedSwiGLULimit}
	return in
}

// errorWord declares the error word output.
func (p *Program) errorWord() *Buffer {
	return p.buffer(BufErr, Output, U32, "error words: [0] this run's OR of ErrBadExpertID (1), ErrTooManyRoute (2), ErrWaitTimeout (4), cleared by its first kernel; [1] ErrWaitTimeout of any run since the launcher last cleared it", c(2))
}

// dispatched are the scratch buffers of the dispatch.
type dispatched struct{ counts, offsets, rowOfSlot, srcSlot, xs, xsQ, xsScales *Buffer }

// dispatch appends the routing and dispatch ops (init, route, count, scan,
// permute, gather of x) and declares their scratch. With quantized (the
// MXFP8 forward) the gather writes the dispatched rows' MXFP8 form, xs_q
// and xs_scales, and no xs.
func (p *Program) dispatch(in layerInputs, errw *Buffer, quantized bool) dispatched {
	l := p.Layer
	TK := launch.PerT(int64(l.TopK), 0)
	var d dispatched
	d.counts = p.scratch(BufCounts, I32, "slots per expert", c(l.Experts))
	d.offsets = p.scratch(BufOffsets, I32, "first row of each expert; offsets[E] = routed rows", c(l.Experts+1))
	d.rowOfSlot = p.scratch(BufRowOfSlot, I32, "row of slot t*K+k (-1 = none)", TK)
	d.srcSlot = p.scratch(BufSrcSlot, I32, "slot of each row", TK)
	g := Gather{X: in.x, SrcSlot: d.srcSlot, Offsets: d.offsets}
	if quantized {
		d.xsQ, d.xsScales = p.mxScratch(BufXSQ, BufXSScales, "dispatched rows of x", TK, l.Hidden)
		g.Q, g.S = d.xsQ, d.xsScales
	} else {
		d.xs = p.scratch(BufXS, BF16, "routed rows of x grouped by expert", TK, c(l.Hidden))
		g.XS = d.xs
	}
	p.Ops = append(p.Ops, Init{Counts: d.counts, Err: errw})
	if in.route != nil {
		r := *in.route
		r.Err = errw
		p.Ops = append(p.Ops, r)
	}
	if l.RouterWeightOnInput {
		g.Weights = in.weights
	}
	p.Ops = append(p.Ops,
		Count{IDs: in.ids, Counts: d.counts, RowOfSlot: d.rowOfSlot, Err: errw},
		Scan{Counts: d.counts, Offsets: d.offsets},
		Permute{IDs: in.ids, Offsets: d.offsets, RowOfSlot: d.rowOfSlot, SrcSlot: d.srcSlot},
		g)
	return d
}

// routing declares the routing inputs: fixed-width ids and weights, or a
// dense routing map and probs with the Route op (Err unset) that turns them
// into fixed-width scratch.
func (p *Program) routing() (ids, weights *Buffer, route *Route) {
	l := p.Layer
	T, E, K := launch.PerT(1, 0), c(l.Experts), c(l.TopK)
	if l.Routing != schedule.RoutingMap {
		return p.in(BufIDs, I32, "expert ids (-1 = none)", T, K), p.in(BufWeights, F32, "routing weights", T, K), nil
	}
	m := p.in(BufRoutingMap, U8, "dense routing map (nonzero = routed)", T, E)
	probs := p.in(BufProbs, F32, "routing probabilities", T, E)
	ids = p.scratch(BufIDs, I32, "fixed-width expert ids (-1 = none), from moe_route", T, K)
	weights = p.scratch(BufWeights, F32, "fixed-width routing weights, from moe_route", T, K)
	return ids, weights, &Route{Map: m, Probs: probs, IDs: ids, Weights: weights}
}

// expertWeights declares the routed experts' FC1 and FC2 weights.
func (p *Program) expertWeights() (fc1, fc2 *Buffer, s WeightStorage) {
	l := p.Layer
	H, I, E := c(l.Hidden), c(2*l.Intermediate), c(l.Experts)
	rows := "gate rows 0..I-1, then up rows"
	if l.GateUpInterleaved {
		rows = "gate and up rows interleaved: gate even, up odd"
	}
	if l.Storage == schedule.PerExpertWeights {
		return p.in(BufFC1Table, U64, "device pointers to each expert's FC1 [2I,H] bf16 ("+rows+")", E),
			p.in(BufFC2Table, U64, "device pointers to each expert's FC2 [H,I] bf16", E), Table
	}
	dt := BF16
	if l.Precision == schedule.MXFP8 {
		dt = E4M3
	}
	return p.in(BufFC1, dt, "FC1 weights ("+rows+")", E, I, H),
		p.in(BufFC2, dt, "FC2 weights", E, H, c(l.Intermediate)), Stacked
}

// quantize declares the MXFP8 form of x [rows, k] (scratch q e4m3 and s
// ue8m0 named qName and sName) and returns the Quantize op that writes it.
func (p *Program) quantize(op string, x *Buffer, qName, sName, what string, rows launch.Expr, k int) Quantize {
	q, s := p.mxScratch(qName, sName, what, rows, k)
	return Quantize{Op: op, X: x, Q: q, S: s, K: k}
}

// mxScratch declares the MXFP8 form of rows of k (what they are): scratch
// q e4m3 [rows, k] and s ue8m0 [rows, k/32] named qName and sName.
func (p *Program) mxScratch(qName, sName, what string, rows launch.Expr, k int) (q, s *Buffer) {
	q = p.scratch(qName, E4M3, what+", quantized to e4m3 (MXFP8)", rows, c(k))
	s = p.scratch(sName, UE8M0, "block scales of "+qName+", one per 32 along K", rows, c(k/32))
	return q, s
}

// c is the constant dimension n.
func c(n int) launch.Expr { return launch.Const(int64(n)) }
