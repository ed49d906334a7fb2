package codegen

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/target"
)

// The warp-specialized weight gradient on sm_90a (schedule.WGradWS):
// Main_e[m, n] += sum_{r of e} A[r, m] * B[r, n] as emitWeightGradWGMMA
// computes it (the same MN-major tiles, imm-trans-a and imm-trans-b, the
// same fixed order of the rows, the same store), with the sm_90a GEMM
// engine's division of labour instead of every warp doing everything:
//
//   - warpgroup 0, the producer (setmaxnreg.dec to wsProdRegs), copies
//     wsRows expert rows of A's 64*wsWG columns and B's wsN columns per
//     stage with cp.async (rows past the expert's end and columns past M or
//     N zero-filled: a TMA box could not stop at the expert's last row)
//     into a ring of wsStages stages, and each of its 128 threads arrives
//     on the stage's full mbarrier when its copies land
//     (cp.async.mbarrier.arrive.noinc);
//   - warpgroups 1..wsWG, the consumers (setmaxnreg.inc), run the K loop
//     of WGMMAMainloop over the ring: per stage, wait for full, issue the
//     four k16 steps as one wgmma group, keep it in flight while waiting
//     for the previous group (wait_group 1), then release the previous
//     stage (lane 0 of each warp arrives on its empty mbarrier); the
//     tensor cores never wait for a block barrier;
//   - then each consumer adds its 64 x wsN tile to the main grad
//     (wgradStorePairs: one rounding, no atomics), 2*wsPairGroup pairs'
//     loads in flight per round.
//
// A block owns a (64*wsWG) x wsN tile of Main_e, 128 x 128. The weight
// gradient is bound by the main grads' read-modify-write in f32
// (qwen3-30b-a3b's FC1: 1.61 GB each way, docs/megakernel.md), so the
// epilogue's loads in flight matter more than the L2 bytes a stage's B
// columns save: tiles of 128 x 256 (until run 59) held 128 accumulators
// per consumer thread and left registers for 12 main-grad pairs in flight,
// 128 x 128 tiles hold 64 and load all 32 pairs in one round (64 KB per
// SM), 0.22 ms faster forward + backward at qwen3-30b-a3b T = 4096 on an
// H100 (docs/perf.md, run 59). One block per SM (the ring is 4 x 32 KB),
// persistent: the producer fills the next tile's stages while the
// consumers store the last one's. The persistent backward's weight
// gradients on sm_90a (schedule.PersistentWGrad); per-op it is opt-in,
// level with WGradWGMMA at T = 4096 and 1.7% slower at T = 1100 on an H100
// (run 59).
const (
	wsWG       = 2   // consumer warpgroups: the tile has 64*wsWG rows of Main_e
	wsN        = 128 // columns of Main_e per tile (wgmma m64n128k16)
	wsRows     = 64  // expert rows per stage (four k16 steps)
	wsStages   = 4   // ring depth
	wsProdRegs = 56  // the producer's registers after setmaxnreg.dec
	// wsPairGroup: fragment column blocks (8 columns, 2 pairs each) per
	// round of the epilogue's main-grad loads: all 16 of a 128-column
	// tile, 32 pairs in flight (the consumers' warps waited on these loads
	// with 8 pairs, ncu in docs/perf.md run 55; no spills, ptxas 12.9)
	wsPairGroup = 16
)

