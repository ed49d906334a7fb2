package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/compiler"
	"github.com/mokc/mokc/launch"
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
	if s.Cluster > 1 {
		noteClusters(errWriter(c), a.Program.Kernels, s.Cluster)
	}
	if s.BlocksPerSM > 1 {
		noteSharesSM(errWriter(c), a.Program.Kernels, s.BlocksPerSM)
	}
	if s.Chain != schedule.ChainOff && s.Lowering == schedule.LoweringPerOp { // a persistent kernel's phases are listed by inspect program
		noteChain(errWriter(c), a.Program.Kernels, s.Chain, c.Bool("backward"))
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
		what := fmt.Sprintf("%d kernels", len(a.Program.Kernels))
		lo, hi, same := launchedRange(a.Program.Kernels)
		n := fmt.Sprint(hi)
		if lo < hi {
			n = fmt.Sprintf("%d to %d", lo, hi)
		}
		switch {
		case len(a.Program.Kernels) == 1 && same:
			what = fmt.Sprintf("1 kernel, %s, launched per %s at every T", a.Program.Kernels[0].Name, pass)
			if len(a.Program.Kernels[0].Phases) > 0 {
				what += fmt.Sprintf(" (%d phases: `%s` lists them)", len(a.Program.Kernels[0].Phases), inspectCommand(os.Args, target.String(), c.IsSet("target")))
			}
		case !same:
			what += fmt.Sprintf(", %s launched per %s at T >= 1, which ones by T (`%s` lists each kernel's T range)", n, pass, inspectCommand(os.Args, target.String(), c.IsSet("target")))
		case hi < len(a.Program.Kernels):
			what += fmt.Sprintf(", the same %d launched per %s at every T >= 1", hi, pass)
		default:
			what += fmt.Sprintf(", all launched per %s at every T >= 1", pass)
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

// launchedRange is the fewest and the most kernels of ks launched for one
// T >= 1, and whether the same kernels launch at every T >= 1: the
// kernels' token ranges change only at their ends, so the T where a range
// starts or ends, and T = 1, cover every set.
func launchedRange(ks []codegen.Kernel) (lo, hi int, same bool) {
	ts := []int64{1}
	for _, k := range ks {
		for _, r := range k.Tokens {
			ts = append(ts, max(r.Min, 1), max(r.Max, 1), min(r.Max+1, launch.MaxTokens))
		}
	}
	lo, same = len(ks)+1, true
	var first []bool // the kernels launched at T = 1
	for i, t := range ts {
		n := 0
		runs := make([]bool, len(ks))
		for j, k := range ks {
			if runs[j] = k.RunsAt(t); runs[j] {
				n++
			}
		}
		if i == 0 {
			first = runs
		}
		same = same && slices.Equal(runs, first)
		lo, hi = min(lo, n), max(hi, n)
	}
	return lo, hi, same
}

// noteClusters tells which routed GEMM kernels run in clusters of n and
// which do not (the engine pairs only some of them: codegen's
// checkSM90Cluster).
func noteClusters(w io.Writer, ks []launch.Kernel, n int) {
	in, out := kernelNames(ks, func(k launch.Kernel) bool { return k.Cluster > 1 }, "moe_fc", "moe_shared_fc")
	fmt.Fprintf(w, "mokc: note: --cluster %d: in clusters: %s; without (forms that gather their rows, promote 32-row tiles or split K, a chained kernel whose two GEMMs do not both pair, the shared experts' dense rows, the weight gradients, or an odd number of column blocks): %s\n",
		n, listOrNone(in), listOrNone(out))
}

// noteSharesSM tells which GEMM kernels run n blocks per SM and which
// one (the engine builds only some of them so: codegen's
// Engine.SharesSM).
func noteSharesSM(w io.Writer, ks []launch.Kernel, n int) {
	in, out := kernelNames(ks, func(k launch.Kernel) bool { return k.BlocksPerSM > 1 }, "moe_fc", "moe_shared_fc")
	fmt.Fprintf(w, "mokc: note: --blocks-per-sm %d: %d blocks per SM: %s; one block per SM (gathered rows, promoted 32-row tiles, a split reduction, the weight gradients, or tiles beyond half an SM's registers or 113 KB of shared memory): %s\n",
		n, n, listOrNone(in), listOrNone(out))
}

// noteChain tells which of the program's kernels run FC1 and FC2 chained
// (moe_fc1_fc2*) and which routed GEMMs stay kernels of their own, or, for
// a backward, that the chain is the forward's.
func noteChain(w io.Writer, ks []launch.Kernel, k schedule.ChainKind, backward bool) {
	if backward {
		fmt.Fprintf(w, "mokc: note: --chain %v chains the forward's GEMMs; the backward program is the same without it\n", k)
		return
	}
	in, out := kernelNames(ks, func(k launch.Kernel) bool { return strings.HasPrefix(k.Name, "moe_fc1_fc2") }, "moe_fc1", "moe_fc2")
	fmt.Fprintf(w, "mokc: note: --chain %v: FC1 and FC2 in one kernel: %s; as two kernels (where the two GEMMs run different tiles, a kernel quantizes h between mxfp8's register-fed GEMMs, or the mxfp8 decode FC1 gathers x's MXFP8 rows): %s\n",
		k, listOrNone(in), listOrNone(out))
}

// kernelNames splits the names of the kernels of ks into those that
// is picks and the others whose names start with one of prefixes.
func kernelNames(ks []launch.Kernel, is func(launch.Kernel) bool, prefixes ...string) (in, out []string) {
	for _, k := range ks {
		switch {
		case is(k):
			in = append(in, k.Name)
		case slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(k.Name, p) }):
			out = append(out, k.Name)
		}
	}
	return in, out
}

// listOrNone joins names with ", ", or says "none".
func listOrNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// inspectCommand is the `mokc inspect program` command line that lists the
// kernels of the `mokc build` command line args (os.Args): the same
// arguments without the output's (-o, --output, --emit), with --target
// target when the build took its default (inspect program lists no kernels
// without one), each argument quoted for a POSIX shell where it needs it.
func inspectCommand(args []string, target string, targetSet bool) string {
	out := []string{"mokc", "inspect", "program"}
	i := slices.Index(args[min(1, len(args)):], "build")
	if i < 0 {
		return strings.Join(out, " ")
	}
	for rest := args[i+2:]; len(rest) > 0; rest = rest[1:] {
		a := rest[0]
		name, _, inline := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if strings.HasPrefix(a, "-") && (name == "o" || name == "output" || name == "emit") {
			if !inline && len(rest) > 1 {
				rest = rest[1:] // its value
			}
			continue
		}
		out = append(out, shellQuote(a))
	}
	if !targetSet {
		out = append(out, "--target", target)
	}
	return strings.Join(out, " ")
}

// shellQuote is s as one word of a POSIX shell: as is when it holds only
// letters, digits and _./=:,@+-, else in single quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,@+-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
