package ir_test

import (
	"strings"
	"testing"

	"github.com/llir/llvm/ir/enum"
	"github.com/mokc/mokc/ir"
)

// TestAbsorb: a kernel with an early return, a block barrier and block
// indices, absorbed twice-over into another kernel, becomes blocks of that
// kernel: its parameters are the given values, its %ctaid.x the loop's
// value, its bar.sync 0 a named barrier, its returns branches to the code
// after it; the source is gone from the module and its annotation with it,
// and the module passes its checks.
func TestAbsorb(t *testing.T) {
	m := ir.NewModule("absorb")
	src := m.Kernel("src", ir.P("x", ir.GlobalPtr(ir.F32)), ir.P("n", ir.I32))
	src.MaxThreads(256)
	b := src.BlockIdx(ir.X)
	src.If(src.ICmp(enum.IPredSGE, b, src.Param("n")), func() { src.Ret(nil) })
	src.SyncThreads()
	src.Store(ir.Float32(1), src.Index(src.Param("x"), b))
	src.Ret(nil)

	dst := m.Kernel("dst", ir.P("y", ir.GlobalPtr(ir.F32)), ir.P("T", ir.I32))
	dst.MaxThreads(384)
	dst.ForCarry(ir.Int32(0), dst.Param("T"), ir.Int32(1), nil, func(i ir.Value, _ []ir.Value) []ir.Value {
		dst.Absorb(src.Func, ir.Absorption{
			Args:       []ir.Value{dst.Param("y"), ir.Int32(7)},
			Intrinsics: map[string]ir.Value{"llvm.nvvm.read.ptx.sreg.ctaid.x": i},
			Barrier:    "bar.sync 1, 256;",
			Prefix:     "s.",
		})
		return nil
	})
	dst.Store(ir.Float32(2), dst.Param("y"))
	if _, err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	text := m.String()
	for _, want := range []string{"bar.sync 1, 256;", "s.entry", "s.absorb.exit"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	for _, gone := range []string{"@src(", "call i32 @llvm.nvvm.read.ptx.sreg.ctaid", "call void @llvm.nvvm.barrier0", "@src"} {
		if strings.Contains(text, gone) {
			t.Errorf("%q left in\n%s", gone, text)
		}
	}
	if f := m.FuncNamed("src"); f != nil {
		t.Error("src is still in the module")
	}
	if strings.Count(text, "ret void") != 1 {
		t.Errorf("want dst's one return, got\n%s", text)
	}
}
