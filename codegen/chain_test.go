package codegen

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestChainFC: under schedule.ChainFC the forward of every bf16 preset on
// sm_90a launches moe_fc1_fc2 instead of moe_fc1 and moe_fc2 at the token
// counts where both run their base kernels (moe_fc1_fc2_<variant> where
// both run the tile variant's, moe_fc1_fc2_gathered where FC1 gathers its
// rows at decode sizes), and exactly one FC1 and one FC2 kernel at every
// T; the chained kernel's parameters bind the first
// GEMM's roles to fc1's buffers and the g2_ ones to fc2's, tile_done to
// the tile list's counters, which every kernel writing that list takes;
// without the chain no program has counters. The backward is unchanged.
func TestChainFC(t *testing.T) {
	names := schedule.Presets()
	if testing.Short() {
		names = []string{"qwen3-30b-a3b", "gpt-oss-20b", "deepseek-v2-lite"}
	}
	Ts := []int64{0, 1, 4, 5, 16, 64, 129, 256, 300, 1100, 2000, 4096, 16384}
	for _, prec := range []schedule.Precision{schedule.BF16, schedule.MXFP8} {
		for _, name := range names {
			if prec == schedule.MXFP8 && !slices.Contains([]string{"qwen3-30b-a3b", "gpt-oss-20b", "olmoe-1b-7b", "deepseek-v2-lite", "qwen2-57b-a14b"}, name) {
				continue
			}
			l := testlayer.Preset(t, name)
			l.Precision = prec
			s := testlayer.DefaultSchedule(t, l, target.SM90a)
			s.Items = schedule.ItemsFixed         // the chain's walk, in both
			s.FC2Large = schedule.LargeRowsTile{} // one FC2 kernel per range, in both
			what := fmt.Sprintf("%s %v", name, prec)
			off := forwardAndBackward(t, l, s)
			s.Chain = schedule.ChainFC
			on := forwardAndBackward(t, l, s)
			if a, b := kernelNames(off[1]), kernelNames(on[1]); !slices.Equal(a, b) {
				t.Errorf("%s backward: kernels %v with the chain, %v without", what, b, a)
			}
			p, base := on[0], off[0]
			if b := base.Buffer("tile_done1"); b != nil {
				t.Errorf("%s: the forward without the chain plans %s", what, b.Name)
			}
			chained := 0
			for _, T := range Ts {
				got, want := launchedAt(p, T), launchedAt(base, T)
				fc1 := countPrefix(got, "moe_fc1")
				fc2 := countPrefix(got, "moe_fc2") + countPrefix(got, "moe_fc1_fc2") // the chained kernel runs both
				if T > 0 && (fc1 != 1 || fc2 != 1) {
					t.Errorf("%s T = %d: %d FC1 and %d FC2 kernels launched: %v", what, T, fc1, fc2, got)
				}
				if i := slices.IndexFunc(got, func(n string) bool { return strings.HasPrefix(n, "moe_fc1_fc2") }); i >= 0 {
					chained++
					suffix := strings.TrimPrefix(got[i], "moe_fc1_fc2") // fc1's form; fc2's has no _gathered
					if j := slices.Index(want, "moe_fc1"+suffix); j >= 0 {
						want = slices.Replace(want, j, j+1, got[i])
					}
					want = slices.DeleteFunc(want, func(n string) bool { return n == "moe_fc2"+strings.TrimSuffix(suffix, "_gathered") })
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s T = %d: kernels %v, want %v", what, T, got, want)
				}
			}
			if chained == 0 {
				t.Errorf("%s: moe_fc1_fc2 runs at none of T = %v", what, Ts)
			}
			for _, k := range p.Kernels {
				if strings.HasPrefix(k.Name, "moe_fc1_fc2") {
					checkChainBinding(t, what, p, base, k)
				}
			}
		}
	}
}

