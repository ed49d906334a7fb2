package codegen

import (
	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// dims are the compile-time sizes of the routing and dispatch kernels.
type dims struct {
	H, I, E, K    int
	Is            int  // total shared intermediate S*I_s (0: no shared expert)
	BM1, BM2      int  // row tiles of the FC1 / FC2 grouped GEMMs
	Map           bool // dense routing map input
	WeightOnInput bool // the routing weight scales the expert input (Llama 4)
	SharedGate    bool // sigmoid output gate on the shared expert
}

const (
	utilThreads   = 256 // threads of the routing / dispatch / combine kernels
	permuteSlots  = 8   // slots per thread per pass of moe_permute
	gatherRows    = 8   // rows per block of moe_gather (one warp each)
	routeTokens   = 8   // tokens per block of moe_route (one warp each)
	scanScratchB  = 8 * 3 * 4
	countPerBlock = utilThreads
)

func p(name string) *llir.Param  { return llir.NewParam(name, GPtr) }
func pi(name string) *llir.Param { return llir.NewParam(name, I32) }

// ptrParam / i32Param build plan parameters.
func ptrParam(name, buffer string) Param {
	return Param{Name: name, Type: ParamPtr, Size: 8, Buffer: buffer}
}
func tParam(name string, a int64) Param {
	v := PerT(a, 0)
	return Param{Name: name, Type: ParamI32, Size: 4, Value: &v}
}

// elemPtr is base + i*size bytes.
func (b *Builder) elemPtr(base, i value.Value, size int64) value.Value {
	return b.GEP(base, b.MulI(b.Wide(i), size))
}

// emitInit: zero counts[E] and the error word. Grid 1, 256 threads.
func emitInit(m *llir.Module, d dims) Kernel {
	b := NewKernel(m, "moe_init", utilThreads, p("counts"), p("err"))
	tid := b.Tid()
	b.Loop(tid, I32c(int64(d.E)), I32c(utilThreads), nil, func(i value.Value, _ []value.Value) []value.Value {
		b.Store(I32c(0), b.elemPtr(b.Param("counts"), i, 4), 4)
		return nil
	})
	b.If(b.Cmp("eq", tid, I32c(0)), func() { b.Store(I32c(0), b.Param("err"), 4) })
	b.Ret()
	return Kernel{Name: "moe_init", Block: utilThreads, Grid: [3]Expr{Const(1), Const(1), Const(1)},
		Params: []Param{ptrParam("counts", "counts"), ptrParam("err", "err")}}
}

// emitRoute: dense routing map [T, E] u8 + probs [T, E] f32 → ids [T, K]
// i32 (increasing expert order, -1 padding) and weights [T, K] f32 (0
// padding). A row with more than K routes keeps the first K and sets
// ErrTooManyRoute. One warp per token.
func emitRoute(m *llir.Module, d dims) Kernel {
	b := NewKernel(m, "moe_route", utilThreads, p("map"), p("probs"), p("ids"), p("weights"), p("err"), pi("T"))
	lane, warp := b.LaneWarp()
	t := b.Add(b.MulI(b.Ctaid("x"), routeTokens), warp)
	b.ReturnIf(b.Cmp("sge", t, b.Param("T")))
	E, K := int64(d.E), int64(d.K)
	ltMask := b.Sub(b.Shl(I32c(1), lane), I32c(1))
	rowMap := b.GEP(b.Param("map"), b.MulI(b.Wide(t), E))
	rowProb := b.GEP(b.Param("probs"), b.MulI(b.Wide(t), 4*E))
	ids := b.GEP(b.Param("ids"), b.MulI(b.Wide(t), 4*K))
	ws := b.GEP(b.Param("weights"), b.MulI(b.Wide(t), 4*K))
	res := b.Loop(I32c(0), I32c(E), I32c(32), []value.Value{I32c(0)}, func(c value.Value, v []value.Value) []value.Value {
		running := v[0]
		e := b.Add(c, lane)
		inE := b.Cmp("slt", e, I32c(E))
		flag := b.IfVals(inE, []value.Value{False}, func() []value.Value {
			return []value.Value{b.Cmp("ne", b.Load(I8, b.GEP(rowMap, e), 1), constI8(0))}
		})[0]
		mask := b.Ballot(flag)
		rank := b.Add(running, b.Popc(b.And(mask, ltMask)))
		b.If(b.And(flag, b.Cmp("slt", rank, I32c(K))), func() {
			b.Store(e, b.elemPtr(ids, rank, 4), 4)
			b.Store(b.Load(F32, b.elemPtr(rowProb, e, 4), 4), b.elemPtr(ws, rank, 4), 4)
		})
		return []value.Value{b.Add(running, b.Popc(mask))}
	})
	n := res[0]
	b.If(b.And(b.Cmp("sgt", n, I32c(K)), b.Cmp("eq", lane, I32c(0))), func() {
		b.AtomicOr(b.Param("err"), I32c(ErrTooManyRoute))
	})
	b.Loop(lane, I32c(K), I32c(32), nil, func(k value.Value, _ []value.Value) []value.Value {
		b.If(b.Cmp("sge", k, n), func() {
			b.Store(I32c(-1), b.elemPtr(ids, k, 4), 4)
			b.Store(F32c(0), b.elemPtr(ws, k, 4), 4)
		})
		return nil
	})
	b.Ret()
	return Kernel{Name: "moe_route", Block: utilThreads, SkipIfZeroT: true,
		Grid: [3]Expr{{A: 1, D: routeTokens, Min: 1}, Const(1), Const(1)},
		Params: []Param{ptrParam("map", "routing_map"), ptrParam("probs", "probs"), ptrParam("ids", "ids"),
			ptrParam("weights", "weights"), ptrParam("err", "err"), tParam("T", 1)}}
}

// emitCount: validate ids (out of range → ErrBadExpertID, treated as -1),
// counts[e] += 1 per slot with id e (integer atomics: order-free), and
// row_of_slot[s] = -1 for slots without a valid expert.
func emitCount(m *llir.Module, d dims) Kernel {
	b := NewKernel(m, "moe_count", utilThreads, p("ids"), p("counts"), p("row_of_slot"), p("err"), pi("T"))
	s := b.Add(b.MulI(b.Ctaid("x"), countPerBlock), b.Tid())
	b.ReturnIf(b.Cmp("sge", s, b.MulI(b.Param("T"), int64(d.K))))
	id := b.Load(I32, b.elemPtr(b.Param("ids"), s, 4), 4)
	bad := b.Or(b.Cmp("slt", id, I32c(-1)), b.Cmp("sge", id, I32c(int64(d.E))))
	b.If(bad, func() { b.AtomicOr(b.Param("err"), I32c(ErrBadExpertID)) })
	valid := b.And(b.Cmp("sge", id, I32c(0)), b.Cmp("slt", id, I32c(int64(d.E))))
	b.IfElse(valid, func() {
		b.AtomicAdd(b.elemPtr(b.Param("counts"), id, 4), I32c(1))
	}, func() {
		b.Store(I32c(-1), b.elemPtr(b.Param("row_of_slot"), s, 4), 4)
	})
	b.Ret()
	return Kernel{Name: "moe_count", Block: utilThreads, SkipIfZeroT: true,
		Grid: [3]Expr{{A: int64(d.K), D: countPerBlock, Min: 1}, Const(1), Const(1)},
		Params: []Param{ptrParam("ids", "ids"), ptrParam("counts", "counts"), ptrParam("row_of_slot", "row_of_slot"),
			ptrParam("err", "err"), tParam("T", 1)}}
}

// blockScan computes, for each of the i32 values xs of the calling thread,
// the exclusive prefix over the threads of the block (in thread order) and
// the block total. smem holds at least 8*len(xs) i32 (utilThreads = 256 =
// 8 warps). It synchronises twice, so smem may be reused right after.
func (b *Builder) blockScan(smem value.Value, xs []value.Value) (excl, total []value.Value) {
	lane, warp := b.LaneWarp()
	nv := int64(len(xs))
	incl := make([]value.Value, len(xs))
	copy(incl, xs)
	for dd := int64(1); dd < 32; dd *= 2 {
		ge := b.Cmp("sge", lane, I32c(dd))
		for j := range incl {
			y := b.ShflUp(incl[j], dd)
			incl[j] = b.Select(ge, b.Add(incl[j], y), incl[j])
		}
	}
	b.If(b.Cmp("eq", lane, I32c(31)), func() {
		for j := range incl {
			b.Store(incl[j], b.elemPtr(smem, b.AddI(b.MulI(warp, nv), int64(j)), 4), 4)
		}
	})
	b.Sync()
	excl = make([]value.Value, len(xs))
	total = make([]value.Value, len(xs))
	for j := range xs {
		var pre, tot value.Value = I32c(0), I32c(0)
		for w := int64(0); w < utilThreads/32; w++ {
			v := b.LoadVolatile(I32, b.GEPc(smem, 4*(w*nv+int64(j))), 4)
			pre = b.Add(pre, b.Select(b.Cmp("slt", I32c(w), warp), v, I32c(0)))
			tot = b.Add(tot, v)
		}
		excl[j] = b.Add(pre, b.Sub(incl[j], xs[j]))
		total[j] = tot
	}
	b.Sync()
	return excl, total
}

// emitScan: one block. offsets[e] = exclusive prefix of counts (offsets[E]
// = total rows); tile lists for the FC1 and FC2 GEMMs: for each expert,
// ceil(count/BM) tiles (expert, first row), in expert order; ntiles = their
// number.
func emitScan(m *llir.Module, d dims) Kernel {
	two := d.BM2 != d.BM1
	params := []*llir.Param{p("counts"), p("offsets"), p("tiles1"), p("ntiles1")}
	if two {
		params = append(params, p("tiles2"), p("ntiles2"))
	}
	b := NewKernel(m, "moe_scan", utilThreads, params...)
	smem := b.DynSmem()
	tid := b.Tid()
	E := int64(d.E)
	bms := []int64{int64(d.BM1)}
	lists := []string{"tiles1"}
	if two {
		bms = append(bms, int64(d.BM2))
		lists = append(lists, "tiles2")
	}
	init := []value.Value{I32c(0), I32c(0), I32c(0)}[:1+len(bms)]
	res := b.Loop(I32c(0), I32c(E), I32c(utilThreads), init, func(c value.Value, base []value.Value) []value.Value {
		e := b.Add(c, tid)
		inE := b.Cmp("slt", e, I32c(E))
		cnt := b.IfVals(inE, []value.Value{I32c(0)}, func() []value.Value {
			return []value.Value{b.Load(I32, b.elemPtr(b.Param("counts"), e, 4), 4)}
		})[0]
		xs := []value.Value{cnt}
		for _, bm := range bms {
			xs = append(xs, b.UDiv(b.AddI(cnt, bm-1), I32c(bm)))
		}
		excl, total := b.blockScan(smem, xs)
		off := b.Add(base[0], excl[0])
		b.If(inE, func() { b.Store(off, b.elemPtr(b.Param("offsets"), e, 4), 4) })
		for li, bm := range bms {
			first := b.Add(base[1+li], excl[1+li])
			list := b.Param(lists[li])
			b.Loop(I32c(0), xs[1+li], I32c(1), nil, func(j value.Value, _ []value.Value) []value.Value {
				q := b.elemPtr(list, b.MulI(b.Add(first, j), 2), 4)
				b.Store(e, q, 4)
				b.Store(b.Add(off, b.MulI(j, bm)), b.GEPc(q, 4), 4)
				return nil
			})
		}
		next := make([]value.Value, len(base))
		for j := range base {
			next[j] = b.Add(base[j], total[j])
		}
		return next
	})
	b.If(b.Cmp("eq", tid, I32c(0)), func() {
		b.Store(res[0], b.GEPc(b.Param("offsets"), 4*E), 4)
		b.Store(res[1], b.Param("ntiles1"), 4)
		if two {
			b.Store(res[2], b.Param("ntiles2"), 4)
		}
	})
	b.Ret()
	ps := []Param{ptrParam("counts", "counts"), ptrParam("offsets", "offsets"), ptrParam("tiles1", "tiles1"), ptrParam("ntiles1", "ntiles1")}
	if two {
		ps = append(ps, ptrParam("tiles2", "tiles2"), ptrParam("ntiles2", "ntiles2"))
	}
	return Kernel{Name: "moe_scan", Block: utilThreads, SharedBytes: scanScratchB,
		Grid: [3]Expr{Const(1), Const(1), Const(1)}, Params: ps}
}

// emitPermute: one block per expert e. The rank of slot s = t*K+k among the
// slots with id e, in increasing s (stable, deterministic), gives its row
// offsets[e] + rank: row_of_slot[s] = row, src_slot[row] = s.
func emitPermute(m *llir.Module, d dims) Kernel {
	b := NewKernel(m, "moe_permute", utilThreads, p("ids"), p("offsets"), p("row_of_slot"), p("src_slot"), pi("T"))
	smem := b.DynSmem()
	e := b.Ctaid("x")
	offs := b.Param("offsets")
	base := b.Load(I32, b.elemPtr(offs, e, 4), 4)
	end := b.Load(I32, b.elemPtr(offs, b.AddI(e, 1), 4), 4)
	b.ReturnIf(b.Cmp("sge", base, end))
	tk := b.MulI(b.Param("T"), int64(d.K))
	tid := b.Tid()
	const V = permuteSlots
	b.Loop(I32c(0), tk, I32c(utilThreads*V), []value.Value{I32c(0)}, func(c value.Value, run []value.Value) []value.Value {
		s0 := b.Add(c, b.MulI(tid, V))
		flags := make([]value.Value, V)
		cnt := value.Value(I32c(0))
		for j := 0; j < V; j++ {
			s := b.AddI(s0, int64(j))
			in := b.Cmp("slt", s, tk)
			flags[j] = b.IfVals(in, []value.Value{False}, func() []value.Value {
				return []value.Value{b.Cmp("eq", b.Load(I32, b.elemPtr(b.Param("ids"), s, 4), 4), e)}
			})[0]
			cnt = b.Add(cnt, b.ZExt(flags[j], I32))
		}
		excl, total := b.blockScan(smem, []value.Value{cnt})
		r := b.Add(b.Add(base, run[0]), excl[0])
		for j := 0; j < V; j++ {
			s := b.AddI(s0, int64(j))
			row := r
			b.If(flags[j], func() {
				b.Store(row, b.elemPtr(b.Param("row_of_slot"), s, 4), 4)
				b.Store(s, b.elemPtr(b.Param("src_slot"), row, 4), 4)
			})
			r = b.Add(r, b.ZExt(flags[j], I32))
		}
		return []value.Value{b.Add(run[0], total[0])}
	})
	b.Ret()
	return Kernel{Name: "moe_permute", Block: utilThreads, SharedBytes: scanScratchB, SkipIfZeroT: true,
		Grid: [3]Expr{Const(int64(d.E)), Const(1), Const(1)},
		Params: []Param{ptrParam("ids", "ids"), ptrParam("offsets", "offsets"), ptrParam("row_of_slot", "row_of_slot"),
			ptrParam("src_slot", "src_slot"), tParam("T", 1)}}
}

// emitGather: xs[row, :] = x[src_slot[row] / K, :] for row < offsets[E]
// (times the routing weight, rounded to bf16, when the weight scales the
// input). One warp per row, 16-byte vectors.
func emitGather(m *llir.Module, d dims) Kernel {
	ps := []*llir.Param{p("x"), p("src_slot"), p("offsets"), p("xs")}
	if d.WeightOnInput {
		ps = append(ps, p("weights"))
	}
	b := NewKernel(m, "moe_gather", utilThreads, ps...)
	lane, warp := b.LaneWarp()
	row := b.Add(b.MulI(b.Ctaid("x"), gatherRows), warp)
	total := b.Load(I32, b.GEPc(b.Param("offsets"), 4*int64(d.E)), 4)
	b.ReturnIf(b.Cmp("sge", row, total))
	s := b.Load(I32, b.elemPtr(b.Param("src_slot"), row, 4), 4)
	t := b.UDiv(s, I32c(int64(d.K)))
	H := int64(d.H)
	src := b.GEP(b.Param("x"), b.MulI(b.Wide(t), 2*H))
	dst := b.GEP(b.Param("xs"), b.MulI(b.Wide(row), 2*H))
	var w value.Value
	if d.WeightOnInput {
		w = b.Load(F32, b.elemPtr(b.Param("weights"), s, 4), 4)
	}
	v4 := types.NewVector(4, I32)
	b.Loop(lane, I32c(H/8), I32c(32), nil, func(c value.Value, _ []value.Value) []value.Value {
		off := b.MulI(b.Wide(c), 16)
		v := b.Load(v4, b.GEP(src, off), 16)
		if w != nil {
			vals := make([]value.Value, 8)
			for i := 0; i < 4; i++ {
				x := b.B.NewExtractElement(v, I32c(int64(i)))
				vals[2*i] = b.FMul(b.BF16Lo(x), w)
				vals[2*i+1] = b.FMul(b.BF16Hi(x), w)
			}
			StoreBF16(b, b.GEP(dst, off), vals)
		} else {
			b.Store(v, b.GEP(dst, off), 16)
		}
		return nil
	})
	b.Ret()
	kp := []Param{ptrParam("x", "x"), ptrParam("src_slot", "src_slot"), ptrParam("offsets", "offsets"), ptrParam("xs", "xs")}
	if d.WeightOnInput {
		kp = append(kp, ptrParam("weights", "weights"))
	}
	return Kernel{Name: "moe_gather", Block: utilThreads, SkipIfZeroT: true,
		Grid: [3]Expr{{A: int64(d.K), D: gatherRows, Min: 1}, Const(1), Const(1)}, Params: kp}
}

// emitCombine: one block per token t:
//
//	y[t] = g_t * shared_out[t] + sum_{k in 0..K-1, row_of_slot[t*K+k] >= 0} w[t,k] * out_rows[row]
//
// in fp32 in that fixed order (fma), rounded once to bf16; g_t =
// sigmoid(x[t]·gate) with the shared output gate, else 1; w = 1 when the
// weight scaled the input. A slot without a route reads nothing.
func emitCombine(m *llir.Module, d dims) Kernel {
	ps := []*llir.Param{p("out_rows"), p("row_of_slot"), p("weights"), p("y")}
	kp := []Param{ptrParam("out_rows", "out_rows"), ptrParam("row_of_slot", "row_of_slot"), ptrParam("weights", "weights"), ptrParam("y", "y")}
	if d.Is > 0 {
		ps = append(ps, p("shared_out"))
		kp = append(kp, ptrParam("shared_out", "shared_out"))
		if d.SharedGate {
			ps = append(ps, p("x"), p("shared_gate"))
			kp = append(kp, ptrParam("x", "x"), ptrParam("shared_gate", "shared_gate"))
		}
	}
	b := NewKernel(m, "moe_combine", utilThreads, ps...)
	t := b.Ctaid("x")
	tid := b.Tid()
	H, K := int64(d.H), int64(d.K)
	v4 := types.NewVector(4, I32)
	row8 := func(base value.Value, r, c value.Value) []value.Value {
		v := b.Load(v4, b.GEP(base, b.Add(b.MulI(b.Wide(r), 2*H), b.MulI(b.Wide(c), 16))), 16)
		out := make([]value.Value, 8)
		for i := 0; i < 4; i++ {
			x := b.B.NewExtractElement(v, I32c(int64(i)))
			out[2*i], out[2*i+1] = b.BF16Lo(x), b.BF16Hi(x)
		}
		return out
	}
	var gate value.Value = F32c(1)
	if d.Is > 0 && d.SharedGate {
		smem := b.DynSmem()
		part := b.Loop(tid, I32c(H/8), I32c(utilThreads), []value.Value{F32c(0)}, func(c value.Value, acc []value.Value) []value.Value {
			xv := row8(b.Param("x"), t, c)
			gv := row8(b.Param("shared_gate"), I32c(0), c)
			a := acc[0]
			for i := 0; i < 8; i++ {
				a = b.FMA(xv[i], gv[i], a)
			}
			return []value.Value{a}
		})[0]
		gate = b.Sigmoid(b.blockSumF32(smem, part))
	}
	slots := make([]value.Value, K)
	wts := make([]value.Value, K)
	for k := int64(0); k < K; k++ {
		s := b.AddI(b.MulI(t, K), k)
		slots[k] = b.Load(I32, b.elemPtr(b.Param("row_of_slot"), s, 4), 4)
		if d.WeightOnInput {
			wts[k] = F32c(1)
		} else {
			wts[k] = b.IfVals(b.Cmp("sge", slots[k], I32c(0)), []value.Value{F32c(0)}, func() []value.Value {
				return []value.Value{b.Load(F32, b.elemPtr(b.Param("weights"), s, 4), 4)}
			})[0]
		}
	}
	b.Loop(tid, I32c(H/8), I32c(utilThreads), nil, func(c value.Value, _ []value.Value) []value.Value {
		acc := make([]value.Value, 8)
		if d.Is > 0 {
			sv := row8(b.Param("shared_out"), t, c)
			for i := range acc {
				acc[i] = b.FMul(sv[i], gate)
			}
		} else {
			for i := range acc {
				acc[i] = F32c(0)
			}
		}
		for k := int64(0); k < K; k++ {
			r, w := slots[k], wts[k]
			acc = b.IfVals(b.Cmp("sge", r, I32c(0)), acc, func() []value.Value {
				ov := row8(b.Param("out_rows"), r, c)
				n := make([]value.Value, 8)
				for i := range n {
					n[i] = b.FMA(w, ov[i], acc[i])
				}
				return n
			})
		}
		StoreBF16(b, b.GEP(b.Param("y"), b.Add(b.MulI(b.Wide(t), 2*H), b.MulI(b.Wide(c), 16))), acc)
		return nil
	})
	b.Ret()
	sb := 0
	if d.Is > 0 && d.SharedGate {
		sb = 8 * 4
	}
	return Kernel{Name: "moe_combine", Block: utilThreads, SharedBytes: sb, SkipIfZeroT: true,
		Grid: [3]Expr{{A: 1, D: 1, Min: 1}, Const(1), Const(1)}, Params: kp}
}

// blockSumF32 sums one f32 per thread over the block in a fixed order
// (butterfly within warps, then warps in order); every thread gets the sum.
func (b *Builder) blockSumF32(smem value.Value, x value.Value) value.Value {
	lane, warp := b.LaneWarp()
	for dd := int64(16); dd >= 1; dd /= 2 {
		x = b.FAdd(x, b.ShflBfly(x, dd))
	}
	b.If(b.Cmp("eq", lane, I32c(0)), func() { b.Store(x, b.elemPtr(smem, warp, 4), 4) })
	b.Sync()
	var s value.Value = F32c(0)
	for w := int64(0); w < utilThreads/32; w++ {
		s = b.FAdd(s, b.LoadVolatile(F32, b.GEPc(smem, 4*w), 4))
	}
	b.Sync()
	return s
}

func constI8(v int64) value.Value { return constant.NewInt(types.I8, v) }
