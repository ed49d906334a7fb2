package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestInspectLayoutModel checks that `mokc inspect layout --model` prints
// the shared memory the built kernels request, and the tiles they address.
func TestInspectLayoutModel(t *testing.T) {
	for _, tg := range target.All() {
		out, err := runCLI("inspect", "layout", "--model", "gpt-oss-120b", "--target", tg.String())
		if err != nil {
			t.Fatal(err)
		}
		l, _ := schedule.Preset("gpt-oss-120b")
		s, err := schedule.DefaultSchedule(l, tg)
		if err != nil {
			t.Fatal(err)
		}
		prog, err := codegen.Build(l, s)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range prog.Kernels {
			if !strings.HasPrefix(k.Name, "moe_fc") {
				continue
			}
			// A decode kernel that gathers its rows (moe_fc1_gathered): one
			// line after its plain kernel's plan.
			name, gathered := strings.CutSuffix(k.Name, "_gathered")
			if gathered {
				if want := fmt.Sprintf("%s: the same tiles for T in", k.Name); !strings.Contains(out, want) || !strings.Contains(out, fmt.Sprintf("no staging tile: %d bytes", k.SharedBytes)) {
					t.Errorf("%v: output lacks %q with %d bytes", tg, want, k.SharedBytes)
				}
				continue
			}
			want := fmt.Sprintf("== %s: tile", name)
			i := strings.Index(out, want)
			if i < 0 {
				t.Errorf("%v: output lacks %q:\n%s", tg, want, out)
				continue
			}
			section := out[i+len(want):]
			if j := strings.Index(section, "\n== "); j >= 0 {
				section = section[:j]
			}
			total := fmt.Sprintf("total    %d bytes of dynamic shared memory", k.SharedBytes)
			if !strings.Contains(section, total) {
				t.Errorf("%v %s: output lacks %q", tg, k.Name, total)
			}
		}
		for _, want := range []string{"operand A", "operand B", "gate/up interleaved"} {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q", tg, want)
			}
		}
	}
	if _, err := runCLI("inspect", "layout", "--model", "no-such-model", "--target", "sm_90a"); err == nil {
		t.Error("unknown model accepted")
	}
}
