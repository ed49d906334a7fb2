package codegen

import (
	"fmt"
	"strings"

	llir "github.com/llir/llvm/ir"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/schedule"
)

// Program is the BF16 MoE forward of one layer on one target: one LLVM
// module holding every kernel, and the launch plan that runs it.
//
// The runtime executes it for T tokens as follows: allocate every Buffer of
// Kind scratch with Bytes.Eval(T) bytes (at least 1), bind the caller's
// input and output buffers by name, then launch Kernels in order on one
// stream, each with grid (Grid[i].Eval(T)), Block threads, SharedBytes of
// dynamic shared memory (raising CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
// above 48 KB), and its Params packed at their exact sizes: ParamPtr gets
// the device address of Buffer, ParamI32 gets Value.Eval(T). A kernel with
// SkipIfZeroT is not launched when T = 0. No host synchronisation is needed
// between launches; after the last one, y holds the output and err the
// error word (0 = no error, else an OR of the Err* codes).
type Program struct {
	Layer   string       `json:"layer"`   // schedule.Layer.Name
	Target  string       `json:"target"`  // "sm_80", "sm_90a" or "sm_100a"
	Kernels []Kernel     `json:"kernels"` // in launch order
	Buffers []Buffer     `json:"buffers"` // inputs, outputs and scratch of the kernels
	Module  *llir.Module `json:"-"`       // LLVM IR module holding every kernel
}

// Buffer returns the buffer named name, or nil.
func (p *Program) Buffer(name string) *Buffer {
	for i := range p.Buffers {
		if p.Buffers[i].Name == name {
			return &p.Buffers[i]
		}
	}
	return nil
}

