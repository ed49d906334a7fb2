package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/target"
)

// The sm_80 atom of the grouped-GEMM task: mma.sync.aligned.m16n8k16 bf16 with
// fp32 accumulators (PTX ISA 9.7.14.5.8 "Matrix Fragments for mma.m16n8k16
// with floating point type"), ldmatrix.x4 from padded shared-memory rows
// (PTX ISA 9.7.14.5.15), and a Tile.Stages deep cp.async pipeline
// (PTX ISA 9.7.9.25.3) whose out-of-range 16-byte chunks are zero-filled with
// the src-size operand (src-size 0: nothing is read). One block per work
// item (not persistent): block (x, y) takes tile x of the work list and
// column block y.
//
// Shared memory per stage (layouts.PlanGemmSmem, layouts.PaddedTile): A
// [BM][BK] and B [BNB][BK] bf16 (BNB = B rows of the tile: BN, or 2*BN for
// gated epilogues), each row padded by 16 bytes so that the 8 row addresses
// of an ldmatrix hit distinct bank groups.
//
// For gated epilogues the B tile interleaves gate and up rows (smem row 2j =
// gate row of output column n0+j, row 2j+1 = its up row; layouts.GateUpRows)
// whatever the global layout, so each thread's accumulator pair (c0, c1) of
// an m16n8 fragment is (gate, up) of one output column.

//
// An N-major B (GemmSpec.BNMajor: B_e stored [K, N], the backward's data
// gradients) is kept as BK lines of BNB elements (layouts.NewPaddedTileMN,
// the same 16-byte padding) and read with ldmatrix .trans, which hands each
// thread the B fragment of mma.m16n8k16 from it: no transposed copy of the
// weights.

func init() {
	registerAtom(target.SM80, sm80Plan, atomCaps{nMajorB: sm80NMajorB, noMX: "sm_80 has no fp8 MMA"})
}

// sm80NMajorB: the sm_80 atom reads an N-major B directly (grouped or
// through a pointer table) whenever it can plan the spec.
func sm80NMajorB(s GemmSpec) bool {
	_, err := sm80Plan(s)
	return err == nil
}

// sm80Layout is the derived geometry of one sm_80 GEMM kernel.
type sm80Layout struct {
	BM, BNB, BK, S, W int // tile rows, B-tile rows, K block, stages, warps
	WM, WN            int // warp grid (WM*WN = W)
	MT, NT            int // warp tile: MT rows, NT B-tile rows
	smem              *layouts.GemmSmem
	a                 *layouts.PaddedTile // A tile of a stage (B follows it)
	threads, kTiles   int
	aChunks, bChunks  int // 16-byte chunks per thread per stage
	chunksPerRow      int
	gate              layouts.GateUp
	n, k, brows       int
	bMN               bool // B N-major: stage B is BK lines of BNB elements
	bLine             int  // bytes per line of the stage's B tile
}

// sm80Plan derives the geometry of spec's sm_80 kernel, or says why the atom
// refuses it.
func sm80Plan(s GemmSpec) (sm80Layout, error) {
	var l sm80Layout
	l.BM, l.BK, l.S, l.W = s.Tile.BM, s.Tile.BK, s.Tile.Stages, s.Tile.Warps
	l.gate = s.bTile()
	l.BNB = s.bTileRows()
	l.n, l.k, l.brows, l.bMN = s.N, s.K, s.BRows(), s.BNMajor
	if l.BM%16 != 0 || l.BNB%16 != 0 || l.BK%16 != 0 {
		return l, fmt.Errorf("codegen: %s: sm_80 tile %dx%d(B rows)x%d must be multiples of 16", s.Name, l.BM, l.BNB, l.BK)
	}
	if l.S < 2 {
		return l, fmt.Errorf("codegen: %s: sm_80 needs at least 2 pipeline stages, got %d", s.Name, l.S)
	}
	if s.Tile.BlocksPerSM > 1 {
		return l, fmt.Errorf("codegen: %s: the sm_80 engine launches one block per tile, not a persistent grid of %d blocks per SM", s.Name, s.Tile.BlocksPerSM)
	}
	if !l.warpGrid() {
		return l, fmt.Errorf("codegen: %s: %d warps do not tile %dx%d in m16 x n16 warp tiles", s.Name, l.W, l.BM, l.BNB)
	}
	var err error
	bMajor := layouts.KMajor
	if l.bMN {
		bMajor = layouts.MNMajor
	}
	l.smem, err = layouts.PlanGemmSmem(layouts.GemmConfig{Target: target.SM80, DType: layouts.DTypeBF16,
		M: l.BM, BRows: l.BNB, K: l.BK, Stages: l.S, GateUp: l.gate, N: l.n, BMajor: bMajor})
	if err != nil {
		return l, fmt.Errorf("codegen: %s: %w", s.Name, err)
	}
	l.a = l.smem.A.(*layouts.PaddedTile)
	l.bLine = l.smem.B.(*layouts.PaddedTile).RowBytes()
	l.threads = 32 * l.W
	l.kTiles = (l.k + l.BK - 1) / l.BK
	l.chunksPerRow = l.BK / 8
	bChunks := l.BNB * l.chunksPerRow // as many 16-byte chunks either way
	if (l.BM*l.chunksPerRow)%l.threads != 0 || bChunks%l.threads != 0 {
		return l, fmt.Errorf("codegen: %s: %d threads do not divide the %d+%d 16-byte chunks of a stage", s.Name, l.threads, l.BM*l.chunksPerRow, bChunks)
	}
	l.aChunks = l.BM * l.chunksPerRow / l.threads
	l.bChunks = bChunks / l.threads
	return l, nil
}

