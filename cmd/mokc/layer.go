package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/mokc/mokc/schedule"
)

// layerFlags are the flags that name a layer: a preset or a Hugging Face
// config.json file.
func layerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", Usage: "a preset name (mokc inspect --list lists them)"},
		&cli.StringFlag{Name: "hf-config", Usage: "a Hugging Face config.json file of an MoE model"},
	}
}

// loadLayer returns the layer named by --model or --hf-config (exactly one).
func loadLayer(c *cli.Context) (schedule.Layer, error) {
	model, file := c.String("model"), c.String("hf-config")
	switch {
	case model != "" && file != "":
		return schedule.Layer{}, errors.New("give --model or --hf-config, not both")
	case model != "":
		return schedule.Preset(model)
	case file != "":
		return schedule.LoadHFConfig(file)
	}
	return schedule.Layer{}, errors.New("name a layer with --model NAME or --hf-config FILE")
}

// targetFlag is the --target flag.
func targetFlag(def string) cli.Flag {
	return &cli.StringFlag{Name: "target", Value: def, Usage: "sm_80, sm_90a or sm_100a"}
}

// loadTarget parses --target.
func loadTarget(c *cli.Context) (schedule.Target, error) {
	t, err := schedule.ParseTarget(c.String("target"))
	if err != nil {
		return t, fmt.Errorf("--target: %w", err)
	}
	return t, nil
}
