package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/target"
)

// The weight gradient on sm_90a's warpgroup MMA: the same grid, rows and
// epilogue as emitWeightGradMMA (Main_e[m, n] += sum_{r of e} A[r, m] *
// B[r, n] over 128 x 128 tiles, 256 threads, two blocks per SM), with
// wgmma.mma_async m64n128k16 reading both operands from shared memory in
// the MN-major layout they have in the dispatch order (A M-major:
// imm-trans-a = 1; B N-major: imm-trans-b = 1; PTX ISA 9.7.15.5.1.2).
// Warpgroup w owns rows 64w.. of the tile. A stage holds wgradWGRows expert
// rows of both operands as MN-major tiles (layouts.NewSmemTileMN: two
// columns of 64 elements, each wgradWGRows rows of 128 bytes with the
// 128-byte swizzle), copied by cp.async (rows past the expert zero-filled:
// a TMA box could not stop at the expert's last row) and handed to the
// async proxy with fence.proxy.async before the block barrier. Per stage,
// after the barrier, the threads issue the copies of the stage two ahead,
// then each warpgroup issues four k16 steps as one wgmma group and waits
// for it in the same inline-PTX statement (the copies stay in flight). The
// sums of a tile run in a
// fixed order (rows ascending) and round once into the main grad:
// repeated runs give the same bits, with no atomics.

const (
	wgradWGRows   = 64 // expert rows per stage (four k16 steps)
	wgradWGStages = 3  // cp.async ring depth
	wgradWGTile   = 128
)

// wgradWGTiles are the MN-major A (M x rows) and B (N x rows) tiles of one
// stage.
func wgradWGTiles() (a, bt *layouts.SmemTile, err error) {
	if a, err = layouts.NewSmemTileMN(target.SM90a, layouts.OperandA, layouts.DTypeBF16, wgradWGTile, wgradWGRows, layouts.Swizzle128B); err != nil {
		return nil, nil, err
	}
	bt, err = layouts.NewSmemTileMN(target.SM90a, layouts.OperandB, layouts.DTypeBF16, wgradWGTile, wgradWGRows, layouts.Swizzle128B)
	return a, bt, err
}

// wgradWGRing is the wgmma kernel's ring: each operand's tile is two
// 64-column MN-major columns of wgradWGRows rows x 128 bytes; chunk ch
// (columns 8ch..) of row r sits in column ch/8 at r*128 + ((ch%8) ^
// (r%8))*16, the tile's layouts.SmemTile.ByteOffset of element (8ch, r)
// (128-byte swizzle: 16-byte chunk index XOR row mod 8).
func wgradWGRing(a, bt *layouts.SmemTile) wgradRing {
	col := int64(a.AtomBytes())
	return wgradRing{Rows: wgradWGRows, Stages: wgradWGStages, StageBytes: int64(a.Bytes() + bt.Bytes()),
		BOff: int64(a.Bytes()), RowBytes: 128,
		Place: func(b *Builder, r, ch value.Value) value.Value {
			sw := b.Xor(b.And(ch, ir.Int32(7)), b.And(r, ir.Int32(7)))
			off := b.Add(b.MulI(b.LShr(ch, ir.Int32(3)), col), b.Add(b.MulI(r, 128), b.MulI(sw, 16)))
			return b.Wide(off)
		}}
}

// wgradOnWGMMA reports whether op's weight gradient runs on wgmma on
// target t: sm_90a and the tensor-core kernel's conditions.
func wgradOnWGMMA(t target.Target, op moe.WeightGrad) bool {
	return t == target.SM90a && wgradOnTensorCores(op)
}