// checkChainBinding checks the parameters of p's chained kernel ck (see
// TestChainFC): each binds the buffer that the same parameter of the
// kernel it replaces in base (the unchained program) binds, moe_fc1<form>
// for the first GEMM's, moe_fc2<form> (without _gathered) for the g2_
// ones; tile_done binds the counters of the list the first GEMM reads,
// which every kernel writing that list takes, err the error word, and
// wait_limit_ns is launch.DefaultWaitLimitNs; ck is co_resident, one
// block per SM.
func checkChainBinding(t *testing.T, name string, p, base *Program, ck launch.Kernel) {
	t.Helper()
	name += " " + ck.Name
	if !ck.CoResident || !ck.GridPerSM {
		t.Errorf("%s: co_resident %v, grid_per_sm %v", name, ck.CoResident, ck.GridPerSM)
	}
	form := strings.TrimPrefix(ck.Name, "moe_fc1_fc2")
	params := func(kernel string) map[string]string {
		i := slices.IndexFunc(base.Kernels, func(k launch.Kernel) bool { return k.Name == kernel })
		if i < 0 {
			t.Fatalf("%s: the unchained program has no %s", name, kernel)
		}
		m := map[string]string{}
		for _, q := range base.Kernels[i].Params {
			m[q.Name] = q.Buffer
		}
		return m
	}
	first, second := params("moe_fc1"+form), params("moe_fc2"+strings.TrimSuffix(form, "_gathered"))
	bound := map[string]string{}
	for _, q := range ck.Params {
		bound[q.Name] = q.Buffer
	}
	done := strings.Replace(bound["tiles"], "tiles", "tile_done", 1)
	for n, b := range bound {
		want, ok := first[n]
		switch {
		case n == "tile_done":
			want, ok = done, true
		case n == "err":
			want, ok = launch.ErrBuffer, true
		case n == launch.ParamWaitLimit:
			want, ok = "", true // a scalar
			var v *launch.Expr
			for _, q := range ck.Params {
				if q.Name == n {
					v = q.Value
				}
			}
			if v == nil || *v != launch.Const(launch.DefaultWaitLimitNs) {
				t.Errorf("%s: %s has the value %v, want %d", name, n, v, int64(launch.DefaultWaitLimitNs))
			}
		case strings.HasPrefix(n, chainPrefix):
			want, ok = second[strings.TrimPrefix(n, chainPrefix)]
		}
		if !ok || b != want {
			t.Errorf("%s: %s is bound to %q, want %q (in the unchained kernels: %v)", name, n, b, want, ok)
		}
	}
	if len(bound) != len(first)+len(second)+3 { // tile_done, err, wait_limit_ns
		t.Errorf("%s: %d parameters, the two kernels have %d and %d", name, len(bound), len(first), len(second))
	}
	if p.Buffer(done) == nil {
		t.Errorf("%s: the plan lacks %s", name, done)
	}
	for _, k := range p.Kernels {
		writes, takes := false, false
		for _, q := range k.Params {
			writes = writes || q.Buffer == "n"+bound["tiles"] && !strings.HasPrefix(k.Name, "moe_fc") && !strings.HasPrefix(k.Name, "moe_shared")
			takes = takes || q.Buffer == done
		}
		if writes && !takes {
			t.Errorf("%s: %s writes %s but not its counters %s", name, k.Name, bound["tiles"], done)
		}
	}
}

// launchedAt is the names of p's kernels launched for T tokens, in order.
func launchedAt(p *Program, T int64) []string {
	var out []string
	for _, k := range p.Kernels {
		if k.RunsAt(T) {
			out = append(out, k.Name)
		}
	}
	return out
}

// kernelNames is the names of p's kernels, in order.
func kernelNames(p *Program) []string {
	var out []string
	for _, k := range p.Kernels {
		out = append(out, k.Name)
	}
	return out
}

// countPrefix counts the names that are prefix or start with prefix + "_"
// (moe_fc1's variants and moe_fc1_fc2 for "moe_fc1").
func countPrefix(names []string, prefix string) int {
	n := 0
	for _, s := range names {
		if s == prefix || strings.HasPrefix(s, prefix+"_") {
			n++
		}
	}
	return n
}

// TestChainRefused: the chained kernel is refused, with the reason, off
// sm_90a, for weights in one allocation per expert, the queue walk, GEMMs
// whose rings differ and an mxfp8 schedule without the decode tiles
// (where a kernel quantizes h between the GEMMs).
func TestChainRefused(t *testing.T) {
	for _, c := range []struct {
		tg    target.Target
		prec  schedule.Precision
		per   bool
		queue bool
		want  string
	}{
		{target.SM80, schedule.BF16, false, false, "sm_90a"},
		{target.SM100a, schedule.BF16, false, false, "sm_90a"},
		{target.SM90a, schedule.MXFP8, false, false, "decode tiles"}, // --mx-gemm expand: no decode tiles, h quantized by a kernel
		{target.SM90a, schedule.BF16, true, false, "grouped weights"},
		{target.SM90a, schedule.BF16, false, true, "fixed walk"},
		{target.SM90a, schedule.BF16, false, false, "in none of their kernel forms"}, // FC1 tile 128x128x64: another ring
	} {
		l := testlayer.Preset(t, "qwen3-30b-a3b")
		l.Precision = c.prec
		if c.per {
			l.Storage = schedule.PerExpertWeights
		}
		s := testlayer.DefaultSchedule(t, l, c.tg)
		s.Chain, s.Items, s.FC2Large = schedule.ChainFC, schedule.ItemsFixed, schedule.LargeRowsTile{}
		if c.queue {
			s.Items = schedule.ItemsQueue
		}
		if c.want == "in none of their kernel forms" {
			s.FC1 = schedule.Tile{M: 128, N: 128, K: 64}
			s.Variant, s.Decode = nil, nil // as the shape flags leave them out
		}
		if c.want == "decode tiles" {
			s.MXGemm, s.Variant = schedule.MXGemmExpand, nil
		}
		what := fmt.Sprintf("%v %v per-expert %v queue %v", c.tg, c.prec, c.per, c.queue)
		if _, err := Build(l, s); err == nil || !strings.Contains(err.Error(), "Chain") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want a Schedule.Chain error naming %q", what, err, c.want)
		}
	}
}

