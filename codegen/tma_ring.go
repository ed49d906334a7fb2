package codegen

import (
	"fmt"
	"slices"

	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/target"
)

// tmaRing is the geometry the sm_90a and sm_100a atoms share: a ring of S
// stages, each [A: BK/64 atoms of BM rows x 128 B][B: BK/64 atoms of NB rows
// x 128 B] (layouts.SmemTile, K-major, 128-byte swizzle; an atom is one TMA
// box of 64 bf16 along K, so every atom starts 1024-byte aligned; an
// N-major B, GemmSpec.BNMajor, is NB/64 columns of BK rows x 128 B, each one
// TMA box of 64 bf16 along N by BK rows), filled by
// TMA (and cp.async for BTable) and guarded by full/empty mbarriers, walked
// by a persistent grid over the work items.
type tmaRing struct {
	BM, BN, NB, BK, S int // tile rows, output columns, B-tile rows (MMA N), K block, stages
	atomK             int // K elements of one A atom: one 128-byte swizzle row (64 bf16, 128 e4m3)
	atoms             int // A's K atoms per stage (BK/atomK)
	bAtomK, bAtoms    int // B's (atomK and atoms but with GemmSpec.MXRegisterFed: e4m3 B, bf16 A)
	aAtom, bAtom      int // bytes of one A / B atom (layouts.SmemTile.AtomBytes)
	stageBytes        int
	kTiles, nBlocks   int
	offA, offB        []int // per MMA k-step of a stage: descriptor offsets of A and B (stepOffsets)
	gate              layouts.GateUp
	// pairs: the B tile's gate/up pairs come from halves in global memory
	// (GemmSpec.BHalvesInPairs; gate is then GateUpInterleaved).
	pairs bool
	smem  *layouts.GemmSmem // shared-memory plan (offsets from the 1024-aligned base)
	a, b  *layouts.SmemTile // the operand tiles of one stage
}

// checkTMATile refuses, on target t, a K block that is not whole TMA boxes
// of 64 bf16 (one 128-byte swizzle row) and a ring of fewer than 2 stages.
func checkTMATile(s GemmSpec, t target.Target) error {
	switch ak := max(128/s.AElemBytes(), 128/s.ElemBytes()); {
	case s.Tile.BK%ak != 0:
		return fmt.Errorf("codegen: %s: %v K block %d must be a multiple of %d (one 128-byte swizzle row per TMA box)", s.Name, t, s.Tile.BK, ak)
	case s.Tile.Stages < 2:
		return fmt.Errorf("codegen: %s: %v needs at least 2 pipeline stages, got %d", s.Name, t, s.Tile.Stages)
	}
	return nil
}

// tmaBlock is the state every role of a TMA atom's block shares: the spec,
// the ring's base and barriers, and the work items.
type tmaBlock struct {
	spec GemmSpec
	base value.Value // 1024-aligned shared base (i32 shared address)
	ring mbarRing
	work workList // the block's work items
}

// workList emits the ring's walk over the work items of spec, through the
// item ring q with QueueItems (nil: the fixed walk).
func (r tmaRing) workList(b *Builder, spec GemmSpec, q *itemRing) workList {
	if spec.Tile.Cluster == 2 { // no queue: checkSM90Cluster
		return newPairWork(b, spec, r.BM, r.BN, r.nBlocks)
	}
	wl := newWorkList(b, spec, r.BM, r.BN, r.nBlocks)
	wl.q = q
	return wl
}

// itemRing is the item ring of a QueueItems kernel with 1024-aligned
// shared base base (nil without QueueItems).
func (r tmaRing) itemRing(b *Builder, spec GemmSpec, base value.Value) *itemRing {
	if !spec.QueueItems {
		return nil
	}
	return &itemRing{slots: r.smem.ItemSlots, at: b.AddI(base, int64(r.smem.ItemOffset)),
		words: kernelQueue{first: int64(spec.QueueWord), n: gemmQueueWords}}
}

