package layouts

import (
	"math"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// The routed FC1 of one DeepSeek-V3 layer: E = 256 experts, [2I, H] =
// [4096, 7168] each (deepseek-ai/DeepSeek-V3 config.json: hidden_size 7168,
// moe_intermediate_size 2048, n_routed_experts 256), quantized along H (K).
const (
	dsv3Experts = 256
	dsv3Rows    = 4096
	dsv3K       = 7168
)

// fillExpert writes rows x cols pseudo-random weights (roughly normal, std
// about 0.02, the row scale varying 1..4x) for expert e into dstF or, if
// that is nil, into dstB as bf16, in parallel. A xorshift generator keeps
// this cheap next to the quantizer.
func fillExpert(e, rows, cols int, dstF []float32, dstB []uint16) {
	parallelRanges(rows, 0, func(lo, hi int) {
		s := uint64(e)*0x9E3779B97F4A7C15 + uint64(lo)*0xBF58476D1CE4E5B9 + 1
		row := make([]float32, cols)
		for r := lo; r < hi; r++ {
			scale := float32(0.02*float64(1+r%4)) / 65536
			for c := range row {
				s ^= s << 13
				s ^= s >> 7
				s ^= s << 17
				// Sum of four 16-bit uniforms minus their mean: a cheap bell.
				u := float32(s&0xFFFF) + float32(s>>16&0xFFFF) + float32(s>>32&0xFFFF) + float32(s>>48) - 131070
				row[c] = u * scale
			}
			if dstF != nil {
				copy(dstF[r*cols:], row)
			} else {
				_ = BF16FromF32Slice(dstB[r*cols:(r+1)*cols], row)
			}
		}
	})
}

// cpuSeconds returns the user+system CPU time this process has used.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// TestDeepSeekV3FC1PackingSpeed quantizes and swizzles the routed FC1 of one
// DeepSeek-V3 layer (256 x 4096 x 7168, 7.5e9 elements), one expert at a
// time: the weights are generated per expert (never the 15 GB bf16 tensor
// at once), then quantized (blocks of 32 along K, round-up scales) into a
// per-expert MXFP8 buffer and its scales refreshed into the sm_100 tile
// layout. Only quantize + swizzle is timed. Run with MOKC_BENCH=1 (about a
// minute on 2 cores); MOKC_BENCH_F32=1 also times an f32 source.
func TestDeepSeekV3FC1PackingSpeed(t *testing.T) {
	if os.Getenv("MOKC_BENCH") != "1" {
		t.Skip("benchmark; set MOKC_BENCH=1")
	}
	experts := dsv3Experts
	run := func(name string, useF32 bool) {
		n := dsv3Rows * dsv3K
		var srcB []uint16
		var srcF []float32
		if useF32 {
			srcF = make([]float32, n)
		} else {
			srcB = make([]uint16, n)
		}
		q, err := NewMXFP8(1, dsv3Rows, dsv3K, QuantizeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sfl, _ := NewSFLayout([]int{dsv3Rows}, dsv3K)
		sf := make([]uint8, sfl.Size)
		var quant, swz, gen time.Duration
		var cpu float64
		for e := 0; e < experts; e++ {
			t0 := time.Now()
			fillExpert(e, dsv3Rows, dsv3K, srcF, srcB)
			c1 := cpuSeconds()
			t1 := time.Now()
			if useF32 {
				err = q.QuantizeExpert(0, srcF)
			} else {
				err = q.QuantizeExpertBF16(0, srcB)
			}
			if err != nil {
				t.Fatal(err)
			}
			t2 := time.Now()
			if err := sfl.Refresh(sf, q.Scales); err != nil {
				t.Fatal(err)
			}
			t3 := time.Now()
			cpu += cpuSeconds() - c1
			gen += t1.Sub(t0)
			quant += t2.Sub(t1)
			swz += t3.Sub(t2)
			if e == 0 {
				// Spot check: the first expert dequantizes to within half an
				// E4M3 step of its source (relative 2^-4 for normal codes, 2^-10
				// of the block scale for subnormal ones).
				for i := 0; i < n; i += 997 {
					r, c := i/dsv3K, i%dsv3K
					v, _ := q.At(0, r, c)
					var x float64
					if useF32 {
						x = float64(srcF[i])
					} else {
						x = float64(F32FromBF16(srcB[i]))
					}
					sx := float64(F32FromUE8M0(q.Scales[q.ScaleIndex(0, r, c)]))
					if d := math.Abs(float64(v) - x); d > math.Abs(x)/16+sx/1024 {
						t.Fatalf("element (%d, %d) = %g dequantizes to %g (scale %g)", r, c, x, v, sx)
					}
				}
			}
		}
		elems := float64(experts) * float64(n)
		t.Logf("%s: %d experts x %d x %d on %d cores: quantize %.2f s + swizzle %.3f s = %.2f s wall (%.2f ns/element/core); "+
			"CPU time %.2f s (%.2f s per core); generating the input took %.2f s (not counted)",
			name, experts, dsv3Rows, dsv3K, runtime.GOMAXPROCS(0), quant.Seconds(), swz.Seconds(), (quant + swz).Seconds(),
			quant.Seconds()*1e9*float64(runtime.GOMAXPROCS(0))/elems, cpu, cpu/float64(runtime.GOMAXPROCS(0)), gen.Seconds())
	}
	run("bf16 source", false)
	if os.Getenv("MOKC_BENCH_F32") == "1" {
		run("f32 source", true)
	}
}

// BenchmarkQuantizeExpertBF16 quantizes one DeepSeek-V3 FC1 expert
// (4096 x 7168 bf16) per iteration.
func BenchmarkQuantizeExpertBF16(b *testing.B) {
	src := make([]uint16, dsv3Rows*dsv3K)
	fillExpert(0, dsv3Rows, dsv3K, nil, src)
	benchQuantizeExpert(b, src, 2, (*MXFP8).QuantizeExpertBF16)
}

// BenchmarkQuantizeExpertF32 is BenchmarkQuantizeExpertBF16 with an f32
// source.
func BenchmarkQuantizeExpertF32(b *testing.B) {
	src := make([]float32, dsv3Rows*dsv3K)
	fillExpert(0, dsv3Rows, dsv3K, src, nil)
	benchQuantizeExpert(b, src, 4, (*MXFP8).QuantizeExpert)
}

// benchQuantizeExpert times quant of the one-expert source src (size
// bytes per element) per iteration.
func benchQuantizeExpert[T any](b *testing.B, src []T, size int, quant func(*MXFP8, int, []T) error) {
	q, _ := NewMXFP8(1, dsv3Rows, dsv3K, QuantizeOptions{})
	b.SetBytes(int64(len(src) * size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := quant(q, 0, src); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSFRefreshExpert swizzles one expert's scales (4096 x 224).
func BenchmarkSFRefreshExpert(b *testing.B) {
	l, _ := NewSFLayout([]int{dsv3Rows}, dsv3K)
	src := make([]uint8, dsv3Rows*l.NSF)
	dst := make([]uint8, l.Size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = l.Refresh(dst, src)
	}
}
