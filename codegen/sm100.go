package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/target"
)

// sm100Engine is the sm_100a (Blackwell) grouped GEMM: TMA loads into a
// Tile.Stages deep shared-memory ring (as on sm_90a, same tensor maps and
// 128-byte swizzled K-major atoms), tcgen05.mma.cta_group::1.kind::f16 bf16 x
// bf16 -> f32 with the accumulator in tensor memory, and epilogue warps that
// read it back with tcgen05.ld. PTX ISA 8.8 "tcgen05" sections (instruction
// and shared-memory descriptors: package layouts); the assumptions not yet
// checked on hardware are listed in docs/hardware.md. The kernel is emitted
// for `.version 8.8 .target sm_100a`.
//
// Warps (Tile.EpilogueWarps = 4q, then one TMA warp, then one MMA warp):
//   - epilogue warp w reads TMEM lanes 32*(w%4).. (tile rows 32*(w%4)+lane)
//     and the column chunks c with c%q == w/4; it applies the shared
//     Epilogue and stores bf16 directly (each thread writes runs of 8
//     consecutive columns of its row: 16-byte stores);
//   - lane 0 of the TMA warp issues the loads (full/empty mbarrier ring);
//   - the MMA warp allocates TMEM (2 accumulator buffers of NB columns each,
//     so the epilogue of one tile overlaps the MMAs of the next), lane 0
//     issues 4 MMAs per 64-wide K atom (K-step 16: +32 bytes on the smem
//     descriptors), releases each smem stage with tcgen05.commit to its
//     empty barrier, and signals a finished accumulator with tcgen05.commit
//     to tmem_full[buf]; epilogue warps hand the buffer back through
//     tmem_empty[buf] (one arrival per epilogue warp, after
//     tcgen05.fence::before_thread_sync).
//
// The accumulator of M = 128 rows: row i of the tile is TMEM lane i, column
// j of the B tile is TMEM column base + buf*NB + j (the cta_group::1 M = 128
// data path layout). Grid: persistent, one block per SM of a B200 (148);
// work items as on sm_90a.
//
// BTable (one allocation per expert): the 32 lanes of the TMA warp copy the
// B tile with cp.async into the swizzled layout (as on sm_90a, see
// sm90Engine), full barriers expect 1 + 32 arrivals, and the MMA thread
// issues fence.proxy.async.shared::cta after each full-barrier wait.
//
// Not yet supported (refused with an error): M = 64 tiles, 2-CTA clusters
// (cta_group::2).
type sm100Engine struct{}

func init() { RegisterEngine(target.SM100a, func() Engine { return sm100Engine{} }) }

// Target returns "sm_100a".
func (sm100Engine) Target() target.Target { return target.SM100a }

// sm100Persistent is the persistent grid of the sm_100a engine: one block
// per SM of the target table's reference part (B200: 148).
var sm100Persistent = target.SM100a.SMs()

// sm100Layout is the derived geometry of one sm_100a GEMM kernel.
type sm100Layout struct {
	BM, BN, NB, BK, S int
	epiWarps, groups  int // epilogue warps (4*groups)
	tmaWarp, mmaWarp  int
	threads           int
	atoms             int
	aAtom, bAtom      int
	stageBytes        int
	barOff            int // full[S], empty[S], tmemFull[2], tmemEmpty[2], tmem address word
	sharedBytes       int
	tmemCols          int
	kTiles, nBlocks   int
	gated, interleave bool
	idesc             uint32
	descHi            uint64 // smem descriptor bits of the K-major 128B-swizzled atoms
}

