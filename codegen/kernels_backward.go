package codegen

import (
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/moe"
)

// The PerOp kernels of the backward's row-wise ops (moe/ops_backward.go).
// Every sum is a fixed-order fp32 reduction (blockSumF32): no atomics.

// rawRow8 loads chunk c of 8 elements of row r (width elements per row)
// of a bf16 or f32 buffer as it is in memory: one <4 x i32> of bf16 pairs,
// or two <4 x float> (widen8 widens it). Loads of several chunks issued
// before any is widened are in flight together.
func (b *Builder) rawRow8(d moe.DType, base, r, c value.Value, width int64) []value.Value {
	if d == moe.F32 {
		p := b.rowPtr(base, r, c, width, 4)
		return []value.Value{b.LoadAt(ir.Vec(4, ir.F32), p, 16), b.LoadAt(ir.Vec(4, ir.F32), b.ByteOffsetC(p, 16), 16)}
	}
	return []value.Value{b.LoadAt(ir.Vec(4, ir.I32), b.rowPtr(base, r, c, width, 2), 16)}
}

// rawVecs is the number of vectors of a rawRow8 chunk of dtype d.
func rawVecs(d moe.DType) int {
	if d == moe.F32 {
		return 2
	}
	return 1
}

// rawUndef is a rawRow8 chunk of dtype d of undefined values (IfVals'
// default where a row is not loaded).
func rawUndef(d moe.DType) []value.Value {
	if d == moe.F32 {
		return []value.Value{ir.Undef(ir.Vec(4, ir.F32)), ir.Undef(ir.Vec(4, ir.F32))}
	}
	return []value.Value{ir.Undef(ir.Vec(4, ir.I32))}
}

// widen8 returns the 8 values of a rawRow8 chunk of dtype d as f32.
func (b *Builder) widen8(d moe.DType, raw []value.Value) []value.Value {
	if d != moe.F32 {
		return b.bf16x8(raw[0])
	}
	out := make([]value.Value, 0, 8)
	for _, v := range raw {
		for i := 0; i < 4; i++ {
			out = append(out, b.ExtractElement(v, i))
		}
	}
	return out
}

// loadRow8 loads chunk c of 8 elements of row r (width elements per row)
// of a bf16 or f32 buffer as f32.
func (b *Builder) loadRow8(d moe.DType, base, r, c value.Value, width int64) []value.Value {
	return b.widen8(d, b.rawRow8(d, base, r, c, width))
}

// rawGateUp8 loads the two rawRow8 chunks that hold the gate and up values
// of columns 8c..8c+7 of row r of a [rows, 2N] FC1 output (bf16 or f32)
// in GateUp order, the first then the second (gateUp8 widens them).
func (b *Builder) rawGateUp8(order moe.GateUp, d moe.DType, base, r, c value.Value, N int64) []value.Value {
	c0, c1 := c, b.AddI(c, N/8)
	if order == moe.GateUpInterleaved {
		c0 = b.MulI(c, 2)
		c1 = b.AddI(c0, 1)
	}
	return append(b.rawRow8(d, base, r, c0, 2*N), b.rawRow8(d, base, r, c1, 2*N)...)
}

// gateUp8 returns the gate and up values, as f32, of rawGateUp8's chunks.
func (b *Builder) gateUp8(order moe.GateUp, d moe.DType, raw []value.Value) (g, u []value.Value) {
	n := rawVecs(d)
	first, second := b.widen8(d, raw[:n]), b.widen8(d, raw[n:])
	if order == moe.GateUpInterleaved {
		pair := append(first, second...)
		for i := 0; i < 8; i++ {
			g, u = append(g, pair[2*i]), append(u, pair[2*i+1])
		}
		return g, u
	}
	return first, second
}

