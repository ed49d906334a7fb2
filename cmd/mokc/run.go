package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mokc/mokc/compiler"
	"github.com/mokc/mokc/runtime"
	"github.com/mokc/mokc/schedule"
)

// runTolerance is the largest relative L2 error `mokc run` accepts:
// sqrt(sum (y - ref)^2 / sum ref^2) over the checked tokens, with y in bf16
// (8 significant bits: a rounding error of at most 2^-9 per element) and
// fp32 accumulation.
const runTolerance = 1e-2

func init() {
	commands = append(commands, func() *cli.Command {
		return &cli.Command{
			Name:  "run",
			Usage: "(GPU) run a layer's forward on random inputs and check it against the float64 reference",
			UsageText: "mokc run --model qwen3-30b-a3b --target sm_90a --tokens 4096 [--seed N] [--routing ids|map] [--sample N] [--json]\n\n" +
				"Random bf16 inputs and weights (scaled by 1/sqrt(fan-in)), routing from softmax(x·Wr) and top-k as the\n" +
				"model's router does; y is poisoned (0xFF bytes) before each of 3 runs. Prints the relative L2 error\n" +
				"against schedule's float64 reference (on --sample tokens when T is large), the max abs error, NaN and\n" +
				"unwritten counts, determinism over the runs and the error-word verdict. Exits non-zero when the\n" +
				"relative L2 error exceeds 1e-2 or any check fails. Holds the layer's weights in host memory as\n" +
				"float32 (12*E*I*H bytes) for the reference.",
			Flags: append(layerFlags(),
				targetFlag("sm_90a"),
				&cli.IntFlag{Name: "tokens", Aliases: []string{"T"}, Value: 256, Usage: "token count T (0 is valid)"},
				&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the random inputs, weights and routing"},
				&cli.StringFlag{Name: "routing", Value: "ids", Usage: "routing input: ids (fixed-width ids + weights) or map (dense routing map + probs)"},
				&cli.IntFlag{Name: "sample", Usage: "tokens checked against the reference", DefaultText: "all when T <= 256, else 256"},
				&cli.IntFlag{Name: "device", Usage: "CUDA device ordinal"},
				&cli.BoolFlag{Name: "json", Usage: "print one JSON object"},
			),
			Action: runAction,
		}
	})
}

var registerCompiler sync.Once

// useCompiler lets runtime.NewLayer compile through package compiler.
func useCompiler() {
	registerCompiler.Do(func() {
		runtime.RegisterCompiler(compiler.Version, func(l schedule.Layer, s schedule.Schedule) (string, []byte, error) {
			a, err := compiler.Compile(l, s)
			if err != nil {
				return "", nil, err
			}
			m, err := a.ManifestJSON()
			return a.PTX.Text, m, err
		})
	})
}

