package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/runtime"
	"github.com/mokc/mokc/schedule"
)

func init() {
	commands = append(commands, func() *cli.Command {
		return &cli.Command{
			Name:  "bench",
			Usage: "(GPU) time a layer's forward, or forward + backward (--backward), against the roofline",
			UsageText: "mokc bench --model qwen3-30b-a3b --target sm_90a --tokens 4096 [--iters 100] [--kernels] [--phases] [--backward [--main-grad fp32|bf16]] [--json]\n\n" +
				"Times the forward with CUDA events on one stream (median of --iters after --warmup runs), rotating\n" +
				"among several input sets when one set's data fits in L2. FLOPs count every routed and shared GEMM\n" +
				"executed: routes*(2I*H + H*I)*2 + T*(2I_s*H + H*I_s)*2; bytes count the weights of the experts that\n" +
				"received tokens (and the shared weights) once, plus x, y and the routing input. The roofline time is\n" +
				"max(FLOPs/peak, bytes/bandwidth). With --backward each timed step is Forward then Backward (main grads\n" +
				"accumulating), and the FLOPs and bytes add the backward's (8·I·H multiply-adds per route, 6·I·H with\n" +
				"--save-fc1, the main grads read and written once; with --save-fc1 the saved FC1 output written and read).",
			Flags: append(append(layerFlags(), scheduleFlags()...),
				targetFlag("sm_90a"),
				&cli.IntFlag{Name: "tokens", Aliases: []string{"T"}, Value: 4096, Usage: "token count T"},
				&cli.IntFlag{Name: "iters", Value: 100, Usage: "timed iterations"},
				&cli.IntFlag{Name: "warmup", Value: 10, Usage: "untimed iterations first"},
				&cli.Uint64Flag{Name: "seed", Value: 1, Usage: "seed of the random inputs, weights and routing"},
				&cli.StringFlag{Name: "routing", Value: "ids", Usage: "routing input: ids or map"},
				&cli.IntFlag{Name: "sets", Usage: "input sets to rotate among", DefaultText: "2, or enough to cover twice the L2 when one set fits in it"},
				&cli.Float64Flag{Name: "peak-tflops", Value: 750, Usage: "dense BF16 throughput for the roofline, TFLOP/s (the default is a nominal H100/H200 figure, doubled for --precision mxfp8; bench/torch_moe.py measures the card's)"},
				&cli.Float64Flag{Name: "peak-gbs", Value: 4200, Usage: "peak memory bandwidth for the roofline, GB/s"},
				&cli.IntFlag{Name: "device", Usage: "CUDA device ordinal"},
				&cli.BoolFlag{Name: "kernels", Usage: "also time each kernel (a second pass of --iters forwards, or with --backward of training steps timing the backward's kernels, with an event between kernels)"},
				&cli.BoolFlag{Name: "phases", Usage: "instrument the kernels (schedule.Schedule.PhaseTimes: each records its first block's start and last warp's end on the device's %globaltimer) and report, over a further pass of --iters forwards (each launched as in the timed pass, with no events between its kernels, queued behind two unrecorded forwards so that the device, not the host's launches, sets the pace, then waited for), each kernel's median start after the first kernel's and its median duration, and under --lowering persistent each phase of the persistent kernel as kernel/phase (with --backward: passes of a forward and its backward, the backward's kernels reported); the timed pass then runs the instrumented kernels too"},
				&cli.BoolFlag{Name: "backward", Usage: "time a training step's layer work: Forward then Backward (main grads accumulating), FLOPs and bytes of both"},
				waitLimitFlag(),
				&cli.BoolFlag{Name: "plain-launch", Usage: "launch every kernel with cuLaunchKernel, without the programmatic dependent launch of sm_90a and sm_100a kernels (launch.Kernel.Programmatic; docs/manifest.md), to measure what it saves"},
				&cli.BoolFlag{Name: "json", Usage: "print one JSON object"},
			),
			Action: benchAction,
		}
	})
}