func sm100Plan(s GemmSpec) (sm100Layout, error) {
	var l sm100Layout
	l.BM, l.BN, l.BK, l.S = s.Tile.BM, s.Tile.BN, s.Tile.BK, s.Tile.Stages
	l.gated = s.Epilogue == EpiGated
	l.interleave = l.gated && s.Gate == GateInterleaved
	l.NB = l.BN
	if l.gated {
		l.NB = 2 * l.BN
	}
	l.epiWarps = s.Tile.EpilogueWarps
	if l.epiWarps == 0 {
		l.epiWarps = 4
	}
	switch {
	case l.BM != 128:
		return l, fmt.Errorf("codegen: %s: sm_100a tile BM = %d: only M = 128 (tcgen05.mma cta_group::1, one TMEM lane per row) is implemented", s.Name, l.BM)
	case s.Tile.Cluster > 1:
		return l, fmt.Errorf("codegen: %s: sm_100a engine: 2-CTA clusters (cta_group::2) are not implemented (Cluster = %d)", s.Name, s.Tile.Cluster)
	case l.NB%16 != 0 || l.NB < 16 || l.NB > 256 || l.BN%8 != 0:
		return l, fmt.Errorf("codegen: %s: sm_100a B tile of %d rows (BN = %d) must be a multiple of 16 in 16..256 (tcgen05.mma M = 128)", s.Name, l.NB, l.BN)
	case l.BK%64 != 0:
		return l, fmt.Errorf("codegen: %s: sm_100a K block %d must be a multiple of 64 (one 128-byte swizzle row of bf16 per TMA box)", s.Name, l.BK)
	case l.S < 2:
		return l, fmt.Errorf("codegen: %s: sm_100a needs at least 2 pipeline stages, got %d", s.Name, l.S)
	case l.epiWarps%4 != 0 || l.epiWarps > 16:
		return l, fmt.Errorf("codegen: %s: sm_100a needs 4, 8, 12 or 16 epilogue warps (one per TMEM lane quarter), got %d", s.Name, l.epiWarps)
	case s.Tile.Warps > 1:
		return l, fmt.Errorf("codegen: %s: sm_100a issues tcgen05.mma from one warp, schedule has %d MMA warps", s.Name, s.Tile.Warps)
	}
	l.groups = l.epiWarps / 4
	l.tmaWarp = l.epiWarps
	l.mmaWarp = l.epiWarps + 1
	l.threads = 32 * (l.epiWarps + 2)
	l.atoms = l.BK / 64
	l.aAtom = l.BM * 128
	l.bAtom = l.NB * 128
	l.stageBytes = l.atoms * (l.aAtom + l.bAtom)
	l.barOff = l.S * l.stageBytes
	l.sharedBytes = 1024 + l.barOff + 16*l.S + 32 + 16
	if lim := target.SM100a.SharedMemoryLimit(); l.sharedBytes > lim {
		return l, fmt.Errorf("codegen: %s: sm_100a tile %dx%dx%d with %d stages needs %d bytes of shared memory (> %d)", s.Name, l.BM, l.NB, l.BK, l.S, l.sharedBytes, lim)
	}
	l.tmemCols = 32
	for l.tmemCols < 2*l.NB {
		l.tmemCols *= 2
	}
	l.kTiles = (s.K + l.BK - 1) / l.BK
	l.nBlocks = (s.N + l.BN - 1) / l.BN
	var err error
	if l.idesc, err = TCGen05IDescF16(l.BM, l.NB); err != nil {
		return l, fmt.Errorf("codegen: %s: %w", s.Name, err)
	}
	if l.descHi, err = SM100DescK128B(); err != nil {
		return l, fmt.Errorf("codegen: %s: %w", s.Name, err)
	}
	return l, nil
}