// newTMARing derives the ring of spec on t, with the staged epilogue's
// staging tile of stagingCols output columns when it fits (0: none) and,
// with e4m3Staging, the e4m3 tiles of the sm_90a MXFP8 expansion in every
// stage (layouts.GemmConfig.E4M3Staging).
func newTMARing(s GemmSpec, t target.Target, stagingCols int, e4m3Staging bool) (tmaRing, error) {
	r := tmaRing{BM: s.Tile.BM, BN: s.Tile.BN, NB: s.bTileRows(), BK: s.Tile.BK, S: s.Tile.Stages, gate: s.bTile(), pairs: s.BHalvesInPairs}
	var err error
	bMajor := layouts.KMajor
	if s.BNMajor {
		bMajor = layouts.MNMajor
	}
	dt := layouts.DTypeBF16
	if s.MX {
		dt = layouts.DTypeE4M3
	}
	r.kTiles = kTiles(s, r.BK)
	// MX: the producer copies the scale codes that many K blocks ahead by
	// cp.async (gemmProducer.mxCodeCopy). Its arrive on a stage's full
	// barrier has release semantics and waits for the thread's earlier
	// loads: with the codes loaded into registers one K block ahead, every
	// stage cost one global round trip, which set the decode GEMM's pace
	// on the H200 (docs/perf.md, mxfp8 v7); cp.async copies are not among
	// the loads a release waits for.
	codeSlots := 0
	if s.MX {
		codeSlots = layouts.MXCodeSlots(r.kTiles)
		if blocksPerSM(s.Tile) > 1 {
			codeSlots = min(codeSlots, r.S) // no deeper than the ring: half an SM's shared memory
		}
	}
	r.smem, err = layouts.PlanGemmSmem(layouts.GemmConfig{Target: t, DType: dt, Scales: s.MX,
		M: r.BM, BRows: r.NB, K: r.BK, Stages: r.S, StagingCols: stagingCols, GateUp: r.gate, N: s.N, BMajor: bMajor,
		E4M3Staging: e4m3Staging, CodeSlots: codeSlots, ItemSlots: itemSlots(s), SwapAB: t == target.SM90a && s.swapAB(), ABF16: s.MXRegisterFed})
	if err != nil {
		return r, fmt.Errorf("codegen: %s: %w", s.Name, err)
	}
	r.a, r.b = r.smem.A.(*layouts.SmemTile), r.smem.B.(*layouts.SmemTile)
	r.atomK, r.bAtomK = 128/s.AElemBytes(), 128/s.ElemBytes()
	r.atoms, r.bAtoms = r.BK/r.atomK, r.BK/r.bAtomK
	r.aAtom, r.bAtom = r.a.AtomBytes(), r.b.AtomBytes()
	r.stageBytes = r.smem.StageBytes
	if s.MXRegisterFed {
		// The consumers read B by ld.shared (wgmma_regfed.go): A's steps
		// alone.
		if r.offA, _, err = stepOffsets(r.a, r.a); err != nil {
			return r, fmt.Errorf("codegen: %s: %w", s.Name, err)
		}
	} else if r.offA, r.offB, err = stepOffsets(r.a, r.b); err != nil {
		return r, fmt.Errorf("codegen: %s: %w", s.Name, err)
	}
	r.nBlocks = (s.N + r.BN - 1) / r.BN
	return r, nil
}

// checkSmem refuses a ring that does not fit t's shared memory.
func (r tmaRing) checkSmem(s GemmSpec, t target.Target) error {
	if n := blocksPerSM(s.Tile); n > 1 {
		if lim := t.SharedMemoryFor(n); r.smem.Bytes > lim {
			return fmt.Errorf("codegen: %s: %v tile %dx%dx%d with %d stages needs %d bytes of shared memory (> %d, the share of one of %d blocks per SM): fewer stages or a smaller tile", s.Name, t, r.BM, r.NB, r.BK, r.S, r.smem.Bytes, lim, n)
		}
	}
	if lim := t.SharedMemoryLimit(); r.smem.Bytes > lim {
		return fmt.Errorf("codegen: %s: %v tile %dx%dx%d with %d stages needs %d bytes of shared memory (> %d)", s.Name, t, r.BM, r.NB, r.BK, r.S, r.smem.Bytes, lim)
	}
	return nil
}

// bBoxRows is the row count of one B TMA box: BN for gate/up halves (two
// boxes), else the whole B tile.
func (r tmaRing) bBoxRows() int {
	if r.gate == layouts.GateUpHalves {
		return r.BN
	}
	return r.NB
}

