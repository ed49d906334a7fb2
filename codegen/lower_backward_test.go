package codegen

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestBackwardAssemble lowers the whole backward of every preset (PerOp)
// and assembles mokc's PTX with ptxas for each target (sm_100a with the
// CUDA 12.9 ptxas), on sm_90a with each weight-gradient kernel.
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
		for _, c := range []struct {
			tg target.Target
			wg schedule.WGradKernel
		}{{target.SM80, schedule.WGradMMA}, {target.SM90a, schedule.WGradMMA}, {target.SM90a, schedule.WGradWGMMA}, {target.SM90a, schedule.WGradWS},
			{target.SM100a, schedule.WGradMMA}} {
			tg := c.tg
			s, err := schedule.DefaultSchedule(l, tg)
			if err != nil {
				t.Fatal(err)
			}
			s.WGrad = c.wg
			prog, err := Lower(p, s, PerOp)
			if err != nil {
				t.Fatalf("%s %v %v: %v", name, tg, c.wg, err)
			}
			text, err := ptx.Compile(prog.Module, tg)
			if err != nil {
				t.Fatalf("%s %v %v: ptx.Compile: %v", name, tg, c.wg, err)
			}
			if c.wg == schedule.WGradWGMMA && !strings.Contains(text, "m64n128k16.f32.bf16.bf16") {
				t.Errorf("%s %v: no wgmma weight gradient", name, tg)
			}
			if c.wg == schedule.WGradWS && !strings.Contains(text, fmt.Sprintf("setmaxnreg.dec.sync.aligned.u32 %d;", wsProdRegs)) {
				t.Errorf("%s %v: no warp-specialized weight gradient", name, tg)
			}
			toolchain.NeedPtxas(t, tg.String())
			if err := toolchain.Assemble(text, tg.String()); err != nil {
				t.Fatalf("%s %v %v: %v", name, tg, c.wg, strings.SplitN(err.Error(), "\n", 20))
			}
		}
	}
}

// TestBackwardMXFP8Assemble lowers the MXFP8 backward of every preset
// (moe.Backward of an mxfp8 layer: the weights dequantized to bf16, FC1
// recomputed on the MXFP8 engine, the routing-weight dot over the MXFP8
// values of h) for sm_90a and sm_100a and assembles mokc's PTX; sm_80,
// without an MXFP8 engine, refuses the layer (CheckLayer).
func TestBackwardMXFP8Assemble(t *testing.T) {
	want := []string{".entry moe_dequantize_fc1", ".entry moe_quantize_xs", "cvt.rn.f16x2.e4m3x2"}
	assembleMXFP8Presets(t, moe.Backward, want, func(l schedule.Layer) {
		if err := CheckLayer(l, target.SM80); err == nil {
			t.Errorf("%s: the mxfp8 backward accepted on sm_80", l.Name)
		}
	})
}