// gateUpRow8 loads the gate and up values of columns 8c..8c+7 of row r of
// a [rows, 2N] FC1 output (bf16 or f32) in GateUp order, as f32.
func (b *Builder) gateUpRow8(order moe.GateUp, d moe.DType, base, r, c value.Value, N int64) (g, u []value.Value) {
	return b.gateUp8(order, d, b.rawGateUp8(order, d, base, r, c, N))
}

// ActivateGrad emits dL/dg and dL/du of h = act(g, u) for the upstream
// gradient dh, in fp32: silu'(g) = s + g·s·(1-s) with s = sigmoid(g), and
// for gpt-oss d/dg[g·sigmoid(αg)] = s + α·g·s·(1-s) with s = sigmoid(αg)
// (the derivatives of schedule.Activation's formulas); a clamp cuts the
// gradient of the input it clamped (g > L, or |u| > L).
func ActivateGrad(b *Builder, a Activation, g, u, dh value.Value) (dg, du value.Value) {
	gc, uc := g, u
	l := ir.Float32(a.Limit)
	if a.Kind != ActSwiGLU {
		gc = b.FMin(g, l)
		uc = b.FMax(b.FMin(u, l), ir.Float32(-a.Limit))
	}
	one := ir.Float32(1)
	alpha, up := ir.Float32(1), uc
	if a.Kind == ActGPTOSS {
		alpha, up = ir.Float32(a.Alpha), b.FAdd(uc, one)
	}
	s := b.Sigmoid(b.FMul(gc, alpha))
	slope := b.FAdd(s, b.FMul(b.FMul(gc, alpha), b.FMul(s, b.FSub(one, s))))
	dg = b.FMul(b.FMul(slope, up), dh)
	du = b.FMul(b.FMul(gc, s), dh)
	if a.Kind != ActSwiGLU {
		zero := ir.Float32(0)
		dg = b.Select(b.FCmp(enum.FPredOGT, g, l), zero, dg)
		du = b.Select(b.FCmp(enum.FPredOGT, b.FAbs(u), l), zero, du)
	}
	return dg, du
}

// rowGrid is one block per row: T·K rows (dispatched) or T.
func rowGrid(perT int) [3]Expr { return grid1(Expr{A: int64(perT), D: 1, Min: 1}) }

// emitGateSigmoid: g[t] = sigmoid(x[t]·gate), one block per token.
func emitGateSigmoid(m *ir.Module, d dims, op moe.GateSigmoid) Kernel {
	b, k := opKernel(m, op, utilThreads, false)
	t, tid := b.BlockIdx(ir.X), b.ThreadIdx(ir.X)
	g := b.sharedGateSigmoid(b.Param("x"), b.Param("gate"), t, tid, int64(d.H))
	b.If(b.ICmp(enum.IPredEQ, tid, ir.Int32(0)), func() { b.StoreAt(g, b.elemPtr(b.Param("g"), t, 4), 4) })
	b.Ret(nil)
	k.SharedBytes, k.SkipIfZeroT, k.Grid = 8*4, true, rowGrid(1)
	return k
}

// emitActivate: one block per dispatched row r (rows past offsets[E]
// exit), h[r] = act(gu[r]) with the gated epilogue's Activate, 8 columns
// per thread per step (16-byte accesses), stored as h's dtype (bf16 with
// the epilogue's rounding, or f32).
func emitActivate(m *ir.Module, d dims, op moe.Activate) Kernel {
	b, k := opKernel(m, op, utilThreads, false)
	r, tid := b.BlockIdx(ir.X), b.ThreadIdx(ir.X)
	total := b.LoadAt(ir.I32, b.ByteOffsetC(b.Param("offsets"), 4*int64(d.E)), 4)
	b.ReturnIfUniform(b.ICmp(enum.IPredSGE, r, total))
	N, act := int64(op.N), activation(op.Act)
	b.Loop(tid, ir.Int32(N/8), ir.Int32(utilThreads), nil, func(c value.Value, _ []value.Value) []value.Value {
		g, u := b.gateUpRow8(op.GateUp, moe.F32, b.Param("gu"), r, c, N)
		h := make([]value.Value, 8)
		for i := range h {
			h[i] = Activate(b, act, g[i], u[i])
		}
		if op.H.DType == moe.F32 {
			StoreF32(b, b.rowPtr(b.Param("h"), r, c, N, 4), h)
		} else {
			StoreBF16(b, b.rowPtr(b.Param("h"), r, c, N, 2), h)
		}
		return nil
	})
	b.Ret(nil)
	k.SkipIfZeroT, k.Grid = true, rowGrid(d.K)
	return k
}

