package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/target"
)

// sm90Engine is the sm_90a (Hopper) grouped GEMM: TMA loads into a
// Tile.Stages deep shared-memory ring guarded by full/empty mbarriers, and
// wgmma.mma_async m64nNk16 bf16 → fp32 from 128-byte-swizzled K-major tiles.
// PTX ISA 8.0 sections: cp.async.bulk.tensor, mbarrier, wgmma (9.7.15),
// matrix descriptor format (9.7.15.5.1), setmaxnreg; what the H200 showed
// beyond the ISA text is in docs/hardware.md.
//
// Block: one producer warpgroup (warpgroup 0; its first thread issues every
// TMA load, the warpgroup gives registers back with setmaxnreg.dec) and
// BM/64 consumer warpgroups (warpgroup c owns rows 64(c-1).. of the tile,
// issues the wgmma and runs the epilogue of its rows). The grid is
// persistent: block x walks the work items x, x+gridDim.x, ... where item
// i = tile*nBlocks + column block, tile indexing the tile list (ATiled) or
// the BM-row blocks of A (ADense). Producer and consumers walk the same item
// sequence, so the ring's stage and phase simply continue from item to item.
//
// Shared memory (dynamic, realigned to 1024 bytes): Stages stages of
// [A: BK/64 atoms of BM rows x 128 B][B: BK/64 atoms of NB rows x 128 B]
// (an atom is one TMA box of 64 bf16 along K, 128-byte swizzled, so every
// atom starts 1024-byte aligned), then Stages full and Stages empty
// mbarriers. full[s] expects one arrival (the producer's arrive.expect_tx)
// plus the transaction bytes of the stage; empty[s] expects one arrival per
// consumer warp (lane 0, after wgmma.wait_group shows the warp's reads of
// the stage are done).
//
// Operands through TMA (tensor maps are kernel parameters after the
// GemmParams, see sm90TensorMaps):
//   - A: 2D map over [rowsTotal, K] (rowsTotal = rowsPerT*T), box [BM, 64];
//     the row coordinate is the tile's first row (segment offset + tile row
//     from the tile list). Rows past the tensor are zero-filled by TMA; rows
//     past the expert's segment but inside the tensor are loaded and never
//     stored (the epilogue predicates on RowEnd).
//   - B (BGrouped): 3D map over [E, BRows, K], box [1, rows, 64], so rows
//     past an expert's BRows are zero-filled instead of reading the next
//     expert. Gated halves: two boxes of BN rows (gate rows n0.., up rows
//     N+n0..) form the NB = 2*BN row B tile (accumulator columns 0..BN-1
//     gate, BN..2BN-1 up: one thread holds both halves of a column);
//     interleaved: one box of 2*BN rows from row 2*n0 (accumulator column pair
//     (2c, 2c+1) = (gate, up) of output column n0+c); plain: one box of BN rows.
//   - K need not be a multiple of 64: the last K block reads past K and TMA
//     fills zeros, which add nothing.
//
// Each consumer's K loop over one work item is a single inline-PTX statement
// (WGMMAMainloop): the accumulators are outputs of that statement only, so
// no register copy can land between a wgmma and the wait_group covering it
// whatever the backend's register allocation (ptxas would otherwise inject
// warpgroup.wait and serialise the tensor-core pipeline). The loop keeps one
// wgmma group in flight (wait_group 1) and releases the previous stage. A
// consumer warpgroup whose 64 rows all lie past its expert's segment (the
// ragged last tile of an expert) runs WGMMADrain instead: it waits for and
// releases every stage but issues no wgmma.
//
// Staged epilogue (when a BM x BN bf16 staging tile fits next to the ring,
// and B is not a pointer table): consumers compute the outputs with the
// shared Epilogue (Epilogue.Values: bias, activation), round them to bf16
// into the staging tile and arrive on staging-full, then go straight on to
// the next work item's K loop; warps 1-3 of the producer warpgroup store
// the staged tile to C with coalesced, predicated 16-byte stores (rows
// below RowEnd, columns below N) and arrive on staging-empty. The global
// stores thus overlap the next tile's wgmma. Otherwise the consumers store
// directly through Epilogue.Emit.
//
// BTable (one allocation per expert): a TMA tensor map names one global
// address, and swapping it per expert would need tensormap.replace on a
// global-memory copy of the map (a workspace the engine interface has no
// buffer for). Instead all 128 producer threads copy the B tile with
// cp.async (16-byte chunks, src-size 0 zero-fill out of range) into the same
// 128-byte swizzled layout TMA writes, and arrive on the stage's full
// barrier with cp.async.mbarrier.arrive.noinc (full then expects 1 + 128
// arrivals: thread 0's arrive.expect_tx for A's TMA bytes, and one per
// thread); consumers issue fence.proxy.async.shared::cta after the wait so
// the generic-proxy writes are visible to wgmma's async-proxy reads. A still
// comes through TMA.
type sm90Engine struct{}