// splitOffsets returns, for each MMA k-step of tile b, the descriptor
// start-address offset (16-byte units) of its rows from row on
// (layouts.SmemTile.DescriptorFields), or nil when row is not a row at
// which a descriptor may start (a multiple of 8, of the swizzle atom's
// width for an MN-major tile) or not a wgmma N (8..256, a multiple of 8).
func splitOffsets(b *layouts.SmemTile, row int) []int {
	if checkWGMMAN(row) != nil {
		return nil
	}
	mk, err := layouts.MMAK(b.Target, b.DType)
	if err != nil {
		return nil
	}
	off, err := rowOffsets(b, row, mk)
	if err != nil {
		return nil
	}
	return off
}

// rowOffsets returns, for each mk-wide MMA k-step of tile t, the
// descriptor start-address offset (16-byte units) of its rows from row on
// (layouts.SmemTile.DescriptorFields).
func rowOffsets(t *layouts.SmemTile, row, mk int) ([]int, error) {
	var off []int
	for ks := 0; ks < t.K/mk; ks++ {
		d, err := t.DescriptorFields(0, row, ks)
		if err != nil {
			return nil, err
		}
		off = append(off, int(d.Start>>4))
	}
	return off, nil
}

// stepOffsets returns, for each MMA k-step of the tiles a and b (K /
// layouts.MMAK steps: k16 of bf16, k32 of e4m3), the descriptor
// start-address offsets (16-byte units) from the tiles' first step
// (layouts.SmemTile.DescriptorFields: +32 bytes per step inside an atom,
// + an atom past it; MN-major tiles move down their rows). Errors: tiles
// of different K, or a step the tiles refuse.
func stepOffsets(a, b *layouts.SmemTile) (offA, offB []int, err error) {
	mk, err := layouts.MMAK(a.Target, a.DType)
	if err != nil {
		return nil, nil, err
	}
	if a.K != b.K {
		return nil, nil, fmt.Errorf("codegen: A tile K = %d, B tile K = %d", a.K, b.K)
	}
	if offA, err = rowOffsets(a, 0, mk); err != nil {
		return nil, nil, err
	}
	if offB, err = rowOffsets(b, 0, mk); err != nil {
		return nil, nil, err
	}
	return offA, offB, nil
}

// tmaKernel is the launch shape of a persistent TMA atom's kernel. Its
// default grid is one block per SM of the target table's reference part
// (H100/H200 SXM: 132, B200: 148), Tile.BlocksPerSM per SM where set
// (Tile.Grid overrides it). On a part with
// fewer SMs the surplus blocks simply wait for a free SM; blocks without
// work exit after initialising their barriers.
type tmaKernel struct {
	tg         target.Target
	threads    int
	launchRegs int // .maxnreg (0: none)
}

// build adds the kernel of spec to m: GemmParams, then the tensor maps
// (tmap_a only without GatherK, tmap_b only without BTable), annotated with threads, Tile.BlocksPerSM
// (at least one) blocks per SM, launchRegs and the cluster shape (Tile.Cluster > 1); emit writes its body.
func (k tmaKernel) build(m *ir.Module, spec GemmSpec, rowsPerT int64, r tmaRing, emit func(*Builder) error) (KernelInfo, error) {
	params, err := tmaParams(spec, rowsPerT, r)
	if err != nil {
		return KernelInfo{}, err
	}
	b := NewKernel(m, spec.Name, k.threads, gemmIRParams(params)...)
	b.MinBlocksPerSM(blocksPerSM(spec.Tile)) // with launchRegs (sharedSMRegs) and the planned shared memory, that many fit an SM
	if k.launchRegs > 0 {
		b.MaxRegisters(k.launchRegs)
	}
	cluster := 0
	if spec.Tile.Cluster > 1 {
		cluster = spec.Tile.Cluster
		b.ClusterDims(cluster, 1, 1)
	}
	if err := emit(b); err != nil {
		return KernelInfo{}, err
	}
	return KernelInfo{Name: spec.Name, Params: params, Block: k.threads, SharedBytes: r.smem.Bytes,
		Grid: [3]Expr{persistentGrid(spec.Tile, k.tg.SMs()), Const(1), Const(1)}, GridPerSM: spec.Tile.Grid == 0, Cluster: cluster,
		BlocksPerSM: spec.Tile.BlocksPerSM}, nil
}

