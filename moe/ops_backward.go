package moe

// The ops the backward adds to those of the forward (ops.go). Row scales:
// a dispatched row r takes the routing weight of its slot,
// Weights[SrcSlot[r]]; a dense row t takes Scale[t]; a nil scale is 1.

// GateSigmoid writes G f32 [T], G[t] = sigmoid(X[t]·Gate) in fp32: the
// shared expert's output gate (X bf16 [T,H], Gate bf16 [H]).
type GateSigmoid struct {
	X, Gate *Buffer // bf16 [T,H], bf16 [H] (read)
	G       *Buffer // f32 [T] (written)
}

// ActGrad is the backward of a gated activation over the rows of a GEMM
// (the first Offsets[E] rows when Offsets is set, else T rows): with GU
// [rows, 2N] (f32 or bf16) the FC1 output before the activation (gate and up in
// GateUp order, bias included), DH [rows, N] (f32 or bf16) the gradient of the
// activation h = Act(gate, up) before the row scale s_r, it writes
//
//	DGU[r] = bf16(Act'(GU[r]) · s_r·DH[r])   bf16 [rows, 2N], GateUp order
//	HS[r]  = bf16(s_r · h_r)                 bf16 [rows, N]
//	Dot[r] = <DH[r], h_r>                    f32 [rows]
//
// in fp32. Dot is the row's share of the routing-weight gradient:
// <dy, FC2·h> = <FC2ᵀ·dy, h>, so no expert output needs to be kept, and
// it is exact for s_r <= 0 (s_r never divides).
type ActGrad struct {
	Op               string  // the op's name
	GU, DH           *Buffer // [rows, 2N] and [rows, N], f32 or bf16 (read)
	Weights, SrcSlot *Buffer // dispatched rows: s_r = Weights[SrcSlot[r]] (nil: 1)
	Scale            *Buffer // dense rows: s_t = Scale[t] (nil: 1)
	Offsets          *Buffer // dispatched rows: Offsets[E] rows (nil: T dense rows)
	// FC1X, when set (router weight on the input), is FC1·x of each row's
	// token without the weight, f32 [rows, 2N] in GateUp order; Dot is then
	// <dgu_r, FC1X[r]> (fp32 dgu, before rounding) = <dL/d(expert input),
	// x>: the routing-weight gradient, exact for any weight and with no
	// bf16 product on its way.
	FC1X *Buffer
	// MX (an mxfp8 layer, FC1X nil): Dot is <dh_r, Q(h_r)>, Q(h) the
	// MXFP8 value of h in blocks of 32 along N (as the forward's
	// quantize_h; schedule.MXActivations), since the forward's FC2 read
	// Q(h): <dy, FC2·Q(h)> = <FC2ᵀ·dy, Q(h)>. HS stays bf16(s·h): the
	// weight gradient's activation is not quantized.
	MX           bool
	DGU, HS, Dot *Buffer    // bf16 [rows, 2N], bf16 [rows, N], f32 [rows] (written)
	N            int        // columns of h
	GateUp       GateUp     // order of gate and up in GU and DGU
	Act          Activation // the forward's activation
}

// WeightGrad accumulates a weight gradient into caller-owned main-grad
// buffers (main += dW, Megatron's main_grad), per expert e with at least
// one row (an expert without rows is never touched):
//
//	Main_e[m, n] += sum_{r of e} A[r, m] * B[r, n]          [M, N]
//	Bias_e[m]    += sum_{r of e} s_r * A[r, m]              [M] (when Bias is set)
//
// A [rows, M] (bf16, or f32 with M = 1), B bf16 [rows, N]; rows of e are
// Offsets[e] .. Offsets[e+1]-1 (dispatched) or all T rows (dense, one
// expert). The sums run in a fixed order in fp32 and round once into the
// main grad's dtype (f32 or bf16, MainDType). Main is [E, M, N] (Stacked)
// or a u64 [E] table of device pointers, entry e to expert e's own [M, N]
// allocation of dtype GradDType (Table; an entry of an expert without rows
// is not read); Bias is [E, M].
type WeightGrad struct {
	Op               string        // the op's name
	A, B             *Buffer       // [rows, M] bf16 or f32, bf16 [rows, N] (read)
	Main, Bias       *Buffer       // main grads [E, M, N] or u64 [E] pointer table, and [E, M] (added to; Bias optional)
	Weights, SrcSlot *Buffer       // bias row scale s_r (dispatched rows; nil: 1)
	Offsets          *Buffer       // dispatched rows (nil: dense)
	Storage          WeightStorage // how Main_e is found
	GradDType        DType         // Table: dtype of each Main_e (f32 or bf16); Stacked: empty or Main's dtype
	M, N, Experts    int           // dW is [M, N] per expert; E (1 for dense rows)
}

