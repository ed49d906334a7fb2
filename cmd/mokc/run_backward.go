package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/runtime"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// backwardReport is one (model, target, T) of `mokc run --backward`.
type backwardReport struct {
	runIdent
	Tokens  int    `json:"tokens"`
	Routing string `json:"routing"`
	Seed    uint64 `json:"seed"`
	SaveFC1 bool   `json:"save_fc1,omitempty"` // the forward kept FC1's output for the backward (schedule.Layer.SaveFC1)
	Rows    int    `json:"checked_tokens"`
	// Cols is the number of intermediate columns j at which the sampled
	// experts' weight gradients are checked (schedule.SampleIntermediate).
	Cols int `json:"checked_intermediate_columns"`
	// Checks maps each checked gradient ("dx", "dw" or "dprobs",
	// "fc1_grad[e]", "shared_fc2_grad", ...) to its comparison.
	Checks        []gradCheck `json:"checks"`
	SharedChecked bool        `json:"shared_checked"`
	Runs          int         `json:"runs"`
	Identical     int         `json:"identical_runs"`
	// GradsSHA256 is the hex SHA-256 of the first run's outputs as the
	// device wrote them (every output in full, the sampled experts' main
	// grads, the shared main grads; in backwardRun's order): two binaries or
	// lowerings that compute the same bits give the same digest at the same
	// --seed and --routing.
	GradsSHA256 string   `json:"grads_sha256"`
	ErrorWord   string   `json:"error_word"`
	Pass        bool     `json:"pass"`
	Failures    []string `json:"failures,omitempty"`
}

// gradCheck compares one gradient with the float64 reference.
type gradCheck struct {
	Name   string  `json:"name"`
	RelL2  float64 `json:"rel_l2"`
	Cosine float64 `json:"cosine"`
	NaN    int     `json:"nan"`
}

// Tolerances of `mokc run --backward` (issue text: gradient cosine >= 0.9999
// and rel L2 <= 1e-2 against schedule.Backward).
const (
	backwardMaxRelL2  = 1e-2
	backwardMinCosine = 0.9999
	// sharedCheckMax bounds T*S*I_s*H for checking the shared experts' weight
	// gradients, which need every token through the host reference.
	sharedCheckMax = 1 << 34
)

// compareGrad is the relative L2 error and cosine of got against want.
func compareGrad(name string, got, want []float64) gradCheck {
	c := gradCheck{Name: name}
	var num, den, gg, gw float64
	for i, v := range want {
		g := got[i]
		if math.IsNaN(g) || math.IsInf(g, 0) {
			c.NaN++
			continue
		}
		num += (g - v) * (g - v)
		den += v * v
		gg += g * g
		gw += g * v
	}
	c.RelL2 = math.Sqrt(num / math.Max(den, 1e-300))
	c.Cosine = 1
	if den > 0 || gg > 0 {
		c.Cosine = gw / math.Sqrt(math.Max(den*gg, 1e-300))
	}
	return c
}

// sampledExperts picks the experts whose weight gradients are checked: the
// one with the most routes and, when another has routes, the one after it
// in the seed's order (deterministic).
func sampledExperts(ids []int32, E int, seed uint64) []int {
	counts := make([]int, E)
	for _, id := range ids {
		if id >= 0 {
			counts[id]++
		}
	}
	top := 0
	for e, n := range counts {
		if n > counts[top] {
			top = e
		}
	}
	out := []int{top}
	for i := 1; i < E; i++ {
		if e := (top + int(seed%uint64(E)) + i) % E; counts[e] > 0 && e != top {
			return append(out, e)
		}
	}
	return out
}

