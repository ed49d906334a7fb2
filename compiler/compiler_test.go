package compiler

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

func TestCompileEveryTarget(t *testing.T) {
	l := testlayer.Preset(t, "gpt-oss-20b")
	for _, tg := range target.All() {
		a, err := CompileDefault(l, tg)
		if err != nil {
			t.Fatalf("%s: %v", tg, err)
		}
		if len(a.Timings) != len(Stages) {
			t.Errorf("%s: %d stage timings, want %d", tg, len(a.Timings), len(Stages))
		}
		if !strings.Contains(a.PTX.Text, ".target "+tg.String()) {
			t.Errorf("%s: PTX lacks its .target", tg)
		}
		toolchain.NeedPtxas(t, tg.String())
		if err := toolchain.Assemble(a.PTX.Text, tg.String()); err != nil {
			t.Errorf("%s: %v", tg, err)
		}

		js, err := a.ManifestJSON()
		if err != nil {
			t.Fatal(err)
		}
		var m launch.Manifest
		if err := json.Unmarshal(js, &m); err != nil {
			t.Fatalf("%s: manifest does not read back: %v", tg, err)
		}
		if m.Target != tg.String() || m.Shape.Hidden != 2880 || m.Shape.FC1Rows != "interleaved" || m.Shape.Activation != "gpt-oss" {
			t.Errorf("%s: manifest header %+v", tg, m.Shape)
		}
		if len(m.Kernels) != len(a.Program.Kernels) || len(m.Notes) == 0 || m.SizeFormula == "" {
			t.Fatalf("%s: manifest has %d kernels (plan %d), %d notes", tg, len(m.Kernels), len(a.Program.Kernels), len(m.Notes))
		}
		for _, k := range m.Kernels {
			if len(k.ParamLayout) != len(k.Params) {
				t.Errorf("%s %s: %d params, %d in the PTX layout", tg, k.Name, len(k.Params), len(k.ParamLayout))
				continue
			}
			end := 0
			for i, p := range k.ParamLayout {
				if p.Size != k.Params[i].Size || p.Offset < end || p.Offset%p.Align != 0 {
					t.Errorf("%s %s param %d: layout %+v after byte %d, plan size %d", tg, k.Name, i, p, end, k.Params[i].Size)
				}
				end = p.Offset + p.Size
			}
			if end != k.ParamBytes {
				t.Errorf("%s %s: params end at %d, param_bytes %d", tg, k.Name, end, k.ParamBytes)
			}
		}
	}
}

