package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

func init() {
	inspectSubcommands = append(inspectSubcommands, &cli.Command{
		Name:      "program",
		Usage:     "print a layer's forward (or, with --backward, its backward) as a moe program (buffers and ops) and, with --target, its kernels",
		UsageText: "mokc inspect program --model qwen3-30b-a3b [--routing map] [--backward] [--target sm_90a]",
		Flags: append(append(layerFlags(), scheduleFlags()...),
			&cli.StringFlag{Name: "target", Usage: "also lower the program for this target (with the schedule flags: --lowering and the others) and list its kernels"},
			&cli.StringFlag{Name: "routing", Value: "ids", Usage: "routing input: ids or map"},
			&cli.BoolFlag{Name: "backward", Usage: "the backward program (dx, the routing-weight gradient, main grads accumulated)"},
		),
		Action: inspectProgram,
	})
}

// inspectProgram prints the moe program of a layer: its buffers (kind,
// dtype, shape in T) and ops (operands as role:buffer, = written, +=
// accumulated); with --target, each kernel of the PerOp lowering with its
// grid and parameters.
func inspectProgram(c *cli.Context) error {
	l, err := loadLayer(c)
	if err != nil {
		return fmt.Errorf("inspect program: %w", err)
	}
	if l.Routing, err = routingForm(c); err != nil {
		return err
	}
	build, dir := moe.Forward, "forward"
	if c.Bool("backward") {
		build, dir = moe.Backward, "backward"
	}
	p, err := build(l)
	if err != nil {
		return fmt.Errorf("inspect program: %w", err)
	}
	// The target and schedule are checked before anything is printed.
	var prog *codegen.Program
	var s schedule.Schedule
	if f := firstScheduleFlag(c, false); c.String("target") == "" && f != "" {
		return fmt.Errorf("inspect program: --%s, a schedule flag, describes the kernels of one target: give --target too", f)
	}
	if c.String("target") != "" {
		tg, err := loadTarget(c)
		if err != nil {
			return err
		}
		if s, err = layerSchedule(c, l, tg); err != nil {
			return err
		}
		if prog, err = codegen.Lower(p, s, codegen.LoweringOf(s)); err != nil {
			return fmt.Errorf("inspect program: %w", err)
		}
	}
	w := c.App.Writer
	fmt.Fprintf(w, "program %s %s\n%s", l.Name, dir, p)
	var bufs []launch.Buffer
	for _, b := range p.Buffers {
		bufs = append(bufs, b.Plan())
	}
	fmt.Fprintf(w, "memory: %s\n", programMemory(bufs))
	for _, b := range p.Buffers {
		if dt, shape, ok := p.TableEntry(b.Name); ok {
			n := int64(l.Experts) * dt.Size()
			for _, d := range shape {
				n *= int64(d)
			}
			fmt.Fprintf(w, "pointer table %s (%s): %d entries, each a device pointer to one expert's %s %v (%d B behind the table in all)\n",
				b.Name, b.Kind, l.Experts, dt, shape, n)
		}
	}
	if l.SaveFC1 {
		perToken := 8 * l.TopK * l.Intermediate
		fmt.Fprintf(w, "saved by the forward for the backward (--save-fc1): %s, the routed FC1 output, f32 [T*K, 2I] = %d B/token (%.1f MB at T = 4096); the backward re-dispatches and reads it instead of recomputing FC1\n",
			moe.BufFC1Out, perToken, float64(perToken)*4096/1e6)
	} else if dir == "backward" {
		fmt.Fprintln(w, "saved by the forward for the backward: nothing (0 B/token): the backward re-dispatches and recomputes FC1 from the forward's inputs (--save-fc1 keeps FC1's output instead)")
	}
	if prog == nil {
		return nil
	}
	how := "one per op"
	switch {
	case prog.PhaseKernels != nil:
		how = "one persistent kernel launched per run (one per block shape of the GEMMs, each at its T); its phases, the per-op kernels, follow"
	case slices.ContainsFunc(prog.Kernels, func(k codegen.Kernel) bool { return len(k.Phases) > 0 }):
		how = "one per op, but FC1 and FC2 in one kernel where they chain"
	}
	hdr := s
	if dir == "backward" {
		// The backward's GEMMs keep the base tiles at decode sizes and its
		// FC2 tile at many rows per expert, its FC1 keeps the gather phase
		// and nothing chains (codegen.Lower): its header leaves out the
		// forward's decode tiles, large-FC2 tile, gather, chain and the
		// store-warp gather's threshold.
		hdr.Decode, hdr.StoreGatherRows, hdr.FC2Large = nil, 0, schedule.LargeRowsTile{}
		hdr.Gather, hdr.Chain = schedule.GatherFC1, schedule.ChainOff
	}
	fmt.Fprintf(w, "\nkernels (%s, %s)\n", how, hdr)
	if l.Precision == schedule.MXFP8 && hasBF16GEMM(p) {
		fmt.Fprintf(w, "(the bf16 GEMMs of an mxfp8 layer take half the K block: %d)\n", s.FC1.K/2)
	}
	fmt.Fprintf(w, "memory with the lowering's own scratch (below): %s\n", programMemory(prog.Buffers))
	for _, b := range prog.Buffers {
		dims := make([]string, len(b.Shape))
		for i, d := range b.Shape {
			dims[i] = d.String()
		}
		if src := p.Buffer(b.Name); src != nil {
			if string(src.DType) != b.DType { // stored in another form (h as bf16 rounded to odd)
				fmt.Fprintf(w, "lowering stores %s as %s[%s]: %s\n", b.Name, b.DType, strings.Join(dims, ","), b.Doc)
			}
			continue
		}
		fmt.Fprintf(w, "lowering scratch %s %s[%s]: %s\n", b.Name, b.DType, strings.Join(dims, ","), b.Doc)
	}
	printKernels(w, prog.Kernels)
	if prog.PhaseKernels != nil {
		counters := ""
		if strings.HasPrefix(prog.Kernels[0].Name, "moe_forward") {
			counters = ", but where a phase's work items wait for their row tiles through counters instead (a bf16 forward's FC2 after FC1: docs/megakernel.md)"
		}
		for _, k := range prog.Kernels {
			// the phases of k: the per-op kernels named in k.Phases, in order
			var phases []codegen.Kernel
			for _, pk := range prog.PhaseKernels {
				if slices.Contains(k.Phases, k.Name+"/"+strings.TrimPrefix(pk.Name, "moe_")) {
					phases = append(phases, pk)
				}
			}
			fmt.Fprintf(w, "phases of %s, in order: each runs at the T its kernel would run at, the row-wise ones over their grid's blocks as virtual blocks of the persistent grid (a gather, combine or act_grad listed with the persistent grid is its bulk-copy form, one block per SM), a grid-wide barrier between two that run%s\n", k.Name, counters)
			printKernels(w, phases)
		}
	}
	return nil
}

