package codegen

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	llir "github.com/llir/llvm/ir"

	"github.com/mokc/mokc/internal/goldenfile"
	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/ir"
	mptx "github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// sm90Specs returns the grouped-GEMM specs Build makes for preset name on
// target (FC1, FC2 and, with a shared expert, the shared FC1/FC2).
func sm90Specs(t *testing.T, name string, target target.Target) []GemmSpec {
	t.Helper()
	l, s := presetSchedule(t, name, target)
	tile := func(tt schedule.Tile, gated bool) Tile {
		bn := tt.N
		if gated {
			bn /= 2
		}
		return Tile{BM: tt.M, BN: bn, BK: tt.K, Stages: s.Stages, Warps: s.Warps.MMA,
			ProducerWarps: s.Warps.Producer, EpilogueWarps: s.Warps.Epilogue, Cluster: s.Cluster}
	}
	gate := GateHalves
	if l.GateUpInterleaved {
		gate = GateInterleaved
	}
	specs := []GemmSpec{
		{Name: "moe_fc1", N: l.Intermediate, K: l.Hidden, Experts: l.Experts, A: ATiled, B: BGrouped,
			Epilogue: EpiGated, Gate: gate, Act: Activation{Kind: ActSwiGLU}, Bias: l.Biases, Tile: tile(s.FC1, true)},
		{Name: "moe_fc2", N: l.Hidden, K: l.Intermediate, Experts: l.Experts, A: ATiled, B: BGrouped,
			Epilogue: EpiStore, Bias: l.Biases, Tile: tile(s.FC2, false)},
	}
	if is := l.SharedWidth(); is > 0 {
		specs = append(specs,
			GemmSpec{Name: "moe_shared_fc1", N: is, K: l.Hidden, Experts: 1, A: ADense, B: BGrouped,
				Epilogue: EpiGated, Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, Tile: tile(s.FC1, true)},
			GemmSpec{Name: "moe_shared_fc2", N: l.Hidden, K: is, Experts: 1, A: ADense, B: BGrouped,
				Epilogue: EpiStore, Tile: tile(s.FC2, false)})
	}
	return specs
}

// presetsUnderTest lists the presets whose kernels the assembly tests
// build: all of them, or with -short one per family (shared expert and
// H = 7168; GPT-OSS interleaved gate/up with biases and H = 2880; no
// shared expert).
func presetsUnderTest() []string {
	if testing.Short() {
		return []string{"deepseek-v3", "gpt-oss-20b", "qwen3-30b-a3b"}
	}
	return schedule.Presets()
}

// presetGEMMs builds preset name's grouped GEMMs (sm90Specs) with tg's
// engine into one module and returns it with its LLVM 19 text.
func presetGEMMs(t *testing.T, name string, tg target.Target) (*llir.Module, string) {
	t.Helper()
	eng, err := EngineFor(tg)
	if err != nil {
		t.Fatal(err)
	}
	im := ir.NewModule(strings.ReplaceAll(strings.TrimSuffix(tg.String(), "a"), "_", "") + "_" + name) // sm90_NAME, sm100_NAME
	for _, s := range sm90Specs(t, name, tg) {
		if _, err := eng.GroupedGEMM(im, s, 8); err != nil {
			t.Fatal(err)
		}
	}
	m, err := im.Finish()
	if err != nil {
		t.Fatal(err)
	}
	text, err := ir.LLVM19Text(m)
	if err != nil {
		t.Fatal(err)
	}
	return m, text
}

// assembleOurs compiles m with mokc's ptx backend for tg, assembles the
// result with ptxas and returns it.
func assembleOurs(t *testing.T, m *llir.Module, tg target.Target) string {
	t.Helper()
	ours, err := mptx.Compile(m, tg)
	if err != nil {
		t.Fatal(err)
	}
	if err := toolchain.Assemble(ours, tg.String()); err != nil {
		t.Fatal("mokc ptx:", strings.SplitN(err.Error(), "\n", 20))
	}
	return ours
}

// TestSM90PresetsAssemble builds every preset's grouped GEMMs with the
// sm_90a engine, compiles them with llc-19 and with mokc's ptx backend, and
// assembles both with ptxas for sm_90a.
func TestSM90PresetsAssemble(t *testing.T) {
	for _, name := range presetsUnderTest() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, text := presetGEMMs(t, name, target.SM90a)
			ptx := llcPTX(t, text, "sm_90a")
			toolchain.NeedPtxas(t, "sm_90a")
			if err := toolchain.Assemble(ptx, "sm_90a"); err != nil {
				t.Fatal("llc-19:", strings.SplitN(err.Error(), "\n", 20))
			}
			assembleOurs(t, m, target.SM90a)
		})
	}
}

// TestSM90GemmCaseCounts checks the GPU tests' cases without a GPU: an
// ATiled case lists at most one row count per expert (the GPU harness
// reads expert e's weights for the rows of count e, so one more count
// than experts reads past B), an ADense case one row count.
func TestSM90GemmCaseCounts(t *testing.T) {
	lists := [][]sm90GemmCase{sm90GemmCases("c"), sm90NMajorCases("c"), sm90MXCases(), sm90MXWholeCases(),
		sm90MXSwapCases(), sm90MXRegFedCases(), sm90MXExpandCases(), sm90PerfCases("c")}
	for _, cases := range lists {
		for _, c := range cases {
			s := c.spec
			switch {
			case s.A == ADense && len(c.counts) != 1:
				t.Errorf("%s: a dense case with %d row counts, not one", s.Name, len(c.counts))
			case s.A != ADense && (len(c.counts) == 0 || len(c.counts) > s.Experts):
				t.Errorf("%s: %d row counts for %d experts", s.Name, len(c.counts), s.Experts)
			}
		}
	}
}

// sm90GemmCase is one grouped GEMM of the engine GPU test: a spec, the
// rows per expert (ATiled) or the row count (ADense).
type sm90GemmCase struct {
	spec   GemmSpec
	counts []int // rows per expert (ATiled); one entry, the row count M, for ADense
}

