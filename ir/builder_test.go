package ir_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/llir/llvm/ir/enum"
	"github.com/mokc/mokc/ir"
)

// build makes a module with kernel @k(x: i32 addrspace(1)*, f: float
// addrspace(1)*, n: i32), runs body, finishes it and returns the text.
func build(t *testing.T, body func(k *ir.Kernel)) string {
	t.Helper()
	m := ir.NewModule("t")
	k := m.Kernel("k", ir.P("x", ir.GlobalPtr(ir.I32)), ir.P("f", ir.GlobalPtr(ir.F32)), ir.P("n", ir.I32))
	body(k)
	if _, err := m.Finish(); err != nil {
		t.Fatalf("%v\n%s", err, m.String())
	}
	return m.String()
}

func wantText(t *testing.T, text string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			t.Errorf("IR lacks %q:\n%s", w, text)
		}
	}
}

func TestHelpersEmit(t *testing.T) {
	r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	c1 := 1 + r.Int64N(1000)
	lane := int64(1 << r.IntN(5))
	bar := 1 + r.Int64N(15)
	cnt := 32 * (1 + r.Int64N(32))
	maxT := 32 * (1 + r.IntN(32))
	cases := []struct {
		name  string
		body  func(k *ir.Kernel)
		wants []string
	}{
		{"special registers", func(k *ir.Kernel) {
			k.Store(k.Add(k.Add(k.ThreadIdx(ir.Y), k.BlockIdx(ir.Z)), k.Add(k.BlockDim(ir.X), k.GridDim(ir.Y))), k.Param("x"))
			k.Store(k.LaneID(), k.Param("x"))
		}, []string{"call i32 @llvm.nvvm.read.ptx.sreg.tid.y()", "call i32 @llvm.nvvm.read.ptx.sreg.ctaid.z()",
			"call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()", "call i32 @llvm.nvvm.read.ptx.sreg.nctaid.y()",
			"call i32 @llvm.nvvm.read.ptx.sreg.laneid()", "declare i32 @llvm.nvvm.read.ptx.sreg.tid.y()"}},
		{"arithmetic", func(k *ir.Kernel) {
			n := k.Param("n")
			v := k.Xor(k.Or(k.And(k.Shl(n, ir.Int32(c1)), n), k.LShr(n, ir.Int32(3))), k.AShr(n, ir.Int32(2)))
			v = k.SRem(k.URem(k.SDiv(k.UDiv(k.Mul(k.Sub(v, n), n), n), n), n), n)
			k.Store(v, k.Param("x"))
		}, []string{fmt.Sprintf("shl i32 %%n, %d", c1), "and i32", "lshr i32 %n, 3", "or i32", "ashr i32 %n, 2",
			"xor i32", "sub i32", "mul i32", "udiv i32", "sdiv i32", "urem i32", "srem i32"}},
		{"barriers", func(k *ir.Kernel) {
			k.SyncThreads()
			k.BarrierSync(ir.Int32(bar), ir.Int32(cnt))
			k.BarrierSyncAll(ir.Int32(bar))
			k.SyncWarp(ir.FullMask)
		}, []string{"call void @llvm.nvvm.barrier0()",
			fmt.Sprintf("call void @llvm.nvvm.barrier.sync.cnt(i32 %d, i32 %d)", bar, cnt),
			fmt.Sprintf("call void @llvm.nvvm.barrier.sync(i32 %d)", bar),
			"call void @llvm.nvvm.bar.warp.sync(i32 -1)"}},
		{"shuffles", func(k *ir.Kernel) {
			v := k.Load(k.Param("x"))
			v = k.ShflBfly(ir.FullMask, v, ir.Int32(lane))
			v = k.ShflDown(ir.FullMask, v, ir.Int32(lane))
			v = k.ShflUp(ir.FullMask, v, ir.Int32(lane))
			v = k.ShflIdx(ir.FullMask, v, ir.Int32(lane))
			k.Store(v, k.Param("x"))
			k.Store(k.WarpSum(k.Load(k.Param("f"))), k.Param("f"))
		}, []string{fmt.Sprintf("@llvm.nvvm.shfl.sync.bfly.i32(i32 -1, i32 %%0, i32 %d, i32 31)", lane),
			fmt.Sprintf("@llvm.nvvm.shfl.sync.down.i32(i32 -1, i32 %%1, i32 %d, i32 31)", lane),
			fmt.Sprintf("@llvm.nvvm.shfl.sync.up.i32(i32 -1, i32 %%2, i32 %d, i32 0)", lane),
			fmt.Sprintf("@llvm.nvvm.shfl.sync.idx.i32(i32 -1, i32 %%3, i32 %d, i32 31)", lane),
			"@llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %5, i32 16, i32 31)",
			"@llvm.nvvm.shfl.sync.bfly.f32(i32 -1, float %13, i32 1, i32 31)"}},
		{"atomics", func(k *ir.Kernel) {
			k.AtomicAdd(k.Param("x"), ir.Int32(c1))
			k.AtomicAdd(k.Param("f"), ir.Float32(2.5))
			k.AtomicCAS(k.Param("x"), ir.Int32(c1), ir.Int32(c1+1))
			k.AtomicMax(k.Param("x"), ir.Int32(c1))
			k.AtomicExch(k.Param("x"), ir.Int32(c1))
		}, []string{fmt.Sprintf("atomicrmw add i32 addrspace(1)* %%x, i32 %d monotonic", c1),
			"atomicrmw fadd float addrspace(1)* %f, float 2.5 monotonic",
			fmt.Sprintf("cmpxchg i32 addrspace(1)* %%x, i32 %d, i32 %d monotonic monotonic", c1, c1+1),
			"extractvalue { i32, i1 } %2, 0", "extractvalue { i32, i1 } %2, 1",
			"atomicrmw max i32", "atomicrmw xchg i32"}},
		{"scoped memory order", func(k *ir.Kernel) {
			v := k.LoadAcquire(k.Param("x"), ir.ScopeGPU)
			k.StoreRelease(v, k.Param("x"), ir.ScopeCTA)
			k.RedAddRelease(k.Param("x"), ir.Int32(1), ir.ScopeSys)
			k.AtomicAddAcqRel(k.Param("x"), ir.Int32(1), ir.ScopeGPU)
			k.FenceAcqRel(ir.ScopeGPU)
			k.FenceSC(ir.ScopeCTA)
			k.FenceProxyAsync()
			k.MembarGPU()
		}, []string{`"ld.acquire.gpu.global.b32 $0, [$1];", "=r,l,~{memory}"(i32 addrspace(1)* %x)`,
			`"st.release.cta.global.b32 [$0], $1;", "l,r,~{memory}"`,
			`"red.release.sys.global.add.u32 [$0], $1;"`,
			`"atom.acq_rel.gpu.global.add.u32 $0, [$1], $2;", "=r,l,r,~{memory}"`,
			`asm sideeffect "fence.acq_rel.gpu;", "~{memory}"()`, `"fence.sc.cta;"`,
			`"fence.proxy.async.shared::cta;"`, "call void @llvm.nvvm.membar.gl()"}},
		{"conversions", func(k *ir.Kernel) {
			f := k.Load(k.Param("f"))
			b := k.F32ToBF16(f)
			k.Store(k.BF16ToF32(b), k.Param("f"))
			k.Store(k.F32x2ToBF16x2(f, f), k.Param("x"))
			hi, lo := k.E4M3x2ToF32x2(k.F32x2ToE4M3x2(f, f))
			k.Store(k.FAdd(hi, lo), k.Param("f"))
		}, []string{`call i16 asm sideeffect "cvt.rn.bf16.f32 $0, $1;", "=h,f,~{memory}"(float %0)`,
			"zext i16 %1 to i32", "shl i32 %2, 16", "bitcast i32 %3 to float",
			`"cvt.rn.bf16x2.f32 $0, $1, $2;", "=r,f,f,~{memory}"`,
			`"cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,f,f,~{memory}"`,
			`call { float, float } asm sideeffect`, "cvt.rn.f16x2.e4m3x2"}},
		{"memory and shared", func(k *ir.Kernel) {
			dyn := k.M.DynamicShared("dyn", 128)
			st := k.M.StaticShared("st", ir.Array(4, ir.F32), 16)
			p := k.SharedAt(dyn, ir.Int32(c1*4), ir.I32)
			k.Store(k.Load(k.Param("x")), p)
			q := k.GEP(st, ir.Int32(0), ir.Int32(2))
			k.StoreAlign(k.LoadVolatile(k.Param("f")), q, 4)
			g := k.ToGeneric(q)
			k.Store(k.LoadAlign(g, 4), k.Cast(k.ToSpace(g, ir.Shared), ir.F32))
			v := k.LoadAlign(k.Cast(k.Param("x"), ir.Vec(4, ir.I32)), 16)
			k.StoreAlign(k.InsertElement(v, k.ExtractElement(v, 3), 0), k.Cast(k.Param("x"), ir.Vec(4, ir.I32)), 16)
		}, []string{"@dyn = external addrspace(3) global [0 x i8], align 128",
			"@st = internal addrspace(3) global [4 x float] zeroinitializer, align 16",
			"bitcast [0 x i8] addrspace(3)* @dyn to i8 addrspace(3)*",
			fmt.Sprintf("getelementptr inbounds i8, i8 addrspace(3)* %%0, i32 %d", c1*4),
			"getelementptr inbounds [4 x float], [4 x float] addrspace(3)* @st, i32 0, i32 2",
			"load volatile float, float addrspace(1)* %f", "store float %5, float addrspace(3)* %4, align 4",
			"addrspacecast float addrspace(3)* %4 to float*", "addrspacecast float* %6 to float addrspace(3)*",
			"load <4 x i32>, <4 x i32> addrspace(1)* %9, align 16", "extractelement <4 x i32> %10, i32 3",
			"insertelement <4 x i32> %10, i32 %11, i32 0"}},
		{"byte offsets", func(k *ir.Kernel) {
			bp := k.Cast(k.Param("x"), ir.I8)
			p := k.ByteOffset(bp, k.Param("n"))
			q := k.ByteOffset(p, ir.Int64(c1))
			k.Store(k.LoadVolatileAlign(k.Cast(q, ir.I32), 4), k.Cast(p, ir.I32))
		}, []string{"bitcast i32 addrspace(1)* %x to i8 addrspace(1)*", "sext i32 %n to i64",
			"getelementptr i8, i8 addrspace(1)* %0, i64 %1",
			fmt.Sprintf("getelementptr i8, i8 addrspace(1)* %%2, i64 %d", c1),
			"load volatile i32, i32 addrspace(1)* %4, align 4"}},
		{"inline asm without the memory clobber", func(k *ir.Kernel) {
			f := k.Load(k.Param("f"))
			h := k.AsmCallNoMemory("cvt.rn.bf16.f32 $0, $1;", "=h,f", ir.I16, f)
			k.AsmCallNoMemory("st.u32 [$0], $1;", "l,r,~{memory}", ir.Void, k.Param("x"), k.ZExt(h, ir.I32))
		}, []string{`call i16 asm sideeffect "cvt.rn.bf16.f32 $0, $1;", "=h,f"(float %0)`,
			`call void asm sideeffect "st.u32 [$0], $1;", "l,r,~{memory}"(i32 addrspace(1)* %x, i32 %2)`}},
		{"inline asm", func(k *ir.Kernel) {
			outs := k.AsmCallN("mov.b32 $0, $2;\n\tmov.b32 $1, $2;", "=r,=r,r", []ir.Type{ir.I32, ir.I32}, k.Param("n"))
			k.Store(k.AsmCall("add.u32 $0, $0, $1;", "=r,0,r", ir.I32, outs[0], outs[1]), k.Param("x"))
			k.Asm("nanosleep.u32 $0;", "n", ir.Int32(c1))
			k.Asm("st.u32 [$0], $1;", "l,r,~{memory}", k.Param("x"), k.Param("n"))
		}, []string{`call { i32, i32 } asm sideeffect "mov.b32 $0, $2;\0A\09mov.b32 $1, $2;", "=r,=r,r,~{memory}"(i32 %n)`,
			`call i32 asm sideeffect "add.u32 $0, $0, $1;", "=r,0,r,~{memory}"(i32 %1, i32 %2)`,
			fmt.Sprintf(`call void asm sideeffect "nanosleep.u32 $0;", "n,~{memory}"(i32 %d)`, c1),
			`"l,r,~{memory}"(i32 addrspace(1)* %x, i32 %n)`}},
		{"math", func(k *ir.Kernel) {
			f := k.Load(k.Param("f"))
			f = k.FMA(f, f, k.Sqrt(k.FAbs(f)))
			f = k.FMin(k.FMax(f, k.Exp(f)), k.Rcp(f))
			k.Store(f, k.Param("f"))
			n := k.Param("n")
			k.Store(k.SMax(k.SMin(n, n), k.UMax(k.UMin(n, n), k.Popc(k.Clz(n)))), k.Param("x"))
		}, []string{"call float @llvm.fma.f32(", "call float @llvm.sqrt.f32(", "call float @llvm.fabs.f32(",
			"call float @llvm.maxnum.f32(", "call float @llvm.minnum.f32(", "call float @llvm.nvvm.rcp.rn.f(",
			"fmul float %3, 0x3FF7154760000000", "call float @llvm.nvvm.ex2.approx.f(",
			"call i32 @llvm.smax.i32(", "call i32 @llvm.umin.i32(", "call i32 @llvm.ctlz.i32(i32 %n, i1 false)",
			"call i32 @llvm.ctpop.i32("}},
		{"if/else with values", func(k *ir.Kernel) {
			c := k.ICmp(enum.IPredSGT, k.Param("n"), ir.Int32(c1))
			v := k.IfElseValues(c,
				func() []ir.Value { return []ir.Value{k.Add(k.Param("n"), ir.Int32(1))} },
				func() []ir.Value { return []ir.Value{ir.Int32(c1)} })
			k.IfElse(c, func() { k.Store(v[0], k.Param("x")) }, func() { k.SyncThreads() })
		}, []string{fmt.Sprintf("icmp sgt i32 %%n, %d", c1), "br i1 %0, label %if.then1, label %if.else2",
			fmt.Sprintf("phi i32 [ %%1, %%if.then1 ], [ %d, %%if.else2 ]", c1),
			"br i1 %0, label %if.then4, label %if.else5", "if.end6:"}},
		{"for with carried values", func(k *ir.Kernel) {
			out := k.ForCarry(ir.Int32(0), k.Param("n"), ir.Int32(c1), []ir.Value{ir.Float32(1)},
				func(i ir.Value, c []ir.Value) []ir.Value {
					return []ir.Value{k.FMul(c[0], k.SIToFP(i, ir.F32))}
				})
			k.Store(out[0], k.Param("f"))
			k.For(ir.Int32(0), ir.Int32(4), ir.Int32(1), func(i ir.Value) { k.Store(i, k.Param("x")) })
		}, []string{"for.head1:", "phi i32 [ 0, %entry ], [ %5, %for.body2 ]", "phi float [ 1.0, %entry ], [ %4, %for.body2 ]",
			"icmp slt i32 %0, %n", fmt.Sprintf("add i32 %%0, %d", c1), "br label %for.head1",
			"store float %1, float addrspace(1)* %f", "icmp slt i32 %6, 4"}},
		{"switch", func(k *ir.Kernel) {
			k.Switch(k.Param("n"), func() { k.SyncThreads() },
				ir.Case{Value: c1, Body: func() { k.Store(ir.Int32(c1), k.Param("x")) }},
				ir.Case{Value: c1 + 1, Body: func() { k.Store(ir.Float32(1), k.Param("f")) }})
		}, []string{fmt.Sprintf("switch i32 %%n, label %%sw.default2 [\n\t\ti32 %d, label %%sw.case3\n\t\ti32 %d, label %%sw.case4\n\t]", c1, c1+1),
			fmt.Sprintf("sw.case3:\n\tstore i32 %d, i32 addrspace(1)* %%x\n\tbr label %%sw.end1", c1),
			"sw.default2:\n\tcall void @llvm.nvvm.barrier0()\n\tbr label %sw.end1", "sw.end1:\n\tret void"}},
		{"loop", func(k *ir.Kernel) {
			k.Loop(func() ir.Value {
				return k.ICmp(enum.IPredEQ, k.LoadVolatile(k.Param("x")), ir.Int32(0))
			})
		}, []string{"br label %loop.body1", "load volatile i32", "br i1 %1, label %loop.body1, label %loop.end2"}},
		{"annotations", func(k *ir.Kernel) {
			k.MaxThreads(maxT).MinBlocksPerSM(2).MaxRegisters(168)
		}, []string{fmt.Sprintf(`!"kernel", i32 1, !"maxntidx", i32 %d, !"minctasm", i32 2, !"maxnreg", i32 168`, maxT)}},
		{"device function", func(k *ir.Kernel) {
			g := k.M.DeviceFunc("twice", ir.I32, ir.P("v", ir.I32))
			g.Ret(g.Add(g.Param("v"), g.Param("v")))
			k.Store(k.Call(g, k.Param("n")), k.Param("x"))
		}, []string{"define internal i32 @twice(i32 %v)", "call i32 @twice(i32 %n)"}},
		{"alloca goes to the entry block", func(k *ir.Kernel) {
			k.If(ir.Bool(true), func() {
				a := k.Alloca(ir.I32)
				k.Store(k.Param("n"), a)
			})
		}, []string{"entry:\n\t%0 = alloca i32\n"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantText(t, build(t, c.body), c.wants...)
		})
	}
}

