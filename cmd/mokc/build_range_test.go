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
	if lo, hi := launchedRange(ks); lo != 3 || hi != 4 {
		t.Errorf("launchedRange = %d, %d; want 3, 4", lo, hi)
	}
}
