package selftest

import (
	"fmt"
	"math"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/target"
)

// The sm_90a wgmma self-test: one warpgroup computes C = A * B^T for
// A [64, K] and B [64, K] bf16 row-major (K-major operands) and C [64, 64]
// fp32 row-major, K = 64 * kblocks. Each K block of A and of B (64 rows x 64
// bf16 = 8 KB each) is loaded by one TMA box (cp.async.bulk.tensor.2d) with
// 128-byte swizzle into 1024-byte aligned shared memory, completing on one
// mbarrier whose phase parity flips every block (kblocks >= 2 exercises it);
// the warpgroup then issues four wgmma.mma_async m64n64k16 steps (K-major
// 128B-swizzled smem descriptors, start address advanced by 32 bytes per
// step), commits and waits. The accumulator fragment is stored directly.
const (
	// WGMMAKernel is the kernel symbol and the self-test case name
	// (testdata/llc/st_wgmma.ptx holds llc-19's PTX of it).
	WGMMAKernel = "st_wgmma"
	// WGMMAM, WGMMAN are the tile rows and columns; WGMMABK is the K block.
	WGMMAM  = 64
	WGMMAN  = 64
	WGMMABK = 64
	// WGMMAThreads is the block size (one warpgroup).
	WGMMAThreads = 128
	// WGMMASharedBytes is the dynamic shared memory of one block: 1024
	// bytes of alignment slack, the A and B tiles (8 KB each) and the
	// mbarrier.
	WGMMASharedBytes = 1024 + 2*8192 + 16
)

func init() {
	register(Case{Name: WGMMAKernel, Target: target.SM90a, Block: WGMMAThreads, SharedBytes: WGMMASharedBytes, Build: WGMMAModule})
}

// WGMMAParams describes the kernel parameters in order: the tensor maps of A
// and B (128-byte CUtensorMap by value), the fp32 output C, and the number of
// 64-wide K blocks.
var WGMMAParams = []codegen.Param{
	{Name: "tmap_a", Type: codegen.ParamTmap, Size: 128, Align: 64},
	{Name: "tmap_b", Type: codegen.ParamTmap, Size: 128, Align: 64},
	{Name: "c", Type: codegen.ParamPtr, Size: 8},
	{Name: "kblocks", Type: codegen.ParamI32, Size: 4},
}

// WGMMATensorMap describes the tensor map the host encodes for A or B of the
// self-test with k = 64*kblocks: a 2D bf16 tensor [64 rows, k] (dims
// innermost first: k, 64), row stride 2k bytes, box 64 x 64, 128-byte
// swizzle, zero out-of-bounds fill.
func WGMMATensorMap(k int) codegen.TensorMap {
	return codegen.TensorMap{
		DType:       "bf16",
		Dims:        []codegen.Expr{codegen.Const(int64(k)), codegen.Const(WGMMAM)},
		StrideBytes: []codegen.Expr{codegen.Const(int64(2 * k))},
		Box:         []int{WGMMABK, WGMMAM},
		Swizzle:     128,
	}
}

// WGMMAModule builds the self-test kernel into a new module and finishes it
// (builder errors, then ir.Check).
func WGMMAModule() (*llir.Module, error) {
	m := ir.NewModule(WGMMAKernel)
	if err := AddWGMMA(m); err != nil {
		return nil, err
	}
	mod, err := m.Finish()
	if err != nil {
		return nil, fmt.Errorf("selftest: %s: %w", WGMMAKernel, err)
	}
	return mod, nil
}

