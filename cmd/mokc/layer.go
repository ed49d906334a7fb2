package main

import (
	"cmp"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// layerFlags are the flags that name a layer, a preset or a Hugging Face
// config.json file, and the flags that override its sizes (layerFieldFlags).
func layerFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "model", Category: catLayer, Usage: "a preset name, in any case (mokc inspect --list lists them)"},
		&cli.StringFlag{Name: "hf-config", Category: catLayer, Usage: "a Hugging Face config.json file of an MoE model"},
		&cli.StringFlag{Name: "main-grad", Category: catLayer, Usage: "dtype of the backward's main grads: fp32 (or f32) or bf16 (with --backward)", DefaultText: "fp32"},
		&cli.BoolFlag{Name: "save-fc1", Category: catLayer, Usage: "the forward keeps the routed FC1 output (f32, 8·K·I bytes per token) for the backward, which then does not recompute FC1 (the same results)"},
		&cli.StringFlag{Name: "storage", Category: catLayer, Usage: "the routed experts' weights (and main grads) on the device: grouped (one [E, ...] tensor each) or per-expert (one allocation each, a u64 [E] pointer table)", DefaultText: "grouped"},
		&cli.StringFlag{Name: "precision", Category: catLayer, Usage: "routed-weight precision: bf16 or mxfp8 (e4m3 with a ue8m0 scale per 32 along K: docs/mxfp8.md; sm_90a and sm_100a, grouped storage)", DefaultText: "the model's, bf16"},
	}, cliFlags(layerFieldFlags, "the model's", catLayerSizes)...)
}

// The help's groups of flags (urfave/cli prints the flags without one
// first, those of a command's own, then these in their names' order).
const (
	catLayer      = "Layer"
	catLayerSizes = "Layer sizes (each overrides the model's)"
	catSchedule   = "Schedule (tuning; the target's default without them)"
	catVariant    = "Schedule: the default's GEMM variant (tuning)"
)

// loadLayer returns the layer named by --model or --hf-config (exactly one)
// with the layer flags applied, validated.
func loadLayer(c *cli.Context) (schedule.Layer, error) {
	l, err := namedLayer(c)
	if err != nil {
		return l, err
	}
	return l, applyLayerFlags(c, &l)
}