// runBackwardAll is `mokc run --backward`: for each model, target and T, a
// forward then --repeat backwards from zeroed main grads on one set of
// inputs, each compared bitwise with the first; the first checked against
// schedule's float64 gradients on the sampled tokens (dx and the
// routing-weight gradient), the weight gradients of two experts (the
// busiest and one more) at the intermediate columns of
// schedule.SampleIntermediate (2 per 64, all when I <= 256) and, when
// T*S*I_s*H <= 2^34, the shared experts'.
func runBackwardAll(cfg runConfig, ctx *driver.Context, out, logw io.Writer) error {
	layers, err := cfg.layers()
	if err != nil {
		return err
	}
	var failed []string
	for _, l := range layers {
		f, err := runBackwardLayer(cfg, ctx, l, out, logw)
		if err != nil {
			return err
		}
		failed = append(failed, f...)
	}
	if len(failed) > 0 {
		return fmt.Errorf("run --backward: %d checks failed: %v", len(failed), failed)
	}
	return nil
}

// runBackwardLayer runs and reports every (target, T) of layer l and
// returns the failed ones. The weights and main grads depend on neither
// the target nor T (backwardRun zeroes the main grads before each run):
// one upload and one allocation per layer, one reference per T.
func runBackwardLayer(cfg runConfig, ctx *driver.Context, l schedule.Layer, out, logw io.Writer) ([]string, error) {
	gen, err := schedule.NewWeightGen(l, cfg.seed)
	if err != nil {
		return nil, err
	}
	wts, err := runtime.UploadWeightSource(ctx, l, gen)
	if err != nil {
		return nil, fmt.Errorf("run --backward %s: %w", l.Name, err)
	}
	defer wts.Free()
	// Main grads: grouped tensors, or with per-expert storage one
	// allocation per expert behind the pointer tables.
	mainGrads, err := runtime.AllocMainGrads(ctx, l)
	if err != nil {
		return nil, fmt.Errorf("run --backward %s: %w", l.Name, err)
	}
	defer mainGrads.Free()
	var failed []string
	refs := map[int]*refFuture{}
	for _, tg := range cfg.targets {
		for _, T := range cfg.tokens {
			rep, err := runBackwardOne(cfg, ctx, l, tg, T, gen, wts, mainGrads, refs, logw)
			if err != nil {
				return nil, fmt.Errorf("run --backward %s %s T=%d: %w", l.Name, tg, T, err)
			}
			if err := writeBackwardReport(out, rep, cfg.json); err != nil {
				return nil, err
			}
			if !rep.Pass {
				failed = append(failed, fmt.Sprintf("%s %s T=%d", l.Name, tg, T))
			}
		}
	}
	return failed, nil
}