func init() { RegisterEngine(target.SM90a, func() Engine { return sm90Engine{} }) }

// Target returns "sm_90a".
func (sm90Engine) Target() target.Target { return target.SM90a }

// sm90Persistent is the persistent grid of the sm_90a engine: one block per
// SM of the target table's reference part (H100/H200 SXM: 132). On a part
// with fewer SMs the surplus blocks simply wait for a free SM; blocks
// without work exit after initialising their barriers.
var sm90Persistent = target.SM90a.SMs()

// sm90Layout is the derived geometry of one sm_90a GEMM kernel.
type sm90Layout struct {
	BM, BN, NB, BK, S int // tile rows, output columns, B-tile rows (wgmma N), K block, stages
	WG                int // consumer warpgroups (BM/64)
	atoms             int // 64-wide K atoms per stage (BK/64)
	threads           int
	aAtom, bAtom      int // bytes of one A / B atom
	stageBytes        int
	barOff            int  // offset of the mbarriers from the aligned base
	sharedBytes       int  // dynamic shared memory requested (with 1024 of alignment slack)
	staged            bool // staged epilogue (see sm90Engine)
	stgOff, stgStride int  // staging tile offset and row stride (bytes)
	kTiles, nBlocks   int
	gated, interleave bool
	prodRegs, mmaRegs int    // setmaxnreg targets (0: do not rebalance)
	launchRegs        int    // registers per thread at launch (.maxnreg) when rebalancing
	descHi            uint64 // wgmma smem descriptor bits of the K-major 128B-swizzled atoms
}