// emitWeightGradWS is the warp-specialized kernel of op (see above): a
// persistent grid of one block per SM (GridPerSM), 128*(wsWG+1) threads,
// wsStages stages of A and B plus the ring's mbarriers (+1 KB to
// realign). Block x takes work items x, x + gridDim.x, ... of the E *
// ceil(M/(64*wsWG)) * ceil(N/wsN) tiles (expert outermost, then row
// tiles, column tiles fastest); producer and consumers walk the same items
// and carry the ring's stage and phase from one to the next, so the
// producer fills the next tile's first stages while the consumers store
// the last one's sums. Tiles of experts without rows are skipped by both.
// The bias gradient is emitWeightGradBias's. As a phase of a persistent
// kernel (persistent) each role gives its registers back at its end
// (phaseGiveBack: a role that kept its setmaxnreg target past the phase
// would hold the later phases' code, which every warp runs, to the
// producer's wsProdRegs registers, as ptxas allocates for the fewest a
// path may have) and the ring's mbarriers are invalidated
// (mbarRing.inval), as a GEMM phase does (sm90Layout.giveBack,
// invalBars).
func emitWeightGradWS(m *ir.Module, op moe.WeightGrad, persistent bool) (Kernel, error) {
	tm, tn := int64(64*wsWG), int64(wsN)
	tl, err := newWGradTiles(op, int(tm), int(tn), wsRows)
	if err != nil {
		return Kernel{}, err
	}
	aT, bT, hiA, hiB, offA, offB := tl.a, tl.b, tl.hiA, tl.hiB, tl.offA, tl.offB
	threads := 128 * (wsWG + 1)
	stageBytes := int64(aT.Bytes() + bT.Bytes())
	launchRegs, mmaRegs := regBudget(threads, wsWG, wsProdRegs)
	if acc := wsN / 2; acc+40 > mmaRegs {
		return Kernel{}, fmt.Errorf("codegen: %s: %d accumulators per consumer thread exceed its %d registers", op.Name(), acc, mmaRegs)
	}
	M, N := int64(op.M), int64(op.N)
	mt, nt := (M+tm-1)/tm, (N+tn-1)/tn
	items := int64(op.Experts) * mt * nt

	b, k := opKernel(m, op, threads, op.Offsets == nil)
	b.MinBlocksPerSM(1)
	b.MaxRegisters(launchRegs)
	tid := b.ThreadIdx(ir.X)
	lane, warp := b.LaneWarp()
	base := b.SharedBase1024()
	ring := mbarRing{bars: b.AddI(base, wsStages*stageBytes), S: wsStages}
	ring.init(b, tid, 128, 4*wsWG, nil, nil, nil) // full: every producer thread's cp.async; empty: every consumer warp
	b.SyncThreads()
	// each walks the block's items, carrying (stage, phase); body runs the
	// items whose expert has rows.
	each := func(body func(w wgradBlock, stage, phase value.Value) []value.Value) {
		b.Loop(b.BlockIdx(ir.X), ir.Int32(items), b.GridDim(ir.X), []value.Value{ir.Int32(0), ir.Int32(0)}, func(it value.Value, v []value.Value) []value.Value {
			w := wgradBlock{tid: tid, lane: lane, warp: warp}
			w.e = b.UDiv(it, ir.Int32(mt*nt))
			r := b.URem(it, ir.Int32(mt*nt))
			w.m0, w.n0 = b.MulI(b.UDiv(r, ir.Int32(nt)), tm), b.MulI(b.URem(r, ir.Int32(nt)), tn)
			w.lo, w.hi = b.expertRows(op, w.e)
			w.kTiles = b.UDiv(b.AddI(b.Sub(w.hi, w.lo), wsRows-1), ir.Int32(wsRows))
			return b.IfElseVals(b.ICmp(enum.IPredSLT, w.lo, w.hi), func() []value.Value { return body(w, v[0], v[1]) },
				func() []value.Value { return v })
		})
	}
	wg := b.LShr(tid, ir.Int32(7))
	b.IfElse(b.ICmp(enum.IPredEQ, wg, ir.Int32(0)), func() {
		b.SetMaxNReg(false, wsProdRegs)
		ld := wsLoader{stageBytes: stageBytes, bOff: int64(aT.Bytes()), atomBytes: int64(aT.AtomBytes())}
		each(func(w wgradBlock, stage, phase value.Value) []value.Value {
			return ld.emit(b, op, w, base, ring, stage, phase)
		})
		b.cpAsyncWait(0) // the last copies land before the producer threads exit
		if persistent {
			b.phaseGiveBack(threads, wsProdRegs, launchRegs)
		}
	}, func() {
		b.SetMaxNReg(true, mmaRegs)
		c := b.AddI(wg, -1)
		laneZero := b.ZExt(b.ICmp(enum.IPredEQ, lane, ir.Int32(0)), ir.I32)
		ml := WGMMAMainloop{N: wsN, Stages: wsStages, StageBytes: int(stageBytes), BOffset: aT.Bytes(),
			OffA: offA, OffB: offB, DescHi: hiA, DescHiB: hiB, TransA: true, TransB: true, ProxyFence: true}
		each(func(w wgradBlock, stage, phase value.Value) []value.Value {
			acc, s2, p2, e := b.WGMMAMainloop(ml, stage, phase, w.kTiles, ring.bars, base, b.MulI(c, int64(aT.AtomBytes())), laneZero)
			if e != nil {
				err = e
				return []value.Value{stage, phase}
			}
			b.wgradStorePairs(op, w.e, w.m0, w.n0, b.wgmmaPairGroups(c, lane, warp, acc, wsN, wsPairGroup))
			return []value.Value{s2, p2}
		})
		if persistent {
			b.phaseGiveBack(threads, mmaRegs, launchRegs)
		}
	})
	if err != nil {
		return Kernel{}, err
	}
	if persistent {
		ring.inval(b, tid, nil)
	}
	b.Ret(nil)
	k.SharedBytes = int(wsStages*stageBytes) + 16*wsStages + 1024
	k.SkipIfZeroT = true
	k.Grid = [3]Expr{Const(int64(target.SM90a.SMs())), Const(1), Const(1)}
	k.GridPerSM = true
	return k, nil
}

