package moe

import (
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/schedule"
)

// perExpertNames maps the grouped buffers of a backward program to their
// per-expert storage counterparts (pointer tables).
var perExpertNames = map[string]string{BufFC1: BufFC1Table, BufFC2: BufFC2Table,
	BufFC1Grad: BufFC1GradTable, BufFC2Grad: BufFC2GradTable}

// TestBackwardPerExpert: with per-expert weight storage the backward is the
// grouped layer's program with fc1, fc2 and their main grads replaced by
// u64 [E] pointer tables (the main grads' tables InOut), every GEMM that
// reads a weight table and every weight gradient into a main-grad table
// marked Table (with the main grads' dtype behind the pointers), the bias
// and shared main grads unchanged; the tables' entries are [2I,H] and
// [H,I]; Interpret refuses it, naming a table.
func TestBackwardPerExpert(t *testing.T) {
	layers := map[string]schedule.Layer{}
	for _, name := range schedule.Presets() {
		l, _ := schedule.Preset(name)
		layers[name] = l
	}
	for name, l := range interpLayers() {
		l.Name = name
		layers[name] = l
	}
	for name, l := range layers {
		for _, g := range []schedule.GradDType{schedule.GradFP32, schedule.GradBF16} {
			l.MainGrad = g
			grouped, err := Backward(l)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			pe := l
			pe.Storage = schedule.PerExpertWeights
			p, err := Backward(pe)
			if err != nil {
				t.Fatalf("%s per-expert %v: %v", name, g, err)
			}
			checkPerExpertBackward(t, name+" "+g.String(), l, grouped, p)
		}
	}
}

func checkPerExpertBackward(t *testing.T, name string, l schedule.Layer, grouped, p *Program) {
	t.Helper()
	H, I, E := l.Hidden, l.Intermediate, l.Experts
	dt := F32
	if l.MainGrad == schedule.GradBF16 {
		dt = BF16
	}
	mapped := func(n string) string {
		if m, ok := perExpertNames[n]; ok {
			return m
		}
		return n
	}
	if len(p.Buffers) != len(grouped.Buffers) {
		t.Fatalf("%s: %d buffers, the grouped layer's program %d", name, len(p.Buffers), len(grouped.Buffers))
	}
	for i, gb := range grouped.Buffers {
		b := p.Buffers[i]
		if b.Name != mapped(gb.Name) || b.Kind != gb.Kind {
			t.Errorf("%s: buffer %d is %s %s, want %s %s", name, i, b.Kind, b.Name, gb.Kind, mapped(gb.Name))
		}
		if b.Name == gb.Name && b.String() != gb.String() {
			t.Errorf("%s: buffer %s differs: %s, grouped %s", name, b.Name, b, gb)
		}
	}
	for _, n := range []string{BufFC1, BufFC2, BufFC1Grad, BufFC2Grad} {
		if p.Buffer(n) != nil {
			t.Errorf("%s: has grouped buffer %s", name, n)
		}
	}
	for table, want := range map[string]struct {
		kind  Kind
		dtype DType
		shape []int
	}{
		BufFC1Table: {Input, BF16, []int{2 * I, H}}, BufFC2Table: {Input, BF16, []int{H, I}},
		BufFC1GradTable: {InOut, dt, []int{2 * I, H}}, BufFC2GradTable: {InOut, dt, []int{H, I}},
	} {
		b := p.Buffer(table)
		if b == nil || b.Kind != want.kind || b.DType != U64 || len(b.Shape) != 1 || b.Shape[0] != launch.Const(int64(E)) {
			t.Errorf("%s: %s is %v, want %s u64[%d]", name, table, b, want.kind, E)
			continue
		}
		if d, shape, ok := p.TableEntry(table); !ok || d != want.dtype || !slices.Equal(shape, want.shape) {
			t.Errorf("%s: entries of %s are %s %v (%v), want %s %v", name, table, d, shape, ok, want.dtype, want.shape)
		}
	}
	if b := p.Buffer(BufFC1GradTable); b != nil && (!strings.Contains(b.Doc, string(dt)) || !strings.Contains(b.Doc, "[2I,H]")) {
		t.Errorf("%s: %s doc %q does not say what the entries hold", name, b.Name, b.Doc)
	}
	if _, _, ok := p.TableEntry(BufX); ok {
		t.Errorf("%s: x is not a pointer table", name)
	}
	if len(p.Ops) != len(grouped.Ops) {
		t.Fatalf("%s: %d ops, grouped %d", name, len(p.Ops), len(grouped.Ops))
	}
	tableOps := 0
	for i, op := range p.Ops {
		var want []string
		for _, o := range grouped.Ops[i].Operands() {
			o.Buffer = &Buffer{Name: mapped(o.Buffer.Name)}
			want = append(want, o.String())
		}
		var got []string
		for _, o := range op.Operands() {
			got = append(got, o.String())
		}
		if op.Name() != grouped.Ops[i].Name() || !slices.Equal(got, want) {
			t.Errorf("%s: op %d is %s%v, want %s%v", name, i, op.Name(), got, grouped.Ops[i].Name(), want)
		}
		switch o := op.(type) {
		case GEMM:
			if table := o.B.DType == U64; table != (o.Storage == Table) {
				t.Errorf("%s: op %s reads %s with storage %v", name, o.Op, o.B.Name, o.Storage)
			} else if table {
				tableOps++
			}
		case WeightGrad:
			if table := o.Main.DType == U64; table != (o.Storage == Table) {
				t.Errorf("%s: op %s adds to %s with storage %v", name, o.Op, o.Main.Name, o.Storage)
			} else if table {
				tableOps++
			}
			if o.MainDType() != dt && o.Main.Name != BufSharedGateGrad {
				t.Errorf("%s: op %s adds to %s main grads, want %s", name, o.Op, o.MainDType(), dt)
			}
		}
	}
	// fc1, fc2_dgrad, fc1_dgrad (and fc1_x) read the tables; fc1_wgrad
	// and fc2_wgrad add through them.
	if want := 5 + map[bool]int{true: 1}[l.RouterWeightOnInput]; tableOps != want {
		t.Errorf("%s: %d ops use a pointer table, want %d", name, tableOps, want)
	}
	if _, err := Interpret(p, 1, nil); err == nil || !strings.Contains(err.Error(), "pointer table") || !strings.Contains(err.Error(), BufFC1Table) {
		t.Errorf("%s: Interpret: %v, want a refusal naming the pointer table %s", name, err, BufFC1Table)
	}
}