func TestTensorMapParam(t *testing.T) {
	m := ir.NewModule("t")
	k := m.Kernel("k", ir.P("a", ir.I32), ir.TensorMapParam("tm"), ir.TensorMapParam("tm2"))
	k.Asm("prefetch.tensormap [$0];", "l", k.PtrToInt(k.Param("tm2")))
	if _, err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	wantText(t, m.String(),
		"define void @k(i32 %a, [128 x i8]* byval([128 x i8]) align 64 %tm, [128 x i8]* byval([128 x i8]) align 64 %tm2)",
		"ptrtoint [128 x i8]* %tm2 to i64",
		`!"grid_constant", !{i32 2, i32 3}`)
}

// TestAppendParam: a parameter appended to a finished kernel (FuncNamed)
// follows the others in its signature and keeps the tensor maps'
// grid_constant positions; FuncNamed of an unknown name is nil; a tensor
// map, an untyped or a duplicate name is an error of Finish.
func TestAppendParam(t *testing.T) {
	m := ir.NewModule("t")
	k := m.Kernel("k", ir.P("a", ir.I32), ir.TensorMapParam("tm"))
	k.Ret(nil)
	f := m.FuncNamed("k")
	if f == nil || m.FuncNamed("nope") != nil {
		t.Fatalf("FuncNamed(k) = %v, FuncNamed(nope) = %v", f, m.FuncNamed("nope"))
	}
	p := f.AppendParam(ir.P("extra", ir.GlobalPtr(ir.I8)))
	if !p.Type().Equal(ir.GlobalPtr(ir.I8)) {
		t.Errorf("appended parameter of type %v", p.Type())
	}
	if _, err := m.Finish(); err != nil {
		t.Fatal(err)
	}
	wantText(t, m.String(),
		"define void @k(i32 %a, [128 x i8]* byval([128 x i8]) align 64 %tm, i8 addrspace(1)* %extra)",
		`!"grid_constant", !{i32 2}`)
	for name, bad := range map[string]ir.Param{
		"tensor map": ir.TensorMapParam("tm2"),
		"untyped":    {Name: "u"},
		"duplicate":  ir.P("a", ir.I32),
	} {
		m := ir.NewModule("t")
		m.Kernel("k", ir.P("a", ir.I32)).Ret(nil)
		m.FuncNamed("k").AppendParam(bad)
		if _, err := m.Finish(); err == nil || !strings.Contains(err.Error(), "appended parameter") {
			t.Errorf("%s: Finish error %v", name, err)
		}
	}
}

