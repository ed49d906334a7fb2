package codegen

import (
	"fmt"
	"strings"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
)

// The sm_90a MXFP8 GEMM by expansion (GemmSpec.MXExpand; docs/mxfp8.md):
// the same values as the MX GEMM, computed by the bf16 pipeline. The
// consumer warpgroups, the ring of 128-byte-swizzled K-major bf16 tiles
// (K blocks of BK/2 = 64), the work list and the epilogue are those of
// the bf16 GEMM (sm90Layout.bf, no staged epilogue). Each stage also
// holds the e4m3 tiles of its K block (layouts.GemmConfig.E4M3Staging: A
// BM x 64 and B NB x 64 bytes, 64-byte swizzled rows), so a stage is R =
// BM + NB rows twice: row x's e4m3 bytes at E4M3Offset + 64x, its bf16
// values at 128x (A's rows first, then B's); the e4m3 tiles have their
// own full/empty mbarriers (e4m3Ring). The roles:
//
//   - Producer warp 0: its first lane loads the e4m3 tiles with TMA
//     (boxes of 64 bytes along K, the B boxes by the gate/up layout as
//     the bf16 producer's) and its lanes copy the rows' UE8M0 codes by
//     cp.async, up to the ring's depth ahead of the widening.
//   - The converters (sm90Layout.nConv): the producer's warps 1-3 and,
//     when the registers allow it without setmaxnreg (BM = 64, or B tiles
//     of at most 192 rows at 512 threads), warpgroup 1 as well; the
//     consumers follow (mmaWG0). Converter t takes the stage's 16-byte
//     chunks t, t+nConv, ... (chunk u: stage row u/4, chunk u%4). Per K
//     block it waits for the e4m3 tiles and for the bf16 stage to be free,
//     widens each live chunk (A rows below the expert's end; B rows below
//     BRows; other rows reach only outputs that are never stored), arrives
//     on the e4m3 stage's empty barrier, fences the async proxy
//     (generic-proxy stores read by wgmma) and arrives on the bf16 stage's
//     full barrier (nConv arrivals each). A chunk's UE8M0 code per K block
//     comes from the stage (warp 0 copies the rows' codes there with the
//     tiles, expandCodeCopy); 127 (1.0) past K and for rows that are not
//     live. No converter loads from global memory: an mbarrier arrive has
//     release semantics and would wait for such a load, one global round
//     trip per K block (docs/perf.md, mxfp8 v7).
//
// The widening (widenE4M3): an e4m3 byte S.EEEE.MMM becomes the bf16 bits
// S.0000EEEE.MMM0000, whose value is the e4m3 value times 2^-120 for
// normals, subnormals and zeros alike, with integer and byte-permute
// instructions (no conversion), then one mul.rn.bf16x2 by 2^(code-7) (the
// scale 2^(code-127) times 2^120) rounds nothing when the product is a
// bf16 normal: the bf16 value of e4m3 times scale, exact for scales of at
// least 2^-124 (layouts.TestMXValuesInBF16), and NaN for code 255 (the
// factor is NaN). Two cases leave that path, rarely, per thread and K
// block: an e4m3 NaN byte (S.1111.111, which the bit copy would make
// finite) and a code above 134 (a factor beyond bf16's range); the thread
// then widens its chunks again through f32 (e4m3x4F32, times 2^(code-127),
// cvt.rn.bf16x2.f32), the exact path. So every element is the bf16 value
// the Dequantize kernel would give, and the consumers' f32 accumulation
// of exact products is the bf16 GEMM's.

// expandProdRegs are the producer warpgroup's registers after
// setmaxnreg.dec when it is the only non-consumer warpgroup (the two
// consumer warpgroups keep 208), and expandConverters its converter
// threads (warps 1-3; a second converter warpgroup adds 128, without
// setmaxnreg).
const (
	expandProdRegs   = 88
	expandConverters = 96
)

// e4m3Ring is the ring of an MXExpand kernel's e4m3 tiles: the same stages
// as the bf16 ring (the tiles at layouts.GemmSmem.E4M3Offset of each
// stage), its full and empty barriers after the bf16 ring's.
func (l sm90Layout) e4m3Ring(b *Builder, k *sm90Block) mbarRing {
	return mbarRing{bars: b.AddI(k.ring.bars, int64(16*l.S)), S: l.S}
}

