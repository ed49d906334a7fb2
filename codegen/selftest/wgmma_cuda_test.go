//go:build cuda

package selftest_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mokc/mokc/codegen/selftest"
	"github.com/mokc/mokc/driver"
)

// wgmmaRun runs the self-test kernel of ptxText on A, B (bf16 bits, [64, k])
// and returns C (fp32 [64, 64]); C is poisoned with NaN bytes before the
// launch.
func wgmmaRun(t *testing.T, ctx *driver.Context, ptxText string, a, bm []uint16, k int) []float32 {
	t.Helper()
	mod, err := ctx.LoadModule(ptxText)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Unload()
	f, err := mod.Function(selftest.WGMMAKernel)
	if err != nil {
		t.Fatal(err)
	}
	alloc := func(n int) driver.DevicePtr {
		p, err := ctx.Alloc(n)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ctx.Free(p) })
		return p
	}
	dA, dB, dC := alloc(2*len(a)), alloc(2*len(bm)), alloc(4*selftest.WGMMAM*selftest.WGMMAN)
	if err := ctx.CopyToDevice(dA, a); err != nil {
		t.Fatal(err)
	}
	if err := ctx.CopyToDevice(dB, bm); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Memset(dC, 0xFF, 4*selftest.WGMMAM*selftest.WGMMAN); err != nil {
		t.Fatal(err)
	}
	tm := selftest.WGMMATensorMap(k)
	enc := func(p driver.DevicePtr) [driver.TensorMapBytes]byte {
		m, err := ctx.EncodeTensorMapTiled(driver.TensorMapBF16, 2, p,
			[]uint64{uint64(tm.Dims[0].Eval(0)), uint64(tm.Dims[1].Eval(0))},
			[]uint64{uint64(tm.StrideBytes[0].Eval(0))},
			[]uint32{uint32(tm.Box[0]), uint32(tm.Box[1])}, nil,
			driver.InterleaveNone, driver.Swizzle128B, driver.L2Promotion128B, driver.OOBFillZero)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	mA, mB := enc(dA), enc(dB)
	args := driver.NewArgs().Bytes(mA[:]).Bytes(mB[:]).Ptr(dC).I32(int32(k / selftest.WGMMABK))
	if err := f.Launch(driver.Dim3{X: 1, Y: 1, Z: 1}, driver.Dim3{X: selftest.WGMMAThreads, Y: 1, Z: 1}, selftest.WGMMASharedBytes, nil, args); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Synchronize(); err != nil {
		t.Fatal(err)
	}
	c := make([]float32, selftest.WGMMAM*selftest.WGMMAN)
	if err := ctx.CopyFromDevice(c, dC); err != nil {
		t.Fatal(err)
	}
	return c
}

// wgmmaRandom returns n random bf16 values in [-2, 2) (bit patterns).
func wgmmaRandom(r *rand.Rand, n int) []uint16 {
	out := make([]uint16, n)
	for i := range out {
		x := float32(4*r.Float64() - 2)
		out[i] = uint16(math.Float32bits(x) >> 16) // truncation: any bf16 will do
		if out[i]&0x7fff == 0 {
			out[i] = 0x3f80
		}
	}
	return out
}

// TestWGMMAGPU runs the wgmma self-test on an sm_90 device, compiled by llc-19
// (testdata) and by mokc's ptx backend, on fresh random inputs: both must
// match the float64 reference (relative L2 error <= 1e-2; fp32 accumulation
// of exact bf16 products is in fact accurate to ~1e-6) and be bit-identical.
func TestWGMMAGPU(t *testing.T) {
	ctx := openGPU(t)
	if cc := ctx.Device().ComputeCapability(); cc != 90 {
		t.Skipf("wgmma needs sm_90a (compute capability 9.0), device has %d", cc)
	}
	vs := variants(t, selftest.WGMMAKernel) // llc-19's (testdata/llc) and mokc's PTX
	if vs["ours"] == "" {
		t.Fatal("mokc ptx backend produced no PTX")
	}

	for _, kblocks := range []int{1, 3} {
		k := selftest.WGMMABK * kblocks
		r := rand.New(rand.NewPCG(rand.Uint64(), uint64(k)))
		a := wgmmaRandom(r, selftest.WGMMAM*k)
		bm := wgmmaRandom(r, selftest.WGMMAN*k)
		ref := selftest.WGMMAReference(a, bm, k)
		check := func(name string, c []float32) {
			var num, den, maxErr float64
			for i, v := range c {
				if math.IsNaN(float64(v)) {
					t.Fatalf("%s k=%d: C[%d] is NaN (not written)", name, k, i)
				}
				d := float64(v) - ref[i]
				num += d * d
				den += ref[i] * ref[i]
				maxErr = math.Max(maxErr, math.Abs(d))
			}
			rel := math.Sqrt(num / den)
			t.Logf("%s k=%d: rel L2 %.3g, max abs err %.3g", name, k, rel, maxErr)
			if rel > 1e-2 {
				t.Errorf("%s k=%d: relative L2 error %.3g > 1e-2", name, k, rel)
			}
			if rel > 1e-4 {
				t.Errorf("%s k=%d: relative L2 error %.3g: fp32 accumulation should be near-exact (fragment or swizzle mix-up?)", name, k, rel)
			}
		}
		cl := wgmmaRun(t, ctx, vs["llc"], a, bm, k)
		check("llc-19", cl)
		co := wgmmaRun(t, ctx, vs["ours"], a, bm, k)
		check("mokc ptx", co)
		for i := range co {
			if math.Float32bits(co[i]) != math.Float32bits(cl[i]) {
				t.Fatalf("k=%d: C[%d] = %v (mokc ptx) vs %v (llc-19): not bit-identical", k, i, co[i], cl[i])
			}
		}
	}
}