// sm90GemmCases covers ragged experts (empty, 1 row, not tile multiples,
// more than one tile), K not a multiple of 64, N not a multiple of BN, the
// three epilogues (plain with bias, SwiGLU over gate/up halves, GPT-OSS over
// interleaved rows with biases), 1, 2 and 3 consumer warpgroups, and the
// dense (shared-expert) row mode. Kernel names are prefixed by prefix.
func sm90GemmCases(prefix string) []sm90GemmCase {
	t := func(bm, bn, stages int) Tile { return Tile{BM: bm, BN: bn, BK: 64, Stages: stages, Warps: 4 * bm / 64} }
	return []sm90GemmCase{
		{GemmSpec{Name: prefix + "_store", N: 200, K: 200, Experts: 5, A: ATiled, B: BGrouped, Epilogue: EpiStore,
			Bias: true, Tile: t(128, 128, 3)}, []int{37, 0, 130, 300, 64}},
		// 4 stages leave no room for the staging tile: direct stores.
		{GemmSpec{Name: prefix + "_direct", N: 200, K: 200, Experts: 5, A: ATiled, B: BGrouped, Epilogue: EpiStore,
			Bias: true, Tile: t(128, 256, 4)}, []int{37, 0, 130, 300, 64}},
		{GemmSpec{Name: prefix + "_swiglu", N: 96, K: 2880, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, Tile: t(128, 128, 3)}, []int{1, 129, 250}},
		{GemmSpec{Name: prefix + "_gptoss", N: 72, K: 256, Experts: 4, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, Bias: true, Tile: t(64, 64, 2)},
			[]int{70, 5, 0, 64}},
		{GemmSpec{Name: prefix + "_dense", N: 136, K: 136, Experts: 1, A: ADense, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActClampedSwiGLU, Limit: 3}, Tile: t(192, 64, 3)}, []int{300}},
		// Two 64-wide K atoms per stage (BK = 128), the last K block mostly
		// out of range.
		{GemmSpec{Name: prefix + "_bk128", N: 64, K: 328, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiStore,
			Tile: Tile{BM: 128, BN: 64, BK: 128, Stages: 3, Warps: 8}}, []int{150, 77}},
		{GemmSpec{Name: prefix + "_table_bk128", N: 48, K: 200, Experts: 2, A: ATiled, B: BTable, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, Tile: Tile{BM: 64, BN: 48, BK: 128, Stages: 2, Warps: 4}},
			[]int{9, 100}},
		// Per-expert weight allocations (B through cp.async).
		{GemmSpec{Name: prefix + "_table_swiglu", N: 80, K: 392, Experts: 3, A: ATiled, B: BTable, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, Tile: t(128, 64, 3)}, []int{3, 0, 200}},
		{GemmSpec{Name: prefix + "_table_gptoss", N: 136, K: 128, Experts: 2, A: ATiled, B: BTable, Epilogue: EpiGated,
			Gate: GateInterleaved, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, Bias: true, Tile: t(128, 128, 4)},
			[]int{65, 130}},
		// The rows gathered from the token rows by their slots (GatherK,
		// always with direct stores): K = 2880 (45 K blocks), one consumer
		// warpgroup with a K tail (200), interleaved rows with a bias, and
		// three warpgroups.
		{GemmSpec{Name: prefix + "_gather_swiglu", N: 96, K: 2880, Experts: 8, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, Tile: t(128, 128, 3), GatherK: 4},
			[]int{1, 127, 128, 129, 0, 255, 64, 3}},
		{GemmSpec{Name: prefix + "_gather_direct", N: 200, K: 200, Experts: 5, A: ATiled, B: BGrouped, Epilogue: EpiStore,
			Bias: true, Tile: t(64, 256, 4), GatherK: 2}, []int{37, 0, 130, 300, 64}},
		{GemmSpec{Name: prefix + "_gather_gptoss", N: 72, K: 256, Experts: 4, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, Bias: true, Tile: t(128, 64, 3), GatherK: 1},
			[]int{70, 5, 0, 200}},
		{GemmSpec{Name: prefix + "_gather_192", N: 96, K: 392, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, Tile: t(192, 96, 3), GatherK: 8},
			[]int{190, 1, 400}},
		// Two blocks per SM (Tile.BlocksPerSM), each within half the
		// registers and shared memory (direct stores: no staged
		// epilogue): a bias, and gate/up halves over K = 2880 with two
		// stages.
		{GemmSpec{Name: prefix + "_store_2sm", N: 200, K: 200, Experts: 5, A: ATiled, B: BGrouped, Epilogue: EpiStore,
			Bias: true, Tile: perSM(t(64, 128, 3))}, []int{37, 0, 130, 300, 64}},
		{GemmSpec{Name: prefix + "_swiglu_2sm", N: 96, K: 2880, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, Tile: perSM(t(64, 128, 2))}, []int{1, 129, 250}},
		// The same with a producer warpgroup (setmaxnreg: .maxnreg 128
		// bounds each wgmma's accumulators); B tiles of 256 rows issue
		// two wgmma of 128 per k16 step (WGMMAMainloop.OffBHi): plain,
		// its last tile past N, and gate/up halves.
		{GemmSpec{Name: prefix + "_store_2smwg", N: 200, K: 200, Experts: 5, A: ATiled, B: BGrouped, Epilogue: EpiStore,
			Bias: true, Tile: perSMWG(t(64, 192, 3))}, []int{37, 0, 130, 300, 64}},
		{GemmSpec{Name: prefix + "_swiglu_2smwg", N: 96, K: 2880, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, Tile: perSMWG(t(64, 96, 3))}, []int{1, 129, 250}},
		{GemmSpec{Name: prefix + "_store_split_2smwg", N: 312, K: 200, Experts: 4, A: ATiled, B: BGrouped, Epilogue: EpiStore,
			Bias: true, Tile: perSMWG(t(64, 256, 2))}, []int{37, 0, 130, 64}},
		{GemmSpec{Name: prefix + "_swiglu_split_2smwg", N: 160, K: 2880, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, Tile: perSMWG(t(64, 128, 2))}, []int{1, 129, 250}},
	}
}

// perSM is t with two blocks per SM (Tile.BlocksPerSM) of one producer
// warp each (Tile.ProducerWarps = 1).
func perSM(t Tile) Tile {
	t.BlocksPerSM, t.ProducerWarps = 2, 1
	return t
}

// perSMWG is t with two blocks per SM of one producer warpgroup each.
func perSMWG(t Tile) Tile {
	t.BlocksPerSM, t.ProducerWarps = 2, 4
	return t
}

// sm90NMajorCases are GEMMs over N-major weights (B_e stored [K, N], the
// backward's data gradients): ragged experts and N (the last column box
// partly past N), a K tail, the staged and the direct epilogue, ADense and
// BK = 128.
func sm90NMajorCases(prefix string) []sm90GemmCase {
	t := func(bm, bn, bk, stages int) Tile {
		return Tile{BM: bm, BN: bn, BK: bk, Stages: stages, Warps: 4 * bm / 64}
	}
	nm := func(name string, n, k, e int, a AMode, tile Tile, counts []int) sm90GemmCase {
		return sm90GemmCase{GemmSpec{Name: prefix + "_" + name, N: n, K: k, Experts: e, A: a, B: BGrouped, Epilogue: EpiStore,
			BNMajor: true, Tile: tile}, counts}
	}
	return []sm90GemmCase{
		nm("nmajor", 200, 200, 5, ATiled, t(128, 128, 64, 3), []int{37, 0, 130, 300, 64}),
		nm("nmajor_direct", 448, 328, 3, ATiled, t(128, 256, 64, 4), []int{1, 129, 250}),
		nm("nmajor_dense", 136, 136, 1, ADense, t(192, 64, 64, 3), []int{300}),
		nm("nmajor_bk128", 64, 328, 2, ATiled, t(128, 64, 128, 3), []int{150, 77}),
		// Two blocks per SM of a producer warpgroup, a B tile of 256
		// columns as two wgmma of 128 (WGMMAMainloop.OffBHi).
		nm("nmajor_split_2smwg", 312, 200, 3, ATiled, Tile{BM: 64, BN: 256, BK: 64, Stages: 2, Warps: 4, BlocksPerSM: 2, ProducerWarps: 4}, []int{37, 130, 1}),
	}
}

// sm80NMajorCases are the sm_80 engine's GEMMs over N-major weights (B_e
// stored [K, N]: ldmatrix .trans): ragged experts and N (a chunk of 8
// columns past N), a K tail, per-expert weights through a pointer table,
// ADense, and the warp and stage counts of the backward's schedules.
func sm80NMajorCases(prefix string) []sm90GemmCase {
	t := func(bm, bn, bk, stages, warps int) Tile {
		return Tile{BM: bm, BN: bn, BK: bk, Stages: stages, Warps: warps}
	}
	nm := func(name string, n, k, e int, a AMode, bm BMode, tile Tile, counts []int) sm90GemmCase {
		return sm90GemmCase{GemmSpec{Name: prefix + "_" + name, N: n, K: k, Experts: e, A: a, B: bm, Epilogue: EpiStore,
			BNMajor: true, Tile: tile}, counts}
	}
	return []sm90GemmCase{
		nm("nmajor", 200, 200, 5, ATiled, BGrouped, t(128, 128, 64, 3, 4), []int{37, 0, 130, 300, 64}),
		nm("nmajor_table", 136, 328, 3, ATiled, BTable, t(128, 128, 64, 3, 4), []int{1, 129, 250}),
		nm("nmajor_dense", 72, 136, 1, ADense, BGrouped, t(64, 64, 32, 4, 4), []int{300}),
		nm("nmajor_8warps", 264, 96, 2, ATiled, BGrouped, t(128, 256, 32, 3, 8), []int{150, 77}),
	}
}

