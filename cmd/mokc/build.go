package main

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/mokc/mokc/compiler"
	"github.com/mokc/mokc/schedule"
)

func init() {
	commands = append(commands, func() *cli.Command {
		return &cli.Command{
			Name:      "build",
			Usage:     "emit the forward (or, with --backward, the backward) kernels of a layer as PTX, LLVM IR or a launch manifest",
			UsageText: "mokc build --model qwen3-30b-a3b --target sm_90a [--backward] [--emit ptx|llvm|manifest] -o moe.ptx",
			Flags: append(append(layerFlags(), scheduleFlags()...),
				targetFlag("sm_90a"),
				&cli.StringFlag{Name: "routing", Value: "ids", Usage: "routing input: ids (fixed-width ids + weights) or map (dense routing map + probs)"},
				&cli.StringFlag{Name: "emit", Value: "ptx", Usage: "ptx, llvm (LLVM 19 text) or manifest (JSON)"},
				&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Usage: "output file (default: standard output)"},
				&cli.BoolFlag{Name: "backward", Usage: "the backward program: dy in; dx, the routing-weight gradient out; main grads accumulated"},
			),
			Action: buildAction,
		}
	})
}

func buildAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("build: unexpected argument %q", c.Args().First())
	}
	l, err := loadLayer(c)
	if err != nil {
		return err
	}
	target, err := loadTarget(c)
	if err != nil {
		return err
	}
	emit := c.String("emit")
	switch emit {
	case "ptx", "llvm", "manifest":
	default:
		return fmt.Errorf("--emit %q: want ptx, llvm or manifest", emit)
	}
	if l.Routing, err = routingForm(c); err != nil {
		return err
	}
	if err := l.Validate(); err != nil {
		return err
	}
	if err := checkProgram(l, c.Bool("backward")); err != nil { // before the schedule, as run and bench
		return fmt.Errorf("build: %w", err)
	}
	s, err := layerSchedule(c, l, target)
	if err != nil {
		return err
	}
	compile, pass := compiler.Compile, "forward"
	if c.Bool("backward") {
		compile, pass = compiler.CompileBackward, "backward"
	}
	a, err := compile(l, s)
	if err != nil {
		return err
	}
	var out []byte
	switch emit {
	case "ptx":
		out = []byte(a.PTX.Text)
	case "llvm":
		s, err := a.LLVMText()
		if err != nil {
			return err
		}
		out = []byte(s)
	case "manifest":
		if out, err = a.ManifestJSON(); err != nil {
			return err
		}
		out = append(out, '\n')
	}
	var w io.Writer = c.App.Writer
	if path := c.String("output"); path != "" && path != "-" {
		if err := os.WriteFile(path, out, 0o644); err != nil {
			return err
		}
		// The GEMM variants' token ranges partition T >= 1, so every T >= 1
		// launches as many kernels as T = 1 does.
		launched := 0
		for _, k := range a.Program.Kernels {
			if k.RunsAt(1) {
				launched++
			}
		}
		what := fmt.Sprintf("%d kernels", len(a.Program.Kernels))
		if launched < len(a.Program.Kernels) {
			what += fmt.Sprintf(", %d launched per %s (GEMMs in tile shapes chosen by T)", launched, pass)
		}
		// The layer's options that change the kernels, beside the pass.
		form := pass
		if l.Precision == schedule.MXFP8 {
			form = "mxfp8 " + form
		}
		if l.SaveFC1 {
			form += " (FC1 output saved)"
		}
		fmt.Fprintf(os.Stderr, "mokc: wrote %s (%s %s, %s, %s, %d bytes)\n", path, l.Name, form, target, what, len(out))
		return nil
	}
	_, err = w.Write(out)
	return err
}
