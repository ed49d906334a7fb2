package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mokc/mokc/schedule"
)

// goField matches a Go field path as schedule.FieldError spells it
// ("Schedule.Warps.MMA = 3"), not a package-qualified name.
var goField = regexp.MustCompile(`(^|[ :(])(Layer|Schedule)\.[A-Z]\w*( = |:)`)

// Refusals of the layer and schedule validators name the flag and the
// value the user gave (or the default it kept), not the Go field; huge
// layers are refused before anything is built.
func TestFlagErrorsNameTheFlag(t *testing.T) {
	huge := t.TempDir() + "/config.json"
	cfg := `{"model_type": "qwen3_moe", "hidden_size": 2048, "moe_intermediate_size": 768, "num_experts": 1000000,
		"num_experts_per_tok": 1000000, "norm_topk_prob": true}`
	if err := os.WriteFile(huge, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	q := []string{"--model", "qwen3-30b-a3b"}
	for _, c := range []struct {
		args []string
		want string // the whole error message
	}{
		{[]string{"build", "--target", "sm_90a", "--mma-warps", "3"},
			"--mma-warps 3: sm_90a needs 1 to 3 whole consumer warpgroups (4, 8 or 12 warps)"},
		{[]string{"build", "--target", "sm_90a", "--mma-warps", "40"},
			"--mma-warps 40: 44 warps exceed 1024 threads per CTA"},
		{[]string{"build", "--target", "sm_80", "--mma-warps", "0"},
			"--mma-warps 0: needs at least 1 MMA (consumer) warp and no negative producer or epilogue warp count"},
		{[]string{"build", "--target", "sm_80", "--mma-warps", "3"},
			"--mma-warps 3: 3 warps do not split --fc1-tile 128x128x64 into a grid of m16 x n16 warp tiles"},
		{[]string{"build", "--target", "sm_80", "--fc1-tile", "120x128x64"},
			"--fc1-tile 120x128x64: M = 120: must be a multiple of 16 (mma.sync m16n8k16)"},
		{[]string{"build", "--target", "sm_90a", "--fc2-tile", "128x264x64"},
			"--fc2-tile 128x264x64: N = 264: must be a multiple of 8 up to 256 (wgmma m64nNk16)"},
		{[]string{"build", "--target", "sm_90a", "--mma-warps", "12"},
			"--fc1-tile 128x256x64 (the target's default): M = 128: must be 192 with 12 MMA warps"},
		{[]string{"build", "--target", "sm_90a", "--stages", "17"}, "--stages 17: must be in 2..16"},
		// A default tile whose stages overflow shared memory: the stages given take the refusal.
		{[]string{"build", "--target", "sm_90a", "--stages", "9"},
			"--stages 9: the FC1 tile 128x256x64 with 9 stages needs 443792 bytes of shared memory, more than the 232448 of sm_90a"},
		{[]string{"build", "--target", "sm_90a", "--stages", "9", "--fc1-tile", "128x128x64"},
			"--fc1-tile 128x128x64: the FC1 tile 128x128x64 with 9 stages needs"},
		{[]string{"build", "--target", "sm_90a", "--grid-ctas", "-1"}, "--grid-ctas -1: must be in 0..65535"},
		{[]string{"build", "--experts", "1000000", "--top-k", "1000000"},
			"--experts 1000000: must be <= 65536 (one dispatch block"},
		{[]string{"build", "--top-k", "33"}, "--top-k 33: must be <= 32 (the combine"},
		{[]string{"build", "--top-k", "0"}, "--top-k 0: must be > 0"},
		{[]string{"build", "--experts", "4"}, "--top-k 8 (the model's): must be <= --experts (4)"},
		{[]string{"build", "--hidden", "100000"}, "--hidden 100000: must be <= 65536"},
		{[]string{"build", "--intermediate", "12"}, "--intermediate 12: must be a multiple of 8"},
		{[]string{"build", "--precision", "mxfp8", "--hidden", "2050"}, "--hidden 2050: must be a multiple of 32 with mxfp8 weights"},
		{[]string{"build", "--precision", "mxfp8", "--storage", "per-expert"}, "--storage per-expert: mxfp8 weights need --storage grouped"},
		{[]string{"build", "--target", "sm_90a", "--mx-gemm", "expand"}, "--mx-gemm expand: says how mxfp8 GEMMs run, and this layer is bf16 (--precision mxfp8)"},
		{[]string{"build", "--target", "sm_80", "--mx-gemm", "promote"}, "--mx-gemm promote: says how mxfp8 GEMMs run, and this layer is bf16 (--precision mxfp8)"},
		{[]string{"build", "--target", "sm_100a", "--precision", "mxfp8", "--mx-gemm", "regfed"}, "--mx-gemm regfed: regfed needs an mxfp8 layer (--precision) on sm_90a (--target; sm_100a runs the block-scaled MMA, promote only)"},
		{[]string{"build", "--experts", "16384", "--hidden", "8192", "--intermediate", "8192"},
			"--experts 16384: the weights take 6597.1 GB, more than the 192.0 GB of the largest GPU mokc targets"},
		{[]string{"build", "--shared-experts", "2"}, "--shared-intermediate 0 (the model's): must be > 0"},
		{[]string{"build", "--shared-experts", "4", "--shared-intermediate", "20480"},
			"--shared-intermediate 20480: --shared-experts (4) x --shared-intermediate must be <= 65536"},
		{[]string{"run", "--tokens", "0,268427265"}, "--tokens 268427265: more than the 268427264 tokens the kernels of qwen3-30b-a3b on sm_90a index in 32 bits"},
		{[]string{"bench", "--tokens", "268427265"}, "bench: --tokens 268427265: more than the 268427264 tokens"},
		{[]string{"run", "--top-k", "64"}, "qwen3-30b-a3b: --top-k 64: must be <= 32"},
		{[]string{"build", "--target", "sm_90a", "--precision", "mxfp8", "--variant-fc2-tile", "32x256x128"},
			`--variant-fc2-tile: the GEMM variant "decode" (FC1 32x128x128, FC2 32x256x128, 8 stages, 4 MMA warps, up to 32 mean rows per expert): its FC2 tile = 32x256x128: the FC2 tile 32x256x128 with 8 stages needs`},
		{[]string{"build", "--target", "sm_90a", "--precision", "mxfp8", "--variant-fc1-tile", "32x64x128", "--variant-stages", "6"},
			`--variant-fc1-tile, --variant-stages: the GEMM variant "decode" (FC1 32x64x128, FC2 32x128x128, 6 stages, 4 MMA warps, up to 32 mean rows per expert): its FC1 tile N = 64: must be a multiple of 128`},
		{[]string{"build", "--target", "sm_90a", "--precision", "mxfp8", "--variant-fc1-tile", "64x128x128"},
			`(FC1 64x128x128, FC2 32x128x128, 8 stages, 4 MMA warps, up to 32 mean rows per expert): needs FC1 and FC2 tiles of the same rows`},
		{[]string{"build", "--target", "sm_90a", "--precision", "mxfp8", "--fc1-tile", "128x128x128", "--variant-stages", "4"},
			"--variant-stages: tunes the default schedule's GEMM variant, which --fc1-tile replaces with one GEMM shape"},
		{[]string{"build", "--target", "sm_90a", "--precision", "mxfp8", "--mx-gemm", "expand", "--variant-max-rows", "32"},
			"--variant-max-rows: tunes the default schedule's GEMM variant, which --mx-gemm expand replaces with one GEMM shape"},
		{[]string{"build", "--target", "sm_90a", "--variant-max-rows", "50"},
			`--variant-max-rows 50: the GEMM variant "mid" runs from 100 mean rows per expert on, so its largest must be at least 100`},
		{[]string{"build", "--target", "sm_90a", "--precision", "mxfp8", "--variant-max-rows", "0"}, "--variant-max-rows 0: must be >= 1"},
		{[]string{"build", "--target", "sm_90a", "--variant-fc1-tile", "128x128x64", "--variant-fc2-tile", "128x128x64"},
			"give 8 MMA warps (--variant-mma-warps)"},
		{[]string{"build", "--target", "sm_90a", "--precision", "mxfp8", "--variant-fc1-tile", "16x128x128", "--variant-fc2-tile", "16x128x128"},
			"M = 16: must be 32 (the mxfp8 operand swap), 64, 128 or 192 on sm_90a"},
		{[]string{"build", "--target", "sm_80", "--variant-stages", "4"},
			"--variant-stages: the default schedule of this layer on sm_80 has no GEMM variant to tune"},
	} {
		args := append(append(c.args[:1:1], q...), c.args[1:]...)
		start := time.Now()
		_, err := runCLI(args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("mokc %s:\n got %v\nwant %q", strings.Join(args, " "), err, c.want)
		}
		if goField.MatchString(err.Error()) {
			t.Errorf("mokc %s: %v names a Go field", strings.Join(args, " "), err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("mokc %s: refused after %v", strings.Join(args, " "), d)
		}
	}
	start := time.Now()
	_, err := runCLI("build", "--hf-config", huge, "-o", t.TempDir()+"/moe.ptx")
	if err == nil || !strings.Contains(err.Error(), `key "num_experts" = 1000000: must be <= 65536`) {
		t.Errorf("1,000,000 experts from a config.json: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("1,000,000 experts refused after %v", d)
	}
}

// Every flag of the tables is declared once, sets the field it names, and
// the fields exist in FieldErrors' spelling.
func TestFieldFlagTables(t *testing.T) {
	seen := map[string]bool{}
	for _, f := range slices.Concat(layerFieldFlags, scheduleFieldFlags, variantFieldFlags) {
		if seen[f.name] {
			t.Errorf("--%s declared twice", f.name)
		}
		seen[f.name] = true
		var l schedule.Layer
		s := schedule.Schedule{Variant: &schedule.TileVariant{}, Decode: &schedule.TileVariant{}}
		switch p := f.ptr(&l, &s).(type) {
		case *int:
			*p = 12345
		case *schedule.Tile:
			*p = schedule.Tile{M: 12345}
		case *schedule.WGradKernel:
			*p = 12345
		case *schedule.MXGemmKind:
			*p = 12345
		case *schedule.GatherKind:
			*p = 12345
		case *schedule.SplitKKind:
			*p = 12345
		case *schedule.DispatchKind:
			*p = 12345
		case *schedule.ItemsKind:
			*p = 12345
		case *schedule.ChainKind:
			*p = 12345
		case *schedule.LoweringKind:
			*p = 12345
		case *schedule.RowsBand:
			*p = schedule.RowsBand{Lo: 12345}
		case rowsOrOff:
			*p.p = 12345
		default:
			t.Errorf("--%s: field of type %T", f.name, p)
		}
		if !strings.Contains(fmt.Sprintf("%#v %#v %#v %#v", l, s, *s.Variant, *s.Decode), "12345") {
			t.Errorf("--%s does not set a field of the layer or the schedule", f.name)
		}
		if !strings.HasPrefix(f.field, "Layer.") && !strings.HasPrefix(f.field, "Schedule.") {
			t.Errorf("--%s: field %q", f.name, f.field)
		}
	}
}

// Go's flag package words parse errors with one dash; main prints them in
// the --name form of mokc's help.
func TestLongFlagsInParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		`invalid value "abc" for flag -hidden: parse error`: `invalid value "abc" for flag --hidden: parse error`,
		`flag provided but not defined: -config`:            `flag provided but not defined: --config`,
		`invalid value "x" for flag -fc1-tile: bad`:         `invalid value "x" for flag --fc1-tile: bad`,
		`flag provided but not defined: -o`:                 `flag provided but not defined: -o`,
		`flag needs an argument: -model`:                    `flag needs an argument: --model`,
		`invalid boolean value "maybe" for -json`:           `invalid boolean value "maybe" for --json`,
		`--hidden 2050: must be a multiple of 8`:            `--hidden 2050: must be a multiple of 8`,
	} {
		if got := longFlags(in); got != want {
			t.Errorf("longFlags(%q) = %q, want %q", in, got, want)
		}
	}
}