// TestSM80NMajorAssemble builds the sm_80 N-major cases with mokc's PTX
// backend and assembles them for sm_80: ldmatrix .trans reads B, and no
// transposed copy is needed.
func TestSM80NMajorAssemble(t *testing.T) {
	eng, err := EngineFor(target.SM80)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range sm80NMajorCases("r") {
		if !eng.ReadsNMajorB(c.spec) {
			t.Errorf("%s: sm_80 does not read its N-major B", c.spec.Name)
		}
	}
	m, _ := sm90GemmModule(t, eng, sm80NMajorCases("sm80n"))
	text, err := mptx.Compile(m.IR, target.SM80)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(text, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"); n == 0 {
		t.Error("no ldmatrix .trans in the N-major kernels")
	}
	toolchain.NeedPtxas(t, "sm_80")
	if err := toolchain.Assemble(text, "sm_80"); err != nil {
		t.Fatal(strings.SplitN(err.Error(), "\n", 20))
	}
	s := sm80NMajorCases("r")[0].spec
	s.Epilogue, s.Act = EpiGated, Activation{Kind: ActSwiGLU}
	if eng.ReadsNMajorB(s) {
		t.Error("sm_80 reads an N-major B under a gated epilogue")
	}
}

// sm90MXCases are MXFP8 GEMMs (e4m3 A and B, UE8M0 scales per 32 along K):
// plain bf16 C (staged epilogue), gated f32 C with halves (K = 2880: a K
// tail of half a block of 128) and interleaved with bias, plain f32 C (the
// backward's FC1 recompute), ragged experts.
func sm90MXCases() []sm90GemmCase {
	t := func(bm, bn, stages int) Tile {
		return Tile{BM: bm, BN: bn, BK: 128, Stages: stages, Warps: 4 * bm / 64}
	}
	return []sm90GemmCase{
		{GemmSpec{Name: "mx_store", N: 200, K: 224, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiStore, MX: true,
			Tile: t(128, 128, 3)}, []int{37, 0, 300}},
		{GemmSpec{Name: "mx_swiglu_f32", N: 96, K: 2880, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, COutF32: true, MX: true, Tile: t(128, 64, 3)}, []int{129, 5}},
		{GemmSpec{Name: "mx_gptoss_f32", N: 72, K: 256, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, Bias: true, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, COutF32: true, MX: true,
			Tile: t(64, 64, 2)}, []int{70, 1, 64}},
		// e4m3 NaN bytes in B (the test puts three, "_nan"): NaN outputs
		// in their columns, as the float64 GEMM's (promoted, and expanded:
		// sm90MXExpandCases).
		{GemmSpec{Name: "mx_store_nan", N: 200, K: 224, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiStore, MX: true,
			Tile: t(128, 128, 3)}, []int{37, 0, 300}},
		// The backward's FC1 recompute: a plain f32 C.
		{GemmSpec{Name: "mx_store_f32", N: 136, K: 256, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiStore, COutF32: true, MX: true,
			Tile: t(128, 128, 3)}, []int{65, 130}},
	}
}

// sm90MXWholeCases are MXFP8 GEMMs whose B tile is not a multiple of 16
// rows (72), so the K loop issues one wgmma per 32-wide block
// (WGMMAMainloopMX.asmWhole), with an odd number of scale codes per row
// (K = 160: rows' codes not 4-byte aligned, a K tail of 32).
func sm90MXWholeCases() []sm90GemmCase {
	return []sm90GemmCase{{GemmSpec{Name: "mx_store72", N: 144, K: 160, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiStore, MX: true,
		Tile: Tile{BM: 64, BN: 72, BK: 128, Stages: 2, Warps: 4}}, []int{70, 3}}}
}

// sm90MXSwapCases are MXFP8 GEMMs of 32-row tiles, run with the operand
// swap (GemmSpec.swapAB): plain bf16 C (direct stores: a swap kernel is
// never staged, its producer warps stage the scale codes) with a partial column
// block and a K tail, gated f32 C with bias (K = 2880), a plain f32 C of
// one 64-row slice, gated bf16 C of 128-column tiles (four slices), and
// interleaved gate/up rows with bias (GPT-OSS: gate and up of a column in
// lanes 4 apart); experts of 0, 1, 9, 17, 23, 31, 33, 40, 46, 65 and 70
// rows, so that work items of every loop width of asmSwap (8, 16, 24 and 32
// token rows) occur.
func sm90MXSwapCases() []sm90GemmCase {
	t := func(bn, stages int) Tile { return Tile{BM: 32, BN: bn, BK: 128, Stages: stages, Warps: 4} }
	return []sm90GemmCase{
		{GemmSpec{Name: "mx_swap_store", N: 200, K: 224, Experts: 4, A: ATiled, B: BGrouped, Epilogue: EpiStore, MX: true,
			Tile: t(128, 4)}, []int{46, 0, 1, 33}},
		{GemmSpec{Name: "mx_swap_swiglu_f32", N: 96, K: 2880, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Bias: true, Act: Activation{Kind: ActSwiGLU}, COutF32: true, MX: true, Tile: t(64, 8)}, []int{1, 70, 9}},
		{GemmSpec{Name: "mx_swap_swiglu_nan_f32", N: 96, K: 2880, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Bias: true, Act: Activation{Kind: ActSwiGLU}, COutF32: true, MX: true, Tile: t(64, 8)}, []int{1, 70, 9}},
		{GemmSpec{Name: "mx_swap_store64_f32", N: 136, K: 256, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiStore, COutF32: true, MX: true,
			Tile: t(64, 3)}, []int{65, 31}},
		{GemmSpec{Name: "mx_swap_swiglu", N: 320, K: 384, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, MX: true, Tile: t(128, 3)}, []int{17, 40}},
		{GemmSpec{Name: "mx_swap_gptoss_f32", N: 72, K: 256, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, Bias: true, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, COutF32: true, MX: true,
			Tile: t(64, 4)}, []int{70, 1, 23}},
		// The epilogue also quantizes C (QuantizeC: FC1 with quantize_h
		// fused), gate/up in halves and interleaved.
		{GemmSpec{Name: "mx_swap_swiglu_f32_q", N: 96, K: 2880, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Bias: true, Act: Activation{Kind: ActSwiGLU}, COutF32: true, MX: true, QuantizeC: true, Tile: t(64, 8)}, []int{1, 70, 9}},
		{GemmSpec{Name: "mx_swap_gptoss_f32_q", N: 96, K: 256, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, Bias: true, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, COutF32: true, MX: true,
			QuantizeC: true, Tile: t(64, 4)}, []int{70, 1, 23}},
		// Only the quantized form (QuantizeCOnly: C stays unwritten).
		{GemmSpec{Name: "mx_swap_swiglu_f32_qonly", N: 160, K: 384, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, COutF32: true, MX: true, QuantizeC: true, QuantizeCOnly: true,
			Tile: t(64, 4)}, []int{70, 1, 23}},
		// The rows and their scale codes read from the token rows' MXFP8
		// form by their slots (GatherK: the decode FC1 of the mxfp8
		// forward): K = 2880 (scale rows not 4-byte aligned) with C
		// quantized only, interleaved gate/up rows with a bias, and a plain
		// bf16 C with a K tail and a partial column block.
		{GemmSpec{Name: "mx_swap_gather_swiglu_qonly", N: 96, K: 2880, Experts: 5, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, COutF32: true, MX: true, QuantizeC: true, QuantizeCOnly: true,
			Tile: t(64, 8), GatherK: 4}, []int{1, 70, 9, 0, 33}},
		{GemmSpec{Name: "mx_swap_gather_gptoss_q", N: 96, K: 256, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, Bias: true, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, COutF32: true, MX: true,
			QuantizeC: true, Tile: t(64, 4), GatherK: 1}, []int{70, 1, 23}},
		{GemmSpec{Name: "mx_swap_gather_store", N: 200, K: 224, Experts: 4, A: ATiled, B: BGrouped, Epilogue: EpiStore, MX: true,
			Tile: t(128, 4), GatherK: 8}, []int{46, 0, 1, 33}},
	}
}