// tmaParams is the parameter list of the TMA kernel of spec with ring r:
// GemmParams, then the tensor maps (tmap_a only without GatherK, tmap_b
// only without BTable; A's box BM/Cluster rows).
func tmaParams(spec GemmSpec, rowsPerT int64, r tmaRing) ([]Param, error) {
	// A 2-CTA cluster's CTAs each load half of A's rows (multicast to both).
	tmaps, err := tmaTensorMaps(spec, rowsPerT, r.BM/max(1, spec.Tile.Cluster), r.bBoxRows())
	if err != nil {
		return nil, err
	}
	params := append(GemmParams(spec), tmaps...)
	return slices.DeleteFunc(params, func(p Param) bool {
		return p.Name == "tmap_a" && spec.GatherK > 0 || // A comes through cp.async
			p.Name == "tmap_b" && spec.B == BTable // B comes through cp.async
	}), nil
}

// tmaTensorMaps returns the tensor-map parameters (after GemmParams) of an
// sm_90a / sm_100a GEMM kernel: "tmap_a" over A and "tmap_b" over B, both
// bf16 (MX: e4m3, as u8), 128-byte swizzle, boxes of one 128-byte row
// along K (64 bf16, 128 e4m3; an N-major B: 64 along N by BK along K).
// The e4m3 operands of an MXExpand GEMM come in boxes of one 64-byte row
// (64 e4m3, the K block of the bf16 ring they are widened into) with the
// 64-byte swizzle; the A of an MXRegisterFed GEMM is bf16 (boxes of 64)
// beside its e4m3 B.
//
// The constant dimensions and strides are checked against the limits of
// cuTensorMapEncodeTiled (CUDA driver API: dimensions at most 2^32
// elements, strides below 2^40 bytes) so that a layer too large for TMA is
// refused when it is built, not when it is launched.
func tmaTensorMaps(s GemmSpec, rowsPerT int64, bm, bBoxRows int) ([]Param, error) {
	k := int64(s.K)
	rows := PerT(rowsPerT, 0)
	rows.Min = 1
	br := int64(s.BRows())
	eb, ak, dt, swz := int64(s.ElemBytes()), 128/s.ElemBytes(), "bf16", 128
	if s.MX {
		dt = "u8" // e4m3: TMA moves bytes
	}
	if s.MXExpand {
		ak, swz = 64, 64
	}
	aeb, aak, adt := eb, ak, dt
	if s.MXRegisterFed { // A bf16, B e4m3
		aeb, aak, adt = 2, 64, "bf16"
	}
	bmap := &TensorMap{Operand: RoleB, DType: dt,
		Dims:        []Expr{Const(k), Const(br), Const(int64(s.Experts))},
		StrideBytes: []Expr{Const(eb * k), Const(eb * k * br)},
		Box:         []int{ak, bBoxRows, 1}, Swizzle: swz}
	if s.BHalvesInPairs { // B_e [2N, K] as (K, 2, N): a box of (gate, up) row pairs
		n := int64(s.N)
		bmap.Dims = []Expr{Const(k), Const(2), Const(n), Const(int64(s.Experts))}
		bmap.StrideBytes = []Expr{Const(eb * k * n), Const(eb * k), Const(eb * k * br)}
		bmap.Box = []int{ak, 2, bBoxRows / 2, 1}
	}
	if s.BNMajor { // B_e [K, N]: N innermost, boxes of 64 along N by BK rows
		bmap.Dims = []Expr{Const(br), Const(k), Const(int64(s.Experts))}
		bmap.StrideBytes = []Expr{Const(2 * br), Const(2 * k * br)}
		bmap.Box = []int{64, s.Tile.BK, 1}
	}
	for _, c := range []struct {
		what  string
		v     int64
		limit int64
	}{
		{"K (elements)", k, 1 << 32},
		{"B rows (elements)", br, 1 << 32},
		{"experts", int64(s.Experts), 1 << 32},
		{"B expert stride (bytes)", eb * k * br, 1<<40 - 1},
	} {
		if c.v > c.limit {
			return nil, fmt.Errorf("codegen: %s: %s = %d exceeds the TMA tensor-map limit %d (cuTensorMapEncodeTiled)", s.Name, c.what, c.v, c.limit)
		}
	}
	return []Param{
		{Name: "tmap_a", Type: ParamTmap, Size: 128, Align: 64, Role: RoleTensorMap, TensorMap: &TensorMap{
			Operand: RoleA, DType: adt,
			Dims:        []Expr{Const(k), rows},
			StrideBytes: []Expr{Const(aeb * k)},
			Box:         []int{aak, bm}, Swizzle: swz}},
		{Name: "tmap_b", Type: ParamTmap, Size: 128, Align: 64, Role: RoleTensorMap, TensorMap: bmap},
	}, nil
}