// emitActGrad: rows of the FC1 output, each on G threads of the block
// (actGradShape: one row per block of utilThreads per-op; in the
// persistent lowering several rows per block, P per group of G threads,
// their loads issued together, since a virtual block runs alone on its
// SM). Rows past offsets[E] (or T) do nothing. For row r, with s the row
// scale, h = act(gu[r]) recomputed in fp32,
//
//	dgu[r] = bf16(act'(gu[r]) · s·dh[r]), hs[r] = bf16(s·h), dot[r] = <dh[r], h>
//
// dot in a fixed order (with MX over the MXFP8 values of h: each 32-wide
// block is 4 consecutive threads' 8 columns, mxValues8): thread j of a
// row's G sums chunks j, j+G, ... of 8 columns, then its warp's lanes by
// butterfly, then the row's warps in order from +0, then +0 once for each
// warp short of utilThreads/32: the order of a block of utilThreads
// threads (whose idle warps add +0), so every shape gives the same bits.
// 16-byte accesses.
func emitActGrad(m *ir.Module, d dims, op moe.ActGrad) Kernel {
	N := int64(op.N)
	G, R, P := actGradShape(d, op)
	RP := R * P
	perT := int64(1)
	if op.Offsets != nil {
		perT = int64(d.K)
	}
	b, k := opKernel(m, op, int(G*R), RP > 1 && op.Offsets == nil)
	tid := b.ThreadIdx(ir.X)
	grp, lt := value.Value(ir.Int32(0)), tid // the row group and the thread in it
	if R > 1 {
		grp, lt = b.UDiv(tid, ir.Int32(G)), b.URem(tid, ir.Int32(G))
	}
	rows := make([]value.Value, P)
	live := make([]value.Value, P) // nil: the row is below the bound
	for j := range rows {
		rows[j] = b.AddI(b.Add(b.MulI(b.BlockIdx(ir.X), RP), b.MulI(grp, P)), int64(j))
	}
	var bound value.Value
	switch {
	case op.Offsets != nil:
		bound = b.LoadAt(ir.I32, b.ByteOffsetC(b.Param("offsets"), 4*int64(d.E)), 4)
	case RP > 1:
		bound = b.Param("T")
	}
	if bound != nil && RP == 1 {
		b.ReturnIfUniform(b.ICmp(enum.IPredSGE, rows[0], bound))
	} else if bound != nil {
		for j, r := range rows {
			live[j] = b.ICmp(enum.IPredSLT, r, bound)
		}
	}
	// when runs then for a row below the bound, else gives defaults.
	when := func(j int, defaults []value.Value, then func() []value.Value) []value.Value {
		if live[j] == nil {
			return then()
		}
		return b.IfVals(live[j], defaults, then)
	}
	scale := make([]value.Value, P)
	switch {
	case op.Weights != nil:
		slots := make([]value.Value, P)
		for j, r := range rows {
			slots[j] = when(j, []value.Value{ir.Int32(0)}, func() []value.Value {
				return []value.Value{b.LoadAt(ir.I32, b.elemPtr(b.Param("src_slot"), r, 4), 4)}
			})[0]
		}
		for j := range rows {
			scale[j] = when(j, []value.Value{ir.Float32(0)}, func() []value.Value {
				return []value.Value{b.LoadAt(ir.F32, b.elemPtr(b.Param("weights"), slots[j], 4), 4)}
			})[0]
		}
	case op.Scale != nil:
		for j, r := range rows {
			scale[j] = when(j, []value.Value{ir.Float32(0)}, func() []value.Value {
				return []value.Value{b.LoadAt(ir.F32, b.elemPtr(b.Param("scale"), r, 4), 4)}
			})[0]
		}
	default:
		for j := range scale {
			scale[j] = ir.Float32(1)
		}
	}
	act := activation(op.Act)
	gus, dhs := 2*rawVecs(op.GU.DType), rawVecs(op.DH.DType)
	zeros := make([]value.Value, P)
	for j := range zeros {
		zeros[j] = ir.Float32(0)
	}
	// a row's loads as when gives them for a row past the bound
	undef := append(rawUndef(op.GU.DType), rawUndef(op.GU.DType)...)
	undef = append(undef, rawUndef(op.DH.DType)...)
	if op.FC1X != nil {
		undef = append(append(undef, rawUndef(moe.F32)...), rawUndef(moe.F32)...)
	}
	parts := b.Loop(lt, ir.Int32(N/8), ir.Int32(G), zeros, func(c value.Value, acc []value.Value) []value.Value {
		// every row's chunks before the first is widened: one memory
		// latency per step for the P rows
		raws := make([][]value.Value, P)
		for j, r := range rows {
			raws[j] = when(j, undef, func() []value.Value {
				raw := b.rawGateUp8(op.GateUp, op.GU.DType, b.Param("gu"), r, c, N)
				raw = append(raw, b.rawRow8(op.DH.DType, b.Param("dh"), r, c, N)...)
				if op.FC1X != nil {
					raw = append(raw, b.rawGateUp8(op.GateUp, moe.F32, b.Param("fc1x"), r, c, N)...)
				}
				return raw
			})
		}
		next := make([]value.Value, P)
		for j, r := range rows {
			next[j] = when(j, acc[j:j+1], func() []value.Value {
				raw := raws[j]
				g, u := b.gateUp8(op.GateUp, op.GU.DType, raw[:gus])
				dh := b.widen8(op.DH.DType, raw[gus:gus+dhs])
				var xg, xu []value.Value // FC1·x: the dot is <dgu, FC1·x>
				if op.FC1X != nil {
					xg, xu = b.gateUp8(op.GateUp, moe.F32, raw[gus+dhs:])
				}
				return []value.Value{b.actGradChunk(op, act, r, c, scale[j], g, u, dh, xg, xu, acc[j])}
			})[0]
		}
		return next
	})
	// The dots: each warp's lanes, then the row's warps in order.
	lane, warp := b.LaneWarp()
	smem := b.DynSmem()
	for j := range parts {
		x := b.WarpSum(parts[j])
		b.If(b.ICmp(enum.IPredEQ, lane, ir.Int32(0)), func() {
			b.StoreAt(x, b.elemPtr(smem, b.AddI(b.MulI(warp, P), int64(j)), 4), 4)
		})
	}
	b.SyncThreads()
	W := G / 32
	for j, r := range rows {
		dot := b.actGradDot(W, func(w int64) value.Value {
			slot := b.AddI(b.MulI(b.AddI(b.MulI(grp, W), w), P), int64(j))
			return b.LoadVolatileAt(ir.F32, b.elemPtr(smem, slot, 4), 4)
		})
		store := b.ICmp(enum.IPredEQ, lt, ir.Int32(0))
		if live[j] != nil {
			store = b.And(store, live[j])
		}
		b.If(store, func() { b.StoreAt(dot, b.elemPtr(b.Param("dot"), r, 4), 4) })
	}
	b.Ret(nil)
	k.SharedBytes, k.SkipIfZeroT = int(4*max(utilThreads/32, R*W*P)), true
	k.Grid = grid1(Expr{A: perT, D: RP, Min: 1})
	return k
}

