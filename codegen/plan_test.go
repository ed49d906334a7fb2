package codegen

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

func TestGemmSpecValidate(t *testing.T) {
	ok := GemmSpec{Name: "g", N: 64, K: 64, Experts: 2, Tile: Tile{BM: 64, BN: 64, BK: 32, Stages: 2, Warps: 4}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []func(*GemmSpec){
		func(s *GemmSpec) { s.Name = "" },
		func(s *GemmSpec) { s.N = 12 },
		func(s *GemmSpec) { s.K = 0 },
		func(s *GemmSpec) { s.A = ADense },
		func(s *GemmSpec) { s.Tile.Stages = 0 },
	} {
		s := ok
		bad(&s)
		if err := s.Validate(); err == nil {
			t.Errorf("%+v: no error", s)
		}
	}
	if _, err := EngineFor(target.Target(99)); err == nil || !strings.Contains(err.Error(), "sm_80") {
		t.Errorf("EngineFor(99) = %v", err)
	}
}

// TestBuildPlan checks the launch plan of a program: every kernel exists in
// the module, every pointer names a buffer, every buffer is used, grids and
// sizes grow with T as the kernels need, and the plan survives JSON.
func TestBuildPlan(t *testing.T) {
	for _, c := range forwardCases(t) {
		t.Run(c.name, func(t *testing.T) {
			p := buildCase(t, c)
			l := c.layer
			fns := map[string]bool{}
			for _, f := range p.Module.Funcs {
				fns[f.Name()] = true
			}
			used := map[string]bool{}
			for _, k := range p.Kernels {
				if !fns[k.Name] {
					t.Errorf("kernel %s not in the module", k.Name)
				}
				if k.Block <= 0 || k.Block > 1024 {
					t.Errorf("%s: block %d", k.Name, k.Block)
				}
				for _, prm := range k.Params {
					switch prm.Type {
					case ParamPtr:
						if p.Buffer(prm.Buffer) == nil {
							t.Errorf("%s.%s: no buffer %q", k.Name, prm.Name, prm.Buffer)
						}
						used[prm.Buffer] = true
					case ParamI32:
						if prm.Value == nil {
							t.Errorf("%s.%s: scalar without value", k.Name, prm.Name)
						}
					}
				}
			}
			for _, b := range p.Buffers {
				if !used[b.Name] {
					t.Errorf("buffer %s is used by no kernel", b.Name)
				}
			}
			T := int64(257)
			H, I, K := int64(l.Hidden), int64(l.Intermediate), int64(l.TopK)
			for name, want := range map[string]int64{"xs": 2 * T * K * H, "h": 2 * T * K * I, "y": 2 * T * H, "row_of_slot": 4 * T * K} {
				if got := p.Buffer(name).Bytes.Eval(T); got != want {
					t.Errorf("buffer %s: %d bytes at T=%d, want %d", name, got, T, want)
				}
			}
			if got, min := p.Buffer("tiles1").Bytes.Eval(T), 8*((T*K+int64(c.layerBM()))/int64(c.layerBM())+int64(l.Experts)); got < min {
				t.Errorf("tiles1: %d bytes < %d", got, min)
			}
			js, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			var back Program
			if err := json.Unmarshal(js, &back); err != nil {
				t.Fatal(err)
			}
			if len(back.Kernels) != len(p.Kernels) || back.Kernels[len(p.Kernels)-1].Name != "moe_combine" {
				t.Errorf("JSON round trip lost kernels: %s", js)
			}
		})
	}
}

func (c fwdCase) layerBM() int {
	s, _ := schedule.DefaultSchedule(c.layer, target.SM80)
	return s.FC1.M
}

func TestBuildRejects(t *testing.T) {
	l, err := schedule.Preset("qwen3-30b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	s, err := schedule.DefaultSchedule(l, target.SM80)
	if err != nil {
		t.Fatal(err)
	}
	bad := l
	bad.Hidden = 2050
	if _, err := Build(bad, s); err == nil {
		t.Error("Build accepted H = 2050")
	}
	s2 := s
	s2.Stages = 1
	if _, err := Build(l, s2); err == nil {
		t.Error("Build accepted 1 stage")
	}
}

// TestGemmVariants: where the sm_90a default schedule has a GEMM variant
// (bf16 layers' mid-rows tiles, mxfp8 layers' decode tiles), the program
// holds both shapes of FC1 and FC2, their token ranges partition T >= 1
// (exactly one FC1 and one FC2 run at every T, none at T = 0), the
// variant runs exactly where T*K/E is in its rows range, and it reads its
// own tile list. The decode variant is the MXFP8 GEMMs' only: an mxfp8
// backward's bf16 data-gradient GEMMs have one shape. The register-fed
// FC2 of the presets with FC2Large runs moe_fc2_large in its band and from
// its first T on, with a tile list of its own, and only in the forward.
// The bf16 layers' Decode tiles run exactly where T*K/E is in their rows
// range, in the forward only, with a tile list of their own.
func TestGemmVariants(t *testing.T) {
	variants := map[schedule.Precision]int{}
	larges := map[string]bool{} // the mxfp8 presets with FC2Large
	for _, name := range schedule.Presets() {
		for _, prec := range []schedule.Precision{schedule.BF16, schedule.MXFP8} {
			l, err := schedule.Preset(name)
			if err != nil {
				t.Fatal(err)
			}
			l.Precision = prec
			s, err := schedule.DefaultSchedule(l, target.SM90a)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Build(l, s)
			if err != nil {
				t.Fatalf("%s %v: %v", name, prec, err)
			}
			if s.Variant == nil {
				continue
			}
			variants[prec]++
			vfc1, vfc2 := "moe_fc1_"+s.Variant.Name, "moe_fc2_"+s.Variant.Name
			lo, hi := s.Variant.VariantTokens(l.TopK, l.Experts)
			dlo, dhi := int64(1), int64(0) // the Decode tiles' tokens (none: lo > hi)
			if d := s.Decode; d != nil {
				dlo, dhi = d.VariantTokens(l.TopK, l.Experts)
			}
			if (s.Decode != nil) != (prec == schedule.BF16) {
				t.Errorf("%s %v: decode tiles %v, want them on bf16 layers only", name, prec, s.Decode)
			}
			// moe_fc2_large (schedule.Schedule.FC2Large) from large on and
			// in the band blo..bhi
			large, blo, bhi := int64(launch.MaxTokens), int64(1), int64(0)
			if r := s.FC2Large; r.Set() {
				if r.MinRows > 0 {
					large = r.MinTokens(l.TopK, l.Experts)
				}
				if r.MidRows.Set() {
					blo, bhi = r.MidRows.Tokens(l.TopK, l.Experts)
				}
			}
			for _, T := range []int64{0, 1, 2, lo - 1, lo, lo + 1, hi - 1, hi, hi + 1, 4096, blo - 1, blo, bhi, bhi + 1, large - 1, large, dhi - 1, dhi, dhi + 1, 1 << 20, launch.MaxTokens} {
				if T < 0 {
					continue
				}
				var runs []string
				for _, k := range p.Kernels {
					if strings.HasPrefix(k.Name, "moe_fc") && k.RunsAt(T) {
						// The decode form of a kernel that gathers its rows
						// (TestGatherInFC1) counts as the kernel.
						runs = append(runs, strings.TrimSuffix(k.Name, "_gathered"))
					}
				}
				rows := float64(T) * float64(l.TopK) / float64(l.Experts)
				in := rows >= float64(s.Variant.MinRows) && rows <= float64(s.Variant.MaxRows)
				want := []string{"moe_fc1", "moe_fc2"}
				switch {
				case T >= dlo && T <= dhi:
					want = []string{"moe_fc1_" + s.Decode.Name, "moe_fc2_" + s.Decode.Name}
				case in:
					want = []string{vfc1, vfc2}
				case s.FC2Large.Set() && (T >= large || T >= blo && T <= bhi):
					want = []string{"moe_fc1", "moe_fc2_large"}
				}
				if T == 0 {
					want = nil
				}
				if !slices.Equal(runs, want) {
					t.Errorf("%s %v T=%d (%.1f rows per expert): %v run, want %v", name, prec, T, rows, runs, want)
				}
			}
			lists := map[string]string{}
			for _, k := range p.Kernels {
				for _, prm := range k.Params {
					if prm.Name == "tiles" {
						lists[k.Name] = prm.Buffer
					}
				}
			}
			if lists[vfc1] == "" || lists[vfc1] == lists["moe_fc1"] {
				t.Errorf("%s %v: %s reads tile list %q, moe_fc1 %q", name, prec, vfc1, lists[vfc1], lists["moe_fc1"])
			}
			if d := s.Decode; d != nil {
				if dl := lists["moe_fc2_"+d.Name]; dl == "" || dl == lists["moe_fc2"] || dl == lists[vfc1] {
					t.Errorf("%s %v: moe_fc2_%s reads tile list %q (moe_fc2 %q, %s %q)", name, prec, d.Name, dl, lists["moe_fc2"], vfc1, lists[vfc1])
				}
				bk, err := lowerBackward(t, l, s)
				if err != nil {
					t.Fatalf("%s backward: %v", name, err)
				}
				for _, k := range bk.Kernels {
					if strings.Contains(k.Name, "_"+d.Name) {
						t.Errorf("%s bf16 backward: kernel %s (the decode tiles are the forward's)", name, k.Name)
					}
				}
			}
			if s.FC2Large.Set() {
				larges[name] = true
				if l := lists["moe_fc2_large"]; l == "" || l == lists["moe_fc2"] || l == lists[vfc1] {
					t.Errorf("%s %v: moe_fc2_large reads tile list %q (moe_fc2 %q, %s %q)", name, prec, l, lists["moe_fc2"], vfc1, lists[vfc1])
				}
			}
			if prec != schedule.MXFP8 || name != "qwen3-30b-a3b" {
				continue
			}
			bp, err := moe.Backward(l)
			if err != nil {
				t.Fatal(err)
			}
			bk, err := Lower(bp, s, PerOp)
			if err != nil {
				t.Fatalf("%s backward: %v", name, err)
			}
			var decode []string
			for _, k := range bk.Kernels {
				if strings.HasSuffix(k.Name, "_"+s.Variant.Name) {
					decode = append(decode, k.Name)
				}
			}
			if !slices.Equal(decode, []string{vfc1}) {
				t.Errorf("%s mxfp8 backward: kernels %v run the decode variant, want the FC1 recompute's only (%s)", name, decode, vfc1)
			}
			for _, k := range bk.Kernels {
				if strings.HasSuffix(k.Name, "_large") {
					t.Errorf("%s mxfp8 backward: kernel %s (FC2Large is the forward's register-fed FC2 only)", name, k.Name)
				}
			}
			for _, b := range bk.Buffers {
				if strings.Contains(b.Doc, "large-rows") {
					t.Errorf("%s mxfp8 backward: buffer %s (%s): the work list of a kernel the backward does not have", name, b.Name, b.Doc)
				}
			}
		}
	}
	if variants[schedule.BF16] == 0 || variants[schedule.MXFP8] == 0 {
		t.Fatalf("presets with a GEMM variant on sm_90a: %v, want bf16 and mxfp8 ones", variants)
	}
	if !larges["olmoe-1b-7b"] || !larges["mixtral-8x7b"] || !larges["qwen2-57b-a14b"] {
		t.Errorf("mxfp8 presets with moe_fc2_large: %v, want olmoe-1b-7b, mixtral-8x7b and qwen2-57b-a14b (shared experts keep FC2's tile)", larges)
	}
}

// The persistent GEMMs of the default schedules are marked GridPerSM (the
// runtime launches one block per SM of the device); a schedule that sets
// GridCTAs keeps its grid.
func TestGridPerSM(t *testing.T) {
	l, err := schedule.Preset("qwen3-30b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []target.Target{target.SM80, target.SM90a, target.SM100a} {
		s, err := schedule.DefaultSchedule(l, target)
		if err != nil {
			t.Fatal(err)
		}
		for _, grid := range []int{0, 64} {
			if grid != 0 && !s.Persistent {
				continue
			}
			s.GridCTAs = grid
			p, err := Build(l, s)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range p.Kernels {
				gemm := strings.HasPrefix(k.Name, "moe_fc") || strings.HasPrefix(k.Name, "moe_shared_fc")
				want := gemm && s.Persistent && grid == 0
				if k.GridPerSM != want {
					t.Errorf("%v GridCTAs=%d: kernel %s GridPerSM = %v, want %v", target, grid, k.Name, k.GridPerSM, want)
				}
				if gemm && grid != 0 && k.Grid[0].Eval(1) != int64(grid) {
					t.Errorf("%v: kernel %s grid %d, want %d", target, k.Name, k.Grid[0].Eval(1), grid)
				}
			}
		}
	}
}

// schedule.SharedMemoryBytes, which Validate and `mokc inspect` use, is
// what the engines allocate: for every preset, target and weight storage,
// and for mxfp8 (grouped; sm_90a and sm_100a with promote, sm_90a with the
// expansion and register-fed), the routed GEMM kernels' dynamic shared
// memory equals it.
func TestSharedMemoryMatchesSchedule(t *testing.T) {
	type form struct {
		storage schedule.WeightStorage
		mx      bool
		gemm    schedule.MXGemmKind
	}
	forms := []form{{storage: schedule.GroupedWeights}, {storage: schedule.PerExpertWeights},
		{schedule.GroupedWeights, true, schedule.MXGemmPromote}, {schedule.GroupedWeights, true, schedule.MXGemmExpand},
		{schedule.GroupedWeights, true, schedule.MXGemmRegFed}}
	for _, name := range schedule.Presets() {
		for _, f := range forms {
			l, err := schedule.Preset(name)
			if err != nil {
				t.Fatal(err)
			}
			l.Storage = f.storage
			if f.mx {
				l.Precision = schedule.MXFP8
			}
			for _, tg := range target.All() {
				if f.mx && (tg == target.SM80 || (f.gemm != schedule.MXGemmPromote && tg != target.SM90a)) {
					continue
				}
				s, err := schedule.DefaultScheduleMX(l, tg, f.gemm)
				if err != nil {
					t.Fatal(err)
				}
				p, err := Build(l, s)
				if err != nil {
					t.Fatalf("%s %+v %v: %v", name, f, tg, err)
				}
				want := map[string]int{
					"moe_fc1": s.SharedMemoryBytes(l, s.FC1, true),
					"moe_fc2": s.SharedMemoryBytes(l, s.FC2, false),
				}
				if vs, ok := s.VariantSchedule(); ok {
					want["moe_fc1_"+s.Variant.Name] = vs.SharedMemoryBytes(l, vs.FC1, true)
					want["moe_fc2_"+s.Variant.Name] = vs.SharedMemoryBytes(l, vs.FC2, false)
				}
				for _, k := range p.Kernels {
					w, ok := want[k.Name]
					if ok && slices.ContainsFunc(k.Params, func(p Param) bool { return p.Name == "c_q" }) {
						// The fused quantization's f32 tile (32 token rows of
						// the gated tile's outputs, 4 floats of padding each)
						// after the 1024-byte realignment and the 16-byte
						// aligned end of the rest.
						vs, _ := s.VariantSchedule()
						w = 1024 + (w-1024+15)&^15 + 4*vs.FC1.M*(vs.FC1.N/2+4)
					}
					if ok && k.SharedBytes != w {
						t.Errorf("%s %+v %v: kernel %s allocates %d bytes of shared memory, schedule says %d", name, f, tg, k.Name, k.SharedBytes, w)
					}
				}
			}
		}
	}
}

// TestDispatchSmall: with the ids form of the routing, every preset's
// forward and backward on sm_80 and sm_90a holds moe_dispatch_small, which
// runs for T = 0 .. 2048/K, and for every larger T the four routing
// kernels, except that with schedule.DispatchQueue the work-queue kernel
// moe_dispatch runs past T = 8192/K: exactly one of the forms at every T.
// The routing-map form (a route op between init and count) keeps the four.
func TestDispatchSmall(t *testing.T) {
	four := []string{"moe_init", "moe_count", "moe_scan", "moe_permute"}
	for _, name := range schedule.Presets() {
		for _, tg := range []target.Target{target.SM80, target.SM90a} {
			for _, routing := range []schedule.RoutingForm{schedule.RoutingIDs, schedule.RoutingMap} {
				for _, kind := range []schedule.DispatchKind{schedule.DispatchQueue, schedule.DispatchOps} {
					l, err := schedule.Preset(name)
					if err != nil {
						t.Fatal(err)
					}
					l.Routing = routing
					s, err := schedule.DefaultSchedule(l, tg)
					if err != nil {
						t.Fatal(err)
					}
					s.Dispatch = kind
					for pass, p := range forwardAndBackward(t, l, s) {
						what := fmt.Sprintf("%s %v routing %d dispatch %v pass %d", name, tg, routing, kind, pass)
						var small *Kernel
						for i := range p.Kernels {
							if p.Kernels[i].Name == "moe_dispatch_small" {
								small = &p.Kernels[i]
							}
						}
						if routing == schedule.RoutingMap {
							if small != nil {
								t.Errorf("%s: moe_dispatch_small with a route op", what)
							}
							continue
						}
						if small == nil {
							t.Errorf("%s: no moe_dispatch_small", what)
							continue
						}
						tmax, qmax := int64(2048/l.TopK), int64(8192/l.TopK)
						for _, T := range []int64{0, 1, tmax - 1, tmax, tmax + 1, qmax, qmax + 1, 1 << 20, launch.MaxTokens} {
							large := four
							if kind == schedule.DispatchQueue && T > qmax {
								large = []string{"moe_dispatch"}
							}
							var runs []string
							for _, k := range p.Kernels {
								if (k.Name == small.Name || slices.Contains(four, k.Name) || k.Name == "moe_dispatch") && k.RunsAt(T) {
									runs = append(runs, k.Name)
								}
							}
							want := large
							if T <= tmax {
								want = []string{small.Name}
							}
							if !slices.Equal(runs, want) {
								t.Errorf("%s T=%d: runs %v, want %v", what, T, runs, want)
							}
						}
					}
				}
			}
		}
	}
}

// forwardAndBackward lowers layer l's forward and backward programs with
// schedule s.
func forwardAndBackward(t *testing.T, l schedule.Layer, s schedule.Schedule) []*Program {
	t.Helper()
	fwd, err := Build(l, s)
	if err != nil {
		t.Fatalf("%s %v: %v", l.Name, s.Target, err)
	}
	bp, err := moe.Backward(l)
	if err != nil {
		t.Fatal(err)
	}
	bwd, err := Lower(bp, s, PerOp)
	if err != nil {
		t.Fatalf("%s %v backward: %v", l.Name, s.Target, err)
	}
	return []*Program{fwd, bwd}
}

// TestProgrammaticLaunch: on sm_90a and sm_100a every kernel of the
// forward and the backward is marked launch.Kernel.Programmatic and its
// function begins with griddepcontrol.wait before anything else, followed
// at once by griddepcontrol.launch_dependents, except in the persistent
// GEMMs and the kernels launched at large T (triggersAtExit), which issue
// no launch_dependents anywhere (they trigger by exiting); sm_80's kernels
// have none of it. Both kinds occur on both targets.
func TestProgrammaticLaunch(t *testing.T) {
	l, err := schedule.Preset("gpt-oss-20b")
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range []target.Target{target.SM80, target.SM90a, target.SM100a} {
		s, err := schedule.DefaultSchedule(l, tg)
		if err != nil {
			t.Fatal(err)
		}
		want := tg != target.SM80
		kinds := map[bool]bool{}
		for _, p := range forwardAndBackward(t, l, s) {
			for _, k := range p.Kernels {
				var first string
				triggers := 0
				for _, f := range p.Module.Funcs {
					if f.Name() != k.Name {
						continue
					}
					first = f.Blocks[0].Insts[0].LLString()
					for _, b := range f.Blocks {
						for _, in := range b.Insts {
							triggers += strings.Count(in.LLString(), "launch_dependents")
						}
					}
				}
				if k.Programmatic != want || strings.Contains(first, "griddepcontrol.wait") != want {
					t.Errorf("%v %s: Programmatic %v, first instruction %q", tg, k.Name, k.Programmatic, first)
				}
				if !want {
					continue
				}
				exit := triggersAtExit(&k, smallDispatchTokens(dims{H: l.Hidden, I: l.Intermediate, E: l.Experts, K: l.TopK})+1)
				kinds[exit] = true
				if early := strings.Contains(first, "launch_dependents"); early == exit || triggers != map[bool]int{false: 1, true: 0}[exit] {
					t.Errorf("%v %s: triggers by exiting %v, but %d launch_dependents, first instruction %q", tg, k.Name, exit, triggers, first)
				}
			}
		}
		if want && (!kinds[false] || !kinds[true]) {
			t.Errorf("%v: kernels triggering early %v, by exiting %v: want both", tg, kinds[false], kinds[true])
		}
	}
}

// TestQuantizeInFC1Epilogue: in every preset's sm_90a mxfp8 forward the
// decode variant's FC1 writes h_q and h_scales itself (QuantizeC: c_q and
// c_scales bound to them) and moe_quantize_h_rf (h's register-fed form,
// h_rf, for the default's register-fed GEMMs) runs only outside the
// variant's token range, so exactly one kernel writes h's quantized form
// at every T >= 1; on sm_100a moe_quantize_h runs at every T.
func TestQuantizeInFC1Epilogue(t *testing.T) {
	for _, name := range schedule.Presets() {
		for _, tg := range []target.Target{target.SM90a, target.SM100a} {
			l, err := schedule.Preset(name)
			if err != nil {
				t.Fatal(err)
			}
			l.Precision = schedule.MXFP8
			s, err := schedule.DefaultSchedule(l, tg)
			if err != nil {
				t.Fatal(err)
			}
			p, err := Build(l, s)
			if err != nil {
				t.Fatalf("%s %v: %v", name, tg, err)
			}
			for _, T := range []int64{1, 64, 256, 4096, launch.MaxTokens} {
				var writers []string
				for _, k := range p.Kernels {
					for _, prm := range k.Params {
						if (prm.Buffer == moe.BufHQ && (prm.Name == "q" || prm.Name == "c_q") || prm.Buffer == "h_rf" && prm.Name == "v") && k.RunsAt(T) {
							writers = append(writers, k.Name)
						}
					}
				}
				want := []string{"moe_quantize_h"}
				if tg == target.SM90a {
					want = []string{"moe_quantize_h_rf"}
				}
				if tg == target.SM90a && s.Variant != nil {
					if lo, hi := s.Variant.VariantTokens(l.TopK, l.Experts); lo <= T && T <= hi {
						want = []string{"moe_fc1_" + s.Variant.Name}
						if T <= mxGatherMaxTokens && !l.RouterWeightOnInput { // the gather weights llama4-scout's rows
							want = []string{"moe_fc1_" + s.Variant.Name + "_gathered"}
						}
					}
				}
				if !slices.Equal(writers, want) {
					t.Errorf("%s %v T=%d: h_q written by %v, want %v", name, tg, T, writers, want)
				}
			}
		}
	}
}

// TestQuantizeCOnly: in qwen3-30b-a3b's sm_90a mxfp8 forward only
// quantize_h (and its register-fed form) reads h, so the decode FC1's fused
// quantization leaves h unstored (onlyReader, GemmSpec.QuantizeCOnly); a
// program in which another op also reads h, or a C that is the backward's
// saved state (moe.BufFC1Out), keeps it.
func TestQuantizeCOnly(t *testing.T) {
	l, err := schedule.Preset("qwen3-30b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	l.Precision = schedule.MXFP8
	s, err := schedule.DefaultSchedule(l, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := EngineFor(target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	p, err := moe.Forward(l)
	if err != nil {
		t.Fatal(err)
	}
	var q moe.Quantize
	for _, op := range p.Ops {
		if o, ok := op.(moe.Quantize); ok && o.Op == "quantize_h" {
			q = o
		}
	}
	if q.X == nil {
		t.Fatal("no quantize_h in the mxfp8 forward")
	}
	reader := func(p *moe.Program, buf *moe.Buffer) bool {
		rf, err := moe.RegisterFed(p)
		if err != nil {
			t.Fatal(err)
		}
		lw, err := newPerOp(p, s, eng)
		if err != nil {
			t.Fatal(err)
		}
		lw.addRegisterFed(rf)
		return lw.onlyReader(buf, q)
	}
	if !reader(p, q.X) {
		t.Errorf("h: another reader found in %v", p.Ops)
	}
	two := *p
	nq, ns := *q.Q, *q.S
	nq.Name, ns.Name = "h_q2", "h_scales2"
	two.Buffers = append(append([]*moe.Buffer{}, p.Buffers...), &nq, &ns)
	two.Ops = append(append([]moe.Op{}, p.Ops...), moe.Quantize{Op: "quantize_h2", X: q.X, Q: &nq, S: &ns, K: q.K})
	if reader(&two, q.X) {
		t.Error("h read by a second op: onlyReader still true")
	}
	saved := *q.X
	saved.Name = moe.BufFC1Out
	if reader(p, &saved) {
		t.Error("the backward's saved fc1_out: onlyReader true")
	}
}

// TestGatherInFC1: on sm_90a the bf16 forward runs, at decode sizes (at
// most gatherFC1Rows mean rows per expert), FC1 kernels that read the
// dispatched rows from x by their slots (GemmSpec.GatherK: a bound to x,
// a_rows to src_slot, no tensor map of A) and no gather kernel, and at
// larger T the gather kernel and the plain FC1 kernels: at every T
// exactly one of the two; under schedule.GatherSeparate, on sm_80 and
// sm_100a, with the routing weight on the input (llama4-scout: the rows are
// w·x) and in the mxfp8 forward (quantized rows) the gather kernel runs at
// every T. llama4-scout's bf16 backward gathers FC1·x's rows the same way.
func TestGatherInFC1(t *testing.T) {
	build := func(name string, tg target.Target, mx bool, sep bool) (schedule.Layer, *Program) {
		t.Helper()
		l, err := schedule.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if mx {
			l.Precision = schedule.MXFP8
		}
		s, err := schedule.DefaultSchedule(l, tg)
		if err != nil {
			t.Fatal(err)
		}
		if sep {
			s.Gather = schedule.GatherSeparate
		}
		p, err := Build(l, s)
		if err != nil {
			t.Fatalf("%s %v: %v", name, tg, err)
		}
		return l, p
	}
	// at returns whether a gather kernel runs at T and the FC1 kernels
	// that run there reading x (checking their bindings).
	at := func(p *Program, T int64) (gather bool, gathering []string) {
		for _, k := range p.Kernels {
			if !k.RunsAt(T) {
				continue
			}
			if strings.HasPrefix(k.Name, "moe_gather") {
				gather = true
			}
			binds := map[string]string{}
			for _, prm := range k.Params {
				binds[prm.Name] = prm.Buffer
			}
			if binds["a_rows"] == "" {
				continue
			}
			// bf16 reads x; mxfp8 x's per-token MXFP8 form and its scales
			a, scales := "x", ""
			if binds["a_scales"] != "" {
				a, scales = "x_q", "x_scales"
			}
			if !strings.HasPrefix(k.Name, "moe_fc1") || !strings.HasSuffix(k.Name, "_gathered") || binds["a"] != a || binds["a_scales"] != scales || binds["a_rows"] != "src_slot" || binds["tmap_a"] != "" {
				t.Errorf("%s: a = %q, a_scales = %q, a_rows = %q, tmap_a = %q", k.Name, binds["a"], binds["a_scales"], binds["a_rows"], binds["tmap_a"])
			}
			gathering = append(gathering, k.Name)
		}
		return gather, gathering
	}
	for _, name := range schedule.Presets() {
		l, p := build(name, target.SM90a, false, false)
		if l.RouterWeightOnInput {
			continue
		}
		decode := int64(gatherFC1Rows * l.Experts / l.TopK)
		for _, T := range []int64{1, 64, decode, decode + 1, 4096, launch.MaxTokens} {
			g, fc1 := at(p, T)
			if want := T <= decode; g == want || (len(fc1) == 1) != want {
				t.Errorf("%s sm_90a T=%d: gather kernel %v, FC1 kernels gathering %v", name, T, g, fc1)
			}
		}
	}
	// llama4-scout's bf16 backward: FC1·x of the unweighted rows gathers
	// them at decode sizes (gather_x elsewhere); its mxfp8 backward keeps
	// gather_x at every T.
	for _, prec := range []schedule.Precision{schedule.BF16, schedule.MXFP8} {
		l, err := schedule.Preset("llama4-scout")
		if err != nil {
			t.Fatal(err)
		}
		l.Precision = prec
		s, err := schedule.DefaultSchedule(l, target.SM90a)
		if err != nil {
			t.Fatal(err)
		}
		bp, err := moe.Backward(l)
		if err != nil {
			t.Fatal(err)
		}
		p, err := Lower(bp, s, PerOp)
		if err != nil {
			t.Fatal(err)
		}
		decode := int64(gatherFC1Rows * l.Experts / l.TopK)
		for _, T := range []int64{1, decode, decode + 1, 4096} {
			var runs []string
			for _, k := range p.Kernels {
				if (k.Name == "moe_gather_x" || strings.HasPrefix(k.Name, "moe_fc1_x")) && k.RunsAt(T) {
					runs = append(runs, k.Name)
				}
			}
			want := []string{"moe_gather_x", "moe_fc1_x"}
			if T <= decode && prec == schedule.BF16 {
				want = []string{"moe_fc1_x_gathered"}
			}
			if !slices.Equal(runs, want) {
				t.Errorf("llama4-scout %v backward T=%d: %v run, want %v", prec, T, runs, want)
			}
		}
	}
	for _, c := range []struct {
		name string
		tg   target.Target
		mx   bool
		sep  bool
	}{
		{"qwen3-30b-a3b", target.SM90a, false, true},
		{"qwen3-30b-a3b", target.SM80, false, false},
		{"qwen3-30b-a3b", target.SM100a, false, false},
		{"llama4-scout", target.SM90a, false, false},
		{"qwen3-30b-a3b", target.SM90a, true, true},
		{"qwen3-30b-a3b", target.SM100a, true, false},
	} {
		_, p := build(c.name, c.tg, c.mx, c.sep)
		for _, T := range []int64{1, 64, 4096} {
			if g, fc1 := at(p, T); !g || len(fc1) > 0 {
				t.Errorf("%s %v mxfp8 %v separate %v T=%d: gather kernel %v, FC1 kernels gathering %v", c.name, c.tg, c.mx, c.sep, T, g, fc1)
			}
		}
	}
	// every sm_90a mxfp8 forward gathers in the decode FC1 at T <= 4
	// (mxGatherMaxTokens, reading x_q and x_scales) and runs the
	// quantizing gather from T = 5 on
	for _, name := range schedule.Presets() {
		l, p := build(name, target.SM90a, true, false)
		if l.RouterWeightOnInput {
			continue
		}
		for _, T := range []int64{1, mxGatherMaxTokens, mxGatherMaxTokens + 1, 64, 4096} {
			g, fc1 := at(p, T)
			if want := T <= mxGatherMaxTokens; g == want || (len(fc1) == 1) != want {
				t.Errorf("%s sm_90a mxfp8 T=%d: gather kernel %v, FC1 kernels gathering %v", name, T, g, fc1)
			}
		}
	}
}

// TestQueueItems: with schedule.ItemsQueue every sm_90a GEMM over
// dispatched rows (the routed FC1 and FC2 and their variants, forward and
// backward; bf16 and mxfp8) takes the "queue" parameter bound to
// launch.BufWorkQueue, two words of it each beside moe_dispatch's four, and
// its function holds the queue's atomic add and the acq_rel count of the
// blocks done; no other GEMM does, nor any GEMM with the fixed walk; the
// schedule is refused on sm_80 and sm_100a, whose engines say they have
// no queue.
func TestQueueItems(t *testing.T) {
	for _, name := range []string{"qwen3-30b-a3b", "gpt-oss-20b", "deepseek-v2-lite"} {
		for _, prec := range []schedule.Precision{schedule.BF16, schedule.MXFP8} {
			for _, tg := range []target.Target{target.SM80, target.SM90a, target.SM100a} {
				l, err := schedule.Preset(name)
				if err != nil {
					t.Fatal(err)
				}
				l.Precision = prec
				s, err := schedule.DefaultSchedule(l, tg)
				if err != nil {
					continue // mxfp8 on sm_80
				}
				for _, kind := range []schedule.ItemsKind{schedule.ItemsFixed, schedule.ItemsQueue} {
					s.Items = kind
					if kind == schedule.ItemsQueue && tg != target.SM90a {
						if _, err := Build(l, s); err == nil || !strings.Contains(err.Error(), "Schedule.Items") {
							t.Errorf("%s %v %v: the queue walk off sm_90a: %v", name, prec, tg, err)
						}
						continue
					}
					for pass, p := range forwardAndBackward(t, l, s) {
						what := fmt.Sprintf("%s %v %v items %v pass %d", name, prec, tg, kind, pass)
						queued, words := 0, int64(0)
						for _, k := range p.Kernels {
							if k.Name == "moe_dispatch" {
								words += queueWords
							}
							gemm := slices.ContainsFunc(k.Params, func(q Param) bool { return q.Role == RoleTiles })
							i := slices.IndexFunc(k.Params, func(q Param) bool { return q.Role == RoleQueue })
							want := gemm && kind == schedule.ItemsQueue && tg == target.SM90a
							if (i >= 0) != want {
								t.Errorf("%s: %s has the queue parameter %v, want %v", what, k.Name, i >= 0, want)
							}
							if !gemm {
								continue
							}
							var text strings.Builder
							for _, f := range p.Module.Funcs {
								if f.Name() == k.Name {
									text.WriteString(f.LLString())
								}
							}
							for _, frag := range []string{"atomicrmw add", "atom.acq_rel.gpu"} {
								if strings.Contains(text.String(), frag) != want {
									t.Errorf("%s: %s holds %q: %v, want %v", what, k.Name, frag, !want, want)
								}
							}
							if i < 0 {
								continue
							}
							queued++
							words += gemmQueueWords
							if k.Params[i].Buffer != launch.BufWorkQueue {
								t.Errorf("%s: %s's queue is bound to %q", what, k.Name, k.Params[i].Buffer)
							}
						}
						if kind == schedule.ItemsQueue && tg == target.SM90a && queued < 2 {
							t.Errorf("%s: %d kernels take their items from the queue", what, queued)
						}
						var got int64
						if b := p.Buffer(launch.BufWorkQueue); b != nil {
							got = b.Shape[0].Eval(0)
						}
						if got != words {
							t.Errorf("%s: work_queue holds %d words, the kernels use %d", what, got, words)
						}
					}
				}
			}
		}
	}
	spec := GemmSpec{Name: "g", N: 256, K: 256, Experts: 4, Tile: Tile{BM: 128, BN: 128, BK: 64, Stages: 4, Warps: 8}}
	for _, tg := range []target.Target{target.SM80, target.SM90a, target.SM100a} {
		eng, err := EngineFor(tg)
		if err != nil {
			t.Fatal(err)
		}
		if got := eng.QueuesItems(spec); got != (tg == target.SM90a) {
			t.Errorf("%v: QueuesItems = %v", tg, got)
		}
		dense := spec
		dense.A, dense.Experts = ADense, 1
		if eng.QueuesItems(dense) {
			t.Errorf("%v: QueuesItems of a dense A", tg)
		}
	}
}
