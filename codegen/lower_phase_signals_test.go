package codegen

import (
	"slices"
	"strings"
	"testing"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/schedule"
)

// TestFollowsSignals: a phase starts without a grid barrier only where, at
// each T it runs at, the last phase before it that may run is one it
// waits for: FC2 after the gathering FC1 (T <= 256) and the plain one
// (T > 256), not with a phase between them that runs at some of FC2's T,
// nor where some T has no FC1 before it.
func TestFollowsSignals(t *testing.T) {
	lw := &perOp{hSigs: []*hSignal{{signalling: []string{"moe_fc1_gathered", "moe_fc1"}, waiting: []string{"moe_fc2"}}}}
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

// counterOps are the constants of the persistent kernel's counter
// operations in p's module: the amounts its release adds add (grid
// barriers, the dispatch queue and FC1's signals) and the targets its
// acquire polls compare with (the unsigned less-than of an ld.acquire.gpu).
func counterOps(t *testing.T, p *Program) (adds, targets []int64) {
	t.Helper()
	for _, f := range p.Module.Funcs {
		if f.Name() != "moe_forward" {
			continue
		}
		acquires := map[value.Value]bool{}
		for _, blk := range f.Blocks {
			for _, inst := range blk.Insts {
				switch in := inst.(type) {
				case *llir.InstCall:
					a, ok := in.Callee.(*llir.InlineAsm)
					switch {
					case !ok:
					case strings.HasPrefix(a.Asm, "red.release.gpu"):
						if c, ok := in.Args[1].(*constant.Int); ok {
							adds = append(adds, c.X.Int64())
						}
					case strings.HasPrefix(a.Asm, "ld.acquire.gpu"):
						acquires[in] = true
					}
				case *llir.InstICmp:
					if c, ok := in.Y.(*constant.Int); ok && in.Pred == enum.IPredULT && acquires[in.X] {
						targets = append(targets, c.X.Int64())
					}
				}
			}
		}
	}
	slices.Sort(adds)
	slices.Sort(targets)
	return slices.Compact(adds), slices.Compact(targets)
}

// TestPhaseSignalCounts: in the persistent bf16 forward of presets of
// 128-row tiles, FC1's staged epilogue signals 24/3 per store warp and the
// gathering FC1's consumer warps (two warpgroups) 24/8 each, and FC2's
// producer waits for FC1's column blocks times 24; with the counters off
// only the grid barriers' and the queue's adds of one remain.
func TestPhaseSignalCounts(t *testing.T) {
	build := func(l schedule.Layer, signals bool) (*Program, GemmSpec) {
		t.Helper()
		return persistentSignals(t, l, false, signals)
	}
	for _, name := range []string{"qwen3-30b-a3b", "deepseek-v3", "gpt-oss-120b", "mixtral-8x7b"} {
		l := testlayer.Named(t, name)
		on, spec := build(l, true)
		if spec.Tile.BM != 128 {
			t.Fatalf("%s: FC1 tiles of %d rows; the test expects 128", name, spec.Tile.BM)
		}
		adds, targets := counterOps(t, on)
		if want := []int64{1, hSignalPerItem / 8, hSignalPerItem / 3}; !slices.Equal(adds, want) {
			t.Errorf("%s: release adds %v, want %v (barriers and queue, gathering FC1's 8 consumer warps, FC1's 3 store warps)", name, adds, want)
		}
		if want := int64(colBlocks(spec) * hSignalPerItem); !slices.Contains(targets, want) {
			t.Errorf("%s: acquire targets %v lack FC2's %d (%d column blocks x %d)", name, targets, want, colBlocks(spec), hSignalPerItem)
		}
		off, _ := build(l, false)
		if adds, targets := counterOps(t, off); !slices.Equal(adds, []int64{1}) || slices.Contains(targets, int64(colBlocks(spec)*hSignalPerItem)) {
			t.Errorf("%s: without the counters: release adds %v, acquire targets %v", name, adds, targets)
		}
	}
}
