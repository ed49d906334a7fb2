//go:build cuda

package codegen_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestQuantizeGPU runs the MXFP8 quantize kernels (the backward's bf16
// rows of x, the forward's f32 rows of h) on fresh random rows with
// special blocks (zeros, a NaN, an Inf, tiny and huge values, subnormal
// quotients) and requires
// every e4m3 byte and every scale byte to equal layouts.Quantize's (the
// round-up rule), with outputs poisoned by mxPoison; T = 1 and 37.
func TestQuantizeGPU(t *testing.T) {
	ctx := openGPU(t)
	l := schedule.Layer{Hidden: 256, Intermediate: 96, Experts: 4, TopK: 2, Precision: schedule.MXFP8}
	fwd, err := moe.Forward(l)
	if err != nil {
		t.Fatal(err)
	}
	bwd, err := moe.Backward(l)
	if err != nil {
		t.Fatal(err)
	}
	s, err := schedule.DefaultSchedule(l, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 17))
	for name, p := range map[string]*moe.Program{"quantize_xs": bwd, "quantize_h": fwd} {
		q, ex := isolatedOp(t, ctx, p, name, s)
		op := q.Ops[0].(moe.Quantize)
		for _, T := range []int{1, 37} {
			t.Run(fmt.Sprintf("%s/T=%d", name, T), func(t *testing.T) {
				rows := int(op.X.Shape[0].Eval(int64(T)))
				x := quantizeInput(rng, rows, op.K, op.X.DType == moe.BF16)
				d := &dev{t: t, ctx: ctx}
				defer d.free()
				var xin any = x
				if op.X.DType == moe.BF16 {
					xin = bf16Bits(x)
				}
				bufs := map[string]driver.DevicePtr{
					op.X.Name: d.put(xin, 4*len(x)),
					op.Q.Name: putMXOutput(d, rows*op.K),
					op.S.Name: putMXOutput(d, rows*op.K/32),
				}
				if err := ex.run(T, bufs); err != nil {
					t.Fatal(err)
				}
				checkMXBytes(t, ctx, bufs[op.Q.Name], bufs[op.S.Name], x, rows, rows, op.K)
			})
		}
	}
}

// TestGatherMXGPU runs the MXFP8 forward's gather, which quantizes the
// dispatched rows as it gathers them (moe.Gather with Q and S), on fresh
// random tokens with quantizeInput's special blocks, a random order of
// all T*K slots of which the first T*K - T/2 are dispatched (offsets[E])
// and, with the routing weight on the input, random weights, and requires
// every e4m3 byte and scale byte of the dispatched rows to equal
// layouts.Quantize's of the bf16 gathered rows (the weight's product
// rounded to bf16 first, as the bf16 gather stores it) and the other rows
// to keep their poison (mxPoison); T = 1 and 37, H = 256 and 2880 (90 blocks: a last
// pass of the warp's lanes over a row with 8 of its 32 lanes).
func TestGatherMXGPU(t *testing.T) {
	ctx := openGPU(t)
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 23))
	for _, H := range []int{256, 2880} {
		for _, onInput := range []bool{false, true} {
			l := schedule.Layer{Hidden: H, Intermediate: 96, Experts: 4, TopK: 2, Precision: schedule.MXFP8, RouterWeightOnInput: onInput}
			p, err := moe.Forward(l)
			if err != nil {
				t.Fatal(err)
			}
			s, err := schedule.DefaultSchedule(l, target.SM90a)
			if err != nil {
				t.Fatal(err)
			}
			q, ex := isolatedOp(t, ctx, p, "gather", s)
			op := q.Ops[0].(moe.Gather)
			for _, T := range []int{1, 37} {
				t.Run(fmt.Sprintf("H=%d/weight-on-input=%v/T=%d", H, onInput, T), func(t *testing.T) {
					K, E := l.TopK, l.Experts
					rows := T * K
					x := bf16Vals(bf16Bits(quantizeInput(rng, T, H, true)))
					src := make([]int32, rows)
					for i, v := range rng.Perm(rows) {
						src[i] = int32(v)
					}
					n := rows - T/2 // dispatched rows (offsets[E]); the rest are never written
					offsets := make([]int32, E+1)
					offsets[E] = int32(n)
					w := make([]float32, rows)
					for i := range w {
						w[i] = float32(0.25 + rng.Float64())
					}
					xs := make([]float32, rows*H)
					for r, sl := range src {
						for c := 0; c < H; c++ {
							v := x[int(sl)/K*H+c]
							if onInput {
								v = schedule.RoundBF16(v * w[sl])
							}
							xs[r*H+c] = v
						}
					}
					d := &dev{t: t, ctx: ctx}
					defer d.free()
					bufs := map[string]driver.DevicePtr{
						op.X.Name:       d.put(bf16Bits(x), 2*len(x)),
						op.SrcSlot.Name: d.put(src, 4*rows),
						op.Offsets.Name: d.put(offsets, 4*(E+1)),
						op.Q.Name:       putMXOutput(d, rows*H),
						op.S.Name:       putMXOutput(d, rows*H/32),
					}
					if onInput {
						bufs[op.Weights.Name] = d.put(w, 4*rows)
					}
					if err := ex.run(T, bufs); err != nil {
						t.Fatal(err)
					}
					checkMXBytes(t, ctx, bufs[op.Q.Name], bufs[op.S.Name], xs, rows, n, H)
				})
			}
		}
	}
}

