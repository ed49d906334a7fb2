package driver

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPTXEntryParams(t *testing.T) {
	src := `
.version 8.0
.target sm_90a
// .entry commented(.param .u32 a)
/* .entry blockcommented(
	.param .u32 a) */
.file 1 "a//b.cu"
.visible .entry mixed_params(
	.param .u32 mixed_params_param_0,
	.param .u64 .ptr .global .align 16 mixed_params_param_1,
	.param .align 128 .b8 mixed_params_param_2[128]
)
{
	ret;
}
.entry none()
{ ret; }
.weak .entry $bare
{ ret; }
.func (.param .b32 r) helper(.param .b32 a, .param .b32 b) { ret; }
.visible .entry one(.param .u64 p) { ret; }
`
	got := ptxEntryParams(src)
	want := map[string]int{"mixed_params": 3, "none": 0, "$bare": 0, "one": 1}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ptxEntryParams (-want +got):\n%s", d)
	}
}

// Every golden kernel's parameter count is found, and the count agrees with
// the PTX's .param lines.
func TestPTXEntryParamsGolden(t *testing.T) {
	files, err := filepath.Glob("../golden/testdata/*.ptx")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden PTX: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got := ptxEntryParams(string(b))
		if len(got) == 0 || len(got) != strings.Count(string(b), ".entry ") {
			t.Errorf("%s: %d entries found, %d .entry directives", f, len(got), strings.Count(string(b), ".entry "))
		}
		params := 0
		for _, n := range got {
			params += n
		}
		if lines := strings.Count(string(b), "\n\t.param "); lines != params {
			t.Errorf("%s: %d parameters counted, %d .param lines", f, params, lines)
		}
	}
}
