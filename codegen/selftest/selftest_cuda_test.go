//go:build cuda

package selftest_test

import (
	"embed"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mokc/mokc/codegen/selftest"
	"github.com/mokc/mokc/driver"
)

//go:embed testdata/llc/*.ptx
var llcFS embed.FS

func openGPU(t *testing.T) *driver.Context {
	t.Helper()
	ctx, err := driver.Open(0)
	if err != nil {
		if errors.Is(err, driver.ErrNoDevice) || errors.Is(err, driver.ErrNoCUDA) {
			t.Skipf("no GPU: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Close() })
	if cc := ctx.Device().ComputeCapability(); cc < 80 {
		t.Skipf("compute capability %d < 80", cc)
	}
	return ctx
}

// variants returns the PTX texts of case name: llc-19's (embedded) and ours
// (when the backend is wired in).
func variants(t *testing.T, name string) map[string]string {
	t.Helper()
	c, err := selftest.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	b, err := llcFS.ReadFile("testdata/llc/" + name + ".ptx")
	if err != nil {
		t.Fatal(err)
	}
	out["llc"] = string(b)
	ours, err := selftest.CompileOurs(c)
	if err != nil {
		t.Fatalf("ptx: %v", err)
	}
	if ours != "" {
		out["ours"] = ours
	}
	return out
}

// gpu wraps a context with helpers that fail the test.
type gpu struct {
	t   *testing.T
	ctx *driver.Context
}

func (g gpu) alloc(bytes int, init any) driver.DevicePtr {
	g.t.Helper()
	p, err := g.ctx.Alloc(bytes)
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { g.ctx.Free(p) })
	if init != nil {
		if err := g.ctx.CopyToDevice(p, init); err != nil {
			g.t.Fatal(err)
		}
	} else if err := g.ctx.Memset(p, 0xFF, bytes); err != nil { // poison: NaN / -1
		g.t.Fatal(err)
	}
	return p
}

// launch loads ptx, launches kernel name once and waits.
func (g gpu) launch(ptx, name string, grid, block, shared int, args *driver.Args) {
	g.t.Helper()
	mod, err := g.ctx.LoadModule(ptx)
	if err != nil {
		g.t.Fatalf("load %s: %v", name, err)
	}
	defer mod.Unload()
	f, err := mod.Function(name)
	if err != nil {
		g.t.Fatal(err)
	}
	if shared > 48*1024 {
		if err := f.SetMaxDynamicSharedBytes(shared); err != nil {
			g.t.Fatal(err)
		}
	}
	if err := f.Launch(driver.Dim3{X: grid, Y: 1, Z: 1}, driver.Dim3{X: block, Y: 1, Z: 1}, shared, nil, args); err != nil {
		g.t.Fatalf("launch %s: %v", name, err)
	}
	if err := g.ctx.Synchronize(); err != nil {
		g.t.Fatal(err)
	}
}

func (g gpu) read(dst any, src driver.DevicePtr) {
	g.t.Helper()
	if err := g.ctx.CopyFromDevice(dst, src); err != nil {
		g.t.Fatal(err)
	}
}

// roundBF16 rounds to the nearest bf16 (ties to even); NaN stays NaN.
func roundBF16(v float32) uint16 {
	b := math.Float32bits(v)
	if v != v {
		return uint16(b>>16) | 0x40
	}
	b += 0x7FFF + (b>>16)&1
	return uint16(b >> 16)
}

func bf16(u uint16) float32 { return math.Float32frombits(uint32(u) << 16) }

// randBF16 returns a random bf16 in ±scale, never zero.
func randBF16(r *rand.Rand, scale float64) uint16 {
	for {
		v := roundBF16(float32((r.Float64()*2 - 1) * scale))
		if v&0x7FFF != 0 {
			return v
		}
	}
}

// compareAll runs run for every PTX variant and checks the results are
// bit-identical across variants.
func compareAll[T comparable](t *testing.T, name string, run func(ptx string) []T) {
	t.Helper()
	var first []T
	var firstName string
	for vn, ptx := range variants(t, name) {
		got := run(ptx)
		if first == nil {
			first, firstName = got, vn
			continue
		}
		for i := range got {
			if got[i] != first[i] {
				t.Fatalf("%s: %s and %s PTX differ at %d: %v vs %v", name, firstName, vn, i, first[i], got[i])
			}
		}
		t.Logf("%s: %s and %s PTX agree bit for bit on %d values", name, firstName, vn, len(got))
	}
}

func TestAxpb(t *testing.T) {
	g := gpu{t, openGPU(t)}
	r := rand.New(rand.NewPCG(rand.Uint64(), 1))
	n := 100_003
	x := make([]uint16, n)
	for i := range x {
		x[i] = randBF16(r, 8)
	}
	a, b := bf16(randBF16(r, 4)), bf16(randBF16(r, 4))
	want := make([]uint16, n)
	for i := range x {
		// a*x is exact in float64 and the sum of bf16-sized terms too, so
		// this is fp32 fma's single rounding, then cvt.rn.bf16.f32.
		want[i] = roundBF16(float32(float64(a)*float64(bf16(x[i])) + float64(b)))
	}
	compareAll(t, "st_axpb", func(ptx string) []uint16 {
		dx := g.alloc(2*n, x)
		dy := g.alloc(2*n+64, nil)
		g.launch(ptx, "st_axpb", (n+selftest.AxpbBlock-1)/selftest.AxpbBlock, selftest.AxpbBlock, 0,
			driver.NewArgs().Ptr(dx).Ptr(dy).F32(a).F32(b).I32(int32(n)))
		got := make([]uint16, n+32)
		g.read(got, dy)
		for i := 0; i < n; i++ {
			if got[i] != want[i] {
				t.Fatalf("y[%d] = %#04x, want %#04x (x %v a %v b %v)", i, got[i], want[i], bf16(x[i]), a, b)
			}
		}
		for i := n; i < n+32; i++ {
			if got[i] != 0xFFFF {
				t.Fatalf("y[%d] past n was written: %#04x", i, got[i])
			}
		}
		return got[:n]
	})
}

func TestReduce(t *testing.T) {
	g := gpu{t, openGPU(t)}
	r := rand.New(rand.NewPCG(rand.Uint64(), 2))
	blocks := 37
	x := make([]float32, blocks*selftest.ReducePerBlk)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	want := make([]float32, blocks)
	for blk := range want {
		var lanes [selftest.ReduceBlock]float32
		for tid := 0; tid < selftest.ReduceBlock; tid++ {
			var s float32
			for i := tid; i < selftest.ReducePerBlk; i += selftest.ReduceBlock {
				s += x[blk*selftest.ReducePerBlk+i]
			}
			lanes[tid] = s
		}
		for d := 16; d >= 1; d /= 2 {
			var next [selftest.ReduceBlock]float32
			for tid := range lanes {
				next[tid] = lanes[tid] + lanes[tid^d]
			}
			lanes = next
		}
		var s float32
		for w := 0; w < selftest.ReduceWarps; w++ {
			s += lanes[32*w]
		}
		want[blk] = s
	}
	compareAll(t, "st_reduce", func(ptx string) []uint32 {
		dx := g.alloc(4*len(x), x)
		dout := g.alloc(4*blocks, nil)
		g.launch(ptx, "st_reduce", blocks, selftest.ReduceBlock, 0, driver.NewArgs().Ptr(dx).Ptr(dout))
		got := make([]float32, blocks)
		g.read(got, dout)
		bits := make([]uint32, blocks)
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("block %d: sum %v, want %v", i, got[i], want[i])
			}
			bits[i] = math.Float32bits(got[i])
		}
		return bits
	})
}