// openDevice opens the GPU, with a clear error for a binary built without
// the cuda tag and for a machine without a device.
func openDevice(cmd string, ordinal int) (*runtime.Context, error) {
	ctx, err := runtime.Open(ordinal)
	switch {
	case errors.Is(err, runtime.ErrNoCUDA):
		return nil, fmt.Errorf("%s: this mokc was built without CUDA support; rebuild it with `go build -tags cuda ./cmd/mokc` (needs cuda.h: `. scripts/env.sh` first)", cmd)
	case errors.Is(err, runtime.ErrNoDevice):
		return nil, fmt.Errorf("%s: no usable CUDA device: %w", cmd, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return ctx, nil
}

// gpuLayer reads the layer, target and routing flags shared by run and
// bench and returns the layer and its default schedule.
func gpuLayer(c *cli.Context) (schedule.Layer, schedule.Schedule, error) {
	l, err := loadLayer(c)
	if err != nil {
		return l, schedule.Schedule{}, err
	}
	switch r := strings.ToLower(c.String("routing")); r {
	case "", "ids":
		l.Routing = schedule.RoutingIDs
	case "map":
		l.Routing = schedule.RoutingMap
	default:
		return l, schedule.Schedule{}, fmt.Errorf("--routing %q: want ids or map", c.String("routing"))
	}
	if err := l.Validate(); err != nil {
		return l, schedule.Schedule{}, err
	}
	target, err := loadTarget(c)
	if err != nil {
		return l, schedule.Schedule{}, err
	}
	s, err := schedule.DefaultSchedule(l, target)
	if err != nil {
		return l, s, fmt.Errorf("schedule for %s: %w", target, err)
	}
	return l, s, nil
}

// runReport is the result of `mokc run` (the --json output).
type runReport struct {
	Model          string   `json:"model"`
	Target         string   `json:"target"`
	Device         string   `json:"device"`
	Tokens         int      `json:"tokens"`
	Seed           uint64   `json:"seed"`
	Routing        string   `json:"routing"`
	CheckedTokens  int      `json:"checked_tokens"`
	RelL2          float64  `json:"rel_l2"`
	MaxAbsErr      float64  `json:"max_abs_err"`
	RefRMS         float64  `json:"ref_rms"`
	NaNCount       int      `json:"nan_count"`
	Unwritten      int      `json:"unwritten"`
	AllWritten     bool     `json:"all_written"`
	Runs           int      `json:"runs"`
	Deterministic  bool     `json:"deterministic"`
	ErrorWord      string   `json:"error_word"` // "ok" or CheckErrors' message
	Tolerance      float64  `json:"tolerance"`
	CompileSeconds float64  `json:"compile_s"`
	Pass           bool     `json:"pass"`
	Failures       []string `json:"failures,omitempty"`
}

// sampleRows picks n of T token rows, sorted, always with the first and
// the last, deterministic given seed; all rows when n >= T. n <= 0 means
// the default: all rows up to 256 tokens, else 256.
func sampleRows(T, n int, seed uint64) []int {
	if n <= 0 {
		n = min(T, 256)
	}
	if n >= T {
		rows := make([]int, T)
		for i := range rows {
			rows[i] = i
		}
		return rows
	}
	perm := rand.New(rand.NewPCG(seed, 0x5eed)).Perm(T)
	pick := map[int]bool{0: true, T - 1: true}
	for _, r := range perm {
		if len(pick) >= n {
			break
		}
		pick[r] = true
	}
	rows := make([]int, 0, len(pick))
	for r := range pick {
		rows = append(rows, r)
	}
	slices.Sort(rows)
	return rows
}

// compareRows compares the rows of y (bf16 bits, [T,H]) named by rows with
// ref ([len(rows), H]): the relative L2 error over finite elements, the max
// abs error and the reference's RMS.
func compareRows(y []uint16, H int, rows []int, ref []float64) (rel, maxAbs, rms float64) {
	var num, den float64
	for i, t := range rows {
		for h := 0; h < H; h++ {
			v := float64(math.Float32frombits(uint32(y[t*H+h]) << 16))
			r := ref[i*H+h]
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue // counted separately
			}
			d := v - r
			num += d * d
			den += r * r
			maxAbs = math.Max(maxAbs, math.Abs(d))
		}
	}
	if n := len(rows) * H; n > 0 {
		rms = math.Sqrt(den / float64(n))
	}
	if den == 0 {
		if num == 0 {
			return 0, maxAbs, rms
		}
		return math.Inf(1), maxAbs, rms
	}
	return math.Sqrt(num / den), maxAbs, rms
}

// poisonCounts counts the elements still holding the 0xFFFF poison and the
// other NaN/Inf values.
func poisonCounts(y []uint16) (unwritten, nonFinite int) {
	for _, b := range y {
		if b == 0xFFFF {
			unwritten++
		} else if b&0x7F80 == 0x7F80 { // exponent all ones: Inf or NaN
			nonFinite++
		}
	}
	return
}

func runAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("run: unexpected argument %q", c.Args().First())
	}
	T := c.Int("tokens")
	if T < 0 {
		return fmt.Errorf("run: --tokens %d: must be >= 0", T)
	}
	ctx, err := openDevice("run", c.Int("device"))
	if err != nil {
		return err
	}
	defer ctx.Close()
	l, s, err := gpuLayer(c)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	seed := c.Uint64("seed")
	dev := ctx.Device()
	rep := runReport{Model: l.Name, Target: s.Target.String(), Device: fmt.Sprintf("%s (compute capability %d.%d)", dev.Name, dev.ComputeMajor, dev.ComputeMinor),
		Tokens: T, Seed: seed, Routing: l.Routing.String(), Runs: 3, Tolerance: runTolerance}
	logf := func(format string, a ...any) {
		if !c.Bool("json") {
			fmt.Fprintf(c.App.ErrWriter, format+"\n", a...)
		}
	}

	useCompiler()
	t0 := time.Now()
	ly, err := runtime.NewLayer(ctx, l, s)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer ly.Close()
	rep.CompileSeconds = time.Since(t0).Seconds()
	logf("mokc run: %s on %s: compiled and loaded %d kernels in %.2f s", l.Name, s.Target, len(ly.Kernels()), rep.CompileSeconds)

	w, err := schedule.RandomWeights(l, seed)
	if err != nil {
		return fmt.Errorf("run: weights: %w", err)
	}
	dw, err := runtime.UploadWeights(ctx, l, w)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer dw.Free()
	x := schedule.RandomInput(T, l.Hidden, seed+1)
	r, err := schedule.GenerateRouting(l, x, seed+2)
	if err != nil {
		return fmt.Errorf("run: routing: %w", err)
	}
	in, err := runtime.UploadInputs(ctx, l, x, r)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer in.Free()
	stream, err := ctx.NewStream()
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer stream.Destroy()
	var args runtime.ForwardArgs
	dw.SetIn(&args)
	in.SetIn(&args)
	args.Stream = stream

	H := l.Hidden
	var first []uint16
	rep.Deterministic = true
	rep.ErrorWord = "ok"
	for run := 0; run < rep.Runs; run++ {
		if T > 0 {
			if err := ctx.MemsetAsync(args.Y.Ptr, 0xFF, 2*T*H, stream); err != nil {
				return fmt.Errorf("run: %w", err)
			}
		}
		if err := ly.Forward(args); err != nil {
			return fmt.Errorf("run: %w", err)
		}
		if err := ly.CheckErrors(stream); err != nil {
			var re *runtime.RoutingError
			if !errors.As(err, &re) {
				return fmt.Errorf("run: %w", err) // a device fault: nothing more to check
			}
			rep.ErrorWord = err.Error()
		}
		y := make([]uint16, T*H)
		if T > 0 {
			if err := ctx.CopyFromDevice(y, args.Y.Ptr); err != nil {
				return fmt.Errorf("run: %w", err)
			}
		}
		unwritten, nonFinite := poisonCounts(y)
		rep.Unwritten = max(rep.Unwritten, unwritten)
		rep.NaNCount = max(rep.NaNCount, nonFinite)
		if first == nil {
			first = y
		} else if !slices.Equal(first, y) {
			rep.Deterministic = false
		}
	}
	rep.AllWritten = rep.Unwritten == 0

	rows := sampleRows(T, c.Int("sample"), seed)
	rep.CheckedTokens = len(rows)
	if len(rows) > 0 {
		logf("mokc run: float64 reference on %d of %d tokens", len(rows), T)
		ref, err := schedule.ForwardRows(l, w, x, r, rows)
		if err != nil {
			return fmt.Errorf("run: reference: %w", err)
		}
		rep.RelL2, rep.MaxAbsErr, rep.RefRMS = compareRows(first, H, rows, ref)
	}

	if !(rep.RelL2 <= runTolerance) {
		rep.Failures = append(rep.Failures, fmt.Sprintf("relative L2 error %.3g > %g", rep.RelL2, runTolerance))
	}
	if rep.NaNCount > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d NaN/Inf values", rep.NaNCount))
	}
	if !rep.AllWritten {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d elements of y not written", rep.Unwritten))
	}
	if !rep.Deterministic {
		rep.Failures = append(rep.Failures, "y differs between runs")
	}
	if rep.ErrorWord != "ok" {
		rep.Failures = append(rep.Failures, "error word: "+rep.ErrorWord)
	}
	rep.Pass = len(rep.Failures) == 0
	if err := writeRunReport(c.App.Writer, rep, c.Bool("json")); err != nil {
		return err
	}
	if !rep.Pass {
		return fmt.Errorf("run: %s %s T=%d: FAIL: %s", l.Name, s.Target, T, strings.Join(rep.Failures, "; "))
	}
	return nil
}

