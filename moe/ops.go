package moe

import "github.com/mokc/mokc/schedule"

// Op is one step of a program. Operands lists the buffers it reads and
// writes, in a fixed order (the PerOp lowering's kernel parameter order);
// absent optional operands are left out.
type Op interface {
	// Name is the op's name in the program, unique within it, e.g. "count",
	// "fc1" (PerOp kernels are named "moe_" + Name).
	Name() string
	Operands() []Operand
}

// operands lists the operands, leaving out those with a nil buffer; r, w
// and rw are read, written and accumulated operands.
func operands(os ...Operand) []Operand {
	out := os[:0]
	for _, o := range os {
		if o.Buffer != nil {
			out = append(out, o)
		}
	}
	return out
}
func r(role string, b *Buffer) Operand  { return Operand{Role: role, Buffer: b, Access: Read} }
func w(role string, b *Buffer) Operand  { return Operand{Role: role, Buffer: b, Access: Write} }
func rw(role string, b *Buffer) Operand { return Operand{Role: role, Buffer: b, Access: ReadWrite} }

// Init zeroes the per-expert slot counts Counts i32 [E] and the run's
// error word, word 0 of Err u32 [2] (word 1 keeps timeouts across runs:
// launch.ErrBuffer).
type Init struct {
	Counts *Buffer // i32 [E], zeroed
	Err    *Buffer // u32 [2], word 0 zeroed
}

// Route turns a dense routing map Map u8 [T,E] (nonzero = routed) and its
// probabilities Probs f32 [T,E] into fixed-width routing: IDs i32 [T,K] in
// increasing expert order padded with -1, Weights f32 [T,K] padded with 0.
// A row with more than K routes keeps its first K and sets
// launch.ErrTooManyRoute in Err.
type Route struct {
	Map, Probs   *Buffer // u8 [T,E] routing map, f32 [T,E] probs (read)
	IDs, Weights *Buffer // i32 [T,K], f32 [T,K] fixed-width routing (written)
	Err          *Buffer // u32 [2] error words (word 0 ORed into)
}

// Count validates IDs i32 [T,K] (an id outside [-1, E) sets
// launch.ErrBadExpertID in Err and counts as -1), adds one to Counts[e] for
// each slot routed to e, and marks unrouted slots -1 in RowOfSlot i32 [T*K].
type Count struct {
	IDs       *Buffer // i32 [T,K] expert ids (read)
	Counts    *Buffer // i32 [E] slots per expert (added to)
	RowOfSlot *Buffer // i32 [T*K], -1 written for unrouted slots
	Err       *Buffer // u32 [2] error words (word 0 ORed into)
}

// Scan writes Offsets i32 [E+1], the exclusive prefix sum of Counts i32
// [E]: expert e owns the dispatched rows Offsets[e] .. Offsets[e+1]-1.
// (Lowerings add the per-tile work lists of the grouped GEMMs here.)
type Scan struct {
	Counts  *Buffer // i32 [E] (read)
	Offsets *Buffer // i32 [E+1] (written)
}

// Permute ranks the slots routed to each expert in slot order (stable): slot
// s = t*K+k with id e gets row Offsets[e] + rank, written to RowOfSlot i32
// [T*K], and SrcSlot i32 [T*K] maps the row back to s.
type Permute struct {
	IDs, Offsets       *Buffer // i32 [T,K], i32 [E+1] (read)
	RowOfSlot, SrcSlot *Buffer // i32 [T*K] each (written)
}