// wsLoader is the producer side of the warp-specialized weight gradient:
// the 128 producer threads copy each stage's A tile (64*wsWG columns of A
// from m0) and B tile (wsN columns of B from n0), wsRows rows each, as
// MN-major tiles of 64-column atoms (atomBytes each: wsRows rows of 128
// bytes, 128-byte swizzle: chunk ch%8 of row r at r*128 + ((ch%8) ^
// (r%8))*16 in atom ch/8; layouts.NewSmemTileMN), A at stage offset 0, B
// at bOff.
type wsLoader struct {
	stageBytes, bOff, atomBytes int64
}

// wsOperand is one operand's part of a producer thread's copies: its
// global base (row lo, column c0 + 8*ch of a [rows, width] bf16 matrix),
// whether those columns exist, the stage rows row0 + i*step it copies,
// and its tile's offset in the stage.
type wsOperand struct {
	gBase, colOK, ch, row0 value.Value
	width, step, reps      int64
	sOff                   int64
}

// operand emits the calling producer thread's share (tid in 0..127) of an
// operand of tileW columns from c0 of a [rows, width] matrix at base:
// chunk tid%(tileW/8) of rows tid/(tileW/8) + i*128/(tileW/8).
func (ld wsLoader) operand(b *Builder, base, tid, lo, c0 value.Value, width, tileW, sOff int64) wsOperand {
	cpr := tileW / 8 // 16-byte chunks per row
	o := wsOperand{width: width, step: 128 / cpr, reps: wsRows * cpr / 128, sOff: sOff}
	o.ch = b.URem(tid, ir.Int32(cpr))
	o.row0 = b.UDiv(tid, ir.Int32(cpr))
	col := b.Add(c0, b.MulI(o.ch, 8))
	o.colOK = b.ICmp(enum.IPredSLT, col, ir.Int32(width))
	o.gBase = b.PtrToInt(b.ByteOffset(base, b.Add(b.MulI(b.Wide(lo), 2*width), b.MulI(b.Wide(col), 2))))
	return o
}

// emit is the producer's part of work item w: for each stage kt of the
// expert's rows, wait for the ring's next stage (from stage, phase) to be
// empty, issue the thread's cp.async copies (source size 0 for rows at or
// past hi and columns past the operand's width) and arrive on its full
// barrier when they land. Returns the advanced stage and phase.
func (ld wsLoader) emit(b *Builder, op moe.WeightGrad, w wgradBlock, base value.Value, ring mbarRing, stage, phase value.Value) []value.Value {
	tid := w.tid
	ops := []wsOperand{
		ld.operand(b, b.Param("a"), tid, w.lo, w.m0, int64(op.M), 64*wsWG, 0),
		ld.operand(b, b.Param("b"), tid, w.lo, w.n0, int64(op.N), wsN, ld.bOff),
	}
	rows := b.Sub(w.hi, w.lo)
	return b.Loop(ir.Int32(0), w.kTiles, ir.Int32(1), []value.Value{stage, phase}, func(kt value.Value, v []value.Value) []value.Value {
		stage, phase := v[0], v[1]
		b.MbarWait(ring.empty(b, stage), b.Xor(phase, ir.Int32(1)))
		st := b.Add(b.ZExt(base, ir.I64), b.MulI(b.Wide(stage), ld.stageBytes))
		r0 := b.MulI(kt, wsRows) // first stage row, relative to lo
		for _, o := range ops {
			for i := int64(0); i < o.reps; i++ {
				r := b.AddI(o.row0, i*o.step) // row inside the stage
				rr := b.Add(r0, r)
				ok := b.And(o.colOK, b.ICmp(enum.IPredSLT, rr, rows))
				src := b.Select(ok, b.Add(o.gBase, b.MulI(b.Wide(rr), 2*o.width)), o.gBase)
				size := b.Select(ok, ir.Int32(16), ir.Int32(0))
				sw := b.Xor(b.And(o.ch, ir.Int32(7)), b.And(r, ir.Int32(7)))
				off := b.Add(b.MulI(b.LShr(o.ch, ir.Int32(3)), ld.atomBytes), b.Add(b.MulI(r, 128), b.MulI(sw, 16)))
				b.CpAsync16(b.Add(st, b.AddI(b.Wide(off), o.sOff)), src, size)
			}
		}
		b.CpAsyncMbarArrive(ring.full(b, stage))
		s2, p2 := ringNext(b, stage, phase, wsStages)
		return []value.Value{s2, p2}
	})
}
