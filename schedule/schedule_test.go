package schedule

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/target"
)

// wantPresets lists every model that has a preset.
var wantPresets = []string{
	"deepseek-v3", "deepseek-v2-lite", "deepseek-v4-flash", "dsv4-pro-proxy", "kimi-k2",
	"qwen3-30b-a3b", "qwen3-235b-a22b", "qwen2-57b-a14b", "mixtral-8x7b", "olmoe-1b-7b",
	"gpt-oss-120b", "gpt-oss-20b", "llama4-scout",
}

func TestPresetsCoverModels(t *testing.T) {
	got := Presets()
	want := slices.Clone(wantPresets)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("Presets() = %v, want %v", got, want)
	}
	// H, I, E, K, S, I_s from each model's config.json (dsv4-pro-proxy:
	// MoK's test shape).
	sizes := map[string][6]int{
		"deepseek-v3": {7168, 2048, 256, 8, 1, 2048}, "deepseek-v2-lite": {2048, 1408, 64, 6, 2, 1408},
		"deepseek-v4-flash": {4096, 2048, 256, 6, 1, 2048}, "dsv4-pro-proxy": {7168, 3072, 384, 6, 1, 3072},
		"kimi-k2": {7168, 2048, 384, 8, 1, 2048}, "qwen3-30b-a3b": {2048, 768, 128, 8, 0, 0},
		"qwen3-235b-a22b": {4096, 1536, 128, 8, 0, 0}, "qwen2-57b-a14b": {3584, 2560, 64, 8, 1, 20480},
		"mixtral-8x7b": {4096, 14336, 8, 2, 0, 0}, "olmoe-1b-7b": {2048, 1024, 64, 8, 0, 0},
		"gpt-oss-120b": {2880, 2880, 128, 4, 0, 0}, "gpt-oss-20b": {2880, 2880, 32, 4, 0, 0},
		"llama4-scout": {5120, 8192, 16, 1, 1, 8192},
	}
	for _, n := range wantPresets {
		l, err := Preset(strings.ToUpper(n))
		if err != nil {
			t.Fatal(err)
		}
		if l.Name != n {
			t.Errorf("Preset(%q).Name = %q", n, l.Name)
		}
		s := sizes[n]
		got := [6]int{l.Hidden, l.Intermediate, l.Experts, l.TopK, l.SharedExperts, l.SharedIntermediate}
		if got != s {
			t.Errorf("%s sizes = %v, want %v", n, got, s)
		}
		if err := l.Validate(); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	for n, check := range map[string]func(Layer) bool{
		"qwen2-57b-a14b": func(l Layer) bool { return l.SharedGate },
		"llama4-scout":   func(l Layer) bool { return l.RouterWeightOnInput && l.Router.Score == ScoreSigmoid },
		"gpt-oss-20b": func(l Layer) bool {
			return l.Activation == GPTOSS && l.SwiGLULimit == 7 && l.GPTOSSAlpha == 1.702 && l.Biases && l.GateUpInterleaved
		},
		"deepseek-v4-flash": func(l Layer) bool {
			return l.Activation == ClampedSwiGLU && l.SwiGLULimit == 10 && l.SharedActivation == SwiGLU && l.Router.Scale == 1.5
		},
		"deepseek-v3":   func(l Layer) bool { return l.Router.Groups == 8 && l.Router.TopKGroups == 4 && l.Router.Scale == 2.5 },
		"kimi-k2":       func(l Layer) bool { return l.Router.Scale == 2.827 && l.Router.Score == ScoreSigmoid },
		"olmoe-1b-7b":   func(l Layer) bool { return !l.Router.Normalize },
		"qwen3-30b-a3b": func(l Layer) bool { return l.Router.Normalize },
	} {
		if l, _ := Preset(n); !check(l) {
			t.Errorf("%s: family details wrong: %v", n, l)
		}
	}
	if _, err := Preset("llama-3-8b"); err == nil || !strings.Contains(err.Error(), "qwen3-30b-a3b") {
		t.Errorf("unknown preset error should list the presets, got %v", err)
	}
}

func TestDefaultScheduleEveryPresetAndTarget(t *testing.T) {
	for _, n := range Presets() {
		for _, prec := range []Precision{BF16, MXFP8} {
			l, _ := Preset(n)
			l.Precision = prec
			for _, tg := range target.All() {
				s, err := DefaultSchedule(l, tg)
				if prec == MXFP8 && tg == target.SM80 {
					if err == nil {
						t.Errorf("%s mxfp8 on sm_80: want an error", n)
					}
					continue
				}
				if err != nil {
					t.Errorf("%s %v %v: %v", n, prec, tg, err)
					continue
				}
				if s.Target != tg || s.Validate(l) != nil {
					t.Errorf("%s %v: invalid default %v", n, tg, s)
				}
				for _, tile := range []Tile{s.FC1, s.FC2} {
					if sm := s.SharedMemoryBytes(l, tile, true); sm > tg.SharedMemoryLimit() {
						t.Errorf("%s %v: %d bytes of shared memory", n, tg, sm)
					}
				}
			}
		}
	}
}

func TestDefaultScheduleChoices(t *testing.T) {
	q, _ := Preset("qwen3-30b-a3b")
	s80, _ := DefaultSchedule(q, target.SM80)
	if s80.FC1 != (Tile{128, 128, 64}) || s80.Stages != 3 || s80.Warps != (WarpRoles{MMA: 4}) {
		t.Errorf("sm_80 default: %v", s80)
	}
	s90, _ := DefaultSchedule(q, target.SM90a)
	if s90.FC1.M != 128 || s90.FC1.K != 64 || s90.Warps != (WarpRoles{Producer: 4, MMA: 8}) {
		t.Errorf("sm_90a default: %v", s90)
	}
	s100, _ := DefaultSchedule(q, target.SM100a)
	if s100.FC1 != (Tile{128, 256, 64}) || s100.Warps != (WarpRoles{1, 1, 4}) {
		t.Errorf("sm_100a default: %v", s100)
	}
	// H = 2880 = 15 x 192: no padded columns.
	g, _ := Preset("gpt-oss-120b")
	for _, tg := range []target.Target{target.SM90a, target.SM100a} {
		s, _ := DefaultSchedule(g, tg)
		if s.FC2.N != 192 || s.FC1.N != 192 {
			t.Errorf("gpt-oss %v: tiles %v %v, want N = 192", tg, s.FC1, s.FC2)
		}
	}
	// Per-rank I = 176 under tensor parallelism: 2I = 352 fits 2 x 192.
	l := q
	l.Intermediate = 176
	if s, err := DefaultSchedule(l, target.SM90a); err != nil || s.FC1.N != 192 {
		t.Errorf("I = 176: %v %v", s, err)
	}
	if _, err := DefaultSchedule(Layer{}, target.SM90a); err == nil {
		t.Error("DefaultSchedule of an empty layer: want an error")
	}
	if _, err := DefaultSchedule(q, target.Target(7)); err == nil {
		t.Error("DefaultSchedule for target.Target(7): want an error")
	}
}

