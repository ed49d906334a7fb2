package ptx

import (
	"os"
	"testing"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/metadata"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/internal/toolchain"
	mokcir "github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/target"
)

// TestIRIntrinsics: every intrinsic package ir can emit is lowered, and the
// PTX of a call to it (with arguments of its signature) assembles.
func TestIRIntrinsics(t *testing.T) {
	for _, name := range mokcir.Intrinsics() {
		t.Run(name, func(t *testing.T) {
			if _, ok := lookupIntrinsic(name); !ok {
				t.Fatalf("package ir emits %s, which the backend does not lower", name)
			}
			ret, params, _ := mokcir.IntrinsicSignature(name)
			m := llir.NewModule()
			decl := m.NewFunc(name, ret)
			for _, p := range params {
				decl.Params = append(decl.Params, llir.NewParam("", p))
			}
			var kps []*llir.Param
			for i, p := range params {
				kps = append(kps, llir.NewParam(string(rune('a'+i)), p))
			}
			k := m.NewFunc("k", types.Void, kps...)
			b := k.NewBlock("entry")
			var args []value.Value
			for i, p := range kps {
				args = append(args, p)
				if name == "llvm.ctlz.i32" && i == 1 {
					args[i] = constant.False // the is_zero_poison flag must be a constant
				}
			}
			b.NewCall(decl, args...)
			b.NewRet(nil)
			markKernel(m, k)
			for _, tg := range target.All() {
				text, err := Compile(m, tg)
				if err != nil {
					t.Fatalf("%s: %v", tg, err)
				}
				if _, err := toolchain.Ptxas(tg.String()); err != nil {
					if os.Getenv(toolchain.EnvRequire) == "1" {
						t.Fatal(err)
					}
					continue
				}
				if err := toolchain.Assemble(text, tg.String()); err != nil {
					t.Errorf("%s: %v\n%s", tg, err, numbered(text))
				}
			}
		})
	}
}

func markKernel(m *llir.Module, f *llir.Func) {
	md := &metadata.Tuple{MetadataID: -1, Fields: []metadata.Field{f, &metadata.String{Value: "kernel"}, constant.NewInt(types.I32, 1)}}
	m.NamedMetadataDefs["nvvm.annotations"] = &metadata.NamedDef{Name: "nvvm.annotations", Nodes: []metadata.Node{md}}
}

// TestIRBuilderKernels compiles kernels built with package ir's builder
// (typed by llir's builder, not its text parser): a bf16 elementwise kernel
// and a kernel taking a tensor map (ir.TensorMapParam, annotated
// grid_constant) whose address goes to inline PTX; both assemble.
func TestIRBuilderKernels(t *testing.T) {
	m := mokcir.NewModule("builder")
	k := m.Kernel("scale_bf16",
		mokcir.P("x", mokcir.GlobalPtr(mokcir.I16)), mokcir.P("y", mokcir.GlobalPtr(mokcir.I16)),
		mokcir.P("alpha", mokcir.F32), mokcir.P("n", mokcir.I32))
	k.MaxThreads(256)
	i := k.GlobalThreadIdx()
	k.If(k.ICmp(enum.IPredSLT, i, k.Param("n")), func() {
		x := k.BF16ToF32(k.Load(k.Index(k.Param("x"), i)))
		y := k.FMul(x, k.Param("alpha"))
		k.Store(k.F32ToBF16(y), k.Index(k.Param("y"), i))
	})
	tk := m.Kernel("tmap_addr", mokcir.TensorMapParam("tmap"), mokcir.P("out", mokcir.GlobalPtr(mokcir.I64)))
	addr := tk.PtrToInt(tk.Param("tmap"))
	tk.Asm("prefetch.tensormap [$0];", "l", addr)
	tk.Store(addr, tk.Param("out"))
	mod, err := m.Finish()
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range []target.Target{target.SM90a, target.SM100a} {
		r, err := CompileModule(mod, tg)
		if err != nil {
			t.Fatalf("%s: %v", tg, err)
		}
		if len(r.Kernels) != 2 || r.Kernels[0].MaxThreads != 256 || !r.Kernels[1].Params[0].ByVal || r.Kernels[1].Params[0].Align < 64 {
			t.Errorf("%s: kernels %+v", tg, r.Kernels)
		}
		toolchain.NeedPtxas(t, tg.String())
		if err := toolchain.Assemble(r.Text, tg.String()); err != nil {
			t.Errorf("%s: %v\n%s", tg, err, numbered(r.Text))
		}
	}
}
