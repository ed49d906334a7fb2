package roofline

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"
)

func TestRoof(t *testing.T) {
	r := Roof{PeakTFLOPs: 750, PeakGBs: 4200}
	if got := r.Ridge(); math.Abs(got-178.571) > 1e-3 {
		t.Errorf("ridge %v", got)
	}
	if got := r.At(10); got != 42 {
		t.Errorf("memory-bound roof at 10 FLOP/byte: %v TFLOP/s", got)
	}
	if got := r.At(1000); got != 750 {
		t.Errorf("compute-bound roof: %v", got)
	}
	p := Point{FLOPs: 2e12, Bytes: 1e10, Seconds: 4e-3}
	if p.Intensity() != 200 || p.TFLOPs() != 500 {
		t.Errorf("point: %v FLOP/byte, %v TFLOP/s", p.Intensity(), p.TFLOPs())
	}
}

// TestWrite: an SVG with the title, every series and label, and both roofs
// in the legend; bad input is refused.
func TestWrite(t *testing.T) {
	r := Roof{PeakTFLOPs: 750, PeakGBs: 4200}
	var pts []Point
	for _, T := range []float64{64, 1024, 4096} {
		pts = append(pts,
			Point{Series: "qwen3 forward", Label: "T=" + ftoa(T), FLOPs: T * 1e8, Bytes: 3e9 + T*1e5, Seconds: 1e-3 + T*1e-7},
			Point{Series: "qwen3 forward+backward", Label: "T=" + ftoa(T), FLOPs: 3 * T * 1e8, Bytes: 9e9 + T*3e5, Seconds: 4e-3 + T*5e-7})
	}
	var b bytes.Buffer
	if err := Write(&b, "svg", "qwen3-30b-a3b on the H200", []Roof{r, {PeakTFLOPs: 1500, PeakGBs: 4200}}, pts, 6, 4); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, want := range []string{"<svg", "qwen3-30b-a3b on the H200", "qwen3 forward+backward", "T=4096", "roof: 750 TFLOP/s, 4200 GB/s", "roof: 1500 TFLOP/s, 4200 GB/s", "TFLOP/s"} {
		if !strings.Contains(s, want) {
			t.Errorf("the SVG lacks %q", want)
		}
	}
	b.Reset()
	if err := Write(&b, "png", "x", []Roof{r}, pts, 6, 4); err != nil || !bytes.HasPrefix(b.Bytes(), []byte("\x89PNG")) {
		t.Errorf("png: %v", err)
	}
	for name, c := range map[string]struct {
		r   []Roof
		pts []Point
	}{
		"no points":   {[]Roof{r}, nil},
		"no roof":     {nil, pts},
		"half a roof": {[]Roof{r, {PeakTFLOPs: 750}}, pts},
		"zero time":   {[]Roof{r}, []Point{{Series: "s", FLOPs: 1, Bytes: 1}}},
	} {
		if err := Write(&b, "svg", "x", c.r, c.pts, 6, 4); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func ftoa(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