// backwardPerOps are the backward's ops that have PerOp kernels of their
// own (not the GEMMs): the row-wise ops and the weight gradients.
var backwardPerOps = []string{"gather_dy", "gather_x", "dequantize_fc1", "dequantize_fc2", "shared_gate_sigmoid", "act_grad", "shared_act_grad", "combine_grad", "scatter_probs",
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

// perExpertBackwardLayers are layers with per-expert weight storage for
// the backward's tests: a plain preset (fp32 main grads), gpt-oss (biases,
// interleaved gate/up, the GPT-OSS activation; bf16 main grads), Llama 4
// Scout (the routing weight on the input: FC1·x through the table too; a
// shared expert) and a small layer with the routing map and the shared
// gate.
func perExpertBackwardLayers(t *testing.T) []schedule.Layer {
	small := schedule.Layer{Name: "small-odd-per-expert", Hidden: 192, Intermediate: 96, Experts: 8, TopK: 2,
		SharedExperts: 2, SharedIntermediate: 40, SharedGate: true, Activation: schedule.ClampedSwiGLU, SwiGLULimit: 3,
		Routing: schedule.RoutingMap, Storage: schedule.PerExpertWeights, MainGrad: schedule.GradBF16,
		Router: schedule.Router{Score: schedule.ScoreSoftmax, Normalize: true}}
	return []schedule.Layer{
		testlayer.PerExpert(t, "qwen3-30b-a3b", schedule.GradFP32),
		testlayer.PerExpert(t, "gpt-oss-20b", schedule.GradBF16),
		testlayer.PerExpert(t, "llama4-scout", schedule.GradFP32),
		small,
	}
}

// TestBackwardPerExpertAssemble lowers the backward of layers with
// per-expert weight storage for sm_80, sm_90a and sm_100a: the grouped
// layer's kernels under the same schedule (besides the transposes of
// N-major weights, which the engines may read directly for grouped weights
// but not through a table), with the pointer tables bound where the
// grouped layer binds its weights and main grads (the FC1 recompute reads
// fc1_table, the data-gradient GEMMs or their transposes fc1_table and
// fc2_table, the weight gradients add through fc1_grad_table and
// fc2_grad_table); mokc's PTX assembles with ptxas (sm_100a with the CUDA
// 12.9 ptxas).
func TestBackwardPerExpertAssemble(t *testing.T) {
	for _, l := range perExpertBackwardLayers(t) {
		p, err := moe.Backward(l)
		if err != nil {
			t.Fatal(err)
		}
		g := l
		g.Storage = schedule.GroupedWeights
		gp, err := moe.Backward(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range []target.Target{target.SM80, target.SM90a, target.SM100a} {
			s := testlayer.DefaultSchedule(t, l, tg)
			prog, err := Lower(p, s, PerOp)
			if err != nil {
				t.Fatalf("%s %v: %v", l.Name, tg, err)
			}
			// The same schedule (the grouped default may add a GEMM
			// variant), with the gather kernels kept: the grouped layer's
			// FC1·x reads x itself on sm_90a, which a table's weights
			// (copied by every producer thread) preclude.
			sg := s
			sg.Gather = schedule.GatherSeparate
			grouped, err := Lower(gp, sg, PerOp)
			if err != nil {
				t.Fatalf("%s %v grouped: %v", l.Name, tg, err)
			}
			checkPerExpertKernels(t, l.Name+" "+tg.String(), prog, grouped)
			text, err := ptx.Compile(prog.Module, tg)
			if err != nil {
				t.Fatalf("%s %v: ptx.Compile: %v", l.Name, tg, err)
			}
			toolchain.NeedPtxas(t, tg.String())
			if err := toolchain.Assemble(text, tg.String()); err != nil {
				t.Fatalf("%s %v: %v", l.Name, tg, strings.SplitN(err.Error(), "\n", 20))
			}
			if tg == target.SM100a {
				continue
			}
			// The weight gradients through the tables alone: llc-19's PTX
			// of their IR assembles too.
			for _, op := range []string{"fc1_wgrad", "fc2_wgrad"} {
				q, err := p.Isolate(op)
				if err != nil {
					t.Fatal(err)
				}
				prog, err := Lower(q, s, PerOp)
				if err != nil {
					t.Fatalf("%s %s: %v", l.Name, op, err)
				}
				text, err := ir.LLVM19Text(prog.Module)
				if err != nil {
					t.Fatal(err)
				}
				if err := toolchain.Assemble(llcPTX(t, text, tg.String()), tg.String()); err != nil {
					t.Fatalf("%s %s %v: llc PTX: %v", l.Name, op, tg, strings.SplitN(err.Error(), "\n", 20))
				}
			}
		}
	}
}

// checkPerExpertKernels checks the kernels of a per-expert layer's
// lowered backward against the grouped layer's (see
// TestBackwardPerExpertAssemble).
func checkPerExpertKernels(t *testing.T, name string, prog, grouped *Program) {
	t.Helper()
	names := func(p *Program) []string {
		var out []string
		for _, k := range p.Kernels {
			if !strings.HasSuffix(k.Name, "_transpose") {
				out = append(out, k.Name)
			}
		}
		return out
	}
	if got, want := names(prog), names(grouped); !slices.Equal(got, want) {
		t.Errorf("%s: kernels %v, the grouped layer's %v", name, got, want)
	}
	// bound[buffer] lists "kernel parameter" of every parameter bound to it.
	bound := map[string][]string{}
	for _, k := range prog.Kernels {
		for _, prm := range k.Params {
			if prm.Buffer != "" {
				bound[prm.Buffer] = append(bound[prm.Buffer], k.Name+" "+prm.Name)
			}
		}
	}
	for _, b := range []string{moe.BufFC1, moe.BufFC2, moe.BufFC1Grad, moe.BufFC2Grad} {
		if len(bound[b]) > 0 || prog.Buffer(b) != nil {
			t.Errorf("%s: grouped buffer %s in the plan (bound by %v)", name, b, bound[b])
		}
	}
	for table, want := range map[string][]string{
		moe.BufFC1Table:     {"moe_fc1 b", "moe_fc1_dgrad* b"},
		moe.BufFC2Table:     {"moe_fc2_dgrad* b"},
		moe.BufFC1GradTable: {"moe_fc1_wgrad main"},
		moe.BufFC2GradTable: {"moe_fc2_wgrad main"},
	} {
		for _, w := range want {
			prefix, wild := strings.CutSuffix(strings.Fields(w)[0], "*")
			if !slices.ContainsFunc(bound[table], func(got string) bool {
				k, prm, _ := strings.Cut(got, " ")
				return (k == prefix || wild && strings.HasPrefix(k, prefix)) && prm == strings.Fields(w)[1]
			}) {
				t.Errorf("%s: no kernel parameter %s binds %s (it is bound by %v)", name, w, table, bound[table])
			}
		}
	}
	for _, b := range []string{moe.BufFC1GradTable, moe.BufFC2GradTable} {
		if pb := prog.Buffer(b); pb == nil || pb.Kind != moe.InOut || pb.DType != string(moe.U64) {
			t.Errorf("%s: plan buffer %s is %+v, want an inout u64 table", name, b, pb)
		}
	}
}

// TestSaveFC1Assemble lowers the forward and the backward of every preset
// with schedule.Layer.SaveFC1 (the forward's FC1 a plain f32 GEMM into
// fc1_out and an Activate kernel; the backward without the FC1 GEMM) for
// each target, bf16 and (sm_90a) mxfp8, and assembles mokc's PTX with
// ptxas (sm_100a with the CUDA 12.9 ptxas).
func TestSaveFC1Assemble(t *testing.T) {
	if testing.Short() {
		t.Skip("assembles every preset's forward and backward three times")
	}
	for _, name := range schedule.Presets() {
		l, err := schedule.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		l.SaveFC1 = true
		mx := l
		mx.Precision = schedule.MXFP8
		for _, c := range []struct {
			l  schedule.Layer
			tg target.Target
		}{{l, target.SM80}, {l, target.SM90a}, {l, target.SM100a}, {mx, target.SM90a}} {
			if CheckLayer(c.l, c.tg) != nil {
				continue
			}
			s, err := schedule.DefaultSchedule(c.l, c.tg)
			if err != nil {
				t.Fatal(err)
			}
			for _, backward := range []bool{false, true} {
				build, dir := moe.Forward, "forward"
				if backward {
					build, dir = moe.Backward, "backward"
				}
				t.Run(fmt.Sprintf("%s/%v/%v/%s", name, c.l.Precision, c.tg, dir), func(t *testing.T) {
					p, err := build(c.l)
					if err != nil {
						t.Fatal(err)
					}
					prog, err := Lower(p, s, PerOp)
					if err != nil {
						t.Fatal(err)
					}
					toolchain.NeedPtxas(t, c.tg.String())
					text := assembleOurs(t, prog.Module, c.tg)
					if got := strings.Contains(text, ".entry moe_activate("); got == backward {
						t.Errorf("moe_activate in the PTX: %v", got)
					}
					if got := strings.Contains(text, ".entry moe_fc1("); got == backward {
						t.Errorf("the FC1 GEMM moe_fc1 in the PTX: %v", got)
					}
				})
			}
		}
	}
}
