package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
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
		l, err := schedule.LoadHFConfig(file)
		if err == nil {
			noteQuantization(c, file)
		}
		return l, err
	}
	return schedule.Layer{}, errors.New("name a layer with --model NAME or --hf-config FILE")
}

// targetFlag is the --target flag.
func targetFlag(def string) cli.Flag {
	return &cli.StringFlag{Name: "target", Value: def, Usage: "sm_80, sm_90a or sm_100a"}
}

// loadTarget parses --target.
func loadTarget(c *cli.Context) (target.Target, error) {
	t, err := target.Parse(c.String("target"))
	if err != nil {
		return t, fmt.Errorf("--target: %w", err)
	}
	return t, nil
}

// scheduleFlags override parts of the target's default schedule, for tuning;
// the result is validated by schedule.Schedule.Validate and by codegen,
// whose refusals give the reason (registers, shared memory, warps).
func scheduleFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "fc1-tile", Usage: "FC1 tile MxNxK (rows x output columns x K block)", DefaultText: "the target's default"},
		&cli.StringFlag{Name: "fc2-tile", Usage: "FC2 tile MxNxK", DefaultText: "the target's default"},
		&cli.IntFlag{Name: "stages", Usage: "shared-memory pipeline stages", DefaultText: "the target's default"},
		&cli.IntFlag{Name: "mma-warps", Usage: "MMA warps per CTA (sm_90a: 4 per 64 tile rows)", DefaultText: "the target's default"},
		&cli.IntFlag{Name: "grid-ctas", Usage: "persistent grid size (0: one CTA per SM)", DefaultText: "the target's default"},
	}
}

// scheduleOverridden reports whether any schedule flag is set.
func scheduleOverridden(c *cli.Context) bool {
	for _, f := range scheduleFlags() {
		if c.IsSet(f.Names()[0]) {
			return true
		}
	}
	return false
}

// layerSchedule returns target's default schedule for l with the schedule
// flags applied, validated against l. When any flag is set the schedule
// loses its T-dependent GEMM variant: the flags describe the one shape of
// the routed GEMMs.
func layerSchedule(c *cli.Context, l schedule.Layer, target target.Target) (schedule.Schedule, error) {
	s, err := schedule.DefaultSchedule(l, target)
	if err != nil {
		return s, fmt.Errorf("schedule for %s: %w", target, err)
	}
	if scheduleOverridden(c) {
		s.Variant = nil // the flags describe the one shape of the routed GEMMs
	}
	for _, f := range []struct {
		name string
		tile *schedule.Tile
	}{{"fc1-tile", &s.FC1}, {"fc2-tile", &s.FC2}} {
		if !c.IsSet(f.name) {
			continue
		}
		var t schedule.Tile
		if n, err := fmt.Sscanf(c.String(f.name), "%dx%dx%d", &t.M, &t.N, &t.K); err != nil || n != 3 {
			return s, fmt.Errorf("--%s %q: want MxNxK, e.g. 128x256x64", f.name, c.String(f.name))
		}
		*f.tile = t
	}
	if c.IsSet("stages") {
		s.Stages = c.Int("stages")
	}
	if c.IsSet("mma-warps") {
		s.Warps.MMA = c.Int("mma-warps")
	}
	if c.IsSet("grid-ctas") {
		s.GridCTAs = c.Int("grid-ctas")
	}
	if err := s.Validate(l); err != nil {
		return s, fmt.Errorf("schedule flags: %w", err)
	}
	return s, nil
}

// noteQuantization tells the user when a config.json describes quantized
// weights (quantization_config, e.g. DeepSeek-V3's fp8 blocks or gpt-oss's
// mxfp4): the kernels mokc builds take bf16 weights, so such a checkpoint
// must be dequantized first.
func noteQuantization(c *cli.Context, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		return
	}
	var cfg struct {
		Quant *struct {
			Method string `json:"quant_method"`
		} `json:"quantization_config"`
	}
	if json.Unmarshal(data, &cfg) != nil || cfg.Quant == nil {
		return
	}
	method := cfg.Quant.Method
	if method == "" {
		method = "unnamed method"
	}
	w := c.App.ErrWriter
	if w == nil {
		w = os.Stderr
	}
	fmt.Fprintf(w, "mokc: note: %s has quantization_config (%s); the kernels take bf16 weights, so dequantize the checkpoint's experts to bf16 first\n", file, method)
}
