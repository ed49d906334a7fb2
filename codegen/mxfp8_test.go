package codegen

import (
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/moe"
	mptx "github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestQuantizeAssemble lowers the MXFP8 forward's quantizing ops on their
// own (the gather, quantizing bf16 rows of x; quantize_h, f32 rows of h)
// for sm_90a and sm_100a and assembles them.
func TestQuantizeAssemble(t *testing.T) {
	l, err := schedule.Preset("gpt-oss-120b")
	if err != nil {
		t.Fatal(err)
	}
	l.Precision = schedule.MXFP8
	p, err := moe.Forward(l)
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range []target.Target{target.SM90a, target.SM100a} {
		s, err := schedule.DefaultSchedule(l, tg)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"gather", "quantize_h"} { // the gather quantizes the dispatched rows
			q, err := p.Isolate(name)
			if err != nil {
				t.Fatal(err)
			}
			prog, err := Lower(q, s, PerOp)
			if err != nil {
				t.Fatalf("%s %v: %v", name, tg, err)
			}
			text, err := mptx.Compile(prog.Module, tg)
			if err != nil {
				t.Fatalf("%s %v: %v", name, tg, err)
			}
			if !strings.Contains(text, "cvt.rn.satfinite.e4m3x2.f32") || !strings.Contains(text, "div.rn.f32") {
				t.Errorf("%s %v: no e4m3 conversion or exact division", name, tg)
			}
			toolchain.NeedPtxas(t, tg.String())
			if err := toolchain.Assemble(text, tg.String()); err != nil {
				t.Fatalf("%s %v: %v", name, tg, strings.SplitN(err.Error(), "\n", 20))
			}
		}
	}
}

// mxGEMMPTX is what each target's MXFP8 GEMMs put in the PTX: sm_90a's
// e4m3 wgmma (scales promoted per 32-wide block), sm_100a's block-scaled
// tcgen05.mma with the scale-factor tiles copied to TMEM.
var mxGEMMPTX = map[target.Target][]string{
	target.SM90a:  {"k32.f32.e4m3.e4m3"},
	target.SM100a: {"tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X", "tcgen05.cp.cta_group::1.32x128b.warpx4"},
}

// TestMXFP8ForwardAssemble lowers the MXFP8 forward of every preset for
// sm_90a and sm_100a (quantize kernels, the MXFP8 GEMMs, the bf16 shared
// experts at half the K block) and assembles it; sm_80 refuses the layer
// in its schedule.
func TestMXFP8ForwardAssemble(t *testing.T) {
	assembleMXFP8Presets(t, moe.Forward, nil, func(l schedule.Layer) {
		if _, err := schedule.DefaultSchedule(l, target.SM80); err == nil {
			t.Errorf("%s: sm_80 schedule for an mxfp8 layer", l.Name)
		}
	})
}

