package ir_test

import (
	"fmt"

	"github.com/llir/llvm/ir/enum"
	"github.com/mokc/mokc/ir"
)

// buildScaleBF16 builds y[i] = bf16(alpha * f32(x[i])) over n elements, one
// element per thread.
func buildScaleBF16(m *ir.Module) {
	k := m.Kernel("scale_bf16",
		ir.P("x", ir.GlobalPtr(ir.I16)), ir.P("y", ir.GlobalPtr(ir.I16)),
		ir.P("alpha", ir.F32), ir.P("n", ir.I32))
	k.MaxThreads(256)
	i := k.GlobalThreadIdx()
	k.If(k.ICmp(enum.IPredSLT, i, k.Param("n")), func() {
		x := k.BF16ToF32(k.Load(k.Index(k.Param("x"), i)))
		y := k.FMul(x, k.Param("alpha"))
		k.Store(k.F32ToBF16(y), k.Index(k.Param("y"), i))
	})
}

// buildBlockSum builds out[blockIdx.x] = sum of x[blockIdx.x*n + j], j < n,
// with 256 threads: a strided loop, a warp butterfly, one partial per warp
// in static shared memory, and a final warp reduction.
func buildBlockSum(m *ir.Module) {
	const threads, warps = 256, 256 / 32
	part := m.StaticShared("partial", ir.Array(warps, ir.F32), 16)
	k := m.Kernel("block_sum",
		ir.P("x", ir.GlobalPtr(ir.F32)), ir.P("out", ir.GlobalPtr(ir.F32)), ir.P("n", ir.I32))
	k.MaxThreads(threads)
	tid := k.ThreadIdx(ir.X)
	row := k.Index(k.Param("x"), k.Mul(k.BlockIdx(ir.X), k.Param("n")))
	acc := k.ForCarry(tid, k.Param("n"), ir.Int32(threads), []ir.Value{ir.Float32(0)},
		func(j ir.Value, c []ir.Value) []ir.Value {
			return []ir.Value{k.FAdd(c[0], k.Load(k.Index(row, j)))}
		})[0]
	s := k.WarpSum(acc)
	lane, warp := k.LaneID(), k.LShr(tid, ir.Int32(5))
	k.If(k.ICmp(enum.IPredEQ, lane, ir.Int32(0)), func() {
		k.Store(s, k.GEP(part, ir.Int32(0), warp))
	})
	k.SyncThreads()
	k.If(k.ICmp(enum.IPredEQ, warp, ir.Int32(0)), func() {
		v := k.IfElseValues(k.ICmp(enum.IPredULT, lane, ir.Int32(warps)),
			func() []ir.Value { return []ir.Value{k.Load(k.GEP(part, ir.Int32(0), lane))} },
			func() []ir.Value { return []ir.Value{ir.Float32(0)} })[0]
		t := k.WarpSum(v)
		k.If(k.ICmp(enum.IPredEQ, lane, ir.Int32(0)), func() {
			k.Store(t, k.Index(k.Param("out"), k.BlockIdx(ir.X)))
		})
	})
}

// An elementwise bf16 kernel: each thread scales one element.
func Example_elementwise() {
	m := ir.NewModule("scale")
	buildScaleBF16(m)
	if _, err := m.Finish(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(m.String())
	// Output:
	// source_filename = "scale"
	// target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
	// target triple = "nvptx64-nvidia-cuda"
	//
	// define void @scale_bf16(i16 addrspace(1)* %x, i16 addrspace(1)* %y, float %alpha, i32 %n) {
	// entry:
	// 	%0 = call i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
	// 	%1 = call i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
	// 	%2 = mul i32 %0, %1
	// 	%3 = call i32 @llvm.nvvm.read.ptx.sreg.tid.x()
	// 	%4 = add i32 %2, %3
	// 	%5 = icmp slt i32 %4, %n
	// 	br i1 %5, label %if.then1, label %if.end2
	//
	// if.then1:
	// 	%6 = getelementptr inbounds i16, i16 addrspace(1)* %x, i32 %4
	// 	%7 = load i16, i16 addrspace(1)* %6
	// 	%8 = zext i16 %7 to i32
	// 	%9 = shl i32 %8, 16
	// 	%10 = bitcast i32 %9 to float
	// 	%11 = fmul float %10, %alpha
	// 	%12 = call i16 asm sideeffect "cvt.rn.bf16.f32 $0, $1;", "=h,f,~{memory}"(float %11)
	// 	%13 = getelementptr inbounds i16, i16 addrspace(1)* %y, i32 %4
	// 	store i16 %12, i16 addrspace(1)* %13
	// 	br label %if.end2
	//
	// if.end2:
	// 	ret void
	// }
	//
	// declare i32 @llvm.nvvm.read.ptx.sreg.ctaid.x()
	//
	// declare i32 @llvm.nvvm.read.ptx.sreg.ntid.x()
	//
	// declare i32 @llvm.nvvm.read.ptx.sreg.tid.x()
	//
	// !nvvm.annotations = !{!0}
	//
	// !0 = !{void (i16 addrspace(1)*, i16 addrspace(1)*, float, i32)* @scale_bf16, !"kernel", i32 1, !"maxntidx", i32 256}
}

// A block reduction: strided loop with a loop-carried accumulator, warp
// shuffles, shared memory and a barrier. LLVM19Text gives llc-19 input.
func Example_blockReduction() {
	m := ir.NewModule("reduce")
	buildBlockSum(m)
	mod, err := m.Finish()
	if err != nil {
		fmt.Println(err)
		return
	}
	text, err := ir.LLVM19Text(mod)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(text) > 0)
	// Output: true
}
