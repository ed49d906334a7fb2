package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
	"github.com/urfave/cli/v2"
)

// `mokc inspect layout` prints a shared-memory operand tile (layout in
// shape:stride notation, swizzle, descriptors), with --model (or
// --hf-config) the shared memory of every grouped GEMM of the layer's
// schedule exactly as the kernels lay it out (layouts.PlanGemmSmem: the
// operand tiles, the B tile's gate/up row map, ring, staging, mbarriers,
// TMEM), or, with --scales, the sm_100 scale-factor layout.
//
//	mokc inspect layout --model gpt-oss-120b --target sm_90a
//	mokc inspect layout --target sm_90a --operand A --tile 64x64 --dtype bf16
//	mokc inspect layout --target sm_100a --operand B --tile 256x128 --dtype e4m3 --n 256
//	mokc inspect layout --target sm_100a --scales --rows 129 --k 2880
//	mokc inspect layout --target sm_100a --scales --rows 1,127,128,129 --k 2880
func init() {
	inspectSubcommands = append(inspectSubcommands, &cli.Command{
		Name:  "layout",
		Usage: "print a tile's shared-memory layout and descriptor, a layer's GEMM tiles (--model), or the sm_100 scale-factor layout (--scales)",
		Flags: append(append([]cli.Flag{
			&cli.StringFlag{Name: "target", Usage: "sm_80, sm_90a or sm_100a"},
			&cli.StringFlag{Name: "operand", Value: "A", Usage: "A (M x K) or B (N x K)"},
			&cli.StringFlag{Name: "tile", Value: "64x64", Usage: "rows x K in elements, e.g. 128x64"},
			&cli.StringFlag{Name: "dtype", Value: "bf16", Usage: "bf16 or e4m3"},
			&cli.StringFlag{Name: "swizzle", Usage: "none, 32B, 64B or 128B (default: the widest that fits a row)"},
			&cli.StringFlag{Name: "addr", Value: "0", Usage: "shared-memory address of the tile (decimal or 0x hex)"},
			&cli.IntFlag{Name: "n", Usage: "sm_100a: also print the instruction descriptor of an M x N MMA"},
			&cli.BoolFlag{Name: "scales", Usage: "print the sm_100a scale-factor layout instead of a tile"},
			&cli.StringFlag{Name: "rows", Usage: "--scales: rows per expert, comma-separated (e.g. 1,127,128,129)"},
			&cli.IntFlag{Name: "k", Usage: "--scales: reduction length K in elements"},
		}, layerFlags()...), scheduleFlags()...),
		Action: inspectLayout,
	})
}

func inspectLayout(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("inspect layout: unexpected argument %q", c.Args().First())
	}
	if c.String("target") == "" {
		return fmt.Errorf("inspect layout: give --target sm_80, sm_90a or sm_100a")
	}
	tg, err := target.Parse(c.String("target"))
	if err != nil {
		return fmt.Errorf("inspect layout: %w", err)
	}
	addr, err := strconv.ParseUint(c.String("addr"), 0, 32)
	if err != nil {
		return fmt.Errorf("inspect layout: --addr %q: not an address", c.String("addr"))
	}
	if c.IsSet("model") || c.IsSet("hf-config") {
		return inspectGemmLayouts(c, tg)
	}
	if c.Bool("scales") {
		if tg != target.SM100a {
			return fmt.Errorf("inspect layout: --scales describes the sm_100a layout, not %s", tg)
		}
		rows, err := parseInts(c.String("rows"))
		if err != nil {
			return fmt.Errorf("inspect layout: --rows: %w", err)
		}
		l, err := layouts.NewSFLayout(rows, c.Int("k"))
		if err != nil {
			return fmt.Errorf("inspect layout: %w", err)
		}
		s, err := l.Describe(uint32(addr))
		if err != nil {
			return fmt.Errorf("inspect layout: %w", err)
		}
		fmt.Fprint(c.App.Writer, s)
		return nil
	}
	var op layouts.Operand
	switch strings.ToUpper(c.String("operand")) {
	case "A":
		op = layouts.OperandA
	case "B":
		op = layouts.OperandB
	default:
		return fmt.Errorf("inspect layout: --operand %q: want A or B", c.String("operand"))
	}
	dt, err := layouts.ParseDType(c.String("dtype"))
	if err != nil {
		return fmt.Errorf("inspect layout: %w", err)
	}
	dims := strings.Split(strings.ToLower(c.String("tile")), "x")
	if len(dims) != 2 {
		return fmt.Errorf("inspect layout: --tile %q: want ROWSxK, e.g. 64x64", c.String("tile"))
	}
	rk, err := parseInts(dims[0] + "," + dims[1])
	if err != nil {
		return fmt.Errorf("inspect layout: --tile %q: %w", c.String("tile"), err)
	}
	var t *layouts.SmemTile
	if s := c.String("swizzle"); s != "" {
		sw, err := layouts.ParseSwizzleMode(s)
		if err != nil {
			return fmt.Errorf("inspect layout: %w", err)
		}
		t, err = layouts.NewSmemTileSwizzle(tg, op, dt, rk[0], rk[1], sw)
		if err != nil {
			return fmt.Errorf("inspect layout: %w", err)
		}
	} else if t, err = layouts.NewSmemTile(tg, op, dt, rk[0], rk[1]); err != nil {
		return fmt.Errorf("inspect layout: %w", err)
	}
	s, err := t.Describe(uint32(addr), c.Int("n"))
	if err != nil {
		return fmt.Errorf("inspect layout: %w", err)
	}
	fmt.Fprint(c.App.Writer, s)
	return nil
}