// assembleMXFP8Presets lowers build's program of every preset with MXFP8
// weights for sm_90a and sm_100a (their default schedules), checks that
// mokc's PTX holds each of want and the target's mxGEMMPTX and that ptxas
// assembles it, then calls more with the layer.
func assembleMXFP8Presets(t *testing.T, build func(schedule.Layer) (*moe.Program, error), want []string, more func(schedule.Layer)) {
	t.Helper()
	for _, name := range schedule.Presets() {
		l, err := schedule.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		l.Precision = schedule.MXFP8
		p, err := build(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range []target.Target{target.SM90a, target.SM100a} {
			s, err := schedule.DefaultSchedule(l, tg)
			if err != nil {
				t.Fatal(err)
			}
			prog, err := Lower(p, s, PerOp)
			if err != nil {
				t.Fatalf("%s %v: %v", name, tg, err)
			}
			text, err := mptx.Compile(prog.Module, tg)
			if err != nil {
				t.Fatalf("%s %v: %v", name, tg, err)
			}
			for _, w := range append(slices.Clip(want), mxGEMMPTX[tg]...) {
				if !strings.Contains(text, w) {
					t.Errorf("%s %v: no %q in the PTX", name, tg, w)
				}
			}
			toolchain.NeedPtxas(t, tg.String())
			if err := toolchain.Assemble(text, tg.String()); err != nil {
				t.Fatalf("%s %v: %v", name, tg, strings.SplitN(err.Error(), "\n", 20))
			}
		}
		more(l)
	}
}

// TestCheckLayer: the engines' MXFP8 support as commands see it before
// compiling: sm_90a and sm_100a build mxfp8 layers, sm_80 refuses them with
// the reason; bf16 layers pass everywhere; and the refusal matches what
// GroupedGEMM says for an MX spec.
func TestCheckLayer(t *testing.T) {
	l, err := schedule.Preset("qwen3-30b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	m := l
	m.Precision = schedule.MXFP8
	for _, tg := range target.All() {
		if err := CheckLayer(l, tg); err != nil {
			t.Errorf("bf16 on %v: %v", tg, err)
		}
		err := CheckLayer(m, tg)
		if (err == nil) != (tg != target.SM80) {
			t.Errorf("mxfp8 on %v: %v", tg, err)
		}
		eng, _ := EngineFor(tg)
		spec := sm90MXCases()[0].spec
		if tg == target.SM100a {
			spec = sm100MXCases()[0].spec
		}
		if _, gerr := eng.GroupedGEMM(ir.NewModule("c"), spec, 1); (gerr == nil) != (err == nil) {
			t.Errorf("%v: CheckLayer %v, GroupedGEMM of an MX spec %v", tg, err, gerr)
		}
	}
}

// TestMXFP8RegFedAssemble lowers the MXFP8 forward and backward of every
// preset for sm_90a with the register-fed GEMMs (the default schedule
// WithMXGemm(MXGemmRegFed)): with the default's decode variant the program
// holds both forms, the e4m3 rows (xs_q) for the variant's promoted
// decode GEMMs in its token range and the bf16 values (xs_rf, gather_rf)
// for the register-fed GEMMs in the rest, each kernel launched in its
// range; without the variant only the register-fed form, no e4m3 wgmma
// and no e4m3 rows. ptxas assembles both.
func TestMXFP8RegFedAssemble(t *testing.T) {
	for _, name := range schedule.Presets() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			l, err := schedule.Preset(name)
			if err != nil {
				t.Fatal(err)
			}
			l.Precision = schedule.MXFP8
			s, err := schedule.DefaultSchedule(l, target.SM90a)
			if err != nil {
				t.Fatal(err)
			}
			s = s.WithMXGemm(schedule.MXGemmRegFed)
			one := s
			one.Variant = nil
			for _, sc := range []schedule.Schedule{s, one} {
				if err := sc.Validate(l); err != nil {
					t.Fatal(err)
				}
				both := sc.Variant != nil
				for _, build := range []func(schedule.Layer) (*moe.Program, error){moe.Forward, moe.Backward} {
					p, err := build(l)
					if err != nil {
						t.Fatal(err)
					}
					prog, err := Lower(p, sc, PerOp)
					if err != nil {
						t.Fatal(err)
					}
					if (prog.Buffer(moe.BufXSQ) != nil) != both || prog.Buffer("xs_rf") == nil {
						t.Errorf("variant %t: buffers xs_q %v, xs_rf %v", both, prog.Buffer(moe.BufXSQ), prog.Buffer("xs_rf"))
					}
					nrf := 0
					for _, k := range prog.Kernels {
						if !strings.HasSuffix(k.Name, "_rf") {
							continue
						}
						nrf++
						if both { // after the variant's range
							_, hi := sc.Variant.VariantTokens(l.TopK, l.Experts)
							if len(k.Tokens) != 1 || k.Tokens[0].Min != hi+1 {
								t.Errorf("kernel %s launched for %v, want from T = %d on", k.Name, k.Tokens, hi+1)
							}
						} else if k.Tokens != nil {
							t.Errorf("no variant: kernel %s launched for %v, want every T", k.Name, k.Tokens)
						}
					}
					if nrf == 0 {
						t.Errorf("variant %t: no register-fed gather or quantize kernel", both)
					}
					text, err := mptx.Compile(prog.Module, target.SM90a)
					if err != nil {
						t.Fatal(err)
					}
					if strings.Contains(text, ".e4m3.e4m3") != both || !strings.Contains(text, "mul.rn.bf16x2") || !strings.Contains(text, "k16.f32.bf16.bf16") {
						t.Errorf("variant %t: e4m3 wgmma %t, register widening %t", both, strings.Contains(text, ".e4m3.e4m3"), strings.Contains(text, "mul.rn.bf16x2"))
					}
					toolchain.NeedPtxas(t, "sm_90a")
					if err := toolchain.Assemble(text, "sm_90a"); err != nil {
						t.Fatal(strings.SplitN(err.Error(), "\n", 20))
					}
				}
			}
		})
	}
}
