package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
	"github.com/urfave/cli/v2"
)

// inspectModel prints the layer of --model or --hf-config and the schedule
// chosen for each target; --list prints the presets.
func inspectModel(c *cli.Context) error {
	w := c.App.Writer
	if c.Bool("list") {
		for _, n := range schedule.Presets() {
			l, err := schedule.Preset(n)
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "%-18s %s\n", n, strings.TrimPrefix(l.String(), n+": "))
		}
		return nil
	}
	if c.String("model") == "" && c.String("hf-config") == "" {
		return errors.New("inspect: give --model NAME, --hf-config FILE or --list")
	}
	l, err := loadLayer(c)
	if err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	if err := l.Validate(); err != nil {
		return fmt.Errorf("inspect: %w", err)
	}
	printLayer(w, l)
	return nil
}

// printLayer writes the layer's fields and the default schedule per target.
func printLayer(w io.Writer, l schedule.Layer) {
	row := func(k string, v any) { fmt.Fprintf(w, "  %-22s %v\n", k, v) }
	fmt.Fprintf(w, "layer %s\n", l.Name)
	row("hidden size H", l.Hidden)
	row("intermediate size I", l.Intermediate)
	row("routed experts E", l.Experts)
	row("top-k K", l.TopK)
	if l.SharedExperts == 0 {
		row("shared experts", "none")
	} else {
		s := fmt.Sprintf("%d x I_s=%d (%d), %v", l.SharedExperts, l.SharedIntermediate, l.SharedWidth(), l.SharedActivation)
		if l.SharedActivation != schedule.SwiGLU {
			s += fmt.Sprintf(" limit %g", l.SharedSwiGLULimit)
		}
		if l.SharedGate {
			s += ", sigmoid output gate"
		}
		row("shared experts", s)
	}
	a := l.Activation.String()
	switch l.Activation {
	case schedule.ClampedSwiGLU:
		a += fmt.Sprintf(" limit %g", l.SwiGLULimit)
	case schedule.GPTOSS:
		a += fmt.Sprintf(" limit %g alpha %g", l.SwiGLULimit, l.GPTOSSAlpha)
	}
	row("activation", a)
	if l.GateUpInterleaved {
		row("FC1 rows", "gate/up interleaved")
	} else {
		row("FC1 rows", "gate 0..I-1, up I..2I-1")
	}
	row("biases", l.Biases)
	if l.RouterWeightOnInput {
		row("routing weight", "scales the expert input")
	} else {
		row("routing weight", "scales the expert output")
	}
	r := l.Router
	rs := r.Score.String()
	if r.Normalize {
		rs += ", top-k renormalised"
	}
	if r.Scale != 0 && r.Scale != 1 {
		rs += fmt.Sprintf(", scale %g", r.Scale)
	}
	if r.Groups > 1 {
		rs += fmt.Sprintf(", %d groups top-%d", r.Groups, r.TopKGroups)
	}
	row("router", rs)
	row("weight precision", l.Precision)
	row("routing input", l.Routing)
	row("weight storage", l.Storage)
	row("main grad", l.MainGrad)
	if l.SaveFC1 {
		row("saved for the backward", fmt.Sprintf("the routed FC1 output, f32 [T*K, 2I]: %d B/token (--save-fc1)", 8*l.TopK*l.Intermediate))
	} else {
		row("saved for the backward", "nothing: the backward recomputes FC1")
	}
	row("weights", fmt.Sprintf("%d bytes (%.1f GB)", l.WeightBytes(), float64(l.WeightBytes())/1e9))
	fmt.Fprintln(w, "schedules")
	if err := checkProgram(l, false); err != nil {
		fmt.Fprintf(w, "  not available on any target: %v\n", err)
		return
	}
	if l.Precision == schedule.MXFP8 {
		fmt.Fprintln(w, "  (mxfp8 weights: forward and backward on sm_90a and sm_100a, not sm_80: docs/mxfp8.md)")
	}
	for _, t := range target.All() {
		s, refused, err := targetSchedule(l, t)
		if err != nil {
			refused = err.Error()
		}
		if refused != "" {
			fmt.Fprintf(w, "  %-8s not available: %s\n", t, refused)
			continue
		}
		fmt.Fprintf(w, "  %-8s FC1 %v  FC2 %v  stages %d  warps %d producer + %d mma + %d epilogue  cluster %d  %s\n",
			t, s.FC1, s.FC2, s.Stages, s.Warps.Producer, s.Warps.MMA, s.Warps.Epilogue, s.Cluster, s.GridText())
		prog, _ := codegen.Build(l, s) // nil where it does not lower
		smem := kernelSmem(prog, max(s.SharedMemoryBytes(l, s.FC1, true), s.SharedMemoryBytes(l, s.FC2, false)), "moe_fc1", "moe_fc2")
		extra := ""
		if t == target.SM100a {
			extra = fmt.Sprintf(", TMEM %d columns", max(s.TMEMColumns(l, s.FC1), s.TMEMColumns(l, s.FC2)))
		}
		fmt.Fprintf(w, "  %-8s shared memory %d of %d bytes%s; at most %d tokens (32-bit indices)\n", "", smem, t.SharedMemoryLimit(), extra, s.MaxTokens(l))
		if l.Precision == schedule.MXFP8 && t == target.SM90a {
			fmt.Fprintf(w, "  %-8s mxfp8 GEMMs: %s (--mx-gemm; docs/mxfp8.md)\n", "", mxGemmText[s.MXGemm])
		}
		if v, ok := s.DecodeSchedule(); ok {
			lo, hi := s.Decode.VariantTokens(l.TopK, l.Experts)
			fmt.Fprintf(w, "  %-8s for %d..%d mean rows per expert (T = %d..%d), the forward's GEMMs as %s/moe_fc2_%s and the shared experts' in the same tiles (the decode tiles, --decode-max-rows): FC1 %v  FC2 %v  stages %d  warps %d producer + %d mma; shared memory %d bytes\n",
				"", s.Decode.MinRows, s.Decode.MaxRows, lo, hi, programKernel(prog, "moe_fc1_"+s.Decode.Name+"_gathered", "moe_fc1_"+s.Decode.Name), s.Decode.Name, v.FC1, v.FC2, v.Stages, v.Warps.Producer, v.Warps.MMA,
				kernelSmem(prog, max(v.SharedMemoryBytes(l, v.FC1, true), v.SharedMemoryBytes(l, v.FC2, false)),
					"moe_fc1_"+s.Decode.Name, "moe_fc1_"+s.Decode.Name+"_gathered", "moe_fc2_"+s.Decode.Name))
		}
		if v, ok := s.VariantSchedule(); ok {
			lo, hi := s.Variant.VariantTokens(l.TopK, l.Experts)
			which := "routed GEMMs"
			if s.Variant.MXOnly {
				which = "mxfp8 GEMMs"
			}
			if v.FC1.M == 32 {
				which += " (32 rows: the operand swap)"
			}
			fmt.Fprintf(w, "  %-8s for %d..%d mean rows per expert (T = %d..%d), the %s as moe_fc1_%s/moe_fc2_%s: FC1 %v  FC2 %v  stages %d  warps %d producer + %d mma; shared memory %d bytes\n",
				"", s.Variant.MinRows, s.Variant.MaxRows, lo, hi, which, s.Variant.Name, s.Variant.Name, v.FC1, v.FC2, v.Stages, v.Warps.Producer, v.Warps.MMA,
				kernelSmem(prog, max(v.SharedMemoryBytes(l, v.FC1, true), v.SharedMemoryBytes(l, v.FC2, false)),
					"moe_fc1_"+s.Variant.Name, "moe_fc1_"+s.Variant.Name+"_gathered", "moe_fc2_"+s.Variant.Name))
		}
		if v, ok := s.LargeSchedule(); ok {
			fmt.Fprintf(w, "  %-8s %s, the register-fed mxfp8 FC2 as moe_fc2_large: FC2 %v  stages %d  warps %d producer + %d mma; shared memory %d bytes\n",
				"", s.FC2Large.Where(l.TopK, l.Experts), v.FC2, v.Stages, v.Warps.Producer, v.Warps.MMA, kernelSmem(prog, v.SharedMemoryBytes(l, v.FC2, false), "moe_fc2_large"))
		}
	}
}

