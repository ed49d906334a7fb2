package main

import (
	"github.com/urfave/cli/v2"
)

// inspectSubcommands is filled by init functions of the files that add a form
// of `mokc inspect` (inspect_layout.go, ...).
var inspectSubcommands []*cli.Command

func init() {
	commands = append(commands, func() *cli.Command {
		return &cli.Command{
			Name:  "inspect",
			Usage: "print a layer and the schedule chosen per target, or a tile layout (inspect layout)",
			Flags: []cli.Flag{
				&cli.StringFlag{Name: "model", Usage: "a preset name (see `mokc inspect --list`)"},
				&cli.StringFlag{Name: "hf-config", Usage: "a Hugging Face config.json file"},
				&cli.BoolFlag{Name: "list", Usage: "list the presets"},
				&cli.StringFlag{Name: "precision", Usage: "routed-weight precision: bf16 or mxfp8 (default: the model's, bf16)"},
			},
			Subcommands: inspectSubcommands,
			Action:      inspectModel, // inspect_model.go
		}
	})
}
