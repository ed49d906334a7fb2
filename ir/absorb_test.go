package ir_test

import (
	"fmt"
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

// TestAbsorbCopy absorbs copies of one kernel's body into two kernels, one
// of them twice: the source stays as it was, each copy has values of its
// own (a phi over the source's blocks, a call, a getelementptr), and the
// module checks.
func TestAbsorbCopy(t *testing.T) {
	m := ir.NewModule("absorb_copy")
	src := m.Kernel("src", ir.P("x", ir.GlobalPtr(ir.F32)), ir.P("n", ir.I32))
	src.MaxThreads(256)
	b := src.BlockIdx(ir.X)
	v := src.ForCarry(ir.Int32(0), src.Param("n"), ir.Int32(1), []ir.Value{ir.Float32(0)}, func(i ir.Value, c []ir.Value) []ir.Value {
		return []ir.Value{src.FAdd(c[0], src.SIToFP(i, ir.F32))}
	})
	src.Store(v[0], src.Index(src.Param("x"), b))
	src.Ret(nil)
	before := src.IR.LLString()

	for _, name := range []string{"dst1", "dst2"} {
		dst := m.Kernel(name, ir.P("y", ir.GlobalPtr(ir.F32)), ir.P("T", ir.I32))
		dst.MaxThreads(256)
		for j := range 2 {
			dst.Absorb(src.Func, ir.Absorption{
				Args:       []ir.Value{dst.Param("y"), dst.Param("T")},
				Intrinsics: map[string]ir.Value{"llvm.nvvm.read.ptx.sreg.ctaid.x": ir.Int32(int64(j))},
				Prefix:     fmt.Sprintf("s%d.", j),
				Copy:       true,
			})
		}
		dst.Ret(nil)
	}
	if _, err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	if got := src.IR.LLString(); got != before {
		t.Errorf("the source changed:\n%s\nwas\n%s", got, before)
	}
	text := m.String()
	for _, want := range []string{"define void @src(", "s0.entry", "s1.absorb.exit", "phi float"} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in\n%s", want, text)
		}
	}
	for _, name := range []string{"dst1", "dst2"} {
		f := m.FuncNamed(name)
		if n := strings.Count(f.IR.LLString(), "phi float"); n != 2 {
			t.Errorf("%s: %d phis, want 2 (one per copy)", name, n)
		}
		for _, blk := range f.IR.Blocks {
			if blk.Parent != f.IR {
				t.Errorf("%s: block %s belongs to %s", name, blk.Name(), blk.Parent.Name())
			}
			for _, s := range blk.Term.Succs() {
				if s.Parent != f.IR {
					t.Errorf("%s: block %s branches to %s of %s", name, blk.Name(), s.Name(), s.Parent.Name())
				}
			}
		}
	}
}