func writeRunReport(w io.Writer, rep runReport, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(rep)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	verdict := "PASS"
	if !rep.Pass {
		verdict = "FAIL"
	}
	row := func(k string, v any) { fmt.Fprintf(w, "  %-22s %v\n", k, v) }
	fmt.Fprintf(w, "mokc run %s %s T=%d seed=%d routing=%s: %s\n", rep.Model, rep.Target, rep.Tokens, rep.Seed, rep.Routing, verdict)
	row("device", rep.Device)
	row("checked tokens", fmt.Sprintf("%d of %d", rep.CheckedTokens, rep.Tokens))
	row("relative L2 error", fmt.Sprintf("%.3e (tolerance %g)", rep.RelL2, rep.Tolerance))
	row("max abs error", fmt.Sprintf("%.3e (reference RMS %.3e)", rep.MaxAbsErr, rep.RefRMS))
	row("NaN/Inf", rep.NaNCount)
	row("every element written", rep.AllWritten)
	row("deterministic", fmt.Sprintf("%v (%d runs, bitwise)", rep.Deterministic, rep.Runs))
	row("error word", rep.ErrorWord)
	row("compile + load", fmt.Sprintf("%.2f s", rep.CompileSeconds))
	for _, f := range rep.Failures {
		row("failure", f)
	}
	return nil
}