// runBackwardOne runs and checks one (layer, target, T) with the layer's
// weights wts (uploaded from gen) and main grads mainGrads (AllocMainGrads;
// each run zeroes them); refs holds the layer's host references
// by T, started by the first target that needs one and shared by the
// others.
func runBackwardOne(cfg runConfig, ctx *driver.Context, l schedule.Layer, tg target.Target, T int, gen *schedule.WeightGen, wts, mainGrads *runtime.DeviceTensors, refs map[int]*refFuture, logw io.Writer) (backwardReport, error) {
	rep := backwardReport{runIdent: newRunIdent(l, tg, ""), Tokens: T, Routing: l.Routing.String(), Seed: cfg.seed,
		Runs: cfg.repeat, SaveFC1: l.SaveFC1}
	s, err := cfg.schedule(l, tg)
	if err != nil {
		return rep, err
	}
	rep.Schedule = s.String()
	ly, err := runtime.NewLayer(ctx, l, s)
	if err != nil {
		return rep, err
	}
	defer ly.Close()
	if err := setWaitLimit(ly, cfg.waitLimit); err != nil {
		return rep, err
	}
	sx, sr := inputSeeds(cfg.seed, T)
	x := runtime.FromBF16(runtime.ToBF16(schedule.RandomInput(T, l.Hidden, sx)))
	r, err := schedule.GenerateRouting(l, x, sr)
	if err != nil {
		return rep, err
	}
	in, err := runtime.UploadInputs(ctx, l, x, r)
	if err != nil {
		return rep, err
	}
	defer in.Free()
	args := runtime.Bindings{}
	wts.SetIn(args)
	in.SetIn(args)
	if err := ly.Forward(nil, args); err != nil { // a training step's forward first
		return rep, err
	}
	dy := runtime.FromBF16(runtime.ToBF16(schedule.RandomInput(T, l.Hidden, sr+7)))
	b, free, err := backwardBindings(ctx, ly, T, dy, args, mainGrads.Tensors)
	if err != nil {
		return rep, err
	}
	defer free()

	ids := r.IDs
	if l.Routing == schedule.RoutingMap {
		if ids, _, err = schedule.FixedWidth(l, r.Map, r.Probs); err != nil {
			return rep, err
		}
	}
	rows := sampleRows(T, cfg.sample, cfg.seed)
	experts := sampledExperts(ids, l.Experts, cfg.seed)
	cols := schedule.SampleIntermediate(l.Intermediate, cfg.seed)
	rep.Rows, rep.Cols = len(rows), len(cols)
	rep.SharedChecked = l.SharedExperts > 0 && int64(T)*int64(l.SharedWidth())*int64(l.Hidden) <= sharedCheckMax
	f, ok := refs[T]
	if !ok {
		fmt.Fprintf(logw, "mokc run --backward: %s T=%d: reference on %d tokens, experts %v on %d of %d intermediate columns, shared %v\n",
			l.Name, T, len(rows), experts, len(cols), l.Intermediate, rep.SharedChecked)
		f = &refFuture{done: make(chan struct{})}
		refs[T] = f
		go func() {
			f.res.g, f.res.err = gen.BackwardSample(x, r, dy, rows, experts, cols, rep.SharedChecked)
			close(f.done)
		}()
	}

	var first [sha256.Size]byte
	var got map[string][]float64
	var scratch []byte // the host copy of one output, reused
	for run := 0; run < cfg.repeat; run++ {
		res, h, word, err := backwardRun(ctx, ly, l, b, mainGrads, experts, run == 0, &scratch)
		if err != nil {
			return rep, err
		}
		rep.ErrorWord = word
		if run == 0 {
			first, got = h, res
			rep.GradsSHA256 = hex.EncodeToString(h[:])
		}
		if h == first {
			rep.Identical++
		}
	}
	<-f.done
	ref := f.res
	if ref.err != nil {
		return rep, ref.err
	}
	if rep.Checks, err = backwardChecks(l, got, ref.g, rows, ids, experts, rep.SharedChecked); err != nil {
		return rep, err
	}
	rep.Pass = rep.ErrorWord == "ok" && rep.Identical == rep.Runs
	if !rep.Pass {
		rep.Failures = append(rep.Failures, fmt.Sprintf("error word %s, %d of %d runs identical", rep.ErrorWord, rep.Identical, rep.Runs))
	}
	for _, c := range rep.Checks {
		if c.NaN > 0 || c.RelL2 > backwardMaxRelL2 || c.Cosine < backwardMinCosine {
			rep.Pass = false
			rep.Failures = append(rep.Failures, fmt.Sprintf("%s: rel L2 %.3g, cosine %.6f, %d NaN/Inf", c.Name, c.RelL2, c.Cosine, c.NaN))
		}
	}
	return rep, nil
}

// refResult is the host reference's result.
type refResult struct {
	g   schedule.SampledGrads
	err error
}

// refFuture is a host reference being computed: res is set when done is
// closed.
type refFuture struct {
	done chan struct{}
	res  refResult
}