// printKernels writes a line per kernel (grid, block, shared memory,
// residency, token ranges) and its parameters.
func printKernels(w io.Writer, ks []codegen.Kernel) {
	for _, k := range ks {
		var ps []string
		for _, prm := range k.Params {
			switch {
			case prm.Buffer != "":
				ps = append(ps, prm.Name+":"+prm.Buffer)
			case prm.Value != nil:
				ps = append(ps, prm.Name+"="+prm.Value.String())
			default:
				ps = append(ps, prm.Name)
			}
		}
		when := ""
		if k.Cluster > 1 {
			when += fmt.Sprintf(" in clusters of %d", k.Cluster)
		}
		if k.BlocksPerSM > 1 {
			when += fmt.Sprintf(" %d blocks per SM", k.BlocksPerSM)
		}
		if k.CoResident {
			when += " co-resident"
		}
		if len(k.Tokens) > 0 {
			when += " for T in " + tokenRanges(k.Tokens)
		}
		fmt.Fprintf(w, "%-16s grid %v x %v x %v block %d smem %d%s\n    (%s)\n", k.Name, k.Grid[0], k.Grid[1], k.Grid[2], k.Block, k.SharedBytes, when, strings.Join(ps, ", "))
	}
}

// tokenRanges writes token ranges as "1..4, 257.." (an open end for
// launch.MaxTokens).
func tokenRanges(rs []launch.TokenRange) string {
	var out []string
	for _, r := range rs {
		if r.Max == launch.MaxTokens {
			out = append(out, fmt.Sprintf("%d..", r.Min))
		} else {
			out = append(out, fmt.Sprintf("%d..%d", r.Min, r.Max))
		}
	}
	return strings.Join(out, ", ")
}

// programMemory sums buffers by kind, as bytes per token plus a constant:
// "input 4160 B/token + 1207959552 B, output ..., scratch ...".
func programMemory(bufs []launch.Buffer) string {
	const T = 1 << 20
	var parts []string
	for _, k := range []launch.BufferKind{launch.BufInput, launch.BufInOut, launch.BufOutput, launch.BufScratch} {
		var at0, atT int64
		n := 0
		for _, b := range bufs {
			if b.Kind == k {
				at0 += b.Bytes.Eval(0)
				atT += b.Bytes.Eval(T)
				n++
			}
		}
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d B/token + %d B", k, (atT-at0)/T, at0))
		}
	}
	return strings.Join(parts, ", ")
}

// hasBF16GEMM reports whether p has a GEMM without scales (an mxfp8
// layer's shared experts, its backward's data gradients).
func hasBF16GEMM(p *moe.Program) bool {
	for _, op := range p.Ops {
		if g, ok := op.(moe.GEMM); ok && g.AScales == nil {
			return true
		}
	}
	return false
}