// MainDType is the dtype of the main grad Main_e the op adds to: Main's
// own (Stacked), or GradDType behind a pointer table (Table).
func (g WeightGrad) MainDType() DType {
	if g.Storage == Table {
		return g.GradDType
	}
	return g.Main.DType
}

// CombineGrad gathers the per-row gradients back to the tokens, for each
// token t in fp32 in this fixed order:
//
//	DX[t] = bf16( sum_k v_k·DXS[RowOfSlot[t*K+k]] + SharedDX[t] + DZ[t]·Gate )
//	DW[t,k] = Dot[row] + <DY[t], FC2Bias[e]>  (FC2Bias only with the weight on the output)
//	DZ[t] = SharedDot[t] · G[t]·(1 - G[t])              (shared output gate)
//
// with v_k = Weights[t,k] when WeightOnInput (the weight scaled the expert
// input), else 1; DW is 0 for slots without a route; e = IDs[t*K+k].
// Optional buffers are nil when the layer lacks the feature.
type CombineGrad struct {
	DXS                          *Buffer // [T*K,H] f32 or bf16, per dispatched row
	RowOfSlot, IDs, Weights      *Buffer // i32 [T*K], i32 [T,K], f32 [T,K]
	DY, Dot                      *Buffer // bf16 [T,H], f32 [T*K] per dispatched row
	FC2Bias                      *Buffer // optional f32 [E,H] (weight on the output)
	SharedDX, SharedDot, G, Gate *Buffer // optional: shared dx [T,H] f32 or bf16, f32 [T], f32 [T], bf16 [H]
	DX, DW, DZ                   *Buffer // bf16 [T,H], f32 [T,K], optional f32 [T] (written)
	WeightOnInput                bool    // the routing weight scaled the expert input
}

// ScatterProbs writes DProbs f32 [T,E], the routing-weight gradient in the
// dense form: DW[t,k] at (t, IDs[t*K+k]) for every route, 0 elsewhere.
type ScatterProbs struct {
	IDs, DW *Buffer // i32 [T,K] fixed-width ids, f32 [T,K] (read)
	DProbs  *Buffer // f32 [T,E] (written)
}

// Name is "shared_gate_sigmoid" (PerOp kernel moe_shared_gate_sigmoid).
func (GateSigmoid) Name() string { return "shared_gate_sigmoid" }

// Name is a.Op, the name the program gives the op.
func (a ActGrad) Name() string { return a.Op }

// Name is g.Op, the name the program gives the op.
func (g WeightGrad) Name() string { return g.Op }

// Name is "combine_grad" (PerOp kernel moe_combine_grad).
func (CombineGrad) Name() string { return "combine_grad" }

// Name is "scatter_probs" (PerOp kernel moe_scatter_probs).
func (ScatterProbs) Name() string { return "scatter_probs" }

// Operands lists the buffers GateSigmoid reads and writes, under their roles.
func (o GateSigmoid) Operands() []Operand {
	return operands(r("x", o.X), r("gate", o.Gate), w("g", o.G))
}

// Operands lists the buffers ActGrad reads and writes, under their roles.
func (o ActGrad) Operands() []Operand {
	return operands(r("gu", o.GU), r("dh", o.DH), r("weights", o.Weights), r("src_slot", o.SrcSlot),
		r("scale", o.Scale), r("offsets", o.Offsets), r("fc1x", o.FC1X), w("dgu", o.DGU), w("hs", o.HS), w("dot", o.Dot))
}

// Operands lists the buffers WeightGrad reads and writes, under their roles.
func (o WeightGrad) Operands() []Operand {
	return operands(r("a", o.A), r("b", o.B), r("weights", o.Weights), r("src_slot", o.SrcSlot),
		r("offsets", o.Offsets), rw("main", o.Main), rw("bias", o.Bias))
}

// Operands lists the buffers CombineGrad reads and writes, under their roles.
func (o CombineGrad) Operands() []Operand {
	return operands(r("dxs", o.DXS), r("row_of_slot", o.RowOfSlot), r("ids", o.IDs), r("weights", o.Weights),
		r("dy", o.DY), r("dot", o.Dot), r("fc2_bias", o.FC2Bias), r("shared_dx", o.SharedDX),
		r("shared_dot", o.SharedDot), r("g", o.G), r("gate", o.Gate), w("dx", o.DX), w("dw", o.DW), w("dz", o.DZ))
}

// Operands lists the buffers ScatterProbs reads and writes, under their roles.
func (o ScatterProbs) Operands() []Operand {
	return operands(r("ids", o.IDs), r("dw", o.DW), w("dprobs", o.DProbs))
}