// benchReport is the result of `mokc bench` (the --json output). Times are
// in milliseconds, rates in TFLOP/s and GB/s (10^12 and 10^9).
type benchReport struct {
	Model     string `json:"model"`
	Target    string `json:"target"`
	Device    string `json:"device"`
	SMs       int    `json:"sms"`
	L2Bytes   int    `json:"l2_bytes"`
	Tokens    int    `json:"tokens"`
	Routing   string `json:"routing"`
	Seed      uint64 `json:"seed"`
	Iters     int    `json:"iters"`
	Warmup    int    `json:"warmup"`
	Sets      int    `json:"sets"`
	Schedule  string `json:"schedule"`            // schedule.Schedule.String()
	Precision string `json:"precision"`           // routed weights: "bf16" or "mxfp8"
	Backward  bool   `json:"backward"`            // times Forward + Backward
	MainGrad  string `json:"main_grad,omitempty"` // dtype of the main grads (Backward)
	WGrad     string `json:"wgrad,omitempty"`     // weight-gradient kernel, "mma", "wgmma" or "wgmma-ws" (Backward)
	MXGemm    string `json:"mx_gemm,omitempty"`   // how the mxfp8 GEMMs run: "promote", "expand" or "regfed" (mxfp8)
	GroupM    int    `json:"group_m,omitempty"`   // persistent GEMMs' row tiles per group (schedule.Schedule.GroupM; 0: column blocks fastest)
	// PlainLaunch: every kernel launched with cuLaunchKernel (--plain-launch).
	PlainLaunch bool `json:"plain_launch,omitempty"`
	SaveFC1     bool `json:"save_fc1,omitempty"` // the forward keeps the routed FC1 output for the backward (schedule.Layer.SaveFC1)
	Kernels     int  `json:"kernels"`
	// ClusterGrids is the blocks each kernel in thread-block clusters
	// runs with on this device (runtime.Layer.ClusterGrids).
	ClusterGrids map[string]int `json:"cluster_grids,omitempty"`
	// PerSMGrids is the blocks each kernel built for several blocks per
	// SM runs with on this device (runtime.Layer.PerSMGrids).
	PerSMGrids map[string]int `json:"per_sm_grids,omitempty"`
	Workspace  int            `json:"workspace_bytes"`
	CompileSec float64        `json:"compile_s"`

	MedianMs float64 `json:"median_ms"`
	MinMs    float64 `json:"min_ms"`
	MeanMs   float64 `json:"mean_ms"`
	P90Ms    float64 `json:"p90_ms"`

	Routes        float64 `json:"routes"`         // valid (token, slot) routes per forward, mean over sets
	ActiveExperts float64 `json:"active_experts"` // experts with at least one route, mean over sets
	FLOPs         float64 `json:"flops"`          // per forward, mean over sets
	Bytes         float64 `json:"bytes"`          // per forward, mean over sets
	TFLOPs        float64 `json:"tflops"`         // FLOPs / median
	GBs           float64 `json:"gbs"`            // Bytes / median
	PeakTFLOPs    float64 `json:"peak_tflops"`
	PeakGBs       float64 `json:"peak_gbs"`
	RooflineMs    float64 `json:"roofline_ms"`       // max(FLOPs/peak, Bytes/bandwidth)
	Bound         string  `json:"bound"`             // "compute" or "memory"
	RooflineFrac  float64 `json:"roofline_fraction"` // roofline / median
	ErrorWord     string  `json:"error_word"`

	// KernelTimes (--kernels) is each kernel's median time over a second
	// pass of Iters forwards (with --backward: training steps, the
	// backward's kernels timed) with an event recorded between kernels; a
	// kernel's time includes the launch gap before it.
	KernelTimes []kernelTime `json:"kernel_times,omitempty"`
	// Phases (--phases) is each kernel that ran, in launch order, with its
	// median start after the first kernel's start and its median duration
	// (first block's start to last warp's end, from the kernels' own
	// %globaltimer records: runtime.Layer.PhaseTimes, or BackwardPhaseTimes
	// with --backward, the backward's kernels only) over a further pass of
	// Iters forwards (with --backward: training steps), each waited for;
	// PhaseSpanMs is the median of the first start to the last end.
	// MedianMs then times the instrumented kernels.
	Phases      []phaseTime `json:"phases,omitempty"`
	PhaseSpanMs float64     `json:"phase_span_ms,omitempty"`
}

// phaseTime is one kernel's place in the forward, or with --backward in
// the backward (--phases), in ms.
type phaseTime struct {
	Name    string  `json:"name"`
	StartMs float64 `json:"start_ms"` // median start after the first kernel's start
	Ms      float64 `json:"ms"`       // median duration
}

// kernelTime is one kernel's share of the forward.
type kernelTime struct {
	Name     string  `json:"name"`
	MedianMs float64 `json:"median_ms"`
	Fraction float64 `json:"fraction"` // of the sum of the kernels' medians
}