// TestChainAssemble: ptxas assembles the chained forwards of both gate/up
// layouts (qwen3-30b-a3b's halves, gpt-oss-20b's interleaved rows with
// biases), an mxfp8 one (olmoe-1b-7b: the decode tiles' chained kernel)
// and one in 2-CTA clusters (mixtral-8x7b, Schedule.Cluster = 2) without
// a serialized wgmma pipeline, and the chained kernels
// (base, tile variant, gathering decode FC1, mxfp8 decode) without spills (ptxas -v of
// CUDA 12.9, the sm_100a toolchain's: the GPU machines' drivers compile
// the PTX with CUDA 13; ptxas 12.5 spills 4 bytes in
// qwen3-30b-a3b's moe_fc1_fc2_gathered).
func TestChainAssemble(t *testing.T) {
	var texts []string
	names := []string{"qwen3-30b-a3b", "gpt-oss-20b", "olmoe-1b-7b mxfp8", "mixtral-8x7b in clusters"}
	for _, name := range names { // mixtral-8x7b: both GEMMs pair (FC1 112 column blocks, FC2 16)
		text := chainedPTX(t, name)
		if !strings.Contains(text, ".entry moe_fc1_fc2") {
			t.Fatalf("%s: no moe_fc1_fc2 in the PTX", name)
		}
		texts = append(texts, text)
	}
	toolchain.NeedPtxas(t, target.SM90a.String())
	ptxas := toolchain.NeedPtxas(t, target.SM100a.String()) // CUDA 12.9's, which also assembles sm_90a
	entry := regexp.MustCompile(`entry function '(\w+)'`)
	for i, text := range texts {
		if err := toolchain.Assemble(text, target.SM90a.String()); err != nil {
			t.Errorf("%s: %v", names[i], err)
		}
		out := ptxasVerbose(t, ptxas, names[i], text)
		fn, chained := "", 0
		for _, line := range strings.Split(out, "\n") {
			if m := entry.FindStringSubmatch(line); m != nil {
				fn = m[1]
				if strings.HasPrefix(fn, "moe_fc1_fc2") {
					chained++
				}
			}
			if strings.HasPrefix(fn, "moe_fc1_fc2") && strings.Contains(line, "spill stores") && !strings.Contains(line, " 0 bytes spill stores") {
				t.Errorf("%s %s: %s", names[i], fn, strings.TrimSpace(line))
			}
		}
		if chained == 0 {
			t.Errorf("%s: ptxas -v compiled no chained kernel", names[i])
		}
	}
}

// ptxasVerbose assembles PTX text for sm_90a with ptxas -v and returns
// what it printed (an error fails t, naming what).
func ptxasVerbose(t *testing.T, ptxas, what, text string) string {
	t.Helper()
	dir := t.TempDir()
	in := filepath.Join(dir, "in.ptx")
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(ptxas, "-arch=sm_90a", "-v", "-o", filepath.Join(dir, "out.cubin"), in).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: ptxas: %v\n%s", what, err, out)
	}
	return string(out)
}