// wantFieldErr checks that err is a *FieldError naming field, whose text
// contains the value and the rule fragment.
func wantFieldErr(t *testing.T, what string, err error, field, rule string) {
	t.Helper()
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Errorf("%s: error %v is not a *FieldError", what, err)
		return
	}
	if fe.Field != field {
		t.Errorf("%s: field %q, want %q (%v)", what, fe.Field, field, err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(fe.Value)) || !strings.Contains(err.Error(), field) {
		t.Errorf("%s: message %q does not name field and value", what, err)
	}
	if !strings.Contains(err.Error(), rule) {
		t.Errorf("%s: message %q lacks %q", what, err, rule)
	}
}

func TestLayerValidateErrors(t *testing.T) {
	base, _ := Preset("qwen3-30b-a3b")
	shared, _ := Preset("deepseek-v3")
	checkLayerCases(t, []layerCase{
		{"zero hidden", base, func(l *Layer) { l.Hidden = 0 }, "Layer.Hidden", "> 0"},
		{"negative I", base, func(l *Layer) { l.Intermediate = -768 }, "Layer.Intermediate", "> 0"},
		{"huge E", base, func(l *Layer) { l.Experts = 1 << 30 }, "Layer.Experts", "<="},
		{"top-k > E", base, func(l *Layer) { l.Experts = 4 }, "Layer.TopK", "Layer.Experts"},
		{"H not x8", base, func(l *Layer) { l.Hidden = 2044 }, "Layer.Hidden", "multiple of 8"},
		{"I mxfp8", base, func(l *Layer) { l.Intermediate = 776; l.Precision = MXFP8 }, "Layer.Intermediate", "multiple of 32"},
		{"shared I without experts", base, func(l *Layer) { l.SharedIntermediate = 64 }, "Layer.SharedIntermediate", "must be 0"},
		{"gate without shared", base, func(l *Layer) { l.SharedGate = true }, "Layer.SharedGate", "SharedExperts > 0"},
		{"negative shared", base, func(l *Layer) { l.SharedExperts = -1 }, "Layer.SharedExperts", "0..64"},
		{"shared I zero", shared, func(l *Layer) { l.SharedIntermediate = 0 }, "Layer.SharedIntermediate", "> 0"},
		{"shared gpt-oss", shared, func(l *Layer) { l.SharedActivation = GPTOSS }, "Layer.SharedActivation", "swiglu or clamped"},
		{"shared clamp no limit", shared, func(l *Layer) { l.SharedActivation = ClampedSwiGLU }, "Layer.SharedSwiGLULimit", "> 0"},
		{"limit on swiglu", base, func(l *Layer) { l.SwiGLULimit = 7 }, "Layer.SwiGLULimit", "must be 0"},
		{"clamp without limit", base, func(l *Layer) { l.Activation = ClampedSwiGLU }, "Layer.SwiGLULimit", "> 0"},
		{"gpt-oss without alpha", base, func(l *Layer) { l.Activation = GPTOSS; l.SwiGLULimit = 7 }, "Layer.GPTOSSAlpha", "> 0"},
		{"alpha on swiglu", base, func(l *Layer) { l.GPTOSSAlpha = 1.7 }, "Layer.GPTOSSAlpha", "gpt-oss"},
		{"bad activation", base, func(l *Layer) { l.Activation = 9 }, "Layer.Activation", "swiglu"},
		{"bad precision", base, func(l *Layer) { l.Precision = -1 }, "Layer.Precision", "bf16 or mxfp8"},
		{"bad routing", base, func(l *Layer) { l.Routing = 5 }, "Layer.Routing", "ids or map"},
		{"bad storage", base, func(l *Layer) { l.Storage = 5 }, "Layer.Storage", "grouped"},
		{"bad main grad", base, func(l *Layer) { l.MainGrad = 5 }, "Layer.MainGrad", "fp32 or bf16"},
		{"bad score", base, func(l *Layer) { l.Router.Score = 4 }, "Layer.Router.Score", "softmax"},
		{"negative scale", base, func(l *Layer) { l.Router.Scale = -2 }, "Layer.Router.Scale", ">= 0"},
		{"groups not dividing", base, func(l *Layer) { l.Router.Groups = 3; l.Router.TopKGroups = 1 }, "Layer.Router.Groups", "divide"},
		{"topk groups", shared, func(l *Layer) { l.Router.TopKGroups = 9 }, "Layer.Router.TopKGroups", "1..Layer.Router.Groups"},
		{"too few kept", shared, func(l *Layer) { l.Router.TopKGroups = 0 }, "Layer.Router.TopKGroups", "1..Layer.Router.Groups"},
	})
	if err := (Layer{}).Validate(); err == nil {
		t.Error("zero Layer validates")
	}
}

