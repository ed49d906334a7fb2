package codegen_test

import (
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestQueueItemsAssemble: ptxas assembles the sm_90a forward whose routed
// GEMMs take their work items from a queue (schedule.ItemsQueue), bf16 and
// mxfp8 (the decode variants' MX producer warps, the register-fed GEMMs,
// the staged epilogue's store warps all read the item ring).
func TestQueueItemsAssemble(t *testing.T) {
	precs := []schedule.Precision{schedule.BF16, schedule.MXFP8}
	var texts []string
	for _, prec := range precs {
		l := testlayer.Preset(t, "qwen3-30b-a3b")
		l.Precision = prec
		s := testlayer.DefaultSchedule(t, l, target.SM90a)
		s.Items = schedule.ItemsQueue
		p, err := codegen.Build(l, s)
		if err != nil {
			t.Fatalf("%v: %v", prec, err)
		}
		res, err := ptx.CompileModule(p.Module, target.SM90a)
		if err != nil {
			t.Fatalf("%v: %v", prec, err)
		}
		texts = append(texts, res.Text)
	}
	toolchain.NeedPtxas(t, target.SM90a.String())
	for i, text := range texts {
		if err := toolchain.Assemble(text, target.SM90a.String()); err != nil {
			t.Errorf("%v: %v", precs[i], err)
		}
	}
}