// backwardRun zeroes the main grads (mainGrads, bound in b), poisons the
// outputs, runs Backward, waits, and returns a hash of the bits of every
// output in full, the sampled experts' main grads of the routed weights
// and biases ("fc1_grad[e]", ...: slices of the grouped tensors, or with
// per-expert storage the allocations behind fc1_grad_table and
// fc2_grad_table) and the shared main grads in full (copied as bytes into
// *scratch, one at a time, and hashed with SHA-256 in that order); with
// decode, also those values by name, widened to float64; and the error
// word.
func backwardRun(ctx *driver.Context, ly *runtime.Layer, l schedule.Layer, b runtime.Bindings, mainGrads *runtime.DeviceTensors, experts []int, decode bool, scratch *[]byte) (map[string][]float64, [sha256.Size]byte, string, error) {
	var none [sha256.Size]byte
	specs, err := ly.BackwardBuffers()
	if err != nil {
		return nil, none, "", err
	}
	for _, t := range mainGrads.MainGradTensors() {
		if err := ctx.Memset(t.Ptr, 0, t.Len()*int(t.DType.Size())); err != nil {
			return nil, none, "", err
		}
	}
	for _, s := range specs {
		if s.Kind == launch.BufOutput {
			if err := runtime.Poison(ctx, nil, b[s.Name]); err != nil {
				return nil, none, "", err
			}
		}
	}
	if err := ly.Backward(nil, b); err != nil {
		return nil, none, "", err
	}
	word := "ok"
	if err := ly.CheckErrors(nil); err != nil {
		if !routingOnly(err) {
			return nil, none, "", err
		}
		word = err.Error()
	}
	h := sha256.New()
	var full map[string][]float64
	if decode {
		full = map[string][]float64{}
	}
	for _, s := range specs {
		if s.Kind == launch.BufInput {
			continue
		}
		parts := map[string]runtime.Tensor{s.Name: b[s.Name]}
		if grad, ok := perExpertTable[s.Name]; ok {
			// A pointer table: the sampled experts' allocations behind it.
			parts = map[string]runtime.Tensor{}
			for _, e := range experts {
				parts[fmt.Sprintf("%s[%d]", grad, e)] = mainGrads.Experts[s.Name][e]
			}
		} else if perExpert[s.Name] {
			// Only the sampled experts' slices: a whole main grad can be
			// tens of GB.
			parts = map[string]runtime.Tensor{}
			t := b[s.Name]
			n := t.Len() / l.Experts
			size := int(s.DType.Size())
			for _, e := range experts {
				parts[fmt.Sprintf("%s[%d]", s.Name, e)] = runtime.NewTensor(t.Ptr.Offset(e*n*size), n*size, s.DType, n)
			}
		}
		for _, name := range slices.Sorted(maps.Keys(parts)) { // the hash must not depend on map order
			raw, err := runtime.ReadBytes(ctx, parts[name], *scratch)
			if err != nil {
				return nil, none, "", err
			}
			*scratch = raw
			h.Write(raw)
			if decode {
				if full[name], err = runtime.DecodeFloats(parts[name].DType, raw); err != nil {
					return nil, none, "", err
				}
			}
		}
	}
	var sum [sha256.Size]byte
	copy(sum[:], h.Sum(nil))
	return full, sum, word, nil
}

// perExpert names the main grads stored per routed expert ([E, ...]).
var perExpert = map[string]bool{moe.BufFC1Grad: true, moe.BufFC2Grad: true, moe.BufFC1BiasGrad: true, moe.BufFC2BiasGrad: true}

// perExpertTable maps the pointer tables of per-expert storage's main
// grads to the main grads they list (whose sampled experts are checked
// under that name: "fc1_grad[e]").
var perExpertTable = map[string]string{moe.BufFC1GradTable: moe.BufFC1Grad, moe.BufFC2GradTable: moe.BufFC2Grad}