// Build generates the BF16 forward of layer l with schedule s: it validates
// both, emits the routing, dispatch, GEMM and combine kernels into one
// module through the target's GEMM engine, finishes the module
// (ir.Module.Finish: builder errors, then ir.Check), and returns it with its
// launch plan. MXFP8 layers are an error (not built yet).
//
// Inputs (buffer names): x bf16 [T,H]; ids i32 [T,K] + weights f32 [T,K]
// (RoutingIDs) or routing_map u8 [T,E] + probs f32 [T,E] (RoutingMap);
// fc1 bf16 [E,2I,H] and fc2 bf16 [E,H,I] (GroupedWeights) or fc1_table /
// fc2_table u64 [E] device pointers to per-expert [2I,H] / [H,I] matrices
// (PerExpertWeights); fc1_bias f32 [E,2I] and fc2_bias f32 [E,H] (Biases, in
// the FC1 row order); shared_fc1 bf16 [2*S*I_s, H] (gate rows 0..S*I_s-1,
// then up rows), shared_fc2 bf16 [H, S*I_s], shared_gate bf16 [H]
// (SharedGate). Outputs: y bf16 [T,H], err u32 [1].
func Build(l schedule.Layer, s schedule.Schedule) (*Program, error) {
	if err := s.Validate(l); err != nil {
		return nil, err
	}
	if l.Precision != schedule.BF16 {
		return nil, fmt.Errorf("codegen: %s: precision %v is not supported by Build yet (bf16 only)", l.Name, l.Precision)
	}
	eng, err := EngineFor(s.Target)
	if err != nil {
		return nil, err
	}
	d := dims{H: l.Hidden, I: l.Intermediate, E: l.Experts, K: l.TopK, Is: l.SharedWidth(),
		BM1: s.FC1.M, BM2: s.FC2.M, Map: l.Routing == schedule.RoutingMap,
		WeightOnInput: l.RouterWeightOnInput, SharedGate: l.SharedGate}
	vs, hasVariant := s.VariantSchedule()
	if hasVariant {
		if vs.FC1.M != vs.FC2.M {
			return nil, fmt.Errorf("codegen: %s: the GEMM variant's FC1 and FC2 tiles must have the same rows (%d, %d)", l.Name, vs.FC1.M, vs.FC2.M)
		}
		d.BMVariant = vs.FC1.M
	}
	if bms, _, _, _ := d.tileRows(); len(bms) > 2 {
		return nil, fmt.Errorf("codegen: %s: the GEMMs use %d different tile row counts %v; at most 2 are supported", l.Name, len(bms), bms)
	}
	mod := ir.NewModule("moe_" + l.Name)
	prog := &Program{Layer: l.Name, Target: s.Target.String(), Module: mod.IR}
	prog.Buffers = buffers(l, d)

	add := func(k Kernel) { prog.Kernels = append(prog.Kernels, k) }
	add(emitInit(mod, d))
	if d.Map {
		add(emitRoute(mod, d))
	}
	add(emitCount(mod, d))
	add(emitScan(mod, d))
	add(emitPermute(mod, d))
	add(emitGather(mod, d))

	tileOf := func(s schedule.Schedule, t schedule.Tile, gated bool) Tile {
		bn := t.N
		if gated {
			bn /= 2
		}
		return Tile{BM: t.M, BN: bn, BK: t.K, Stages: s.Stages, Warps: s.Warps.MMA,
			ProducerWarps: s.Warps.Producer, EpilogueWarps: s.Warps.Epilogue, Cluster: s.Cluster, Grid: s.GridCTAs}
	}
	tile := func(t schedule.Tile, gated bool) Tile { return tileOf(s, t, gated) }
	bmode := BGrouped
	fc1, fc2 := "fc1", "fc2"
	if l.Storage == schedule.PerExpertWeights {
		bmode, fc1, fc2 = BTable, "fc1_table", "fc2_table"
	}
	gate := GateHalves
	if l.GateUpInterleaved {
		gate = GateInterleaved
	}
	_, list1, list2, listV := d.tileRows()
	tiles1, ntiles1 := tileList(list1)
	tiles2, ntiles2 := tileList(list2)
	type gemm struct {
		spec     GemmSpec
		rowsPerT int64
		bind     map[string]string
		tokens   []launch.TokenRange
	}
	routed := func(suffix string, s schedule.Schedule, t1, n1, t2, n2 string, tokens []launch.TokenRange) []gemm {
		return []gemm{
			{GemmSpec{Name: "moe_fc1" + suffix, N: l.Intermediate, K: l.Hidden, Experts: l.Experts, A: ATiled, B: bmode,
				Epilogue: EpiGated, Gate: gate, Act: activation(l.Activation, l.SwiGLULimit, l.GPTOSSAlpha), Bias: l.Biases,
				Tile: tileOf(s, s.FC1, true)}, int64(l.TopK),
				map[string]string{RoleA: "xs", RoleB: fc1, RoleBias: "fc1_bias", RoleC: "h", RoleTiles: t1, RoleOffsets: "offsets", RoleNumTiles: n1},
				tokens},
			{GemmSpec{Name: "moe_fc2" + suffix, N: l.Hidden, K: l.Intermediate, Experts: l.Experts, A: ATiled, B: bmode,
				Epilogue: EpiStore, Bias: l.Biases, Tile: tileOf(s, s.FC2, false)}, int64(l.TopK),
				map[string]string{RoleA: "h", RoleB: fc2, RoleBias: "fc2_bias", RoleC: "out_rows", RoleTiles: t2, RoleOffsets: "offsets", RoleNumTiles: n2},
				tokens},
		}
	}
	var gemms []gemm
	if hasVariant {
		// The variant runs for T in [lo, hi]; FC1/FC2 for every other T >= 1.
		lo, hi := s.Variant.VariantTokens(l.TopK, l.Experts)
		var base []launch.TokenRange
		if lo > 1 {
			base = append(base, launch.TokenRange{Min: 1, Max: lo - 1})
		}
		base = append(base, launch.TokenRange{Min: hi + 1, Max: launch.MaxTokens})
		tv, nv := tileList(listV)
		gemms = append(routed("", s, tiles1, ntiles1, tiles2, ntiles2, base),
			routed("_mid", vs, tv, nv, tv, nv, []launch.TokenRange{{Min: lo, Max: hi}})...)
	} else {
		gemms = routed("", s, tiles1, ntiles1, tiles2, ntiles2, nil)
	}
	if d.Is > 0 {
		gemms = append(gemms, []gemm{
			{GemmSpec{Name: "moe_shared_fc1", N: d.Is, K: l.Hidden, Experts: 1, A: ADense, B: BGrouped,
				Epilogue: EpiGated, Gate: GateHalves, Act: activation(l.SharedActivation, l.SharedSwiGLULimit, 0),
				Tile: tile(s.FC1, true)}, 1,
				map[string]string{RoleA: "x", RoleB: "shared_fc1", RoleC: "hs"}, nil},
			{GemmSpec{Name: "moe_shared_fc2", N: l.Hidden, K: d.Is, Experts: 1, A: ADense, B: BGrouped,
				Epilogue: EpiStore, Tile: tile(s.FC2, false)}, 1,
				map[string]string{RoleA: "hs", RoleB: "shared_fc2", RoleC: "shared_out"}, nil},
		}...)
	}
	for _, g := range gemms {
		ki, err := eng.GroupedGEMM(mod, g.spec, g.rowsPerT)
		if err != nil {
			return nil, err
		}
		k := Kernel{Name: ki.Name, Block: ki.Block, Grid: ki.Grid, SharedBytes: ki.SharedBytes, SkipIfZeroT: true, Tokens: g.tokens,
			GridPerSM: ki.GridPerSM}
		for _, prm := range ki.Params {
			role := prm.Role
			if prm.Type == ParamTmap && prm.TensorMap != nil {
				role = prm.TensorMap.Operand
			}
			if role == RoleRows {
				v := PerT(1, 0)
				prm.Value = &v
			} else if buf, ok := g.bind[role]; ok {
				prm.Buffer = buf
			} else {
				return nil, fmt.Errorf("codegen: %s: parameter %s has role %q that Build cannot bind", ki.Name, prm.Name, role)
			}
			k.Params = append(k.Params, prm)
		}
		add(k)
	}
	add(emitCombine(mod, d))

	for _, k := range prog.Kernels {
		for _, prm := range k.Params {
			if prm.Buffer != "" && prog.Buffer(prm.Buffer) == nil {
				return nil, fmt.Errorf("codegen: kernel %s parameter %s names buffer %q that the program lacks", k.Name, prm.Name, prm.Buffer)
			}
		}
	}
	if _, err := mod.Finish(); err != nil {
		return nil, fmt.Errorf("codegen: %s: %w", l.Name, err)
	}
	return prog, nil
}

