package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/target"
)

// The sm_100a (Blackwell) atom of the grouped-GEMM task: TMA loads into a
// Tile.Stages deep shared-memory ring (tmaRing, as on sm_90a: same tensor
// maps and 128-byte swizzled K-major atoms), tcgen05.mma.cta_group::1.kind::f16
// bf16 x bf16 -> f32 with the accumulator in tensor memory, and epilogue
// warps that read it back with tcgen05.ld. PTX ISA 8.8 "tcgen05" sections
// (instruction and shared-memory descriptors: package layouts); the
// assumptions not yet checked on hardware are listed in docs/hardware.md.
// The kernel is emitted for `.version 8.8 .target sm_100a`.
//
// Warps (Tile.EpilogueWarps = 4q, then one TMA warp, then one MMA warp):
//   - epilogue warp w reads TMEM lanes 32*(w%4).. (tile rows 32*(w%4)+lane)
//     and the column chunks c with c%q == w/4; it applies the shared
//     Epilogue and stores bf16 directly (each thread writes runs of 8
//     consecutive columns of its row: 16-byte stores);
//   - lane 0 of the TMA warp issues the loads (full/empty mbarrier ring);
//   - the MMA warp allocates TMEM (2 accumulator buffers of NB columns each,
//     layouts.GemmSmem.TMEMColumns, so the epilogue of one tile overlaps the
//     MMAs of the next), lane 0 issues 4 MMAs per 64-wide K atom (K-step 16:
//     +32 bytes on the smem descriptors), releases each smem stage with
//     tcgen05.commit to its empty barrier, and signals a finished
//     accumulator with tcgen05.commit to tmem_full[buf]; epilogue warps hand
//     the buffer back through tmem_empty[buf] (one arrival per epilogue
//     warp, after tcgen05.fence::before_thread_sync).
//
// The accumulator of M = 128 rows: row i of the tile is TMEM lane i, column
// j of the B tile is TMEM column base + buf*NB + j (the cta_group::1 M = 128
// data path layout). Grid: persistent, one block per SM of a B200 (148);
// work items as on sm_90a.
//
// BTable (one allocation per expert): the 32 lanes of the TMA warp copy the
// B tile with cp.async into the swizzled layout (as on sm_90a, see
// atom_sm90.go), full barriers expect 1 + 32 arrivals, and the MMA thread
// issues fence.proxy.async.shared::cta after each full-barrier wait.
//
// MXFP8 (GemmSpec.MX): e4m3 tiles by TMA, the TMA warp's 32 lanes store
// the stage's UE8M0 scale codes as scale-factor tiles, and the MMA thread
// copies them to TMEM (tcgen05.cp) before the block-scaled MMAs (sm100MX,
// mmaStageMX; docs/mxfp8.md).
//
// Not yet supported (refused with an error): M = 64 tiles, 2-CTA clusters
// (cta_group::2).

func init() {
	registerAtom(target.SM100a, sm100Plan, atomCaps{})
}

// sm100Layout is the derived geometry of one sm_100a GEMM kernel.
type sm100Layout struct {
	tmaRing
	epiWarps, groups int // epilogue warps (4*groups)
	tmaWarp, mmaWarp int
	threads          int
	idesc            uint32
	descHi           uint64 // smem descriptor bits of the K-major 128B-swizzled atoms
	mx               sm100MX
}

// sm100MX is the geometry of an MXFP8 (GemmSpec.MX) sm_100a kernel: the
// scale-factor tiles of each stage (after its A and B tiles:
// gemmProducer.mxStoreScaleTiles) are copied to TMEM columns past the two
// accumulator buffers, each stage its own columns (4 for A's 128 rows, then
// 4 per 128 B-tile rows), so a copy never overwrites scales an MMA of
// another stage still reads; the MMA of K step ks (32 wide) of a K block of
// 128 uses scale byte ks of every cell (instruction descriptor idesc[ks]).
type sm100MX struct {
	idesc    []uint32 // per K step of the block: kind::mxf8f6f4, e4m3 x e4m3, scale-factor ids ks
	sfDescHi uint64   // descriptor bits of a scale-factor tile (no swizzle, SBO 128 bytes)
	bTiles   int      // scale-factor tiles of the B tile (128 rows each)
	col0     int      // TMEM column of stage 0's A scales
	colsPer  int      // TMEM columns per stage: 4 * (1 + bTiles)
}

