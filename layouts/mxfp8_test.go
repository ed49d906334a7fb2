package layouts

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// randomTensor returns e*rows*cols f32 values whose magnitude varies a lot
// from block to block (log-uniform over 2^-30..2^30) with random signs.
func randomTensor(r *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	for i := 0; i < n; {
		scale := math.Ldexp(1, r.Intn(60)-30)
		for j := 0; j < 1+r.Intn(40) && i < n; j, i = j+1, i+1 {
			out[i] = float32(r.NormFloat64() * scale)
		}
	}
	return out
}

// oracleQuantize is the definition, computed element by element: blocks of
// 32 along axis, amax in float64, the scale code from the rule's definition
// (ceil or floor of log2 via Frexp), the data code as the nearest E4M3 of
// x/X by search. It returns codes indexed by logical (e, r, c).
func oracleQuantize(src []float32, e, rows, cols int, axis BlockAxis, rule ScaleRule) (data, scale []uint8) {
	data = make([]uint8, len(src))
	scale = make([]uint8, len(src)) // the scale of each element's block
	for x := 0; x < e; x++ {
		for r := 0; r < rows; r++ {
			for c := 0; c < cols; c++ {
				var r0, r1, c0, c1 int
				if axis == AlongCols {
					r0, r1 = r, r+1
					c0 = c / 32 * 32
					c1 = min(c0+32, cols)
				} else {
					c0, c1 = c, c+1
					r0 = r / 32 * 32
					r1 = min(r0+32, rows)
				}
				amax := 0.0
				nan := false
				for i := r0; i < r1; i++ {
					for j := c0; j < c1; j++ {
						v := float64(src[(x*rows+i)*cols+j])
						if v != v {
							nan = true
						}
						amax = math.Max(amax, math.Abs(v))
					}
				}
				var code uint8
				switch {
				case nan:
					code = 0xFF
				case rule == ScaleRoundUp:
					code = ceilLog2Code(float32(amax) / 448)
				default:
					code = floorLog2Code(float32(amax))
					if code != 0 && code != 0xFE && code != 0xFF {
						if int(code)-8 < 0 {
							code = 0
						} else {
							code -= 8
						}
					}
				}
				i := (x*rows+r)*cols + c
				scale[i] = code
				if code == 0xFF {
					data[i] = 0x7F
					continue
				}
				data[i] = e4m3Oracle(float32(float64(src[i]) / math.Ldexp(1, int(code)-127)))
			}
		}
	}
	return data, scale
}

func TestQuantizeMatchesDefinition(t *testing.T) {
	r := newRand(t)
	const e, rows, cols = 2, 37, 70 // partial blocks both ways
	src := randomTensor(r, e*rows*cols)
	// A few specials inside random blocks.
	src[5] = float32(math.Inf(1))
	src[200] = float32(math.NaN())
	src[1000] = 0
	bsrc := make([]uint16, len(src))
	_ = BF16FromF32Slice(bsrc, src)
	bsrcF := make([]float32, len(src))
	_ = F32FromBF16Slice(bsrcF, bsrc)
	for _, axis := range []BlockAxis{AlongCols, AlongRows} {
		for _, rule := range []ScaleRule{ScaleRoundUp, ScaleOCPFloor} {
			for _, tr := range []bool{false, true} {
				for _, bf := range []bool{false, true} {
					opt := QuantizeOptions{Axis: axis, Rule: rule, Transpose: tr, Workers: 1 + r.Intn(3)}
					var q *MXFP8
					var err error
					in := src
					if bf {
						q, err = QuantizeBF16(bsrc, e, rows, cols, opt)
						in = bsrcF
					} else {
						q, err = Quantize(src, e, rows, cols, opt)
					}
					if err != nil {
						t.Fatal(err)
					}
					wd, ws := oracleQuantize(in, e, rows, cols, axis, rule)
					deq := q.Dequantize()
					for x := 0; x < e; x++ {
						for i := 0; i < rows; i++ {
							for j := 0; j < cols; j++ {
								k := (x*rows+i)*cols + j
								d, s := q.Data[q.DataIndex(x, i, j)], q.Scales[q.ScaleIndex(x, i, j)]
								if d != wd[k] || s != ws[k] {
									t.Fatalf("%+v bf16=%v: element (%d,%d,%d) = %g: code 0x%02x scale %d, want 0x%02x scale %d",
										opt, bf, x, i, j, in[k], d, s, wd[k], ws[k])
								}
								v, _ := q.At(x, i, j)
								if math.Float32bits(v) != math.Float32bits(deq[k]) {
									t.Fatalf("At and Dequantize differ at %d", k)
								}
							}
						}
					}
					sh, ss := q.DataShape(), q.ScaleShape()
					if sh[0]*sh[1]*sh[2] != len(q.Data) || ss[0]*ss[1]*ss[2] != len(q.Scales) {
						t.Fatalf("shapes %v %v do not match storage %d %d", sh, ss, len(q.Data), len(q.Scales))
					}
				}
			}
		}
	}
}