// inspectGemmLayouts prints the shared-memory plan of each grouped GEMM of
// the layer's schedule on tg (the default, or with the schedule flags).
func inspectGemmLayouts(c *cli.Context, tg target.Target) error {
	l, err := loadLayer(c)
	if err != nil {
		return fmt.Errorf("inspect layout: %w", err)
	}
	s, err := layerSchedule(c, l, tg)
	if err != nil {
		return fmt.Errorf("inspect layout: %w", err)
	}
	type gemm struct {
		name    string
		sched   schedule.Schedule
		tile    schedule.Tile
		fc1     bool
		variant bool // the routed GEMMs' tiles of s.Variant
		decode  bool // the forward's routed GEMMs' tiles of s.Decode
		large   bool // the register-fed FC2's tile of s.FC2Large
	}
	gemms := []gemm{{name: "moe_fc1", sched: s, tile: s.FC1, fc1: true}, {name: "moe_fc2", sched: s, tile: s.FC2}}
	if v, ok := s.VariantSchedule(); ok {
		gemms = append(gemms, gemm{name: "moe_fc1_" + s.Variant.Name, sched: v, tile: v.FC1, fc1: true, variant: true},
			gemm{name: "moe_fc2_" + s.Variant.Name, sched: v, tile: v.FC2, variant: true})
	}
	if v, ok := s.DecodeSchedule(); ok {
		gemms = append(gemms, gemm{name: "moe_fc1_" + s.Decode.Name, sched: v, tile: v.FC1, fc1: true, decode: true},
			gemm{name: "moe_fc2_" + s.Decode.Name, sched: v, tile: v.FC2, decode: true})
	}
	if v, ok := s.LargeSchedule(); ok {
		gemms = append(gemms, gemm{name: "moe_fc2_large", sched: v, tile: v.FC2, large: true})
	}
	prog, err := codegen.Build(l, s) // for the kernels the lowering adds (inspectGathered)
	if err != nil {
		return fmt.Errorf("inspect layout: %w", err)
	}
	for i, g := range gemms {
		p, err := g.sched.GemmSmem(l, g.tile, g.fc1)
		if err != nil {
			return fmt.Errorf("inspect layout: %s: %w", g.name, err)
		}
		text, err := p.Describe()
		if err != nil {
			return fmt.Errorf("inspect layout: %s: %w", g.name, err)
		}
		if i > 0 {
			fmt.Fprintln(c.App.Writer)
		}
		shared := "the shared-expert GEMMs use the same tiles"
		if s.Decode != nil && l.SharedExperts > 0 {
			lo, hi := s.Decode.VariantTokens(l.TopK, l.Experts)
			shared = fmt.Sprintf("the shared-expert GEMMs use the same tiles outside the decode tiles' T = %d..%d", lo, hi)
		}
		switch {
		case g.large:
			shared = "the register-fed mxfp8 FC2 " + s.FC2Large.Where(l.TopK, l.Experts)
		case g.variant && s.Variant.MXOnly:
			keep := "the backward's bf16 GEMMs"
			if l.SharedExperts > 0 {
				keep = "the shared experts and " + keep
			}
			shared = "the mxfp8 GEMMs only; " + keep + " keep moe_fc1/moe_fc2's tiles"
			if g.tile.M == 32 {
				shared += "; 32 rows: the operand swap, the weights as wgmma's A"
			}
		case g.variant:
			shared = "the routed GEMMs only; the shared experts keep moe_fc1/moe_fc2's tiles"
		case g.decode:
			lo, hi := s.Decode.VariantTokens(l.TopK, l.Experts)
			shared = fmt.Sprintf("the forward's GEMMs at T = %d..%d only, the shared experts' too (moe_shared_fc*_%s, split or whole); the backward keeps moe_fc1/moe_fc2's tiles", lo, hi, s.Decode.Name)
		case l.SharedExperts == 0:
			shared = "the routed GEMMs; the layer has no shared experts"
		case l.Precision == schedule.MXFP8:
			shared = fmt.Sprintf("the shared-expert GEMMs, bf16, use them with half the K block: %d", g.tile.K/2)
		}
		fmt.Fprintf(c.App.Writer, "== %s: tile %v (%s)\n%s", g.name, g.tile, shared, text)
		if g.fc1 {
			inspectGathered(c, prog, g.name)
		}
	}
	decode := ""
	if s.Decode != nil {
		decode = s.Decode.Name
	}
	inspectSplit(c, prog, decode)
	return nil
}