// Gather dispatches tokens: XS[row] = X[SrcSlot[row] / K] for row <
// Offsets[E], scaled by the routing weight (rounded to bf16) when Weights
// is set (RouterWeightOnInput layers). With Q and S (the MXFP8 forward)
// it writes, instead of XS, the MXFP8 form of those rows: exactly what
// Quantize makes of XS (schedule.MXActivations), without XS in memory.
type Gather struct {
	Op               string  // the op's name ("" is "gather"; the backward also gathers dy and x)
	X                *Buffer // bf16 [T,H] token rows (read)
	SrcSlot, Offsets *Buffer // i32 [T*K] slot of each row, i32 [E+1] (read)
	XS               *Buffer // bf16 [T*K,H] dispatched rows (written; nil with Q and S)
	Weights          *Buffer // f32 [T,K] routing weights scaling the rows (nil: unscaled)
	// Q e4m3 [T*K,H] and S ue8m0 [T*K,H/32]: the rows quantized along H,
	// one scale per 32 (written; both or neither, and then no XS).
	Q, S *Buffer
	// V bf16 [T*K,H]: instead of Q and S (and XS), the MXFP8 values of
	// the rows Q and S would hold, in the register-fed form (RegisterFed).
	V *Buffer
}

// Rows says where a GEMM's A rows come from.
type Rows int

const (
	// Dispatched rows are grouped by expert: expert e owns rows
	// Offsets[e] .. Offsets[e+1]-1 (the routed experts).
	Dispatched Rows = iota
	// Dense rows all belong to one expert (the shared expert).
	Dense
)

// WeightStorage says how expert e's weight B_e is found.
type WeightStorage int

const (
	// Stacked: one tensor [E, rows, K]; B_e starts at element e*rows*K.
	Stacked WeightStorage = iota
	// Table: a u64 [E] array of device pointers, one allocation per expert.
	Table
)

// Major is the memory order of a GEMM's B_e.
type Major int

const (
	// KMajor: B_e is [N', K], each row one output column's weights (the
	// weights as stored; "NT" GEMM).
	KMajor Major = iota
	// NMajor: B_e is [K, N'], the stored weights used as their transpose
	// ("NN" GEMM: the backward's data gradients dh = dO·FC2, dx = dgu·FC1).
	NMajor
)

// GateUp is where the gate and up rows of a gated FC1 weight [2N, K] sit.
type GateUp int

const (
	// GateUpHalves: gate rows 0..N-1, then up rows N..2N-1 (Mixtral,
	// DeepSeek, Qwen; Hugging Face gate_up_proj).
	GateUpHalves GateUp = iota
	// GateUpInterleaved: gate rows even, up rows odd (GPT-OSS, openai/gpt-oss
	// model.py).
	GateUpInterleaved
)

// Activation is the gated activation of an FC1 GEMM: Kind with its clamp
// Limit and sigmoid slope Alpha (formulas and sources: schedule.Activation).
type Activation struct {
	Kind  schedule.Activation // the function
	Limit float64             // clamp limit (ClampedSwiGLU, GPTOSS)
	Alpha float64             // sigmoid slope (GPTOSS)
}

// GEMM is a grouped GEMM with fp32 accumulation:
//
//	C[row, n] = epilogue( sum_k A[row, k] * B_e[n', k] ),  e = expert of row
//
// A bf16 [rows, K]; B_e bf16 [N, K] (plain) or [2N, K] (gated, rows in
// GateUp order), K-major, or with BMajor NMajor [K, N]; C bf16 [rows, N],
// or f32 (plain GEMMs). The epilogue adds Bias f32 [E, rows of B_e] (when
// set), then for a gated GEMM applies Act to each (gate, up) pair, and
// rounds once to C's dtype.
type GEMM struct {
	Op      string        // name: "fc1", "fc2", "shared_fc1", "shared_fc2"
	A, B, C *Buffer       // operands (B: the weights, or their pointer table)
	Bias    *Buffer       // optional per-expert bias
	Offsets *Buffer       // expert row offsets i32 [E+1] (Dispatched only)
	Rows    Rows          // A row grouping
	Storage WeightStorage // how B_e is found
	BMajor  Major         // memory order of B_e (NMajor: plain GEMMs only)
	N, K    int           // output columns, reduction length
	Experts int           // E (1 for Dense)
	// RowsPerToken bounds the A rows per token: top-k for dispatched rows,
	// 1 for dense ones.
	RowsPerToken int
	Gated        bool       // B has 2N rows and the epilogue applies Act
	GateUp       GateUp     // gated only
	Act          Activation // gated only
	// AScales and BScales make the GEMM MXFP8 (A and B e4m3): the UE8M0
	// scales of A [rows, K/32] and of B [E, BRows, K/32] (B K-major), one
	// per 32 consecutive elements along K; element k of a row counts as
	// its e4m3 value times 2^(scale-127) (NaN for scale 255). Both or
	// neither, unless ARegisterFed.
	AScales, BScales *Buffer
	// ARegisterFed: A is bf16 [rows, K], its rows' MXFP8 values in the
	// register-fed form (RegisterFed; a Gather's or Quantize's V), with
	// no AScales; B is e4m3 with BScales. The same sums as the GEMM over
	// A's e4m3 form with its scales.
	ARegisterFed bool
}