// sm90MXRegFedCases are MXFP8 GEMMs run register-fed
// (GemmSpec.MXRegisterFed: bf16 A, e4m3 B widened in the consumers'
// registers), with 256-row B tiles (two consumer warpgroups) and with
// 128 and 64 (one): a plain bf16 C with a K tail and a partial column
// block, gate/up halves into f32 (with bias and K = 2880; 64 gate rows
// and their 64 up rows) and into bf16 rounded to odd (also interleaved,
// with 64, 128 and 256 token rows), interleaved gate/up (GPT-OSS) with 64-row tiles
// and with 128, and a plain f32 C of one 64-row slice with 96-row tiles.
func sm90MXRegFedCases() []sm90GemmCase {
	t := func(bm, bn, stages, warps int) Tile {
		return Tile{BM: bm, BN: bn, BK: 128, Stages: stages, Warps: warps}
	}
	return []sm90GemmCase{
		{GemmSpec{Name: "mx_rf_store", N: 200, K: 224, Experts: 4, A: ATiled, B: BGrouped, Epilogue: EpiStore, MX: true, MXRegisterFed: true,
			Tile: t(128, 256, 3, 8)}, []int{46, 0, 1, 260}},
		{GemmSpec{Name: "mx_rf_store_bias", N: 200, K: 256, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiStore, Bias: true, MX: true,
			MXRegisterFed: true, Tile: t(128, 256, 3, 8)}, []int{129, 5, 40}}, // bf16 C with a bias: columns 200..255 read it at N-1
		{GemmSpec{Name: "mx_rf_swiglu_f32", N: 96, K: 2880, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Bias: true, Act: Activation{Kind: ActSwiGLU}, COutF32: true, MX: true, MXRegisterFed: true,
			Tile: t(128, 128, 3, 8)}, []int{1, 70, 200}},
		{GemmSpec{Name: "mx_rf_swiglu64_f32", N: 160, K: 384, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, COutF32: true, MX: true, MXRegisterFed: true,
			Tile: t(128, 64, 4, 4)}, []int{130, 7}},
		// h as the forward's FC1 stores it (CRoundOdd): gate/up halves
		// into bf16 rounded to odd, two warpgroups and one.
		{GemmSpec{Name: "mx_rf_swiglu_odd", N: 96, K: 2880, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Bias: true, Act: Activation{Kind: ActSwiGLU}, CRoundOdd: true, MX: true, MXRegisterFed: true,
			Tile: t(128, 128, 3, 8)}, []int{1, 70, 200}},
		{GemmSpec{Name: "mx_rf_swiglu64_odd", N: 160, K: 384, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, CRoundOdd: true, MX: true, MXRegisterFed: true,
			Tile: t(128, 64, 4, 4)}, []int{130, 7}},
		{GemmSpec{Name: "mx_rf_gptoss_odd", N: 72, K: 256, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, Bias: true, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, CRoundOdd: true, MX: true,
			MXRegisterFed: true, Tile: t(64, 64, 3, 4)}, []int{70, 1, 23}},
		{GemmSpec{Name: "mx_rf_gptoss256_odd", N: 200, K: 2880, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, Bias: true, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, CRoundOdd: true, MX: true,
			MXRegisterFed: true, Tile: t(128, 128, 3, 8)}, []int{140, 3}},
		{GemmSpec{Name: "mx_rf_gptoss_t256_odd", N: 72, K: 256, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, Bias: true, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, CRoundOdd: true, MX: true,
			MXRegisterFed: true, Tile: t(256, 64, 2, 8)}, []int{257, 40}},
		{GemmSpec{Name: "mx_rf_gptoss_f32", N: 72, K: 256, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, Bias: true, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, COutF32: true, MX: true,
			MXRegisterFed: true, Tile: t(64, 64, 3, 4)}, []int{70, 1, 23}},
		{GemmSpec{Name: "mx_rf_gptoss256_f32", N: 200, K: 2880, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, Bias: true, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, COutF32: true, MX: true,
			MXRegisterFed: true, Tile: t(128, 128, 3, 8)}, []int{140, 3}},
		{GemmSpec{Name: "mx_rf_store64_f32", N: 136, K: 256, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiStore, COutF32: true,
			MX: true, MXRegisterFed: true, Tile: t(96, 64, 4, 4)}, []int{97, 31}},
		// 256 token rows: two warpgroups of one 64-row slice each.
		{GemmSpec{Name: "mx_rf_store_t256", N: 200, K: 288, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiStore, MX: true, MXRegisterFed: true,
			Tile: t(256, 128, 2, 8)}, []int{300, 0, 9}},
		{GemmSpec{Name: "mx_rf_gptoss_t256_f32", N: 72, K: 256, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, Bias: true, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, COutF32: true, MX: true,
			MXRegisterFed: true, Tile: t(256, 64, 2, 8)}, []int{257, 40}},
		// 256 token rows over gate/up halves loaded as pairs (BHalvesInPairs):
		// a ragged last column block (N = 72) whose up rows past N are TMA's
		// zero fill, f32 h and h rounded to odd as the layer stores it.
		{GemmSpec{Name: "mx_rf_swiglu_pairs_t256_f32", N: 72, K: 384, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, BHalvesInPairs: true, Act: Activation{Kind: ActSwiGLU}, COutF32: true, MX: true,
			MXRegisterFed: true, Tile: t(256, 64, 2, 8)}, []int{300, 0, 70}},
		{GemmSpec{Name: "mx_rf_swiglu_pairs_t256_odd", N: 192, K: 256, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, BHalvesInPairs: true, Act: Activation{Kind: ActSwiGLU}, CRoundOdd: true, MX: true,
			MXRegisterFed: true, Tile: t(256, 64, 2, 8)}, []int{257, 129}},
		// 192 token rows, three stages: the same slices, wgmma m64n192.
		{GemmSpec{Name: "mx_rf_store_t192", N: 200, K: 288, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiStore, MX: true, MXRegisterFed: true,
			Tile: t(192, 128, 3, 8)}, []int{300, 0, 193}},
		{GemmSpec{Name: "mx_rf_gptoss_t192_f32", N: 72, K: 256, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, Bias: true, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, COutF32: true, MX: true,
			MXRegisterFed: true, Tile: t(192, 64, 3, 8)}, []int{257, 40}},
		{GemmSpec{Name: "mx_rf_swiglu_pairs_t192_odd", N: 192, K: 256, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, BHalvesInPairs: true, Act: Activation{Kind: ActSwiGLU}, CRoundOdd: true, MX: true,
			MXRegisterFed: true, Tile: t(192, 64, 3, 8)}, []int{129, 48}},
		// Two blocks per SM (Tile.BlocksPerSM), one consumer warpgroup of
		// 64 token rows and three stages each: a plain bf16 C, gate/up
		// halves and interleaved rows into bf16 rounded to odd.
		{GemmSpec{Name: "mx_rf_store_2sm", N: 200, K: 224, Experts: 4, A: ATiled, B: BGrouped, Epilogue: EpiStore, MX: true, MXRegisterFed: true,
			Tile: perSM(t(64, 128, 3, 4))}, []int{46, 0, 1, 260}},
		{GemmSpec{Name: "mx_rf_swiglu_odd_2sm", N: 160, K: 384, Experts: 2, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, CRoundOdd: true, MX: true, MXRegisterFed: true,
			Tile: perSM(t(64, 64, 3, 4))}, []int{130, 7}},
		{GemmSpec{Name: "mx_rf_gptoss_odd_2sm", N: 72, K: 256, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, Bias: true, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, CRoundOdd: true, MX: true,
			MXRegisterFed: true, Tile: perSM(t(64, 64, 3, 4))}, []int{70, 1, 23}},
		// C's MXFP8 values written by the epilogue of a block of two per SM
		// (QuantizeCValues), with and without C itself; 96 columns of a
		// 64-column tile (the last block past N); ragged items of 1-16
		// rows (the K loop's narrow width) and of 17-63 (the full one).
		{GemmSpec{Name: "mx_rf_swiglu_quant_2sm", N: 96, K: 2880, Experts: 4, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Bias: true, Act: Activation{Kind: ActSwiGLU}, COutF32: true, MX: true, MXRegisterFed: true,
			QuantizeC: true, QuantizeCValues: true, Tile: perSM(t(64, 64, 3, 4))}, []int{1, 70, 200, 40}},
		{GemmSpec{Name: "mx_rf_swiglu_quant_only_2sm", N: 160, K: 384, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}, COutF32: true, MX: true, MXRegisterFed: true,
			QuantizeC: true, QuantizeCValues: true, QuantizeCOnly: true, Tile: perSM(t(64, 64, 3, 4))}, []int{130, 7, 100}},
		// Producer warpgroups (setmaxnreg: consumers at 200 registers):
		// one consumer warpgroup of 128 token rows (one K loop width,
		// WGMMAMainloopRegFed.OneWidth), plain, gate/up halves, and
		// interleaved rows rounded to odd; the fused quantization at 64.
		{GemmSpec{Name: "mx_rf_store_t128_2smwg", N: 200, K: 224, Experts: 5, A: ATiled, B: BGrouped, Epilogue: EpiStore, MX: true, MXRegisterFed: true,
			Tile: perSMWG(t(128, 128, 2, 4))}, []int{46, 0, 1, 260, 129}},
		{GemmSpec{Name: "mx_rf_swiglu_t128_2smwg", N: 160, K: 384, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Bias: true, Act: Activation{Kind: ActSwiGLU}, MX: true, MXRegisterFed: true,
			Tile: perSMWG(t(128, 64, 2, 4))}, []int{130, 7, 300}},
		{GemmSpec{Name: "mx_rf_gptoss_odd_t128_2smwg", N: 72, K: 256, Experts: 3, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateInterleaved, Bias: true, Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}, CRoundOdd: true, MX: true,
			MXRegisterFed: true, Tile: perSMWG(t(128, 64, 2, 4))}, []int{70, 1, 200}},
		{GemmSpec{Name: "mx_rf_swiglu_quant_2smwg", N: 96, K: 2880, Experts: 4, A: ATiled, B: BGrouped, Epilogue: EpiGated,
			Gate: GateHalves, Bias: true, Act: Activation{Kind: ActSwiGLU}, COutF32: true, MX: true, MXRegisterFed: true,
			QuantizeC: true, QuantizeCValues: true, Tile: perSMWG(t(64, 64, 3, 4))}, []int{1, 70, 200, 40}},
	}
}