// TestCheckStorage breaks the storage of a backward's GEMMs and weight
// gradients (gpt-oss-20b: E = 32, H = I = 2880, biases) in each way Check
// must catch.
func TestCheckStorage(t *testing.T) {
	op := func(p *Program, name string) int {
		for i, o := range p.Ops {
			if o.Name() == name {
				return i
			}
		}
		t.Fatalf("no op %s", name)
		return -1
	}
	gemm := func(name string, f func(g *GEMM)) func(p *Program) {
		return func(p *Program) {
			i := op(p, name)
			g := p.Ops[i].(GEMM)
			f(&g)
			p.Ops[i] = g
		}
	}
	wgrad := func(name string, f func(g *WeightGrad)) func(p *Program) {
		return func(p *Program) {
			i := op(p, name)
			g := p.Ops[i].(WeightGrad)
			f(&g)
			p.Ops[i] = g
		}
	}
	for _, c := range []struct {
		name      string
		perExpert bool
		break_    func(p *Program)
		want      string
	}{
		{"table read as weights", true, gemm("fc2_dgrad", func(g *GEMM) { g.Storage = Stacked }),
			"op fc2_dgrad: b fc2_table u64[32] with Stacked storage must be bf16 or e4m3 weights"},
		{"weights read as a table", false, gemm("fc1", func(g *GEMM) { g.Storage = Table }),
			"op fc1: b fc1 bf16[32,5760,2880] with Table storage must be a u64 [32] pointer table"},
		{"table of the wrong length", true, gemm("fc1", func(g *GEMM) { g.Experts = 7 }),
			"op fc1: b fc1_table u64[32] with Table storage must be a u64 [7] pointer table"},
		{"weights of the wrong size", false, gemm("fc1_dgrad", func(g *GEMM) { g.K = 2880 }),
			"op fc1_dgrad: b fc1 bf16[32,5760,2880] with Stacked storage must hold 265420800 elements"},
		{"main table as main grads", true, wgrad("fc1_wgrad", func(g *WeightGrad) { g.Storage = Stacked }),
			"op fc1_wgrad: main fc1_grad_table u64[32] with Stacked storage must be f32 or bf16 main grads"},
		{"no dtype behind the table", true, wgrad("fc2_wgrad", func(g *WeightGrad) { g.GradDType = "" }),
			"op fc2_wgrad: main grads behind the pointer table fc2_grad_table must be f32 or bf16"},
		{"main grads as a table", true, wgrad("fc2_wgrad", func(g *WeightGrad) { g.Main = g.Bias }),
			"op fc2_wgrad: main fc2_bias_grad f32[32,2880] with Table storage must be a u64 [32] pointer table"},
		{"main grads of the wrong size", false, wgrad("fc2_wgrad", func(g *WeightGrad) { g.Main = g.Bias }),
			"op fc2_wgrad: main fc2_bias_grad f32[32,2880] with Stacked storage must hold 265420800 elements"},
		{"grad dtype of grouped main grads", false, wgrad("fc2_wgrad", func(g *WeightGrad) { g.GradDType = BF16 }),
			"op fc2_wgrad: GradDType bf16 differs from main fc2_grad f32[32,2880,2880]'s dtype"},
		{"table entries disagree", true, gemm("fc1_dgrad", func(g *GEMM) { g.BMajor = KMajor }),
			"op fc1_dgrad uses the entries of pointer table fc1_table as bf16 [2880 5760], op fc1 as bf16 [5760 2880]"},
	} {
		l, _ := schedule.Preset("gpt-oss-20b")
		if c.perExpert {
			l.Storage = schedule.PerExpertWeights
		}
		p, err := Backward(l)
		if err != nil {
			t.Fatal(err)
		}
		c.break_(p)
		if err := p.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Check() = %v, want %q", c.name, err, c.want)
		}
	}
}