func sm90Plan(s GemmSpec) (sm90Layout, error) {
	var l sm90Layout
	l.BM, l.BN, l.BK, l.S = s.Tile.BM, s.Tile.BN, s.Tile.BK, s.Tile.Stages
	l.gated = s.Epilogue == EpiGated
	l.interleave = l.gated && s.Gate == GateInterleaved
	l.NB = l.BN
	if l.gated {
		l.NB = 2 * l.BN
	}
	switch {
	case l.BM%64 != 0 || l.BM < 64 || l.BM > 192:
		return l, fmt.Errorf("codegen: %s: sm_90a tile BM = %d must be 64, 128 or 192 (one consumer warpgroup per 64 rows, wgmma m64)", s.Name, l.BM)
	case l.BN%8 != 0 || l.NB > 256:
		return l, fmt.Errorf("codegen: %s: sm_90a B tile of %d rows (BN = %d) must be a multiple of 8 up to 256 (wgmma m64nNk16; TMA box <= 256 rows)", s.Name, l.NB, l.BN)
	case l.BK%64 != 0:
		return l, fmt.Errorf("codegen: %s: sm_90a K block %d must be a multiple of 64 (one 128-byte swizzle row of bf16 per TMA box)", s.Name, l.BK)
	case l.S < 2:
		return l, fmt.Errorf("codegen: %s: sm_90a needs at least 2 pipeline stages, got %d", s.Name, l.S)
	case s.Tile.Cluster > 1:
		return l, fmt.Errorf("codegen: %s: sm_90a engine runs without clusters (Cluster = %d)", s.Name, s.Tile.Cluster)
	}
	if w := s.Tile.Warps; w != 0 && w != 4*(l.BM/64) {
		return l, fmt.Errorf("codegen: %s: sm_90a tile BM = %d needs %d consumer warps (one warpgroup per 64 rows), schedule has %d", s.Name, l.BM, 4*(l.BM/64), w)
	}
	l.WG = l.BM / 64
	l.atoms = l.BK / 64
	l.threads = 128 * (l.WG + 1)
	l.aAtom = l.BM * 128
	l.bAtom = l.NB * 128
	l.stageBytes = l.atoms * (l.aAtom + l.bAtom)
	l.barOff = l.S * l.stageBytes
	l.sharedBytes = 1024 + l.barOff + 16*l.S
	lim := target.SM90a.SharedMemoryLimit()
	// Staged epilogue when the staging tile fits (not with BTable, whose
	// producer warps are busy copying B).
	if s.B != BTable {
		stride := 2*l.BN + 16 // padded rows: the 8 rows of a fragment store hit distinct banks
		if sb := 1024 + l.barOff + l.BM*stride + 16*l.S + 16; sb <= lim {
			l.staged, l.stgOff, l.stgStride = true, l.barOff, stride
			l.barOff += l.BM * stride
			l.sharedBytes = sb
		}
	}
	if l.sharedBytes > lim {
		return l, fmt.Errorf("codegen: %s: sm_90a tile %dx%dx%d with %d stages needs %d bytes of shared memory (> %d)", s.Name, l.BM, l.NB, l.BK, l.S, l.sharedBytes, lim)
	}
	l.kTiles = (s.K + l.BK - 1) / l.BK
	l.nBlocks = (s.N + l.BN - 1) / l.BN
	var err error
	if l.descHi, err = SM90DescK128B(); err != nil {
		return l, fmt.Errorf("codegen: %s: %w", s.Name, err)
	}
	// Registers: 65536 per SM, one block per SM. The kernel starts with
	// launchRegs = 65536/threads per thread (pinned with .maxnreg, as
	// setmaxnreg requires); the producer warpgroup drops to prodRegs (40; 48
	// with the staged epilogue's store warps; 72 when it copies B itself:
	// with 64, ptxas spilled in the GPT-OSS 128x128 pointer-table case)
	// and the consumers take what it frees:
	// setmaxnreg.inc blocks until the registers are in the pool, so the
	// consumers' target must not exceed launchRegs + freed/(128*WG).
	if l.WG >= 2 {
		l.launchRegs = (65536 / l.threads) &^ 7
		l.prodRegs = 40
		switch {
		case s.B == BTable:
			l.prodRegs = 72 // address arithmetic of the cp.async copies of B
		case l.staged:
			l.prodRegs = 48 // the store warps' copy loop
		}
		l.mmaRegs = ((l.launchRegs*l.threads - 128*l.prodRegs) / (128 * l.WG)) &^ 7
		if l.mmaRegs > 240 {
			l.mmaRegs = 240
		}
	}
	if acc := l.NB / 2; l.WG >= 2 && acc+40 > l.mmaRegs {
		return l, fmt.Errorf("codegen: %s: sm_90a tile BM = %d with %d accumulators per thread exceeds the %d registers of a consumer thread", s.Name, l.BM, acc, l.mmaRegs)
	}
	return l, nil
}

// sm90TensorMaps returns the tensor-map parameters (after GemmParams) of an
// sm_90a / sm_100a GEMM kernel: "tmap_a" over A and "tmap_b" over B, both
// bf16, 128-byte swizzle, boxes of 64 elements along K.
//
// The constant dimensions and strides are checked against the limits of
// cuTensorMapEncodeTiled (CUDA driver API: dimensions at most 2^32
// elements, strides below 2^40 bytes) so that a layer too large for TMA is
// refused when it is built, not when it is launched.
func sm90TensorMaps(s GemmSpec, rowsPerT int64, bm, bBoxRows int) ([]Param, error) {
	k := int64(s.K)
	rows := PerT(rowsPerT, 0)
	rows.Min = 1
	br := int64(s.BRows())
	for _, c := range []struct {
		what  string
		v     int64
		limit int64
	}{
		{"K (elements)", k, 1 << 32},
		{"B rows (elements)", br, 1 << 32},
		{"experts", int64(s.Experts), 1 << 32},
		{"B expert stride (bytes)", 2 * k * br, 1<<40 - 1},
	} {
		if c.v > c.limit {
			return nil, fmt.Errorf("codegen: %s: %s = %d exceeds the TMA tensor-map limit %d (cuTensorMapEncodeTiled)", s.Name, c.what, c.v, c.limit)
		}
	}
	return []Param{
		{Name: "tmap_a", Type: ParamTmap, Size: 128, Align: 64, Role: RoleTensorMap, TensorMap: &TensorMap{
			Operand: RoleA, DType: "bf16",
			Dims:        []Expr{Const(k), rows},
			StrideBytes: []Expr{Const(2 * k)},
			Box:         []int{64, bm}, Swizzle: 128}},
		{Name: "tmap_b", Type: ParamTmap, Size: 128, Align: 64, Role: RoleTensorMap, TensorMap: &TensorMap{
			Operand: RoleB, DType: "bf16",
			Dims:        []Expr{Const(k), Const(br), Const(int64(s.Experts))},
			StrideBytes: []Expr{Const(2 * k), Const(2 * k * br)},
			Box:         []int{64, bBoxRows, 1}, Swizzle: 128}},
	}, nil
}

