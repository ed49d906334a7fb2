package codegen

import (
	"fmt"
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
// that has them run the default's decode tiles in their token range
// (kernels moe_<op>..._decode) and the base tiles past it; each GEMM runs
// at each T either whole (moe_<op><suffix>) or split (the split kernel
// moe_<op>_splitk<suffix>, then the reduce kernel moe_<op>_reduce<suffix>
// writing the GEMM's C from its parts buffer <op>_part<suffix>, of S times
// the split kernel's largest T rows); with the base tiles it splits at
// T <= 128 (one row tile) and runs whole past it; with the decode tiles
// deepseek-v3's FC1 splits at every T of their range (two row tiles past
// 64), its FC2 at T <= 64 only (at two tiles its split costs more than
// the whole GEMM). sm_80 and sm_100a keep one kernel per GEMM; the routed
// GEMMs never split.
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
			decMax := int64(0)
			if s.Decode != nil {
				_, decMax = s.Decode.VariantTokens(l.TopK, l.Experts)
			}
			if (tg == target.SM90a) != (decMax >= 32) {
				t.Errorf("%s %v: decode tiles up to T = %d", name, tg, decMax)
			}
			for _, T := range []int64{1, 64, 65, decMax, decMax + 1, 128, 129, 4096} {
				if T < 1 {
					continue
				}
				suffix := ""
				if T <= decMax {
					suffix = "_decode"
				}
				for _, op := range []string{"shared_fc1", "shared_fc2"} {
					var runs []string
					for _, k := range p.Kernels {
						if k.RunsAt(T) && strings.HasPrefix(k.Name, "moe_"+op) {
							runs = append(runs, k.Name)
						}
					}
					whole := []string{"moe_" + op + suffix}
					split := []string{"moe_" + op + "_splitk" + suffix, "moe_" + op + "_reduce" + suffix}
					switch {
					case tg == target.SM90a && T <= 128 && suffix == "", name == "deepseek-v3" && suffix != "" && (op == "shared_fc1" || T <= 64):
						if !slices.Equal(runs, split) {
							t.Errorf("%s %v T=%d: %v run, want %v", name, tg, T, runs, split)
						}
					case tg != target.SM90a || T > max(128, decMax), name == "deepseek-v3" && suffix != "":
						if !slices.Equal(runs, whole) {
							t.Errorf("%s %v T=%d: %v run, want %v", name, tg, T, runs, whole)
						}
					case !slices.Equal(runs, split) && !slices.Equal(runs, whole):
						t.Errorf("%s %v T=%d: %v run, want %v or %v", name, tg, T, runs, whole, split)
					}
				}
			}
			for _, k := range p.Kernels {
				if strings.Contains(k.Name, "_splitk") {
					if k.Name != "moe_shared_fc1_splitk" && k.Name != "moe_shared_fc2_splitk" && !strings.HasSuffix(k.Name, "_splitk_decode") {
						t.Errorf("%s %v: split kernel %s", name, tg, k.Name)
					}
				}
				op, suffix, ok := strings.Cut(strings.TrimPrefix(k.Name, "moe_"), "_reduce")
				if !ok {
					continue
				}
				binds := map[string]string{}
				for _, prm := range k.Params {
					binds[prm.Name] = prm.Buffer
				}
				part := p.Buffer(op + "_part" + suffix)
				if binds["part"] != op+"_part"+suffix || part == nil {
					t.Errorf("%s: part = %q, want %s", k.Name, binds["part"], op+"_part"+suffix)
					continue
				}
				// S parts of the largest T the split runs at, S >= 2
				maxT := k.Tokens[len(k.Tokens)-1].Max
				if rows := part.Shape[0].B; rows%maxT != 0 || rows/maxT < 2 {
					t.Errorf("%s %v: %s has %d rows, not S >= 2 parts of %d (its largest T)", name, tg, part.Name, rows, maxT)
				}
			}
		}
	}
}

// TestSplitKOff: schedule.SplitKOff keeps deepseek-v3's shared GEMMs one
// kernel each at every T on sm_90a (the decode tiles' at T <= 128, the
// base tiles' past it), with no parts buffer.
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
	var shared []string
	for _, k := range p.Kernels {
		if strings.Contains(k.Name, "_splitk") || strings.Contains(k.Name, "_reduce") {
			t.Errorf("split-k off: kernel %s for %v", k.Name, k.Tokens)
		}
		if strings.HasPrefix(k.Name, "moe_shared") {
			shared = append(shared, fmt.Sprintf("%s %v", k.Name, k.Tokens))
		}
	}
	want := []string{"moe_shared_fc1_decode [{1 128}]", "moe_shared_fc1 [{129 2147483647}]", "moe_shared_fc2_decode [{1 128}]", "moe_shared_fc2 [{129 2147483647}]"}
	slices.Sort(want)
	slices.Sort(shared)
	if !slices.Equal(shared, want) {
		t.Errorf("split-k off: shared kernels %q, want %q", shared, want)
	}
	for _, b := range p.Buffers {
		if strings.Contains(b.Name, "_part") && b.Name != "dispatch_parts" {
			t.Errorf("split-k off: buffer %s", b.Name)
		}
	}
}

// TestSplitKChoice: the split counts the cost model picks for the shared
// experts and the rows of their parts buffers (the largest T split):
// deepseek-v3's with the decode tiles (32 and 56 column blocks of 128 B
// rows, K = 7168 and 2048: FC1 over two row tiles to T = 128, FC2 over
// one), kimi-k2's FC1 over three (T <= 192), dsv4-pro-proxy's over four
// (T <= 256), qwen2-57b-a14b's shared FC2 with the base tiles at T =
// 33..128 (14 blocks of 256 rows, K = 20480) and the decode tiles at T <=
// 32 (28 blocks of 128), deepseek-v2-lite's with the base tiles; and the
// cost model's terms.
func TestSplitKChoice(t *testing.T) {
	for _, c := range []struct {
		name, buf  string
		want, rows int
	}{
		{"deepseek-v3", "shared_fc1_part_decode", 4, 128},
		{"deepseek-v3", "shared_fc2_part_decode", 2, 64},
		{"kimi-k2", "shared_fc1_part_decode", 4, 192},
		{"dsv4-pro-proxy", "shared_fc1_part_decode", 8, 256},
		{"qwen2-57b-a14b", "shared_fc2_part", 8, 128},
		{"qwen2-57b-a14b", "shared_fc2_part_decode", 4, 32},
		{"deepseek-v2-lite", "shared_fc2_part", 11, 128},
	} {
		p, _ := buildPreset(t, c.name, schedule.BF16, target.SM90a)
		b := p.Buffer(c.buf)
		if b == nil || len(b.Shape) != 2 || b.Shape[0].B != int64(c.want*c.rows) {
			t.Errorf("%s %s: parts buffer %+v, want %d parts of %d rows", c.name, c.buf, b, c.want, c.rows)
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
