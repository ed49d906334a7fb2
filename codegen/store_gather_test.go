package codegen

import (
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestStoreGatherChunks: for every preset's hidden size and the row tiles
// of 64 to 256 rows, a chunk of the gather beside FC1 (storeChunkRows)
// holds at most storeGatherChunkBytes (or one row) and at most 32 rows
// (the lanes that hold its tokens), and a tile's chunks (storeChunks)
// cover its rows, the last one not empty.
func TestStoreGatherChunks(t *testing.T) {
	for _, name := range schedule.Presets() {
		l := testlayer.Named(t, name)
		for _, bm := range []int{64, 128, 192, 256} {
			s := GemmSpec{K: l.Hidden}
			s.Tile.BM = bm
			r, g := s.storeChunkRows(), s.storeChunks()
			if r < 1 || r > 32 || r > 1 && 2*l.Hidden*r > storeGatherChunkBytes || g*r < bm || (g-1)*r >= bm {
				t.Errorf("%s: H %d, %d-row tiles: %d chunks of %d rows", name, l.Hidden, bm, g, r)
			}
		}
	}
}

// TestStoreGather: with schedule.GatherStoreWarps the persistent bf16
// forward of every sm_90a preset with a plain gather has no gather phase
// above the decode sizes: FC1's store-gathering phase (no plain one) binds
// x, the rows' slots and the tile list's gather_done1 counters (which the
// kernels writing the list zero), its store warps add one per chunk and
// its producer waits for a tile's chunks. The default GatherFC1 runs that
// phase from Schedule.StoreGatherRows mean rows per expert (qwen3-30b-a3b:
// T >= 4096) and the gather phase and plain FC1 below; with
// StoreGatherRows 0, GatherSeparate and in the backward there are no such
// counters; the per-op lowering refuses GatherStoreWarps, and so do the
// forwards where it would change nothing (llama4-scout: the routing weight
// on the rows; mxfp8).
func TestStoreGather(t *testing.T) {
	binds := func(k Kernel, role, buf string) bool {
		return slices.ContainsFunc(k.Params, func(p Param) bool { return p.Buffer == buf && (role == "" || p.Role == role) })
	}
	phase := func(p *Program, name string) *Kernel {
		for i, k := range p.PhaseKernels {
			if k.Name == name {
				return &p.PhaseKernels[i]
			}
		}
		return nil
	}
	for _, name := range schedule.Presets() {
		l := testlayer.Named(t, name)
		if name == "llama4-scout" {
			if _, err := storeGatherLower(t, l, false, schedule.GatherStoreWarps); err == nil || !strings.Contains(err.Error(), "leave Schedule.Gather at fc1") {
				t.Errorf("llama4-scout with the store warps' gather: %v, want the setting refused", err)
			}
			continue
		}
		p := storeGatherProgram(t, l, false, schedule.GatherStoreWarps)
		if p.Buffer("gather_done1") == nil || phase(p, "moe_gather") != nil {
			t.Errorf("%s: counters of the gathered rows %v, gather phase %v; want them and none", name, p.Buffer("gather_done1") != nil, phase(p, "moe_gather") != nil)
		}
		if phase(p, "moe_fc1") != nil {
			t.Errorf("%s: a plain moe_fc1 phase beside the store-gathering one", name)
		}
		fc1 := phase(p, "moe_fc1_store_gathered")
		if fc1 == nil || !binds(*fc1, RoleGatherX, moe.BufX) || !binds(*fc1, RoleGatherSlot, "src_slot") || !binds(*fc1, RoleGatherDone, "gather_done1") || !binds(*fc1, RoleA, "xs") {
			t.Fatalf("%s: moe_fc1_store_gathered phase %v: want x, src_slot and gather_done1 bound to its gather, xs to A", name, fc1)
		}
		for _, k := range p.PhaseKernels {
			writes := strings.HasPrefix(k.Name, "moe_dispatch") || k.Name == "moe_scan"
			if k.Name != "moe_fc1_store_gathered" && binds(k, "", "gather_done1") != writes {
				t.Errorf("%s: phase %s binds gather_done1 %v, want %v", name, k.Name, !writes, writes)
			}
		}
		_, targets := counterOps(t, p)
		if n := (GemmSpec{K: l.Hidden, Tile: Tile{BM: 128}}).storeChunks(); !slices.Contains(targets, int64(n)) {
			t.Errorf("%s: acquire targets %v lack a tile's %d chunks", name, targets, n)
		}
	}
	l := testlayer.Named(t, "qwen3-30b-a3b")
	def := storeGatherProgram(t, l, false, schedule.GatherFC1)
	plain, stores := phase(def, "moe_fc1"), phase(def, "moe_fc1_store_gathered")
	if phase(def, "moe_gather") == nil || def.Buffer("gather_done1") == nil || plain == nil || stores == nil {
		t.Fatalf("qwen3-30b-a3b default: phases %v, counters %v; want the gather, moe_fc1 and moe_fc1_store_gathered, and gather_done1", def.Kernels[0].Phases, def.Buffer("gather_done1") != nil)
	}
	if want := []launch.TokenRange{{Min: 4096, Max: launch.MaxTokens}}; !slices.Equal(stores.Tokens, want) || plain.Tokens[len(plain.Tokens)-1].Max != 4095 {
		t.Errorf("qwen3-30b-a3b default: moe_fc1 at %v, moe_fc1_store_gathered at %v; want the store warps from T = 4096 (256 mean rows per expert)", plain.Tokens, stores.Tokens)
	}
	// deepseek-v2-lite: T·6/64 >= 256 from T = 2731 (256·64/6 = 2730.7)
	if p := storeGatherProgram(t, testlayer.Named(t, "deepseek-v2-lite"), false, schedule.GatherFC1); phase(p, "moe_fc1_store_gathered") == nil ||
		phase(p, "moe_fc1_store_gathered").Tokens[0].Min != 2731 {
		t.Errorf("deepseek-v2-lite default: moe_fc1_store_gathered %v, want it from T = 2731", phase(p, "moe_fc1_store_gathered"))
	}
	off, err := lowerDefaultErr(t, l, false, Persistent, func(s *schedule.Schedule) { s.Lowering, s.StoreGatherRows = schedule.LoweringPersistent, 0 })
	if err != nil {
		t.Fatal(err)
	}
	for g, p := range map[string]*Program{"fc1, StoreGatherRows 0": off, "separate": storeGatherProgram(t, l, false, schedule.GatherSeparate)} {
		if storesGatherPhase(p) || p.Buffer("gather_done1") != nil || phase(p, "moe_gather") == nil {
			t.Errorf("qwen3-30b-a3b gather %v: store warps gather %v, counters %v; want neither, and a gather phase", g, storesGatherPhase(p), p.Buffer("gather_done1") != nil)
		}
	}
	if bw := storeGatherProgram(t, l, true, schedule.GatherStoreWarps); storesGatherPhase(bw) {
		t.Errorf("qwen3-30b-a3b backward: a phase gathers in its store warps")
	}
	mx := l
	mx.Precision = schedule.MXFP8
	if _, err := storeGatherLower(t, mx, false, schedule.GatherStoreWarps); err == nil {
		t.Errorf("qwen3-30b-a3b mxfp8 with the store warps' gather: built, want the setting refused")
	}
	s := testlayer.DefaultSchedule(t, l, target.SM90a)
	s.Gather = schedule.GatherStoreWarps
	if err := s.Validate(l); err == nil || !strings.Contains(err.Error(), "persistent") {
		t.Errorf("per-op lowering with the store warps' gather: %v, want an error naming the persistent lowering", err)
	}
}

// storeGatherProgram lowers layer l's forward (or backward) on sm_90a
// persistent with its default schedule
// (as persistentPair) and gather kind g.
func storeGatherProgram(t *testing.T, l schedule.Layer, backward bool, g schedule.GatherKind) *Program {
	t.Helper()
	p, err := storeGatherLower(t, l, backward, g)
	if err != nil {
		t.Fatalf("%s (backward %v) gather %v: %v", l.Name, backward, g, err)
	}
	return p
}

// storeGatherLower is storeGatherProgram returning the lowering's error.
func storeGatherLower(t *testing.T, l schedule.Layer, backward bool, g schedule.GatherKind) (*Program, error) {
	t.Helper()
	return lowerDefaultErr(t, l, backward, Persistent, func(s *schedule.Schedule) { s.Lowering, s.Gather = schedule.LoweringPersistent, g })
}