func TestScheduleValidateErrors(t *testing.T) {
	l, _ := Preset("qwen3-30b-a3b")
	def := func(tg target.Target) Schedule { s, _ := DefaultSchedule(l, tg); return s }
	cases := []struct {
		name  string
		s     Schedule
		edit  func(*Schedule)
		field string
		rule  string
	}{
		{"stages", def(target.SM80), func(s *Schedule) { s.Stages = 1 }, "Schedule.Stages", "2..16"},
		{"cluster on sm_80", def(target.SM80), func(s *Schedule) { s.Cluster = 2 }, "Schedule.Cluster", "or 2 on sm_90a"},
		{"cluster on sm_100a", def(target.SM100a), func(s *Schedule) { s.Cluster = 2 }, "Schedule.Cluster", "the sm_100a engine builds no clusters yet"},
		{"grid without persistent", def(target.SM90a), func(s *Schedule) { s.Persistent, s.GridCTAs, s.GroupM = false, 100, 0 }, "Schedule.GridCTAs", "one CTA per tile"},
		{"negative grid", def(target.SM90a), func(s *Schedule) { s.GridCTAs = -1 }, "Schedule.GridCTAs", "must be in 0.."},
		{"sm80 M", def(target.SM80), func(s *Schedule) { s.FC1.M = 120 }, "Schedule.FC1.M", "m16n8k16"},
		{"sm80 K", def(target.SM80), func(s *Schedule) { s.FC2.K = 40 }, "Schedule.FC2.K", "m16n8k16"},
		{"sm80 producer", def(target.SM80), func(s *Schedule) { s.Warps.Producer = 1 }, "Schedule.Warps", "no producer"},
		{"sm80 smem", def(target.SM80), func(s *Schedule) { s.FC1 = Tile{256, 256, 64}; s.Stages = 4 }, "Schedule.FC1", "shared memory"},
		{"fc1 N odd half", def(target.SM90a), func(s *Schedule) { s.FC1.N = 200 }, "Schedule.FC1.N", "multiple of 16"},
		{"sm90 N too big", def(target.SM90a), func(s *Schedule) { s.FC2.N = 264 }, "Schedule.FC2.N", "up to 256"},
		{"sm90 M per warpgroups", def(target.SM90a), func(s *Schedule) { s.FC1.M = 64 }, "Schedule.FC1.M", "per consumer warpgroup"},
		{"sm90 K swizzle", def(target.SM90a), func(s *Schedule) { s.FC1.K = 48 }, "Schedule.FC1.K", "128-byte"},
		{"sm90 producer", def(target.SM90a), func(s *Schedule) { s.Warps.Producer = 1 }, "Schedule.Warps.Producer", "warpgroup"},
		{"sm90 consumers", def(target.SM90a), func(s *Schedule) { s.Warps.MMA = 6 }, "Schedule.Warps.MMA", "warpgroups"},
		{"sm90 smem", def(target.SM90a), func(s *Schedule) { s.Stages = 8 }, "Schedule.FC1", "shared memory"},
		{"sm100 M", def(target.SM100a), func(s *Schedule) { s.FC2.M = 256 }, "Schedule.FC2.M", "128"},
		{"sm100 N", def(target.SM100a), func(s *Schedule) { s.FC2.N = 264 }, "Schedule.FC2.N", "multiple of 16"},
		{"sm100 producer", def(target.SM100a), func(s *Schedule) { s.Warps.Producer = 4 }, "Schedule.Warps.Producer", "one warp"},
		{"sm100 mma warps", def(target.SM100a), func(s *Schedule) { s.Warps.MMA = 2 }, "Schedule.Warps.MMA", "one warp"},
		{"sm100 epilogue", def(target.SM100a), func(s *Schedule) { s.Warps.Epilogue = 3 }, "Schedule.Warps.Epilogue", "multiple of 4"},
		{"too many warps", def(target.SM100a), func(s *Schedule) { s.Warps.Epilogue = 32 }, "Schedule.Warps", "1024 threads"},
		{"bad target", def(target.SM80), func(s *Schedule) { s.Target = 3 }, "Schedule.Target", "sm_80"},
		{"group-m on sm_80", def(target.SM80), func(s *Schedule) { s.GroupM = 8 }, "Schedule.GroupM", "one CTA per tile"},
		{"negative group-m", def(target.SM90a), func(s *Schedule) { s.GroupM = -1 }, "Schedule.GroupM", "0.."},
		{"expand on bf16", def(target.SM90a), func(s *Schedule) { s.MXGemm = MXGemmExpand }, "Schedule.MXGemm", "mxfp8 layer"},
		{"bad wgrad", def(target.SM90a), func(s *Schedule) { s.WGrad = 7 }, "Schedule.WGrad", "wgmma-ws"},
	}
	for _, c := range cases {
		s := c.s
		c.edit(&s)
		wantFieldErr(t, c.name, s.Validate(l), c.field, c.rule)
	}
	// mxfp8 on sm_100a: K must hold whole 128-element scale tiles and the
	// scales must fit TMEM.
	m := l
	m.Precision = MXFP8
	s, err := DefaultSchedule(m, target.SM100a)
	if err != nil {
		t.Fatal(err)
	}
	s.FC1.K = 64
	wantFieldErr(t, "mxfp8 K", s.Validate(m), "Schedule.FC1.K", "128")
	s, _ = DefaultSchedule(m, target.SM100a)
	s.Stages = 16
	s.FC1.K, s.FC2.K = 128, 128
	if err := s.Validate(m); err == nil || !strings.Contains(err.Error(), "TMEM") && !strings.Contains(err.Error(), "shared memory") {
		t.Errorf("16 mxfp8 stages: %v", err)
	}
	// Expansion plans bf16 tiles of half the K block, without scales.
	s, _ = DefaultSchedule(m, target.SM90a)
	s.MXGemm, s.Items = MXGemmExpand, ItemsFixed
	if err := s.Validate(m); err == nil || !strings.Contains(err.Error(), "Schedule.Variant") {
		t.Errorf("mxfp8 expand with promote's decode variant (8 stages of 32x128 tiles): %v, want a refusal", err)
	}
	s = s.WithMXGemm(MXGemmExpand) // drops the variant, as mokc's --mx-gemm flag does
	if err := s.Validate(m); err != nil {
		t.Fatalf("mxfp8 expand: %v", err)
	}
	if p, err := s.GemmSmem(m, s.FC1, true); err != nil || p.ScaleBytes != 0 || p.K != s.FC1.K/2 || p.Staged ||
		!p.E4M3Staging || p.E4M3Offset != (s.FC1.M+s.FC1.N)*128 || p.StageBytes < p.E4M3Offset+(s.FC1.M+s.FC1.N)*64 {
		t.Errorf("mxfp8 expand's FC1 smem (bf16 tiles, then the e4m3 tiles): %+v, %v", p, err)
	}
	s.FC2.K = 256
	wantFieldErr(t, "expand K", s.Validate(m), "Schedule.FC2.K", "must be 128")
	// The register-fed GEMMs: B tiles of 256 rows and 3 stages from the
	// default, the bf16 token tile beside e4m3 weights (the operand swap's
	// plan); 128-row B tiles need one consumer warpgroup; bf16 layers and
	// per-expert weights are refused.
	s, _ = DefaultSchedule(m, target.SM90a)
	s = s.WithMXGemm(MXGemmRegFed)
	if s.Variant == nil || !s.Variant.MXOnly || s.FC1 != (Tile{128, 256, 128}) || s.FC2 != (Tile{128, 256, 128}) || s.Stages != 3 {
		t.Errorf("mxfp8 regfed schedule (the decode variant kept): %v", s)
	}
	if v, _ := s.VariantSchedule(); v.MXGemm != MXGemmPromote {
		t.Errorf("mxfp8 regfed: the decode variant runs %v, want promote", v.MXGemm)
	}
	if err := s.Validate(m); err != nil {
		t.Fatalf("mxfp8 regfed: %v", err)
	}
	if p, err := s.GemmSmem(m, s.FC1, true); err != nil || !p.SwapAB || !p.ABF16 || p.A.Bytes() != p.B.Bytes() { // 128 bf16 rows, 256 e4m3 ones
		t.Errorf("mxfp8 regfed's FC1 smem (bf16 token tile, e4m3 weights): %+v, %v", p, err)
	}
	r := s
	r.FC2.N = 128
	wantFieldErr(t, "regfed 128-row B tile", r.Validate(m), "Schedule.FC2", "128x256x128 with 8 MMA warps (the default), 64x128x128 with 4 MMA warps")
	r = s
	r.FC1.N = 192
	wantFieldErr(t, "regfed 192-row B tile", r.Validate(m), "Schedule.FC1.N", "64, 128 or 256")
	r = s
	r.FC1, r.FC2, r.Warps.MMA = Tile{64, 64, 128}, Tile{64, 64, 128}, 4 // FC1's gate/up halves: 32 rows each
	r.FC2Large = LargeRowsTile{}                                        // its 192 rows need 8 MMA warps
	wantFieldErr(t, "regfed 64-row B tile of gate/up halves", r.Validate(m), "Schedule.FC1.N", "must be 128 or 256")
	if !m.GateUpInterleaved {
		mi := m
		mi.GateUpInterleaved = true
		if err := r.Validate(mi); err != nil {
			t.Errorf("regfed 64x64x128 with interleaved gate/up rows: %v", err)
		}
	}
	r = s
	r.Variant = &TileVariant{Name: "big", FC1: s.FC1, FC2: s.FC2, Stages: 3, MMAWarps: 8, MinRows: 1, MaxRows: 8}
	wantFieldErr(t, "regfed with a variant for every GEMM", r.Validate(m), "Schedule.Variant", "must be MXOnly")
	bs, _ := DefaultSchedule(l, target.SM90a)
	wantFieldErr(t, "regfed on bf16", bs.WithMXGemm(MXGemmRegFed).Validate(l), "Schedule.MXGemm", "regfed needs an mxfp8 layer")
	pe := m
	pe.Storage = PerExpertWeights
	wantFieldErr(t, "regfed per expert", s.Validate(pe), "Schedule.MXGemm", "grouped weights")
	if k, err := ParseMXGemmKind("regfed"); err != nil || k != MXGemmRegFed || k.String() != "regfed" {
		t.Errorf("ParseMXGemmKind(regfed) = %v, %v", k, err)
	}
	if k, err := ParseMXGemmKind("RegFed"); err != nil || k != MXGemmRegFed {
		t.Errorf("ParseMXGemmKind(RegFed) = %v, %v", k, err)
	}
	// The operand swap: 32-row tiles only in an MXOnly variant of an mxfp8
	// layer, with 4 MMA warps, grouped weights and whole 64-row slices;
	// interleaved gate/up layers validate them but default to 64 rows.
	// (Under promote: the default's regfed keeps the same variant.)
	sw, err := DefaultScheduleMX(m, target.SM90a, MXGemmPromote)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := DefaultSchedule(m, target.SM90a); d.MXGemm != MXGemmRegFed || d.Variant == nil || *d.Variant != *sw.Variant {
		t.Errorf("mxfp8 sm_90a default: %v, want regfed with promote's decode variant %v", d, sw.Variant)
	}
	if v := sw.Variant; v == nil || v.FC1.M != 32 || v.FC2.M != 32 || v.Stages != 8 || v.MMAWarps != 4 || !v.MXOnly {
		t.Fatalf("mxfp8 sm_90a decode variant: %+v, want 32x128 tiles, 8 stages, 4 MMA warps, MXOnly", v)
	}
	perExpert, interleaved := m, m
	perExpert.Storage = PerExpertWeights
	interleaved.GateUpInterleaved = true
	for _, c := range []struct {
		name string
		l    Layer
		edit func(s *Schedule)
		want string
	}{
		{"32 rows outside a variant", m, func(s *Schedule) { s.FC1.M = 32 }, "TileVariant with MXOnly"},
		{"variant not MXOnly", m, func(s *Schedule) { s.Variant.MXOnly = false }, "TileVariant with MXOnly"},
		{"bf16 layer", l, func(s *Schedule) {}, "MXOnly replaces the tiles of the mxfp8 GEMMs only"},
		{"bf16 layer, not MXOnly", l, func(s *Schedule) { s.Variant.MXOnly = false }, "TileVariant with MXOnly"},
		{"FC1 and FC2 rows differ", m, func(s *Schedule) { s.Variant.FC2.M = 64 }, "same rows"},
		{"expand", m, func(s *Schedule) { s.MXGemm, s.Items = MXGemmExpand, ItemsFixed }, "--mx-gemm promote only"},
		{"8 warps", m, func(s *Schedule) { s.Variant.MMAWarps = 8 }, "one consumer warpgroup"},
		{"per-expert weights", perExpert, func(s *Schedule) {}, "grouped weights"},
		{"FC1 half of 32 rows", m, func(s *Schedule) { s.Variant.FC1.N = 64 }, "multiple of 128"},
		{"FC2 of 96 rows", m, func(s *Schedule) { s.Variant.FC2.N = 96 }, "multiple of 64"},
	} {
		s := sw
		v := *sw.Variant
		s.Variant = &v
		c.edit(&s)
		if err := s.Validate(c.l); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("swap %s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := sw.Validate(interleaved); err != nil {
		t.Errorf("32-row variant of an interleaved layer: %v", err)
	}
	if s, err := DefaultSchedule(interleaved, target.SM90a); err != nil || s.Variant == nil || s.Variant.FC1.M != 32 || s.Variant.Stages != 8 {
		t.Errorf("interleaved mxfp8 layer's decode variant: %+v, %v, want 32-row tiles, 8 stages (the swap)", s.Variant, err)
	}
	// A schedule is validated with its layer.
	bad := l
	bad.TopK = 0
	wantFieldErr(t, "layer through schedule", def(target.SM90a).Validate(bad), "Layer.TopK", "> 0")
}

func TestParseTarget(t *testing.T) {
	for in, want := range map[string]target.Target{"sm_80": target.SM80, "90a": target.SM90a, " SM_100A ": target.SM100a} {
		if got, err := target.Parse(in); err != nil || got != want {
			t.Errorf("target.Parse(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"sm_90", "sm_100", "", "sm_89"} {
		if _, err := target.Parse(bad); err == nil {
			t.Errorf("target.Parse(%q): want an error", bad)
		}
	}
	for _, tg := range target.All() {
		if back, _ := target.Parse(tg.String()); back != tg {
			t.Errorf("round trip of %v", tg)
		}
	}
	if target.SM80.SharedMemoryLimit() != 166912 || target.SM90a.SharedMemoryLimit() != 232448 || target.SM100a.SharedMemoryLimit() != 232448 {
		t.Error("shared memory limits differ from 163 KB / 227 KB")
	}
}

func TestEnumStrings(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{SwiGLU.String(), "swiglu"}, {GPTOSS.String(), "gpt-oss"}, {MXFP8.String(), "mxfp8"},
		{RoutingMap.String(), "map"}, {PerExpertWeights.String(), "per-expert"}, {GradBF16.String(), "bf16"},
		{ScoreSqrtSoftplus.String(), "sqrt-softplus"}, {target.SM100a.String(), "sm_100a"}, {Activation(9).String(), "Activation(9)"},
		{target.Target(-1).String(), "Target(-1)"},
	} {
		if c.got != c.want {
			t.Errorf("%q, want %q", c.got, c.want)
		}
	}
	l, _ := Preset("qwen2-57b-a14b")
	if s := l.String(); !strings.Contains(s, "H=3584") || !strings.Contains(s, "shared=1x20480+sigmoid-gate") {
		t.Errorf("Layer.String() = %q", s)
	}
}

// TestValidateNeverPanics feeds random field values, including extreme
// ones, to the validators and the default schedule.
func TestValidateNeverPanics(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func() int {
		v := []int{0, -1, 1, 2, 3, 4, 8, 16, 64, 128, 192, 256, 2880, 1 << 20, 1 << 31, math.MaxInt, math.MinInt}
		return v[rng.IntN(len(v))]
	}
	pf := func() float64 {
		v := []float64{0, -1, 1.5, 7, math.NaN(), math.Inf(1), math.Inf(-1)}
		return v[rng.IntN(len(v))]
	}
	for i := 0; i < 20000; i++ {
		l := Layer{Hidden: pick(), Intermediate: pick(), Experts: pick(), TopK: pick(),
			SharedExperts: pick(), SharedIntermediate: pick(), SharedGate: rng.IntN(2) == 0,
			SharedActivation: Activation(pick() % 5), SharedSwiGLULimit: pf(),
			Activation: Activation(pick() % 5), SwiGLULimit: pf(), GPTOSSAlpha: pf(),
			Precision: Precision(pick() % 3), Routing: RoutingForm(pick() % 3), Storage: WeightStorage(pick() % 3),
			MainGrad: GradDType(pick() % 3),
			Router:   Router{Score: RouterScore(pick() % 4), Scale: pf(), Groups: pick(), TopKGroups: pick()}}
		if i%2 == 0 {
			l, _ = Preset(Presets()[i%len(Presets())])
		}
		_ = l.Validate()
		_ = l.String()
		s := Schedule{Target: target.Target(pick() % 4), FC1: Tile{pick(), pick(), pick()}, FC2: Tile{pick(), pick(), pick()},
			Stages: pick(), Warps: WarpRoles{pick(), pick(), pick()}, Persistent: rng.IntN(2) == 0, GridCTAs: pick(), Cluster: pick()}
		_ = s.Validate(l)
		_ = s.String()
		for _, tg := range target.All() {
			if d, err := DefaultSchedule(l, tg); err == nil && d.Validate(l) != nil {
				t.Fatalf("DefaultSchedule returned an invalid schedule for %v", l)
			}
		}
	}
}

// The dispatch and item kinds parse from their names in any case and
// print them back; the zero value is the first (the dispatch queue, the
// fixed walk); anything else is refused by name, and a schedule with the
// other kind says so in its text (the default sm_90a schedule's queue of
// work items too).
func TestDispatchKind(t *testing.T) {
	testKind(t, ParseDispatchKind, []DispatchKind{DispatchQueue, DispatchOps}, "four",
		func(s *Schedule, k DispatchKind) { s.Dispatch = k }, "dispatch", "dispatch ops")
}

func TestItemsKind(t *testing.T) {
	testKind(t, ParseItemsKind, []ItemsKind{ItemsFixed, ItemsQueue}, "dynamic",
		func(s *Schedule, k ItemsKind) { s.Items = k }, "", "GEMM items from a queue")
	// The queue walk is sm_90a's (its default with grouped weights), not
	// the expansion's; its item ring counts in the planned shared memory.
	l, err := Preset("qwen3-30b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range target.All() {
		s, err := DefaultSchedule(l, tg)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]ItemsKind{true: ItemsQueue, false: ItemsFixed}[tg == target.SM90a]; s.Items != want {
			t.Errorf("%v: the default schedule's walk %v, want %v", tg, s.Items, want)
		}
		s.Items = ItemsFixed
		fixed, err := s.GemmSmem(l, s.FC1, true)
		if err != nil {
			t.Fatal(err)
		}
		s.Items = ItemsQueue
		err = s.Validate(l)
		if (err == nil) != (tg == target.SM90a) || err != nil && !strings.Contains(err.Error(), "Schedule.Items") {
			t.Errorf("%v: Validate of the queue walk: %v", tg, err)
		}
		if tg != target.SM90a {
			continue
		}
		queue, err := s.GemmSmem(l, s.FC1, true)
		if err != nil || queue.Bytes <= fixed.Bytes || queue.ItemSlots != layouts.ItemSlots(s.Stages) {
			t.Errorf("%v: the queue's plan %+v (%v) beside the fixed walk's %d bytes", tg, queue, err, fixed.Bytes)
		}
	}
	mx := l
	mx.Precision = MXFP8
	s, err := DefaultSchedule(mx, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	s.MXGemm, s.Variant, s.Items = MXGemmExpand, nil, ItemsQueue
	if err := s.Validate(mx); err == nil || !strings.Contains(err.Error(), "Schedule.Items") {
		t.Errorf("the queue walk with the expansion: %v", err)
	}
	if e := s.WithMXGemm(MXGemmExpand); e.Items != ItemsFixed || e.Validate(mx) != nil {
		t.Errorf("WithMXGemm(expand): the walk %v (%v), want the fixed one", e.Items, e.Validate(mx))
	}
	// FixedItemsWhereNeeded: the fixed walk where another setting needs
	// it, the queue kept elsewhere; each result valid.
	def, err := DefaultSchedule(l, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	perExpert := l
	perExpert.Storage = PerExpertWeights
	for _, c := range []struct {
		name string
		l    Layer
		edit func(*Schedule)
		want ItemsKind
	}{
		{"default", l, func(*Schedule) {}, ItemsQueue},
		{"group-m 1", l, func(s *Schedule) { s.GroupM = 1 }, ItemsQueue},
		{"cluster 2", l, func(s *Schedule) { s.Cluster = 2 }, ItemsFixed},
		{"chain", l, func(s *Schedule) { s.Chain = ChainFC }, ItemsFixed},
		{"two blocks per SM", l, func(s *Schedule) {
			s.BlocksPerSM, s.Warps.MMA, s.FC1, s.FC2, s.Variant = 2, 4, Tile{64, 192, 64}, Tile{64, 192, 64}, nil
		}, ItemsFixed},
		{"per-expert weights", perExpert, func(*Schedule) {}, ItemsFixed},
	} {
		s := def
		c.edit(&s)
		s = s.FixedItemsWhereNeeded(c.l)
		if s.Items != c.want {
			t.Errorf("FixedItemsWhereNeeded, %s: %v, want %v", c.name, s.Items, c.want)
		}
		if err := s.Validate(c.l); err != nil {
			t.Errorf("FixedItemsWhereNeeded, %s: %v", c.name, err)
		}
	}
	// The queue with per-expert weights is refused (never run on a GPU).
	if err := def.Validate(perExpert); err == nil || !strings.Contains(err.Error(), "Schedule.Items") || !strings.Contains(err.Error(), "grouped weights") {
		t.Errorf("the queue walk with per-expert weights: %v", err)
	}
}

func TestChainKind(t *testing.T) {
	testKind(t, ParseChainKind, []ChainKind{ChainOff, ChainFC}, "fc2-fc1",
		func(s *Schedule, k ChainKind) { s.Chain = k }, "chain", "chain fc1-fc2")
	// The chained kernel is sm_90a's, for layers with grouped weights,
	// the fixed walk.
	l, err := Preset("qwen3-30b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range target.All() {
		s, err := DefaultSchedule(l, tg)
		if err != nil {
			t.Fatal(err)
		}
		s.Chain, s.Items = ChainFC, ItemsFixed
		if err := s.Validate(l); (err == nil) != (tg == target.SM90a) {
			t.Errorf("%v: Validate with the chain: %v", tg, err)
		}
	}
	s, err := DefaultSchedule(l, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	s.Chain = ChainFC
	s.Items = ItemsQueue
	if err := s.Validate(l); err == nil || !strings.Contains(err.Error(), "Schedule.Chain") {
		t.Errorf("the chain with the queue walk: %v", err)
	}
	s.Items, s.GridCTAs = ItemsFixed, 264
	if err := s.Validate(l); err == nil || !strings.Contains(err.Error(), "resident") {
		t.Errorf("the chain with 264 CTAs: %v", err)
	}
	s.GridCTAs = 0
	saved := l
	saved.SaveFC1 = true
	if err := s.Validate(saved); err == nil || !strings.Contains(err.Error(), "SaveFC1") {
		t.Errorf("the chain with SaveFC1: %v", err)
	}
	s.Chain = ChainKind(7)
	if err := s.Validate(l); err == nil || !strings.Contains(err.Error(), "Schedule.Chain") {
		t.Errorf("chain kind 7: %v", err)
	}
	mx := l
	mx.Precision = MXFP8
	if s, err := DefaultSchedule(mx, target.SM90a); err != nil {
		t.Fatal(err)
	} else if s.Chain, s.Items = ChainFC, ItemsFixed; s.FC2LargeWhereValid(mx).Validate(mx) != nil {
		t.Errorf("the chain on an mxfp8 layer (its decode tiles): %v", s.FC2LargeWhereValid(mx).Validate(mx))
	}
}

// testKind checks a schedule kind: parse of every kind's upper-cased
// name gives it back, bad is refused with its name in the error, kinds[0]
// is the zero value, the default schedule's text holds no word quiet (none when quiet is empty) and
// the schedule set to kinds[1] holds loud.
func testKind[K interface {
	comparable
	fmt.Stringer
}](t *testing.T, parse func(string) (K, error), kinds []K, bad string, set func(*Schedule, K), quiet, loud string) {
	t.Helper()
	for _, k := range kinds {
		got, err := parse(strings.ToUpper(k.String()))
		if err != nil || got != k {
			t.Errorf("parse(%q) = %v, %v", strings.ToUpper(k.String()), got, err)
		}
	}
	if _, err := parse(bad); err == nil || !strings.Contains(err.Error(), `"`+bad+`"`) {
		t.Errorf("parse(%s): %v", bad, err)
	}
	var zero K
	if zero != kinds[0] {
		t.Errorf("zero %T is %v", zero, zero)
	}
	l, err := Preset("qwen3-30b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	s, err := DefaultSchedule(l, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	if quiet != "" && strings.Contains(s.String(), quiet) {
		t.Errorf("default schedule %q says %q", s, quiet)
	}
	set(&s, kinds[1])
	if !strings.Contains(s.String(), loud) {
		t.Errorf("schedule %q does not say %q", s, loud)
	}
}

// The register-fed tiles of 192 and 256 token rows (192x128x128 with three
// stages, 256x128x128 with two; 8 MMA warps) are valid for an mxfp8
// forward without shared experts on sm_90a and refused with shared
// experts, with 4 MMA warps, for bf16 and for gate/up halves with biases;
// other token rows past 128 are refused.
func TestRegFedWideTokenRows(t *testing.T) {
	for _, c := range []struct {
		name      string
		precision Precision
		mma       int
		ok        bool
	}{
		{"qwen3-30b-a3b", MXFP8, 8, true},
		{"mixtral-8x7b", MXFP8, 8, true},
		{"deepseek-v2-lite", MXFP8, 8, false}, // shared experts: their bf16 GEMMs take the tile too
		{"qwen3-30b-a3b", MXFP8, 4, false},
		{"qwen3-30b-a3b", BF16, 8, false},
	} {
		l, err := Preset(c.name)
		if err != nil {
			t.Fatal(err)
		}
		l.Precision = c.precision
		for _, rows := range []int{192, 256, 160} {
			s, err := DefaultSchedule(l, target.SM90a)
			if err != nil {
				t.Fatal(err)
			}
			tile, stages := Tile{rows, 128, 128}, 3
			if rows == 256 {
				stages = 2 // 256's three stages exceed the shared memory
			}
			s.FC1, s.FC2, s.Stages, s.Warps.MMA, s.Variant = tile, tile, stages, c.mma, nil
			if c.precision == BF16 {
				s.FC1.K, s.FC2.K = 64, 64
			}
			ok := c.ok && rows != 160
			if err := s.Validate(l); (err == nil) != ok {
				t.Errorf("%s %v, %d MMA warps, %v: %v, want valid %t", c.name, c.precision, c.mma, tile, err, ok)
			}
			if ok { // not in CTA pairs nor in the chained kernel
				for _, edit := range []func(*Schedule){
					func(s *Schedule) { s.Cluster, s.Items = 2, ItemsFixed },
					func(s *Schedule) { s.Chain, s.Items = ChainFC, ItemsFixed },
				} {
					s := s
					edit(&s)
					if err := s.Validate(l); err == nil || !strings.Contains(err.Error(), "at most 128 token rows") {
						t.Errorf("%s, %v, cluster %d, chain %v: %v, want a refusal", c.name, tile, s.Cluster, s.Chain, err)
					}
				}
			}
			if ok && !l.GateUpInterleaved { // halves with biases: refused
				l := l
				l.Biases = true
				if err := s.Validate(l); err == nil {
					t.Errorf("%s with biases, %v: valid, want a refusal", c.name, tile)
				}
			}
		}
	}
}

// TestFC2Large checks the register-fed mxfp8 FC2's tile for many rows per
// expert: the default's (192x128x128 in 120..192 mean rows per expert and
// from 320 on) on
// sm_90a mxfp8 layers, with shared experts too (their bf16 GEMMs keep FC2's
// tile), none on bf16 layers, other targets or other MXFP8 GEMM kinds, and
// the refusals of Validate, CTA pairs included on a layer with shared
// experts.
func TestFC2Large(t *testing.T) {
	preset := func(name string, p Precision) Layer {
		l, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		l.Precision = p
		return l
	}
	want := LargeRowsTile{Tile: Tile{192, 128, 128}, MinRows: 320, MidRows: RowsBand{120, 192}}
	for _, c := range []struct {
		model  string
		p      Precision
		tg     target.Target
		set    bool
		first  int64    // MinTokens
		mid    [2]int64 // MidRows.Tokens
		string string   // Where
	}{
		{"olmoe-1b-7b", MXFP8, target.SM90a, true, 2560, [2]int64{960, 1536}, // 64 experts, top-8
			"in 120..192 mean rows per expert (T = 960..1536) and from 320 mean rows per expert on (T >= 2560)"},
		{"mixtral-8x7b", MXFP8, target.SM90a, true, 1280, [2]int64{480, 768}, ""},    // 8 experts, top-2
		{"gpt-oss-20b", MXFP8, target.SM90a, true, 2560, [2]int64{960, 1536}, ""},    // 32 experts, top-4 (FC2 has no gate/up halves)
		{"qwen3-30b-a3b", MXFP8, target.SM90a, true, 5120, [2]int64{1920, 3072}, ""}, // 128 experts, top-8
		{"qwen2-57b-a14b", MXFP8, target.SM90a, true, 2560, [2]int64{960, 1536}, ""}, // 64 experts, top-8, shared experts (their GEMMs keep FC2's tile)
		{"olmoe-1b-7b", BF16, target.SM90a, false, 0, [2]int64{}, ""},                // bf16
		{"olmoe-1b-7b", MXFP8, target.SM100a, false, 0, [2]int64{}, ""},              // not sm_90a
	} {
		l := preset(c.model, c.p)
		s, err := DefaultSchedule(l, c.tg)
		if err != nil {
			t.Fatalf("%s %v %v: %v", c.model, c.p, c.tg, err)
		}
		lo, hi := s.FC2Large.MidRows.Tokens(l.TopK, l.Experts)
		if s.FC2Large.Set() != c.set || c.set && (s.FC2Large != want || s.FC2Large.MinTokens(l.TopK, l.Experts) != c.first || [2]int64{lo, hi} != c.mid) {
			t.Errorf("%s %v %v: FC2Large %+v (first T %d, band T %d..%d), want set %v, first T %d, band T %v", c.model, c.p, c.tg, s.FC2Large,
				s.FC2Large.MinTokens(l.TopK, l.Experts), lo, hi, c.set, c.first, c.mid)
		}
		if w := s.FC2Large.Where(l.TopK, l.Experts); c.string != "" && w != c.string {
			t.Errorf("%s: Where %q, want %q", c.model, w, c.string)
		}
		if !c.set {
			continue
		}
		if v, ok := s.LargeSchedule(); !ok || v.FC2 != want.Tile || v.FC1 != s.FC1 || v.Variant != nil || v.FC2Large.Set() {
			t.Errorf("%s: LargeSchedule %v, %v", c.model, v, ok)
		}
		if v, _ := s.VariantSchedule(); v.FC2Large.Set() {
			t.Errorf("%s: the variant's schedule keeps FC2Large", c.model)
		}
		if k := s.WithMXGemm(MXGemmPromote); k.FC2Large.Set() {
			t.Errorf("%s: WithMXGemm(promote) keeps FC2Large", c.model)
		}
	}
	l := preset("olmoe-1b-7b", MXFP8)
	s, err := DefaultSchedule(l, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	r := s
	r.FC2Large.MinRows, r.FC2Large.MidRows = 0, RowsBand{}
	wantFieldErr(t, "FC2Large without MinRows or a band", r.Validate(l), "Schedule.FC2Large", "MinRows >= 1 or a band")
	r = s
	r.FC2Large.MinRows = -1
	wantFieldErr(t, "FC2Large with MinRows -1", r.Validate(l), "Schedule.FC2Large", "MinRows >= 1 or a band")
	r = s
	r.FC2Large.MinRows, r.FC2Large.MidRows = s.Variant.MaxRows, RowsBand{}
	wantFieldErr(t, "FC2Large inside the variant's range", r.Validate(l), "Schedule.FC2Large", "above the variant's")
	// The band: within 1 <= Lo <= Hi, below MinRows, above the variant.
	for _, c := range []struct {
		b    RowsBand
		rule string
	}{
		{RowsBand{0, 100}, "1 <= LO <= HI"},
		{RowsBand{200, 120}, "1 <= LO <= HI"},
		{RowsBand{120, 321}, "must end at or below the 320 mean rows per expert"},
		{RowsBand{s.Variant.MaxRows, 200}, `the GEMM variant "decode", whose tiles run there: the band must start above`},
	} {
		r = s.WithFC2LargeMid(c.b)
		wantFieldErr(t, "FC2Large with the band "+c.b.String(), r.Validate(l), "Schedule.FC2Large.MidRows", c.rule)
	}
	// A band may end at MinRows (the two ranges then meet) and be one row
	// wide where a T has that many rows (olmoe-1b-7b: T = 968 has 121),
	// but not where no T has (deepseek-v2-lite, top-6 of 64 experts:
	// T*6/64 jumps from 120.94 to 121.03).
	for _, b := range []RowsBand{{120, 320}, {121, 121}} {
		if err := s.WithFC2LargeMid(b).Validate(l); err != nil {
			t.Errorf("olmoe-1b-7b with the band %v: %v", b, err)
		}
	}
	v2 := preset("deepseek-v2-lite", MXFP8)
	if d, err := DefaultSchedule(v2, target.SM90a); err != nil {
		t.Fatal(err)
	} else {
		wantFieldErr(t, "a band without a T", d.WithFC2LargeMid(RowsBand{121, 121}).Validate(v2), "Schedule.FC2Large.MidRows", "holds no token count of this layer")
	}
	// A variant reaching into the band: FC2LargeWhereValid drops the band
	// alone.
	r = s
	r.Variant = new(*s.Variant)
	r.Variant.MaxRows = 150
	if w := r.FC2LargeWhereValid(l); w.FC2Large.MinRows != 320 || w.FC2Large.MidRows.Set() || w.Validate(l) != nil {
		t.Errorf("FC2LargeWhereValid with the variant to 150 rows: %v, %v", w.FC2Large, w.Validate(l))
	}
	// The band alone, or the range from MinRows alone.
	if o := s.WithFC2LargeFrom(0); o.FC2Large.MinRows != 0 || o.FC2Large.MidRows != want.MidRows || o.Validate(l) != nil ||
		!strings.Contains(o.String(), "; 120..192 rows per expert: FC2 192x128x128") {
		t.Errorf("the band alone: %v, %v, %s", o.FC2Large, o.Validate(l), o)
	}
	if o := s.WithFC2LargeMid(RowsBand{}); o.FC2Large.MinRows != 320 || o.FC2Large.MidRows.Set() || o.Validate(l) != nil ||
		!strings.Contains(o.String(), "; from 320 rows per expert: FC2 192x128x128") {
		t.Errorf("FC2Large from 320 alone: %v, %v, %s", o.FC2Large, o.Validate(l), o)
	}
	if o := s.WithFC2LargeFrom(0).WithFC2LargeMid(RowsBand{}); o.FC2Large.Set() {
		t.Errorf("neither range keeps %v", o.FC2Large)
	}
	var b RowsBand
	for in, want := range map[string]RowsBand{"120..192": {120, 192}, "off": {}, "0": {}, " 7..9 ": {7, 9}} {
		if err := b.UnmarshalText([]byte(in)); err != nil || b != want {
			t.Errorf("RowsBand %q: %v, %v", in, b, err)
		}
	}
	for _, in := range []string{"120", "120-200", "a..b", "1..2..3", "0..0"} {
		if err := b.UnmarshalText([]byte(in)); err == nil || !strings.Contains(err.Error(), "want LO..HI") {
			t.Errorf("RowsBand %q: %v, want a refusal", in, err)
		}
	}
	r = s.WithMXGemm(MXGemmPromote)
	r.FC1.N, r.FC2.N, r.FC2Large = 128, 128, s.FC2Large // promote's B tiles
	wantFieldErr(t, "FC2Large under promote", r.Validate(l), "Schedule.FC2Large", "register-fed mxfp8 FC2")
	r = s
	r.FC2Large.Tile = Tile{192, 256, 128}
	if err := r.Validate(l); err == nil || !strings.Contains(err.Error(), "Schedule.FC2Large = ") || !strings.Contains(err.Error(), "(FC2 192x256x128 in 120..192 and from 320 rows per expert) is refused") {
		t.Errorf("FC2Large of a 256-row B tile: %v", err)
	}
	r = s
	r.Chain, r.Items = ChainFC, ItemsFixed
	wantFieldErr(t, "FC2Large with the chain", r.Validate(l), "Schedule.FC2Large", "chained FC1 and FC2")
	if d := r.FC2LargeWhereValid(l); d.FC2Large.Set() || d.Validate(l) != nil {
		t.Errorf("FC2LargeWhereValid with the chain: %v, %v", d, d.Validate(l))
	}
	if d := s.FC2LargeWhereValid(l); d != s {
		t.Errorf("FC2LargeWhereValid of the default changed it: %v", d)
	}
	if !strings.Contains(s.String(), "; 120..192 and from 320 rows per expert: FC2 192x128x128") {
		t.Errorf("String: %s", s)
	}
	// WithFC2LargeFrom moves the switch or (0) turns the tile off, on a
	// layer with shared experts too.
	q := preset("qwen2-57b-a14b", MXFP8)
	d, err := DefaultSchedule(q, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	if o := d.WithFC2LargeFrom(512); o.FC2Large.MinRows != 512 || o.Validate(q) != nil {
		t.Errorf("qwen2-57b-a14b with FC2Large from 512 rows: %v, %v", o.FC2Large, o.Validate(q))
	}
	if o := d.WithFC2LargeFrom(0).WithFC2LargeMid(RowsBand{}); o.FC2Large.Set() {
		t.Errorf("WithFC2LargeFrom(0) and no band keeps %v", o.FC2Large)
	}
	// CTA pairs take tiles of at most 128 token rows: the 192-row tile is
	// refused with them whether or not the layer has shared experts.
	c := d
	c.Cluster, c.Items = 2, ItemsFixed
	wantFieldErr(t, "FC2Large with CTA pairs on qwen2-57b-a14b", c.Validate(q), "Schedule.FC2Large", "at most 128 token rows")
	if w := c.FC2LargeWhereValid(q); w.FC2Large.Set() || w.Validate(q) != nil {
		t.Errorf("FC2LargeWhereValid with CTA pairs on qwen2-57b-a14b: %v, %v", w.FC2Large, w.Validate(q))
	}
}

// TestWithLowering: the persistent lowering takes PersistentWGrad where the
// schedule has its target's default weight-gradient kernel, and keeps one
// chosen otherwise; the per-op lowering changes no kernel.
func TestWithLowering(t *testing.T) {
	q, _ := Preset("qwen3-30b-a3b")
	for _, c := range []struct {
		tg    target.Target
		wgrad WGradKernel // before; -1: the default; -2: the default, four MMA warps
		k     LoweringKind
		want  WGradKernel
	}{
		{target.SM90a, -1, LoweringPersistent, WGradWS},
		{target.SM90a, -1, LoweringPerOp, WGradWGMMA},
		{target.SM90a, WGradMMA, LoweringPersistent, WGradMMA},
		{target.SM90a, WGradWS, LoweringPerOp, WGradWS},
		{target.SM80, -1, LoweringPersistent, WGradMMA},
		{target.SM100a, -1, LoweringPersistent, WGradMMA},
		// GEMM blocks of 256 threads (four MMA warps): the row-wise kernel,
		// whose blocks run as virtual blocks of any persistent block
		{target.SM90a, -2, LoweringPersistent, WGradWGMMA},
	} {
		s, err := DefaultSchedule(q, c.tg)
		if err != nil {
			t.Fatal(err)
		}
		if c.wgrad >= 0 {
			s.WGrad = c.wgrad
		}
		if c.wgrad == -2 {
			s.Warps.MMA = 4
		}
		got := s.WithLowering(c.k)
		if got.Lowering != c.k || got.WGrad != c.want {
			t.Errorf("%v, wgrad %v, WithLowering(%v): lowering %v, wgrad %v; want wgrad %v", c.tg, s.WGrad, c.k, got.Lowering, got.WGrad, c.want)
		}
	}
}