// kernelSmem returns the most dynamic shared memory, in bytes, of the
// kernels of prog named names (what each launches with: the GEMM's ring
// and tiles plus the fused work of its epilogue, such as the decode FC1's
// quantization of h), or est, the schedule's estimate of the GEMM alone
// (schedule.Schedule.SharedMemoryBytes), where prog is nil or has none
// of them.
func kernelSmem(prog *codegen.Program, est int, names ...string) int {
	if prog == nil {
		return est
	}
	got := 0
	for _, k := range prog.Kernels {
		if slices.Contains(names, k.Name) {
			got = max(got, int(k.SharedBytes))
		}
	}
	if got == 0 {
		return est
	}
	return got
}

// mxGemmText says how each MXFP8 GEMM kind runs on sm_90a (mokc inspect).
var mxGemmText = map[schedule.MXGemmKind]string{
	schedule.MXGemmPromote: "promote (e4m3 wgmma per 32-wide block, promoted into f32 with the scales)",
	schedule.MXGemmExpand:  "expand (e4m3 tiles widened to bf16 in shared memory by converter warps)",
	schedule.MXGemmRegFed:  "regfed (register-fed: the rows' MXFP8 values as bf16, the weights widened to bf16 in registers, bf16 wgmma), past the decode tiles' range",
}

// programKernel is the first of names that prog has a kernel of, or the
// last name when it has none of them (or prog is nil): the name a kernel
// takes in the program (e.g. the gathering form of an FC1 kernel).
func programKernel(prog *codegen.Program, names ...string) string {
	if prog != nil {
		for _, n := range names {
			if slices.ContainsFunc(prog.Kernels, func(k codegen.Kernel) bool { return k.Name == n }) {
				return n
			}
		}
	}
	return names[len(names)-1]
}
