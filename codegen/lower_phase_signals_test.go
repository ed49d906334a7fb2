package codegen

import (
	"testing"

	"github.com/mokc/mokc/launch"
)

// TestFollowsSignals: a phase starts without a grid barrier only where, at
// each T it runs at, the last phase before it that may run is one it
// waits for: FC2 after the gathering FC1 (T <= 256) and the plain one
// (T > 256), not with a phase between them that runs at some of FC2's T,
// nor where some T has no FC1 before it.
func TestFollowsSignals(t *testing.T) {
	lw := &perOp{hSig: &hSignal{signalling: []string{"moe_fc1_gathered", "moe_fc1"}, waiting: []string{"moe_fc2"}}}
	small, large := launch.TokenRange{Min: 1, Max: 256}, launch.TokenRange{Min: 257, Max: launch.MaxTokens}
	k := func(name string, r ...launch.TokenRange) Kernel {
		return Kernel{Name: name, Tokens: r, SkipIfZeroT: true}
	}
	fc2 := k("moe_fc2")
	for _, c := range []struct {
		what string
		ks   []Kernel
		want bool
	}{
		{"both FC1 forms", []Kernel{k("moe_gather", large), k("moe_fc1_gathered", small), k("moe_fc1", large), fc2}, true},
		{"a shared expert's phase between", []Kernel{k("moe_fc1_gathered", small), k("moe_fc1", large), k("moe_shared_fc1"), fc2}, false},
		{"a phase of other T between", []Kernel{k("moe_fc1_gathered", small), k("moe_fc1", large), k("moe_other", launch.TokenRange{Min: 0, Max: 0}), fc2}, true},
		{"no FC1 at T > 256", []Kernel{k("moe_gather", large), k("moe_fc1_gathered", small), fc2}, false},
		{"FC2 first", []Kernel{fc2}, false},
	} {
		if got := lw.followsSignals(c.ks, len(c.ks)-1); got != c.want {
			t.Errorf("%s: follows signals %v, want %v", c.what, got, c.want)
		}
	}
	if lw.followsSignals([]Kernel{k("moe_fc1", large), k("moe_fc2b")}, 1) {
		t.Errorf("a kernel that waits for nothing follows signals")
	}
}
