package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/runtime"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// runTolerance is the largest relative L2 error `mokc run` accepts:
// sqrt(sum (y - ref)^2 / sum ref^2) over the checked tokens, with y in bf16
// (8 significant bits: a rounding error of at most 2^-9 per element) and
// fp32 accumulation.
const runTolerance = 1e-2

// runDefaultSample is the number of tokens checked against the reference
// when T is larger (all tokens up to it).
const runDefaultSample = 256

func init() {
	commands = append(commands, func() *cli.Command {
		return &cli.Command{
			Name:  "run",
			Usage: "(GPU) run a layer's forward, or its backward (--backward), on random inputs and check it against the float64 reference",
			UsageText: "mokc run --model NAME|all --target sm_80,sm_90a --tokens 0,1,64,4096 [--repeat N] [--seed N] [--routing ids|map] [--sample N] [--json]\n\n" +
				"For each model (--model all: every preset, one after another), the weights are generated one expert at a\n" +
				"time from a counter-based hash (bf16, scaled by 1/sqrt(fan-in)) and uploaded once;\n" +
				"then, for each target, the layer is compiled and, for each token count T, run --repeat times on random bf16\n" +
				"inputs with routing from the model's router rule (softmax/sigmoid scores and top-k), y poisoned (0xFF bytes)\n" +
				"before each run. One line per (model, target, T): the relative L2 error against schedule's float64\n" +
				"reference on --sample tokens (which regenerates only the experts those tokens route to, and runs on the\n" +
				"CPU while the GPU works), the max abs error, NaN and unwritten counts, bitwise determinism over the runs\n" +
				"and the error word; then a verdict. Exits non-zero when any relative L2 error exceeds 1e-2 or any check\n" +
				"fails. Device memory is freed between models; host memory holds two experts' bf16 weights for the\n" +
				"upload and one expert's float32 weights for the reference, never a whole layer.",
			Flags: append(append(layerFlags(), scheduleFlags()...),
				&cli.StringFlag{Name: "target", Value: "sm_90a", Usage: "comma-separated targets: sm_80, sm_90a, sm_100a"},
				&cli.StringFlag{Name: "tokens", Aliases: []string{"T"}, Value: "256", Usage: "comma-separated token counts T (0 is valid)"},
				&cli.IntFlag{Name: "repeat", Value: 3, Usage: "runs per (target, T), compared bitwise"},
				&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the random inputs, weights and routing"},
				&cli.StringFlag{Name: "routing", Value: "ids", Usage: "routing input: ids (fixed-width ids + weights) or map (dense routing map + probs)"},
				&cli.IntFlag{Name: "sample", Usage: "tokens checked against the reference", DefaultText: "all when T <= 256, else 256"},
				&cli.IntFlag{Name: "device", Usage: "CUDA device ordinal"},
				&cli.BoolFlag{Name: "json", Usage: "print one JSON object per (model, target, T) on stdout (y_sha256: the SHA-256 of the first run's whole y, which two binaries computing the same bits share at the same --seed)"},
				waitLimitFlag(),
				&cli.BoolFlag{Name: "backward", Usage: "check the backward instead: dx and the routing-weight gradient on --sample tokens, the weight (and bias) gradients of two experts on 2 of every 64 intermediate columns (all when I <= 256) and (up to T*S*I_s*H = 2^34) the shared experts', against schedule's float64 gradients (rel L2 <= 1e-2, cosine >= 0.9999), --repeat runs bitwise"},
			),
			Action: runAction,
		}
	})
}

