//go:build cuda

package codegen_test

import (
	"math/rand/v2"
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/target"
)

// TestSM90SplitKGPU runs each split GEMM of codegen.SM90SplitKCases (mokc's
// PTX backend) on fresh random data: the split kernel writes its f32 parts
// (poisoned with NaN first, so a part left unwritten poisons its sums),
// the reduce kernel adds them and applies the epilogue into a poisoned
// bf16 C with canary rows, checked against the float64 reference of the
// GEMM as a layer defines it.
func TestSM90SplitKGPU(t *testing.T) {
	ctx, eng := engineOnGPU(t, target.SM90a, 90)
	cases := codegen.SM90SplitKCases()
	m, infos, reduces := codegen.SplitKModule(t, eng, cases)
	text, err := ptx.Compile(m.IR, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(rand.Uint64(), 31))
	for i, c := range cases {
		t.Run(c.Split.Name, func(t *testing.T) {
			d := sm90MakeData(r, c.Gemm)
			bufs := sm90GemmBuffers(t, ctx, c.Gemm, d, 3)
			out := bufs[codegen.RoleC]
			n := 4 * c.Split.SplitK * d.rows * c.Split.N
			parts, err := ctx.Alloc(n)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ctx.Free(parts) })
			if err := ctx.Memset(parts, 0xFF, n); err != nil {
				t.Fatal(err)
			}
			bufs[codegen.RoleC] = parts
			T := int64(d.rows)
			ki := infos[i]
			f := sm90Function(t, ctx, text, ki)
			grid := driver.Dim3{X: int(ki.Grid[0].Eval(T)), Y: int(ki.Grid[1].Eval(T)), Z: int(ki.Grid[2].Eval(T))}
			if err := f.Launch(grid, driver.Dim3{X: ki.Block, Y: 1, Z: 1}, ki.SharedBytes, nil, sm90GemmArgs(t, ctx, ki, bufs, d.rows)); err != nil {
				t.Fatal(err)
			}
			k := reduces[i]
			fr := sm90Function(t, ctx, text, codegen.KernelInfo{Name: k.Name})
			args := driver.NewArgs()
			args.Ptr(parts)
			args.Ptr(out)
			args.I32(int32(d.rows))
			grid = driver.Dim3{X: int(k.Grid[0].Eval(T)), Y: int(k.Grid[1].Eval(T)), Z: int(k.Grid[2].Eval(T))}
			if err := fr.Launch(grid, driver.Dim3{X: k.Block, Y: 1, Z: 1}, 0, nil, args); err != nil {
				t.Fatal(err)
			}
			if err := ctx.Synchronize(); err != nil {
				t.Fatal(err)
			}
			got := make([]uint16, (d.rows+3)*c.Gemm.Spec.N)
			if err := ctx.CopyFromDevice(got, out); err != nil {
				t.Fatal(err)
			}
			sm90Check(t, "split", c.Gemm, d, got, sm90Reference(c.Gemm, d))
		})
	}
}