// expandProducer is a non-consumer warpgroup of an MXExpand kernel: warp 0
// of warpgroup 0 loads (expandTMA), every other warp widens
// (expandConverter; thread tid-32 among the converters).
func (l sm90Layout) expandProducer(b *Builder, k *sm90Block, mx GemmSpec) error {
	if l.prodRegs > 0 {
		b.SetMaxNReg(false, l.prodRegs)
	}
	var err error
	b.IfElse(b.ICmp(enum.IPredULT, k.tid, ir.Int32(32)), func() {
		err = l.expandTMA(b, k, mx)
	}, func() {
		l.expandConverter(b, k, mx, b.AddI(k.tid, -32))
	})
	return err
}

// expandTMA is warp 0 of an MXExpand kernel's producer: for every work
// item's K blocks, once the stage's e4m3 tiles are free, its first lane
// loads them with TMA (full[s] expects its arrive.expect_tx and
// (BM+NB)*64 bytes) and every lane copies the UE8M0 codes of its rows
// (lane, lane+32, ...) into the stage by cp.async (expandCodeCopy) and
// arrives on full[s] once they have landed (cp.async.mbarrier.arrive:
// 32 arrivals more). The codes thus travel up to the ring's depth ahead
// of the widening, as the tiles do, and no thread waits for a global
// load before an mbarrier arrive.
func (l sm90Layout) expandTMA(b *Builder, k *sm90Block, mx GemmSpec) error {
	ring := l.e4m3Ring(b, k)
	lead := b.ICmp(enum.IPredEQ, k.tid, ir.Int32(0))
	var err error
	k.work.each(b, []value.Value{ir.Int32(0), ir.Int32(0)}, func(w gemmWork, v []value.Value) []value.Value {
		return b.Loop(ir.Int32(0), ir.Int32(int64(l.kTiles)), ir.Int32(1), v, func(kt value.Value, v []value.Value) []value.Value {
			stage, phase := v[0], v[1]
			b.MbarWait(ring.empty(b, stage), b.Xor(phase, ir.Int32(1)))
			fb := ring.full(b, stage)
			st := b.Add(k.base, b.MulI(stage, int64(l.stageBytes)))
			b.If(lead, func() {
				b.MbarArriveExpectTx(fb, (l.BM+l.NB)*64)
				sa := b.AddI(st, int64(l.smem.E4M3Offset))
				sb := b.AddI(sa, int64(l.BM*64))
				k0 := b.MulI(kt, 64)
				err = joinErr(err, b.TMALoad(k.tmA, sa, fb, k0, w.row0))
				switch l.gate {
				case layouts.GateUpHalves:
					err = joinErr(err, b.TMALoad(k.tmB, sb, fb, k0, w.n0, w.e))
					err = joinErr(err, b.TMALoad(k.tmB, b.AddI(sb, int64(l.BN*64)), fb, k0, b.AddI(w.n0, int64(mx.N)), w.e))
				case layouts.GateUpInterleaved:
					err = joinErr(err, b.TMALoad(k.tmB, sb, fb, k0, b.MulI(w.n0, 2), w.e))
				default:
					err = joinErr(err, b.TMALoad(k.tmB, sb, fb, k0, w.n0, w.e))
				}
			})
			l.expandCodeCopy(b, mx, w, kt, st, k.tid)
			b.CpAsyncMbarArrive(fb)
			s2, p2 := ringNext(b, stage, phase, l.S)
			return []value.Value{s2, p2}
		})
	})
	return err
}

// expandCodeCopy copies, by lane of the producer's warp 0, the UE8M0
// codes of K block kt (64 wide: codes 2kt and 2kt+1) of its stage rows
// x = lane, lane+32, ... under work item w into the stage at shared
// address st (E4M3CodeOffset + 8x), each row's window by
// cpAsyncCodeWindow; rows that are not live read nothing. As for
// gemmProducer.mxCodeCopy, the word of a tensor's last code may reach
// past the end of a tensor that is not a multiple of 4 bytes.
func (l sm90Layout) expandCodeCopy(b *Builder, mx GemmSpec, w gemmWork, kt, st, lane value.Value) {
	nsf := int64(mx.K / 32)
	R := l.BM + l.NB
	for x0 := 0; x0 < R; x0 += 32 {
		x := b.AddI(lane, int64(x0))
		copyRow := func() {
			isB := b.ICmp(enum.IPredSGE, x, ir.Int32(int64(l.BM)))
			ptr, ok := l.expandRowScales(b, mx, w, isB, b.Select(isB, b.AddI(x, -int64(l.BM)), x))
			first := b.Add(b.PtrToInt(ptr), b.Wide(b.MulI(kt, 2)))
			dst := b.Add(b.AddI(st, int64(l.smem.E4M3CodeOffset)), b.MulI(x, 8))
			b.cpAsyncCodeWindow(dst, first, ok, kt, 2, nsf)
		}
		if x0+32 > R {
			b.If(b.ICmp(enum.IPredSLT, x, ir.Int32(int64(R))), copyRow)
		} else {
			copyRow()
		}
	}
}

