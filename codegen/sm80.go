package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/target"
)

// sm80Engine is the sm_80 grouped GEMM: mma.sync.aligned.m16n8k16 bf16 with
// fp32 accumulators (PTX ISA 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16
// with floating point type"), ldmatrix.x4 from padded shared-memory rows
// (PTX ISA 9.7.14.5.15), and a Tile.Stages deep cp.async pipeline
// (PTX ISA 9.7.9.25.3) whose out-of-range 16-byte chunks are zero-filled with
// the src-size operand (src-size 0: nothing is read).
//
// Shared memory per stage: A [BM][BK] and B [BNB][BK] bf16 (BNB = B rows of
// the tile: BN, or 2*BN for gated epilogues), each row padded by 16 bytes so
// that the 8 row addresses of an ldmatrix hit distinct bank groups.
//
// For gated epilogues the B tile interleaves gate and up rows (smem row 2j =
// gate row of output column n0+j, row 2j+1 = its up row) whatever the global
// layout, so each thread's accumulator pair (c0, c1) of an m16n8 fragment is
// (gate, up) of one output column.
type sm80Engine struct{}

func init() { RegisterEngine(target.SM80, func() Engine { return sm80Engine{} }) }

// Target returns "sm_80".
func (sm80Engine) Target() target.Target { return target.SM80 }

// sm80Layout is the derived geometry of one sm_80 GEMM kernel.
type sm80Layout struct {
	BM, BNB, BK, S, W   int // tile rows, B-tile rows, K block, stages, warps
	WM, WN              int // warp grid (WM*WN = W)
	MT, NT              int // warp tile: MT rows, NT B-tile rows
	rowBytes            int // padded smem row stride
	aBytes, stageBytes  int
	threads, kTiles     int
	aChunks, bChunks    int // 16-byte chunks per thread per stage
	chunksPerRow        int
	sharedBytes         int
	gated, interleaved  bool
	n, k, brows, bmOuts int
}

func sm80Plan(s GemmSpec) (sm80Layout, error) {
	var l sm80Layout
	l.BM, l.BK, l.S, l.W = s.Tile.BM, s.Tile.BK, s.Tile.Stages, s.Tile.Warps
	l.gated = s.Epilogue == EpiGated
	l.interleaved = l.gated && s.Gate == GateInterleaved
	l.BNB = s.Tile.BN
	if l.gated {
		l.BNB *= 2
	}
	l.n, l.k, l.brows = s.N, s.K, s.BRows()
	if l.BM%16 != 0 || l.BNB%16 != 0 || l.BK%16 != 0 {
		return l, fmt.Errorf("codegen: %s: sm_80 tile %dx%d(B rows)x%d must be multiples of 16", s.Name, l.BM, l.BNB, l.BK)
	}
	if l.S < 2 {
		return l, fmt.Errorf("codegen: %s: sm_80 needs at least 2 pipeline stages, got %d", s.Name, l.S)
	}
	// Warp grid: the factorisation with the squarest warp tile.
	best := -1
	for wm := 1; wm <= l.W; wm++ {
		if l.W%wm != 0 {
			continue
		}
		wn := l.W / wm
		if (l.BM/16)%wm != 0 || (l.BNB/16)%wn != 0 {
			continue
		}
		mt, nt := l.BM/wm, l.BNB/wn
		cost := mt + nt
		if best < 0 || cost < best {
			best, l.WM, l.WN, l.MT, l.NT = cost, wm, wn, mt, nt
		}
	}
	if best < 0 {
		return l, fmt.Errorf("codegen: %s: %d warps do not tile %dx%d in m16 x n16 warp tiles", s.Name, l.W, l.BM, l.BNB)
	}
	l.threads = 32 * l.W
	l.rowBytes = 2*l.BK + 16
	l.aBytes = l.BM * l.rowBytes
	l.stageBytes = (l.BM + l.BNB) * l.rowBytes
	l.sharedBytes = l.S * l.stageBytes
	l.kTiles = (l.k + l.BK - 1) / l.BK
	l.chunksPerRow = l.BK / 8
	if (l.BM*l.chunksPerRow)%l.threads != 0 || (l.BNB*l.chunksPerRow)%l.threads != 0 {
		return l, fmt.Errorf("codegen: %s: %d threads do not divide the %d+%d 16-byte chunks of a stage", s.Name, l.threads, l.BM*l.chunksPerRow, l.BNB*l.chunksPerRow)
	}
	l.aChunks = l.BM * l.chunksPerRow / l.threads
	l.bChunks = l.BNB * l.chunksPerRow / l.threads
	return l, nil
}