// actGradShape is the shape of emitActGrad's blocks for op's rows of N
// columns: G threads per row (a warp per 32 chunks of 8 columns, at most
// utilThreads, whose order of the dot every G keeps), R groups of G
// threads per block, P rows per group. Per-op (d.actGradThreads 0): one
// row per block of utilThreads. In the persistent lowering: as many
// groups as d.actGradThreads hold, persistActGradRows rows each where one
// step's values for them (per row, 8 columns of gate, up and upstream
// grad in f32, and of FC1·x's gate and up with op.FC1X) fit in the
// phase's registers less 64 for the rest (d.phaseRegs), else
// persistActGradRowsMin: four rows of qwen3-30b-a3b (24 values each) fit
// the 168 registers of a block of 384 threads, not the 128 of one of 512,
// and four of llama4-scout (40 each, with FC1·x) spill in 168 (ptxas
// 12.9: 284 bytes). At least one group, so a G above d.actGradThreads
// makes a block of G threads (never on sm_90a, whose GEMM blocks have 256
// threads or more: a phase larger than the persistent kernel's block is
// refused by planPersistent).
func actGradShape(d dims, op moe.ActGrad) (G, R, P int64) {
	N := int64(op.N)
	if d.actGradThreads == 0 {
		return utilThreads, 1, 1
	}
	G = actGradRowThreads(N)
	R = max(1, int64(d.actGradThreads)/G)
	per := int64(8 * 3)
	if op.FC1X != nil {
		per += 8 * 2
	}
	if !fitsPhaseRegs(d, persistActGradRows*per, 64) {
		return G, R, persistActGradRowsMin
	}
	return G, R, persistActGradRows
}