// expandRowScales is the first UE8M0 code in global memory of a stage row
// under work item w (isB: a B row, r its row in its tile; the gate/up row
// map for B) and whether the row is live there (A: below the expert's end;
// B: below BRows); a row that is not live gets row 0's address.
func (l sm90Layout) expandRowScales(b *Builder, mx GemmSpec, w gemmWork, isB, r value.Value) (ptr, ok value.Value) {
	nsf := int64(mx.K / 32)
	gate := bTableLoad{tmaRing: l.tmaRing, N: mx.N, K: mx.K, BRows: mx.BRows()} // the gate/up row map
	pB, okB := scaleRowB(b, gate, w, r, 0, nsf)
	pA, okA := scaleRowA(b, w, r, nsf, 0)
	return b.Select(isB, pB, pA), b.Select(isB, okB, okA)
}

// expandUnit is one 16-byte e4m3 chunk of a stage a converter thread
// widens: stage row x (0..BM+NB-1; A's rows, then B's) and chunk c (0..3:
// elements 16c.. of the row's 64), whether the row is a B row and its row
// r in its tile, inStage false past the stage (nil: always inside).
type expandUnit struct {
	x, c, isB, r, inStage value.Value
}

// expandConverter is a converter thread of an MXExpand kernel; t is its
// index among the l.nConv converters. It takes the stage's chunks t,
// t+nConv, ... (chunk u: row u/4, chunk u%4, so the eight threads of a
// quarter warp read two whole 64-byte rows, one 128-byte line, of the e4m3
// tiles and store to eight different bank groups). See the top of this file.
func (l sm90Layout) expandConverter(b *Builder, k *sm90Block, mx GemmSpec, t value.Value) {
	ring := l.e4m3Ring(b, k)
	nsf := int64(mx.K / 32)
	U := 4 * (l.BM + l.NB)
	var units []expandUnit
	nConv := l.nConv()
	for u0 := 0; u0 < U; u0 += nConv {
		u := b.AddI(t, int64(u0))
		x := b.LShr(u, ir.Int32(2))
		isB := b.ICmp(enum.IPredSGE, x, ir.Int32(int64(l.BM)))
		e := expandUnit{x: x, c: b.And(u, ir.Int32(3)), isB: isB, r: b.Select(isB, b.AddI(x, -int64(l.BM)), x)}
		if u0+nConv > U {
			e.inStage = b.ICmp(enum.IPredSLT, u, ir.Int32(int64(U)))
		}
		units = append(units, e)
	}
	// src is the first scale code in global memory of unit e's row under
	// work item w, and whether the row is live there.
	src := func(w gemmWork, e expandUnit) (ptr, ok value.Value) {
		ptr, ok = l.expandRowScales(b, mx, w, e.isB, e.r)
		if e.inStage != nil {
			ok = b.And(ok, e.inStage)
		}
		return ptr, ok
	}
	k.work.each(b, []value.Value{ir.Int32(0), ir.Int32(0)}, func(w gemmWork, v []value.Value) []value.Value {
		return b.Loop(ir.Int32(0), ir.Int32(int64(l.kTiles)), ir.Int32(1), v, func(kt value.Value, v []value.Value) []value.Value {
			stage, phase := v[0], v[1]
			sa := b.Add(k.base, b.MulI(stage, int64(l.stageBytes)))
			b.MbarWait(ring.full(b, stage), phase)
			// Unit e's code of block 2kt + c/2, from the stage's copy of
			// its row's window (expandCodeCopy): 127 where the row is not
			// live or the block lies past K.
			var codes, live []value.Value
			for _, e := range units {
				ptr, ok := src(w, e)
				blk := b.Add(b.MulI(kt, 2), b.LShr(e.c, ir.Int32(1)))
				off := b.Add(b.codeWindowOffset(b.PtrToInt(ptr), kt, 2), b.LShr(e.c, ir.Int32(1)))
				x := e.x
				if e.inStage != nil { // a unit past the stage reads row 0's window (and gets 127)
					x = b.Select(e.inStage, x, ir.Int32(0))
				}
				at := b.Add(b.Add(b.AddI(sa, int64(l.smem.E4M3CodeOffset)), b.MulI(x, 8)), off)
				in := b.And(ok, b.ICmp(enum.IPredSLT, blk, ir.Int32(nsf)))
				codes = append(codes, b.Select(in, b.ZExt(b.LoadAt(ir.I8, sharedPtr(b, at), 1), ir.I32), ir.Int32(127)))
				live = append(live, ok)
			}
			b.MbarWait(k.ring.empty(b, stage), b.Xor(phase, ir.Int32(1)))
			l.widenStage(b, sa, units, live, codes)
			b.MbarArrive(ring.empty(b, stage))
			b.FenceProxyAsync()
			b.MbarArrive(k.ring.full(b, stage))
			s2, p2 := ringNext(b, stage, phase, l.S)
			return []value.Value{s2, p2}
		})
	})
}