// GroupedGEMM adds the sm_100a kernel of spec to m.
func (sm100Engine) GroupedGEMM(m *ir.Module, spec GemmSpec, rowsPerT int64) (KernelInfo, error) {
	if err := spec.Validate(); err != nil {
		return KernelInfo{}, err
	}
	l, err := sm100Plan(spec)
	if err != nil {
		return KernelInfo{}, err
	}
	bBox := l.NB
	if l.gated && !l.interleave {
		bBox = l.BN
	}
	tmaps, err := sm90TensorMaps(spec, rowsPerT, l.BM, bBox)
	if err != nil {
		return KernelInfo{}, err
	}
	params := append(GemmParams(spec), tmaps...)
	if spec.B == BTable {
		params = params[:len(params)-1] // B comes through cp.async: no tensor map
	}
	b := NewKernel(m, spec.Name, l.threads, gemmIRParams(params)...)
	b.MinBlocksPerSM(1)
	if err := l.emit(b, spec); err != nil {
		return KernelInfo{}, err
	}
	return KernelInfo{Name: spec.Name, Params: params, Block: l.threads, SharedBytes: l.sharedBytes,
		Grid: [3]Expr{persistentGrid(spec.Tile, sm100Persistent), Const(1), Const(1)}, GridPerSM: spec.Tile.Grid == 0}, nil
}

// sm100Chunk is a run of accumulator columns one tcgen05.ld reads.
type sm100Chunk struct{ col, n int }

// chunks splits w columns into tcgen05.ld runs of 32, 16 and 8.
func sm100Chunks(w int) []sm100Chunk {
	var out []sm100Chunk
	for c := 0; c < w; {
		n := 32
		for n > w-c {
			n /= 2
		}
		out = append(out, sm100Chunk{c, n})
		c += n
	}
	return out
}