// Quantize writes the MXFP8 form of X [rows, K] (bf16 or f32, K a multiple
// of 32) for a GEMM's A operand: Q e4m3 [rows, K] and S ue8m0 [rows, K/32],
// each block of 32 along K quantized as schedule.MXActivations defines it
// (each element as f32; the round-up scale, the smallest power of two X
// with amax/X <= 448; E4M3(v/X) rounded to nearest even; layouts.Quantize).
type Quantize struct {
	Op   string  // name: "quantize_xs", "quantize_h"
	X    *Buffer // input rows
	Q, S *Buffer // e4m3 data and ue8m0 scales (written)
	// V bf16 [rows, K]: instead of Q and S, the MXFP8 values they would
	// hold, in the register-fed form (RegisterFed).
	V *Buffer
	K int // row length
}

// Dequantize writes the bf16 value of MXFP8 weights for the backward's
// data gradients: Out_e[r, c] = bf16(Q_e[r, c] · 2^(S_e[r, c/32] − 127))
// for each expert e, [Rows, Cols] row-major with one ue8m0 scale per 32
// along Cols (OCP Microscaling Formats v1.0 MXFP8). Every e4m3 value times
// a scale of at least 2^-124 is a bf16 value (layouts.TestMXValuesInBF16),
// so a GEMM over Out reads the forward's weights exactly; products with
// smaller scales round to nearest even.
type Dequantize struct {
	Op                  string  // name: "dequantize_fc1", "dequantize_fc2"
	Q, S                *Buffer // e4m3 [Experts, Rows, Cols] and ue8m0 [Experts, Rows, Cols/32] (read)
	Out                 *Buffer // bf16 [Experts, Rows, Cols] (written)
	Experts, Rows, Cols int
}

// Activate applies a gated activation to a plain GEMM's output (the
// forward of a layer with schedule.Layer.SaveFC1, whose FC1 output is
// kept): for each of the first Offsets[E] rows r and column n < N,
//
//	H[r, n] = Act(GU[r, gate n], GU[r, up n])
//
// in fp32, rounded once to H's dtype (bf16, or f32 when the MXFP8 forward
// quantizes H next). GU f32 [rows, 2N] holds gate and up in GateUp order,
// the bias included: H is what a gated GEMM's epilogue writes from the same
// sums (GEMM).
type Activate struct {
	GU      *Buffer    // f32 [rows, 2N] (read)
	H       *Buffer    // bf16 or f32 [rows, N] (written)
	Offsets *Buffer    // i32 [E+1]: rows 0..Offsets[E]-1 are computed
	N       int        // columns of H
	GateUp  GateUp     // order of gate and up in GU
	Act     Activation // the layer's activation
}

// Combine writes Y bf16 [T,H]: for each token t, in fp32 in this fixed
// order, g_t * SharedOut[t] (when there is a shared expert; g_t =
// sigmoid(X[t]·SharedGate) with a shared output gate, else 1) plus, for k =
// 0..K-1 with RowOfSlot[t*K+k] >= 0, Weights[t,k] * OutRows[row] (weight 1
// when WeightOnInput), rounded once to bf16.
type Combine struct {
	OutRows                  *Buffer // bf16 [T*K,H] unweighted expert outputs
	RowOfSlot, Weights       *Buffer // i32 [T*K], f32 [T,K]
	Y                        *Buffer // bf16 [T,H] (written)
	SharedOut, X, SharedGate *Buffer // optional: shared expert, its output gate
	WeightOnInput            bool    // the routing weight already scaled the expert input
}