// isolatedOp is op name of p on its own (moe.Program.Isolate), lowered
// PerOp under s for sm_90a and loaded: the isolated program and its
// executor.
func isolatedOp(t *testing.T, ctx *driver.Context, p *moe.Program, name string, s schedule.Schedule) (*moe.Program, *executor) {
	t.Helper()
	q, err := p.Isolate(name)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := codegen.Lower(q, s, codegen.PerOp)
	if err != nil {
		t.Fatal(err)
	}
	text, err := ptx.Compile(prog.Module, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := newExecutor(ctx, prog, text)
	if err != nil {
		t.Fatal(err)
	}
	return q, ex
}

// mxPoison is the byte the MXFP8 outputs are filled with before a kernel
// runs: neither an e4m3 NaN nor the NaN scale 255 (dev.put's 0xFF is both,
// so a NaN block never written would pass as written).
const mxPoison = 0x5A

// putMXOutput allocates bytes of MXFP8 output filled with mxPoison.
func putMXOutput(d *dev, bytes int) driver.DevicePtr {
	d.t.Helper()
	p := d.put(nil, bytes)
	if err := d.ctx.Memset(p, mxPoison, bytes); err != nil {
		d.t.Fatal(err)
	}
	return p
}

// checkMXBytes requires the e4m3 bytes at q and the scale bytes at s (the
// MXFP8 form of rows x k on the device, written for the first n rows) to
// equal layouts.Quantize's of x (the round-up rule), any NaN for a NaN, in
// the first n rows, and the rows past them to hold mxPoison still.
func checkMXBytes(t *testing.T, ctx *driver.Context, q, s driver.DevicePtr, x []float32, rows, n, k int) {
	t.Helper()
	gotQ, gotS := make([]uint8, rows*k), make([]uint8, rows*k/32)
	if err := ctx.CopyFromDevice(gotQ, q); err != nil {
		t.Fatal(err)
	}
	if err := ctx.CopyFromDevice(gotS, s); err != nil {
		t.Fatal(err)
	}
	want, err := layouts.Quantize(x, 1, rows, k, layouts.QuantizeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i := range gotS {
		w := want.Scales[i]
		if i >= n*k/32 {
			w = mxPoison
		}
		if gotS[i] != w {
			if bad++; bad < 5 {
				t.Errorf("scale of block %d: 0x%02x, want 0x%02x", i, gotS[i], w)
			}
		}
	}
	for i := range gotQ {
		g, w := gotQ[i], want.Data[i]
		if i >= n*k {
			w = mxPoison
		}
		if g != w && !(isE4M3NaN(g) && isE4M3NaN(w)) {
			if bad++; bad < 10 {
				t.Errorf("element %d (%v): 0x%02x, want 0x%02x", i, x[i], g, w)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d mismatches", bad)
	}
}

// isE4M3NaN reports whether c is an E4M3 NaN (S.1111.111).
func isE4M3NaN(c uint8) bool { return c&0x7F == 0x7F }

// quantizeInput is rows x k values uniform in ±2^e for a random e per
// row in -20..20 (bf16-representable when bf16), with special blocks in
// row 0: zeros, a NaN, an Inf, tiny values (quotients that are e4m3
// subnormals or flush), and one huge value.
func quantizeInput(rng *rand.Rand, rows, k int, bf16 bool) []float32 {
	x := make([]float32, rows*k)
	for r := 0; r < rows; r++ {
		sc := math.Ldexp(1, rng.IntN(41)-20)
		for c := 0; c < k; c++ {
			x[r*k+c] = float32((2*rng.Float64() - 1) * sc)
		}
	}
	special := func(blk int, f func(i int) float32) {
		if (blk+1)*32 <= k {
			for i := 0; i < 32; i++ {
				x[blk*32+i] = f(i)
			}
		}
	}
	special(0, func(int) float32 { return 0 })
	special(1, func(i int) float32 {
		if i == 7 {
			return float32(math.NaN())
		}
		return float32(i)
	})
	if k >= 96 {
		special(2, func(i int) float32 {
			if i == 3 {
				return float32(math.Inf(-1))
			}
			return float32(i) * 1e-3
		})
	}
	if rows > 1 {
		for i := 0; i < 32; i++ {
			x[k+i] = float32(math.Ldexp(float64(i+1), -140+i%5)) // tiny amax: scale 2^-127
		}
		x[k+40] = 3e38 // huge
	}
	if bf16 {
		for i, v := range x {
			x[i] = schedule.RoundBF16(v)
		}
	}
	return x
}