func (l sm100Layout) emit(b *Builder, spec GemmSpec) error {
	tid := b.ThreadIdx(ir.X)
	lane, warp := b.LaneWarp()
	base := b.SharedBase1024()
	bars := b.AddI(base, int64(l.barOff))
	full := func(stage value.Value) value.Value { return b.Add(bars, b.MulI(stage, 8)) }
	empty := func(stage value.Value) value.Value { return b.Add(bars, b.AddI(b.MulI(stage, 8), int64(8*l.S))) }
	tmemFull := func(buf value.Value) value.Value { return b.Add(bars, b.AddI(b.MulI(buf, 8), int64(16*l.S))) }
	tmemEmpty := func(buf value.Value) value.Value { return b.Add(bars, b.AddI(b.MulI(buf, 8), int64(16*l.S+16))) }
	tmemSlot := b.AddI(bars, int64(16*l.S+32))
	stageA := func(stage value.Value) value.Value { return b.Add(base, b.MulI(stage, int64(l.stageBytes))) }
	tmA := b.PtrToInt(b.Param("tmap_a"))
	var tmB value.Value
	fullCount := 1
	table := spec.B == BTable
	if table {
		fullCount += 32 // one cp.async arrival per lane of the TMA warp
	} else {
		tmB = b.PtrToInt(b.Param("tmap_b"))
	}
	var err error

	b.If(b.ICmp(enum.IPredEQ, tid, ir.Int32(0)), func() {
		for s := 0; s < l.S; s++ {
			b.MbarInit(b.AddI(bars, int64(8*s)), fullCount)
			b.MbarInit(b.AddI(bars, int64(8*(l.S+s))), 1)
		}
		for i := 0; i < 2; i++ {
			b.MbarInit(b.AddI(bars, int64(16*l.S+8*i)), 1)
			b.MbarInit(b.AddI(bars, int64(16*l.S+16+8*i)), l.epiWarps)
		}
		b.FenceMbarInit()
		b.PrefetchTensorMap(tmA)
		if tmB != nil {
			b.PrefetchTensorMap(tmB)
		}
	})
	isMMA := b.ICmp(enum.IPredEQ, warp, ir.Int32(int64(l.mmaWarp)))
	b.If(isMMA, func() {
		if e := b.TMEMAlloc(tmemSlot, l.tmemCols); e != nil {
			err = e
		}
		b.TMEMRelinquish()
	})
	b.TCGen05FenceBefore()
	b.SyncThreads()
	b.TCGen05FenceAfter()
	tmem := b.LoadAt(ir.I32, b.IntToPtr(b.ZExt(tmemSlot, ir.I64), SPtr), 4)

	items := gemmItems(b, spec, l.BM, l.nBlocks)
	first, step := b.BlockIdx(ir.X), b.GridDim(ir.X)
	isLead := b.ICmp(enum.IPredEQ, lane, ir.Int32(0))

	b.IfElse(b.ICmp(enum.IPredSLT, warp, ir.Int32(int64(l.epiWarps))), func() {
		err = joinErr(err, l.epilogueWarps(b, spec, lane, warp, tmem, items, first, step, tmemFull, tmemEmpty))
	}, func() {
		b.If(b.ICmp(enum.IPredEQ, warp, ir.Int32(int64(l.tmaWarp))), func() {
			// TMA producer warp: the same loads as sm_90a (lane 0; all 32
			// lanes copy B with cp.async for BTable).
			pr := gemmProducer{spec: spec, BM: l.BM, BN: l.BN, NB: l.NB, BK: l.BK, S: l.S, atoms: l.atoms,
				aAtom: l.aAtom, bAtom: l.bAtom, stageBytes: l.stageBytes, kTiles: l.kTiles, nBlocks: l.nBlocks,
				gated: l.gated, interleave: l.interleave, threads: 32, base: base, bars: bars, tmA: tmA, tmB: tmB}
			err = joinErr(err, pr.emit(b, lane, first, items, step))
		})
		b.If(b.And(isMMA, isLead), func() {
			// MMA issuer: ring (stage, phase) and accumulator buffer (buf, bphase).
			init := []value.Value{ir.Int32(0), ir.Int32(0), ir.Int32(0), ir.Int32(0)}
			b.Loop(first, items, step, init, func(it value.Value, v []value.Value) []value.Value {
				buf, bphase := v[2], v[3]
				b.MbarWait(tmemEmpty(buf), b.Xor(bphase, ir.Int32(1)))
				b.TCGen05FenceAfter()
				d := b.Add(tmem, b.MulI(buf, int64(l.NB)))
				ring := b.Loop(ir.Int32(0), ir.Int32(int64(l.kTiles)), ir.Int32(1), v[:2], func(kt value.Value, v []value.Value) []value.Value {
					stage, phase := v[0], v[1]
					b.MbarWait(full(stage), phase)
					if table {
						// B was written by cp.async (generic proxy); tcgen05.mma reads
						// through the async proxy.
						b.FenceProxyAsync()
					}
					b.TCGen05FenceAfter()
					sa := stageA(stage)
					dA := b.SM100Desc(sa, l.descHi)
					dB := b.SM100Desc(b.AddI(sa, int64(l.atoms*l.aAtom)), l.descHi)
					notFirst := b.ZExt(b.ICmp(enum.IPredSGT, kt, ir.Int32(0)), ir.I32)
					for a := 0; a < l.atoms; a++ {
						for k := 0; k < 4; k++ {
							acc := value.Value(ir.Int32(1))
							if a == 0 && k == 0 {
								acc = notFirst
							}
							oa := int64((a*l.aAtom + 32*k) >> 4)
							ob := int64((a*l.bAtom + 32*k) >> 4)
							b.TCGen05MMAF16(d, b.AddI(dA, oa), b.AddI(dB, ob), l.idesc, acc)
						}
					}
					b.TCGen05Commit(empty(stage))
					s2, p2 := ringNext(b, stage, phase, l.S)
					return []value.Value{s2, p2}
				})
				b.TCGen05Commit(tmemFull(buf))
				b2, bp2 := ringNext(b, buf, bphase, 2)
				return []value.Value{ring[0], ring[1], b2, bp2}
			})
		})
	})
	// Teardown: every epilogue warp has read its last accumulator and every
	// MMA has completed (the epilogue waited on its commit), so the MMA warp
	// frees the tensor memory.
	b.TCGen05FenceBefore()
	b.SyncThreads()
	b.TCGen05FenceAfter()
	b.If(isMMA, func() { b.TMEMDealloc(tmem, l.tmemCols) })
	b.Ret(nil)
	return err
}