// sm100Plan derives the geometry of spec's sm_100a kernel (ring, warp
// roles, TMEM, descriptors), or says why the atom refuses it.
func sm100Plan(s GemmSpec) (sm100Layout, error) {
	var l sm100Layout
	bm, bn, nb := s.Tile.BM, s.Tile.BN, s.bTileRows()
	if s.MXRegisterFed {
		return l, fmt.Errorf("codegen: %s: MXRegisterFed is the sm_90a way to run an MXFP8 GEMM; sm_100a runs block-scaled tcgen05.mma", s.Name)
	}
	if err := checkTMATile(s, target.SM100a); err != nil {
		return l, err
	}
	l.epiWarps = s.Tile.EpilogueWarps
	if l.epiWarps == 0 {
		l.epiWarps = 4
	}
	switch {
	case bm != 128:
		return l, fmt.Errorf("codegen: %s: sm_100a tile BM = %d: only M = 128 (tcgen05.mma cta_group::1, one TMEM lane per row) is implemented", s.Name, bm)
	case s.Tile.Cluster > 1:
		return l, fmt.Errorf("codegen: %s: sm_100a engine: 2-CTA clusters (cta_group::2) are not implemented (Cluster = %d)", s.Name, s.Tile.Cluster)
	case s.Tile.BlocksPerSM > 1:
		return l, fmt.Errorf("codegen: %s: sm_100a engine: one block per SM (its TMEM allocation and shared memory are planned for one), not %d", s.Name, s.Tile.BlocksPerSM)
	case nb%16 != 0 || nb < 16 || nb > 256 || bn%8 != 0:
		return l, fmt.Errorf("codegen: %s: sm_100a B tile of %d rows (BN = %d) must be a multiple of 16 in 16..256 (tcgen05.mma M = 128)", s.Name, nb, bn)
	case l.epiWarps%4 != 0 || l.epiWarps > 16:
		return l, fmt.Errorf("codegen: %s: sm_100a needs 4, 8, 12 or 16 epilogue warps (one per TMEM lane quarter), got %d", s.Name, l.epiWarps)
	case s.MXExpand:
		return l, fmt.Errorf("codegen: %s: MXExpand is the sm_90a way to run an MXFP8 GEMM; sm_100a runs block-scaled tcgen05.mma", s.Name)
	case s.Tile.Warps > 1:
		return l, fmt.Errorf("codegen: %s: sm_100a issues tcgen05.mma from one warp, schedule has %d MMA warps", s.Name, s.Tile.Warps)
	}
	l.groups = l.epiWarps / 4
	l.tmaWarp = l.epiWarps
	l.mmaWarp = l.epiWarps + 1
	l.threads = 32 * (l.epiWarps + 2)
	var err error
	if l.tmaRing, err = newTMARing(s, target.SM100a, 0, false); err != nil {
		return l, err
	}
	if err := l.checkSmem(s, target.SM100a); err != nil {
		return l, err
	}
	if c, lim := l.smem.TMEMColumns, target.SM100a.TMEMColumns(); c > lim {
		return l, fmt.Errorf("codegen: %s: sm_100a tile %dx%dx%d with %d stages needs %d TMEM columns (> %d)", s.Name, l.BM, l.NB, l.BK, l.S, c, lim)
	}
	if s.MX {
		if l.mx, err = newSM100MX(l.tmaRing); err != nil {
			return l, fmt.Errorf("codegen: %s: %w", s.Name, err)
		}
	} else if l.idesc, err = TCGen05IDescF16(l.BM, l.NB); err != nil {
		return l, fmt.Errorf("codegen: %s: %w", s.Name, err)
	}
	// The address-independent bits of the tiles' tcgen05 descriptors
	// (start address 0; equal to SM100DescK128B).
	if l.descHi, err = l.a.Descriptor(0, 0, 0); err != nil {
		return l, fmt.Errorf("codegen: %s: %w", s.Name, err)
	}
	return l, nil
}

// newSM100MX plans the scale factors of ring r's MXFP8 kernel (K blocks of
// 128; r.smem.TMEMColumns counts the same columns, layouts.SM100ScaleColumns
// per stage, and sm100Plan refuses more than the target has).
func newSM100MX(r tmaRing) (sm100MX, error) {
	m := sm100MX{bTiles: (r.NB + layouts.SFTileRows - 1) / layouts.SFTileRows, col0: 2 * r.NB,
		colsPer: layouts.SM100ScaleColumns(r.BM, r.NB, r.BK)}
	if r.BK != 128 || r.BM != layouts.SFTileRows {
		return m, fmt.Errorf("the sm_100a MXFP8 GEMM needs K blocks of 128 and 128-row A tiles (%dx%d)", r.BM, r.BK)
	}
	for ks := 0; ks < r.BK/32; ks++ {
		d, err := layouts.TCGen05InstrDescMXF8F6F4(layouts.TCGen05InstrMXF8F6F4{M: r.BM, N: r.NB, CTAGroup: 1,
			AType: layouts.TCGen05E4M3, BType: layouts.TCGen05E4M3, SFIDA: ks, SFIDB: ks})
		if err != nil {
			return m, err
		}
		m.idesc = append(m.idesc, d)
	}
	var err error
	m.sfDescHi, err = layouts.SM100SmemDescriptor(layouts.SmemDescriptor{SBO: 128, Swizzle: layouts.SwizzleNone})
	return m, err
}