// backwardChecks compares the GPU's gradients (full buffers by name) with
// the sampled reference: the sampled experts' fc1_grad[e] and fc2_grad[e]
// at the reference's intermediate columns (ref.Cols, picked by
// schedule.PickIntermediate). An expert's buffer of the wrong size is an
// error.
func backwardChecks(l schedule.Layer, got map[string][]float64, ref schedule.SampledGrads, rows []int, ids []int32, experts []int, shared bool) ([]gradCheck, error) {
	H, E, K := l.Hidden, l.Experts, l.TopK
	pick := func(v []float64, rows []int, width int) []float64 {
		out := make([]float64, 0, len(rows)*width)
		for _, t := range rows {
			out = append(out, v[t*width:(t+1)*width]...)
		}
		return out
	}
	checks := []gradCheck{compareGrad("dx", pick(got[moe.BufDX], rows, H), ref.DX)}
	if l.Routing == schedule.RoutingMap {
		dense := make([]float64, len(rows)*E)
		for i, t := range rows {
			for k := 0; k < K; k++ {
				if id := ids[t*K+k]; id >= 0 {
					dense[i*E+int(id)] = ref.DWeights[i*K+k]
				}
			}
		}
		checks = append(checks, compareGrad("dprobs", pick(got[moe.BufDProbs], rows, E), dense))
	} else {
		checks = append(checks, compareGrad("dw", pick(got[moe.BufDW], rows, K), ref.DWeights))
	}
	for _, e := range experts {
		g := ref.Experts[e]
		n1, n2 := fmt.Sprintf("%s[%d]", moe.BufFC1Grad, e), fmt.Sprintf("%s[%d]", moe.BufFC2Grad, e)
		fc1, fc2, err := schedule.PickIntermediate(l, ref.Cols, got[n1], got[n2])
		if err != nil {
			return nil, fmt.Errorf("expert %d: %w", e, err)
		}
		checks = append(checks, compareGrad(n1, fc1, f64s(g.FC1[0])), compareGrad(n2, fc2, f64s(g.FC2[0])))
		if !l.Biases {
			continue
		}
		// The bias gradients: FC1's at the same rows as FC1's, FC2's whole.
		b1, b2 := fmt.Sprintf("%s[%d]", moe.BufFC1BiasGrad, e), fmt.Sprintf("%s[%d]", moe.BufFC2BiasGrad, e)
		if len(got[b1]) != 2*l.Intermediate || len(got[b2]) != H {
			return nil, fmt.Errorf("expert %d: bias gradients of %d and %d values, want 2I = %d and H = %d", e, len(got[b1]), len(got[b2]), 2*l.Intermediate, H)
		}
		bias1 := pick(got[b1], schedule.FC1Rows(l, ref.Cols), 1)
		checks = append(checks, compareGrad(b1, bias1, f64s(g.FC1Bias[0])), compareGrad(b2, got[b2], f64s(g.FC2Bias[0])))
	}
	if shared && ref.Shared != nil {
		want := moe.MainGradBuffers(l, *ref.Shared)
		for _, name := range slices.Sorted(maps.Keys(want)) {
			checks = append(checks, compareGrad(name, got[name], want[name]))
		}
	}
	return checks, nil
}

// f64s widens float32 values.
func f64s(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// writeBackwardReport writes one report: a JSON line, or a line of text
// with the worst check.
func writeBackwardReport(w io.Writer, rep backwardReport, asJSON bool) error {
	if asJSON {
		return writeJSONLine(w, rep)
	}
	worst := gradCheck{Cosine: 1}
	for _, c := range rep.Checks {
		if c.RelL2 > worst.RelL2 {
			worst = c
		}
	}
	verdict := "PASS"
	if !rep.Pass {
		verdict = "FAIL " + fmt.Sprint(rep.Failures)
	}
	_, err := fmt.Fprintf(w, "%-18s %-7s T=%-6d backward: %d gradients checked on %d tokens, worst %s rel L2 %.3g cosine %.6f; %d/%d runs identical; error word %s; %s\n",
		rep.Model, rep.Target, rep.Tokens, len(rep.Checks), rep.Rows, worst.Name, worst.RelL2, worst.Cosine, rep.Identical, rep.Runs, rep.ErrorWord, verdict)
	return err
}