// inspectSplit prints a line for each kernel of p that runs a GEMM with
// its reduction split in parts (codegen.GemmSpec.SplitK, named
// <op>_splitk, or <op>_splitk_<decode> with the decode tiles, decode
// their schedule.TileVariant.Name: the shared experts at decode sizes): its
// token range, where its f32 parts go and its shared memory (FC2's tile,
// or the decode tiles' FC2 tile, over the weights' rows, no staging tile).
func inspectSplit(c *cli.Context, p *codegen.Program, decode string) {
	for _, k := range p.Kernels {
		if !strings.Contains(k.Name, "_splitk") {
			continue
		}
		parts := ""
		for _, prm := range k.Params {
			if prm.Name == "c" {
				parts = prm.Buffer
			}
		}
		doc, tile := "", "FC2's tile (the plain GEMM's)"
		if decode != "" && strings.HasSuffix(k.Name, "_splitk_"+decode) {
			tile = "the decode tiles' FC2 tile (the plain GEMM's)"
		}
		if b := p.Buffer(parts); b != nil {
			doc = ": " + b.Doc
		}
		fmt.Fprintf(c.App.Writer, "%s: %s over the weights' rows for T in %s, the reduction split in parts written as f32 to %s%s (a reduce kernel adds them; --split-k off: never), no staging tile: %d bytes of dynamic shared memory\n",
			k.Name, tile, tokenRanges(k.Tokens), parts, doc, k.SharedBytes)
	}
}

// inspectGathered prints, after FC1's plan, the decode-size form of the
// kernel that reads its rows from x (codegen.GemmSpec.GatherK, named
// <name>_gathered) when p holds one: its token range and shared memory
// (the same ring and barriers, no staging tile).
func inspectGathered(c *cli.Context, p *codegen.Program, name string) {
	for _, k := range p.Kernels {
		if k.Name != name+"_gathered" {
			continue
		}
		from := "the rows copied from x by the producer warpgroup"
		for _, prm := range k.Params {
			if prm.Name == "a_scales" { // mxfp8: x's per-token MXFP8 form, by the code warps
				from = "the rows' e4m3 bytes copied from x_q (x quantized once per token) by the scale-code warps, their scale codes read from x_scales"
			}
		}
		fmt.Fprintf(c.App.Writer, "%s: the same tiles for T in %s (decode sizes), %s (cp.async; --gather separate: never), no staging tile: %d bytes of dynamic shared memory\n",
			k.Name, tokenRanges(k.Tokens), from, k.SharedBytes)
	}
}

// parseInts parses a comma-separated list of non-negative integers.
func parseInts(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty list")
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%q is not a non-negative integer", f)
		}
		out = append(out, v)
	}
	return out, nil
}