// benchCost is the work of one forward on one input set.
type benchCost struct {
	routes, active int
	flops, bytes   float64
}

// forwardCost counts the GEMM FLOPs and the compulsory bytes of one forward
// of l on T tokens with the given routing: each valid route runs FC1 (2I x H)
// and FC2 (H x I), 2 FLOPs per multiply-add; the shared experts run on every
// token. Bytes: the weights (and biases) of every expert with at least one
// route and the shared weights, read once; x and y (bf16); the routing
// input (ids i32 + weights f32 per slot, or map u8 + probs f32 per expert);
// with schedule.Layer.SaveFC1 the saved FC1 output (f32 [routes, 2I]) written.
func forwardCost(l schedule.Layer, T int, r schedule.Routing) benchCost {
	H, I, E, K, Is := float64(l.Hidden), float64(l.Intermediate), l.Experts, l.TopK, float64(l.SharedWidth())
	used := make([]bool, E)
	var c benchCost
	if l.Routing == schedule.RoutingMap {
		for i, m := range r.Map {
			if m {
				c.routes++
				used[i%E] = true
			}
		}
	} else {
		for _, id := range r.IDs {
			if id >= 0 && int(id) < E {
				c.routes++
				used[id] = true
			}
		}
	}
	for _, u := range used {
		if u {
			c.active++
		}
	}
	c.flops = float64(c.routes)*(2*I*H+H*I)*2 + float64(T)*(2*Is*H+H*Is)*2
	elem := 2.0 // bytes per routed weight: bf16, or e4m3 and a ue8m0 scale per 32
	if l.Precision == schedule.MXFP8 {
		elem = 1 + 1.0/32
	}
	expert := (2*I*H + H*I) * elem
	if l.Biases {
		expert += (2*I + H) * 4
	}
	c.bytes = float64(c.active)*expert + (2*Is*H+H*Is)*2 + 2*float64(T)*H*2
	if l.SaveFC1 {
		c.bytes += float64(c.routes) * 2 * I * 4 // the saved FC1 output, written for the backward
	}
	if l.SharedGate {
		c.bytes += H * 2
	}
	if l.Routing == schedule.RoutingMap {
		c.bytes += float64(T*E) * 5
	} else {
		c.bytes += float64(T*K) * 8
	}
	return c
}

// benchSets returns how many input sets to rotate among: when the data one
// forward touches (perSet bytes) fits in the L2, enough sets that the
// rotation covers twice the L2 (so a set is evicted before it comes back),
// at most 16; otherwise 2 (different x and routing per iteration).
func benchSets(perSet float64, l2Bytes int) int {
	if l2Bytes <= 0 || perSet > float64(l2Bytes) {
		return 2
	}
	n := int(math.Ceil(2*float64(l2Bytes)/perSet)) + 1
	return min(max(n, 2), 16)
}

// rooflineTime returns max(flops/peak, bytes/bandwidth) in seconds and which
// term bounds it.
func rooflineTime(flops, bytes, peakTFLOPs, peakGBs float64) (float64, string) {
	tc, tm := flops/(peakTFLOPs*1e12), bytes/(peakGBs*1e9)
	if tc >= tm {
		return tc, "compute"
	}
	return tm, "memory"
}

// percentile returns the q-quantile (0..1) of sorted v, nearest rank.
func percentile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// median returns the median of sorted v (mean of the middle two for even n).
func median(sorted []float64) float64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// benchWeights uploads random weights for l (schedule.WeightGen: bf16 scaled
// by 1/sqrt(fan-in), generated one expert at a time on the host, so large
// models need no whole-layer host copy; the same generator as `mokc run`) and
// binds them in b. free releases them.
func benchWeights(ctx *driver.Context, l schedule.Layer, seed uint64, b runtime.Bindings) (free func(), err error) {
	g, err := schedule.NewWeightGen(l, seed)
	if err != nil {
		return nil, err
	}
	w, err := runtime.UploadWeightSource(ctx, l, g)
	if err != nil {
		return nil, err
	}
	w.SetIn(b)
	return func() { w.Free() }, nil
}

