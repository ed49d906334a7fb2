package roofline

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// Point is one measured run.
type Point struct {
	Series  string  // the line it belongs to, e.g. "qwen3-30b-a3b sm_90a forward"
	Label   string  // drawn beside the point, e.g. "T=4096"
	FLOPs   float64 // floating-point operations of one run
	Bytes   float64 // bytes moved to and from device memory by one run
	Seconds float64 // measured time of one run
}

// Intensity is FLOPs per byte.
func (p Point) Intensity() float64 { return p.FLOPs / p.Bytes }

// TFLOPs is the achieved rate, 10^12 FLOPs per second.
func (p Point) TFLOPs() float64 { return p.FLOPs / p.Seconds / 1e12 }

// Roof is the machine the points ran on.
type Roof struct {
	PeakTFLOPs float64 // compute ceiling, TFLOP/s
	PeakGBs    float64 // memory-bandwidth ceiling, GB/s (10^9 bytes/s)
}

// At is the roof at intensity x (FLOPs/byte): min(PeakTFLOPs, PeakGBs*x/1000)
// TFLOP/s.
func (r Roof) At(x float64) float64 { return math.Min(r.PeakTFLOPs, r.PeakGBs*x/1e3) }

// Ridge is the intensity where the two ceilings meet, FLOPs/byte.
func (r Roof) Ridge() float64 { return r.PeakTFLOPs * 1e3 / r.PeakGBs }

// Write draws the points of each series (in order of appearance, joined in
// increasing intensity) under the roofs (one per peak the points were
// measured against, e.g. bf16 and FP8 tensor-core peaks; each in the
// legend), titled title, as format ("svg", "png" or "pdf") of width x
// height inches to w. Errors: no points or no roof, a point with a
// non-positive FLOPs, bytes or time, a roof without both ceilings, or the
// drawing's.
func Write(w io.Writer, format, title string, roofs []Roof, pts []Point, width, height float64) error {
	if len(pts) == 0 {
		return errors.New("roofline: no points")
	}
	if len(roofs) == 0 {
		return errors.New("roofline: no roof")
	}
	lo, hi, ymax := roofs[0].Ridge(), roofs[0].Ridge(), 0.0
	for _, r := range roofs {
		if !(r.PeakTFLOPs > 0 && r.PeakGBs > 0) {
			return fmt.Errorf("roofline: roof %+v needs both ceilings", r)
		}
		lo, hi, ymax = math.Min(lo, r.Ridge()), math.Max(hi, r.Ridge()), math.Max(ymax, r.PeakTFLOPs)
	}
	var series []string
	by := map[string][]Point{}
	for _, p := range pts {
		if !(p.FLOPs > 0 && p.Bytes > 0 && p.Seconds > 0) {
			return fmt.Errorf("roofline: point %s %s: FLOPs %g, bytes %g, seconds %g must be positive", p.Series, p.Label, p.FLOPs, p.Bytes, p.Seconds)
		}
		if _, ok := by[p.Series]; !ok {
			series = append(series, p.Series)
		}
		by[p.Series] = append(by[p.Series], p)
		lo, hi = math.Min(lo, p.Intensity()), math.Max(hi, p.Intensity())
	}
	pl := plot.New()
	pl.Title.Text = title
	pl.X.Label.Text = "arithmetic intensity (FLOP/byte)"
	pl.Y.Label.Text = "TFLOP/s"
	pl.X.Scale, pl.Y.Scale = plot.LogScale{}, plot.LogScale{}
	pl.X.Tick.Marker, pl.Y.Tick.Marker = plot.LogTicks{Prec: -1}, plot.LogTicks{Prec: -1}
	pl.Legend.Top = false
	pl.Legend.Left = false

	// Each roof from a factor 4 below the lowest intensity to 4 above the
	// highest, with its ridge point on it; the first solid, the others
	// dashed and lighter.
	x0, x1 := lo/4, hi*4
	for i, r := range roofs {
		roof := plotter.XYs{{X: x0, Y: r.At(x0)}, {X: r.Ridge(), Y: r.PeakTFLOPs}, {X: x1, Y: r.At(x1)}}
		rl, err := plotter.NewLine(roof)
		if err != nil {
			return err
		}
		rl.Color, rl.Width = color.Gray{Y: uint8(90 + 60*i/len(roofs))}, vg.Points(1.5)
		if i > 0 {
			rl.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		}
		pl.Add(rl)
		pl.Legend.Add(fmt.Sprintf("roof: %g TFLOP/s, %g GB/s", r.PeakTFLOPs, r.PeakGBs), rl)
	}

	for i, name := range series {
		ps := by[name]
		sort.SliceStable(ps, func(a, b int) bool { return ps[a].Intensity() < ps[b].Intensity() })
		xy := make(plotter.XYs, len(ps))
		labels := make([]string, len(ps))
		for j, p := range ps {
			xy[j] = plotter.XY{X: p.Intensity(), Y: p.TFLOPs()}
			labels[j] = p.Label
		}
		line, points, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		line.Color, points.Color = plotutil.Color(i), plotutil.Color(i)
		points.Shape = plotutil.Shape(i)
		pl.Add(line, points)
		pl.Legend.Add(name, line, points)
		lab, err := plotter.NewLabels(plotter.XYLabels{XYs: xy, Labels: labels})
		if err != nil {
			return err
		}
		for k := range lab.TextStyle {
			lab.TextStyle[k].Color = plotutil.Color(i)
			lab.TextStyle[k].XAlign, lab.TextStyle[k].YAlign = 0.1, 0.1
		}
		pl.Add(lab)
	}
	pl.Y.Max = ymax * 1.5
	wt, err := pl.WriterTo(vg.Length(width)*vg.Inch, vg.Length(height)*vg.Inch, format)
	if err != nil {
		return fmt.Errorf("roofline: %w", err)
	}
	_, err = wt.WriteTo(w)
	return err
}
