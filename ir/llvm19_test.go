package ir_test

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/llir/llvm/ir/enum"

	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/ir"
)

func TestOpaquePointers(t *testing.T) {
	cases := []struct{ in, want string }{
		{"load i32, i32* %p", "load i32, ptr %p"},
		{"load i32, i32 addrspace(1)* %p", "load i32, ptr addrspace(1) %p"},
		{"i32** %p", "ptr %p"},
		{"i8 addrspace(3)* addrspace(1)* %p", "ptr addrspace(1) %p"},
		{"[4 x i8*]* %p", "ptr %p"},
		{"{ i32*, [2 x float addrspace(3)*] } addrspace(1)* %p", "ptr addrspace(1) %p"},
		{"{ i32*, float }", "{ ptr, float }"},
		{"<2 x i32>* %v", "ptr %v"},
		{"<{ i8, i32 }>* %v", "ptr %v"},
		{"void (i16 addrspace(1)*, [128 x i8]*)* @k", "ptr @k"},
		{"i32 (i32 (i8*)*, ...)* @f", "ptr @f"},
		{"[128 x i8]* byval([128 x i8]) align 64 %tmap", "ptr byval([128 x i8]) align 64 %tmap"},
		{"i8* byval(i8*) %q", "ptr byval(ptr) %q"},
		{"%T* %x", "ptr %x"},
		{"getelementptr ([0 x i8], [0 x i8] addrspace(3)* @s, i64 0, i64 4)", "getelementptr ([0 x i8], ptr addrspace(3) @s, i64 0, i64 4)"},
		{`call void asm sideeffect "st.u32 [$0], *x; // a*b", "l"(i32* %p)`, `call void asm sideeffect "st.u32 [$0], *x; // a*b", "l"(ptr %p)`},
		{"!0 = !{void (float*)* @k, !\"kernel*\", i32 1}", "!0 = !{ptr @k, !\"kernel*\", i32 1}"},
		{"; comment with * star\nload i8, i8* %p", "; comment with * star\nload i8, ptr %p"},
	}
	for _, c := range cases {
		got, err := ir.OpaquePointers(c.in)
		if err != nil {
			t.Errorf("OpaquePointers(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("OpaquePointers(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, bad := range []string{"x = 3 * 4", "* %p", "store i32 1, \"unterminated"} {
		if got, err := ir.OpaquePointers(bad); err == nil {
			t.Errorf("OpaquePointers(%q) = %q, want an error", bad, got)
		}
	}
}

// fixtures are modules built with the helpers, covering every group of them.
// Each must pass Check, llc-19 and ptxas.
var fixtures = map[string]func(m *ir.Module){
	"elementwise": buildScaleBF16,
	"intrinsics":  buildAllIntrinsics,
	"reduction":   buildBlockSum,
	"shuffles": func(m *ir.Module) {
		k := m.Kernel("shuffles", ir.P("x", ir.GlobalPtr(ir.I32)), ir.P("y", ir.GlobalPtr(ir.F32)))
		i := k.ThreadIdx(ir.X)
		px, py := k.Index(k.Param("x"), i), k.Index(k.Param("y"), i)
		a, b := k.Load(px), k.Load(py)
		a = k.ShflDown(ir.FullMask, a, ir.Int32(1))
		a = k.ShflUp(ir.FullMask, a, ir.Int32(2))
		a = k.ShflIdx(ir.FullMask, a, ir.Int32(3))
		a = k.Add(a, k.Ballot(ir.FullMask, k.ICmp(enum.IPredSGT, a, ir.Int32(0))))
		b = k.WarpMax(b)
		k.SyncWarp(ir.FullMask)
		k.Store(a, px)
		k.Store(b, py)
	},
	"shared": func(m *ir.Module) {
		dyn := m.DynamicShared("dsmem", 1024)
		st := m.StaticShared("tile", ir.Array(64, ir.Vec(4, ir.I32)), 16)
		k := m.Kernel("shared", ir.P("x", ir.GlobalPtr(ir.Vec(4, ir.I32))), ir.P("off", ir.I32))
		k.MaxThreads(128).MinBlocksPerSM(2).MaxRegisters(128)
		i := k.ThreadIdx(ir.X)
		v := k.LoadAlign(k.Index(k.Param("x"), i), 16)
		slot := k.GEP(st, ir.Int32(0), k.And(i, ir.Int32(63)))
		k.StoreAlign(v, slot, 16)
		k.BarrierSync(ir.Int32(1), ir.Int32(128))
		w := k.LoadAlign(slot, 16)
		e := k.Add(k.ExtractElement(w, 0), k.ExtractElement(w, 3))
		d := k.SharedAt(dyn, k.Param("off"), ir.I32)
		k.Store(e, d)
		k.BarrierSyncAll(ir.Int32(2))
		gen := k.ToGeneric(d)
		k.StoreVolatile(k.LoadVolatile(gen), gen)
		k.Store(k.InsertElement(w, e, 1), k.Index(k.Param("x"), i))
	},
	"atomics": func(m *ir.Module) {
		k := m.Kernel("atomics", ir.P("c", ir.GlobalPtr(ir.I32)), ir.P("f", ir.GlobalPtr(ir.F32)),
			ir.P("l", ir.GlobalPtr(ir.I64)))
		one := ir.Int32(1)
		old := k.AtomicAdd(k.Param("c"), one)
		k.AtomicAdd(k.Param("f"), ir.Float32(0.5))
		k.AtomicMax(k.Param("c"), old)
		k.AtomicExch(k.Param("l"), ir.Int64(7))
		k.AtomicRMW(enum.AtomicOpUMin, k.Param("c"), old)
		k.AtomicRMW(enum.AtomicOpFAdd, k.Param("f"), ir.Float32(-1.25))
		ctr := k.Param("c")
		k.RedAddRelease(ctr, one, ir.ScopeGPU)
		k.StoreRelease(k.LoadAcquire(ctr, ir.ScopeGPU), ctr, ir.ScopeCTA)
		k.AtomicAddAcqRel(k.Param("l"), ir.Int64(2), ir.ScopeSys)
		sh := k.ToSpace(k.ToGeneric(k.Param("l")), ir.Global)
		k.LoadAcquire(sh, ir.ScopeCluster)
		prev, ok := k.AtomicCAS(k.Param("c"), old, k.Add(old, one))
		k.If(ok, func() { k.Store(prev, k.Param("c")) })
		k.MembarCTA()
		k.MembarGPU()
		k.MembarSys()
		k.FenceAcqRel(ir.ScopeGPU)
		k.FenceSC(ir.ScopeCTA)
	},
	"inline_asm": func(m *ir.Module) {
		k := m.Kernel("inline_asm", ir.P("x", ir.GlobalPtr(ir.F32)), ir.P("y", ir.GlobalPtr(ir.I32)))
		p := k.Index(k.Param("x"), k.ThreadIdx(ir.X))
		a := k.Load(p)
		hi, lo := k.E4M3x2ToF32x2(k.F32x2ToE4M3x2(a, k.FNeg(a)))
		packed := k.F32x2ToBF16x2(hi, lo)
		outs := k.AsmCallN("add.u32 $0, $2, $3;\n\tmov.u32 $1, %laneid;", "=r,=r,r,n",
			[]ir.Type{ir.I32, ir.I32}, packed, ir.Int32(3))
		sum := k.AsmCall("add.u32 $0, $0, $1;", "=r,0,r", ir.I32, outs[0], outs[1])
		k.Asm("st.global.u32 [$0], $1;", "l,r", k.Param("y"), sum)
		k.Store(k.FAdd(hi, lo), p)
		k.FenceProxyAsync()
	},
	"tensor_map": func(m *ir.Module) {
		smem := m.DynamicShared("smem", 128)
		k := m.Kernel("tma_load", ir.TensorMapParam("tmap"), ir.P("x", ir.I32))
		bar := k.SharedAt(smem, ir.Int32(0), ir.I64)
		dst := k.SharedBytes(smem, ir.Int32(128))
		tm := k.PtrToInt(k.Param("tmap"))
		k.Asm("prefetch.tensormap [$0];", "l", tm)
		k.Asm("mbarrier.init.shared::cta.b64 [$0], 1;", "r", k.Trunc(k.PtrToInt(bar), ir.I32))
		k.Asm("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {$2}], [$3];",
			"r,l,r,r", k.Trunc(k.PtrToInt(dst), ir.I32), tm, k.Param("x"), k.Trunc(k.PtrToInt(bar), ir.I32))
		k.Loop(func() ir.Value {
			done := k.AsmCall("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [$1], 0;\n\tselp.u32 $0, 1, 0, p;\n}",
				"=r,r", ir.I32, k.Trunc(k.PtrToInt(bar), ir.I32))
			return k.ICmp(enum.IPredEQ, done, ir.Int32(0))
		})
	},
	"math_and_control": func(m *ir.Module) {
		sq := m.DeviceFunc("square", ir.F32, ir.P("v", ir.F32))
		sq.Ret(sq.FMul(sq.Param("v"), sq.Param("v")))
		lut := m.ConstArray("lut", ir.Const, ir.I32, []int64{3, 1, 4, 1, 5, 9, 2, 6})
		k := m.Kernel("math", ir.P("x", ir.GlobalPtr(ir.F32)), ir.P("n", ir.I64))
		p := k.Index(k.Param("x"), k.ThreadIdx(ir.X))
		a := k.Load(p)
		a = k.FMA(a, k.Call(sq, a), k.Sqrt(k.FAbs(a)))
		a = k.FMin(k.FMax(a, k.Exp(a)), k.Rcp(k.Ex2(a)))
		a = k.FDiv(k.FSub(a, ir.Float32(1)), ir.Float32(3))
		t := k.ThreadIdx(ir.X)
		u := k.SMax(k.SMin(t, ir.Int32(5)), k.UMax(k.UMin(t, ir.Int32(9)), k.Popc(k.Clz(t))))
		u = k.Add(u, k.Load(k.GEP(lut, ir.Int32(0), k.And(t, ir.Int32(7)))))
		cnt := k.ForCarry(ir.Int64(0), k.Param("n"), ir.Int64(2), []ir.Value{u, a},
			func(i ir.Value, c []ir.Value) []ir.Value {
				r := k.IfElseValues(k.ICmp(enum.IPredEQ, k.SRem(i, ir.Int64(4)), ir.Int64(0)),
					func() []ir.Value { return []ir.Value{k.Shl(c[0], ir.Int32(1)), c[1]} },
					func() []ir.Value { return []ir.Value{k.AShr(c[0], ir.Int32(1)), k.FAdd(c[1], ir.Float32(2))} })
				return r
			})
		local := k.Alloca(ir.Array(4, ir.F32))
		slot := k.GEP(local, ir.Int32(0), k.And(t, ir.Int32(3)))
		k.Store(cnt[1], slot)
		v := k.SIToFP(k.Trunc(k.SExt(cnt[0], ir.I64), ir.I32), ir.F32)
		v = k.Select(k.FCmp(enum.FPredOLT, v, k.Load(slot)), v, k.UIToFP(k.ZExt(t, ir.I64), ir.F32))
		h := k.FPTrunc(v, ir.F16)
		d := k.FPExt(h, ir.F64)
		k.Store(k.SIToFP(k.FPToSI(d, ir.I32), ir.F32), p)
		k.Store(k.UIToFP(k.FPToUI(v, ir.I16), ir.F32), p)
		k.Switch(k.LShr(t, ir.Int32(5)), nil,
			ir.Case{Value: 0, Body: func() { k.Store(ir.Float32(3), p) }},
			ir.Case{Value: 3, Body: func() { k.Store(ir.Float32(4), p) }})
		_ = k.Clock64()
		_ = k.GlobalTimer()
		_ = k.SMID()
		k.If(k.ICmp(enum.IPredEQ, k.GridDim(ir.Y), k.BlockDim(ir.Z)), func() {
			k.Store(k.BitCast(k.Add(k.BlockIdx(ir.Z), k.WarpID()), ir.F32), p)
		})
	},
}

// buildAllIntrinsics calls every intrinsic of the subset once, so that llc-19
// proves it knows each name and signature (an unknown one becomes an
// .extern .func call, which the test refuses).
func buildAllIntrinsics(m *ir.Module) {
	k := m.Kernel("intrinsics", ir.P("out", ir.GlobalPtr(ir.I32)), ir.P("fout", ir.GlobalPtr(ir.F32)),
		ir.P("lout", ir.GlobalPtr(ir.I64)))
	x := k.Load(k.Param("out"))
	fx := k.Load(k.Param("fout"))
	for _, name := range ir.Intrinsics() {
		_, params, _ := ir.IntrinsicSignature(name)
		args := make([]ir.Value, len(params))
		for i, p := range params {
			switch {
			case p.Equal(ir.I1):
				args[i] = ir.Bool(false)
			case p.Equal(ir.F32) || p.Equal(ir.F64):
				args[i] = fx
				if p.Equal(ir.F64) {
					args[i] = k.FPExt(fx, ir.F64)
				}
			case strings.HasPrefix(name, "llvm.nvvm.shfl") && i == 3:
				args[i] = ir.Int32(31)
			case strings.HasPrefix(name, "llvm.nvvm.shfl") && i == 0, strings.HasPrefix(name, "llvm.nvvm.vote"),
				name == "llvm.nvvm.bar.warp.sync":
				args[i] = ir.FullMask
			case strings.HasPrefix(name, "llvm.nvvm.barrier"):
				args[i] = ir.Int32(int64(i) * 64)
			case p.Equal(ir.I64):
				args[i] = k.SExt(x, ir.I64)
			default:
				args[i] = x
			}
		}
		r := k.CallIntrinsic(name, args...)
		switch {
		case r == nil:
		case r.Type().Equal(ir.I32):
			k.Store(r, k.Param("out"))
		case r.Type().Equal(ir.I64):
			k.Store(r, k.Param("lout"))
		case r.Type().Equal(ir.F32):
			k.Store(r, k.Param("fout"))
		case r.Type().Equal(ir.F64):
			k.Store(k.FPTrunc(r, ir.F32), k.Param("fout"))
		}
	}
}

func buildFixture(t *testing.T, name string) string {
	t.Helper()
	m := ir.NewModule(name)
	fixtures[name](m)
	mod, err := m.Finish()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	text, err := ir.LLVM19Text(mod)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if again, err := ir.OpaquePointers(text); err != nil || again != text {
		t.Fatalf("%s: typed pointer left in LLVM 19 text", name)
	}
	return text
}

func TestFixturesPassCheck(t *testing.T) {
	for name := range fixtures {
		buildFixture(t, name)
	}
}

// TestLLC compiles every fixture with llc-19 for sm_90a and assembles the
// result with ptxas.
func TestLLC(t *testing.T) {
	toolchain.NeedLLC(t)
	for name := range fixtures {
		t.Run(name, func(t *testing.T) {
			text := buildFixture(t, name)
			ptx, err := toolchain.CompileLLC(text, "sm_90a")
			if err != nil {
				t.Fatalf("%v\n--- input ---\n%s", err, text)
			}
			if !strings.Contains(ptx, ".entry") {
				t.Fatalf("no .entry in llc output:\n%s", ptx)
			}
			if strings.Contains(ptx, ".extern .func") {
				t.Errorf("llc-19 does not know an intrinsic (became .extern .func):\n%s", ptx)
			}
			if name == "tensor_map" && !strings.Contains(ptx, "cvta.param") {
				t.Errorf("tensor map parameter not addressed with cvta.param:\n%s", ptx)
			}
			if _, err := toolchain.Ptxas("sm_90a"); err != nil {
				return
			}
			if err := toolchain.Assemble(ptx, "sm_90a"); err != nil {
				t.Fatalf("%v\n--- ptx ---\n%s", err, ptx)
			}
		})
	}
}

// TestLLCRandomConstants checks that constants reach llc's PTX: a kernel
// stores fresh random constants, which must appear in the output.
func TestLLCRandomConstants(t *testing.T) {
	toolchain.NeedLLC(t)
	m := ir.NewModule("consts")
	k := m.Kernel("consts", ir.P("y", ir.GlobalPtr(ir.I32)))
	vals := make([]int64, 4)
	for i := range vals {
		vals[i] = 1000 + rand.Int64N(1<<30)
		k.Store(ir.Int32(vals[i]), k.Index(k.Param("y"), ir.Int32(int64(i))))
	}
	mod, err := m.Finish()
	if err != nil {
		t.Fatal(err)
	}
	text, err := ir.LLVM19Text(mod)
	if err != nil {
		t.Fatal(err)
	}
	out, err := toolchain.CompileLLC(text, "sm_90a")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vals {
		if !strings.Contains(out, strconv.FormatInt(v, 10)) {
			t.Errorf("constant %d missing from PTX:\n%s", v, out)
		}
	}
}