// actGradRowThreads is G, the threads of a row of N columns in the
// persistent act_grad (actGradShape): a warp per 32 chunks of 8 columns,
// at most utilThreads.
func actGradRowThreads(N int64) int64 {
	return min(utilThreads, 32*((N/8+31)/32))
}

// actGradDot is a row's dot in act_grad's fixed order (emitActGrad): +0,
// then part(w) of each of the row's W warps in order, then +0 for each
// warp short of utilThreads/32, as a block of utilThreads threads (whose
// idle warps add +0) sums it; emitActGradBulk keeps it for the same bits.
func (b *Builder) actGradDot(W int64, part func(w int64) value.Value) value.Value {
	var dot value.Value = ir.Float32(0)
	for w := int64(0); w < utilThreads/32; w++ {
		v := value.Value(ir.Float32(0)) // a warp short of a block of utilThreads
		if w < W {
			v = part(w)
		}
		dot = b.FAdd(dot, v)
	}
	return dot
}

// fitsPhaseRegs reports whether regs registers per thread (one step's
// values of a row-wise phase's rows or tokens, issued together) fit the
// persistent phase's registers (d.phaseRegs) less reserve for the rest
// of its code.
func fitsPhaseRegs(d dims, regs, reserve int64) bool {
	return regs <= int64(d.phaseRegs)-reserve
}

