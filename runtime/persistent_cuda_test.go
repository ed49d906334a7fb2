//go:build cuda

package runtime_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// persistentShapes returns the edit of a schedule of layer name's forward
// that leaves out the GEMM variants the persistent lowering leaves out
// (codegen.PersistentVariants: where a GEMM would not take a variant of
// other blocks, its base tiles run there): the per-op baseline of the
// persistent kernels then runs the same GEMM kernels.
func persistentShapes(t *testing.T, name string) func(*schedule.Schedule) {
	t.Helper()
	p, err := moe.Forward(testlayer.Named(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return func(s *schedule.Schedule) { *s, _ = codegen.PersistentVariants(p, *s) }
}

// persistent sets the persistent lowering, with its default weight-gradient
// kernel (schedule.Schedule.WithLowering).
func persistent(s *schedule.Schedule) { *s = s.WithLowering(schedule.LoweringPersistent) }

// TestPersistentGPU: the persistent lowering's one kernel launch per
// forward (moe_forward, and where the default schedule's GEMM variants run
// blocks of other warps, moe_forward_mid and moe_forward_decode in their
// token ranges: codegen.Persistent) passes runChecked's checks (the
// float64 reference on fresh random inputs, y poisoned first, every
// element written, the error word clear) and gives the per-op kernels'
// bits, in direct runs and in two replays of a captured graph, at token
// counts that reach each of the per-op plan's token ranges (T = 0 on
// qwen3-30b-a3b: moe_forward, which clears the error word; the one-block
// dispatch and the gathering FC1 at 1 and 64, the decode tiles at 1 and
// 64 on qwen3-30b-a3b, 1 on the others, the four routing kernels at 300,
// the queue dispatch at 1100 and up, the "mid" tiles at 2000 on
// qwen3-30b-a3b and 1100 on gpt-oss-20b and olmoe-1b-7b), on bf16 presets of both gate/up
// layouts (qwen3-30b-a3b; gpt-oss-20b with biases and the clamped
// activation), olmoe-1b-7b (64 experts of 1024 columns), deepseek-v2-lite
// (two shared experts, their GEMMs split-K phases), an mxfp8 forward
// (the register-fed GEMMs, the quantizing gather and quantize_h_rf), and
// deepseek-v3 and dsv4-pro-proxy of 16 experts at fewer T (H = 7168: the
// bulk-copy combine's column slices, even and uneven); then out-of-range
// expert ids through the persistent kernel (checkBadIDs).
func TestPersistentGPU(t *testing.T) {
	ctx, targets, stream := openLayerTest(t)
	if !slices.Contains(targets, target.SM90a) {
		t.Skip("the persistent kernel is sm_90a's")
	}
	all := []int{4096, 2000, 1100, 300, 64, 1}
	for _, c := range []struct {
		name string
		Ts   []int
	}{
		{"qwen3-30b-a3b", append(all, 0)}, {"gpt-oss-20b", all}, {"olmoe-1b-7b", all}, {"deepseek-v2-lite", all}, {"qwen3-30b-a3b mxfp8", all},
		// the bulk-copy combine's tokens in column slices: four of 1792
		// columns (nine rows with the shared expert's), three uneven
		// ones (2392, 2392, 2384)
		{"deepseek-v3 E16", []int{300, 64, 1}}, {"dsv4-pro-proxy E16", []int{300, 1}},
	} {
		name := c.name
		l := testlayer.Named(t, name)
		s := testlayer.DefaultSchedule(t, l, target.SM90a)
		persistent(&s)
		p, err := codegen.Build(l, s.FixedItemsWhereNeeded(l).FC2LargeWhereValid(l))
		if err != nil {
			t.Fatal(err)
		}
		if ks := p.Kernels; len(ks) == 0 || ks[0].Name != "moe_forward" || slices.ContainsFunc(ks, func(k codegen.Kernel) bool { return !k.CoResident }) {
			t.Fatalf("%s: the persistent plan launches %v, want moe_forward (and one kernel per other block shape), co-resident", name, kernelNames(ks))
		}
		sameAs(t, ctx, stream, name, persistentShapes(t, name), persistent, c.Ts, "per-op kernels", "persistent kernels")
	}
	// Out-of-range expert ids through the persistent kernel: reported, their
	// slots without a contribution (the bulk-copy combine's unrouted slots,
	// with and without a shared expert), the next valid forward clean.
	for _, name := range []string{"qwen3-30b-a3b", "deepseek-v2-lite"} {
		l := testlayer.Named(t, name)
		seed, w, dw := randomWeightsOnDevice(t, ctx, l)
		s := testlayer.DefaultSchedule(t, l, target.SM90a)
		persistent(&s)
		ly := loadLayer(t, ctx, l, s.FixedItemsWhereNeeded(l).FC2LargeWhereValid(l))
		checkBadIDs(t, ctx, stream, ly, l, w, dw, name+" persistent", seed)
	}
}

// TestStoreGatherGPU: the persistent forward with FC1's store warps
// gathering its rows (schedule.GatherStoreWarps: no gather phase above the
// decode sizes, FC1's items waiting for their row tiles' chunks) passes
// runChecked's checks and gives the per-op kernels' bits, in direct runs
// and in graph replays (the counters zeroed with the tile list every
// run), at T = 300 to 4096 (and 64, where the gathering FC1 runs instead)
// on qwen3-30b-a3b (chunks of 8 rows), gpt-oss-20b (H = 2880: 5 rows),
// olmoe-1b-7b, deepseek-v2-lite (shared experts) and deepseek-v3 of 16
// experts (H = 7168: 2 rows); and the default schedule's (GatherFC1, the
// store warps gathering from Schedule.StoreGatherRows = 256 mean rows per
// expert) on qwen3-30b-a3b at T = 4095 (the gather phase) and 4096, 5000.
func TestStoreGatherGPU(t *testing.T) {
	ctx, targets, stream := openLayerTest(t)
	if !slices.Contains(targets, target.SM90a) {
		t.Skip("the persistent kernel is sm_90a's")
	}
	stores := func(s *schedule.Schedule) {
		persistent(s)
		s.Gather = schedule.GatherStoreWarps
	}
	for _, c := range []struct {
		name string
		Ts   []int
	}{
		{"qwen3-30b-a3b", []int{4096, 1100, 300, 64}}, {"gpt-oss-20b", []int{2000, 300}}, {"olmoe-1b-7b", []int{1100}},
		{"deepseek-v2-lite", []int{2000, 300}}, {"deepseek-v3 E16", []int{300}},
	} {
		sameAs(t, ctx, stream, c.name, persistentShapes(t, c.name), stores, c.Ts, "per-op kernels", "persistent kernel, rows gathered by FC1's store warps")
	}
	sameAs(t, ctx, stream, "qwen3-30b-a3b", persistentShapes(t, "qwen3-30b-a3b"), persistent, []int{5000, 4096, 4095}, "per-op kernels", "persistent kernel, the default's store warps from 256 rows per expert")
}

// TestPersistentBackwardGPU runs testLayerBackward's training steps (the
// float64 reference, three steps with the same bits, the third a replay
// of a captured graph, the main grads of experts without routes
// untouched) with the persistent lowering's moe_forward and moe_backward,
// on the grouped-storage layers of TestLayerBackward (qwen3-30b-a3b and
// gpt-oss-20b of fewer experts, two small layers with shared experts), at
// T = 64, 1 and 0, on the small layers also at 300 and 1100 (the four
// routing kernels, the queue dispatch), on the others also at 150 mean
// rows per expert (the "mid" tiles' persistent kernel, moe_backward_mid).
func TestPersistentBackwardGPU(t *testing.T) {
	ctx, targets, stream := openLayerTest(t)
	if !slices.Contains(targets, target.SM90a) {
		t.Skip("the persistent kernel is sm_90a's")
	}
	for name, l := range groupedBackwardCases(t) {
		t.Run(name, func(t *testing.T) {
			ls := newBackwardSetup(t, ctx, l, target.SM90a)
			s, err := schedule.DefaultSchedule(l, target.SM90a)
			if err != nil {
				t.Fatal(err)
			}
			persistent(&s)
			ls.ly = loadLayer(t, ctx, l, s.FixedItemsWhereNeeded(l).FC2LargeWhereValid(l))
			Ts := []int{64, 1, 0}
			if l.Hidden*l.Intermediate <= 256*128 {
				// the float64 reference of a preset's layer at 1100 tokens
				// takes minutes (the CLI's --backward samples its rows)
				Ts = append([]int{1100, 300}, Ts...)
			} else if v := s.Variant; v != nil && !v.SameBlocks(s) {
				// the GEMM variant's own persistent kernel (moe_backward_mid),
				// at 150 mean rows per expert
				Ts = append([]int{150 * l.Experts / l.TopK}, Ts...)
			}
			for _, T := range Ts {
				t.Run(fmt.Sprintf("T=%d", T), func(t *testing.T) { testLayerBackward(t, ctx, stream, ls, T) })
			}
		})
	}
}

// kernelNames lists the kernels' names.
func kernelNames(ks []codegen.Kernel) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.Name)
	}
	return out
}
