package codegen

import (
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestBackwardAssemble lowers the whole backward of every preset (PerOp)
// and assembles mokc's PTX with ptxas for each target (sm_100a with the
// CUDA 12.9 ptxas).
func TestBackwardAssemble(t *testing.T) {
	for _, name := range schedule.Presets() {
		l, err := schedule.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		p, err := moe.Backward(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range []target.Target{target.SM80, target.SM90a, target.SM100a} {
			s, err := schedule.DefaultSchedule(l, tg)
			if err != nil {
				t.Fatal(err)
			}
			prog, err := Lower(p, s, PerOp)
			if err != nil {
				t.Fatalf("%s %v: %v", name, tg, err)
			}
			text, err := ptx.Compile(prog.Module, tg)
			if err != nil {
				t.Fatalf("%s %v: ptx.Compile: %v", name, tg, err)
			}
			toolchain.NeedPtxas(t, tg.String())
			if err := toolchain.Assemble(text, tg.String()); err != nil {
				t.Fatalf("%s %v: %v", name, tg, strings.SplitN(err.Error(), "\n", 20))
			}
		}
	}
}

// backwardPerOps are the backward's ops that have PerOp kernels of their
// own (not the GEMMs): the row-wise ops and the weight gradients.
var backwardPerOps = []string{"gather_dy", "gather_x", "shared_gate_sigmoid", "act_grad", "shared_act_grad", "combine_grad", "scatter_probs",
	"fc1_wgrad", "fc2_wgrad", "shared_fc1_wgrad", "shared_fc2_wgrad", "shared_gate_wgrad"}

// TestBackwardPerOpsAssemble lowers each of the backward's PerOp ops on
// its own (moe.Program.Isolate) for layers with every feature they
// handle (shared gate, gpt-oss activation with interleaved gate/up and
// biases, router weight on the input, the dense routing map) and
// assembles mokc's PTX and llc-19's with ptxas for sm_80 and sm_90a.
func TestBackwardPerOpsAssemble(t *testing.T) {
	for _, name := range []string{"qwen2-57b-a14b", "gpt-oss-120b", "llama4-scout", "deepseek-v4-flash"} {
		l, err := schedule.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "deepseek-v4-flash" {
			l.Routing = schedule.RoutingMap
		}
		p, err := moe.Backward(l)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range []target.Target{target.SM80, target.SM90a} {
			s, err := schedule.DefaultSchedule(l, tg)
			if err != nil {
				t.Fatal(err)
			}
			for _, op := range backwardPerOps {
				q, err := p.Isolate(op)
				if err != nil {
					continue // the layer has no such op
				}
				prog, err := Lower(q, s, PerOp)
				if err != nil {
					t.Fatalf("%s %s: %v", name, op, err)
				}
				ours, err := ptx.Compile(prog.Module, tg)
				if err != nil {
					t.Fatalf("%s %s %v: ptx.Compile: %v", name, op, tg, err)
				}
				toolchain.NeedPtxas(t, tg.String())
				if err := toolchain.Assemble(ours, tg.String()); err != nil {
					t.Fatalf("%s %s %v: our PTX: %v", name, op, tg, strings.SplitN(err.Error(), "\n", 20))
				}
				text, err := ir.LLVM19Text(prog.Module)
				if err != nil {
					t.Fatal(err)
				}
				if err := toolchain.Assemble(llcPTX(t, text, tg.String()), tg.String()); err != nil {
					t.Fatalf("%s %s %v: llc PTX: %v", name, op, tg, strings.SplitN(err.Error(), "\n", 20))
				}
			}
		}
	}
}