// actGradChunk computes act_grad's chunk c (8 columns) of row r from its
// gate, up and upstream values (g, u, dh; xg, xu: FC1·x, or nil) and row
// scale s: stores hs and dgu, and returns acc plus the chunk's terms of
// the dot, in column order.
func (b *Builder) actGradChunk(op moe.ActGrad, act Activation, r, c, s value.Value, g, u, dh, xg, xu []value.Value, acc value.Value) value.Value {
	N := int64(op.N)
	a := acc
	dg, du, hs := make([]value.Value, 8), make([]value.Value, 8), make([]value.Value, 8)
	var hMX, hq []value.Value // with MX: h of the 8 columns, ahead, and its MXFP8 values
	if op.MX {
		for i := 0; i < 8; i++ {
			hMX = append(hMX, Activate(b, act, g[i], u[i]))
		}
		hq = b.mxValues8(hMX)
	}
	for i := 0; i < 8; i++ {
		var h, hd value.Value
		if op.MX {
			h, hd = hMX[i], hq[i]
		} else {
			h = Activate(b, act, g[i], u[i])
			hd = h
		}
		hs[i] = b.FMul(s, h)
		dg[i], du[i] = ActivateGrad(b, act, g[i], u[i], b.FMul(s, dh[i]))
		if xg != nil {
			a = b.FMA(du[i], xu[i], b.FMA(dg[i], xg[i], a))
		} else {
			a = b.FMA(dh[i], hd, a)
		}
	}
	StoreBF16(b, b.rowPtr(b.Param("hs"), r, c, N, 2), hs)
	if op.GateUp == moe.GateUpInterleaved {
		var lo, hi []value.Value
		for i := 0; i < 4; i++ {
			lo, hi = append(lo, dg[i], du[i]), append(hi, dg[4+i], du[4+i])
		}
		StoreBF16(b, b.rowPtr(b.Param("dgu"), r, b.MulI(c, 2), 2*N, 2), lo)
		StoreBF16(b, b.rowPtr(b.Param("dgu"), r, b.AddI(b.MulI(c, 2), 1), 2*N, 2), hi)
	} else {
		StoreBF16(b, b.rowPtr(b.Param("dgu"), r, c, 2*N, 2), dg)
		StoreBF16(b, b.rowPtr(b.Param("dgu"), r, b.AddI(c, N/8), 2*N, 2), du)
	}
	return a
}