func benchAction(c *cli.Context) error {
	if c.NArg() > 0 {
		return fmt.Errorf("bench: unexpected argument %q", c.Args().First())
	}
	T, iters, warmup := c.Int("tokens"), c.Int("iters"), c.Int("warmup")
	switch {
	case T <= 0:
		return fmt.Errorf("bench: --tokens %d: must be > 0 (a benchmark times tokens; `mokc run --tokens 0` checks the empty batch)", T)
	case iters <= 0:
		return fmt.Errorf("bench: --iters %d: must be > 0", iters)
	case warmup < 0:
		return fmt.Errorf("bench: --warmup %d: must be >= 0", warmup)
	case !(c.Float64("peak-tflops") > 0) || !(c.Float64("peak-gbs") > 0):
		return fmt.Errorf("bench: --peak-tflops and --peak-gbs must be > 0")
	case c.Int("sets") < 0:
		return fmt.Errorf("bench: --sets %d: must be >= 0", c.Int("sets"))
	}
	waitLimit, err := waitLimitFlagValue(c)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	l, s, err := gpuLayer(c)
	if err == nil {
		err = checkTokens(l, s, T)
	}
	if err == nil {
		err = checkProgram(l, c.Bool("backward"))
	}
	if err == nil && c.Bool("phases") {
		s.PhaseTimes = true
	}
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	ctx, err := openDevice("bench", c.Int("device"))
	if err != nil {
		return err
	}
	defer ctx.Close()
	seed := c.Uint64("seed")
	dev := ctx.Device()
	rep := benchReport{Model: l.Name, Target: s.Target.String(), Device: fmt.Sprintf("%s (compute capability %d.%d)", dev.Name, dev.ComputeMajor, dev.ComputeMinor),
		SMs: dev.SMCount, L2Bytes: dev.L2Bytes, Tokens: T, Routing: l.Routing.String(), Seed: seed, Iters: iters, Warmup: warmup,
		PeakTFLOPs: c.Float64("peak-tflops"), PeakGBs: c.Float64("peak-gbs"), Precision: l.Precision.String()}
	if l.Precision == schedule.MXFP8 && !c.IsSet("peak-tflops") {
		rep.PeakTFLOPs *= 2 // the routed GEMMs run on FP8 tensor cores (twice the dense BF16 rate)
	}
	logf := func(format string, a ...any) {
		if !c.Bool("json") {
			fmt.Fprintf(c.App.ErrWriter, format+"\n", a...)
		}
	}

	t0 := time.Now()
	ly, err := runtime.NewLayer(ctx, l, s)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer ly.Close()
	if err := setWaitLimit(ly, waitLimit); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if c.Bool("plain-launch") {
		ly.LaunchPlainly()
		rep.PlainLaunch = true
	}
	rep.CompileSec = time.Since(t0).Seconds()
	rep.Kernels = len(ly.Kernels())
	rep.Schedule = s.String()
	if g := ly.ClusterGrids(); len(g) > 0 {
		rep.ClusterGrids = g
		logf("kernels in clusters of %d, launched with these blocks (all clusters resident): %v", s.Cluster, g)
	}
	if g := ly.PerSMGrids(); len(g) > 0 {
		rep.PerSMGrids = g
		logf("kernels built for %d blocks per SM, launched with these blocks (as many per SM as fit): %v", s.BlocksPerSM, g)
	}

	// One set's inputs decide how many sets to rotate among.
	type set struct {
		in      *runtime.DeviceTensors
		args    runtime.Bindings
		bwd     runtime.Bindings // --backward: Backward's bindings
		freeBwd func()
		cost    benchCost
	}
	backward := c.Bool("backward")
	var mainGrads *runtime.DeviceTensors // --backward: zeroed, shared by every set
	rep.Backward, rep.GroupM, rep.SaveFC1 = backward, s.GroupM, l.SaveFC1
	if l.Precision == schedule.MXFP8 {
		rep.MXGemm = s.MXGemm.String()
	}
	if backward {
		rep.MainGrad = l.MainGrad.String()
		rep.WGrad = s.WGrad.String()
		if mainGrads, err = runtime.AllocMainGrads(ctx, l); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	defer mainGrads.Free()
	base := runtime.Bindings{}
	freeW, err := benchWeights(ctx, l, seed, base)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer freeW()
	stream, err := ctx.NewStream()
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer stream.Destroy()
	newSet := func(i int, weights runtime.Bindings) (set, error) {
		x := schedule.RandomInput(T, l.Hidden, seed+100+uint64(i))
		r, err := schedule.GenerateRouting(l, x, seed+200+uint64(i))
		if err != nil {
			return set{}, err
		}
		in, err := runtime.UploadInputs(ctx, l, x, r)
		if err != nil {
			return set{}, err
		}
		args := runtime.Bindings{}
		maps.Copy(args, weights)
		in.SetIn(args)
		st := set{in: in, args: args, cost: forwardCost(l, T, r)}
		if backward {
			dy := schedule.RandomInput(T, l.Hidden, seed+300+uint64(i))
			if st.bwd, st.freeBwd, err = backwardBindings(ctx, ly, T, dy, args, mainGrads.Tensors); err != nil {
				in.Free()
				return set{}, err
			}
			st.cost = backwardCost(l, T, st.cost)
		}
		return st, nil
	}
	var sets []set
	defer func() {
		for _, st := range sets {
			st.in.Free()
			if st.freeBwd != nil {
				st.freeBwd()
			}
		}
	}()
	first, err := newSet(0, base)
	if err != nil {
		return fmt.Errorf("bench: inputs: %w", err)
	}
	sets = append(sets, first)
	n := c.Int("sets")
	if n == 0 {
		n = benchSets(first.cost.bytes, dev.L2Bytes)
	}
	// When a set fits in L2, each set gets its own copy of the weights too.
	ownWeights := first.cost.bytes <= float64(dev.L2Bytes)
	for i := 1; i < n; i++ {
		weights := base
		if ownWeights {
			weights = runtime.Bindings{}
			freeI, err := benchWeights(ctx, l, seed+1000*uint64(i), weights)
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			defer freeI()
		}
		st, err := newSet(i, weights)
		if err != nil {
			return fmt.Errorf("bench: inputs: %w", err)
		}
		sets = append(sets, st)
	}
	rep.Sets = len(sets)
	logf("mokc bench: %s on %s, T=%d: %d kernels, %d input sets, %d warm-up + %d timed iterations", l.Name, s.Target, T, rep.Kernels, len(sets), warmup, iters)

	step := func(st set) error {
		if err := ly.Forward(stream, st.args); err != nil || !backward {
			return err
		}
		return ly.Backward(stream, st.bwd)
	}
	for i := 0; i < warmup; i++ {
		if err := step(sets[i%len(sets)]); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	if err := ly.CheckErrors(stream); err != nil {
		return fmt.Errorf("bench: warm-up: %w", err)
	}
	rep.Workspace = ly.WorkspaceBytes()

	start, end := make([]*driver.Event, iters), make([]*driver.Event, iters)
	defer func() {
		for _, e := range append(start, end...) {
			if e != nil {
				e.Destroy()
			}
		}
	}()
	for i := range start {
		if start[i], err = ctx.NewEvent(); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if end[i], err = ctx.NewEvent(); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
	}
	var flops, bytes, routes, active float64
	for i := 0; i < iters; i++ {
		st := sets[i%len(sets)]
		if err := start[i].Record(stream); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if err := step(st); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		if err := end[i].Record(stream); err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		flops += st.cost.flops
		bytes += st.cost.bytes
		routes += float64(st.cost.routes)
		active += float64(st.cost.active)
	}
	rep.ErrorWord = "ok"
	if err := ly.CheckErrors(stream); err != nil {
		if !routingOnly(err) {
			return fmt.Errorf("bench: %w", err)
		}
		rep.ErrorWord = err.Error()
	}
	ms := make([]float64, iters)
	for i := range ms {
		v, err := driver.ElapsedMs(start[i], end[i])
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		ms[i] = float64(v)
	}
	slices.Sort(ms)
	rep.MedianMs, rep.MinMs, rep.P90Ms = median(ms), ms[0], percentile(ms, 0.9)
	for _, v := range ms {
		rep.MeanMs += v / float64(iters)
	}
	k := float64(iters)
	rep.FLOPs, rep.Bytes, rep.Routes, rep.ActiveExperts = flops/k, bytes/k, routes/k, active/k
	sec := rep.MedianMs / 1e3
	rep.TFLOPs = rep.FLOPs / sec / 1e12
	rep.GBs = rep.Bytes / sec / 1e9
	roof, bound := rooflineTime(rep.FLOPs, rep.Bytes, rep.PeakTFLOPs, rep.PeakGBs)
	rep.RooflineMs, rep.Bound = roof*1e3, bound
	rep.RooflineFrac = roof / sec
	if c.Bool("kernels") {
		names, run := ly.Kernels(), func(i int, marks []*driver.Event) error {
			return ly.ForwardMarked(stream, sets[i%len(sets)].args, marks)
		}
		if backward {
			if names, err = ly.BackwardKernels(); err != nil {
				return fmt.Errorf("bench: --kernels: %w", err)
			}
			run = func(i int, marks []*driver.Event) error {
				st := sets[i%len(sets)]
				if err := ly.Forward(stream, st.args); err != nil {
					return err
				}
				return ly.BackwardMarked(stream, st.bwd, marks)
			}
		}
		if rep.KernelTimes, err = benchKernels(ctx, ly, stream, names, run, iters); err != nil {
			return fmt.Errorf("bench: --kernels: %w", err)
		}
	}
	if c.Bool("phases") {
		rec := phaseRecords{reset: ly.ResetPhaseTimes, read: ly.PhaseTimes}
		if backward {
			rec = phaseRecords{reset: ly.ResetBackwardPhaseTimes, read: ly.BackwardPhaseTimes}
		}
		if rep.Phases, rep.PhaseSpanMs, err = benchPhases(rec, stream, iters, func(i int) error { return step(sets[i%len(sets)]) }); err != nil {
			return fmt.Errorf("bench: --phases: %w", err)
		}
	}
	if err := writeBenchReport(c.App.Writer, rep, c.Bool("json")); err != nil {
		return err
	}
	if rep.ErrorWord != "ok" {
		return fmt.Errorf("bench: %s", rep.ErrorWord)
	}
	return nil
}

// benchKernels calls run(i, marks) for i < iters (a Layer.ForwardMarked or
// BackwardMarked over kernels names, with len(names)+1 events) and returns
// each kernel's median time.
func benchKernels(ctx *driver.Context, ly *runtime.Layer, stream *driver.Stream, names []string, run func(int, []*driver.Event) error, iters int) ([]kernelTime, error) {
	marks := make([][]*driver.Event, iters)
	defer func() {
		for _, m := range marks {
			for _, e := range m {
				if e != nil {
					e.Destroy()
				}
			}
		}
	}()
	for i := range marks {
		marks[i] = make([]*driver.Event, len(names)+1)
		for j := range marks[i] {
			e, err := ctx.NewEvent()
			if err != nil {
				return nil, err
			}
			marks[i][j] = e
		}
	}
	for i := 0; i < iters; i++ {
		if err := run(i, marks[i]); err != nil {
			return nil, err
		}
	}
	if err := ly.CheckErrors(stream); err != nil && !routingOnly(err) {
		return nil, err
	}
	out := make([]kernelTime, len(names))
	var total float64
	for j, name := range names {
		ms := make([]float64, iters)
		for i := range ms {
			v, err := driver.ElapsedMs(marks[i][j], marks[i][j+1])
			if err != nil {
				return nil, err
			}
			ms[i] = float64(v)
		}
		slices.Sort(ms)
		out[j] = kernelTime{Name: name, MedianMs: median(ms)}
		total += out[j].MedianMs
	}
	for j := range out {
		if total > 0 {
			out[j].Fraction = out[j].MedianMs / total
		}
	}
	return out, nil
}

// phaseLead is the number of unrecorded passes queued before each
// recorded one (benchPhases).
const phaseLead = 2

// phaseRecords are the phase-time records benchPhases resets and reads:
// the forward's (runtime.Layer.ResetPhaseTimes, PhaseTimes) or the
// backward's (ResetBackwardPhaseTimes, BackwardPhaseTimes).
type phaseRecords struct {
	reset func(*driver.Stream) error
	read  func(*driver.Stream) ([]runtime.PhaseTime, error)
}

// benchPhases runs forward(i) for i < iters (a forward, or a forward and
// its backward), each after a reset of the records rec, and returns each
// recorded kernel's median start (after the first kernel's start) and
// duration and the median span of those kernels (first start to last
// end), in ms, in launch order of the kernels that ran. Each recorded
// pass is queued behind phaseLead unrecorded ones, so that
// the host has launched its kernels before the device reaches them, as in
// back-to-back runs: on an idle device the records would show the host's
// launch pace between kernels shorter than a launch (docs/perf.md,
// dispatch v2).
func benchPhases(rec phaseRecords, stream *driver.Stream, iters int, forward func(int) error) ([]phaseTime, float64, error) {
	starts, durs := map[string][]float64{}, map[string][]float64{}
	var order []string
	spans := make([]float64, 0, iters)
	for i := 0; i < iters; i++ {
		for range phaseLead {
			if err := forward(i); err != nil {
				return nil, 0, err
			}
		}
		if err := rec.reset(stream); err != nil {
			return nil, 0, err
		}
		if err := forward(i); err != nil {
			return nil, 0, err
		}
		pts, err := rec.read(stream)
		if err != nil {
			return nil, 0, err
		}
		if len(pts) == 0 {
			return nil, 0, fmt.Errorf("no kernel recorded its times")
		}
		t0, t1 := pts[0].Start, pts[0].End
		for _, p := range pts {
			t0, t1 = min(t0, p.Start), max(t1, p.End)
		}
		for _, p := range pts {
			if _, ok := starts[p.Kernel]; !ok {
				order = append(order, p.Kernel)
			}
			starts[p.Kernel] = append(starts[p.Kernel], float64(p.Start-t0)/1e6)
			durs[p.Kernel] = append(durs[p.Kernel], float64(p.End-p.Start)/1e6)
		}
		spans = append(spans, float64(t1-t0)/1e6)
	}
	out := make([]phaseTime, len(order))
	for j, name := range order {
		slices.Sort(starts[name])
		slices.Sort(durs[name])
		out[j] = phaseTime{Name: name, StartMs: median(starts[name]), Ms: median(durs[name])}
	}
	slices.Sort(spans)
	return out, median(spans), nil
}

func writeBenchReport(w io.Writer, rep benchReport, asJSON bool) error {
	if asJSON {
		return writeJSONLine(w, rep)
	}
	row := func(k string, format string, a ...any) {
		fmt.Fprintf(w, "  %-20s "+format+"\n", append([]any{k}, a...)...)
	}
	pass := "forward"
	if rep.Backward {
		pass = "forward + backward, " + rep.MainGrad + " main grads"
		if rep.SaveFC1 {
			pass += ", FC1 output saved"
		}
	}
	fmt.Fprintf(w, "mokc bench %s %s T=%d routing=%s (%s)\n", rep.Model, rep.Target, rep.Tokens, rep.Routing, pass)
	row("device", "%s, %d SMs, L2 %d MiB", rep.Device, rep.SMs, rep.L2Bytes>>20)
	row("schedule", "%s", rep.Schedule)
	row("iterations", "%d timed after %d warm-up, %d input sets", rep.Iters, rep.Warmup, rep.Sets)
	row("time", "median %.4f ms  (min %.4f, mean %.4f, p90 %.4f)", rep.MedianMs, rep.MinMs, rep.MeanMs, rep.P90Ms)
	row("routes", "%.0f (%.1f active experts)", rep.Routes, rep.ActiveExperts)
	row("work", "%.4g GFLOP, %.4g MB", rep.FLOPs/1e9, rep.Bytes/1e6)
	row("throughput", "%.1f TFLOP/s, %.0f GB/s", rep.TFLOPs, rep.GBs)
	row("roofline", "%.4f ms (%s-bound at %.0f TFLOP/s, %.0f GB/s): %.1f%% of it", rep.RooflineMs, rep.Bound, rep.PeakTFLOPs, rep.PeakGBs, 100*rep.RooflineFrac)
	row("workspace", "%d MiB", rep.Workspace>>20)
	row("compile + load", "%.2f s", rep.CompileSec)
	row("error word", "%s", rep.ErrorWord)
	for _, k := range rep.KernelTimes {
		row("  "+k.Name, "%.4f ms  %4.1f%%", k.MedianMs, 100*k.Fraction)
	}
	if len(rep.Phases) > 0 {
		row("phases", "%.4f ms from the first kernel's start to the last kernel's end (device timer)", rep.PhaseSpanMs)
	}
	for _, p := range rep.Phases {
		row("  "+p.Name, "starts +%.4f ms, runs %.4f ms", p.StartMs, p.Ms)
	}
	return nil
}

// routingOnly reports whether err, from runtime.Layer.CheckErrors, is the
// routing error word alone: run and bench report it and go on (the
// kernels treated the bad routes as documented), while a device fault or
// a co-resident kernel's timeout (runtime.WaitTimeoutError: outputs not
// valid, timings not either) ends them.
func routingOnly(err error) bool {
	var re *runtime.RoutingError
	var we *runtime.WaitTimeoutError
	return errors.As(err, &re) && !errors.As(err, &we)
}