func TestBigSmem(t *testing.T) {
	g := gpu{t, openGPU(t)}
	r := rand.New(rand.NewPCG(rand.Uint64(), 3))
	blocks := 5
	x := make([]uint32, blocks*selftest.BigSmemWords)
	for i := range x {
		x[i] = r.Uint32()
	}
	compareAll(t, "st_bigsmem", func(ptx string) []uint32 {
		dx := g.alloc(4*len(x), x)
		dy := g.alloc(4*len(x), nil)
		g.launch(ptx, "st_bigsmem", blocks, selftest.BigSmemBlock, selftest.BigSmemBytes, driver.NewArgs().Ptr(dx).Ptr(dy))
		got := make([]uint32, len(x))
		g.read(got, dy)
		for b := 0; b < blocks; b++ {
			for i := 0; i < selftest.BigSmemWords; i++ {
				if w := x[b*selftest.BigSmemWords+selftest.BigSmemWords-1-i]; got[b*selftest.BigSmemWords+i] != w {
					t.Fatalf("block %d y[%d] = %#x, want %#x", b, i, got[b*selftest.BigSmemWords+i], w)
				}
			}
		}
		return got
	})
}

func TestMMA(t *testing.T) {
	g := gpu{t, openGPU(t)}
	r := rand.New(rand.NewPCG(rand.Uint64(), 4))
	a := make([]uint16, 16*16)
	b := make([]uint16, 8*16)
	c := make([]float32, 16*8)
	for i := range a {
		a[i] = randBF16(r, 2)
	}
	for i := range b {
		b[i] = randBF16(r, 2)
	}
	for i := range c {
		c[i] = float32(r.NormFloat64())
	}
	compareAll(t, "st_mma", func(ptx string) []uint32 {
		da, db, dc := g.alloc(2*len(a), a), g.alloc(2*len(b), b), g.alloc(4*len(c), c)
		dd := g.alloc(4*len(c), nil)
		g.launch(ptx, "st_mma", 1, selftest.MMABlock, 0, driver.NewArgs().Ptr(da).Ptr(db).Ptr(dc).Ptr(dd))
		got := make([]float32, len(c))
		g.read(got, dd)
		bits := make([]uint32, len(c))
		for m := 0; m < 16; m++ {
			for n := 0; n < 8; n++ {
				ref, mag := float64(c[m*8+n]), math.Abs(float64(c[m*8+n]))
				for k := 0; k < 16; k++ {
					p := float64(bf16(a[m*16+k])) * float64(bf16(b[n*16+k]))
					ref += p
					mag += math.Abs(p)
				}
				v := got[m*8+n]
				if math.IsNaN(float64(v)) || math.Abs(float64(v)-ref) > 1e-6*mag+1e-30 {
					t.Fatalf("D[%d][%d] = %v, want %v (tolerance %.3g)", m, n, v, ref, 1e-6*mag)
				}
				bits[m*8+n] = math.Float32bits(v)
			}
		}
		return bits
	})
}

var _ = fmt.Sprintf