// AddWGMMA adds the self-test kernel to m.
func AddWGMMA(m *ir.Module) error {
	b := codegen.NewKernel(m, WGMMAKernel, WGMMAThreads,
		ir.TensorMapParam("tmap_a"), ir.TensorMapParam("tmap_b"), ir.P("c", codegen.GPtr), ir.P("kblocks", ir.I32))
	b.MinBlocksPerSM(1)
	cp, kp := b.Param("c"), b.Param("kblocks")

	tmA := b.PtrToInt(b.Param("tmap_a"))
	tmB := b.PtrToInt(b.Param("tmap_b"))
	base := b.SharedBase1024()
	sA := base
	sB := b.AddI(base, 8192)
	bar := b.AddI(base, 16384)
	tid := b.ThreadIdx(ir.X)
	leader := b.ICmp(enum.IPredEQ, tid, ir.Int32(0))
	b.If(leader, func() {
		b.MbarInit(bar, 1)
		b.FenceMbarInit()
		b.PrefetchTensorMap(tmA)
		b.PrefetchTensorMap(tmB)
	})
	b.SyncThreads()

	hi, err := codegen.SM90DescK128B()
	if err != nil {
		return err
	}
	descA := b.SM90Desc(sA, hi)
	descB := b.SM90Desc(sB, hi)
	acc := make([]value.Value, WGMMAN/2)
	for i := range acc {
		acc[i] = ir.Float32(0)
	}
	var berr error
	acc = b.Loop(ir.Int32(0), kp, ir.Int32(1), acc, func(kb value.Value, vars []value.Value) []value.Value {
		b.If(leader, func() {
			b.MbarArriveExpectTx(bar, 2*WGMMAM*WGMMABK*2)
			k0 := b.MulI(kb, WGMMABK)
			if err := b.TMALoad(tmA, sA, bar, k0, ir.Int32(0)); err != nil {
				berr = err
			}
			if err := b.TMALoad(tmB, sB, bar, k0, ir.Int32(0)); err != nil {
				berr = err
			}
		})
		b.MbarWait(bar, b.And(kb, ir.Int32(1)))
		steps := []int{0, 2, 4, 6} // +32 bytes per k16 step inside the swizzle row
		next, err := b.WGMMABF16(WGMMAN, vars, descA, descB, steps, steps)
		if err != nil {
			berr = err
			return vars
		}
		next = b.WGMMAWait(0, next)
		// Every warp has finished reading the tiles before the next TMA
		// load overwrites them.
		b.SyncThreads()
		return next
	})
	if berr != nil {
		return berr
	}

	// Fragment layout (PTX ISA, wgmma "Matrix D" for m64nNk16 with .f32):
	// acc[4j+i] is row 16*warp + lane/4 + 8*(i/2), column 8j + 2*(lane%4) + i%2.
	lane, warp := b.LaneWarp()
	row0 := b.Add(b.MulI(warp, 16), b.LShr(lane, ir.Int32(2)))
	col0 := b.MulI(b.And(lane, ir.Int32(3)), 2)
	for j := 0; j < WGMMAN/8; j++ {
		for i := 0; i < 4; i++ {
			row := b.AddI(row0, int64(8*(i/2)))
			col := b.AddI(col0, int64(8*j+i%2))
			off := b.MulI(b.Wide(b.Add(b.MulI(row, WGMMAN), col)), 4)
			b.StoreAt(acc[4*j+i], b.ByteOffset(cp, off), 4)
		}
	}
	b.Ret(nil)
	return nil
}

// WGMMAReference is the float64 reference of the self-test: C[m][n] =
// sum_k A[m][k] * B[n][k] with A and B bf16 bit patterns [64*k] row-major.
func WGMMAReference(a, bm []uint16, k int) []float64 {
	c := make([]float64, WGMMAM*WGMMAN)
	for m := 0; m < WGMMAM; m++ {
		for n := 0; n < WGMMAN; n++ {
			s := 0.0
			for kk := 0; kk < k; kk++ {
				s += wgmmaBF16(a[m*k+kk]) * wgmmaBF16(bm[n*k+kk])
			}
			c[m*WGMMAN+n] = s
		}
	}
	return c
}

// wgmmaBF16 widens a bf16 bit pattern to float64 exactly.
func wgmmaBF16(h uint16) float64 { return float64(math.Float32frombits(uint32(h) << 16)) }
