package codegen

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/launch"

	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// lowerBackward lowers l's backward (moe.Backward, which must build) with
// schedule s and the PerOp policy, without validating s.
func lowerBackward(t *testing.T, l schedule.Layer, s schedule.Schedule) (*Program, error) {
	t.Helper()
	bp, err := moe.Backward(l)
	if err != nil {
		t.Fatal(err)
	}
	return Lower(bp, s, PerOp)
}

// sharesSMSchedule is layer l's default sm_90a schedule with
// testlayer.SharesSMTiles's tiles for prod producer warps and
// Warps.Producer prod (BlocksPerSM is left to the caller).
func sharesSMSchedule(t *testing.T, l schedule.Layer, prod int) schedule.Schedule {
	t.Helper()
	s := testlayer.DefaultSchedule(t, l, target.SM90a)
	testlayer.SharesSMTiles(&s, l, prod)
	s.Warps.Producer = prod
	return s
}

// TestSharesSM: with Schedule.BlocksPerSM = 2 on sm_90a the routed FC1
// and FC2 kernels of bf16 and register-fed mxfp8 layers are built two
// blocks per SM (the plan says blocks_per_sm 2 and 160 threads, a
// consumer warpgroup and a producer warp, or 256 with a producer
// warpgroup; at most half an SM's shared memory), the shared experts'
// GEMMs too, the others (the mxfp8 decode tiles, gathered rows) one per
// SM; the kernels launched at each T are those of the same tiles with one
// block per SM, but that mxfp8's register-fed FC1 of gate/up halves and
// 64 token rows writes h's register-fed values (h_rf) itself, without
// moe_quantize_h_rf (gpt-oss-20b's interleaved rows keep it); the module
// assembles with ptxas, the kernels two per SM within 168 registers at
// launch (128 with a producer warpgroup) and without spills; the backward
// lowers.
func TestSharesSM(t *testing.T) {
	for _, c := range []struct {
		name string
		prod int
	}{
		{"qwen3-30b-a3b", 1}, {"deepseek-v2-lite", 1}, {"gpt-oss-20b", 1}, {"qwen3-30b-a3b mxfp8", 1}, {"gpt-oss-20b mxfp8", 1},
		{"qwen3-30b-a3b", 4}, {"deepseek-v2-lite", 4}, {"qwen3-30b-a3b mxfp8", 4}, {"gpt-oss-20b mxfp8", 4},
	} {
		l := testlayer.Named(t, c.name)
		s := sharesSMSchedule(t, l, c.prod)
		prod := c.prod
		wg := prod == 4
		name := fmt.Sprintf("%s (producer warps %d)", c.name, prod)
		s.Warps.Producer = 4 // one block per SM: a producer warpgroup
		base, err := Build(l, s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s.BlocksPerSM, s.Warps.Producer = 2, prod
		p, err := Build(l, s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// The same kernels at every T, but that the register-fed FC1 of two
		// blocks per SM writes h's register-fed values itself (c_v), so
		// moe_quantize_h_rf is gone.
		mx := l.Precision == schedule.MXFP8 && !l.GateUpInterleaved && s.FC1.M == 64 // gate/up halves, 64 token rows: epilogueQuantizeRF
		for _, T := range []int64{1, 64, 300, 2000, 4096} {
			b := slices.DeleteFunc(launchedAt(base, T), func(k string) bool { return mx && k == "moe_quantize_h_rf" })
			if a := launchedAt(p, T); strings.Join(a, " ") != strings.Join(b, " ") {
				t.Errorf("%s T = %d: kernels %v two blocks per SM, %v one (without moe_quantize_h_rf)", name, T, a, b)
			}
		}
		if mx {
			fc1 := p.Kernels[slices.IndexFunc(p.Kernels, func(k Kernel) bool { return k.Name == "moe_fc1" })]
			if !slices.ContainsFunc(fc1.Params, func(q launch.Param) bool { return q.Name == "c_v" && q.Buffer == "h_rf" }) {
				t.Errorf("%s: moe_fc1 does not write h_rf (c_v): %v", name, fc1.Params)
			}
		}
		shared := map[string]bool{}
		for _, k := range p.Kernels {
			if k.BlocksPerSM == 0 {
				continue
			}
			shared[k.Name] = true
			threads := 160
			if wg {
				threads = 256
			}
			if k.BlocksPerSM != 2 || !k.GridPerSM || k.Block != threads || k.SharedBytes > target.SM90a.SharedMemoryFor(2) {
				t.Errorf("%s: %s: blocks_per_sm %d, grid_per_sm %t, %d threads, %d bytes of shared memory", name, k.Name, k.BlocksPerSM, k.GridPerSM, k.Block, k.SharedBytes)
			}
		}
		for _, k := range []string{"moe_fc1", "moe_fc2"} {
			if !shared[k] {
				t.Errorf("%s: %s one block per SM (two per SM: %v)", name, k, shared)
			}
		}
		for k := range shared {
			if strings.HasSuffix(k, "_gathered") || strings.Contains(k, "_decode") || strings.Contains(k, "splitk") {
				t.Errorf("%s: %s two per SM: its rows are gathered, its tiles promoted or its reduction split", name, k)
			}
		}
		if l.SharedExperts > 0 && !shared["moe_shared_fc1"] {
			t.Errorf("%s: the shared expert's FC1 one block per SM (two per SM: %v)", name, shared)
		}
		if _, err := lowerBackward(t, l, s); s.FC1.M == 128 && s.Warps.MMA == 4 {
			// The register-fed forward's tile of one warpgroup and 128
			// token rows: the backward's bf16 GEMMs refuse it.
			if err == nil || !strings.Contains(err.Error(), "needs 8 consumer warps") {
				t.Errorf("%s backward: %v, want the bf16 GEMMs' refusal of 128 rows with 4 MMA warps", name, err)
			}
		} else if err != nil {
			t.Errorf("%s backward: %v", name, err)
		}
		if testing.Short() {
			continue
		}
		res, err := ptx.CompileModule(p.Module, target.SM90a)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ptxas := toolchain.NeedPtxas(t, target.SM90a.String())
		if err := toolchain.Assemble(res.Text, target.SM90a.String()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		rs, err := toolchain.KernelResources(ptxas, res.Text, target.SM90a.String())
		if err != nil {
			t.Fatal(err)
		}
		regs := 168 // two blocks of 160 threads per SM
		if wg {
			regs = 128 // at launch: two blocks of 256 threads
		}
		for k := range shared {
			if r := rs[k]; r.Registers == 0 || r.Registers > regs || r.SpillStores > 0 {
				t.Errorf("%s: %s: ptxas reports %+v: want at most %d registers and no spills", name, k, r, regs)
			}
		}
	}
}

// TestSharesSMRefused: two blocks per SM are refused with the reason
// where they cannot apply: on sm_80 and sm_100a, with clusters, the queue
// walk, the chain or per-expert weights (the schedule), and with tiles
// none of whose GEMMs fits half an SM (the default's, each routed GEMM's
// reason named, and tiles that fit for the layer's precision), forward
// and backward.
func TestSharesSMRefused(t *testing.T) {
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	for _, tg := range []target.Target{target.SM80, target.SM100a} {
		s := testlayer.DefaultSchedule(t, l, tg)
		s.BlocksPerSM = 2
		if err := s.Validate(l); err == nil || !strings.Contains(err.Error(), "or 2 on sm_90a") {
			t.Errorf("%v two blocks per SM: %v", tg, err)
		}
	}
	for _, c := range []struct {
		what string
		edit func(*schedule.Layer, *schedule.Schedule)
		want string
	}{
		{"cluster", func(l *schedule.Layer, s *schedule.Schedule) { s.Cluster = 2 }, "clusters"},
		{"queue", func(l *schedule.Layer, s *schedule.Schedule) { s.Items = schedule.ItemsQueue }, "fixed order"},
		{"per-expert", func(l *schedule.Layer, s *schedule.Schedule) { l.Storage = schedule.PerExpertWeights }, "grouped weights"},
		{"default tiles", func(l *schedule.Layer, s *schedule.Schedule) {
			*s = testlayer.DefaultSchedule(t, *l, target.SM90a)
			s.Items = schedule.ItemsFixed
		},
			"no GEMM of this program fits two blocks per SM with this schedule's tiles (moe_fc1: sm_90a tile 128x256x64 with 3 stages needs 148528 bytes of shared memory"},
		{"chain", func(l *schedule.Layer, s *schedule.Schedule) { s.Chain = schedule.ChainFC }, "runs one block per SM: its blocks wait for one another"},
	} {
		l, s := l, sharesSMSchedule(t, l, 1)
		c.edit(&l, &s)
		s.BlocksPerSM = 2
		if _, err := Build(l, s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with two blocks per SM: %v, want an error saying %q", c.what, err, c.want)
		}
	}
	// An mxfp8 layer's refusal names mxfp8 tiles only.
	mx := testlayer.Named(t, "qwen3-30b-a3b mxfp8")
	ms := testlayer.DefaultSchedule(t, mx, target.SM90a)
	ms.BlocksPerSM, ms.Variant, ms.Items = 2, nil, schedule.ItemsFixed
	if _, err := Build(mx, ms); err == nil || !strings.Contains(err.Error(), "128x128x128") || strings.Contains(err.Error(), "64x192x64") {
		t.Errorf("mxfp8 with the default tiles, two blocks per SM: %v, want the mxfp8 tiles that fit", err)
	}
	// A backward none of whose GEMMs fits is refused too.
	s := testlayer.DefaultSchedule(t, l, target.SM90a)
	s.BlocksPerSM, s.Items = 2, schedule.ItemsFixed
	if _, err := lowerBackward(t, l, s); err == nil || !strings.Contains(err.Error(), "no GEMM of this program fits two blocks per SM") {
		t.Errorf("backward with the default tiles, two blocks per SM: %v", err)
	}
}
