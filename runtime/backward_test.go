package runtime

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// backwardPlanFor lowers the backward of l for tg with its default
// schedule and checks its manifest (as JSON, Pass "backward") as
// Layer.Backward's first call does.
func backwardPlanFor(t *testing.T, l schedule.Layer, tg target.Target) *plan {
	t.Helper()
	s := testlayer.DefaultSchedule(t, l, tg)
	p, err := moe.Backward(l)
	if err != nil {
		t.Fatal(err)
	}
	prog, err := codegen.Lower(p, s, codegen.PerOp)
	if err != nil {
		t.Fatalf("%s %s: %v", l.Name, tg, err)
	}
	m := launch.Manifest{Mokc: "test", Layer: l.Name, Target: tg.String(), PTXVersion: "8.0", Pass: "backward",
		Shape: launch.ShapeOf(l), Buffers: prog.Buffers, Schedule: s.String()}
	for _, k := range prog.Kernels {
		m.Kernels = append(m.Kernels, launch.ManifestKernel{Kernel: k})
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := parsePlan(b, l)
	if err != nil {
		t.Fatal(err)
	}
	return pl
}

// fakeBackwardBindings is fakeBindings with the main grads (inout) too.
func fakeBackwardBindings(p *plan, T int) Bindings {
	b := fakeBindings(p, T)
	next := driver.DevicePtr(1 << 42)
	for _, spec := range p.specs(launch.BufInOut) {
		n := spec.BytesAt(T)
		b[spec.Name] = NewTensor(next, n, spec.DType, spec.ShapeAt(T)...)
		next = next.Offset((n + 4096) &^ 255)
	}
	return b
}

// TestBackwardBindingsPerExpert checks Backward's bindings of a layer with
// per-expert weight storage: the weights' and the routed main grads'
// pointer tables (u64 [E]) instead of the grouped tensors, the bias main
// grads grouped, each wrong binding refused with an error naming the
// buffer.
func TestBackwardBindingsPerExpert(t *testing.T) {
	l := testlayer.PerExpert(t, "gpt-oss-20b", schedule.GradBF16)
	l.Experts = 8
	E := l.Experts
	p := backwardPlanFor(t, l, target.SM90a)
	var inouts []string
	for _, s := range p.specs(launch.BufInOut) {
		inouts = append(inouts, fmt.Sprintf("%s %s%v", s.Name, s.DType, s.ShapeAt(1)))
	}
	if got, want := strings.Join(inouts, ", "), "fc1_grad_table u64[8], fc2_grad_table u64[8], fc1_bias_grad bf16[8 5760], fc2_bias_grad bf16[8 2880]"; got != want {
		t.Fatalf("main grads %q, want %q", got, want)
	}
	for _, T := range []int{0, 1, 64} {
		if got, _, err := p.bind(fakeBackwardBindings(p, T)); err != nil || got != T {
			t.Fatalf("T=%d: %d %v", T, got, err)
		}
	}
	const T = 64
	edit := func(f func(t *Tensor)) func(b Bindings, buf string) {
		return func(b Bindings, buf string) {
			t := b[buf]
			f(&t)
			b[buf] = t
		}
	}
	for _, c := range []struct {
		name, buf, want string
		edit            func(b Bindings, buf string)
	}{
		{"grouped main grad", moe.BufFC1Grad, " is bound, but this layer has no such buffer", func(b Bindings, buf string) {
			b[buf] = NewTensor(1<<30, 2*E*2*l.Intermediate*l.Hidden, BF16, E, 2*l.Intermediate, l.Hidden)
		}},
		{"table missing", moe.BufFC1GradTable, " is not bound; this layer adds to it: u64 [8] (device pointers to each expert's main grad of fc1, bf16 [2I,H]",
			func(b Bindings, buf string) { b[buf] = Tensor{} }},
		{"table dtype", moe.BufFC2GradTable, `: dtype "bf16"; want u64 [8]`, edit(func(t *Tensor) { t.DType = BF16 })},
		{"table length", moe.BufFC2GradTable, ": shape [7]; want [8]", edit(func(t *Tensor) { t.Shape = []int{E - 1} })},
		{"table bytes", moe.BufFC1GradTable, ": 32 bytes; u64 [8] needs 64", edit(func(t *Tensor) { t.Bytes = 32 })},
		{"table misaligned", moe.BufFC1GradTable, "not 16-byte aligned", edit(func(t *Tensor) { t.Ptr += 8 })},
		{"table overlaps the weights' table", moe.BufFC1GradTable, "overlaps buffer", func(b Bindings, buf string) {
			edit(func(t *Tensor) { t.Ptr = b[moe.BufFC1Table].Ptr })(b, buf)
		}},
	} {
		b := fakeBackwardBindings(p, T)
		c.edit(b, c.buf)
		_, _, err := p.bind(b)
		named := fmt.Sprintf("buffer %q", c.buf)
		if err == nil || !strings.Contains(err.Error(), named) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "Backward") {
			t.Errorf("%s: error %v, want one from Backward containing %s and %q", c.name, err, named, c.want)
		}
	}
}