// widenStage widens the thread's live chunks of the stage at shared
// address sa (codes: each chunk's UE8M0 code) by the fast path and, when
// one of them holds an e4m3 NaN or has a code above 134, all of them again
// by the exact path.
func (l sm90Layout) widenStage(b *Builder, sa value.Value, units []expandUnit, live, codes []value.Value) {
	slow := value.Value(ir.Int32(0))
	for i, e := range units {
		c := codes[i]
		big := b.ZExt(expandBeyond(b, c), ir.I32)
		res := b.IfElseVals(live[i], func() []value.Value {
			var n value.Value
			l.widenChunk(b, sa, e, func(w [4]value.Value) [8]value.Value {
				var out [8]value.Value
				out, n = b.widenE4M3(w, expandFactor(b, c))
				return out
			})
			return []value.Value{b.Or(big, n)}
		}, func() []value.Value { return []value.Value{ir.Int32(0)} })
		slow = b.Or(slow, res[0])
	}
	b.If(b.ICmp(enum.IPredNE, slow, ir.Int32(0)), func() {
		for i, e := range units {
			c := codes[i]
			b.If(live[i], func() {
				l.widenChunk(b, sa, e, func(w [4]value.Value) [8]value.Value { return b.widenE4M3Exact(w, c) })
			})
		}
	})
}

// widenChunk loads the 16-byte e4m3 chunk of unit e from the stage at sa
// (row x at E4M3Offset + 64x, 64-byte swizzle: chunk c of a row whose
// address has bits 7..8 = s lies at c^s), widens it with widen (16
// elements from 16c) and stores the 32 bytes at the row's
// 128-byte-swizzled bf16 chunks 2c and 2c+1 (chunk q of stage row x at
// 128x + ((q ^ x%8) * 16): the A tile, then B's, one atom each). The
// stage, both tiles of each kind and BM*64 are 1024-byte aligned, so the
// swizzles are functions of x.
func (l sm90Layout) widenChunk(b *Builder, sa value.Value, e expandUnit, widen func(w [4]value.Value) [8]value.Value) {
	s := b.And(b.LShr(e.x, ir.Int32(1)), ir.Int32(3))
	src := b.Add(b.Add(b.AddI(sa, int64(l.smem.E4M3Offset)), b.MulI(e.x, 64)), b.Shl(b.Xor(e.c, s), ir.Int32(4)))
	v := b.LoadAt(ir.Vec(4, ir.I32), sharedPtr(b, src), 16)
	var w [4]value.Value
	for i := range w {
		w[i] = b.ExtractElement(v, i)
	}
	out := widen(w)
	dstRow, x8 := b.Add(sa, b.MulI(e.x, 128)), b.And(e.x, ir.Int32(7))
	for h := 0; h < 2; h++ {
		var vec value.Value = ir.Undef(ir.Vec(4, ir.I32))
		for i := 0; i < 4; i++ {
			vec = b.InsertElement(vec, out[4*h+i], i)
		}
		q := b.Xor(b.AddI(b.Shl(e.c, ir.Int32(1)), int64(h)), x8)
		b.StoreAt(vec, sharedPtr(b, b.Add(dstRow, b.Shl(q, ir.Int32(4)))), 16)
	}
}

// sharedPtr is the shared-memory pointer of the i32 shared address a.
func sharedPtr(b *Builder, a value.Value) value.Value {
	return b.IntToPtr(b.ZExt(a, ir.I64), SPtr)
}

// expandFactor is the bf16x2 factor (both halves) of widenE4M3 for the
// UE8M0 code (i32 0..255): 2^(code-7), the bits (code+120) << 7, valid for
// codes up to 134 (expandBeyond); NaN for 255.
func expandFactor(b *Builder, code value.Value) value.Value {
	f := b.Shl(b.AddI(code, 120), ir.Int32(7))
	f = b.Select(b.ICmp(enum.IPredEQ, code, ir.Int32(255)), ir.Int32(0x7FC0), f)
	return b.Or(f, b.Shl(f, ir.Int32(16)))
}