// TestBuilderErrors: bad input to a helper is reported by Finish, naming the
// function and the problem, and never panics.
func TestBuilderErrors(t *testing.T) {
	cases := []struct {
		name string
		body func(m *ir.Module, k *ir.Kernel)
		want string
	}{
		{"add of mixed types", func(m *ir.Module, k *ir.Kernel) { k.Add(k.Param("n"), ir.Int64(1)) }, "add: operands must be integers of one type, got i32 and i64"},
		{"fadd of ints", func(m *ir.Module, k *ir.Kernel) { k.FAdd(k.Param("n"), k.Param("n")) }, "fadd: operands must be floats"},
		{"load of a non-pointer", func(m *ir.Module, k *ir.Kernel) { k.Load(k.Param("n")) }, "load: i32 is not a pointer"},
		{"store type mismatch", func(m *ir.Module, k *ir.Kernel) { k.Store(ir.Float32(1), k.Param("x")) }, "store: cannot store float through i32 addrspace(1)*"},
		{"bad alignment", func(m *ir.Module, k *ir.Kernel) { k.LoadAlign(k.Param("x"), 3) }, "alignment 3 is not a power of two"},
		{"shuffle of i64", func(m *ir.Module, k *ir.Kernel) { k.ShflBfly(ir.FullMask, ir.Int64(1), ir.Int32(1)) }, "shfl.sync.bfly: value is i64"},
		{"asm constraint count", func(m *ir.Module, k *ir.Kernel) { k.Asm("mov.u32 $0, $1;", "r", k.Param("n"), k.Param("n")) }, "1 input constraints for 2 arguments"},
		{"asm output type", func(m *ir.Module, k *ir.Kernel) { k.AsmCall("mov.u32 $0, 1;", "=r", ir.I64) }, "constraint =r does not fit i64"},
		{"if on i32", func(m *ir.Module, k *ir.Kernel) { k.If(k.Param("n"), func() {}) }, "if: condition is i32, want i1"},
		{"for bounds types", func(m *ir.Module, k *ir.Kernel) {
			k.For(ir.Int32(0), ir.Int64(4), ir.Int32(1), func(ir.Value) {})
		}, "for: lo, hi, step must be i32 or i64 of one type"},
		{"carried type change", func(m *ir.Module, k *ir.Kernel) {
			k.ForCarry(ir.Int32(0), ir.Int32(4), ir.Int32(1), []ir.Value{ir.Int32(0)},
				func(i ir.Value, c []ir.Value) []ir.Value { return []ir.Value{ir.Float32(1)} })
		}, "for: carried value 0 is float, want i32"},
		{"after terminator", func(m *ir.Module, k *ir.Kernel) { k.Ret(nil); k.SyncThreads() }, "after the terminator of block %entry"},
		{"ret value from void", func(m *ir.Module, k *ir.Kernel) { k.Ret(ir.Int32(1)) }, "ret: returning i32 from a function returning void"},
		{"max threads", func(m *ir.Module, k *ir.Kernel) { k.MaxThreads(2048) }, "maxntidx 2048 out of range"},
		{"dynamic shared alignment", func(m *ir.Module, k *ir.Kernel) { m.DynamicShared("d", 24) }, "alignment 24 is not a power of two"},
		{"duplicate global", func(m *ir.Module, k *ir.Kernel) { m.DynamicShared("d", 16); m.StaticShared("d", ir.I32, 4) }, "global @d defined twice"},
		{"unknown parameter", func(m *ir.Module, k *ir.Kernel) { k.Param("nope") }, "no parameter \"nope\""},
		{"unknown intrinsic", func(m *ir.Module, k *ir.Kernel) { k.CallIntrinsic("llvm.nvvm.nope") }, "unknown intrinsic llvm.nvvm.nope"},
		{"intrinsic argument", func(m *ir.Module, k *ir.Kernel) { k.CallIntrinsic("llvm.nvvm.barrier.sync", ir.Int64(0)) }, "argument 0 is i64, want i32"},
		{"addrspacecast global to shared", func(m *ir.Module, k *ir.Kernel) { k.ToSpace(k.Param("x"), ir.Shared) }, "addrspacecast: cannot convert"},
		{"bitcast size", func(m *ir.Module, k *ir.Kernel) { k.BitCast(k.Param("n"), ir.I64) }, "bitcast: cannot convert i32 to i64"},
		{"atomic on const", func(m *ir.Module, k *ir.Kernel) {
			c := m.ConstArray("c", ir.Const, ir.I32, []int64{1, 2})
			k.AtomicAdd(k.GEP(c, ir.Int32(0), ir.Int32(1)), ir.Int32(1))
		}, "address space 4 is not generic, global or shared"},
		{"acquire on float", func(m *ir.Module, k *ir.Kernel) { k.LoadAcquire(k.Param("f"), ir.ScopeGPU) }, "ld.acquire: float addrspace(1)* is not a pointer to i32 or i64"},
		{"bad scope", func(m *ir.Module, k *ir.Kernel) { k.FenceSC("block") }, "scope \"block\" is not cta, cluster, gpu or sys"},
		{"tensor map on device function", func(m *ir.Module, k *ir.Kernel) { m.DeviceFunc("g", ir.Void, ir.TensorMapParam("t")) }, "only allowed on kernels"},
		{"extract out of range", func(m *ir.Module, k *ir.Kernel) { k.ExtractElement(ir.Undef(ir.Vec(2, ir.I32)), 2) }, "extractelement: index 2"},
		{"call arity", func(m *ir.Module, k *ir.Kernel) {
			g := m.DeviceFunc("g", ir.Void, ir.P("a", ir.I32))
			g.Ret(nil)
			k.Call(g)
		}, "call @g: 0 arguments for 1 parameters"},
		{"switch duplicate", func(m *ir.Module, k *ir.Kernel) {
			k.Switch(k.Param("n"), nil, ir.Case{Value: 1, Body: func() {}}, ir.Case{Value: 1, Body: func() {}})
		}, "switch: duplicate case 1"},
		{"byte offset of an i32 pointer", func(m *ir.Module, k *ir.Kernel) { k.ByteOffset(k.Param("x"), ir.Int64(4)) }, "byte offset: base i32 addrspace(1)* is not an i8 pointer"},
		{"byte offset by i16", func(m *ir.Module, k *ir.Kernel) { k.ByteOffset(k.Cast(k.Param("x"), ir.I8), ir.Int16(4)) }, "byte offset: offset i16 is not i32 or i64"},
		{"asm without clobber checks constraints", func(m *ir.Module, k *ir.Kernel) { k.AsmCallNoMemory("mov.u32 $0, 1;", "=r", ir.I64) }, "constraint =r does not fit i64"},
		{"bf16 from float", func(m *ir.Module, k *ir.Kernel) { k.BF16ToF32(ir.Float32(1)) }, "bf16→f32: value is float, want i16"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := ir.NewModule("t")
			k := m.Kernel("k", ir.P("x", ir.GlobalPtr(ir.I32)), ir.P("f", ir.GlobalPtr(ir.F32)), ir.P("n", ir.I32))
			c.body(m, k)
			_, err := m.Finish()
			if err == nil {
				t.Fatalf("Finish accepted:\n%s", m.String())
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "ir: ") {
				t.Fatalf("error %q does not mention %q", err, c.want)
			}
		})
	}
}