func TestStageErrors(t *testing.T) {
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	s := testlayer.DefaultSchedule(t, l, target.SM90a)
	// A schedule the flags can say (as `mokc build --stages 0` makes it):
	// the hint carries the flags.
	bad := s
	bad.Stages, bad.Variant, bad.Decode = 0, nil, nil
	_, err := Compile(l, bad)
	var se *StageError
	if !errors.As(err, &se) || se.Stage != "validate" || !strings.Contains(err.Error(), "reproduce: mokc build --model qwen3-30b-a3b --target sm_90a --fc1-tile 128x256x64 --fc2-tile 128x256x64 --stages 0 --mma-warps 8 --emit llvm") {
		t.Errorf("invalid schedule: %v", err)
	}
	// The default schedule reproduces without flags; a routing-map layer
	// with --routing map.
	lm := l
	lm.Routing = schedule.RoutingMap
	if cmd, ok := ReproduceCommand(lm, s); !ok || cmd != "mokc build --model qwen3-30b-a3b --target sm_90a --routing map --emit llvm" {
		t.Errorf("ReproduceCommand(default schedule, routing map) = %q, %v", cmd, ok)
	}
	// The decode tiles off, or with other rows: --decode-max-rows.
	for _, c := range []struct {
		rows int // 0: off
		want string
	}{{0, "--decode-max-rows off"}, {2, "--decode-max-rows 2"}} {
		sd := s
		if c.rows == 0 {
			sd.Decode = nil
		} else {
			d := *s.Decode
			d.MaxRows = c.rows
			sd.Decode = &d
		}
		if cmd, ok := ReproduceCommand(l, sd); !ok || cmd != "mokc build --model qwen3-30b-a3b --target sm_90a "+c.want+" --emit llvm" {
			t.Errorf("ReproduceCommand(decode tiles %d rows) = %q, %v", c.rows, cmd, ok)
		}
	}
	// A schedule the flags cannot say (a changed GEMM variant) and a
	// preset name on a different layer get no hint.
	odd := s
	v := *s.Variant
	v.MinRows++
	odd.Variant = &v
	if cmd, ok := ReproduceCommand(l, odd); ok {
		t.Errorf("ReproduceCommand(changed variant) = %q", cmd)
	}
	// The backward's flags: per-expert storage, bf16 main grads and the
	// mma weight gradients (not sm_90a's default; they keep the GEMM
	// variant).
	lb := l
	lb.Storage, lb.MainGrad = schedule.PerExpertWeights, schedule.GradBF16
	sb := testlayer.DefaultSchedule(t, lb, target.SM90a)
	sb.WGrad = schedule.WGradMMA
	if cmd, ok := reproduceCommand(lb, sb, true); !ok || cmd != "mokc build --model qwen3-30b-a3b --target sm_90a --storage per-expert --backward --main-grad bf16 --wgrad mma --emit llvm" {
		t.Errorf("reproduceCommand(backward, per-expert, bf16, mma) = %q, %v", cmd, ok)
	}
	if _, ok := ReproduceCommand(lb, sb); ok {
		t.Error("a forward repro for a layer whose main grads differ from the preset's")
	}
	// An mxfp8 layer: --precision mxfp8; --mx-gemm takes the kind's
	// default tiles (and expand drops the decode variant), as the flag does.
	lx := l
	lx.Precision = schedule.MXFP8
	sx := testlayer.DefaultSchedule(t, lx, target.SM90a)
	if cmd, ok := ReproduceCommand(lx, sx); !ok || cmd != "mokc build --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --emit llvm" {
		t.Errorf("ReproduceCommand(mxfp8) = %q, %v", cmd, ok)
	}
	for _, k := range []schedule.MXGemmKind{schedule.MXGemmExpand, schedule.MXGemmPromote} {
		sx, err := schedule.DefaultScheduleMX(lx, target.SM90a, k)
		if err != nil {
			t.Fatal(err)
		}
		want := "mokc build --model qwen3-30b-a3b --target sm_90a --precision mxfp8 --mx-gemm " + k.String() + " --emit llvm"
		if cmd, ok := ReproduceCommand(lx, sx); !ok || cmd != want {
			t.Errorf("ReproduceCommand(mxfp8, %v) = %q, %v, want %q", k, cmd, ok, want)
		}
	}
	sg := s
	sg.GroupM = 0
	if cmd, ok := ReproduceCommand(l, sg); !ok || cmd != "mokc build --model qwen3-30b-a3b --target sm_90a --group-m 0 --emit llvm" {
		t.Errorf("ReproduceCommand(GroupM 0) = %q, %v", cmd, ok)
	}
	// The choices that keep the variant, each a flag of its own.
	so := s
	so.Gather, so.Cluster, so.Chain, so.Items = schedule.GatherSeparate, 2, schedule.ChainFC, schedule.ItemsFixed // mokc's walk with them
	if cmd, ok := ReproduceCommand(l, so); !ok || cmd != "mokc build --model qwen3-30b-a3b --target sm_90a --gather separate --cluster 2 --chain fc1-fc2 --emit llvm" {
		t.Errorf("ReproduceCommand(gather, cluster, chain) = %q, %v", cmd, ok)
	}
	so = s
	so.Items = schedule.ItemsFixed
	if cmd, ok := ReproduceCommand(l, so); !ok || cmd != "mokc build --model qwen3-30b-a3b --target sm_90a --items fixed --emit llvm" {
		t.Errorf("ReproduceCommand(items fixed) = %q, %v", cmd, ok)
	}
	so.Cluster, so.Items = 2, schedule.ItemsQueue // refused by Validate, but said as set
	if cmd, ok := ReproduceCommand(l, so); !ok || cmd != "mokc build --model qwen3-30b-a3b --target sm_90a --cluster 2 --items queue --emit llvm" {
		t.Errorf("ReproduceCommand(cluster 2, items queue) = %q, %v", cmd, ok)
	}
	renamed := l
	renamed.Hidden *= 2
	if cmd, ok := ReproduceCommand(renamed, s); ok {
		t.Errorf("ReproduceCommand(a preset's name on another layer) = %q", cmd)
	}

	// A codegen refusal (two blocks per SM with the default tiles, none of
	// which fits half an SM) of a layer that is not a preset has no hint.
	custom := l
	custom.Name = "my-layer"
	custom.Precision = schedule.MXFP8
	ms, err := schedule.DefaultSchedule(custom, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	ms.BlocksPerSM, ms.Items = 2, schedule.ItemsFixed
	_, err = Compile(custom, ms)
	if !errors.As(err, &se) || se.Stage != "codegen" || strings.Contains(err.Error(), "reproduce") {
		t.Errorf("two blocks per SM with the default tiles for a layer that is not a preset: %v (want a codegen-stage error without a reproduce hint)", err)
	}
	// The same layer builds for sm_90a and sm_100a.
	for _, tg := range []target.Target{target.SM90a, target.SM100a} {
		ms, err := schedule.DefaultSchedule(custom, tg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Compile(custom, ms); err != nil {
			t.Errorf("MXFP8 layer on %v: %v", tg, err)
		}
	}
}

func TestGridCTAs(t *testing.T) {
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	for _, tg := range []target.Target{target.SM90a, target.SM100a} {
		s := testlayer.DefaultSchedule(t, l, tg)
		for _, n := range []int{0, 114} {
			s.GridCTAs = n
			a, err := Compile(l, s)
			if err != nil {
				t.Fatal(err)
			}
			want := int64(n)
			if n == 0 {
				want = int64(tg.SMs())
			}
			for _, k := range a.Program.Kernels {
				if strings.Contains(k.Name, "fc") {
					if got := k.Grid[0].Eval(4096); got != want {
						t.Errorf("%s GridCTAs=%d: %s grid %d, want %d", tg, n, k.Name, got, want)
					}
				}
			}
		}
	}
}

// A layer too large for TMA (one expert's FC1 of 2^42 bytes, beyond the
// 2^40-byte strides of a tensor map) is refused by the layer's limits
// before codegen.
func TestTooLargeForTMA(t *testing.T) {
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	l.Name, l.Hidden, l.Intermediate = "huge", 1<<20, 1<<20
	for _, tg := range []target.Target{target.SM90a, target.SM100a} {
		_, err := CompileDefault(l, tg)
		if err == nil || !strings.Contains(err.Error(), "GEMM column blocks") {
			t.Errorf("%s: %v, want a refusal naming the size limit", tg, err)
		}
	}
}

// TestCompileBackward: the backward program compiles through every stage;
// its manifest says so and lists dy, dx, dw and the main grads.
func TestCompileBackward(t *testing.T) {
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	a, err := CompileBackward(l, testlayer.DefaultSchedule(t, l, target.SM90a))
	if err != nil {
		t.Fatal(err)
	}
	if a.Manifest.Pass != "backward" {
		t.Errorf("manifest pass %q", a.Manifest.Pass)
	}
	kinds := map[string]launch.BufferKind{}
	for _, b := range a.Manifest.Buffers {
		kinds[b.Name] = b.Kind
	}
	for name, k := range map[string]launch.BufferKind{moe.BufDY: launch.BufInput, moe.BufDX: launch.BufOutput,
		moe.BufDW: launch.BufOutput, moe.BufFC1Grad: launch.BufInOut, moe.BufFC2Grad: launch.BufInOut} {
		if kinds[name] != k {
			t.Errorf("buffer %s is %q, want %q", name, kinds[name], k)
		}
	}
	f, err := Compile(l, testlayer.DefaultSchedule(t, l, target.SM90a))
	if err != nil || f.Manifest.Pass != "" {
		t.Errorf("forward: pass %q, %v", f.Manifest.Pass, err)
	}
}

// An instrumented forward (schedule.Schedule.PhaseTimes) declares the
// launch.BufPhaseTimes scratch buffer in its manifest, sized for its
// kernels, and every kernel takes it as its last parameter, packed in its
// param layout; the uninstrumented manifest has neither.
func TestCompilePhaseTimes(t *testing.T) {
	l := testlayer.Preset(t, "deepseek-v2-lite")
	for _, tg := range []target.Target{target.SM80, target.SM90a} {
		s := testlayer.DefaultSchedule(t, l, tg)
		for _, on := range []bool{false, true} {
			s.PhaseTimes = on
			a, err := Compile(l, s)
			if err != nil {
				t.Fatal(err)
			}
			m := a.Manifest
			var buf *launch.Buffer
			for i := range m.Buffers {
				if m.Buffers[i].Name == launch.BufPhaseTimes {
					buf = &m.Buffers[i]
				}
			}
			if (buf != nil) != on {
				t.Fatalf("%v PhaseTimes %t: buffer %v", tg, on, buf)
			}
			if !on {
				continue
			}
			if buf.Kind != launch.BufScratch || buf.Bytes.Eval(1) != int64(16*launch.PhaseSlots*len(m.Kernels)) {
				t.Errorf("%v: %s is %s of %d bytes for %d kernels", tg, buf.Name, buf.Kind, buf.Bytes.Eval(1), len(m.Kernels))
			}
			for _, k := range m.Kernels {
				last := k.Params[len(k.Params)-1]
				if last.Buffer != launch.BufPhaseTimes || len(k.ParamLayout) != len(k.Params) {
					t.Errorf("%v: %s: last parameter %q, %d params in a layout of %d", tg, k.Name, last.Name, len(k.Params), len(k.ParamLayout))
				}
			}
		}
	}
}

// The manifest of a program with a work queue lists the work_queue scratch
// buffer (u32 words: 4 for moe_dispatch, 2 per GEMM with --items queue)
// and says in its notes that it must be zero at allocation, naming the
// kernels that take it; moe_dispatch runs past 8192 routed slots; with
// --dispatch ops and the fixed walk there is neither the buffer nor the
// note.
func TestManifestWorkQueue(t *testing.T) {
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	s := testlayer.DefaultSchedule(t, l, target.SM90a)
	for _, c := range []struct {
		dispatch schedule.DispatchKind
		items    schedule.ItemsKind
	}{{schedule.DispatchQueue, schedule.ItemsFixed}, {schedule.DispatchOps, schedule.ItemsFixed}, {schedule.DispatchOps, schedule.ItemsQueue}} {
		s.Dispatch, s.Items = c.dispatch, c.items
		a, err := Compile(l, s)
		if err != nil {
			t.Fatal(err)
		}
		m := a.Manifest
		var buf *launch.Buffer
		for i := range m.Buffers {
			if m.Buffers[i].Name == launch.BufWorkQueue {
				buf = &m.Buffers[i]
			}
		}
		var note string
		for _, n := range m.Notes {
			if strings.Contains(n, "The scratch "+launch.BufWorkQueue+" ") {
				note = n
			}
		}
		words := int64(0)
		for _, k := range m.Kernels {
			if !slices.ContainsFunc(k.Params, func(p launch.Param) bool { return p.Buffer == launch.BufWorkQueue }) {
				continue
			}
			if k.Name == "moe_dispatch" {
				words += 4
			} else {
				words += 2
			}
			if !strings.Contains(note, k.Name) {
				t.Errorf("%+v: the note %q does not name %s", c, note, k.Name)
			}
		}
		if want := c.dispatch == schedule.DispatchQueue || c.items == schedule.ItemsQueue; (buf != nil) != want || (note != "") != want || want != (words > 0) {
			t.Fatalf("%+v: buffer %v, note %q, %d words taken", c, buf, note, words)
		}
		if buf == nil {
			continue
		}
		if buf.Kind != launch.BufScratch || buf.DType != "u32" || buf.Bytes.Eval(1<<20) != 4*words {
			t.Errorf("%+v: %s is %s %s of %d bytes, want scratch u32 of %d", c, buf.Name, buf.Kind, buf.DType, buf.Bytes.Eval(1<<20), 4*words)
		}
		for _, k := range m.Kernels {
			if k.Name == "moe_dispatch" && (len(k.Tokens) != 1 || k.Tokens[0].Min != 8192/int64(l.TopK)+1) {
				t.Errorf("moe_dispatch runs for %v, want from T = %d", k.Tokens, 8192/l.TopK+1)
			}
		}
	}
}

// TestManifestCoResident: a chained forward (--chain fc1-fc2) marks its
// chained kernels co_resident, one block per SM, and its notes say how to
// launch them; the default forward has neither.
func TestManifestCoResident(t *testing.T) {
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	s := testlayer.DefaultSchedule(t, l, target.SM90a)
	for _, chain := range []schedule.ChainKind{schedule.ChainOff, schedule.ChainFC} {
		s.Chain = chain
		s = s.FixedItemsWhereNeeded(l).FC2LargeWhereValid(l)
		a, err := Compile(l, s)
		if err != nil {
			t.Fatal(err)
		}
		var co []string
		for _, k := range a.Manifest.Kernels {
			if k.CoResident {
				co = append(co, k.Name)
				if !k.GridPerSM {
					t.Errorf("%v: %s is co_resident without grid_per_sm", chain, k.Name)
				}
			}
		}
		note := slices.ContainsFunc(a.Manifest.Notes, func(n string) bool { return strings.Contains(n, "co_resident") && strings.Contains(n, "wait_limit_ns") })
		if want := chain == schedule.ChainFC; (len(co) > 0) != want || note != want {
			t.Errorf("%v: co_resident kernels %v, note %v", chain, co, note)
		}
	}
}

// TestReproduceWithoutFC2Large: a schedule that leaves out the default's
// FC2Large for a flag it cannot run with (--chain fc1-fc2, --cluster 2:
// schedule.Schedule.FC2LargeWhereValid, as mokc's flags do) still has its
// reproduce command, naming that flag; one with FC2Large's ranges moved
// or off names --fc2-large-min-rows and --fc2-large-mid-rows (both off:
// no FC2Large).
func TestReproduceWithoutFC2Large(t *testing.T) {
	l := testlayer.Named(t, "olmoe-1b-7b mxfp8")
	def := testlayer.DefaultSchedule(t, l, target.SM90a)
	if !def.FC2Large.Set() {
		t.Fatal("olmoe-1b-7b mxfp8's default schedule has no FC2Large")
	}
	for _, c := range []struct {
		flag string
		edit func(*schedule.Schedule)
	}{
		{"--chain fc1-fc2", func(s *schedule.Schedule) { s.Chain = schedule.ChainFC }},
		{"--cluster 2", func(s *schedule.Schedule) { s.Cluster = 2 }},
	} {
		s := def
		c.edit(&s)
		s = s.FixedItemsWhereNeeded(l).FC2LargeWhereValid(l)
		if s.FC2Large.Set() {
			t.Fatalf("%s: FC2Large kept", c.flag)
		}
		cmd, ok := ReproduceCommand(l, s)
		if !ok || !strings.Contains(cmd, c.flag) || strings.Contains(cmd, "fc2-large") {
			t.Errorf("%s: reproduce command %q, %v", c.flag, cmd, ok)
		}
	}
	for _, c := range []struct {
		s     schedule.Schedule
		flags []string
	}{
		{def.WithFC2LargeFrom(0), []string{"--fc2-large-min-rows off"}},
		{def.WithFC2LargeFrom(512), []string{"--fc2-large-min-rows 512"}},
		{def.WithFC2LargeMid(schedule.RowsBand{}), []string{"--fc2-large-mid-rows off"}},
		{def.WithFC2LargeMid(schedule.RowsBand{Lo: 100, Hi: 150}), []string{"--fc2-large-mid-rows 100..150"}},
		{def.WithFC2LargeFrom(0).WithFC2LargeMid(schedule.RowsBand{}), []string{"--fc2-large-min-rows off", "--fc2-large-mid-rows off"}},
	} {
		cmd, ok := ReproduceCommand(l, c.s)
		for _, f := range c.flags {
			if !ok || !strings.Contains(cmd, f) {
				t.Errorf("FC2Large %v: reproduce command %q, %v, want %s", c.s.FC2Large, cmd, ok, f)
			}
		}
	}
	if cmd, ok := ReproduceCommand(l, def); !ok || strings.Contains(cmd, "fc2-large") {
		t.Errorf("the default: reproduce command %q, %v", cmd, ok)
	}
}