// bBoxRows is the row count of one B TMA box.
func (l sm90Layout) bBoxRows() int {
	if l.gated && !l.interleave {
		return l.BN
	}
	return l.NB
}

// GroupedGEMM adds the sm_90a kernel of spec to m.
func (sm90Engine) GroupedGEMM(m *ir.Module, spec GemmSpec, rowsPerT int64) (KernelInfo, error) {
	if err := spec.Validate(); err != nil {
		return KernelInfo{}, err
	}
	l, err := sm90Plan(spec)
	if err != nil {
		return KernelInfo{}, err
	}
	tmaps, err := sm90TensorMaps(spec, rowsPerT, l.BM, l.bBoxRows())
	if err != nil {
		return KernelInfo{}, err
	}
	params := append(GemmParams(spec), tmaps...)
	if spec.B == BTable {
		params = params[:len(params)-1] // B comes through cp.async: no tensor map
	}
	b := NewKernel(m, spec.Name, l.threads, gemmIRParams(params)...)
	b.MinBlocksPerSM(1)
	if l.launchRegs > 0 {
		b.MaxRegisters(l.launchRegs)
	}
	if err := l.emit(b, spec); err != nil {
		return KernelInfo{}, err
	}
	return KernelInfo{Name: spec.Name, Params: params, Block: l.threads, SharedBytes: l.sharedBytes,
		Grid: [3]Expr{persistentGrid(spec.Tile, sm90Persistent), Const(1), Const(1)}, GridPerSM: spec.Tile.Grid == 0}, nil
}

// gemmWork is one work item of a persistent grouped GEMM.
type gemmWork struct {
	e, row0, rowEnd, n0 value.Value // expert, first row, row bound, first output column (i32)
}

// gemmItems emits the work-item count of a persistent grouped GEMM with bm
// rows per tile and nBlocks column blocks.
func gemmItems(b *Builder, s GemmSpec, bm, nBlocks int) value.Value {
	var tiles value.Value
	if s.A == ATiled {
		tiles = b.LoadAt(ir.I32, b.Param("ntiles"), 4)
	} else {
		tiles = b.UDiv(b.AddI(b.Param("rows"), int64(bm-1)), ir.Int32(int64(bm)))
	}
	return b.MulI(tiles, int64(nBlocks))
}

// gemmDecode emits the decoding of work item it.
func gemmDecode(b *Builder, s GemmSpec, it value.Value, bm, bn, nBlocks int) gemmWork {
	t := b.UDiv(it, ir.Int32(int64(nBlocks)))
	nb := b.URem(it, ir.Int32(int64(nBlocks)))
	var w gemmWork
	w.n0 = b.MulI(nb, int64(bn))
	if s.A == ATiled {
		q := b.ByteOffset(b.Param("tiles"), b.MulI(b.Wide(t), 8))
		w.e = b.LoadAt(ir.I32, q, 4)
		w.row0 = b.LoadAt(ir.I32, b.ByteOffsetC(q, 4), 4)
		w.rowEnd = b.LoadAt(ir.I32, b.ByteOffset(b.Param("offsets"), b.MulI(b.Wide(b.AddI(w.e, 1)), 4)), 4)
	} else {
		w.e = ir.Int32(0)
		w.row0 = b.MulI(t, int64(bm))
		w.rowEnd = b.Param("rows")
	}
	return w
}

// zerosF32 returns n float 0.0 constants.
func zerosF32(n int) []value.Value {
	z := make([]value.Value, n)
	for i := range z {
		z[i] = constant.NewFloat(types.Float, 0)
	}
	return z
}

// ringNext advances a (stage, phase) pair of an S-stage ring: the phase
// parity flips each time the stage wraps to 0.
func ringNext(b *Builder, stage, phase value.Value, S int) (value.Value, value.Value) {
	n := b.AddI(stage, 1)
	wrap := b.ICmp(enum.IPredEQ, n, ir.Int32(int64(S)))
	return b.Select(wrap, ir.Int32(0), n), b.Select(wrap, b.Xor(phase, ir.Int32(1)), phase)
}