// openDevice opens the GPU, with a clear error for a binary built without
// the cuda tag and for a machine without a device.
func openDevice(cmd string, ordinal int) (*driver.Context, error) {
	ctx, err := driver.Open(ordinal)
	switch {
	case errors.Is(err, driver.ErrNoCUDA):
		return nil, fmt.Errorf("%s: this mokc was built without CUDA support; rebuild it with `go build -tags cuda ./cmd/mokc` (needs cuda.h: `. scripts/env.sh` first)", cmd)
	case errors.Is(err, driver.ErrNoDevice):
		return nil, fmt.Errorf("%s: no usable CUDA device: %w", cmd, err)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return ctx, nil
}

// routingForm parses --routing.
func routingForm(c *cli.Context) (schedule.RoutingForm, error) {
	switch r := strings.ToLower(c.String("routing")); r {
	case "", "ids":
		return schedule.RoutingIDs, nil
	case "map":
		return schedule.RoutingMap, nil
	}
	return 0, fmt.Errorf("--routing %q: want ids or map", c.String("routing"))
}

// gpuLayer reads the layer, target, routing and schedule flags of bench
// and returns the layer and its schedule.
func gpuLayer(c *cli.Context) (schedule.Layer, schedule.Schedule, error) {
	l, err := loadLayer(c)
	if err != nil {
		return l, schedule.Schedule{}, err
	}
	if l.Routing, err = routingForm(c); err != nil {
		return l, schedule.Schedule{}, err
	}
	if err := l.Validate(); err != nil {
		return l, schedule.Schedule{}, err
	}
	target, err := loadTarget(c)
	if err != nil {
		return l, schedule.Schedule{}, err
	}
	s, err := layerSchedule(c, l, target)
	return l, s, err
}

// runIdent names what one JSON line of `mokc run` (forward or backward)
// checked: the first fields of runReport and backwardReport.
type runIdent struct {
	Model     string `json:"model"`
	Target    string `json:"target"`
	Precision string `json:"precision"` // routed weights: "bf16" or "mxfp8"
	Schedule  string `json:"schedule"`  // the schedule run (schedule.Schedule.String; empty when it could not be made)
}

// newRunIdent is the runIdent of layer l on target tg under the schedule
// text sched.
func newRunIdent(l schedule.Layer, tg target.Target, sched string) runIdent {
	return runIdent{Model: l.Name, Target: tg.String(), Precision: l.Precision.String(), Schedule: sched}
}

// runReport is the result of one (model, target, T) of `mokc run` (one
// line of the --json output).
type runReport struct {
	runIdent
	Device        string  `json:"device"`
	Tokens        int     `json:"tokens"`
	Seed          uint64  `json:"seed"`
	Routing       string  `json:"routing"`
	CheckedTokens int     `json:"checked_tokens"`
	RelL2         float64 `json:"rel_l2"`
	MaxAbsErr     float64 `json:"max_abs_err"`
	RefRMS        float64 `json:"ref_rms"`
	NaNCount      int     `json:"nan_count"`
	Unwritten     int     `json:"unwritten"`
	AllWritten    bool    `json:"all_written"`
	Runs          int     `json:"runs"`
	// IdenticalRuns counts the runs whose y equals the first run's bit for
	// bit (the first included): Runs when deterministic.
	IdenticalRuns int  `json:"identical_runs"`
	Deterministic bool `json:"deterministic"`
	// YSHA256 is the SHA-256 of the first run's y (bf16 [T, H], its bytes
	// as the device wrote them, little-endian), hex: two binaries or
	// schedules that compute the same bits give the same digest (at the
	// same --seed and --routing).
	YSHA256        string   `json:"y_sha256"`
	ErrorWord      string   `json:"error_word"` // "ok" or CheckErrors' message
	Tolerance      float64  `json:"tolerance"`
	CompileSeconds float64  `json:"compile_s"`   // compile and load for this target
	UploadSeconds  float64  `json:"upload_s"`    // generate and upload the model's weights
	RefSeconds     float64  `json:"reference_s"` // the model's float64 reference, every T at once
	RunSeconds     float64  `json:"run_s"`       // the runs of this (target, T), copies of y included
	Pass           bool     `json:"pass"`
	Failures       []string `json:"failures,omitempty"`
}

// sampleRows picks n of T token rows, sorted, always with the first and
// the last, deterministic given seed; all rows when n >= T. n <= 0 means
// the default: all rows up to 256 tokens, else 256.
func sampleRows(T, n int, seed uint64) []int {
	if n <= 0 {
		n = min(T, runDefaultSample)
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

// poisonCounts counts the elements still holding the poison and the other
// NaN/Inf values (runtime.PoisonCounts).
var poisonCounts = runtime.PoisonCounts

// runConfig is what `mokc run` checks, from its flags.
type runConfig struct {
	models  []string // preset names, or empty with layer set (--hf-config)
	layer   schedule.Layer
	routing schedule.RoutingForm
	targets []target.Target
	tokens  []int
	repeat  int
	sample  int
	seed    uint64
	json    bool
	// waitLimit is --wait-limit (nil: not given, the manifest's).
	waitLimit *time.Duration
	// editLayer applies the layer flags to a preset's layer (nil: none).
	editLayer func(*schedule.Layer) error
	// schedule returns the schedule of a layer on a target: the default,
	// or with the schedule flags applied (one target only).
	schedule func(l schedule.Layer, t target.Target) (schedule.Schedule, error)
}

// runPresetLayer returns a preset's layer; tests substitute smaller layers.
var runPresetLayer = schedule.Preset

// parseTokenList parses --tokens: comma-separated token counts >= 0, no
// repeats.
func parseTokenList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		T, err := strconv.Atoi(f)
		switch {
		case err != nil:
			return nil, fmt.Errorf("--tokens %s: %q is not an integer", s, f)
		case T < 0:
			return nil, fmt.Errorf("--tokens %s: token counts must be >= 0", s)
		case slices.Contains(out, T):
			return nil, fmt.Errorf("--tokens %s: %d given twice", s, T)
		}
		out = append(out, T)
	}
	return out, nil
}

// parseTargetList parses --target: comma-separated targets, no repeats.
func parseTargetList(s string) ([]target.Target, error) {
	var out []target.Target
	for _, f := range strings.Split(s, ",") {
		t, err := target.Parse(f)
		if err != nil {
			return nil, fmt.Errorf("--target %s: %w", s, err)
		}
		if slices.Contains(out, t) {
			return nil, fmt.Errorf("--target %s: %s given twice", s, t)
		}
		out = append(out, t)
	}
	return out, nil
}

// parseRunFlags reads and checks every flag of `mokc run`; it opens no
// device.
func parseRunFlags(c *cli.Context) (runConfig, error) {
	cfg := runConfig{repeat: c.Int("repeat"), sample: c.Int("sample"), seed: c.Uint64("seed"), json: c.Bool("json")}
	if c.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected argument %q", c.Args().First())
	}
	var err error
	if cfg.tokens, err = parseTokenList(c.String("tokens")); err != nil {
		return cfg, err
	}
	if cfg.targets, err = parseTargetList(c.String("target")); err != nil {
		return cfg, err
	}
	if cfg.repeat < 1 {
		return cfg, fmt.Errorf("--repeat %d: must be >= 1", cfg.repeat)
	}
	if cfg.sample < 0 {
		return cfg, fmt.Errorf("--sample %d: must be >= 0 (0: the default)", cfg.sample)
	}
	if cfg.routing, err = routingForm(c); err != nil {
		return cfg, err
	}
	if cfg.waitLimit, err = waitLimitFlagValue(c); err != nil {
		return cfg, err
	}
	cfg.schedule = defaultSchedule
	if scheduleOverridden(c, false) {
		if scheduleOverridden(c, true) && len(cfg.targets) != 1 {
			return cfg, fmt.Errorf("the schedule flags of the GEMM shape need exactly one --target, not %d", len(cfg.targets))
		}
		cfg.schedule = onceEach(func(l schedule.Layer, t target.Target) (schedule.Schedule, error) { return layerSchedule(c, l, t) })
	}
	if strings.EqualFold(strings.TrimSpace(c.String("model")), "all") {
		if c.String("hf-config") != "" {
			return cfg, errors.New("give --model or --hf-config, not both")
		}
		cfg.models = schedule.Presets()
	} else if c.String("model") != "" && c.String("hf-config") == "" {
		cfg.models = []string{c.String("model")}
	} else if cfg.layer, err = loadLayer(c); err != nil {
		return cfg, err
	}
	cfg.editLayer = func(l *schedule.Layer) error { return applyLayerFlags(c, l) }
	// Every layer must exist and be valid, and every T within what its
	// kernels index, before anything runs.
	layers := []schedule.Layer{cfg.layer}
	if cfg.models != nil {
		layers = layers[:0]
		for _, m := range cfg.models {
			l, err := cfg.modelLayer(m)
			if err != nil {
				return cfg, err
			}
			layers = append(layers, l)
		}
	} else {
		cfg.layer.Routing = cfg.routing
		if err := cfg.layer.Validate(); err != nil {
			return cfg, err
		}
		layers[0] = cfg.layer
	}
	for _, l := range layers {
		for _, tg := range cfg.targets {
			s, err := cfg.schedule(l, tg)
			if err != nil {
				return cfg, err
			}
			for _, T := range cfg.tokens {
				if err := checkTokens(l, s, T); err != nil {
					return cfg, err
				}
			}
		}
	}
	return cfg, nil
}