// emitCombineGrad: one block per token t, or d.combineGradPerBlock tokens
// per block where set (their loads issued together; the kernel then takes
// T, and a token at or past it reads the block's first token's rows again
// and stores nothing), in this fixed order:
//
//	dz[t] = shared_dot[t]·g(1-g)                                 (shared gate)
//	dw[t,k] = dot[row] (+ <dy[t], fc2_bias[e]> with FC2 biases)  (0 without a route)
//	dx[t] = bf16(sum_k v_k·dxs[row_k] + shared_dx[t] + dz[t]·gate)
//
// v_k = weights[t,k] when the weight scaled the input, else 1. Loads that
// do not depend on each other are issued together: every slot's row, then
// every routed slot's dot and weight, then in each step every routed
// slot's dxs chunk, so a block waits for memory a few times per token,
// not K times for each (a block that runs alone on its SM, as a virtual
// block of the persistent kernel does, is bound by that latency).
func emitCombineGrad(m *ir.Module, d dims, op moe.CombineGrad) Kernel {
	R := combineGradTokens(d, op)
	b, k := opKernel(m, op, utilThreads, R > 1)
	tid := b.ThreadIdx(ir.X)
	H, K := int64(d.H), int64(d.K)
	smem := b.DynSmem()
	first := b.ICmp(enum.IPredEQ, tid, ir.Int32(0))
	// The block's tokens (t0 read again past T, its stores skipped); thread
	// 0 stores the per-token words.
	ts, live := b.blockTokens(R)
	stores := []value.Value{first}
	for _, l := range live[1:] {
		stores = append(stores, b.And(first, l))
	}
	dz := make([]value.Value, R)
	if op.DZ != nil {
		for j, t := range ts {
			g := b.LoadAt(ir.F32, b.elemPtr(b.Param("g"), t, 4), 4)
			sd := b.LoadAt(ir.F32, b.elemPtr(b.Param("shared_dot"), t, 4), 4)
			dz[j] = b.FMul(sd, b.FMul(g, b.FSub(ir.Float32(1), g)))
			b.If(stores[j], func() { b.StoreAt(dz[j], b.elemPtr(b.Param("dz"), t, 4), 4) })
		}
	}
	rows, routed := make([][]value.Value, R), make([][]value.Value, R)
	for j, t := range ts { // every slot's row first
		for kk := int64(0); kk < K; kk++ {
			r := b.LoadAt(ir.I32, b.elemPtr(b.Param("row_of_slot"), b.AddI(b.MulI(t, K), kk), 4), 4)
			rows[j], routed[j] = append(rows[j], r), append(routed[j], b.ICmp(enum.IPredSGE, r, ir.Int32(0)))
		}
	}
	scale, dw := make([][]value.Value, R), make([][]value.Value, R)
	for j, t := range ts { // every routed slot's dot and weight
		for kk := int64(0); kk < K; kk++ {
			s := b.AddI(b.MulI(t, K), kk)
			dw[j] = append(dw[j], b.IfVals(routed[j][kk], []value.Value{ir.Float32(0)}, func() []value.Value {
				return []value.Value{b.LoadAt(ir.F32, b.elemPtr(b.Param("dot"), rows[j][kk], 4), 4)}
			})[0])
			scale[j] = append(scale[j], ir.Float32(1))
			if op.WeightOnInput {
				scale[j][kk] = b.IfVals(routed[j][kk], []value.Value{ir.Float32(0)}, func() []value.Value {
					return []value.Value{b.LoadAt(ir.F32, b.elemPtr(b.Param("weights"), s, 4), 4)}
				})[0]
			}
		}
	}
	for j, t := range ts {
		for kk := int64(0); kk < K; kk++ {
			s := b.AddI(b.MulI(t, K), kk)
			if op.FC2Bias != nil {
				dw[j][kk] = b.FAdd(dw[j][kk], b.combineGradBias(t, s, routed[j][kk], H, smem))
			}
			v := dw[j][kk]
			b.If(stores[j], func() { b.StoreAt(v, b.elemPtr(b.Param("dw"), s, 4), 4) })
		}
	}
	b.Loop(tid, ir.Int32(H/8), ir.Int32(utilThreads), nil, func(c value.Value, _ []value.Value) []value.Value {
		// load every routed slot's chunk, of every token of the block,
		// before the first sum: one memory latency per step
		raws := make([][][]value.Value, R)
		for j := range ts {
			for kk := int64(0); kk < K; kk++ {
				raws[j] = append(raws[j], b.IfVals(routed[j][kk], rawUndef(op.DXS.DType), func() []value.Value {
					return b.rawRow8(op.DXS.DType, b.Param("dxs"), rows[j][kk], c, H)
				}))
			}
		}
		var gv []value.Value // the shared gate's chunk, every token's
		if op.DZ != nil {
			gv = b.loadBF16x8(b.rowPtr(b.Param("gate"), ir.Int32(0), c, H, 2))
		}
		for j, t := range ts {
			acc := make([]value.Value, 8)
			for i := range acc {
				acc[i] = ir.Float32(0)
			}
			for kk := int64(0); kk < K; kk++ {
				v := scale[j][kk]
				acc = b.IfVals(routed[j][kk], acc, func() []value.Value {
					dxs := b.widen8(op.DXS.DType, raws[j][kk])
					n := make([]value.Value, 8)
					for i := range n {
						n[i] = b.FMA(v, dxs[i], acc[i])
					}
					return n
				})
			}
			if op.SharedDX != nil {
				sdx := b.loadRow8(op.SharedDX.DType, b.Param("shared_dx"), t, c, H)
				for i := range acc {
					acc[i] = b.FAdd(acc[i], sdx[i])
				}
			}
			if dz[j] != nil {
				for i := range acc {
					acc[i] = b.FMA(dz[j], gv[i], acc[i])
				}
			}
			b.ifLive(live[j], func() { StoreBF16(b, b.rowPtr(b.Param("dx"), t, c, H, 2), acc) })
		}
		return nil
	})
	b.Ret(nil)
	k.SharedBytes, k.SkipIfZeroT = 8*4, true
	k.Grid = grid1(Expr{A: 1, D: R, Min: 1})
	return k
}