func (l sm90Layout) emit(b *Builder, spec GemmSpec) error {
	tid := b.ThreadIdx(ir.X)
	wg := b.LShr(tid, ir.Int32(7))
	base := b.SharedBase1024()
	bars := b.AddI(base, int64(l.barOff))
	tmA := b.PtrToInt(b.Param("tmap_a"))
	var tmB value.Value
	fullCount := 1
	if spec.B == BTable {
		fullCount += 128 // one cp.async arrival per producer thread
	} else {
		tmB = b.PtrToInt(b.Param("tmap_b"))
	}

	b.If(b.ICmp(enum.IPredEQ, tid, ir.Int32(0)), func() {
		for s := 0; s < l.S; s++ {
			b.MbarInit(b.AddI(bars, int64(8*s)), fullCount)
			b.MbarInit(b.AddI(bars, int64(8*(l.S+s))), 4*l.WG)
		}
		if l.staged {
			b.MbarInit(b.AddI(bars, int64(16*l.S)), 128*l.WG) // staging full: every consumer thread
			b.MbarInit(b.AddI(bars, int64(16*l.S+8)), 96)     // staging empty: every store thread
		}
		b.FenceMbarInit()
		b.PrefetchTensorMap(tmA)
		if tmB != nil {
			b.PrefetchTensorMap(tmB)
		}
	})
	b.SyncThreads()
	items := gemmItems(b, spec, l.BM, l.nBlocks)
	first, step := b.BlockIdx(ir.X), b.GridDim(ir.X)
	var err error

	b.IfElse(b.ICmp(enum.IPredEQ, wg, ir.Int32(0)), func() {
		// Producer warpgroup.
		if l.prodRegs > 0 {
			b.SetMaxNReg(false, l.prodRegs)
		}
		pr := gemmProducer{spec: spec, BM: l.BM, BN: l.BN, NB: l.NB, BK: l.BK, S: l.S, atoms: l.atoms,
			aAtom: l.aAtom, bAtom: l.bAtom, stageBytes: l.stageBytes, kTiles: l.kTiles, nBlocks: l.nBlocks,
			gated: l.gated, interleave: l.interleave, threads: 128, base: base, bars: bars, tmA: tmA, tmB: tmB}
		if l.staged {
			b.IfElse(b.ICmp(enum.IPredULT, tid, ir.Int32(32)), func() {
				err = joinErr(err, pr.emit(b, tid, first, items, step))
			}, func() {
				l.storeWarps(b, spec, b.AddI(tid, -32), base, bars, first, items, step)
			})
		} else {
			err = joinErr(err, pr.emit(b, tid, first, items, step))
		}
	}, func() {
		// Consumer warpgroups.
		if l.mmaRegs > 0 {
			b.SetMaxNReg(true, l.mmaRegs)
		}
		c := b.AddI(wg, -1)
		lane, warp := b.LaneWarp()
		laneZero := b.ZExt(b.ICmp(enum.IPredEQ, lane, ir.Int32(0)), ir.I32)
		aOff := b.MulI(c, 64*128) // this warpgroup's 64 rows inside an A atom
		offA, offB := make([]int, 0, 4*l.atoms), make([]int, 0, 4*l.atoms)
		for a := 0; a < l.atoms; a++ {
			for k := 0; k < 4; k++ {
				offA = append(offA, (a*l.aAtom+32*k)>>4)
				offB = append(offB, (a*l.bAtom+32*k)>>4)
			}
		}
		ml := WGMMAMainloop{N: l.NB, Stages: l.S, StageBytes: l.stageBytes, BOffset: l.atoms * l.aAtom,
			OffA: offA, OffB: offB, DescHi: l.descHi, ProxyFence: spec.B == BTable}
		b.Loop(first, items, step, []value.Value{ir.Int32(0), ir.Int32(0), ir.Int32(0)}, func(it value.Value, v []value.Value) []value.Value {
			// A warpgroup whose 64 rows all lie past the expert's segment
			// (the ragged last tile of an expert) drains the ring instead of
			// issuing wgmma; its accumulators are zero and none of its rows
			// is stored.
			w := gemmDecode(b, spec, it, l.BM, l.BN, l.nBlocks)
			active := b.ICmp(enum.IPredSLT, b.Add(w.row0, b.MulI(c, 64)), w.rowEnd)
			kt := ir.Int32(int64(l.kTiles))
			res := b.IfElseVals(active, func() []value.Value {
				acc, stage, phase, e := b.WGMMAMainloop(ml, v[0], v[1], kt, bars, base, aOff, laneZero)
				if e != nil {
					err = e
					return append(zerosF32(l.NB/2), v[0], v[1])
				}
				return append(acc, stage, phase)
			}, func() []value.Value {
				stage, phase := b.WGMMADrain(ml, v[0], v[1], kt, bars, laneZero)
				return append(zerosF32(l.NB/2), stage, phase)
			})
			acc, stage, phase := res[:l.NB/2], res[l.NB/2], res[l.NB/2+1]
			if err != nil {
				return v
			}
			sph := v[2]
			if l.staged {
				err = joinErr(err, l.stageOut(b, spec, w, c, lane, warp, acc, base, bars, sph))
				sph = b.Xor(sph, ir.Int32(1))
			} else if e := l.epilogue(b, spec, w, c, lane, warp, acc); e != nil {
				err = e
			}
			return []value.Value{stage, phase, sph}
		})
	})
	b.Ret(nil)
	return err
}