// emitWeightGradWGMMA is the sm_90a kernel of op (see the comment above):
// grid (ceil(N/128), ceil(M/128), E), 256 threads, 3 x 32 KB (+1 KB to
// realign) of shared memory. A block of an expert without rows exits at
// once; rows and columns past the expert's rows, M or N are zero-filled in
// shared memory and never stored. The bias gradient is emitWeightGradBias's.
func emitWeightGradWGMMA(m *ir.Module, op moe.WeightGrad) (Kernel, error) {
	aT, bT, err := wgradWGTiles()
	if err != nil {
		return Kernel{}, fmt.Errorf("codegen: %s: %w", op.Name(), err)
	}
	ring := wgradWGRing(aT, bT)
	hiA, err := aT.Descriptor(0, 0, 0)
	if err != nil {
		return Kernel{}, err
	}
	hiB, err := bT.Descriptor(0, 0, 0)
	if err != nil {
		return Kernel{}, err
	}
	var offA, offB []int
	for ks := 0; ks < wgradWGRows/16; ks++ {
		da, _ := aT.DescriptorFields(0, 0, ks)
		db, _ := bT.DescriptorFields(0, 0, ks)
		offA, offB = append(offA, int(da.Start>>4)), append(offB, int(db.Start>>4))
	}
	dense := op.Offsets == nil
	b, k := opKernel(m, op, wgradMMAWarps*32, dense)
	b.MinBlocksPerSM(2) // at most 128 registers: two blocks overlap one's epilogue with the other's loop
	tid := b.ThreadIdx(ir.X)
	lane, warp := b.LaneWarp()
	n0, m0, e := b.MulI(b.BlockIdx(ir.X), wgradWGTile), b.MulI(b.BlockIdx(ir.Y), wgradWGTile), b.BlockIdx(ir.Z)
	lo, hi := b.expertRows(op, e)
	b.ReturnIf(b.ICmp(enum.IPredSGE, lo, hi))
	M, N := int64(op.M), int64(op.N)
	kTiles := b.UDiv(b.AddI(b.Sub(hi, lo), wgradWGRows-1), ir.Int32(wgradWGRows))
	base := b.SharedBase1024()
	smem := b.ZExt(base, ir.I64)
	ld := b.wgradLoader(ring, tid, lo, hi, m0, n0, M, N)
	for s := int64(0); s < wgradWGStages-1; s++ {
		b.If(b.ICmp(enum.IPredSLT, ir.Int32(s), kTiles), func() { ld.load(smem, ir.Int32(s)) })
		b.cpAsyncCommit()
	}
	wg := b.LShr(warp, ir.Int32(2))
	aOff := b.MulI(wg, int64(aT.AtomBytes())) // the warpgroup's 64-column of A
	desc := func(addr value.Value, hi uint64) value.Value {
		f := b.And(b.LShr(addr, ir.Int32(4)), ir.Int32(0x3FFF))
		return b.Or(b.ZExt(f, ir.I64), ir.Int64(int64(hi)))
	}
	var werr error
	acc := b.Loop(ir.Int32(0), kTiles, ir.Int32(1), zerosF32(wgradWGTile/2), func(kt value.Value, acc []value.Value) []value.Value {
		b.cpAsyncWait(wgradWGStages - 2)
		b.FenceProxyAsync()
		b.SyncThreads()
		// The stage the next copies fill was read by every warpgroup's
		// previous (waited-for) wgmma before this barrier.
		next := b.AddI(kt, wgradWGStages-1)
		b.If(b.ICmp(enum.IPredSLT, next, kTiles), func() { ld.load(smem, next) })
		b.cpAsyncCommit()
		sa := b.Add(base, b.MulI(b.URem(kt, ir.Int32(wgradWGStages)), ring.StageBytes))
		out, err := b.WGMMABF16Major(wgradWGTile, acc, desc(b.Add(sa, aOff), hiA), desc(b.AddI(sa, ring.BOff), hiB), offA, offB,
			WGMMAMajor{TransA: true, TransB: true, Wait: true})
		if err != nil {
			werr = err
			return acc
		}
		return out
	})
	if werr != nil {
		return Kernel{}, werr
	}
	b.cpAsyncWait(0)
	// wgmma D fragment (WGMMABF16): register 4j+i holds row 16*(warp%4) +
	// lane/4 + 8*(i/2), column 8j + 2*(lane%4) + i%2 of the warpgroup's 64
	// rows; stored four j (8 pairs) at a time.
	g, q := b.LShr(lane, ir.Int32(2)), b.And(lane, ir.Int32(3))
	r0 := b.Add(b.MulI(wg, 64), b.Add(b.MulI(b.And(warp, ir.Int32(3)), 16), g))
	var groups [][]wgradPair
	for j0 := int64(0); j0 < wgradWGTile/8; j0 += 4 {
		var ps []wgradPair
		for h := int64(0); h < 2; h++ {
			for j := j0; j < j0+4; j++ {
				ps = append(ps, wgradPair{row: b.AddI(r0, 8*h), col: b.AddI(b.MulI(q, 2), 8*j), acc: acc[4*j+2*h:][:2]})
			}
		}
		groups = append(groups, ps)
	}
	b.wgradStorePairs(op, e, m0, n0, groups)
	b.Ret(nil)
	k.SharedBytes = int(wgradWGStages*ring.StageBytes) + 1024
	k.SkipIfZeroT = true
	k.Grid = [3]Expr{Const((N + wgradWGTile - 1) / wgradWGTile), Const((M + wgradWGTile - 1) / wgradWGTile), Const(int64(op.Experts))}
	return k, nil
}