// warpGrid picks the factorisation WM x WN of the warps with the squarest
// warp tile of whole m16 x n16 blocks; false when there is none.
func (l *sm80Layout) warpGrid() bool {
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
	return best >= 0
}

// build adds the sm_80 kernel of spec to m.
func (l sm80Layout) build(m *ir.Module, spec GemmSpec, rowsPerT int64) (KernelInfo, error) {
	params := GemmParams(spec)
	b := NewKernel(m, spec.Name, l.threads, gemmIRParams(params)...)
	if err := l.emit(b, spec); err != nil {
		return KernelInfo{}, err
	}
	return KernelInfo{Name: spec.Name, Params: params, Block: l.threads, SharedBytes: l.smem.Bytes,
		Grid: GemmGrid(spec, rowsPerT)}, nil
}

// emit is the sm_80 kernel: the block's work item, the cp.async ring
// (prologue of S-1 stages), the K loop of ldmatrix + mma.sync, the
// epilogue.
func (l sm80Layout) emit(b *Builder, spec GemmSpec) error {
	tid := b.ThreadIdx(ir.X)
	lane, warp := b.LaneWarp()
	w := l.work(b, spec)
	bBase, biasRow := l.expert(b, spec, w.e)
	smemAddr := b.PtrToInt(b.DynSmem())
	ld := l.loader(b, tid, w, bBase, smemAddr)
	for s := 0; s < l.S-1; s++ { // prologue: K blocks 0..S-2
		if s < l.kTiles {
			ld.load(ir.Int32(int64(s)), ir.Int32(int64(s)))
		}
		ld.commit()
	}
	wt := l.warpTile(b, lane, warp)
	acc := l.mainloop(b, ld, wt)
	ld.waitGroup(0)
	return l.epilogue(b, spec, w, wt, lane, biasRow, acc)
}

// work emits the block's work item: tile blockIdx.x of the list (blocks
// past *ntiles exit) or rows blockIdx.x*BM.. of a dense A (blocks past M
// exit), and column block blockIdx.y.
func (l sm80Layout) work(b *Builder, spec GemmSpec) gemmWork {
	var w gemmWork
	if spec.A == ATiled {
		tile := b.BlockIdx(ir.X)
		nt := b.LoadAt(ir.I32, b.Param("ntiles"), 4)
		b.ReturnIf(b.ICmp(enum.IPredSGE, tile, nt))
		q := b.elemPtr(b.Param("tiles"), b.MulI(tile, 2), 4)
		w.e = b.LoadAt(ir.I32, q, 4)
		w.row0 = b.LoadAt(ir.I32, b.ByteOffsetC(q, 4), 4)
		w.rowEnd = b.LoadAt(ir.I32, b.elemPtr(b.Param("offsets"), b.AddI(w.e, 1), 4), 4)
	} else {
		w.e = ir.Int32(0)
		w.row0 = b.MulI(b.BlockIdx(ir.X), int64(l.BM))
		w.rowEnd = b.Param("rows")
		b.ReturnIf(b.ICmp(enum.IPredSGE, w.row0, w.rowEnd))
	}
	w.n0 = b.MulI(b.BlockIdx(ir.Y), int64(spec.Tile.BN)) // first output column
	return w
}

// expert emits expert e's B matrix (global byte pointer) and bias row (nil
// without bias).
func (l sm80Layout) expert(b *Builder, spec GemmSpec, e value.Value) (bBase, biasRow value.Value) {
	if spec.B == BTable {
		addr := b.LoadAt(ir.I64, b.elemPtr(b.Param("b"), e, 8), 8)
		bBase = b.IntToPtr(addr, GPtr)
	} else {
		bBase = b.ByteOffset(b.Param("b"), b.MulI(b.Wide(e), int64(l.brows)*int64(l.k)*2))
	}
	if spec.Bias {
		biasRow = b.ByteOffset(b.Param("bias"), b.MulI(b.Wide(e), int64(l.brows)*4))
	}
	return bBase, biasRow
}