// epilogue stores consumer warpgroup c's 64 rows of the accumulator tile
// through the shared Epilogue (bias, activation, bf16 rounding, predicated
// stores). acc is the wgmma fragment (see WGMMABF16).
func (l sm90Layout) epilogue(b *Builder, spec GemmSpec, w gemmWork, c, lane, warp value.Value, acc []value.Value) error {
	var bias value.Value
	if spec.Bias {
		bias = b.ByteOffset(b.Param("bias"), b.MulI(b.Wide(w.e), int64(4*spec.BRows())))
	}
	ep := NewEpilogue(spec, EpilogueArgs{C: b.Param("c"), Bias: bias, RowEnd: w.rowEnd})
	wq := b.And(warp, ir.Int32(3))
	r0 := b.Add(b.Add(w.row0, b.MulI(c, 64)), b.Add(b.MulI(wq, 16), b.LShr(lane, ir.Int32(2))))
	t2 := b.MulI(b.And(lane, ir.Int32(3)), 2)
	for h := 0; h < 2; h++ { // rows r0 and r0+8
		row := b.AddI(r0, int64(8*h))
		switch {
		case l.gated && !l.interleave:
			up := l.BN / 8
			for j := 0; j < l.BN/8; j++ {
				col := b.Add(b.AddI(w.n0, int64(8*j)), t2)
				g0, g1 := acc[4*j+2*h], acc[4*j+2*h+1]
				u0, u1 := acc[4*(j+up)+2*h], acc[4*(j+up)+2*h+1]
				if err := ep.Emit(b, row, col, []value.Value{g0, u0, g1, u1}); err != nil {
					return err
				}
			}
		case l.interleave:
			t := b.And(lane, ir.Int32(3))
			for j := 0; j < l.NB/8; j++ {
				col := b.Add(b.AddI(w.n0, int64(4*j)), t)
				if err := ep.Emit(b, row, col, []value.Value{acc[4*j+2*h], acc[4*j+2*h+1]}); err != nil {
					return err
				}
			}
		default:
			for j := 0; j < l.NB/8; j++ {
				col := b.Add(b.AddI(w.n0, int64(8*j)), t2)
				if err := ep.Emit(b, row, col, []value.Value{acc[4*j+2*h], acc[4*j+2*h+1]}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// gemmProducer emits the load side of the TMA ring shared by the sm_90a and
// sm_100a engines: for every work item and K block, wait for the stage to
// be empty, then fill it (A with TMA; B with TMA, or with cp.async from the
// expert's allocation for BTable) and arrive on its full barrier.
type gemmProducer struct {
	spec                        GemmSpec
	BM, BN, NB, BK, S           int
	atoms, aAtom, bAtom         int
	stageBytes, kTiles, nBlocks int
	gated, interleave           bool
	threads                     int // producer threads (BTable copies use all of them)
	base, bars, tmA, tmB        value.Value
}

// emit emits the producer loop for the calling thread (tid in
// 0..threads-1). Without BTable only tid 0 works; the other threads return.
func (p gemmProducer) emit(b *Builder, tid, first, items, step value.Value) error {
	var err error
	spec := p.spec
	table := spec.B == BTable
	full := func(stage value.Value) value.Value { return b.Add(p.bars, b.MulI(stage, 8)) }
	empty := func(stage value.Value) value.Value { return b.Add(p.bars, b.AddI(b.MulI(stage, 8), int64(8*p.S))) }
	lead := b.ICmp(enum.IPredEQ, tid, ir.Int32(0))
	bt := bTableLoad{NB: p.NB, BN: p.BN, BK: p.BK, atoms: p.atoms, bAtom: p.bAtom, N: spec.N, K: spec.K,
		BRows: spec.BRows(), gated: p.gated, interleave: p.interleave, threads: p.threads}
	aBytes := p.atoms * p.aAtom
	body := func() {
		b.Loop(first, items, step, []value.Value{ir.Int32(0), ir.Int32(0)}, func(it value.Value, v []value.Value) []value.Value {
			w := gemmDecode(b, spec, it, p.BM, p.BN, p.nBlocks)
			var ptrE value.Value
			if table {
				ptrE = b.LoadAt(ir.I64, b.ByteOffset(b.Param("b"), b.MulI(b.Wide(w.e), 8)), 8)
			}
			return b.Loop(ir.Int32(0), ir.Int32(int64(p.kTiles)), ir.Int32(1), v, func(kt value.Value, v []value.Value) []value.Value {
				stage, phase := v[0], v[1]
				b.MbarWait(empty(stage), b.Xor(phase, ir.Int32(1)))
				fb := full(stage)
				sa := b.Add(p.base, b.MulI(stage, int64(p.stageBytes)))
				tma := func() {
					if table {
						b.MbarArriveExpectTx(fb, aBytes)
					} else {
						b.MbarArriveExpectTx(fb, p.stageBytes)
					}
					for a := 0; a < p.atoms; a++ {
						k0 := b.AddI(b.MulI(kt, int64(p.BK)), int64(64*a))
						dA := b.AddI(sa, int64(a*p.aAtom))
						dB := b.AddI(sa, int64(aBytes+a*p.bAtom))
						err = joinErr(err, b.TMALoad(p.tmA, dA, fb, k0, w.row0))
						if table {
							continue
						}
						switch {
						case p.gated && !p.interleave:
							err = joinErr(err, b.TMALoad(p.tmB, dB, fb, k0, w.n0, w.e))
							err = joinErr(err, b.TMALoad(p.tmB, b.AddI(dB, int64(p.BN*128)), fb, k0, b.AddI(w.n0, int64(spec.N)), w.e))
						case p.interleave:
							err = joinErr(err, b.TMALoad(p.tmB, dB, fb, k0, b.MulI(w.n0, 2), w.e))
						default:
							err = joinErr(err, b.TMALoad(p.tmB, dB, fb, k0, w.n0, w.e))
						}
					}
				}
				if table {
					b.If(lead, tma)
					bt.emit(b, tid, b.AddI(sa, int64(aBytes)), kt, w.n0, ptrE)
					b.CpAsyncMbarArrive(fb)
				} else {
					tma()
				}
				s2, p2 := ringNext(b, stage, phase, p.S)
				return []value.Value{s2, p2}
			})
		})
	}
	if table {
		body()
	} else {
		b.If(lead, body)
	}
	return err
}

// stageOut is the consumer side of the staged epilogue: wait until the
// store warps have drained the staging tile (parity sph^1), compute this
// warpgroup's outputs with the shared Epilogue (Values: bias, activation),
// round them to bf16 into the staging tile (row-major, BN columns, rows
// padded by 16 bytes), and arrive on staging-full. Columns at or past N are
// skipped (their bias would be out of range); rows past the segment are
// written and never stored.
func (l sm90Layout) stageOut(b *Builder, spec GemmSpec, w gemmWork, c, lane, warp value.Value, acc []value.Value, base, bars, sph value.Value) error {
	var err error
	stgFull, stgEmpty := b.AddI(bars, int64(16*l.S)), b.AddI(bars, int64(16*l.S+8))
	b.MbarWait(stgEmpty, b.Xor(sph, ir.Int32(1)))
	var bias value.Value
	if spec.Bias {
		bias = b.ByteOffset(b.Param("bias"), b.MulI(b.Wide(w.e), int64(4*spec.BRows())))
	}
	ep := NewEpilogue(spec, EpilogueArgs{C: b.Param("c"), Bias: bias, RowEnd: w.rowEnd})
	wq := b.And(warp, ir.Int32(3))
	rl := b.Add(b.MulI(c, 64), b.Add(b.MulI(wq, 16), b.LShr(lane, ir.Int32(2)))) // tile row
	t := b.And(lane, ir.Int32(3))
	t2 := b.MulI(t, 2)
	stg := b.AddI(base, int64(l.stgOff))
	put := func(row value.Value, lc value.Value, vals []value.Value) {
		col := b.Add(w.n0, lc)
		b.If(b.ICmp(enum.IPredSLT, col, ir.Int32(int64(spec.N))), func() {
			outs, e := ep.Values(b, col, vals)
			if e != nil {
				err = joinErr(err, e)
				return
			}
			addr := b.Add(b.Add(stg, b.MulI(row, int64(l.stgStride))), b.MulI(lc, 2))
			p := b.IntToPtr(b.ZExt(addr, ir.I64), SPtr)
			if len(outs) == 2 {
				b.StoreAt(b.PackBF16(outs[0], outs[1]), p, 4)
			} else {
				b.StoreAt(b.ToBF16(outs[0]), p, 2)
			}
		})
	}
	for h := 0; h < 2; h++ {
		row := b.AddI(rl, int64(8*h))
		switch {
		case l.gated && !l.interleave:
			up := l.BN / 8
			for j := 0; j < l.BN/8; j++ {
				g0, g1 := acc[4*j+2*h], acc[4*j+2*h+1]
				u0, u1 := acc[4*(j+up)+2*h], acc[4*(j+up)+2*h+1]
				put(row, b.AddI(t2, int64(8*j)), []value.Value{g0, u0, g1, u1})
			}
		case l.interleave:
			for j := 0; j < l.NB/8; j++ {
				put(row, b.AddI(t, int64(4*j)), []value.Value{acc[4*j+2*h], acc[4*j+2*h+1]})
			}
		default:
			for j := 0; j < l.NB/8; j++ {
				put(row, b.AddI(t2, int64(8*j)), []value.Value{acc[4*j+2*h], acc[4*j+2*h+1]})
			}
		}
	}
	b.MbarArrive(stgFull)
	return err
}

// storeWarps emits the store side of the staged epilogue, run by warps 1-3
// of the producer warpgroup (t = 0..95): for every work item, wait for
// staging-full, copy the tile's rows below RowEnd and columns below N to C
// in 16-byte chunks (consecutive threads take consecutive chunks of a row:
// coalesced), and arrive on staging-empty.
func (l sm90Layout) storeWarps(b *Builder, spec GemmSpec, t, base, bars, first, items, step value.Value) {
	stgFull, stgEmpty := b.AddI(bars, int64(16*l.S)), b.AddI(bars, int64(16*l.S+8))
	stg := b.AddI(base, int64(l.stgOff))
	cpr := l.BN / 8 // 16-byte chunks per staging row
	total := l.BM * cpr
	v4 := ir.Vec(4, ir.I32)
	b.Loop(first, items, step, []value.Value{ir.Int32(0)}, func(it value.Value, v []value.Value) []value.Value {
		w := gemmDecode(b, spec, it, l.BM, l.BN, l.nBlocks)
		sph := v[0]
		b.MbarWait(stgFull, sph)
		b.Loop(t, ir.Int32(int64(total)), ir.Int32(96), nil, func(q value.Value, _ []value.Value) []value.Value {
			r := b.UDiv(q, ir.Int32(int64(cpr)))
			ch := b.URem(q, ir.Int32(int64(cpr)))
			row := b.Add(w.row0, r)
			col := b.Add(w.n0, b.MulI(ch, 8))
			ok := b.And(b.ICmp(enum.IPredSLT, row, w.rowEnd), b.ICmp(enum.IPredSLT, col, ir.Int32(int64(spec.N))))
			b.If(ok, func() {
				src := b.Add(b.Add(stg, b.MulI(r, int64(l.stgStride))), b.MulI(ch, 16))
				val := b.LoadAt(v4, b.IntToPtr(b.ZExt(src, ir.I64), SPtr), 16)
				off := b.MulI(b.Add(b.MulI(b.Wide(row), int64(spec.N)), b.Wide(col)), 2)
				b.StoreAt(val, b.ByteOffset(b.Param("c"), off), 16)
			})
			return nil
		})
		b.MbarArrive(stgEmpty)
		return []value.Value{b.Xor(sph, ir.Int32(1))}
	})
}
