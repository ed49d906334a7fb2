package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mokc/mokc/internal/roofline"
)

func init() {
	commands = append(commands, func() *cli.Command {
		return &cli.Command{
			Name:  "plot",
			Usage: "draw plots of saved measurements",
			Subcommands: []*cli.Command{{
				Name:  "roofline",
				Usage: "draw `mokc bench --json` results (a sweep of T, forward and backward) on the roofline",
				UsageText: "for T in 64 256 1024 4096 16384; do mokc bench --model qwen3-30b-a3b --tokens $T --json; done >sweep.jsonl\n" +
					"mokc plot roofline -o roofline.svg sweep.jsonl [more.jsonl...]\n\n" +
					"Each result is a point at its FLOPs per byte and TFLOP/s (the bench's flops, bytes and median_ms),\n" +
					"labelled T=<tokens>; results of one model, target, direction, main-grad dtype and precision form one line. The\n" +
					"roof is min(peak TFLOP/s, peak GB/s x intensity) from the results' peak_tflops and peak_gbs, which\n" +
					"must agree. The format follows the output's extension: .svg, .png or .pdf.",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "out", Aliases: []string{"o"}, Value: "roofline.svg", Usage: "output file (.svg, .png or .pdf)"},
					&cli.StringFlag{Name: "title", Usage: "plot title", DefaultText: "the device of the results"},
					&cli.Float64Flag{Name: "width", Value: 8, Usage: "width in inches"},
					&cli.Float64Flag{Name: "height", Value: 5.5, Usage: "height in inches"},
				},
				Action: plotRoofline,
			}},
		}
	})
}

// plotRoofline is `mokc plot roofline`.
func plotRoofline(c *cli.Context) error {
	if c.NArg() == 0 {
		return errors.New("plot roofline: give one or more files of `mokc bench --json` results")
	}
	format := strings.TrimPrefix(strings.ToLower(filepath.Ext(c.String("out"))), ".")
	if format != "svg" && format != "png" && format != "pdf" {
		return fmt.Errorf("plot roofline: --out %q: want a .svg, .png or .pdf file", c.String("out"))
	}
	if !(c.Float64("width") >= 1 && c.Float64("height") >= 1) {
		return fmt.Errorf("plot roofline: --width %g --height %g: each at least 1 inch", c.Float64("width"), c.Float64("height"))
	}
	var reps []benchReport
	seen := map[string]bool{}
	for _, name := range c.Args().Slice() {
		if seen[name] {
			continue // a file given twice counts once
		}
		seen[name] = true
		rs, err := readBenchReports(name)
		if err != nil {
			return fmt.Errorf("plot roofline: %w", err)
		}
		reps = append(reps, rs...)
	}
	roofs, pts, device := rooflinePoints(reps)
	title := c.String("title")
	if title == "" {
		title = device
	}
	var img bytes.Buffer // drawn first: a failure leaves no file
	if err := roofline.Write(&img, format, title, roofs, pts, c.Float64("width"), c.Float64("height")); err != nil {
		return fmt.Errorf("plot %w", err)
	}
	if err := os.WriteFile(c.String("out"), img.Bytes(), 0o644); err != nil {
		return fmt.Errorf("plot roofline: %w", err)
	}
	lines := map[string]bool{}
	for _, p := range pts {
		lines[p.Series] = true
	}
	fmt.Fprintf(c.App.ErrWriter, "mokc: wrote %s (%d results on %d lines)\n", c.String("out"), len(pts), len(lines))
	return nil
}

// readBenchReports reads the JSON objects of a file of `mokc bench --json`
// output (one per line, or concatenated).
func readBenchReports(name string) ([]benchReport, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []benchReport
	dec := json.NewDecoder(f)
	for {
		var r benchReport
		if err := dec.Decode(&r); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: result %d is not a `mokc bench --json` result (a JSON object per line)", name, len(out)+1)
		}
		if !(r.FLOPs > 0 && r.Bytes > 0 && r.MedianMs > 0 && r.PeakTFLOPs > 0 && r.PeakGBs > 0) {
			return nil, fmt.Errorf("%s: result %d lacks a positive flops, bytes, median_ms, peak_tflops or peak_gbs: not a `mokc bench --json` result", name, len(out)+1)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no results", name)
	}
	return out, nil
}

// rooflinePoints turns bench results into the plot's points (one line per
// model, target, direction, main-grad dtype, weight-gradient kernel and
// precision) and its roofs (one per distinct peak, in order of
// appearance: mxfp8 results are benched against the FP8 peak); device is
// the results' device (the first's; "several devices" when they differ).
func rooflinePoints(reps []benchReport) ([]roofline.Roof, []roofline.Point, string) {
	var roofs []roofline.Roof
	device := reps[0].Device
	var pts []roofline.Point
	for _, r := range reps {
		if roof := (roofline.Roof{PeakTFLOPs: r.PeakTFLOPs, PeakGBs: r.PeakGBs}); !slices.Contains(roofs, roof) {
			roofs = append(roofs, roof)
		}
		if r.Device != device {
			device = "several devices"
		}
		series := r.Model + " " + r.Target + " forward"
		if r.Backward {
			series = r.Model + " " + r.Target + " forward+backward, " + r.MainGrad + " main grads"
			if r.WGrad != "" {
				series += ", " + r.WGrad + " weight gradients"
			}
		}
		if r.Precision != "" && r.Precision != "bf16" {
			series += ", " + r.Precision
		}
		if r.SaveFC1 {
			series += ", FC1 output saved"
		}
		pts = append(pts, roofline.Point{Series: series, Label: fmt.Sprintf("T=%d", r.Tokens),
			FLOPs: r.FLOPs, Bytes: r.Bytes, Seconds: r.MedianMs / 1e3})
	}
	return roofs, pts, device
}
