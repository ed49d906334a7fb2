package codegen

import (
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestSplitKShared: on sm_90a the shared experts' GEMMs of every preset
// that has them split their reduction at T <= 128 (the split kernel, then
// the reduce kernel writing the GEMM's C) and run whole past it; sm_80 and
// sm_100a keep one kernel per GEMM; the routed GEMMs never split.
func TestSplitKShared(t *testing.T) {
	for _, tg := range []target.Target{target.SM90a, target.SM80, target.SM100a} {
		for _, name := range schedule.Presets() {
			l, err := schedule.Preset(name)
			if err != nil {
				t.Fatal(err)
			}
			if l.SharedExperts == 0 {
				continue
			}
			s, err := schedule.DefaultSchedule(l, tg)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Build(l, s)
			if err != nil {
				t.Fatalf("%s %v: %v", name, tg, err)
			}
			for _, T := range []int64{1, 64, 128, 129, 4096} {
				var runs []string
				for _, k := range p.Kernels {
					if k.RunsAt(T) && (strings.HasPrefix(k.Name, "moe_shared_fc") || strings.HasSuffix(k.Name, "_splitk") || strings.HasSuffix(k.Name, "_reduce")) {
						runs = append(runs, k.Name)
					}
				}
				want := []string{"moe_shared_fc1", "moe_shared_fc2"}
				if tg == target.SM90a && T <= 128 {
					want = []string{"moe_shared_fc1_splitk", "moe_shared_fc1_reduce", "moe_shared_fc2_splitk", "moe_shared_fc2_reduce"}
				}
				if !slices.Equal(runs, want) {
					t.Errorf("%s %v T=%d: %v run, want %v", name, tg, T, runs, want)
				}
			}
			for _, k := range p.Kernels {
				if !strings.HasSuffix(k.Name, "_reduce") {
					continue
				}
				binds := map[string]string{}
				for _, prm := range k.Params {
					binds[prm.Name] = prm.Buffer
				}
				op := strings.TrimSuffix(strings.TrimPrefix(k.Name, "moe_"), "_reduce")
				if binds["part"] != op+"_part" || p.Buffer(op+"_part") == nil {
					t.Errorf("%s: part = %q", k.Name, binds["part"])
				}
			}
		}
	}
}

// TestSplitKOff: schedule.SplitKOff keeps deepseek-v3's shared GEMMs one
// kernel each at every T on sm_90a, with no parts buffer.
func TestSplitKOff(t *testing.T) {
	l, err := schedule.Preset("deepseek-v3")
	if err != nil {
		t.Fatal(err)
	}
	s, err := schedule.DefaultSchedule(l, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	s.SplitK = schedule.SplitKOff
	p, err := Build(l, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range p.Kernels {
		if strings.HasSuffix(k.Name, "_splitk") || strings.HasSuffix(k.Name, "_reduce") || strings.HasPrefix(k.Name, "moe_shared") && k.Tokens != nil {
			t.Errorf("split-k off: kernel %s for %v", k.Name, k.Tokens)
		}
	}
	if b := p.Buffer("shared_fc1_part"); b != nil {
		t.Errorf("split-k off: buffer %s", b.Name)
	}
}

// TestSplitKChoice: the split counts the cost model picks for the shared
// experts of deepseek-v3 (16 and 28 column blocks of 256 B rows, K = 7168
// and 2048) and qwen2-57b-a14b's shared FC2 (14 blocks, K = 20480), and
// the cost model's terms.
func TestSplitKChoice(t *testing.T) {
	for _, c := range []struct {
		name, op string
		want     int
	}{
		{"deepseek-v3", "shared_fc1", 8},
		{"deepseek-v3", "shared_fc2", 4},
		{"qwen2-57b-a14b", "shared_fc2", 8},
		{"deepseek-v2-lite", "shared_fc2", 11},
	} {
		p, s := buildPreset(t, c.name, schedule.BF16, target.SM90a)
		b := p.Buffer(c.op + "_part")
		if b == nil || len(b.Shape) != 2 || b.Shape[0].B != int64(c.want*s.FC2.M) {
			t.Errorf("%s %s: parts buffer %+v, want %d parts of %d rows", c.name, c.op, b, c.want, s.FC2.M)
		}
	}
	// one wave of 16 items: 8 parts fill 128 of 132 SMs, each streaming
	// an eighth of the tile, plus the parts' round trip
	if got, want := splitKCost(16, 8, 132, 1<<20, 1000), int64(132<<20/8+16000); got != want {
		t.Errorf("splitKCost(16, 8) = %d, want %d", got, want)
	}
	if got, want := splitKCost(16, 1, 132, 1<<20, 0), int64(132<<20); got != want {
		t.Errorf("splitKCost(16, 1) = %d, want %d", got, want)
	}
}

// TestSplitKValidate: Validate refuses SplitK off a dense f32 plain store
// and a count that does not divide the K blocks.
func TestSplitKValidate(t *testing.T) {
	ok := GemmSpec{Name: "g", N: 512, K: 1024, Experts: 1, A: ADense, Epilogue: EpiStore, COutF32: true, SplitK: 4,
		Tile: Tile{BM: 128, BN: 256, BK: 64, Stages: 3, Warps: 8}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid split spec: %v", err)
	}
	for name, mut := range map[string]func(*GemmSpec){
		"routed":     func(s *GemmSpec) { s.A = ATiled },
		"bf16 C":     func(s *GemmSpec) { s.COutF32 = false },
		"gated":      func(s *GemmSpec) { s.Epilogue, s.N = EpiGated, 256 },
		"bias":       func(s *GemmSpec) { s.Bias = true },
		"not divide": func(s *GemmSpec) { s.SplitK = 3 },
	} {
		s := ok
		mut(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, s)
		}
	}
}

// splitKCase is a GEMM run split (GemmSpec.SplitK) in the engine tests:
// gemm the GEMM as a layer defines it (its epilogue; counts: one entry,
// its rows), split the plain spec of its split kernel (the weights' rows
// as outputs, f32 parts).
type splitKCase struct {
	gemm  sm90GemmCase
	split GemmSpec
}

// sm90SplitKCases: the plain store with a partial column block and a K
// tail, SwiGLU over gate/up halves, and GPT-OSS over interleaved rows with
// two row tiles; 4, 8 and 3 parts.
func sm90SplitKCases() []splitKCase {
	t := Tile{BM: 128, BN: 128, BK: 64, Stages: 3, Warps: 8}
	mk := func(g GemmSpec, rows, splits int) splitKCase {
		g.Experts, g.A, g.B, g.Tile = 1, ADense, BGrouped, t
		s := g
		s.Name, s.N, s.Epilogue, s.Gate, s.Act, s.COutF32, s.SplitK = g.Name+"_splitk", g.BRows(), EpiStore, GateHalves, Activation{}, true, splits
		return splitKCase{gemm: sm90GemmCase{spec: g, counts: []int{rows}}, split: s}
	}
	return []splitKCase{
		mk(GemmSpec{Name: "splitk_store", N: 200, K: 1000, Epilogue: EpiStore}, 100, 4),
		mk(GemmSpec{Name: "splitk_swiglu", N: 96, K: 1000, Epilogue: EpiGated, Gate: GateHalves, Act: Activation{Kind: ActSwiGLU}}, 37, 8),
		mk(GemmSpec{Name: "splitk_gptoss", N: 72, K: 520, Epilogue: EpiGated, Gate: GateInterleaved,
			Act: Activation{Kind: ActGPTOSS, Limit: 7, Alpha: 1.702}}, 129, 3),
	}
}

// splitKModule builds each case's split kernel and its reduce kernel
// (named gemm's name + "_reduce"; parameters part, c, T) into one module.
func splitKModule(t testing.TB, eng Engine, cases []splitKCase) (*ir.Module, []KernelInfo, []Kernel) {
	t.Helper()
	m := ir.NewModule("splitk")
	var infos []KernelInfo
	var reduces []Kernel
	for _, c := range cases {
		ki, err := eng.GroupedGEMM(m, c.split, 1)
		if err != nil {
			t.Fatal(err)
		}
		spec := c.gemm.spec
		spec.Name += "_reduce"
		k, err := emitSplitReduce(m, spec, c.split.SplitK, &moe.Buffer{Name: "part"}, &moe.Buffer{Name: "c"})
		if err != nil {
			t.Fatal(err)
		}
		infos, reduces = append(infos, ki), append(reduces, k)
	}
	if _, err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	return m, infos, reduces
}

// TestSM90SplitKAssemble: the split kernels and reduce kernels of
// sm90SplitKCases build and assemble for sm_90a with mokc's PTX backend
// (TestSM90SplitKGPU runs them).
func TestSM90SplitKAssemble(t *testing.T) {
	eng, err := EngineFor(target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	m, _, _ := splitKModule(t, eng, sm90SplitKCases())
	toolchain.NeedPtxas(t, "sm_90a")
	assembleOurs(t, m.IR, target.SM90a)
}