// build adds the sm_100a kernel of spec to m.
func (l sm100Layout) build(m *ir.Module, spec GemmSpec, rowsPerT int64) (KernelInfo, error) {
	k := tmaKernel{threads: l.threads, tg: target.SM100a}
	return k.build(m, spec, rowsPerT, l.tmaRing, func(b *Builder) error { return l.emit(b, spec) })
}

// sm100Block is the state every warp role of an sm_100a block shares.
type sm100Block struct {
	tmaBlock
	tmem value.Value // TMEM address of the accumulator buffers
}

// tmemFull is the shared address of tmem_full[buf]: the MMA thread's commit
// says accumulator buffer buf is complete.
func (k *sm100Block) tmemFull(b *Builder, buf value.Value) value.Value {
	return b.Add(k.ring.bars, b.AddI(b.MulI(buf, 8), int64(16*k.ring.S)))
}

// tmemEmpty is the shared address of tmem_empty[buf]: every epilogue warp
// has read buffer buf.
func (k *sm100Block) tmemEmpty(b *Builder, buf value.Value) value.Value {
	return b.Add(k.ring.bars, b.AddI(b.MulI(buf, 8), int64(16*k.ring.S+16)))
}

// emit is the sm_100a kernel: barriers and TMEM, then the epilogue warps,
// the TMA warp and the MMA warp over the same work items, then TMEM is
// freed.
func (l sm100Layout) emit(b *Builder, spec GemmSpec) error {
	k := sm100Block{tmaBlock: tmaBlock{spec: spec}}
	tid := b.ThreadIdx(ir.X)
	lane, warp := b.LaneWarp()
	k.base = b.SharedBase1024()
	k.ring = mbarRing{bars: b.AddI(k.base, int64(l.smem.BarrierOffset)), S: l.S}
	tmemSlot := b.AddI(k.ring.bars, int64(16*l.S+32))
	tmA, tmB, fullCount := tmaMaps(b, spec, 32, 1) // BTable: one cp.async arrival per lane of the TMA warp
	k.ring.init(b, tid, fullCount, 1, func() {
		for i := 0; i < 2; i++ {
			b.MbarInit(b.AddI(k.ring.bars, int64(16*l.S+8*i)), 1)
			b.MbarInit(b.AddI(k.ring.bars, int64(16*l.S+16+8*i)), l.epiWarps)
		}
	}, tmA, tmB)
	var err error
	isMMA := b.ICmp(enum.IPredEQ, warp, ir.Int32(int64(l.mmaWarp)))
	b.If(isMMA, func() {
		err = b.TMEMAlloc(tmemSlot, l.smem.TMEMColumns)
		b.TMEMRelinquish()
	})
	b.TCGen05FenceBefore()
	b.SyncThreads()
	b.TCGen05FenceAfter()
	k.tmem = b.LoadAt(ir.I32, b.IntToPtr(b.ZExt(tmemSlot, ir.I64), SPtr), 4)
	k.work = l.workList(b, spec, nil)
	isLead := b.ICmp(enum.IPredEQ, lane, ir.Int32(0))
	b.IfElse(b.ICmp(enum.IPredSLT, warp, ir.Int32(int64(l.epiWarps))), func() {
		err = joinErr(err, l.epilogueWarps(b, &k, lane, warp))
	}, func() {
		b.If(b.ICmp(enum.IPredEQ, warp, ir.Int32(int64(l.tmaWarp))), func() {
			// TMA producer warp: the same loads as sm_90a (lane 0; all 32
			// lanes copy B with cp.async for BTable).
			pr := newProducer(l.tmaRing, spec, 32, k.base, k.ring, tmA, tmB)
			err = joinErr(err, pr.emit(b, lane, k.work, nil))
		})
		b.If(b.And(isMMA, isLead), func() { l.mmaIssuer(b, &k) })
	})
	// Teardown: every epilogue warp has read its last accumulator and every
	// MMA has completed (the epilogue waited on its commit), so the MMA warp
	// frees the tensor memory.
	b.TCGen05FenceBefore()
	b.SyncThreads()
	b.TCGen05FenceAfter()
	b.If(isMMA, func() { b.TMEMDealloc(k.tmem, l.smem.TMEMColumns) })
	b.Ret(nil)
	return err
}