// TestChainPhaseTimes: an instrumented chained forward (schedule
// .Schedule.PhaseTimes) names each chained kernel's two inner phases, sizes
// phase_times for a record per kernel and per inner phase, and records in
// the chained kernel the kernel's start and end and the phases' marks (the
// consumers' starts of both phases and the producer's of the second: min
// records; the consumers' and store warps' ends: max records); without
// phase times no mark is left in the PTX.
func TestChainPhaseTimes(t *testing.T) {
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	s := testlayer.DefaultSchedule(t, l, target.SM90a)
	s.Chain = schedule.ChainFC
	s = s.FixedItemsWhereNeeded(l)
	for _, phases := range []bool{false, true} {
		s.PhaseTimes = phases
		p, err := Build(l, s)
		if err != nil {
			t.Fatal(err)
		}
		res, err := ptx.CompileModule(p.Module, target.SM90a)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(res.Text, phaseMarkText) {
			t.Errorf("phase times %v: a phase mark is left in the PTX", phases)
		}
		inner := 0
		for _, k := range p.Kernels {
			inner += len(k.Phases)
			if k.Name == "moe_fc1_fc2" && !slices.Equal(k.Phases, []string{"moe_fc1_fc2/fc1", "moe_fc1_fc2/fc2"}) {
				t.Errorf("moe_fc1_fc2's phases: %v", k.Phases)
			}
		}
		if inner != 8 { // moe_fc1_fc2, moe_fc1_fc2_gathered, moe_fc1_fc2_mid and moe_fc1_fc2_decode_gathered
			t.Errorf("%d inner phases, want 8", inner)
		}
		if !phases {
			continue
		}
		if b := p.Buffer(launch.BufPhaseTimes); b == nil || b.Shape[0].Eval(0) != int64(2*launch.PhaseSlots*(len(p.Kernels)+inner)) {
			t.Errorf("phase_times: %+v, want %d records", b, len(p.Kernels)+inner)
		}
		i := strings.Index(res.Text, ".entry moe_fc1_fc2(")
		if i < 0 {
			t.Fatal("no moe_fc1_fc2 in the PTX")
		}
		body := res.Text[i:]
		body = body[:strings.Index(body, "\n}\n")]
		if n := strings.Count(body, "red.global.min.u64"); n != 4 {
			t.Errorf("moe_fc1_fc2 has %d start records, want 4 (the kernel, both phases in the consumers, the second in the producer)", n)
		}
		if n := strings.Count(body, "red.global.max.u64"); n < 5 {
			t.Errorf("moe_fc1_fc2 has %d end records, want at least 5 (the returns, both phases in the consumers and the store warps)", n)
		}
	}
}

// TestChainWaitPTX: every chained kernel's waits for its row tiles are
// bounded (codegen awaitCount): the PTX reads %globaltimer, compares the
// elapsed time with the wait_limit_ns parameter less one as unsigned (0:
// no bound), ORs launch.ErrWaitTimeout into both error words and reads
// the run's word back (ld.volatile) to give up once another wait has.
func TestChainWaitPTX(t *testing.T) {
	for _, name := range []string{"qwen3-30b-a3b", "olmoe-1b-7b mxfp8", "mixtral-8x7b in clusters"} {
		entries := strings.Split(chainedPTX(t, name), ".visible .entry ")
		n := 0
		for _, e := range entries[1:] {
			if !strings.HasPrefix(e, "moe_fc1_fc2") {
				continue
			}
			n++
			kernel := e[:strings.Index(e, "(")]
			for _, want := range []*regexp.Regexp{
				regexp.MustCompile(`\.param \.u64 wait_limit_ns`),
				regexp.MustCompile(`mov\.u64\s+%rd\d+, %globaltimer;`),
				regexp.MustCompile(`sub\.s64\s+%rd\d+, %rd\d+, 1;`),
				regexp.MustCompile(`setp\.gt\.u64\s+%p\d+, %rd\d+, %rd\d+;`),
				regexp.MustCompile(`ld\.volatile\.global\.u32`),
			} {
				if !want.MatchString(e) {
					t.Errorf("%s %s: no %s", name, kernel, want)
				}
			}
			// Both words: the run's at err, the kept one at err + 4.
			ors := regexp.MustCompile(`atom(?:\.\w+)*\.global\.or\.b32\s+%r\d+, \[(%rd\d+)\], 4;`).FindAllStringSubmatch(e, -1)
			if len(ors) == 0 || len(ors)%2 != 0 {
				t.Errorf("%s %s: ErrWaitTimeout ORed %d times, want pairs (both error words per wait)", name, kernel, len(ors))
				continue
			}
			plus4 := map[[2]string]bool{}
			for _, a := range regexp.MustCompile(`add\.s64\s+(%rd\d+), (%rd\d+), 4;`).FindAllStringSubmatch(e, -1) {
				plus4[[2]string{a[2], a[1]}] = true // a[1] = a[2] + 4
			}
			for i := 0; i < len(ors); i += 2 {
				if w0, w1 := ors[i][1], ors[i+1][1]; !plus4[[2]string{w0, w1}] {
					t.Errorf("%s %s: a wait ORs into %s and %s, not err and err + 4", name, kernel, w0, w1)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no chained kernel", name)
		}
	}
}

// chainedPTX is the sm_90a PTX of the chained forward (Schedule.Chain
// fc1-fc2) of layer name (testlayer.Named), in 2-CTA clusters
// (Schedule.Cluster = 2) when name ends in " in clusters".
func chainedPTX(t *testing.T, name string) string {
	t.Helper()
	base, clustered := strings.CutSuffix(name, " in clusters")
	l := testlayer.Named(t, base)
	s := testlayer.DefaultSchedule(t, l, target.SM90a)
	s.Chain = schedule.ChainFC
	if clustered {
		s.Cluster = 2
	}
	s = s.FixedItemsWhereNeeded(l).FC2LargeWhereValid(l)
	p, err := Build(l, s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	res, err := ptx.CompileModule(p.Module, target.SM90a)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res.Text
}
