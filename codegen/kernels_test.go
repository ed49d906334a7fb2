package codegen

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/target"
)

// TestRowWiseLoadsTogether: the combine and the gather issue the loads
// of their work before its first use, as their docs say (a block of
// either that runs alone on its SM, a virtual block of the persistent
// kernel, is bound by how often it waits for memory: docs/perf.md,
// persistent v2 and v3). In the PTX of moe_combine, every slot's row
// index (ld.global.u32) comes before the first weight (ld.global.f32),
// and every routed row's chunk of every token of the block
// (ld.global.v4) before the first fma (after the shared output gates);
// in moe_gather's, every row's first load batch before the first store.
// One token or row per block and warp, as the per-op kernels run, and
// more, as the persistent lowering builds them.
func TestRowWiseLoadsTogether(t *testing.T) {
	for _, name := range []string{"qwen3-30b-a3b", "deepseek-v2-lite", "qwen2-57b-a14b", "llama4-scout"} {
		l := testlayer.Named(t, name)
		p, err := moe.Forward(l)
		if err != nil {
			t.Fatal(err)
		}
		var combine moe.Combine
		var gather moe.Gather
		for _, op := range p.Ops {
			switch o := op.(type) {
			case moe.Combine:
				combine = o
			case moe.Gather:
				gather = o
			}
		}
		for _, per := range []int{1, 2, 3} {
			d := dims{H: l.Hidden, I: l.Intermediate, E: l.Experts, K: l.TopK, gatherPerWarp: per, combinePerBlock: per}
			m := ir.NewModule("loads")
			emitCombine(m, d, combine)
			emitGather(m, d, gather)
			res, err := ptx.CompileModule(m.IR, target.SM90a)
			if err != nil {
				t.Fatalf("%s, %d per block: %v", name, per, err)
			}
			where := fmt.Sprintf("%s, %d per block or warp", name, per)
			body := entryBody(res.Text, "moe_combine")
			rows := d.K * per
			if n := strings.Count(before(body, "ld.global.f32"), "ld.global.u32"); !combine.WeightOnInput && n < rows {
				t.Errorf("%s: moe_combine loads %d row indices before its first weight, want %d", where, n, rows)
			}
			chunks := rows
			if combine.SharedOut != nil {
				chunks += per
			}
			if combine.SharedGate != nil { // the gates' dot products, each ending in a barrier, come first
				body = body[strings.LastIndex(body, "bar.sync"):]
			}
			if n := strings.Count(before(body, "bra"), "ld.global.f32"); !combine.WeightOnInput && n < rows {
				t.Errorf("%s: moe_combine loads %d weights before its first branch, want %d (a weight does not wait for its row index)", where, n, rows)
			}
			if n := strings.Count(before(body, "fma.rn.f32"), "ld.global.v4"); n < chunks {
				t.Errorf("%s: moe_combine loads %d chunks before its first fma, want %d", where, n, chunks)
			}
			body = entryBody(res.Text, "moe_gather")
			if n := strings.Count(before(body, "st.global"), "ld.global.v4"); n < per*gatherBatch {
				t.Errorf("%s: moe_gather loads %d chunks before its first store, want %d", where, n, per*gatherBatch)
			}
		}
	}
}

// entryBody is the text of .entry name in the module text, up to the next
// .entry.
func entryBody(text, name string) string {
	i := strings.Index(text, ".entry "+name+"(")
	if i < 0 {
		return ""
	}
	rest := text[i+1:]
	if j := strings.Index(rest, ".entry "); j >= 0 {
		return rest[:j]
	}
	return rest
}

// before is text up to the first occurrence of s (all of it without one).
func before(text, s string) string {
	if i := strings.Index(text, s); i >= 0 {
		return text[:i]
	}
	return text
}
