package codegen

import (
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/moe"
	mptx "github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestQuantizeAssemble lowers the MXFP8 forward's quantize ops on their own
// (bf16 rows of x, f32 rows of h) for every target and assembles them; the
// whole MXFP8 program is refused at its first GEMM, with the reason.
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
		for _, name := range []string{"quantize_xs", "quantize_h"} {
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
		if _, err := Lower(p, s, PerOp); err == nil || !strings.Contains(err.Error(), "MXFP8 GEMM has no kernel yet") {
			t.Errorf("%v: whole mxfp8 program: %v", tg, err)
		}
	}
}
