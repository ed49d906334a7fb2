// Command mokc builds, runs, benchmarks and inspects MoE megakernels.
//
//	mokc build   --model NAME|--hf-config FILE --target sm_90a [--emit ptx|llvm|manifest] -o FILE
//	mokc run     (GPU) execute a layer and check it against the float64 reference
//	mokc bench   (GPU) time a layer against the roofline
//	mokc inspect --model NAME|--hf-config FILE   print the layer and the schedule per target
//	mokc inspect layout ...                      print a tile's layout and descriptor
//	mokc plot roofline -o FILE.svg RESULTS.jsonl draw saved bench results on the roofline
//
// Errors exit non-zero with a one-line reason.
package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mokc/mokc/compiler"
)

// commands is filled by the init functions of this package's files, one file
// per command. The constructors run in main, after every init, so a command
// may gather parts registered by other files.
var commands []func() *cli.Command

func main() {
	app := &cli.App{
		Name:     "mokc",
		Usage:    "a compiler and runtime for Mixture-of-Experts megakernels",
		Version:  compiler.Version, // --version, and the manifests' "mokc"
		Commands: build(commands),
		// Errors are printed once, by main, as one line.
		ExitErrHandler: func(*cli.Context, error) {},
		CommandNotFound: func(c *cli.Context, name string) {
			fmt.Fprintf(os.Stderr, "mokc: unknown command %q (see mokc --help)\n", name)
			os.Exit(1)
		},
	}
	if err := app.Run(os.Args); err != nil {
		fmt.Fprintf(os.Stderr, "mokc: %s\n", longFlags(err.Error()))
		os.Exit(1)
	}
}

func build(ctors []func() *cli.Command) []*cli.Command {
	out := make([]*cli.Command, len(ctors))
	for i, f := range ctors {
		out[i] = f()
		onUsageError(out[i], "mokc "+out[i].Name)
	}
	return out
}

// onUsageError makes cmd and its subcommands (path: the words that call
// cmd) answer a flag they cannot parse with one line through main ("flag
// provided but not defined: -x (see mokc build --help)") instead of the
// help text on stdout, which could end up in a redirected output file.
// A flag that only a subcommand defines is named with it ("--backward (see
// mokc inspect --help; mokc inspect program takes it)", once main has put
// it in the --name form: longFlags).
func onUsageError(cmd *cli.Command, path string) {
	cmd.OnUsageError = func(_ *cli.Context, err error, _ bool) error {
		var takers []string
		if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -"); ok {
			for _, sub := range cmd.Subcommands {
				for _, f := range sub.Flags {
					if slices.Contains(f.Names(), name) {
						takers = append(takers, path+" "+sub.Name)
						break
					}
				}
			}
		}
		if len(takers) > 0 {
			verb := "takes"
			if len(takers) > 1 {
				verb = "take"
			}
			return fmt.Errorf("%v (see %s --help; %s %s it)", err, path, strings.Join(takers, " and "), verb)
		}
		return fmt.Errorf("%v (see %s --help)", err, path)
	}
	for _, sub := range cmd.Subcommands {
		onUsageError(sub, path+" "+sub.Name)
	}
}

// singleDash matches a flag name of two or more characters written with one
// dash, as Go's flag package (under urfave/cli) words its parse errors:
// "invalid value \"abc\" for flag -hidden: parse error", "flag provided but
// not defined: -config", "flag needs an argument: -model", "invalid boolean
// value \"maybe\" for -json".
var singleDash = regexp.MustCompile(`((?:for(?: flag)?|defined:|argument:) )-([A-Za-z][A-Za-z0-9-]+)`)

// longFlags rewrites the flag names of a parse error in the --name form
// that mokc's help and documentation use.
func longFlags(msg string) string {
	return singleDash.ReplaceAllString(msg, "${1}--$2")
}