func activation(a schedule.Activation, limit, alpha float64) Activation {
	switch a {
	case schedule.ClampedSwiGLU:
		return Activation{Kind: ActClampedSwiGLU, Limit: limit}
	case schedule.GPTOSS:
		return Activation{Kind: ActGPTOSS, Limit: limit, Alpha: alpha}
	}
	return Activation{Kind: ActSwiGLU}
}

// buffers lists every buffer of the forward of l.
func buffers(l schedule.Layer, d dims) []Buffer {
	H, I, E, K := int64(d.H), int64(d.I), int64(d.E), int64(d.K)
	var bs []Buffer
	add := func(name string, kind BufferKind, dtype string, esize int64, doc string, shape ...Expr) {
		// bytes = esize * product(shape); at most one dimension depends on T.
		bytes := Expr{D: 1}
		c := esize
		var tdim *Expr
		for i := range shape {
			if shape[i].A != 0 {
				tdim = &shape[i]
			} else {
				c *= shape[i].Eval(0)
			}
		}
		if tdim != nil {
			// c*ceil((a*T+b)/d) <= ceil((c*a*T + c*b + c*d)/d).
			bytes.A, bytes.B, bytes.D = tdim.A*c, tdim.B*c, tdim.D
			if tdim.D > 1 {
				bytes.B += c * tdim.D
			}
		} else {
			bytes.B = c
		}
		bs = append(bs, Buffer{Name: name, Kind: kind, DType: dtype, Shape: shape, Bytes: bytes, Doc: doc})
	}
	T := PerT(1, 0)
	TK := PerT(K, 0)
	add("x", BufInput, "bf16", 2, "tokens", T, Const(H))
	if d.Map {
		add("routing_map", BufInput, "u8", 1, "dense routing map (nonzero = routed)", T, Const(E))
		add("probs", BufInput, "f32", 4, "routing probabilities", T, Const(E))
		add("ids", BufScratch, "i32", 4, "fixed-width expert ids (-1 = none), from moe_route", T, Const(K))
		add("weights", BufScratch, "f32", 4, "fixed-width routing weights, from moe_route", T, Const(K))
	} else {
		add("ids", BufInput, "i32", 4, "expert ids (-1 = none)", T, Const(K))
		add("weights", BufInput, "f32", 4, "routing weights", T, Const(K))
	}
	fc1Rows := "gate rows 0..I-1, then up rows"
	if l.GateUpInterleaved {
		fc1Rows = "gate and up rows interleaved: gate even, up odd"
	}
	if l.Storage == schedule.PerExpertWeights {
		add("fc1_table", BufInput, "u64", 8, "device pointers to each expert's FC1 [2I,H] bf16 ("+fc1Rows+")", Const(E))
		add("fc2_table", BufInput, "u64", 8, "device pointers to each expert's FC2 [H,I] bf16", Const(E))
	} else {
		add("fc1", BufInput, "bf16", 2, "FC1 weights ("+fc1Rows+")", Const(E), Const(2*I), Const(H))
		add("fc2", BufInput, "bf16", 2, "FC2 weights", Const(E), Const(H), Const(I))
	}
	if l.Biases {
		add("fc1_bias", BufInput, "f32", 4, "FC1 bias (FC1 row order)", Const(E), Const(2*I))
		add("fc2_bias", BufInput, "f32", 4, "FC2 bias", Const(E), Const(H))
	}
	if d.Is > 0 {
		Is := int64(d.Is)
		add("shared_fc1", BufInput, "bf16", 2, "shared-expert FC1 (gate rows, then up rows)", Const(2*Is), Const(H))
		add("shared_fc2", BufInput, "bf16", 2, "shared-expert FC2", Const(H), Const(Is))
		if d.SharedGate {
			add("shared_gate", BufInput, "bf16", 2, "shared-expert output gate vector", Const(H))
		}
	}
	add("y", BufOutput, "bf16", 2, "layer output", T, Const(H))
	add("err", BufOutput, "u32", 4, "error word: OR of ErrBadExpertID (1), ErrTooManyRoute (2)", Const(1))
	add("counts", BufScratch, "i32", 4, "slots per expert", Const(E))
	add("offsets", BufScratch, "i32", 4, "first row of each expert; offsets[E] = routed rows", Const(E+1))
	maxTiles := func(bm int64) Expr { return Expr{A: K, B: E * bm, D: bm, Min: 1} }
	bms, l1, l2, lv := d.tileRows()
	for i, bm := range bms {
		var users []string
		for _, u := range []struct {
			list int
			name string
		}{{l1, "FC1"}, {l2, "FC2"}, {lv, "the GEMM variant"}} {
			if u.list == i {
				users = append(users, u.name)
			}
		}
		tl, nt := tileList(i)
		who := strings.Join(users, " and ")
		add(tl, BufScratch, "i32", 4, fmt.Sprintf("%s tile list (%d rows per tile): (expert, first row) pairs", who, bm), maxTiles(int64(bm)), Const(2))
		add(nt, BufScratch, "i32", 4, who+" tile count", Const(1))
	}
	add("row_of_slot", BufScratch, "i32", 4, "row of slot t*K+k (-1 = none)", TK)
	add("src_slot", BufScratch, "i32", 4, "slot of each row", TK)
	add("xs", BufScratch, "bf16", 2, "routed rows of x grouped by expert", TK, Const(H))
	add("h", BufScratch, "bf16", 2, "activations of the routed rows", TK, Const(I))
	add("out_rows", BufScratch, "bf16", 2, "unweighted expert outputs per routed row", TK, Const(H))
	if d.Is > 0 {
		add("hs", BufScratch, "bf16", 2, "shared-expert activations", T, Const(int64(d.Is)))
		add("shared_out", BufScratch, "bf16", 2, "shared-expert output", T, Const(H))
	}
	return bs
}