// Name is "init" (PerOp kernel moe_init).
func (Init) Name() string { return "init" }

// Name is "route" (PerOp kernel moe_route).
func (Route) Name() string { return "route" }

// Name is "count" (PerOp kernel moe_count).
func (Count) Name() string { return "count" }

// Name is "scan" (PerOp kernel moe_scan).
func (Scan) Name() string { return "scan" }

// Name is "permute" (PerOp kernel moe_permute).
func (Permute) Name() string { return "permute" }

// Name is g.Op, or "gather" when it is empty.
func (g Gather) Name() string {
	if g.Op == "" {
		return "gather"
	}
	return g.Op
}

// Name is g.Op, the name the program gives the op.
func (g GEMM) Name() string { return g.Op }

// Name is "activate" (PerOp kernel moe_activate).
func (Activate) Name() string { return "activate" }

// Name is "combine" (PerOp kernel moe_combine).
func (Combine) Name() string { return "combine" }

// Operands lists the buffers Init reads and writes, under their roles.
func (o Init) Operands() []Operand { return operands(w("counts", o.Counts), w("err", o.Err)) }

// Operands lists the buffers Route reads and writes, under their roles.
func (o Route) Operands() []Operand {
	return operands(r("map", o.Map), r("probs", o.Probs), w("ids", o.IDs), w("weights", o.Weights), rw("err", o.Err))
}

// Operands lists the buffers Count reads and writes, under their roles.
func (o Count) Operands() []Operand {
	return operands(r("ids", o.IDs), rw("counts", o.Counts), w("row_of_slot", o.RowOfSlot), rw("err", o.Err))
}

// Operands lists the buffers Scan reads and writes, under their roles.
func (o Scan) Operands() []Operand { return operands(r("counts", o.Counts), w("offsets", o.Offsets)) }

// Operands lists the buffers Permute reads and writes, under their roles.
func (o Permute) Operands() []Operand {
	return operands(r("ids", o.IDs), r("offsets", o.Offsets), w("row_of_slot", o.RowOfSlot), w("src_slot", o.SrcSlot))
}

// Operands lists the buffers Gather reads and writes, under their roles.
func (o Gather) Operands() []Operand {
	return operands(r("x", o.X), r("src_slot", o.SrcSlot), r("offsets", o.Offsets), w("xs", o.XS), r("weights", o.Weights),
		w("q", o.Q), w("scales", o.S), w("v", o.V))
}

// Operands lists the buffers GEMM reads and writes, under their roles.
func (o GEMM) Operands() []Operand {
	return operands(r("a", o.A), r("b", o.B), r("bias", o.Bias), w("c", o.C), r("offsets", o.Offsets),
		r("a_scales", o.AScales), r("b_scales", o.BScales))
}

// Name is the op's name (PerOp kernel "moe_" + Op).
func (o Quantize) Name() string { return o.Op }

// Operands lists the buffers Quantize reads and writes, under their roles.
func (o Quantize) Operands() []Operand {
	return operands(r("x", o.X), w("q", o.Q), w("scales", o.S), w("v", o.V))
}

// Name is the op's name (PerOp kernel "moe_" + Op).
func (o Dequantize) Name() string { return o.Op }

// Operands lists the buffers Dequantize reads and writes, under their roles.
func (o Dequantize) Operands() []Operand {
	return operands(r("q", o.Q), r("scales", o.S), w("out", o.Out))
}

// Operands lists the buffers Activate reads and writes, under their roles.
func (o Activate) Operands() []Operand {
	return operands(r("gu", o.GU), r("offsets", o.Offsets), w("h", o.H))
}

// Operands lists the buffers Combine reads and writes, under their roles.
func (o Combine) Operands() []Operand {
	return operands(r("out_rows", o.OutRows), r("row_of_slot", o.RowOfSlot), r("weights", o.Weights), w("y", o.Y),
		r("shared_out", o.SharedOut), r("x", o.X), r("shared_gate", o.SharedGate))
}