// namedLayer returns the layer named by --model or --hf-config.
func namedLayer(c *cli.Context) (schedule.Layer, error) {
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

// fieldFlag is a command-line flag that sets one field of the layer or of
// the schedule. The tables layerFieldFlags and scheduleFieldFlags are the
// one place a flag is tied to its field: the flags are declared, applied
// and named in validation errors (flagError) from them.
type fieldFlag struct {
	name  string // the flag without "--", e.g. "mma-warps"
	usage string
	// field is the schedule.FieldError.Field the flag sets, e.g.
	// "Schedule.Warps.MMA"; an error on it or on one of its parts
	// ("Schedule.FC1.M") names the flag. also lists further fields an error
	// on which is the flag's (e.g. the whole "Schedule.Warps").
	field string
	also  []string
	// takes lists fields of other flags whose errors this flag takes when
	// it is given and the field's own flag is not (--stages: a default
	// tile whose stages overflow shared memory; --fc2-large-mid-rows: the
	// whole FC2Large's, whose field is --fc2-large-min-rows'), the rule
	// then naming the field by this flag.
	takes []string
	// def is the help text of the default when it is not the table's
	// (e.g. "mma": every target's default weight-gradient kernel).
	def string
	// keepsVariant: a schedule flag that leaves the GEMM variant of the
	// default schedule in place (the others describe the one GEMM shape).
	keepsVariant bool
	// neutral is a value of a shape flag that describes no shape (the
	// default's: --grid-ctas 0), with which it keeps the variant too.
	neutral string
	// ptr returns the field in l or s: an *int, a *schedule.Tile for a
	// MxNxK flag, or an encoding.TextUnmarshaler (schedule.WGradKernel,
	// schedule.MXGemmKind).
	ptr func(l *schedule.Layer, s *schedule.Schedule) any
}

// layerFieldFlags override sizes of the layer named by --model or
// --hf-config; the result is validated by schedule.Layer.Validate, whose
// refusals (the limits of the kernels) are reported on the flag.
var layerFieldFlags = []fieldFlag{
	layerFlag("hidden", "hidden size H", "Layer.Hidden", func(l *schedule.Layer) any { return &l.Hidden }),
	layerFlag("intermediate", "intermediate size I of a routed expert", "Layer.Intermediate", func(l *schedule.Layer) any { return &l.Intermediate }),
	layerFlag("experts", "number E of routed experts", "Layer.Experts", func(l *schedule.Layer) any { return &l.Experts }),
	layerFlag("top-k", "routes K per token (top-k)", "Layer.TopK", func(l *schedule.Layer) any { return &l.TopK }),
	layerFlag("shared-experts", "number S of shared experts", "Layer.SharedExperts", func(l *schedule.Layer) any { return &l.SharedExperts }),
	layerFlag("shared-intermediate", "intermediate size I_s of each shared expert", "Layer.SharedIntermediate",
		func(l *schedule.Layer) any { return &l.SharedIntermediate }),
}

// scheduleFieldFlags override parts of the target's default schedule, for
// tuning; the result is validated by schedule.Schedule.Validate and by
// codegen, whose refusals give the reason (registers, shared memory, warps).
var scheduleFieldFlags = []fieldFlag{
	scheduleFlag("fc1-tile", "FC1 tile MxNxK (rows x output columns x K block)", "Schedule.FC1", func(s *schedule.Schedule) any { return &s.FC1 }),
	scheduleFlag("fc2-tile", "FC2 tile MxNxK", "Schedule.FC2", func(s *schedule.Schedule) any { return &s.FC2 }),
	scheduleFlag("stages", "shared-memory pipeline stages", "Schedule.Stages", func(s *schedule.Schedule) any { return &s.Stages }).
		taking("Schedule.FC1", "Schedule.FC2"), // a default tile whose stages overflow shared memory
	scheduleFlag("mma-warps", "MMA warps per CTA (sm_90a: 4 per 64 tile rows)", "Schedule.Warps.MMA", func(s *schedule.Schedule) any { return &s.Warps.MMA },
		"Schedule.Warps"),
	scheduleFlag("producer-warps", "producer (load-only) warps per CTA: 4 on sm_90a (a warpgroup; or 1 with --blocks-per-sm 2), 1 on sm_100a, 0 on sm_80", "Schedule.Warps.Producer", func(s *schedule.Schedule) any { return &s.Warps.Producer },
		"Schedule.Warps").keepingVariant(),
	scheduleFlag("cluster", "CTAs per thread-block cluster: 1, or 2 on sm_90a (the routed GEMMs in CTA pairs sharing A by TMA multicast; opt-in, the same bits; docs/flags.md)", "Schedule.Cluster", func(s *schedule.Schedule) any { return &s.Cluster }).keepingVariant(),
	scheduleFlag("blocks-per-sm", "blocks of each persistent GEMM an SM holds at once: 1, or 2 on sm_90a for tiles that fit half an SM (opt-in, slower than the defaults so far; the tiles that fit: docs/flags.md)", "Schedule.BlocksPerSM",
		func(s *schedule.Schedule) any { return &s.BlocksPerSM }).keepingVariant(),
	scheduleFlag("grid-ctas", "persistent grid size (0, the default: one CTA per SM; another number sets every GEMM's grid, which leaves out the default schedule's GEMM variants)", "Schedule.GridCTAs", func(s *schedule.Schedule) any { return &s.GridCTAs }).keepingVariantAt("0"),
	scheduleFlag("group-m", "walk the persistent GEMMs' work items in groups of up to this many row tiles of one expert, so each weight slice is reused from L2 (0: column blocks fastest; docs/flags.md)", "Schedule.GroupM",
		func(s *schedule.Schedule) any { return &s.GroupM }).keepingVariant(),
	scheduleFlag("wgrad", "the backward's weight-gradient kernel: mma (any target), wgmma or wgmma-ws (sm_90a; warp-specialized); with --backward", "Schedule.WGrad",
		func(s *schedule.Schedule) any { return &s.WGrad }).withDefault("wgmma on sm_90a (wgmma-ws with --lowering persistent and GEMM blocks of its 384 threads), else mma").keepingVariant(),
	scheduleFlag("mx-gemm", "how an mxfp8 layer's routed GEMMs run on sm_90a: regfed (weights widened to bf16 in registers, bf16 wgmma), promote (e4m3 wgmma per 32-wide block) or expand (widened in shared memory); sm_100a takes promote only (docs/flags.md)", "Schedule.MXGemm",
		func(s *schedule.Schedule) any { return &s.MXGemm }).withDefault("regfed on sm_90a with grouped weights, else promote").keepingVariant(),
	scheduleFlag("gather", "where the forward's dispatched rows are gathered: fc1 (FC1 reads them from x at decode sizes, where it can), separate (a gather kernel at every T) or store-warps (as fc1, and with --lowering persistent FC1's store warps gather them instead of a gather phase at every T above the decode sizes, not only from --store-gather-min-rows); the same results (docs/flags.md)", "Schedule.Gather",
		func(s *schedule.Schedule) any { return &s.Gather }).withDefault("fc1").keepingVariant(),
	scheduleFlag("store-gather-min-rows", "with --lowering persistent and --gather fc1, the fewest mean rows per expert (T·top-k/experts) from which a bf16 forward's FC1 store warps gather its rows instead of a gather phase, or off (the same results; docs/flags.md)",
		"Schedule.StoreGatherRows", func(s *schedule.Schedule) any { return rowsOrOff{&s.StoreGatherRows, "the fewest"} }).withDefault("256 on sm_90a bf16 layers with grouped weights, else off").keepingVariant(),
	scheduleFlag("dispatch", "the forward's routing ops past T·top-k = 8192: queue (one kernel taking work items from a queue) or ops (one kernel per op); the same bytes (docs/flags.md)", "Schedule.Dispatch",
		func(s *schedule.Schedule) any { return &s.Dispatch }).withDefault("queue").keepingVariant(),
	scheduleFlag("items", "how the sm_90a persistent GEMMs take their work items: queue (after the fixed rounds, from a queue in global memory) or fixed (block b takes b, b + grid, ...); the same bits (docs/flags.md)", "Schedule.Items",
		func(s *schedule.Schedule) any { return &s.Items }).withDefault("queue on sm_90a with grouped weights, else fixed").keepingVariant(),
	// (the band's flag before --fc2-large-min-rows, whose field is a
	// prefix of its own: an error on the band names the band's flag, and
	// the band takes the whole tile's when it is given alone)
	scheduleFlag("fc2-large-mid-rows", "a band LO..HI of mean rows per expert (T·top-k/experts) in which the register-fed mxfp8 FC2 also runs 192-row tiles (moe_fc2_large; the same bits), or off (docs/flags.md)",
		"Schedule.FC2Large.MidRows", func(s *schedule.Schedule) any { return &s.FC2Large.MidRows }).withDefault("120..192 on sm_90a mxfp8 layers, else off").keepingVariant().
		taking("Schedule.FC2Large"),
	scheduleFlag("fc2-large-min-rows", "the mean rows per expert (T·top-k/experts) from which the register-fed mxfp8 FC2 runs 192-row tiles (moe_fc2_large; the same bits), or off (docs/flags.md)",
		"Schedule.FC2Large", func(s *schedule.Schedule) any { return rowsOrOff{&s.FC2Large.MinRows, "the fewest"} }).withDefault("320 on sm_90a mxfp8 layers, else off").keepingVariant(),
	scheduleFlag("chain", "off, or fc1-fc2: the forward's routed FC1 and FC2 as one persistent kernel on sm_90a (opt-in, the same bits; docs/flags.md)", "Schedule.Chain",
		func(s *schedule.Schedule) any { return &s.Chain }).withDefault("off").keepingVariant(),
	scheduleFlag("lowering", "per-op (a kernel per op) or persistent: the program as one persistent kernel launch per direction on sm_90a, its phases the per-op kernels (a kernel per GEMM block shape, each launched at its T; the same bits; docs/flags.md)", "Schedule.Lowering",
		func(s *schedule.Schedule) any { return &s.Lowering }).withDefault("per-op").keepingVariant(),
	scheduleFlag("decode-max-rows", "the most mean rows per expert (T·top-k/experts) at which a bf16 forward's GEMMs run the decode tiles (64x128x64, one consumer warpgroup, 6 stages: moe_fc1_decode[_gathered], moe_fc2_decode, the shared experts' moe_shared_fc*_decode or split), or off (docs/flags.md)",
		"Schedule.Decode", func(s *schedule.Schedule) any { return decodeRows(s) }).withDefault("4 on sm_90a bf16 layers with grouped weights, else off").keepingVariant(),
	scheduleFlag("split-k", "the shared experts' GEMMs at decode sizes (T <= 128, or the decode tiles' range): auto (their reduction split in parts where it pays, sm_90a; summed in a fixed order) or off (docs/flags.md)", "Schedule.SplitK",
		func(s *schedule.Schedule) any { return &s.SplitK }).withDefault("auto").keepingVariant(),
}

// decodeRows is the field of --decode-max-rows: the most mean rows per
// expert of a copy of s's Decode tiles (0: off, which layerSchedule turns
// into none), or of a zero variant when s has none (layerSchedule refuses
// a number then).
func decodeRows(s *schedule.Schedule) rowsOrOff {
	if s.Decode == nil {
		return rowsOrOff{new(int), "the most"}
	}
	d := *s.Decode
	s.Decode = &d
	return rowsOrOff{&d.MaxRows, "the most"}
}

// rowsOrOff is the field of a flag of mean rows per expert that takes a
// whole number or off, which is 0 (--fc2-large-min-rows, whose 0 turns
// its range off, as off does --fc2-large-mid-rows's band;
// --decode-max-rows); what says which rows the number is ("the fewest",
// "the most").
type rowsOrOff struct {
	p    *int
	what string
}

// UnmarshalText sets the field from off or a whole number >= 0.
func (r rowsOrOff) UnmarshalText(b []byte) error {
	if string(b) == "off" {
		*r.p = 0
		return nil
	}
	n, err := strconv.Atoi(string(b))
	if err != nil || n < 0 {
		return fmt.Errorf("%q: want off, or %s mean rows per expert (a whole number; 0 is off)", b, r.what)
	}
	*r.p = n
	return nil
}

// String is the field's value as the flag spells it: off for 0.
func (r rowsOrOff) String() string {
	if *r.p == 0 {
		return "off"
	}
	return strconv.Itoa(*r.p)
}

// variantFieldFlags tune the default schedule's T-dependent GEMM variant
// (schedule.TileVariant: e.g. the mxfp8 decode tiles at few rows per
// expert, the bf16 mid tiles) instead of replacing it, as the shape flags
// do; the variant keeps its name, MXOnly and MinRows. mokc inspect program
// shows the variant and its token range.
var variantFieldFlags = []fieldFlag{
	variantFlag("variant-fc1-tile", "FC1 tile MxNxK of the default schedule's GEMM variant (sm_90a mxfp8 decode: M = 32, the operand swap)", "Schedule.Variant.FC1",
		func(v *schedule.TileVariant) any { return &v.FC1 }),
	variantFlag("variant-fc2-tile", "FC2 tile MxNxK of the default schedule's GEMM variant (the same M as its FC1 tile)", "Schedule.Variant.FC2",
		func(v *schedule.TileVariant) any { return &v.FC2 }),
	variantFlag("variant-stages", "shared-memory pipeline stages of the default schedule's GEMM variant", "Schedule.Variant.Stages",
		func(v *schedule.TileVariant) any { return &v.Stages }),
	variantFlag("variant-mma-warps", "MMA warps of the default schedule's GEMM variant (sm_90a: 4 per 64 tile rows; 4 for its 32-row mxfp8 tiles)", "Schedule.Variant.MMAWarps",
		func(v *schedule.TileVariant) any { return &v.MMAWarps }),
	variantFlag("variant-max-rows", "the most mean rows per expert (T·top-k/experts, not rounded) at which the default schedule's GEMM variant runs", "Schedule.Variant.MaxRows",
		func(v *schedule.TileVariant) any { return &v.MaxRows }),
}

// variantFlag is the fieldFlag of a field of the schedule's GEMM variant
// (a schedule without one gets a field of a zero variant, which
// applyVariantFlags refuses to set).
func variantFlag(name, usage, field string, ptr func(*schedule.TileVariant) any) fieldFlag {
	return fieldFlag{name: name, usage: usage, field: field, def: "the default schedule's variant", keepsVariant: true,
		ptr: func(_ *schedule.Layer, s *schedule.Schedule) any {
			if s.Variant == nil {
				return ptr(&schedule.TileVariant{})
			}
			return ptr(s.Variant)
		}}
}

// withDefault is f with the help text def for its default.
func (f fieldFlag) withDefault(def string) fieldFlag {
	f.def = def
	return f
}

// taking is f taking the errors of fields (fieldFlag.takes).
func (f fieldFlag) taking(fields ...string) fieldFlag {
	f.takes = fields
	return f
}

// keepingVariant is f for a schedule field that does not describe the
// routed GEMMs' shape: setting it keeps the default's GEMM variant.
func (f fieldFlag) keepingVariant() fieldFlag {
	f.keepsVariant = true
	return f
}

// keepingVariantAt is f keeping the GEMM variant when given value
// (fieldFlag.neutral).
func (f fieldFlag) keepingVariantAt(value string) fieldFlag {
	f.neutral = value
	return f
}

// dropsVariant reports whether f, as given in c, describes the one GEMM
// shape and so drops the default schedule's GEMM variants.
func (f fieldFlag) dropsVariant(c *cli.Context) bool {
	return !f.keepsVariant && c.IsSet(f.name) && (f.neutral == "" || strings.TrimSpace(c.String(f.name)) != f.neutral)
}

// layerFlag is the fieldFlag of a layer field.
func layerFlag(name, usage, field string, ptr func(*schedule.Layer) any) fieldFlag {
	return fieldFlag{name: name, usage: usage, field: field, ptr: func(l *schedule.Layer, _ *schedule.Schedule) any { return ptr(l) }}
}

// scheduleFlag is the fieldFlag of a schedule field; errors on the fields
// also are the flag's too.
func scheduleFlag(name, usage, field string, ptr func(*schedule.Schedule) any, also ...string) fieldFlag {
	return fieldFlag{name: name, usage: usage, field: field, also: also, ptr: func(_ *schedule.Layer, s *schedule.Schedule) any { return ptr(s) }}
}

// cliFlags declares the flags of a table in the help's group category;
// def is the help text of the default.
func cliFlags(table []fieldFlag, def, category string) []cli.Flag {
	var out []cli.Flag
	for _, f := range table {
		def := def
		if f.def != "" {
			def = f.def
		}
		if _, num := f.ptr(&schedule.Layer{}, &schedule.Schedule{}).(*int); num {
			out = append(out, &cli.IntFlag{Name: f.name, Usage: f.usage, DefaultText: def, Category: category})
		} else {
			out = append(out, &cli.StringFlag{Name: f.name, Usage: f.usage, DefaultText: def, Category: category})
		}
	}
	return out
}

// scheduleFlags are the flags of scheduleFieldFlags and variantFieldFlags.
func scheduleFlags() []cli.Flag {
	return append(cliFlags(scheduleFieldFlags, "the target's default", catSchedule), cliFlags(variantFieldFlags, "", catVariant)...)
}

// scheduleOverridden reports whether any schedule flag is set (with
// shapeOnly, any that describes the routed GEMMs' shape: not one that
// keeps the GEMM variant, like --wgrad, which means the same on every
// target, nor one at its neutral value, like --grid-ctas 0;
// fieldFlag.dropsVariant).
func scheduleOverridden(c *cli.Context, shapeOnly bool) bool {
	return firstScheduleFlag(c, shapeOnly) != ""
}

// firstScheduleFlag is the name of the first schedule flag set (as
// scheduleOverridden counts them), or "".
func firstScheduleFlag(c *cli.Context, shapeOnly bool) string {
	for _, f := range slices.Concat(scheduleFieldFlags, variantFieldFlags) {
		if shapeOnly && f.dropsVariant(c) || !shapeOnly && c.IsSet(f.name) {
			return f.name
		}
	}
	return ""
}

// applyFlags sets the fields of the flags of table that are set in l and s.
func applyFlags(c *cli.Context, table []fieldFlag, l *schedule.Layer, s *schedule.Schedule) error {
	for _, f := range table {
		if !c.IsSet(f.name) {
			continue
		}
		switch p := f.ptr(l, s).(type) {
		case *int:
			*p = c.Int(f.name)
		case *schedule.Tile:
			var t schedule.Tile
			if n, err := fmt.Sscanf(c.String(f.name), "%dx%dx%d", &t.M, &t.N, &t.K); err != nil || n != 3 {
				return fmt.Errorf("--%s %q: want MxNxK, e.g. 128x256x64", f.name, c.String(f.name))
			}
			*p = t
		case encoding.TextUnmarshaler: // the kernel choices (*schedule.WGradKernel, *schedule.MXGemmKind, ...)
			if err := p.UnmarshalText([]byte(c.String(f.name))); err != nil {
				return fmt.Errorf("--%s: %w", f.name, err)
			}
		}
	}
	return nil
}

// flagError rewrites a validation error of l or s on a field that a flag
// of table sets as "--flag VALUE: rule" (VALUE as the flag spells it,
// marked when it is the default rather than given), so the user reads the
// flag, not the Go field; of the flags whose fields match, one the command
// line gives comes first, and a given flag takes the errors of the fields
// of fieldFlag.takes whose own flags are not given (--stages 9 for a default
// tile whose stages overflow shared memory). Other errors are returned
// unchanged.
func flagError(c *cli.Context, table []fieldFlag, l schedule.Layer, s schedule.Schedule, def string, err error) error {
	var fe *schedule.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	given := slices.DeleteFunc(slices.Clone(table), func(f fieldFlag) bool { return !c.IsSet(f.name) })
	ownerGiven := slices.ContainsFunc(given, func(g fieldFlag) bool { return g.field == fe.Field })
	for i, f := range slices.Concat(given, table) {
		part, ok := strings.CutPrefix(fe.Field, f.field)
		claimed := false // the field is one of f.also or f.takes: the rule's mention of it is f's too
		if !ok || part != "" && part[0] != '.' {
			part = ""
			taken := i < len(given) && !ownerGiven && slices.Contains(f.takes, fe.Field)
			if !taken && !slices.Contains(f.also, fe.Field) {
				continue
			}
			claimed = true
		}
		value := fmt.Sprint(flagValue(f.ptr(&l, &s)))
		if !c.IsSet(f.name) {
			value += " (" + def + ")"
		}
		// Fields the rule names are flags too: "must be <= --experts (4)",
		// "do not split --fc1-tile 128x128x64"; the longest first, as a
		// field may extend another (Schedule.FC2Large, Schedule.FC2).
		names := maps.Clone(plainFlagFields)
		for _, g := range table {
			names[g.field] = "--" + g.name
		}
		if claimed {
			names[fe.Field] = "--" + f.name
		}
		fields := slices.SortedFunc(maps.Keys(names), func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
		rule := fe.Rule
		for _, field := range fields {
			rule = strings.ReplaceAll(rule, field, names[field])
		}
		if part != "" {
			rule = fmt.Sprintf("%s = %v: %s", part[1:], fe.Value, rule)
		}
		return fmt.Errorf("--%s %s: %s", f.name, value, rule)
	}
	return err
}

// plainFlagFields are the fields set by flags outside the field tables
// (parsed on their own), and parts of a table's field that a flag sets
// alone, as a rule's text names them.
var plainFlagFields = map[string]string{"Layer.Precision": "--precision", "Layer.Storage": "--storage", "Schedule.Target": "--target", "Layer.SaveFC1": "--save-fc1",
	"Schedule.FC2Large.MinRows": "--fc2-large-min-rows"}

// flagValue dereferences the *int of fieldFlag.ptr; the other fields'
// pointers print as their values (their String methods).
func flagValue(p any) any {
	if p, ok := p.(*int); ok {
		return *p
	}
	return p
}

// applyLayerFlags applies the layer flags to l and validates it; a refusal
// on a field a layer flag sets names the flag.
func applyLayerFlags(c *cli.Context, l *schedule.Layer) error {
	if err := applyFlags(c, layerFieldFlags, l, nil); err != nil {
		return err
	}
	if err := applyPrecision(c, l); err != nil {
		return err
	}
	if c.IsSet("wgrad") {
		if hasFlag(c, "backward") && !c.Bool("backward") {
			return errors.New("--wgrad chooses the backward's weight-gradient kernel: give --backward too")
		}
		if _, err := schedule.ParseWGradKernel(c.String("wgrad")); err != nil {
			return fmt.Errorf("--wgrad: %w", err)
		}
	}
	l.SaveFC1 = l.SaveFC1 || c.Bool("save-fc1")
	if c.IsSet("main-grad") {
		if hasFlag(c, "backward") && !c.Bool("backward") {
			return errors.New("--main-grad sets the backward's main grads: give --backward too")
		}
		switch g := strings.ToLower(c.String("main-grad")); g {
		case schedule.GradFP32.String(), "f32":
			l.MainGrad = schedule.GradFP32
		case schedule.GradBF16.String():
			l.MainGrad = schedule.GradBF16
		default:
			return fmt.Errorf("--main-grad %q: want fp32 or bf16", c.String("main-grad"))
		}
	}
	if c.IsSet("storage") {
		switch st := strings.ToLower(c.String("storage")); st {
		case schedule.GroupedWeights.String():
			l.Storage = schedule.GroupedWeights
		case schedule.PerExpertWeights.String():
			l.Storage = schedule.PerExpertWeights
		default:
			return fmt.Errorf("--storage %q: want grouped or per-expert", c.String("storage"))
		}
	}
	if l.Precision == schedule.MXFP8 && l.Storage == schedule.PerExpertWeights {
		return errors.New("--storage per-expert: mxfp8 weights need --storage grouped (one e4m3 tensor and one scale tensor per GEMM; per-expert mxfp8 storage has no program yet)")
	}
	return flagError(c, layerFieldFlags, *l, schedule.Schedule{}, "the model's", l.Validate())
}

// hasFlag reports whether c's command declares the flag name.
func hasFlag(c *cli.Context, name string) bool {
	if c.Command == nil {
		return false
	}
	for _, f := range c.Command.Flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return false
}

// targetSchedule returns target t's default schedule for l, or refused:
// why t cannot take l at all (the rule of a schedule.FieldError on
// Schedule.Target, e.g. mxfp8 weights on sm_80, or the target's engine's
// refusal, codegen.CheckLayer), or another error of
// schedule.DefaultSchedule.
func targetSchedule(l schedule.Layer, t target.Target) (s schedule.Schedule, refused string, err error) {
	s, err = schedule.DefaultSchedule(l, t)
	var fe *schedule.FieldError
	switch {
	case errors.As(err, &fe) && fe.Field == "Schedule.Target":
		return s, fe.Rule, nil
	case err != nil:
		return s, "", err
	}
	if err := codegen.CheckLayer(l, t); err != nil {
		return s, err.Error(), nil
	}
	return s, "", nil
}

// defaultSchedule is targetSchedule with its refusals said in the CLI's
// terms: a refusal of the target as one of --target.
func defaultSchedule(l schedule.Layer, t target.Target) (schedule.Schedule, error) {
	s, refused, err := targetSchedule(l, t)
	switch {
	case refused != "":
		return s, fmt.Errorf("--target %s: %s", t, refused)
	case err != nil:
		return s, fmt.Errorf("schedule for %s: %w", t, err)
	}
	return s, nil
}

// layerSchedule returns target's default schedule for l with the schedule
// flags applied, validated against l. When a flag of the GEMM shape is set
// the schedule loses its T-dependent GEMM variant: the flags describe the
// one shape of the routed GEMMs (--wgrad keeps it). A refusal on a field a schedule flag sets names the
// flag ("--mma-warps 3: ..."). --mx-gemm expand drops the variant too
// (the default mxfp8 schedule's decode tiles are promote's; regfed keeps
// them in their token range); the kind's default tiles
// (schedule.DefaultScheduleMX) come before the shape flags. Dropping a variant
// is noted on stderr (noteVariantDropped) once the schedule is valid. The
// default's FC2 tile for many rows per expert (schedule.Schedule.FC2Large)
// goes with the shape flags too, and with any flag it cannot run with
// (FC2LargeWhereValid, after the variant flags), noted (noteLargeDropped).
// --split-k off where it changes nothing (a layer without shared experts,
// another target than sm_90a, the backward) is noted too.
func layerSchedule(c *cli.Context, l schedule.Layer, tg target.Target) (schedule.Schedule, error) {
	s, err := flagSchedule(c, l, tg)
	if err == nil && s.SplitK == schedule.SplitKOff {
		why := ""
		switch {
		case l.SharedExperts == 0:
			why = fmt.Sprintf("split-K applies only to the shared experts' GEMMs, and %s has none", l.Name)
		case tg != target.SM90a:
			why = fmt.Sprintf("only sm_90a's forward splits the shared experts' GEMMs (here %v)", tg)
		case c.Bool("backward"):
			why = "only the forward splits the shared experts' GEMMs"
		}
		if why != "" {
			fmt.Fprintf(errWriter(c), "mokc: note: --split-k off changes nothing here: %s\n", why)
		}
	}
	return s, err
}

// flagSchedule is layerSchedule's schedule: the default with the schedule
// flags applied.
func flagSchedule(c *cli.Context, l schedule.Layer, target target.Target) (schedule.Schedule, error) {
	s, err := defaultSchedule(l, target)
	if err != nil {
		return s, err
	}
	if !scheduleOverridden(c, false) {
		return s, nil
	}
	variant, decode, large := s.Variant, s.Decode, s.FC2Large
	if c.IsSet("mx-gemm") {
		if l.Precision != schedule.MXFP8 {
			return s, fmt.Errorf("--mx-gemm %s: says how mxfp8 GEMMs run, and this layer is %v (--precision mxfp8)", c.String("mx-gemm"), l.Precision)
		}
		// The kind's default schedule first (expand's without the decode
		// variant), so that the shape flags override its tiles.
		if k, err := schedule.ParseMXGemmKind(c.String("mx-gemm")); err == nil {
			if d, err := schedule.DefaultScheduleMX(l, target, k); err == nil {
				s = d
			}
		}
	}
	var dropper string // the first flag that drops the variant
	for _, f := range scheduleFieldFlags {
		if f.dropsVariant(c) {
			// the flags describe the one shape of the routed GEMMs
			s.Variant, s.Decode, s.FC2Large = nil, nil, schedule.LargeRowsTile{}
			if dropper == "" {
				dropper = "--" + f.name
			}
		}
	}
	if err := applyFlags(c, scheduleFieldFlags, &l, &s); err != nil {
		return s, err
	}
	if !c.IsSet("wgrad") {
		s = s.WithLowering(s.Lowering) // the lowering's default weight-gradient kernel
	}
	decodeRows := -1 // --decode-max-rows as given (0: off; -1: not given)
	if c.IsSet("decode-max-rows") {
		if err := (rowsOrOff{&decodeRows, "the most"}).UnmarshalText([]byte(c.String("decode-max-rows"))); err != nil {
			return s, fmt.Errorf("--decode-max-rows: %w", err)
		}
		switch {
		case decodeRows == 0:
			s.Decode = nil // off
		case s.Decode == nil:
			why := "the default schedule of this layer has none (bf16 layers on sm_90a with grouped weights do)"
			if v := s.Variant; l.Precision == schedule.MXFP8 && v != nil && v.Name == "decode" {
				why = fmt.Sprintf("this mxfp8 layer's decode tiles (FC1 %v, FC2 %v) are its GEMM variant: --variant-max-rows sets their range", v.FC1, v.FC2)
			}
			if dropper != "" {
				why = dropper + " replaces them with one GEMM shape"
			}
			return s, fmt.Errorf("--decode-max-rows %d: sets the range of the decode tiles, and %s", decodeRows, why)
		case c.Bool("backward"):
			fmt.Fprintf(errWriter(c), "mokc: note: --decode-max-rows sets the forward's GEMM tiles; the backward keeps its tiles, so it runs as without it\n")
		}
	}
	if c.IsSet("store-gather-min-rows") && (s.Lowering != schedule.LoweringPersistent || s.Gather != schedule.GatherFC1) {
		return s, fmt.Errorf("--store-gather-min-rows: sets where the persistent kernel's FC1 store warps gather with --gather fc1; give --lowering persistent and leave --gather at fc1 (here --lowering %v, --gather %v)", s.Lowering, s.Gather)
	}
	if c.IsSet("store-gather-min-rows") && s.StoreGatherRows > 0 && (c.Bool("backward") || !s.StoresGather(l)) {
		return s, fmt.Errorf("--store-gather-min-rows %d: no FC1 of this program gathers its rows in its store warps (the persistent bf16 forward on sm_90a with grouped weights does, without a routing weight on the rows, --chain, --cluster 2 or --blocks-per-sm 2): leave the flag out", s.StoreGatherRows)
	}
	if !c.IsSet("items") {
		s = s.FixedItemsWhereNeeded(l)
	}
	if variant != nil && s.Variant == nil && dropper == "" {
		dropper = "--mx-gemm " + s.MXGemm.String()
	}
	tuned, err := applyVariantFlags(c, &s, dropper)
	if err != nil {
		return s, err
	}
	asked := false // a --fc2-large-* flag asks for a range of the tile
	if largeSet(c) {
		// applyFlags set the fields given; the other is the default's
		n, band := s.FC2Large.MinRows, s.FC2Large.MidRows
		if c.IsSet("fc2-large-min-rows") && !c.IsSet("fc2-large-mid-rows") && n > 0 && band.Hi > n {
			// the default band, cut at the rows given (the tile runs from there on anyway)
			if band.Hi = n; band.Lo > n {
				band = schedule.RowsBand{}
			}
		}
		s = s.WithFC2LargeFrom(n).WithFC2LargeMid(band)
		asked = c.IsSet("fc2-large-min-rows") && n > 0 || c.IsSet("fc2-large-mid-rows") && band.Set()
		if c.Bool("backward") && asked {
			fmt.Fprintf(errWriter(c), "mokc: note: --fc2-large-min-rows and --fc2-large-mid-rows set the forward's FC2 tile; the backward has no FC2 of dispatched rows, so it runs as without them\n")
		}
	}
	if !asked {
		// As asked it runs, or the error says why; else (no flag, or flags
		// that only turn ranges off) it is left out where it cannot run.
		// After the variant flags: --variant-max-rows may reach its rows.
		s = s.FC2LargeWhereValid(l)
	}
	if err := s.Validate(l); err != nil {
		if tuned != "" && strings.HasPrefix(err.Error(), "Schedule.Variant") {
			return s, variantError(tuned, *s.Variant, err)
		}
		if ferr := flagError(c, scheduleFieldFlags, l, s, "the target's default", err); ferr != err {
			return s, ferr
		}
		return s, fmt.Errorf("schedule flags: %w", err)
	}
	if decode != nil && s.Decode == nil && decodeRows < 0 && !c.Bool("backward") {
		noteDecodeDropped(c, dropper, l, *decode)
	}
	switch {
	case variant == nil || s.Variant != nil: // noted only for a schedule that runs
	default:
		var lost schedule.LargeRowsTile // the FC2 tile for many rows per expert, gone with it
		if large.Set() && !s.FC2Large.Set() && !largeSet(c) {
			lost = large
		}
		noteVariantDropped(c, dropper, l, *variant, lost)
	}
	if !asked && !scheduleOverridden(c, true) {
		// (a shape flag's note is noteVariantDropped's: one shape at every T)
		noteLargeDropped(c, l, large, s.FC2Large)
	}
	if s.Lowering == schedule.LoweringPersistent {
		return persistentSchedule(c, l, s, c.Bool("backward")), nil
	}
	return s, nil
}

// persistentSchedule returns schedule s of layer l's forward (or
// backward) as the persistent lowering runs it, without the GEMM variants
// it leaves out (codegen.PersistentVariants: their blocks have other warps
// than the base GEMMs', so they would run in a persistent kernel of their
// own, in their token range, where a GEMM of the program keeps the base
// tiles: a shared expert's "mid" tiles; a bf16 one beside an mxfp8-only
// variant; the weight gradients of --wgrad wgmma-ws, whose blocks are the
// base GEMMs'), and tells the user of each, then of what of it has not yet run
// on a GPU (persistentUnrun). The decode tiles are never left out: every
// GEMM of a forward takes them. A program the layer does not make is the
// build's to refuse: s as it is then.
func persistentSchedule(c *cli.Context, l schedule.Layer, s schedule.Schedule, backward bool) schedule.Schedule {
	p, err := moe.Forward(l)
	what := "forward"
	if backward {
		p, err = moe.Backward(l)
		what = "backward"
	}
	if err != nil {
		return s // the build says why
	}
	ps, left := codegen.PersistentVariants(p, s)
	for _, v := range left {
		lo, hi := v.VariantTokens(l.TopK, l.Experts)
		keeps := "the shared experts' GEMMs keep"
		switch {
		case backward && s.WGrad == schedule.WGradWS:
			keeps = "the weight gradients of wgmma-ws (--wgrad; the persistent backward's default on sm_90a) run at every T in one block per SM of the shape of"
		case l.SharedExperts == 0:
			keeps = "its bf16 GEMMs (beside the variant's mxfp8 ones) keep"
		}
		fmt.Fprintf(errWriter(c), "mokc: note: --lowering persistent leaves out the GEMM variant %q (FC1 %v, FC2 %v at T = %d..%d, %d MMA warps where the base GEMMs have %d): it would run in a persistent kernel of its own, but in this %s %s the base tiles at those T, so the base GEMMs run there (--lowering per-op keeps the variant)\n",
			v.Name, v.FC1, v.FC2, lo, hi, v.MMAWarps, s.Warps.MMA, what, keeps)
	}
	if backward {
		wgrad := "" // the weight gradients asked for, against the default's timing
		switch s.WGrad {
		case schedule.WGradWGMMA:
			wgrad = "; with --wgrad wgmma 18-20% slower in run 55"
		case schedule.WGradMMA:
			wgrad = "; --wgrad mma not timed so"
		}
		fmt.Fprintf(errWriter(c), "mokc: note: --lowering persistent: the persistent backward ran level with per-op's kernels at qwen3-30b-a3b T = 4096 on an H100 with its default weight gradients, wgmma-ws, but 3%% slower at T = 1100 and 6%% at T = 2400 (forward + backward timed; docs/perf.md, run 59)%s: its weight gradients are slower as phases there; --lowering per-op is the faster backward below T = 4096 for now\n", wgrad)
	}
	if unrun := persistentUnrun(l); len(unrun) > 0 {
		fmt.Fprintf(errWriter(c), "mokc: note: --lowering persistent: built and assembled, not yet run on a GPU: %s (the presets' forwards, bf16 and mxfp8, their bf16 backwards and qwen3-30b-a3b's mxfp8 backward ran before these: docs/megakernel.md)\n", strings.Join(unrun, "; "))
	}
	return ps
}

// persistentUnrun names what of layer l the persistent lowering has not
// yet run on a GPU with (docs/perf.md, persistent v1-v3 and run 47: the
// presets' forwards, bf16 and mxfp8, and bf16 backwards, with their
// default schedules, and the chained FC1 and FC2; FC1's store warps
// gathering its rows, run 51; the forward's persistent kernels per block
// shape and the default's FC1 holding both gathering forms, run 53; the
// backward's kernel of the GEMM variant's blocks, moe_backward_mid, run
// 54; the backward's warp-specialized weight gradients as phases, its
// default since, and qwen3-30b-a3b's mxfp8 backward, run 55; the saved
// FC1 output, qwen3-30b-a3b's backward in run 60): per-expert storage, a
// routing map.
func persistentUnrun(l schedule.Layer) []string {
	var unrun []string
	if l.Storage == schedule.PerExpertWeights {
		unrun = append(unrun, "per-expert storage")
	}
	if l.Routing == schedule.RoutingMap {
		unrun = append(unrun, "a routing map")
	}
	return unrun
}

// noteLargeDropped tells the user that the schedule flags set (which keep
// the GEMM variant: --chain, --cluster, --mx-gemm, the variant flags, ...)
// left out a part of the default FC2 tile for many rows per expert def
// (schedule.Schedule.FC2Large; now got: FC2LargeWhereValid drops the band
// alone where that suffices), and what runs there instead; nothing when no
// part the flags did not turn off is gone.
func noteLargeDropped(c *cli.Context, l schedule.Layer, def, got schedule.LargeRowsTile) {
	// The parts of def missing from got that no flag turned off.
	lost := schedule.LargeRowsTile{Tile: def.Tile}
	if def.MinRows > 0 && got.MinRows == 0 && !c.IsSet("fc2-large-min-rows") {
		lost.MinRows = def.MinRows
	}
	if def.MidRows.Set() && !got.MidRows.Set() && !c.IsSet("fc2-large-mid-rows") {
		lost.MidRows = def.MidRows
	}
	if lost.MinRows == 0 && !lost.MidRows.Set() {
		return
	}
	hint := "--fc2-large-min-rows off --fc2-large-mid-rows off"
	if got.Set() { // FC2LargeWhereValid dropped the band alone
		hint = "--fc2-large-mid-rows off"
	}
	var set []string
	for _, f := range slices.Concat(scheduleFieldFlags, variantFieldFlags) {
		if c.IsSet(f.name) && !strings.HasPrefix(f.name, "fc2-large-") {
			set = append(set, "--"+f.name+" "+c.String(f.name))
		}
	}
	fmt.Fprintf(errWriter(c), "mokc: note: %s leaves out the default schedule's FC2 tile for many rows per expert (%v %s: moe_fc2_large), which does not run with it; moe_fc2 (or the GEMM variant's FC2) runs there instead (%s asks for that without this note)\n",
		strings.Join(set, " "), lost.Tile, lost.Where(l.TopK, l.Experts), hint)
}

// largeSet reports whether the command line sets FC2Large's ranges
// (--fc2-large-min-rows or --fc2-large-mid-rows).
func largeSet(c *cli.Context) bool {
	return c.IsSet("fc2-large-min-rows") || c.IsSet("fc2-large-mid-rows")
}

// applyVariantFlags sets the fields of the variant flags that are set in
// a copy of s's GEMM variant and returns them as "--flag, --flag" (empty
// when none is set). Errors: a variant flag on a schedule without a
// variant (the target's default for the layer has none, or dropper, the
// flag that replaced it: a shape flag or --mx-gemm expand).
func applyVariantFlags(c *cli.Context, s *schedule.Schedule, dropper string) (string, error) {
	var set []string
	for _, f := range variantFieldFlags {
		if c.IsSet(f.name) {
			set = append(set, "--"+f.name)
		}
	}
	if len(set) == 0 {
		return "", nil
	}
	tuned := strings.Join(set, ", ")
	if s.Variant == nil {
		if dropper != "" {
			return tuned, fmt.Errorf("%s: tunes the default schedule's GEMM variant, which %s replaces with one GEMM shape", tuned, dropper)
		}
		return tuned, fmt.Errorf("%s: the default schedule of this layer on %v has no GEMM variant to tune", tuned, s.Target)
	}
	v := *s.Variant
	s.Variant = &v
	if err := applyFlags(c, variantFieldFlags, nil, s); err != nil {
		return tuned, err
	}
	switch lo := max(v.MinRows, 1); {
	case s.Variant.MaxRows < 1:
		return tuned, fmt.Errorf("--variant-max-rows %d: must be >= 1", s.Variant.MaxRows)
	case s.Variant.MaxRows < lo:
		return tuned, fmt.Errorf("--variant-max-rows %d: the GEMM variant %q runs from %d mean rows per expert on, so its largest must be at least %d", s.Variant.MaxRows, v.Name, v.MinRows, lo)
	}
	return tuned, nil
}

// variantError is a refusal of the GEMM variant v that the variant flags
// tuned set, in the flags' terms: the variant, then the rule and the part
// of the variant it is about.
func variantError(tuned string, v schedule.TileVariant, err error) error {
	// The variant's MMA warps have a flag of their own, which the rules
	// (written for --mma-warps) name as "MMA warps".
	msg := strings.ReplaceAll(err.Error(), "MMA warps", "MMA warps (--variant-mma-warps)")
	var fe *schedule.FieldError
	if errors.As(err, &fe) {
		msg = strings.ReplaceAll(fe.Rule, "MMA warps", "MMA warps (--variant-mma-warps)")
		for field, what := range map[string]string{"Schedule.FC1": "its FC1 tile", "Schedule.FC2": "its FC2 tile",
			"Schedule.Stages": "its stages", "Schedule.Warps": "its MMA warps"} {
			if part, ok := strings.CutPrefix(fe.Field, field); ok {
				if part != "" && field != "Schedule.Warps" {
					what += " " + part[1:]
				}
				msg = fmt.Sprintf("%s = %v: %s", what, fe.Value, msg)
			}
		}
	}
	return fmt.Errorf("%s: the GEMM variant %q (FC1 %v, FC2 %v, %d stages, %d MMA warps, up to %d mean rows per expert): %s",
		tuned, v.Name, v.FC1, v.FC2, v.Stages, v.MMAWarps, v.MaxRows, msg)
}

// noteVariantDropped tells the user that flag replaced target's default
// schedule's T-dependent GEMM variant v (e.g. the mxfp8 decode tiles), and
// its FC2 tile for many rows per expert large when that is set (the zero
// value: none lost), by the one GEMM shape the schedule flags describe.
func noteVariantDropped(c *cli.Context, flag string, l schedule.Layer, v schedule.TileVariant, large schedule.LargeRowsTile) {
	lo, hi := v.VariantTokens(l.TopK, l.Experts)
	also := ""
	if large.Set() {
		also = fmt.Sprintf(" and its FC2 tile for many rows per expert (%v %s: moe_fc2_large)", large.Tile, large.Where(l.TopK, l.Experts))
	}
	fmt.Fprintf(errWriter(c), "mokc: note: %s replaces the default schedule's GEMM variant %q (FC1 %v, FC2 %v at T = %d..%d)%s with the one GEMM shape of the schedule flags at every T; leave the flag out to keep them\n",
		flag, v.Name, v.FC1, v.FC2, lo, hi, also)
}

// noteDecodeDropped tells the user that flag (a shape flag, or the
// persistent lowering, whose blocks have another shape) left out the
// default schedule's bf16 decode tiles d, and how to ask for that without
// the note.
func noteDecodeDropped(c *cli.Context, flag string, l schedule.Layer, d schedule.TileVariant) {
	lo, hi := d.VariantTokens(l.TopK, l.Experts)
	fmt.Fprintf(errWriter(c), "mokc: note: %s leaves out the default schedule's bf16 decode tiles (FC1 %v, FC2 %v, %d MMA warps, at T = %d..%d), so the forward's GEMMs run the base tiles there; --decode-max-rows off asks for that without this note\n",
		flag, d.FC1, d.FC2, d.MMAWarps, lo, hi)
}

// errWriter is where the command's notes go: the app's ErrWriter, else
// stderr.
func errWriter(c *cli.Context) io.Writer {
	if c.App.ErrWriter != nil {
		return c.App.ErrWriter
	}
	return os.Stderr
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
	fmt.Fprintf(errWriter(c), "mokc: note: %s has quantization_config (%s); the kernels take bf16 weights, or with --precision mxfp8 e4m3 with one ue8m0 scale per 32 along K (docs/mxfp8.md): convert the checkpoint's experts to one of those first\n", file, method)
}

// applyPrecision sets l's precision from --precision when given.
func applyPrecision(c *cli.Context, l *schedule.Layer) error {
	switch p := strings.ToLower(c.String("precision")); p {
	case "":
	case "bf16":
		l.Precision = schedule.BF16
	case "mxfp8":
		l.Precision = schedule.MXFP8
	default:
		return fmt.Errorf("--precision %q: want bf16 or mxfp8", c.String("precision"))
	}
	return nil
}

// checkProgram builds l's forward (or backward) moe program and returns
// its refusal, if any: what `run` and `bench` say before they open a
// device (the targets' refusals come with their schedules,
// defaultSchedule).
func checkProgram(l schedule.Layer, backward bool) error {
	build := moe.Forward
	if backward {
		build = moe.Backward
	}
	_, err := build(l)
	return err
}