// GroupedGEMM adds the sm_80 kernel of spec to m.
func (sm80Engine) GroupedGEMM(m *ir.Module, spec GemmSpec, rowsPerT int64) (KernelInfo, error) {
	if err := spec.Validate(); err != nil {
		return KernelInfo{}, err
	}
	l, err := sm80Plan(spec)
	if err != nil {
		return KernelInfo{}, err
	}
	params := GemmParams(spec)
	b := NewKernel(m, spec.Name, l.threads, gemmIRParams(params)...)
	if err := l.emit(b, spec); err != nil {
		return KernelInfo{}, err
	}
	return KernelInfo{Name: spec.Name, Params: params, Block: l.threads, SharedBytes: l.sharedBytes,
		Grid: GemmGrid(spec, rowsPerT)}, nil
}

func (l sm80Layout) emit(b *Builder, spec GemmSpec) error {
	tid := b.ThreadIdx(ir.X)
	lane, warp := b.LaneWarp()
	K := int64(l.k)

	// Block → (expert, first row, end of the expert's rows).
	var e, row0, rowEnd value.Value
	if spec.A == ATiled {
		tile := b.BlockIdx(ir.X)
		nt := b.LoadAt(ir.I32, b.Param("ntiles"), 4)
		b.ReturnIf(b.ICmp(enum.IPredSGE, tile, nt))
		q := b.elemPtr(b.Param("tiles"), b.MulI(tile, 2), 4)
		e = b.LoadAt(ir.I32, q, 4)
		row0 = b.LoadAt(ir.I32, b.ByteOffsetC(q, 4), 4)
		rowEnd = b.LoadAt(ir.I32, b.elemPtr(b.Param("offsets"), b.AddI(e, 1), 4), 4)
	} else {
		e = ir.Int32(0)
		row0 = b.MulI(b.BlockIdx(ir.X), int64(l.BM))
		rowEnd = b.Param("rows")
		b.ReturnIf(b.ICmp(enum.IPredSGE, row0, rowEnd))
	}
	n0 := b.MulI(b.BlockIdx(ir.Y), int64(spec.Tile.BN)) // first output column

	// Expert e's B matrix and bias row.
	var bBase value.Value
	if spec.B == BTable {
		addr := b.LoadAt(ir.I64, b.elemPtr(b.Param("b"), e, 8), 8)
		bBase = b.IntToPtr(addr, GPtr)
	} else {
		bBase = b.ByteOffset(b.Param("b"), b.MulI(b.Wide(e), int64(l.brows)*K*2))
	}
	var biasRow value.Value
	if spec.Bias {
		biasRow = b.ByteOffset(b.Param("bias"), b.MulI(b.Wide(e), int64(l.brows)*4))
	}

	smem := b.DynSmem()
	smemAddr := b.PtrToInt(smem)
	aGlobal := b.Param("a")

	// Loader: each thread owns aChunks + bChunks 16-byte chunks per stage,
	// fixed for the whole K loop. For each: smem offset within a stage,
	// global address at k = 0, row validity, and the chunk's k offset.
	type chunk struct {
		sOff     value.Value // i64 byte offset inside the stage
		gAddr    value.Value // i64 global address of the chunk at kt = 0
		rowOK    value.Value // i1: the chunk's row exists
		kElem    value.Value // i32 first k of the chunk inside a K block
		fallback value.Value // i64 an in-bounds address for masked chunks
	}
	var chunks []chunk
	cpr := int64(l.chunksPerRow)
	aFallback := b.PtrToInt(aGlobal)
	bFallback := b.PtrToInt(bBase)
	for i := 0; i < l.aChunks+l.bChunks; i++ {
		isA := i < l.aChunks
		idx := i
		if !isA {
			idx = i - l.aChunks
		}
		c := b.AddI(tid, int64(idx*l.threads))
		r := b.UDiv(c, ir.Int32(cpr))
		kc := b.URem(c, ir.Int32(cpr))
		kByte := b.MulI(b.Wide(kc), 16)
		ch := chunk{kElem: b.MulI(kc, 8)}
		if isA {
			ch.sOff = b.Add(b.MulI(b.Wide(r), int64(l.rowBytes)), kByte)
			grow := b.Add(row0, r)
			ch.rowOK = b.ICmp(enum.IPredSLT, grow, rowEnd)
			ch.gAddr = b.Add(aFallback, b.Add(b.MulI(b.Wide(grow), K*2), kByte))
			ch.fallback = aFallback
		} else {
			ch.sOff = b.Add(ir.Int64(int64(l.aBytes)), b.Add(b.MulI(b.Wide(r), int64(l.rowBytes)), kByte))
			var grow value.Value
			switch {
			case !l.gated:
				grow = b.Add(n0, r)
				ch.rowOK = b.ICmp(enum.IPredSLT, grow, ir.Int32(int64(l.n)))
			case l.interleaved:
				grow = b.Add(b.MulI(n0, 2), r)
				ch.rowOK = b.ICmp(enum.IPredSLT, grow, ir.Int32(int64(2*l.n)))
			default: // halves: smem row 2j gate, 2j+1 up
				j := b.Add(n0, b.LShr(r, ir.Int32(1)))
				odd := b.And(r, ir.Int32(1))
				grow = b.Add(j, b.MulI(odd, int64(l.n)))
				ch.rowOK = b.ICmp(enum.IPredSLT, j, ir.Int32(int64(l.n)))
			}
			ch.gAddr = b.Add(bFallback, b.Add(b.MulI(b.Wide(grow), K*2), kByte))
			ch.fallback = bFallback
		}
		chunks = append(chunks, ch)
	}

	// load issues the cp.async of K block kt (i32) into stage st (i32).
	load := func(kt, st value.Value) {
		stBase := b.Add(smemAddr, b.MulI(b.Wide(st), int64(l.stageBytes)))
		kByte := b.MulI(b.Wide(kt), int64(l.BK)*2)
		kFirst := b.MulI(kt, int64(l.BK))
		for _, ch := range chunks {
			ok := b.And(ch.rowOK, b.ICmp(enum.IPredSLT, b.Add(kFirst, ch.kElem), ir.Int32(K)))
			src := b.Select(ok, b.Add(ch.gAddr, kByte), ch.fallback)
			size := b.Select(ok, ir.Int32(16), ir.Int32(0))
			b.Asm("cp.async.cg.shared.global [$0], [$1], 16, $2;", "l,l,r,~{memory}",
				b.Add(stBase, ch.sOff), src, size)
		}
	}
	commit := func() { b.Asm("cp.async.commit_group;", "~{memory}") }
	waitGroup := func(n int) { b.Asm(fmt.Sprintf("cp.async.wait_group %d;", n), "~{memory}") }

	// Prologue: K blocks 0..S-2.
	for s := 0; s < l.S-1; s++ {
		if s < l.kTiles {
			load(ir.Int32(int64(s)), ir.Int32(int64(s)))
		}
		commit()
	}

	// Warp tile origin and per-lane ldmatrix offsets.
	wm := b.UDiv(warp, ir.Int32(int64(l.WN)))
	wn := b.URem(warp, ir.Int32(int64(l.WN)))
	mRow0 := b.MulI(wm, int64(l.MT)) // first A row of the warp tile
	nRow0 := b.MulI(wn, int64(l.NT)) // first B row of the warp tile
	rb := int64(l.rowBytes)
	// A: lane l addresses row (l%16), k 8*(l/16).
	aLane := b.Add(b.MulI(b.Wide(b.Add(mRow0, b.And(lane, ir.Int32(15)))), rb), b.MulI(b.Wide(b.LShr(lane, ir.Int32(4))), 16))
	// B: lane l addresses row 8*(l/16) + l%8, k 8*((l/8)%2).
	bRowL := b.Add(nRow0, b.Add(b.MulI(b.LShr(lane, ir.Int32(4)), 8), b.And(lane, ir.Int32(7))))
	bLane := b.Add(ir.Int64(int64(l.aBytes)), b.Add(b.MulI(b.Wide(bRowL), rb), b.MulI(b.Wide(b.And(b.LShr(lane, ir.Int32(3)), ir.Int32(1))), 16)))

	mFr, nFr := l.MT/16, l.NT/8
	nAcc := mFr * nFr * 4
	init := make([]value.Value, nAcc)
	for i := range init {
		init[i] = ir.Float32(0)
	}
	// ldmatrix and mma.sync touch registers (ldmatrix reads stages that
	// cp.async.wait_group and bar.sync order): no memory clobber.
	i4 := ir.Struct(ir.I32, ir.I32, ir.I32, ir.I32)
	f4 := ir.Struct(ir.F32, ir.F32, ir.F32, ir.F32)
	acc := b.Loop(ir.Int32(0), ir.Int32(int64(l.kTiles)), ir.Int32(1), init, func(kt value.Value, acc []value.Value) []value.Value {
		waitGroup(l.S - 2)
		b.SyncThreads()
		st := b.URem(kt, ir.Int32(int64(l.S)))
		stBase := b.Add(smemAddr, b.MulI(b.Wide(st), int64(l.stageBytes)))
		out := make([]value.Value, nAcc)
		copy(out, acc)
		for kk := 0; kk < l.BK/16; kk++ {
			aFr := make([][4]value.Value, mFr)
			for mi := 0; mi < mFr; mi++ {
				addr := b.Add(stBase, b.Add(aLane, ir.Int64(int64(mi*16)*rb+int64(kk*32))))
				r := b.AsmCallNoMemory("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l", i4, addr)
				for j := 0; j < 4; j++ {
					aFr[mi][j] = b.ExtractValue(r, j)
				}
			}
			bFr := make([][2]value.Value, nFr)
			for nj := 0; nj < nFr; nj += 2 {
				addr := b.Add(stBase, b.Add(bLane, ir.Int64(int64(nj*8)*rb+int64(kk*32))))
				r := b.AsmCallNoMemory("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l", i4, addr)
				bFr[nj] = [2]value.Value{b.ExtractValue(r, 0), b.ExtractValue(r, 1)}
				bFr[nj+1] = [2]value.Value{b.ExtractValue(r, 2), b.ExtractValue(r, 3)}
			}
			for mi := 0; mi < mFr; mi++ {
				for nj := 0; nj < nFr; nj++ {
					base := (mi*nFr + nj) * 4
					r := b.AsmCallNoMemory("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};",
						"=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", f4,
						aFr[mi][0], aFr[mi][1], aFr[mi][2], aFr[mi][3], bFr[nj][0], bFr[nj][1],
						out[base], out[base+1], out[base+2], out[base+3])
					for j := 0; j < 4; j++ {
						out[base+j] = b.ExtractValue(r, j)
					}
				}
			}
		}
		next := b.AddI(kt, int64(l.S-1))
		b.If(b.ICmp(enum.IPredSLT, next, ir.Int32(int64(l.kTiles))), func() {
			load(next, b.URem(next, ir.Int32(int64(l.S))))
		})
		commit()
		return out
	})
	waitGroup(0)

	// Epilogue: fragment (mi, nj) holds rows g, g+8 (g = lane/4) and B-tile
	// columns 2*(lane%4), +1 of the m16n8 block.
	ep := NewEpilogue(spec, EpilogueArgs{C: b.Param("c"), Bias: biasRow, RowEnd: rowEnd})
	g := b.LShr(lane, ir.Int32(2))
	q := b.And(lane, ir.Int32(3))
	for mi := 0; mi < mFr; mi++ {
		r0 := b.Add(row0, b.Add(mRow0, b.AddI(g, int64(mi*16))))
		r1 := b.AddI(r0, 8)
		for nj := 0; nj < nFr; nj++ {
			base := (mi*nFr + nj) * 4
			colB := b.Add(nRow0, b.AddI(b.MulI(q, 2), int64(nj*8))) // B-tile column of c0
			var col value.Value
			if l.gated {
				col = b.Add(n0, b.LShr(colB, ir.Int32(1)))
			} else {
				col = b.Add(n0, colB)
			}
			if err := ep.Emit(b, r0, col, []value.Value{acc[base], acc[base+1]}); err != nil {
				return err
			}
			if err := ep.Emit(b, r1, col, []value.Value{acc[base+2], acc[base+3]}); err != nil {
				return err
			}
		}
	}
	b.Ret(nil)
	return nil
}