// TestSM90MXRegFedAssemble builds the register-fed MXFP8 GEMM cases and
// assembles them for sm_90a: bf16 wgmma with A from registers, no e4m3
// one, no a_scales parameter; refusals: a 192-row B tile, 4 MMA warps on
// a 256-row B tile, 192 token rows, MXRegisterFed without MX or with
// MXExpand.
func TestSM90MXRegFedAssemble(t *testing.T) {
	eng, err := EngineFor(target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	cases := sm90MXRegFedCases()
	m, infos := sm90GemmModule(t, eng, cases)
	text, err := mptx.Compile(m.IR, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(text, "k16.f32.bf16.bf16"); n < 2*len(cases) {
		t.Errorf("%d bf16 wgmma in the register-fed kernels", n)
	}
	if strings.Contains(text, ".e4m3.e4m3") || !strings.Contains(text, "mul.rn.bf16x2") {
		t.Errorf("register-fed kernels: e4m3 wgmma %t, bf16x2 widening %t", strings.Contains(text, ".e4m3.e4m3"), strings.Contains(text, "mul.rn.bf16x2"))
	}
	for _, ki := range infos {
		for _, p := range ki.Params {
			if p.Role == RoleAScales {
				t.Errorf("%s has an a_scales parameter", ki.Name)
			}
		}
	}
	// Gate/up halves loaded as pairs (BHalvesInPairs): B's tensor map is
	// (K, 2, N, E) with the halves' stride second and a box of (gate, up)
	// pairs, loaded by 4-D TMA; refused off the register-fed gated GEMM of
	// interleaved tile rows.
	pairs, want := 0, 0
	for _, c := range cases {
		if c.spec.BHalvesInPairs {
			want++
		}
	}
	for _, ki := range infos {
		for _, p := range ki.Params {
			if tm := p.TensorMap; tm != nil && tm.Operand == RoleB && len(tm.Dims) == 4 {
				pairs++
				if want := []int{128, 2, 64, 1}; !slices.Equal(tm.Box, want) || tm.Dims[1] != Const(2) {
					t.Errorf("%s: B tensor map dims %v box %v, want (K, 2, N, E) and box %v", ki.Name, tm.Dims, tm.Box, want)
				}
			}
		}
	}
	if pairs != want || !strings.Contains(text, "cp.async.bulk.tensor.4d") {
		t.Errorf("%d kernels with a 4-D B tensor map (want %d), 4-D TMA loads %t", pairs, want, strings.Contains(text, "cp.async.bulk.tensor.4d"))
	}
	for _, c := range sm90MXRegFedCases() {
		if s := c.spec; s.BHalvesInPairs {
			s.Gate = GateHalves
			if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "BHalvesInPairs") {
				t.Errorf("%s with gate/up halves in the tile: %v", s.Name, err)
			}
		}
	}
	toolchain.NeedPtxas(t, "sm_90a")
	if err := toolchain.Assemble(text, "sm_90a"); err != nil {
		t.Fatal(strings.SplitN(err.Error(), "\n", 20))
	}
	for _, c := range []struct {
		edit func(*GemmSpec)
		want string
	}{
		{func(s *GemmSpec) { s.Tile.BN = 192 }, "64, 128 or 256 rows"},
		{func(s *GemmSpec) { s.Tile.Warps = 4 }, "one consumer warpgroup per 128 B-tile rows"},
		{func(s *GemmSpec) { s.Tile.BM = 160 }, "multiple of 8 up to 128"},
		{func(s *GemmSpec) { s.MX = false }, "MXRegisterFed is a way"},
		{func(s *GemmSpec) { s.MXExpand = true }, "MXRegisterFed is a way"},
	} {
		s := cases[0].spec
		c.edit(&s)
		if _, err := eng.GroupedGEMM(ir.NewModule("r"), s, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("refusal %q: got %v", c.want, err)
		}
	}
}

// sm90MXExpandCases are sm90MXCases run by expansion (GemmSpec.MXExpand):
// the same GEMMs, names suffixed "_expand" (each with two converter
// warpgroups: BM = 64, or B tiles of at most 128 rows), and one only the
// expansion runs: 256-row B tiles, where the producer's three warps
// convert alone (setmaxnreg), with a K tail of 32 and a partial column
// block.
func sm90MXExpandCases() []sm90GemmCase {
	var out []sm90GemmCase
	for _, c := range sm90MXCases() {
		c.spec.Name += "_expand"
		c.spec.MXExpand = true
		out = append(out, c)
	}
	return append(out, sm90GemmCase{GemmSpec{Name: "mx_store256_expand", N: 296, K: 288, Experts: 3, A: ATiled, B: BGrouped,
		Epilogue: EpiStore, MX: true, MXExpand: true, Tile: Tile{BM: 128, BN: 256, BK: 128, Stages: 3, Warps: 8}}, []int{200, 3, 129}})
}

// TestSM90MXExpandAssemble builds the MXFP8 GEMM cases by expansion and
// assembles them for sm_90a: bf16 wgmma, no e4m3 one, the e4m3 widening
// in the producer; MXExpand without MX is refused.
func TestSM90MXExpandAssemble(t *testing.T) {
	eng, err := EngineFor(target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := sm90GemmModule(t, eng, sm90MXExpandCases())
	text, err := mptx.Compile(m.IR, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	for want, n := range map[string]int{"k32.f32.e4m3.e4m3": 0, "k16.f32.bf16.bf16": len(sm90MXExpandCases()), "cvt.rn.f16x2.e4m3x2": -1} {
		got := strings.Count(text, want)
		if (n >= 0 && got < n) || (n == 0 && got != 0) || (n < 0 && got == 0) {
			t.Errorf("%d of %q in the expansion kernels", got, want)
		}
	}
	toolchain.NeedPtxas(t, "sm_90a")
	if err := toolchain.Assemble(text, "sm_90a"); err != nil {
		t.Fatal(strings.SplitN(err.Error(), "\n", 20))
	}
	s := sm90MXExpandCases()[0].spec
	s.MX = false
	if _, err := eng.GroupedGEMM(ir.NewModule("r"), s, 1); err == nil || !strings.Contains(err.Error(), "MXExpand") {
		t.Errorf("MXExpand without MX: %v", err)
	}
}

// TestSM90MXAssemble builds the MXFP8 GEMM cases with mokc's PTX backend
// and assembles them for sm_90a (the GPU test runs them); refusals: a B
// tile above 128 rows, a K block other than 128, the other engines.
func TestSM90MXAssemble(t *testing.T) {
	eng, err := EngineFor(target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	cases := append(append(sm90MXCases(), sm90MXWholeCases()...), sm90MXSwapCases()...)
	m, _ := sm90GemmModule(t, eng, cases)
	text, err := mptx.Compile(m.IR, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	// Per kernel, one wgmma per 32-wide block of the K block of 128, or two
	// (the B tile's halves, WGMMAMainloopMX.asmSplit) when the B tile is
	// whole 16-row groups, or one per 64-row slice of the B tile in each of
	// the operand swap's four loops (m64n8k32 to m64n32k32, by the work
	// item's token rows).
	want, perWidth := 0, 0
	for _, c := range cases {
		switch nb := c.spec.bTileRows(); {
		case c.spec.swapAB():
			want += 4 * 4 * nb / 64
			perWidth += 4 * nb / 64
		case nb%16 == 0:
			want += 8
		default:
			want += 4
		}
	}
	for _, w := range []int{8, 16, 24, 32} {
		if n, want := strings.Count(text, fmt.Sprintf("m64n%dk32.f32.e4m3.e4m3", w)), perWidth; n != want {
			t.Errorf("%d e4m3 wgmma m64n%dk32 in the MX kernels, want %d (the swap cases)", n, w, want)
		}
	}
	if n := strings.Count(text, "k32.f32.e4m3.e4m3"); n != want {
		t.Errorf("%d e4m3 wgmma in the MX kernels, want %d", n, want)
	}
	toolchain.NeedPtxas(t, "sm_90a")
	if err := toolchain.Assemble(text, "sm_90a"); err != nil {
		t.Fatal(strings.SplitN(err.Error(), "\n", 20))
	}
	// The split loop reads one half's partial sums while the other half's
	// wgmma is in flight: ptxas 12.9 (the sm_100a toolchain's) takes that as
	// written; a warpgroup wait it injected (C7517) would undo the overlap.
	// (ptxas 12.5 injects one after every wgmma.wait_group 1.)
	toolchain.NeedPtxas(t, "sm_100a")
	newest, err := toolchain.Ptxas("sm_100a")
	if err != nil {
		t.Fatal(err)
	}
	log, err := toolchain.AssembleLog(newest, text, "sm_90a")
	if err != nil {
		t.Fatal(strings.SplitN(err.Error(), "\n", 20))
	}
	if strings.Contains(log, "(C7517)") || strings.Contains(log, "serialized") {
		t.Errorf("ptxas %s serialized the MX K loop:\n%s", newest, log)
	}
	c := sm90MXCases()[0].spec
	for name, mod := range map[string]func(s *GemmSpec){
		"bn256": func(s *GemmSpec) { s.Tile.BN = 256 },
		"bk64":  func(s *GemmSpec) { s.Tile.BK = 64 },
		"table": func(s *GemmSpec) { s.B = BTable },
	} {
		s := c
		mod(&s)
		if _, err := eng.GroupedGEMM(ir.NewModule("r"), s, 1); err == nil {
			t.Errorf("%s: MX spec accepted", name)
		}
	}
	for _, tg := range []target.Target{target.SM80, target.SM100a} {
		e, _ := EngineFor(tg)
		if _, err := e.GroupedGEMM(ir.NewModule("r"), c, 1); err == nil {
			t.Errorf("%v built an MX GEMM", tg)
		}
	}
	// The operand swap's refusals: a gate half of 32 rows, weights through
	// a pointer table, 8 warps, bf16.
	sw := sm90MXSwapCases()[1].spec
	for name, mod := range map[string]func(s *GemmSpec){
		"bn32":   func(s *GemmSpec) { s.Tile.BN = 32 },
		"table":  func(s *GemmSpec) { s.B = BTable },
		"warps8": func(s *GemmSpec) { s.Tile.Warps = 8 },
		"bf16":   func(s *GemmSpec) { s.MX = false },
	} {
		s := sw
		mod(&s)
		if _, err := eng.GroupedGEMM(ir.NewModule("r"), s, 1); err == nil || !strings.Contains(err.Error(), "32") {
			t.Errorf("swap %s: %v", name, err)
		}
	}
}

// TestSM90NMajorAssemble builds the N-major cases with mokc's PTX backend
// and assembles them for sm_90a; the sm_100a engine refuses them (sm_80's:
// TestSM80NMajorAssemble).
func TestSM90NMajorAssemble(t *testing.T) {
	eng, err := EngineFor(target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := sm90GemmModule(t, eng, sm90NMajorCases("sm90n"))
	text, err := mptx.Compile(m.IR, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, "1, 1, 1, 0, 1;") {
		t.Error("no wgmma with imm-trans-b = 1 in the N-major kernels")
	}
	toolchain.NeedPtxas(t, "sm_90a")
	if err := toolchain.Assemble(text, "sm_90a"); err != nil {
		t.Fatal(strings.SplitN(err.Error(), "\n", 20))
	}
	for _, tg := range []target.Target{target.SM100a} {
		e, err := EngineFor(tg)
		if err != nil {
			t.Fatal(err)
		}
		c := sm90NMajorCases("r")[0].spec
		if e.ReadsNMajorB(c) {
			t.Errorf("%v reads an N-major B", tg)
		}
		if _, err := e.GroupedGEMM(ir.NewModule("r"), c, 1); err == nil {
			t.Errorf("%v built an N-major GEMM", tg)
		}
	}
	c := sm90NMajorCases("r")[0].spec
	for name, mod := range map[string]func(s *GemmSpec){
		"bn96":  func(s *GemmSpec) { s.Tile.BN = 96 },
		"table": func(s *GemmSpec) { s.B = BTable },
		"gated": func(s *GemmSpec) { s.Epilogue = EpiGated },
		"bias":  func(s *GemmSpec) { s.Bias = true },
	} {
		s := c
		mod(&s)
		if eng.ReadsNMajorB(s) {
			t.Errorf("%s: sm_90a reads an N-major B", name)
		}
		if _, err := eng.GroupedGEMM(ir.NewModule("r"), s, 1); err == nil {
			t.Errorf("%s: N-major spec accepted", name)
		}
	}
}

// sm90PerfCases are the timing cases of the GPU test: DeepSeek-V3-sized
// FC1 (SwiGLU, N = I = 2048, K = H = 7168) and FC2 (N = 7168, K = 2048)
// over 8 experts of 2048 rows each (compute-bound), with 3 stages (staged
// epilogue) and 4 stages (no room for staging: direct stores).
func sm90PerfCases(prefix string) []sm90GemmCase {
	counts := []int{2048, 2048, 2048, 2048, 2048, 2048, 2048, 2048}
	var cs []sm90GemmCase
	for _, st := range []int{3, 4} { // 3: staged epilogue; 4: direct stores
		cs = append(cs,
			sm90GemmCase{GemmSpec{Name: fmt.Sprintf("%s_fc1_s%d", prefix, st), N: 2048, K: 7168, Experts: 8, A: ATiled, B: BGrouped,
				Epilogue: EpiGated, Gate: GateHalves, Act: Activation{Kind: ActSwiGLU},
				Tile: Tile{BM: 128, BN: 128, BK: 64, Stages: st, Warps: 8}}, counts},
			sm90GemmCase{GemmSpec{Name: fmt.Sprintf("%s_fc2_s%d", prefix, st), N: 7168, K: 2048, Experts: 8, A: ATiled, B: BGrouped,
				Epilogue: EpiStore, Tile: Tile{BM: 128, BN: 256, BK: 64, Stages: st, Warps: 8}}, counts})
	}
	return cs
}

// sm90GemmModule builds every GEMM case of prefix with engine eng into one
// module.
func sm90GemmModule(t testing.TB, eng Engine, cases []sm90GemmCase) (*ir.Module, []KernelInfo) {
	t.Helper()
	m := ir.NewModule("gemm_" + eng.Target().String())
	var infos []KernelInfo
	for _, c := range cases {
		ki, err := eng.GroupedGEMM(m, c.spec, 1)
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, ki)
	}
	if _, err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	return m, infos
}

// TestSM90GemmLLCPTX keeps testdata/sm90/gemm.llc.ptx (llc-19's PTX of the
// engine test kernels, which the GPU test runs) in step with the generator,
// and assembles it for sm_90a.
func TestSM90GemmLLCPTX(t *testing.T) {
	eng, err := EngineFor(target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := sm90GemmModule(t, eng, append(sm90GemmCases("sm90t"), sm90PerfCases("sm90p")...))
	text, err := ir.LLVM19Text(m.IR)
	if err != nil {
		t.Fatal(err)
	}
	got := llcPTX(t, text, "sm_90a")
	goldenfile.Check(t, filepath.Join("testdata", "sm90", "gemm.llc.ptx"), got, *update,
		"go test ./codegen -run TestSM90GemmLLCPTX -update")
	toolchain.NeedPtxas(t, "sm_90a")
	if err := toolchain.Assemble(got, "sm_90a"); err != nil {
		t.Fatal(strings.SplitN(err.Error(), "\n", 20))
	}
}

// TestSM90Refusals checks the errors of unsupported specs.
func TestSM90Refusals(t *testing.T) {
	eng, err := EngineFor(target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	base := sm90GemmCases("sm90r")[0].spec
	for name, mod := range map[string]func(s *GemmSpec){
		"bm96":    func(s *GemmSpec) { s.Tile.BM = 96; s.Tile.Warps = 0 },
		"bn264":   func(s *GemmSpec) { s.Tile.BN = 264 },
		"gated":   func(s *GemmSpec) { s.Epilogue = EpiGated; s.Tile.BN = 136 },
		"bk32":    func(s *GemmSpec) { s.Tile.BK = 32 },
		"stages1": func(s *GemmSpec) { s.Tile.Stages = 1 },
		"smem":    func(s *GemmSpec) { s.Tile.Stages = 5; s.Tile.BN = 256 },
		"warps":   func(s *GemmSpec) { s.Tile.Warps = 4 },
	} {
		s := base
		s.Name = "sm90r_" + name
		mod(&s)
		if _, err := eng.GroupedGEMM(ir.NewModule("r"), s, 1); err == nil {
			t.Errorf("%s: spec accepted, want an error", name)
		} else if !strings.Contains(err.Error(), s.Name) {
			t.Errorf("%s: error %q does not name the kernel", name, err)
		}
	}
}

// TestSM90RegisterBalance checks that setmaxnreg.inc can always be
// satisfied: the consumers' extra registers must not exceed what the
// producer warpgroup frees (setmaxnreg.inc waits for them otherwise, for
// ever), for every tile shape the engine accepts.
func TestSM90RegisterBalance(t *testing.T) {
	for _, bm := range []int{64, 128, 192} {
		for _, bn := range []int{64, 96, 128, 192, 256} {
			for _, gated := range []bool{false, true} {
				for _, bt := range []BMode{BGrouped, BTable} {
					s := GemmSpec{Name: "bal", N: 512, K: 512, Experts: 2, B: bt, Tile: Tile{BM: bm, BN: bn, BK: 64, Stages: 2}}
					if gated {
						s.Epilogue = EpiGated
					}
					l, err := sm90Plan(s)
					if err != nil || l.mmaRegs == 0 {
						continue
					}
					need := (l.mmaRegs - l.launchRegs) * 128 * l.WG
					freed := (l.launchRegs - l.prodRegs) * 128
					if need > freed || l.launchRegs*l.threads > 65536 || l.mmaRegs%8 != 0 || l.prodRegs%8 != 0 {
						t.Errorf("BM %d BN %d gated %v B %v: launch %d, producer %d, consumers %d: need %d registers, %d freed",
							bm, bn, gated, bt, l.launchRegs, l.prodRegs, l.mmaRegs, need, freed)
					}
				}
			}
		}
	}
}

// TestSM90LaunchRegisters assembles the engine test kernels with ptxas -v
// and checks that every kernel that rebalances registers is compiled with
// exactly its .maxnreg (the count setmaxnreg's budget assumes), a kernel
// with .maxnreg and no setmaxnreg (two blocks per SM) within it, and that
// none spills.
func TestSM90LaunchRegisters(t *testing.T) {
	ptxas := toolchain.NeedPtxas(t, "sm_90a")
	text, err := os.ReadFile(filepath.Join("testdata", "sm90", "gemm.llc.ptx"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := toolchain.KernelResources(ptxas, string(text), "sm_90a")
	if err != nil {
		t.Fatal(err)
	}
	maxnreg := map[string]int{}
	re := regexp.MustCompile(`(?m)^\.maxnreg (\d+)\s+// @(\w+)`)
	for _, m := range re.FindAllStringSubmatch(string(text), -1) {
		n, _ := strconv.Atoi(m[1])
		maxnreg[m[2]] = n
	}
	if len(maxnreg) == 0 {
		t.Fatal("no .maxnreg in the test kernels")
	}
	rebalances := map[string]bool{} // the kernels that run setmaxnreg
	for _, entry := range strings.Split(string(text), ".entry ")[1:] {
		rebalances[entry[:strings.IndexAny(entry, "( \n")]] = strings.Contains(entry, "setmaxnreg")
	}
	if !rebalances["sm90t_store"] || rebalances["sm90t_store_2sm"] {
		t.Fatalf("setmaxnreg in sm90t_store %t (want true), in sm90t_store_2sm %t (want false)", rebalances["sm90t_store"], rebalances["sm90t_store_2sm"])
	}
	for fn, r := range res {
		if r.SpillStores > 0 {
			t.Errorf("%s: %d bytes of spill stores", fn, r.SpillStores)
		}
		if want, ok := maxnreg[fn]; ok && (r.Registers != want && rebalances[fn] || r.Registers > want) {
			t.Errorf("%s: ptxas used %d registers, .maxnreg is %d (setmaxnreg: %t)", fn, r.Registers, want, rebalances[fn])
		}
	}
}

// TestSM90BlocksPerSMAssemble builds the sm_90a cases of two blocks per SM
// (Tile.BlocksPerSM: bf16 and register-fed MXFP8) and checks what makes
// two fit an SM: blocks of 160 threads (a consumer warpgroup and a
// producer warp) with .minnctapersm 2 and .maxnreg 168 (sharedSMRegs: the
// 10 warps of two blocks put 3 on one of the SM's four 16384-register
// sub-partitions), or of 256 (a producer warpgroup) at .maxnreg 128 whose
// consumers take 200 or 216 with setmaxnreg, at most 168 registers at
// launch, no spills and no serialized wgmma in ptxas's report, at
// most half the SM's shared memory each (target.Target.SharedMemoryFor),
// a grid of two blocks per SM; and the refusals (a third stage that does
// not fit, a cluster, three blocks per SM, a pointer table, sm_80 and
// sm_100a).
func TestSM90BlocksPerSMAssemble(t *testing.T) {
	eng, err := EngineFor(target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	var cases []sm90GemmCase
	for _, c := range append(sm90GemmCases("ps"), sm90MXRegFedCases()...) {
		if c.spec.Tile.BlocksPerSM == 2 {
			cases = append(cases, c)
		}
	}
	if len(cases) < 4 {
		t.Fatalf("%d cases of two blocks per SM", len(cases))
	}
	m, infos := sm90GemmModule(t, eng, cases)
	text, err := mptx.Compile(m.IR, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	for i, ki := range infos {
		c := cases[i]
		entry := text[strings.Index(text, ".entry "+ki.Name+"("):]
		head := entry[:strings.Index(entry, "{")]
		// One producer warp: 160 threads at 168 registers, no setmaxnreg;
		// a producer warpgroup: 256 at 128, the consumers at 200 or 216.
		threads, regs, rebalance := 160, 168, false
		if c.spec.Tile.ProducerWarps != 1 {
			threads, regs, rebalance = 256, 128, true
		}
		if ki.Block != threads || !strings.Contains(head, fmt.Sprintf(".maxntid %d, 1, 1", threads)) || !strings.Contains(head, ".minnctapersm 2") || !strings.Contains(head, fmt.Sprintf(".maxnreg %d", regs)) {
			t.Errorf("%s: %d threads, entry directives %q, want .maxntid %d, .minnctapersm 2 and .maxnreg %d", ki.Name, ki.Block, head[strings.Index(head, ")"):], threads, regs)
		}
		body := entry[:strings.Index(entry, "\n}\n")]
		inc := strings.Contains(body, "setmaxnreg.inc.sync.aligned.u32 200;") || strings.Contains(body, "setmaxnreg.inc.sync.aligned.u32 216;")
		dec := strings.Contains(body, "setmaxnreg.dec.sync.aligned.u32 40;") || strings.Contains(body, "setmaxnreg.dec.sync.aligned.u32 56;")
		if n := strings.Count(body, "setmaxnreg"); inc != rebalance || dec != rebalance || !rebalance && n > 0 || rebalance && n != 2 {
			t.Errorf("%s: %d setmaxnreg, .inc to 200 or 216 %t, .dec to 40 or 56 %t; want them %t", ki.Name, n, inc, dec, rebalance)
		}
		if lim := target.SM90a.SharedMemoryFor(2); ki.SharedBytes > lim {
			t.Errorf("%s: %d bytes of shared memory, more than the %d of one of two blocks per SM", ki.Name, ki.SharedBytes, lim)
		}
		if g := ki.Grid[0].Eval(1000); ki.BlocksPerSM != 2 || !ki.GridPerSM || g != int64(2*target.SM90a.SMs()) {
			t.Errorf("%s: BlocksPerSM %d, GridPerSM %t, grid %d; want 2, true, %d", ki.Name, ki.BlocksPerSM, ki.GridPerSM, g, 2*target.SM90a.SMs())
		}
	}
	toolchain.NeedPtxas(t, "sm_90a")
	if err := toolchain.Assemble(text, "sm_90a"); err != nil {
		t.Fatal(strings.SplitN(err.Error(), "\n", 20))
	}
	ptxas, err := toolchain.Ptxas("sm_90a")
	if err != nil {
		t.Fatal(err)
	}
	res, err := toolchain.KernelResources(ptxas, text, "sm_90a")
	if err != nil {
		t.Fatal(err)
	}
	for _, ki := range infos {
		r, ok := res[ki.Name]
		regs := 168
		if c := cases[slices.IndexFunc(cases, func(c sm90GemmCase) bool { return c.spec.Name == ki.Name })]; c.spec.Tile.ProducerWarps != 1 {
			regs = 128 // at launch
		}
		if !ok || r.Registers > regs || r.SpillStores > 0 || r.SpillLoads > 0 {
			t.Errorf("%s: ptxas reports %+v (found %t): want at most %d registers and no spills", ki.Name, r, ok, regs)
		}
		t.Logf("%s: %d registers, %d bytes of shared memory", ki.Name, r.Registers, ki.SharedBytes)
	}
	rf, bf, quant := cases[0].spec, cases[0].spec, cases[0].spec
	for _, c := range cases {
		switch c.spec.Name {
		case "mx_rf_gptoss_odd_2sm":
			rf = c.spec
		case "mx_rf_swiglu_quant_2sm":
			quant = c.spec
		}
	}
	for _, c := range []struct {
		tg   target.Target
		base GemmSpec
		edit func(*GemmSpec)
		want string
	}{
		{target.SM90a, rf, func(s *GemmSpec) { s.Tile.Stages = 4 }, "the share of one of 2 blocks per SM"},
		{target.SM90a, rf, func(s *GemmSpec) { s.Tile.BM, s.Tile.Stages = 128, 2 }, "beyond the 168 of one of 2 blocks per SM"},
		{target.SM90a, rf, func(s *GemmSpec) { s.MXRegisterFed, s.CRoundOdd, s.COutF32, s.Tile.BM = false, false, true, 32 }, "have a producer that loads grouped weights"},
		{target.SM90a, rf, func(s *GemmSpec) { s.Tile.Cluster = 2 }, "2 only without clusters"},
		{target.SM90a, rf, func(s *GemmSpec) { s.Tile.BlocksPerSM = 3 }, "must be 0, 1 or 2"},
		{target.SM90a, quant, func(s *GemmSpec) { s.Tile.BlocksPerSM = 0 }, "does not quantize C in the epilogue"},
		{target.SM90a, quant, func(s *GemmSpec) { s.QuantizeCValues = false }, "quantizing C to its values only"},
		{target.SM90a, bf, func(s *GemmSpec) { s.B = BTable }, "have a producer that loads grouped weights"},
		{target.SM90a, bf, func(s *GemmSpec) { s.GatherK = 2 }, "does not gather"},
		{target.SM90a, bf, func(s *GemmSpec) { s.QueueItems = true }, "queue"},
		{target.SM90a, bf, func(s *GemmSpec) { s.Tile.BM, s.Tile.BN, s.Tile.Warps, s.Tile.Stages = 128, 256, 8, 2 }, "beyond the 96 of one of 2 blocks per SM (288 threads each, one producer warp)"},
		{target.SM90a, bf, func(s *GemmSpec) { s.Tile.BN, s.Tile.Stages, s.Tile.ProducerWarps = 248, 2, 4 }, "issues wgmma of 124 accumulators per thread"},
		{target.SM90a, bf, func(s *GemmSpec) { s.Tile.BN, s.Tile.Stages, s.Tile.ProducerWarps = 200, 2, 4 }, "a B tile of at most 192 rows or of a multiple of 16"},
		{target.SM90a, bf, func(s *GemmSpec) {
			s.Tile.BM, s.Tile.BN, s.Tile.Warps, s.Tile.Stages, s.Tile.ProducerWarps = 128, 112, 8, 2, 4
		}, "a B tile of at most 96 rows"},
		{target.SM80, bf, func(s *GemmSpec) {}, "not a persistent grid of 2 blocks per SM"},
		{target.SM100a, bf, func(s *GemmSpec) { s.Tile.BM, s.Tile.Warps, s.Tile.EpilogueWarps = 128, 1, 4 }, "one block per SM"},
	} {
		s := c.base
		c.edit(&s)
		e, err := EngineFor(c.tg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.GroupedGEMM(ir.NewModule("r"), s, 1); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v refusal %q: got %v", c.tg, c.want, err)
		}
	}
}

// TestRegFedWideTokenRowsLayer: an mxfp8 forward of gate/up halves under
// the register-fed tiles of 192 and 256 token rows (schedule 192x128x128
// with three stages, 256x128x128 with two; 8 MMA warps) builds its FC1
// with the halves loaded as pairs (BHalvesInPairs: a 4-D B tensor map,
// wgmma m64n192 or m64n256) and its FC2 with plain 128-row B tiles, and
// ptxas assembles both without a serialized wgmma pipeline.
func TestRegFedWideTokenRowsLayer(t *testing.T) {
	l := testlayer.Named(t, "qwen3-30b-a3b mxfp8")
	for _, c := range []struct{ rows, stages int }{{192, 3}, {256, 2}} {
		s := testlayer.DefaultSchedule(t, l, target.SM90a)
		tile := schedule.Tile{M: c.rows, N: 128, K: 128}
		s.FC1, s.FC2, s.Stages, s.Variant = tile, tile, c.stages, nil
		p, err := Build(l, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range p.Kernels {
			if k.Name != "moe_fc1" && k.Name != "moe_fc2" {
				continue
			}
			for _, prm := range k.Params {
				if tm := prm.TensorMap; tm != nil && tm.Operand == RoleB {
					if want := map[string]int{"moe_fc1": 4, "moe_fc2": 3}[k.Name]; len(tm.Dims) != want {
						t.Errorf("%d rows: %s: B tensor map of %d dims, want %d", c.rows, k.Name, len(tm.Dims), want)
					}
				}
			}
		}
		text, err := mptx.Compile(p.Module, target.SM90a)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(text, fmt.Sprintf("wgmma.mma_async.sync.aligned.m64n%dk16.f32.bf16.bf16", c.rows)); n < 2 {
			t.Errorf("%d wgmma m64n%d in the layer, want FC1's and FC2's", n, c.rows)
		}
		toolchain.NeedPtxas(t, "sm_90a")
		if err := toolchain.Assemble(text, "sm_90a"); err != nil {
			t.Fatal(strings.SplitN(err.Error(), "\n", 20))
		}
	}
}
