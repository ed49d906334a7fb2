package main

import (
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/launch"
)

// TestLaunchedRange: the launch counts are those of T >= 1 only; a kernel
// for T = 0 alone (moe_dispatch_small's 0..0 range in mxfp8 programs)
// does not make the fewest launches 1.
func TestLaunchedRange(t *testing.T) {
	one := [3]launch.Expr{launch.Const(1), launch.Const(1), launch.Const(1)}
	ks := []codegen.Kernel{
		{Name: "dispatch_small", Grid: one, Tokens: []launch.TokenRange{{Min: 0, Max: 0}, {Min: 5, Max: 256}}},
		{Name: "dispatch_small_quantize_x", Grid: one, Tokens: []launch.TokenRange{{Min: 1, Max: 4}}},
		{Name: "init", Grid: one, Tokens: []launch.TokenRange{{Min: 257, Max: launch.MaxTokens}}},
		{Name: "count", Grid: one, Tokens: []launch.TokenRange{{Min: 257, Max: launch.MaxTokens}}},
		{Name: "fc1", Grid: one, SkipIfZeroT: true},
		{Name: "combine", Grid: one, SkipIfZeroT: true},
	}
	if lo, hi, same := launchedRange(ks); lo != 3 || hi != 4 || same {
		t.Errorf("launchedRange = %d, %d, %v; want 3, 4, false", lo, hi, same)
	}
	// Two kernels that take turns: the same count at every T, not the
	// same kernels.
	turns := []codegen.Kernel{
		{Name: "fc1", Grid: one, Tokens: []launch.TokenRange{{Min: 1, Max: 99}}},
		{Name: "fc1_mid", Grid: one, Tokens: []launch.TokenRange{{Min: 100, Max: launch.MaxTokens}}},
		{Name: "combine", Grid: one, SkipIfZeroT: true},
	}
	if lo, hi, same := launchedRange(turns); lo != 2 || hi != 2 || same {
		t.Errorf("launchedRange = %d, %d, %v; want 2, 2, false", lo, hi, same)
	}
	if lo, hi, same := launchedRange(turns[2:]); lo != 1 || hi != 1 || !same {
		t.Errorf("launchedRange = %d, %d, %v; want 1, 1, true", lo, hi, same)
	}
}

// TestInspectCommand: the inspect program line of a build command line
// drops the output's flags (spaced and with =), keeps the rest quoted for
// a shell, and adds the build's default target when none was given.
func TestInspectCommand(t *testing.T) {
	for _, c := range []struct {
		args      []string
		targetSet bool
		want      string
	}{
		{[]string{"mokc", "build", "--model", "qwen3-30b-a3b", "-o", "x.ptx"}, false,
			"mokc inspect program --model qwen3-30b-a3b --target sm_90a"},
		{[]string{"/bin/build", "build", "--target", "sm_80", "--emit=llvm", "--output", "build", "--hf-config", "my dir/c.json"}, true,
			"mokc inspect program --target sm_80 --hf-config 'my dir/c.json'"},
		{[]string{"mokc", "-o=a", "--model", "m"}, false, "mokc inspect program"},
	} {
		if got := inspectCommand(c.args, "sm_90a", c.targetSet); got != c.want {
			t.Errorf("inspectCommand(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}
