package codegen

import (
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// llcPTX compiles the module text through llc-19 for target.
func llcPTX(t *testing.T, text, target string) string {
	t.Helper()
	toolchain.NeedLLC(t)
	ptx, err := toolchain.CompileLLC(text, target)
	if err != nil {
		t.Fatal(err)
	}
	return ptx
}

// TestBuildPresetsAssemble builds the sm_80 forward of every preset and
// assembles both our PTX (package ptx) and llc-19's with ptxas.
func TestBuildPresetsAssemble(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles every preset with llc-19 and ptxas")
	}
	for _, name := range schedule.Presets() {
		t.Run(name, func(t *testing.T) {
			l, s := presetSchedule(t, name, target.SM80)
			p, text := buildText(t, l, s)
			ours, err := ptx.Compile(p.Module, target.SM80)
			if err != nil {
				t.Fatalf("ptx.Compile: %v", err)
			}
			toolchain.NeedPtxas(t, "sm_80")
			if err := toolchain.Assemble(ours, "sm_80"); err != nil {
				t.Fatalf("our PTX: %v", strings.SplitN(err.Error(), "\n", 20))
			}
			llc := llcPTX(t, text, "sm_80")
			if err := toolchain.Assemble(llc, "sm_80"); err != nil {
				t.Fatal(strings.SplitN(err.Error(), "\n", 20))
			}
		})
	}
}

// presetSchedule returns preset name and its default schedule on tg.
func presetSchedule(t testing.TB, name string, tg target.Target) (schedule.Layer, schedule.Schedule) {
	t.Helper()
	l, err := schedule.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := schedule.DefaultSchedule(l, tg)
	if err != nil {
		t.Fatal(err)
	}
	return l, s
}

// buildPreset builds the forward of preset name with precision pr under
// its default schedule on tg.
func buildPreset(t testing.TB, name string, pr schedule.Precision, tg target.Target) (*Program, schedule.Schedule) {
	t.Helper()
	l, err := schedule.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	l.Precision = pr
	s, err := schedule.DefaultSchedule(l, tg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(l, s)
	if err != nil {
		t.Fatal(err)
	}
	return p, s
}

// buildText builds l under s and returns the program with its LLVM 19 text.
func buildText(t testing.TB, l schedule.Layer, s schedule.Schedule) (*Program, string) {
	t.Helper()
	p, err := Build(l, s)
	if err != nil {
		t.Fatal(err)
	}
	text, err := ir.LLVM19Text(p.Module)
	if err != nil {
		t.Fatal(err)
	}
	return p, text
}