// epilogueWarps emits the epilogue warps' loop: wait for a finished
// accumulator buffer, read this warp's lane quarter and column chunks with
// tcgen05.ld, store through the shared Epilogue, release the buffer.
func (l sm100Layout) epilogueWarps(b *Builder, spec GemmSpec, lane, warp, tmem, items, first, step value.Value,
	tmemFull, tmemEmpty func(value.Value) value.Value) error {
	var err error
	quarter := b.And(warp, ir.Int32(3))
	group := b.LShr(warp, ir.Int32(2))
	laneBase := b.Shl(b.MulI(quarter, 32), ir.Int32(16)) // TMEM lane field of this warp's quarter
	isLead := b.ZExt(b.ICmp(enum.IPredEQ, lane, ir.Int32(0)), ir.I32)
	// Chunks over the output columns of the tile (h columns for gated).
	units := l.NB
	if l.gated {
		units = l.BN
	}
	chunks := sm100Chunks(units)
	b.Loop(first, items, step, []value.Value{ir.Int32(0), ir.Int32(0)}, func(it value.Value, v []value.Value) []value.Value {
		buf, bphase := v[0], v[1]
		w := gemmDecode(b, spec, it, l.BM, l.BN, l.nBlocks)
		b.MbarWait(tmemFull(buf), bphase)
		b.TCGen05FenceAfter()
		var bias value.Value
		if spec.Bias {
			bias = b.ByteOffset(b.Param("bias"), b.MulI(b.Wide(w.e), int64(4*spec.BRows())))
		}
		ep := NewEpilogue(spec, EpilogueArgs{C: b.Param("c"), Bias: bias, RowEnd: w.rowEnd})
		row := b.Add(w.row0, b.Add(b.MulI(quarter, 32), lane))
		taddr := b.Add(b.Add(tmem, laneBase), b.MulI(buf, int64(l.NB)))
		for ci, ch := range chunks {
			g := ci % l.groups
			emit := func() {
				switch {
				case l.gated && !l.interleave:
					gv, e1 := b.TCGen05Load32x32b(b.AddI(taddr, int64(ch.col)), ch.n)
					uv, e2 := b.TCGen05Load32x32b(b.AddI(taddr, int64(l.BN+ch.col)), ch.n)
					err = joinErr(err, joinErr(e1, e2))
					if e1 != nil || e2 != nil {
						return
					}
					for r := 0; r < ch.n; r += 8 {
						vals := make([]value.Value, 0, 16)
						for i := 0; i < 8; i++ {
							vals = append(vals, gv[r+i], uv[r+i])
						}
						err = joinErr(err, ep.Emit(b, row, b.AddI(w.n0, int64(ch.col+r)), vals))
					}
				case l.interleave:
					// Columns 2c, 2c+1 of the accumulator are (gate, up) of output c.
					vv, e := b.TCGen05Load32x32b(b.AddI(taddr, int64(2*ch.col)), 2*ch.n)
					err = joinErr(err, e)
					if e != nil {
						return
					}
					run := 8
					if ch.n < 8 {
						run = ch.n
					}
					for r := 0; r < ch.n; r += run {
						err = joinErr(err, ep.Emit(b, row, b.AddI(w.n0, int64(ch.col+r)), vv[2*r:2*(r+run)]))
					}
				default:
					vv, e := b.TCGen05Load32x32b(b.AddI(taddr, int64(ch.col)), ch.n)
					err = joinErr(err, e)
					if e != nil {
						return
					}
					for r := 0; r < ch.n; r += 8 {
						err = joinErr(err, ep.Emit(b, row, b.AddI(w.n0, int64(ch.col+r)), vv[r:r+8]))
					}
				}
			}
			if l.groups == 1 {
				emit()
			} else {
				b.If(b.ICmp(enum.IPredEQ, group, ir.Int32(int64(g))), emit)
			}
		}
		b.TCGen05FenceBefore()
		b.MbarArriveIf(tmemEmpty(buf), isLead)
		b2, bp2 := ringNext(b, buf, bphase, 2)
		return []value.Value{b2, bp2}
	})
	return err
}

// joinErr keeps the first non-nil error.
func joinErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