// combineGradTokens is the tokens per block of emitCombineGrad: one
// per-op; in the persistent lowering d.combineGradPerBlock where one
// step's loads for that many tokens (each token's K dxs chunks, its
// shared dx chunk and the shared gate's, 8 columns each) fit in the
// phase's registers less 40 for the rest (d.phaseRegs), else one: two
// tokens of qwen3-30b-a3b (K = 8, f32 dxs: 64 registers each) fit the
// 168 registers of a block of 384 threads and spill in the 128 of one of
// 512 (ptxas 12.9: 232 bytes), as two of qwen2-57b-a14b (its shared
// expert's and gate's chunks besides) do in 168 (32 bytes).
func combineGradTokens(d dims, op moe.CombineGrad) int64 {
	R := int64(max(1, d.combineGradPerBlock))
	if R == 1 {
		return 1
	}
	per := int64(d.K) * 4 * int64(rawVecs(op.DXS.DType))
	if op.SharedDX != nil {
		per += 4 * int64(rawVecs(op.SharedDX.DType))
	}
	if op.DZ != nil {
		per += 4 // the gate's 8 bf16
	}
	if !fitsPhaseRegs(d, R*per, 40) {
		return 1
	}
	return R
}

// combineGradBias is <dy[t], fc2_bias[e]> of slot s (routed: whether it
// has a row; e its expert), a block reduction over the hidden size
// (blockSumF32: every thread gets it), 0 without a route.
func (b *Builder) combineGradBias(t, s, routed value.Value, H int64, smem value.Value) value.Value {
	tid := b.ThreadIdx(ir.X)
	part := b.Loop(tid, ir.Int32(H/8), ir.Int32(utilThreads), []value.Value{ir.Float32(0)}, func(c value.Value, acc []value.Value) []value.Value {
		return b.IfVals(routed, acc, func() []value.Value {
			e := b.LoadAt(ir.I32, b.elemPtr(b.Param("ids"), s, 4), 4)
			x, y := b.loadBF16x8(b.rowPtr(b.Param("dy"), t, c, H, 2)), b.loadRow8(moe.F32, b.Param("fc2_bias"), e, c, H)
			a := acc[0]
			for i := range x {
				a = b.FMA(x[i], y[i], a)
			}
			return []value.Value{a}
		})
	})[0]
	return b.blockSumF32(smem, part)
}

// emitScatterProbs: dprobs[t, e] = dw[t,k] for the slot k routed to e, else
// 0; one block per token, threads over the experts (no two slots of a
// routing-map row share an expert).
func emitScatterProbs(m *ir.Module, d dims, op moe.ScatterProbs) Kernel {
	b, k := opKernel(m, op, utilThreads, false)
	t, tid := b.BlockIdx(ir.X), b.ThreadIdx(ir.X)
	K, E := int64(d.K), int64(d.E)
	ids, dws := make([]value.Value, K), make([]value.Value, K)
	for kk := int64(0); kk < K; kk++ {
		s := b.AddI(b.MulI(t, K), kk)
		ids[kk] = b.LoadAt(ir.I32, b.elemPtr(b.Param("ids"), s, 4), 4)
		dws[kk] = b.LoadAt(ir.F32, b.elemPtr(b.Param("dw"), s, 4), 4)
	}
	b.Loop(tid, ir.Int32(E), ir.Int32(utilThreads), nil, func(e value.Value, _ []value.Value) []value.Value {
		var v value.Value = ir.Float32(0)
		for kk := range ids {
			v = b.Select(b.ICmp(enum.IPredEQ, ids[kk], e), dws[kk], v)
		}
		b.StoreAt(v, b.elemPtr(b.Param("dprobs"), b.Add(b.MulI(t, E), e), 4), 4)
		return nil
	})
	b.Ret(nil)
	k.SkipIfZeroT, k.Grid = true, rowGrid(1)
	return k
}