// mmaIssuer is lane 0 of the MMA warp: per work item, wait for a free
// accumulator buffer (buf, bphase), then per K block wait for the stage
// (stage, phase), issue its MMAs and release it with tcgen05.commit; commit
// the finished buffer to tmem_full[buf].
func (l sm100Layout) mmaIssuer(b *Builder, k *sm100Block) {
	init := []value.Value{ir.Int32(0), ir.Int32(0), ir.Int32(0), ir.Int32(0)}
	b.Loop(k.work.first, k.work.items, k.work.step, init, func(_ value.Value, v []value.Value) []value.Value {
		buf, bphase := v[2], v[3]
		b.MbarWait(k.tmemEmpty(b, buf), b.Xor(bphase, ir.Int32(1)))
		b.TCGen05FenceAfter()
		d := b.Add(k.tmem, b.MulI(buf, int64(l.NB)))
		ring := b.Loop(ir.Int32(0), ir.Int32(int64(l.kTiles)), ir.Int32(1), v[:2], func(kt value.Value, v []value.Value) []value.Value {
			stage, phase := v[0], v[1]
			b.MbarWait(k.ring.full(b, stage), phase)
			if k.spec.B == BTable {
				// B was written by cp.async (generic proxy); tcgen05.mma reads
				// through the async proxy.
				b.FenceProxyAsync()
			}
			b.TCGen05FenceAfter()
			sa := b.Add(k.base, b.MulI(stage, int64(l.stageBytes)))
			if k.spec.MX {
				l.mmaStageMX(b, k.tmem, d, sa, stage, kt)
			} else {
				l.mmaStage(b, d, sa, kt)
			}
			b.TCGen05Commit(k.ring.empty(b, stage))
			s2, p2 := ringNext(b, stage, phase, l.S)
			return []value.Value{s2, p2}
		})
		b.TCGen05Commit(k.tmemFull(b, buf))
		b2, bp2 := ringNext(b, buf, bphase, 2)
		return []value.Value{ring[0], ring[1], b2, bp2}
	})
}

// mmaStage issues the tcgen05.mma of every k16 step of the stage at shared
// address sa into the accumulator at TMEM address d; the first step of K
// block 0 overwrites the accumulator (kt = 0), every other one adds.
func (l sm100Layout) mmaStage(b *Builder, d, sa, kt value.Value) {
	dA := b.SM100Desc(sa, l.descHi)
	dB := b.SM100Desc(b.AddI(sa, int64(l.atoms*l.aAtom)), l.descHi)
	notFirst := b.ZExt(b.ICmp(enum.IPredSGT, kt, ir.Int32(0)), ir.I32)
	offA, offB := l.offA, l.offB
	for ks := range offA {
		acc := value.Value(ir.Int32(1))
		if ks == 0 {
			acc = notFirst
		}
		b.TCGen05MMAF16(d, b.AddI(dA, int64(offA[ks])), b.AddI(dB, int64(offB[ks])), l.idesc, acc)
	}
}

// mmaStageMX copies the scale-factor tiles of the MXFP8 stage at shared
// address sa to the stage's TMEM columns and issues the block-scaled MMA of
// every 32-wide K step into the accumulator at TMEM address d (tmem: the
// allocation's base); the first step of K block 0 overwrites it.
func (l sm100Layout) mmaStageMX(b *Builder, tmem, d, sa, stage, kt value.Value) {
	sf := b.AddI(sa, int64(l.smem.ScaleOffset))
	sfa := b.Add(tmem, b.AddI(b.MulI(stage, int64(l.mx.colsPer)), int64(l.mx.col0)))
	sfb := b.AddI(sfa, 4)
	for t := 0; t <= l.mx.bTiles; t++ {
		b.TCGen05CpSF(b.AddI(sfa, int64(4*t)), b.SM100Desc(b.AddI(sf, int64(t*layouts.SFTileBytes)), l.mx.sfDescHi))
	}
	dA := b.SM100Desc(sa, l.descHi)
	dB := b.SM100Desc(b.AddI(sa, int64(l.atoms*l.aAtom)), l.descHi)
	notFirst := b.ZExt(b.ICmp(enum.IPredSGT, kt, ir.Int32(0)), ir.I32)
	for ks := range l.offA {
		acc := value.Value(ir.Int32(1))
		if ks == 0 {
			acc = notFirst
		}
		b.TCGen05MMAMX(d, b.AddI(dA, int64(l.offA[ks])), b.AddI(dB, int64(l.offB[ks])), l.mx.idesc[ks], sfa, sfb, acc)
	}
}
