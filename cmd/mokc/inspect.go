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
			Flags: append(layerFlags(),
				&cli.BoolFlag{Name: "list", Usage: "list the presets"},
			),
			Subcommands: inspectSubcommands,
			Action:      inspectModel, // inspect_model.go
		}
	})
}