// expandBeyond (i1) says the UE8M0 code's factor is beyond bf16's range
// (codes 135..254), so the chunk must take widenE4M3Exact.
func expandBeyond(b *Builder, code value.Value) value.Value {
	return b.And(b.ICmp(enum.IPredUGT, code, ir.Int32(134)), b.ICmp(enum.IPredNE, code, ir.Int32(255)))
}

// widenE4M3 widens 16 e4m3 bytes (the i32 words w, lowest byte first) to
// 16 bf16 values times the bf16x2 factor f (expandFactor), as eight i32
// words (word i: elements 2i in bits 0..15 and 2i+1 above). Per word of
// four bytes b: the high byte of each bf16 is S.000.0EEE (b's sign and
// top three exponent bits: (b >> 4) & 7 | b & 0x80) and the low byte
// E.MMM.0000 ((b << 4) & 0xF0), paired by prmt; the bits are the e4m3
// value times 2^-120 (normals, subnormals and zeros), and the
// mul.rn.bf16x2 by f is exact when the product is a bf16 normal (PTX ISA
// "Half Precision Floating-Point Instructions: mul", sm_90; "Integer
// Arithmetic Instructions: lop3", "Data Movement: prmt"). nan has bit 7 of
// a byte set when some input byte is an e4m3 NaN ((b & 0x7F) + 1 carries
// into bit 7 only for 0x7F), for the caller to take the exact path.
func (b *Builder) widenE4M3(w [4]value.Value, f value.Value) (out [8]value.Value, nan value.Value) {
	lines := []string{"{", ".reg .b32 s, a, q, p, t, n, m80, m07, mf0, m7f, m01;",
		"mov.b32 m80, 0x80808080;", "mov.b32 m07, 0x07070707;", "mov.b32 mf0, 0xF0F0F0F0;",
		"mov.b32 m7f, 0x7F7F7F7F;", "mov.b32 m01, 0x01010101;", "mov.b32 n, 0;"}
	for i := 0; i < 4; i++ {
		in := fmt.Sprintf("$%d", 9+i)
		lines = append(lines,
			"and.b32 s, "+in+", m80;",
			"shr.u32 a, "+in+", 4;",
			"lop3.b32 q, a, s, m07, 0xEC;", // (a & m07) | s
			"shl.b32 p, "+in+", 4;",
			"and.b32 p, p, mf0;",
			"prmt.b32 a, p, q, 0x5140;", // bytes p0 q0 p1 q1: elements 4i, 4i+1
			fmt.Sprintf("mul.rn.bf16x2 $%d, a, $13;", 2*i),
			"prmt.b32 a, p, q, 0x7362;", // p2 q2 p3 q3: elements 4i+2, 4i+3
			fmt.Sprintf("mul.rn.bf16x2 $%d, a, $13;", 2*i+1),
			"and.b32 t, "+in+", m7f;",
			"add.u32 t, t, m01;",
			"or.b32 n, n, t;")
	}
	lines = append(lines, "and.b32 $8, n, m80;", "}")
	cons := strings.Repeat("=&r,", 9) + "r,r,r,r,r"
	r := b.AsmCallNoMemory(asmLines(lines...), cons, ir.Struct(ir.I32, ir.I32, ir.I32, ir.I32, ir.I32, ir.I32, ir.I32, ir.I32, ir.I32),
		w[0], w[1], w[2], w[3], f)
	for i := range out {
		out[i] = b.ExtractValue(r, i)
	}
	return out, b.ExtractValue(r, 8)
}

// widenE4M3Exact is widenE4M3 through f32 for the UE8M0 code (i32): each
// byte widened exactly (e4m3x4F32), times 2^(code-127) (exact in f32,
// NaN for 255), rounded to bf16 (cvt.rn.bf16x2.f32: exact for scales of
// at least 2^-124, a NaN stays NaN).
func (b *Builder) widenE4M3Exact(w [4]value.Value, code value.Value) (out [8]value.Value) {
	scale := b.ue8m0F32(code)
	for i, word := range w {
		x := b.e4m3x4F32(word)
		out[2*i] = b.PackBF16(b.FMul(x[0], scale), b.FMul(x[1], scale))
		out[2*i+1] = b.PackBF16(b.FMul(x[2], scale), b.FMul(x[3], scale))
	}
	return out
}
