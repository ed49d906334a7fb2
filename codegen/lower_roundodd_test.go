package codegen

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// roundOddBF16 is the host form of Builder.PackBF16RoundOdd for one value:
// the f32's upper 16 bits, the last one set when any lower bit was.
func roundOddBF16(x float32) uint16 {
	b := math.Float32bits(x)
	h := uint16(b >> 16)
	if b&0xFFFF != 0 {
		h |= 1
	}
	return h
}

// TestRoundOddKeepsMXQuantization checks the claim of GemmSpec.CRoundOdd
// on the host: a block of 32 f32 values and its bf16 values rounded to odd
// quantize (layouts.Quantize, the round-up scale the kernels use) to the
// same e4m3 bytes and UE8M0 code whenever the block's amax is at least
// 2^-113: random blocks over the exponent range, blocks at the scale's
// thresholds 448*2^k and one f32 step either side, blocks of e4m3 ties,
// and blocks with a NaN, an Inf, zeros.
func TestRoundOddKeepsMXQuantization(t *testing.T) {
	opt := layouts.QuantizeOptions{Axis: layouts.AlongCols, Rule: layouts.ScaleRoundUp, Workers: 1}
	rng := rand.New(rand.NewPCG(3, 5))
	check := func(what string, vals []float32) {
		t.Helper()
		odd := make([]uint16, len(vals))
		for i, v := range vals {
			odd[i] = roundOddBF16(v)
		}
		a, err := layouts.Quantize(vals, 1, 1, len(vals), opt)
		if err != nil {
			t.Fatal(err)
		}
		b, err := layouts.QuantizeBF16(odd, 1, 1, len(vals), opt)
		if err != nil {
			t.Fatal(err)
		}
		if string(a.Data) != string(b.Data) || string(a.Scales) != string(b.Scales) {
			t.Fatalf("%s: from f32 codes %v data %v, from bf16 rounded to odd codes %v data %v (values %v)", what, a.Scales, a.Data, b.Scales, b.Data, vals)
		}
	}
	block := func(scale float64) []float32 {
		v := make([]float32, 32)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * scale)
		}
		return v
	}
	for e := -113; e <= 120; e++ {
		for range 200 {
			check("random", block(math.Ldexp(1, e)))
		}
	}
	for k := -121; k <= 118; k++ {
		t0 := float32(math.Ldexp(448, k))
		for _, d := range []int{-2, -1, 0, 1, 2} {
			amax := math.Float32frombits(uint32(int32(math.Float32bits(t0)) + int32(d)))
			v := block(math.Ldexp(1, k+6))
			for i := range v {
				if math.Abs(float64(v[i])) > float64(amax) {
					v[i] = amax / 2
				}
			}
			v[rng.IntN(32)] = -amax
			check("threshold", v)
		}
	}
	for k := -100; k <= 100; k += 7 {
		// Midpoints of e4m3 steps (ties to even) and one f32 step off them.
		v := make([]float32, 32)
		v[0] = float32(math.Ldexp(448, k))
		for i := 1; i < 32; i++ {
			m := float32(math.Ldexp(float64(8+i%8)+0.5, k+5-i/8))
			v[i] = math.Float32frombits(math.Float32bits(m) + uint32(i%3) - 1)
		}
		check("ties", v)
	}
	special := block(1)
	special[3] = float32(math.NaN())
	check("nan", special)
	special = block(1)
	special[5] = float32(math.Inf(-1))
	check("inf", special)
	check("zeros", make([]float32, 32))
}

// TestRoundOddKeepsScaleCode checks the scale half of the claim over
// every f32 amax from 2^-113 up (Inf and NaN included): the round-up
// scale code (layouts.ScaleFromAmax, amax/448 as an f32 division) of amax
// and of amax rounded to odd to bf16 are equal. About 2^31 values: skipped
// with -short.
func TestRoundOddKeepsScaleCode(t *testing.T) {
	if testing.Short() {
		t.Skip("scans 2^31 values")
	}
	start := math.Float32bits(float32(math.Ldexp(1, -113)))
	for b := uint64(start); b <= 0x7FFFFFFF; b++ {
		a := math.Float32frombits(uint32(b))
		o := math.Float32frombits(uint32(roundOddBF16(a)) << 16)
		if x, y := layouts.ScaleFromAmax(a, layouts.ScaleRoundUp), layouts.ScaleFromAmax(o, layouts.ScaleRoundUp); x != y {
			t.Fatalf("amax %#08x (%g): code %d, rounded to odd %#04x: code %d", b, a, x, roundOddBF16(a), y)
		}
	}
}

// TestRoundOddLowering: the sm_90a mxfp8 forward (register-fed past the
// decode tiles) stores h as bf16 rounded to odd, FC1 with gate/up halves
// (qwen3-30b-a3b) or interleaved (gpt-oss-120b): the plan's h is bf16 and
// FC1's register-fed kernel packs to odd; a bf16 layer's h is bf16
// rounded to nearest (no packing to odd).
func TestRoundOddLowering(t *testing.T) {
	for _, c := range []struct {
		model string
		bf16  bool
		odd   bool
	}{{"qwen3-30b-a3b", false, true}, {"gpt-oss-120b", false, true}, {"qwen3-30b-a3b", true, false}} {
		pr := schedule.MXFP8
		if c.bf16 {
			pr = schedule.BF16
		}
		p, _ := buildPreset(t, c.model, pr, target.SM90a)
		h := p.Buffer("h")
		if h == nil {
			t.Fatalf("%s: no buffer h", c.model)
		}
		if h.DType != "bf16" {
			t.Errorf("%s: h is %s, want bf16", c.model, h.DType)
		}
		ptx := p.Module.String()
		if got := strings.Contains(ptx, "prmt.b32 t, a, c, 0x7632"); got != c.odd {
			t.Errorf("%s: FC1 packs h rounded to odd: %v, want %v", c.model, got, c.odd)
		}
	}
}