// checkTokens refuses a token count T above what the kernels of l with
// schedule s index in 32 bits (schedule.Schedule.MaxTokens).
func checkTokens(l schedule.Layer, s schedule.Schedule, T int) error {
	if limit := s.MaxTokens(l); T > limit {
		return fmt.Errorf("--tokens %d: more than the %d tokens the kernels of %s on %s index in 32 bits",
			T, limit, l.Name, s.Target)
	}
	return nil
}

// layers returns the layers cfg checks: its models' (modelLayer), or the
// one layer of --hf-config.
func (cfg runConfig) layers() ([]schedule.Layer, error) {
	if cfg.models == nil {
		return []schedule.Layer{cfg.layer}, nil
	}
	var out []schedule.Layer
	for _, m := range cfg.models {
		l, err := cfg.modelLayer(m)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// modelLayer returns the layer of a preset with the routing form of
// --routing.
func (cfg runConfig) modelLayer(name string) (schedule.Layer, error) {
	l, err := runPresetLayer(name)
	if err != nil {
		return l, err
	}
	if cfg.editLayer != nil {
		if err := cfg.editLayer(&l); err != nil {
			return l, fmt.Errorf("%s: %w", name, err)
		}
	}
	l.Routing = cfg.routing
	return l, l.Validate()
}

// runBackend is the device side of `mokc run`: the GPU (cudaBackend), or a
// host stand-in in tests. One model's weights are loaded at a time.
type runBackend interface {
	// describe names the device.
	describe() string
	// loadWeights uploads the weights src generates for l, replacing none:
	// the previous model's weights must have been freed.
	loadWeights(l schedule.Layer, src runtime.WeightSource) error
	// freeWeights releases the loaded weights.
	freeWeights() error
	// loadInputs uploads an input x [T*H] with its routing and allocates
	// y [T, H].
	loadInputs(l schedule.Layer, x []float32, r schedule.Routing) (runInputs, error)
	// compile compiles and loads l with schedule s.
	compile(l schedule.Layer, s schedule.Schedule) (runKernel, error)
}

// runInputs are one input set on the device.
type runInputs interface{ Free() error }

// runKernel is one compiled layer on the device.
type runKernel interface {
	// forward poisons y on the device with 0xFF bytes, runs the forward on
	// the loaded weights and the inputs, waits, and copies y [T*H] bf16
	// bits to the host. word is the error word's message ("" when clear);
	// err is a failure of the device (a fault, a launch error).
	forward(in runInputs, y []uint16) (word string, err error)
	close() error
}

// cudaBackend runs on the GPU through package runtime.
type cudaBackend struct {
	ctx     *driver.Context
	stream  *driver.Stream
	weights *runtime.DeviceTensors
	// waitLimit is every layer's runtime.Layer.SetWaitLimit (nil: the
	// manifest's).
	waitLimit *time.Duration
}

func (b *cudaBackend) describe() string {
	dev := b.ctx.Device()
	return fmt.Sprintf("%s (compute capability %d.%d)", dev.Name, dev.ComputeMajor, dev.ComputeMinor)
}

func (b *cudaBackend) loadWeights(l schedule.Layer, src runtime.WeightSource) error {
	if b.weights != nil {
		return errors.New("weights of the previous model still loaded")
	}
	d, err := runtime.UploadWeightSource(b.ctx, l, src)
	if err != nil {
		return err
	}
	b.weights = d
	return nil
}

func (b *cudaBackend) freeWeights() error {
	err := b.weights.Free()
	b.weights = nil
	return err
}

func (b *cudaBackend) loadInputs(l schedule.Layer, x []float32, r schedule.Routing) (runInputs, error) {
	return runtime.UploadInputs(b.ctx, l, x, r)
}

func (b *cudaBackend) compile(l schedule.Layer, s schedule.Schedule) (runKernel, error) {
	ly, err := runtime.NewLayer(b.ctx, l, s)
	if err != nil {
		return nil, err
	}
	if err := setWaitLimit(ly, b.waitLimit); err != nil {
		ly.Close()
		return nil, err
	}
	return &cudaKernel{b: b, ly: ly}, nil
}

type cudaKernel struct {
	b  *cudaBackend
	ly *runtime.Layer
}

func (k *cudaKernel) forward(in runInputs, y []uint16) (string, error) {
	d, ok := in.(*runtime.DeviceTensors)
	if !ok || k.b.weights == nil {
		return "", errors.New("no weights or inputs loaded")
	}
	b := runtime.Bindings{}
	k.b.weights.SetIn(b)
	d.SetIn(b)
	ctx, stream, out := k.b.ctx, k.b.stream, b["y"].Ptr
	if err := runtime.Poison(ctx, stream, b["y"]); err != nil {
		return "", err
	}
	if err := k.ly.Forward(stream, b); err != nil {
		return "", err
	}
	word := ""
	if err := k.ly.CheckErrors(stream); err != nil {
		if !routingOnly(err) {
			return "", err // a device fault or a timeout: nothing more to check
		}
		word = err.Error()
	}
	if len(y) > 0 {
		if err := ctx.CopyFromDevice(y, out); err != nil {
			return "", err
		}
	}
	return word, nil
}

func (k *cudaKernel) close() error { return k.ly.Close() }

// openRunBackend opens the device `mokc run` checks on, its layers given
// waitLimit (nil: the manifest's), and returns it with the function that
// releases it; tests substitute a host stand-in.
var openRunBackend = func(device int, waitLimit *time.Duration) (runBackend, func(), error) {
	ctx, err := openDevice("run", device)
	if err != nil {
		return nil, nil, err
	}
	stream, err := ctx.NewStream()
	if err != nil {
		ctx.Close()
		return nil, nil, fmt.Errorf("run: %w", err)
	}
	b := &cudaBackend{ctx: ctx, stream: stream, waitLimit: waitLimit}
	return b, func() {
		if b.weights != nil {
			b.freeWeights()
		}
		stream.Destroy()
		ctx.Close()
	}, nil
}

func runAction(c *cli.Context) error {
	cfg, err := parseRunFlags(c)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	// The programs' and engines' refusals (mxfp8 with per-expert storage,
	// or on sm_80 and sm_100a) come before the device is opened.
	layers, err := cfg.layers()
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	for _, l := range layers {
		if err := checkProgram(l, c.Bool("backward")); err != nil {
			return fmt.Errorf("run: %w", err)
		}
		for _, t := range cfg.targets {
			if _, err := cfg.schedule(l, t); err != nil {
				return fmt.Errorf("run: %w", err)
			}
		}
	}
	if c.Bool("backward") {
		ctx, err := openDevice("run", c.Int("device"))
		if err != nil {
			return err
		}
		defer ctx.Close()
		return runBackwardAll(cfg, ctx, c.App.Writer, c.App.ErrWriter)
	}
	b, release, err := openRunBackend(c.Int("device"), cfg.waitLimit)
	if err != nil {
		return err
	}
	defer release()
	return runAll(cfg, b, c.App.Writer, c.App.ErrWriter)
}

// runAll checks every model of cfg on b, one after another, writing one
// report per (model, target, T) to out and progress to logw, then the
// verdict; the error lists the failed checks.
func runAll(cfg runConfig, b runBackend, out, logw io.Writer) error {
	start := time.Now()
	total := 0
	var failed []string
	layers, err := cfg.layers()
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	// The float64 reference of one model finishes while the next model
	// runs on the device: at most two models' references are in flight.
	var pending func() []runReport
	flush := func() error {
		if pending == nil {
			return nil
		}
		for _, rep := range pending() {
			total++
			if !rep.Pass {
				failed = append(failed, fmt.Sprintf("%s %s T=%d (%s)", rep.Model, rep.Target, rep.Tokens, strings.Join(rep.Failures, "; ")))
			}
			if err := writeRunReport(out, rep, cfg.json); err != nil {
				return err
			}
		}
		pending = nil
		debug.FreeOSMemory() // return the finished model's host memory
		return nil
	}
	for _, l := range layers {
		finish := runModel(cfg, b, l, logw)
		if err := flush(); err != nil {
			return err
		}
		pending = finish
	}
	if err := flush(); err != nil {
		return err
	}
	verdict := fmt.Sprintf("mokc run: PASS: %d checks (%d models x %d targets x %d token counts, %d runs each) in %.1f s",
		total, len(layers), len(cfg.targets), len(cfg.tokens), cfg.repeat, time.Since(start).Seconds())
	if len(failed) > 0 {
		verdict = fmt.Sprintf("mokc run: FAIL: %d of %d checks failed in %.1f s", len(failed), total, time.Since(start).Seconds())
	}
	if cfg.json {
		fmt.Fprintln(logw, verdict)
	} else {
		fmt.Fprintln(out, verdict)
	}
	if len(failed) > 0 {
		return fmt.Errorf("run: %d of %d checks failed: %s", len(failed), total, strings.Join(failed, ", "))
	}
	return nil
}

// tokenSet is one token count's inputs and what is checked of them.
type tokenSet struct {
	T    int
	x    []float32
	r    schedule.Routing
	rows []int     // sampled token rows
	ref  []float64 // the reference on rows, [len(rows)*H]
	in   runInputs
}

// inputSeeds returns the seeds of x and of the routing for T tokens.
func inputSeeds(seed uint64, T int) (uint64, uint64) {
	s := seed + 1 + uint64(T)<<20
	return s, s + 1
}

// runResult is what the runs of one (target, T) found.
type runResult struct {
	sample         []uint16 // the sampled rows of the first run's y, [len(rows)*H]
	ySHA256        string   // yDigest of the first run's y
	unwritten, nan int      // the most over the runs
	identical      int
	word           string
	err            error
	seconds        float64
}

// runModel checks one model on every target and token count of cfg: it
// runs everything on the device, frees the model's device memory and
// returns a function that waits for the float64 reference and returns the
// reports, in target-major order. The reference of every token count
// (their sampled rows joined into one problem, so that each expert is
// generated once) runs on the CPU from the start, while the weights are
// uploaded and the GPU runs, and after runModel returns.
func runModel(cfg runConfig, b runBackend, l schedule.Layer, logw io.Writer) func() []runReport {
	logf := func(format string, a ...any) { fmt.Fprintf(logw, "mokc run: "+format+"\n", a...) }
	H := l.Hidden
	reports := make([]runReport, 0, len(cfg.targets)*len(cfg.tokens))
	for _, tg := range cfg.targets {
		sched := ""
		if s, err := cfg.schedule(l, tg); err == nil {
			sched = s.String()
		}
		for _, T := range cfg.tokens {
			reports = append(reports, runReport{runIdent: newRunIdent(l, tg, sched),
				Device: b.describe(), Tokens: T, Seed: cfg.seed, Routing: l.Routing.String(), Runs: cfg.repeat, Tolerance: runTolerance, ErrorWord: "ok"})
		}
	}
	report := func(ti, si int) *runReport { return &reports[ti*len(cfg.tokens)+si] }
	failAll := func(err error) []runReport {
		for i := range reports {
			reports[i].Failures = append(reports[i].Failures, err.Error())
		}
		return reports
	}
	gen, err := schedule.NewWeightGen(l, cfg.seed)
	if err != nil {
		return func() []runReport { return failAll(err) }
	}
	sets := make([]*tokenSet, len(cfg.tokens))
	for i, T := range cfg.tokens {
		xs, rs := inputSeeds(cfg.seed, T)
		x := schedule.RandomInput(T, H, xs)
		r, err := schedule.GenerateRouting(l, x, rs)
		if err != nil {
			return func() []runReport { return failAll(fmt.Errorf("routing: %w", err)) }
		}
		sets[i] = &tokenSet{T: T, x: x, r: r, rows: sampleRows(T, cfg.sample, cfg.seed)}
	}

	refDone := make(chan error, 1)
	var refSeconds float64
	xr, rr, n := joinRows(l, sets)
	go func() {
		t0 := time.Now()
		err := referenceRows(gen, xr, rr, n, sets)
		refSeconds = time.Since(t0).Seconds()
		refDone <- err
	}()

	results := make([][]runResult, len(cfg.targets))
	deviceErr := func() error {
		t0 := time.Now()
		if err := b.loadWeights(l, gen); err != nil {
			return fmt.Errorf("weights: %w", err)
		}
		upload := time.Since(t0).Seconds()
		nw := 3*l.Experts*l.Intermediate*H + 3*l.SharedWidth()*H
		logf("%s: %.3g weights (%.1f GB bf16) generated and uploaded in %.1f s", l.Name, float64(nw), float64(2*nw)/1e9, upload)
		for i := range reports {
			reports[i].UploadSeconds = upload
		}
		for _, st := range sets {
			in, err := b.loadInputs(l, st.x, st.r)
			if err != nil {
				return fmt.Errorf("inputs (T = %d): %w", st.T, err)
			}
			st.in = in
		}
		for ti, tg := range cfg.targets {
			res, compileSeconds, err := runTarget(cfg, b, l, tg, sets)
			if err != nil {
				for si := range sets {
					report(ti, si).Failures = append(report(ti, si).Failures, err.Error())
				}
				continue
			}
			logf("%s %s: compiled and loaded in %.2f s; %d runs of each T in %.2f s", l.Name, tg, compileSeconds, cfg.repeat, sumSeconds(res))
			for si := range sets {
				report(ti, si).CompileSeconds = compileSeconds
			}
			results[ti] = res
		}
		return nil
	}()
	for _, st := range sets {
		if st.in != nil {
			st.in.Free()
		}
		st.in, st.x, st.r = nil, nil, schedule.Routing{} // the reference has its own copy of the sampled rows
	}
	if err := b.freeWeights(); err != nil && deviceErr == nil {
		deviceErr = fmt.Errorf("free weights: %w", err)
	}
	if deviceErr != nil {
		failAll(deviceErr)
	}

	return func() []runReport {
		refErr := <-refDone
		if refErr == nil {
			logf("%s: float64 reference on %d tokens in %.1f s", l.Name, n, refSeconds)
		}
		for ti := range cfg.targets {
			for si, st := range sets {
				rep := report(ti, si)
				rep.RefSeconds = refSeconds
				rep.CheckedTokens = len(st.rows)
				if refErr != nil {
					rep.Failures = append(rep.Failures, fmt.Sprintf("reference: %v", refErr))
				} else if results[ti] != nil {
					applyResult(rep, results[ti][si], st, H)
				}
				rep.Pass = len(rep.Failures) == 0
			}
		}
		return reports
	}
}

func sumSeconds(res []runResult) float64 {
	var s float64
	for _, r := range res {
		s += r.seconds
	}
	return s
}

// applyResult fills a report from the runs' result and the token set's
// reference, and lists its failures.
func applyResult(rep *runReport, res runResult, st *tokenSet, H int) {
	rep.RunSeconds = res.seconds
	if res.err != nil {
		rep.Failures = append(rep.Failures, res.err.Error())
		return
	}
	if n := len(st.rows); n > 0 {
		idx := make([]int, n)
		for i := range idx {
			idx[i] = i
		}
		rep.RelL2, rep.MaxAbsErr, rep.RefRMS = compareRows(res.sample, H, idx, st.ref)
	}
	rep.Unwritten, rep.NaNCount = res.unwritten, res.nan
	rep.AllWritten = res.unwritten == 0
	rep.IdenticalRuns = res.identical
	rep.Deterministic = res.identical == rep.Runs
	rep.YSHA256 = res.ySHA256
	if res.word != "" {
		rep.ErrorWord = res.word
	}
	if !(rep.RelL2 <= runTolerance) {
		rep.Failures = append(rep.Failures, fmt.Sprintf("relative L2 error %.3g > %g", rep.RelL2, runTolerance))
	}
	if !rep.AllWritten {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d elements of y not written", rep.Unwritten))
	}
	if rep.NaNCount > 0 {
		rep.Failures = append(rep.Failures, fmt.Sprintf("%d NaN/Inf values", rep.NaNCount))
	}
	if !rep.Deterministic {
		rep.Failures = append(rep.Failures, fmt.Sprintf("y differs between runs (%d of %d identical to the first)", res.identical, rep.Runs))
	}
	if rep.ErrorWord != "ok" {
		rep.Failures = append(rep.Failures, "error word: "+rep.ErrorWord)
	}
}

// runTarget compiles l for tg and runs every token set cfg.repeat times.
// A device error during the runs of one set is recorded in its result.
func runTarget(cfg runConfig, b runBackend, l schedule.Layer, tg target.Target, sets []*tokenSet) ([]runResult, float64, error) {
	sched := cfg.schedule
	if sched == nil {
		sched = schedule.DefaultSchedule
	}
	s, err := sched(l, tg)
	if err != nil {
		return nil, 0, fmt.Errorf("schedule for %s: %w", tg, err)
	}
	t0 := time.Now()
	k, err := b.compile(l, s)
	if err != nil {
		return nil, 0, err
	}
	compileSeconds := time.Since(t0).Seconds()
	defer k.close()
	res := make([]runResult, len(sets))
	for i, st := range sets {
		res[i] = runRepeats(k, st, l.Hidden, cfg.repeat)
	}
	return res, compileSeconds, nil
}

// runRepeats runs one token set repeat times, comparing every y with the
// first bit for bit, and keeps the first run's sampled rows.
func runRepeats(k runKernel, st *tokenSet, H, repeat int) runResult {
	t0 := time.Now()
	var res runResult
	first, cur := make([]uint16, st.T*H), make([]uint16, st.T*H)
	for run := 0; run < repeat; run++ {
		y := cur
		if run == 0 {
			y = first
		}
		word, err := k.forward(st.in, y)
		if err != nil {
			res.err = fmt.Errorf("run %d: %w", run+1, err)
			break
		}
		if word != "" && res.word == "" {
			res.word = word
		}
		u, n := poisonCounts(y)
		res.unwritten, res.nan = max(res.unwritten, u), max(res.nan, n)
		if run == 0 || slices.Equal(first, cur) {
			res.identical++
		}
	}
	res.ySHA256 = yDigest(first)
	res.sample = make([]uint16, len(st.rows)*H)
	for i, t := range st.rows {
		copy(res.sample[i*H:(i+1)*H], first[t*H:(t+1)*H])
	}
	res.seconds = time.Since(t0).Seconds()
	return res
}

// yDigest is the hex SHA-256 of the bf16 values y as little-endian bytes.
func yDigest(y []uint16) string {
	buf := make([]byte, 2*len(y))
	for i, v := range y {
		binary.LittleEndian.PutUint16(buf[2*i:], v)
	}
	sum := sha256.Sum256(buf)
	return hex.EncodeToString(sum[:])
}

// joinRows joins the sampled rows of every token set into one problem: x
// [n*H] and its routing in l's form. A token's output depends only on its
// own input and routing, so the reference of the joined problem equals each
// set's schedule.ForwardRows bit for bit, and each expert is generated once
// for all of them.
func joinRows(l schedule.Layer, sets []*tokenSet) ([]float32, schedule.Routing, int) {
	H, E, K := l.Hidden, l.Experts, l.TopK
	n := 0
	for _, st := range sets {
		n += len(st.rows)
	}
	x := make([]float32, 0, n*H)
	var r schedule.Routing
	if l.Routing == schedule.RoutingMap {
		r.Map, r.Probs = make([]bool, 0, n*E), make([]float32, 0, n*E)
	} else {
		r.IDs, r.Weights = make([]int32, 0, n*K), make([]float32, 0, n*K)
	}
	for _, st := range sets {
		for _, t := range st.rows {
			x = append(x, st.x[t*H:(t+1)*H]...)
			if l.Routing == schedule.RoutingMap {
				r.Map = append(r.Map, st.r.Map[t*E:(t+1)*E]...)
				r.Probs = append(r.Probs, st.r.Probs[t*E:(t+1)*E]...)
			} else {
				r.IDs = append(r.IDs, st.r.IDs[t*K:(t+1)*K]...)
				r.Weights = append(r.Weights, st.r.Weights[t*K:(t+1)*K]...)
			}
		}
	}
	return x, r, n
}

// referenceRows computes the float64 reference of the joined problem (x,
// r: n rows, from joinRows) through the generator's lazy reference and
// hands each token set its rows (tokenSet.ref).
func referenceRows(gen *schedule.WeightGen, x []float32, r schedule.Routing, n int, sets []*tokenSet) error {
	if n == 0 {
		return nil
	}
	rows := make([]int, n)
	for i := range rows {
		rows[i] = i
	}
	ref, err := gen.ForwardRows(x, r, rows)
	if err != nil {
		return err
	}
	H := gen.Layer().Hidden
	off := 0
	for _, st := range sets {
		st.ref = ref[off*H : (off+len(st.rows))*H]
		off += len(st.rows)
	}
	return nil
}

// writeJSONLine writes v as one line of JSON.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// writeRunReport writes one report: a JSON object on one line, or one line
// of text.
func writeRunReport(w io.Writer, rep runReport, asJSON bool) error {
	if asJSON {
		return writeJSONLine(w, rep)
	}
	verdict := "PASS"
	if !rep.Pass {
		verdict = "FAIL: " + strings.Join(rep.Failures, "; ")
	}
	_, err := fmt.Fprintf(w, "%-18s %-7s T=%-5d checked %3d  rel_l2 %.2e  max_abs %.2e (ref rms %.2e)  nan %d  unwritten %d  identical %d/%d  error word %s  %s\n",
		rep.Model, rep.Target, rep.Tokens, rep.CheckedTokens, rep.RelL2, rep.MaxAbsErr, rep.RefRMS, rep.NaNCount, rep.Unwritten,
		rep.IdenticalRuns, rep.Runs, rep.ErrorWord, verdict)
	return err
}

// waitLimitFlag is --wait-limit of run and bench: how long a block of a
// co-resident kernel (a chained kernel's second GEMM, the persistent
// kernel's grid-wide barriers and its FC2's wait for FC1's row tiles)
// waits for another block's work before the run reports
// runtime.WaitTimeoutError.
func waitLimitFlag() cli.Flag {
	return &cli.StringFlag{Name: "wait-limit",
		Usage:       "a duration (30s, 500ms, 2m): how long one block of a co-resident kernel waits for another block's work (the chained kernel's row tiles of --chain fc1-fc2, the grid-wide barriers and FC2's wait for FC1's row tiles of --lowering persistent) before the run fails with a clear error (0: no limit; raise it under compute-sanitizer at large T)",
		DefaultText: time.Duration(launch.DefaultWaitLimitNs).String() + ", the manifest's"}
}

// waitLimitFlagValue returns --wait-limit, nil when not given; a value
// time.ParseDuration does not take (a number without its unit) and a
// negative duration are errors.
func waitLimitFlagValue(c *cli.Context) (*time.Duration, error) {
	if !c.IsSet("wait-limit") {
		return nil, nil
	}
	d, err := time.ParseDuration(c.String("wait-limit"))
	if err != nil {
		return nil, fmt.Errorf("--wait-limit %q: a duration with its unit, such as 30s, 500ms or 2m (0: no limit)", c.String("wait-limit"))
	}
	if d < 0 {
		return nil, fmt.Errorf("--wait-limit %v: must be >= 0 (0: no limit)", d)
	}
	return &d, nil
}

// setWaitLimit gives ly the wait limit d (nil: keeps the manifest's).
func setWaitLimit(ly *runtime.Layer, d *time.Duration) error {
	if d == nil {
		return nil
	}
	return ly.SetWaitLimit(*d)
}

// onceEach returns build's schedule, built once per layer and target: the checks
// before the device opens and the runs ask for it again, and
// layerSchedule's notes are said once.
func onceEach(build func(schedule.Layer, target.Target) (schedule.Schedule, error)) func(schedule.Layer, target.Target) (schedule.Schedule, error) {
	type made struct {
		s   schedule.Schedule
		err error
	}
	seen := map[string]made{}
	return func(l schedule.Layer, t target.Target) (schedule.Schedule, error) {
		key := fmt.Sprintf("%+v %v", l, t)
		m, ok := seen[key]
		if !ok {
			m.s, m.err = build(l, t)
			seen[key] = m
		}
		return m.s, m.err
	}
}