// TestQuantizeTransposedIsWgradCopy: blocks along rows stored transposed
// are exactly the blocks-along-cols quantization of the transposed source.
func TestQuantizeTransposedIsWgradCopy(t *testing.T) {
	r := newRand(t)
	const e, rows, cols = 3, 100, 48
	src := randomTensor(r, e*rows*cols)
	tsrc := make([]float32, len(src))
	for x := 0; x < e; x++ {
		for i := 0; i < rows; i++ {
			for j := 0; j < cols; j++ {
				tsrc[(x*cols+j)*rows+i] = src[(x*rows+i)*cols+j]
			}
		}
	}
	a, err := Quantize(src, e, rows, cols, QuantizeOptions{Axis: AlongRows, Transpose: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := Quantize(tsrc, e, cols, rows, QuantizeOptions{Axis: AlongCols})
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Data) != string(b.Data) || string(a.Scales) != string(b.Scales) {
		t.Fatal("transposed quantization differs from quantizing the transpose")
	}
	if a.ScaleShape() != [3]int{e, cols, 4} || a.DataShape() != [3]int{e, cols, rows} {
		t.Fatalf("shapes %v %v", a.DataShape(), a.ScaleShape())
	}
}

// block returns a 1x32 tensor holding vals then filler copies of fill.
func block(vals []float32, fill float32) []float32 {
	out := make([]float32, 32)
	for i := range out {
		out[i] = fill
	}
	copy(out, vals)
	return out
}

func quant1(t *testing.T, src []float32, rule ScaleRule) *MXFP8 {
	t.Helper()
	q, err := Quantize(src, 1, 1, len(src), QuantizeOptions{Rule: rule})
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func TestQuantizeEdgeCases(t *testing.T) {
	r := newRand(t)
	for _, rule := range []ScaleRule{ScaleRoundUp, ScaleOCPFloor} {
		// amax = 0: scale 2^-127, finite signed zeros.
		neg0 := float32(math.Copysign(0, -1))
		q := quant1(t, block([]float32{neg0}, 0), rule)
		if q.Scales[0] != 0 || q.Data[0] != 0x80 || q.Data[1] != 0 {
			t.Fatalf("%v zero block: scale %d data %x", rule, q.Scales[0], q.Data[:2])
		}
		for _, v := range q.Dequantize() {
			if v != 0 {
				t.Fatalf("%v zero block dequantizes to %g", rule, v)
			}
		}
		// Tiny amax (1e-38, an f32 subnormal region neighbour) and f32
		// subnormal inputs: scale code 0, 1/X = 2^127 finite, values kept to
		// E4M3 precision.
		for _, mag := range []float64{1e-38, 1e-40, 3e-43} {
			vals := make([]float32, 32)
			for i := range vals {
				vals[i] = float32(mag * (0.1 + r.Float64()) * float64(1-2*r.Intn(2)))
			}
			vals[7] = float32(mag)
			q := quant1(t, vals, rule)
			if q.Scales[0] != 0 {
				t.Fatalf("%v amax %g: scale code %d, want 0", rule, mag, q.Scales[0])
			}
			for i, v := range q.Dequantize() {
				if math.IsInf(float64(v), 0) || v != v {
					t.Fatalf("%v amax %g: element %d dequantizes to %g", rule, mag, i, v)
				}
				want := float64(F32FromE4M3(e4m3Oracle(float32(float64(vals[i])*math.Ldexp(1, 127))))) * math.Ldexp(1, -127)
				if float64(v) != want {
					t.Fatalf("%v amax %g: element %d = %g dequantizes to %g, want %g", rule, mag, i, vals[i], v, want)
				}
			}
			if d, _ := q.At(0, 0, 7); math.Abs(float64(d)-mag) > mag/16 && mag >= 1e-40 {
				t.Fatalf("%v: amax element %g dequantizes to %g", rule, mag, d)
			}
		}
		// Huge inputs: 3e38 keeps its value to E4M3 precision; the largest
		// f32 rounds to 256*2^120 = 2^128 and dequantizes to +Inf.
		q = quant1(t, block([]float32{3e38, -1e38}, 1), rule)
		if d, _ := q.At(0, 0, 0); math.IsInf(float64(d), 0) || math.Abs(float64(d)-3e38) > 3e38/16 {
			t.Fatalf("%v: 3e38 dequantizes to %g", rule, d)
		}
		if rule == ScaleRoundUp {
			q = quant1(t, block([]float32{math.MaxFloat32}, 0), rule)
			if q.Scales[0] != 127+120 || q.Data[0] != 0x78 {
				t.Fatalf("max float: scale %d code 0x%02x, want %d, 0x78", q.Scales[0], q.Data[0], 127+120)
			}
			if d, _ := q.At(0, 0, 0); !math.IsInf(float64(d), 1) {
				t.Fatalf("max float dequantizes to %g, want +Inf (2^128)", d)
			}
		}
		// NaN in a block: NaN scale, every code 0x7F, the whole block NaN;
		// the next block is untouched.
		src := append(block([]float32{1, float32(math.NaN()), -3}, 2), block([]float32{5}, 1)...)
		q = quant1(t, src, rule)
		if q.Scales[0] != 0xFF || q.Scales[1] == 0xFF {
			t.Fatalf("%v NaN block: scales %v", rule, q.Scales)
		}
		deq := q.Dequantize()
		for i := 0; i < 32; i++ {
			if q.Data[i] != 0x7F || deq[i] == deq[i] {
				t.Fatalf("%v NaN block element %d: code 0x%02x value %g", rule, i, q.Data[i], deq[i])
			}
		}
		if deq[32] != 5 || deq[33] != 1 {
			t.Fatalf("%v block after NaN: %v", rule, deq[32:34])
		}
		// Inf in a block: scale 2^127, the Inf stored as 448 and returning as
		// Inf, finite elements of ordinary size flush to zero.
		q = quant1(t, block([]float32{float32(math.Inf(-1)), 7, float32(math.Inf(1))}, 1), rule)
		deq = q.Dequantize()
		if q.Scales[0] != 0xFE || q.Data[0] != 0xFE || q.Data[2] != 0x7E || !math.IsInf(float64(deq[0]), -1) ||
			!math.IsInf(float64(deq[2]), 1) || deq[1] != 0 || deq[5] != 0 {
			t.Fatalf("%v Inf block: scale %d codes %x values %v", rule, q.Scales[0], q.Data[:3], deq[:3])
		}
	}
	// Exactly 448*2^k and the next float above it.
	for _, k := range []int{-100, -20, 0, 7, 100} {
		top := float32(math.Ldexp(448, k))
		q := quant1(t, block([]float32{top, float32(math.Ldexp(1, k))}, 0), ScaleRoundUp)
		if q.Scales[0] != uint8(127+k) || q.Data[0] != 0x7E {
			t.Fatalf("448*2^%d: scale %d code 0x%02x, want %d 0x7E", k, q.Scales[0], q.Data[0], 127+k)
		}
		if d, _ := q.At(0, 0, 0); d != top {
			t.Fatalf("448*2^%d dequantizes to %g", k, d)
		}
		above := math.Nextafter32(top, float32(math.Inf(1)))
		q = quant1(t, block([]float32{above}, 0), ScaleRoundUp)
		if q.Scales[0] != uint8(128+k) || q.Data[0] != 0x76 { // 224
			t.Fatalf("next float above 448*2^%d: scale %d code 0x%02x, want %d 0x76", k, q.Scales[0], q.Data[0], 128+k)
		}
		if d, _ := q.At(0, 0, 0); d != top {
			t.Fatalf("next float above 448*2^%d dequantizes to %g, want %g", k, d, top)
		}
		// The OCP floor rule at 448*2^k: floor(log2) = k+8, X = 2^k.
		q = quant1(t, block([]float32{top}, 0), ScaleOCPFloor)
		if q.Scales[0] != uint8(127+k) || q.Data[0] != 0x7E {
			t.Fatalf("OCP 448*2^%d: scale %d code 0x%02x", k, q.Scales[0], q.Data[0])
		}
	}
	// A block where the rules differ: amax 960. Round-up: X = 4, 957 -> 960.
	// OCP floor: X = 2, 957/2 = 478.5 saturates to 448 -> 896.
	src := block([]float32{960, 957, -957}, 1)
	up, fl := quant1(t, src, ScaleRoundUp), quant1(t, src, ScaleOCPFloor)
	du, df := up.Dequantize(), fl.Dequantize()
	if up.Scales[0] != 129 || du[0] != 960 || du[1] != 960 || du[2] != -960 {
		t.Fatalf("round-up rule on 960/957: scale %d values %v", up.Scales[0], du[:3])
	}
	if fl.Scales[0] != 128 || df[0] != 896 || df[1] != 896 || df[2] != -896 {
		t.Fatalf("OCP rule on 960/957: scale %d values %v", fl.Scales[0], df[:3])
	}
}

func TestQuantizeErrorsAndStreaming(t *testing.T) {
	r := newRand(t)
	if _, err := Quantize(make([]float32, 10), 1, 2, 6, QuantizeOptions{}); err == nil {
		t.Error("wrong length accepted")
	}
	if _, err := Quantize(nil, -1, 2, 6, QuantizeOptions{}); err == nil {
		t.Error("negative shape accepted")
	}
	if _, err := Quantize(make([]float32, 12), 1, 2, 6, QuantizeOptions{Rule: 7}); err == nil {
		t.Error("unknown rule accepted")
	}
	if _, err := Quantize(make([]float32, 12), 1, 2, 6, QuantizeOptions{Axis: 3}); err == nil {
		t.Error("unknown axis accepted")
	}
	q, _ := NewMXFP8(3, 8, 64, QuantizeOptions{})
	if q.QuantizeExpert(3, make([]float32, 512)) == nil || q.QuantizeExpertBF16(0, make([]uint16, 5)) == nil {
		t.Error("bad expert or length accepted")
	}
	if _, err := q.At(0, 8, 0); err == nil {
		t.Error("At out of range accepted")
	}
	// Streaming expert by expert (bf16) equals one call; worker counts do not
	// change the result.
	src := randomTensor(r, 3*8*64)
	b := make([]uint16, len(src))
	_ = BF16FromF32Slice(b, src)
	whole, _ := QuantizeBF16(b, 3, 8, 64, QuantizeOptions{Workers: 1})
	for x := 2; x >= 0; x-- {
		if err := q.QuantizeExpertBF16(x, b[x*512:(x+1)*512]); err != nil {
			t.Fatal(err)
		}
	}
	if string(q.Data) != string(whole.Data) || string(q.Scales) != string(whole.Scales) {
		t.Fatal("streamed quantization differs")
	}
	many, _ := QuantizeBF16(b, 3, 8, 64, QuantizeOptions{Workers: 5})
	if string(many.Data) != string(whole.Data) {
		t.Fatal("worker count changes the result")
	}
	// Empty tensors are fine.
	if _, err := Quantize(nil, 2, 0, 64, QuantizeOptions{}); err != nil {
		t.Fatal(err)
	}
}

// RegisterFedOrder permutes each 32-element block: every element of the
// block once, none from another block.
func TestRegisterFedOrder(t *testing.T) {
	seen := map[int]bool{}
	for p := 0; p < 96; p++ {
		n := RegisterFedOrder(p)
		if n/32 != p/32 || seen[n] {
			t.Fatalf("RegisterFedOrder(%d) = %d", p, n)
		}
		seen[n] = true
	}
	if got := []int{RegisterFedOrder(0), RegisterFedOrder(1), RegisterFedOrder(2), RegisterFedOrder(8), RegisterFedOrder(9), RegisterFedOrder(16), RegisterFedOrder(31)}; fmt.Sprint(got) != "[0 2 8 1 3 4 31]" {
		t.Errorf("RegisterFedOrder of 0, 1, 2, 8, 9, 16, 31: %v", got)
	}
}
