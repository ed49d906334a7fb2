package codegen_test

import (
	"strings"
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestPhaseTimesAssemble builds instrumented forwards (schedule.Schedule.
// PhaseTimes) in both precisions on every target and checks that each
// kernel takes the phase_times buffer as its last parameter, records its
// start once and its end at every return, and that ptxas assembles the
// module; the uninstrumented program has no such buffer.
func TestPhaseTimesAssemble(t *testing.T) {
	cases := []struct {
		tg   target.Target
		prec schedule.Precision
	}{{target.SM80, schedule.BF16}, {target.SM90a, schedule.BF16}, {target.SM90a, schedule.MXFP8}, {target.SM100a, schedule.MXFP8}}
	var texts []string
	for _, c := range cases {
		l, err := schedule.Preset("qwen3-30b-a3b")
		if err != nil {
			t.Fatal(err)
		}
		l.Precision = c.prec
		s, err := schedule.DefaultSchedule(l, c.tg)
		if err != nil {
			t.Fatal(err)
		}
		plain, err := codegen.Build(l, s)
		if err != nil {
			t.Fatal(err)
		}
		if plain.Buffer(launch.BufPhaseTimes) != nil {
			t.Errorf("%v %v: %s without PhaseTimes", c.tg, c.prec, launch.BufPhaseTimes)
		}
		s.PhaseTimes = true
		p, err := codegen.Build(l, s)
		if err != nil {
			t.Fatalf("%v %v: %v", c.tg, c.prec, err)
		}
		b := p.Buffer(launch.BufPhaseTimes)
		if b == nil || b.Shape[0].Eval(1) != int64(2*launch.PhaseSlots*len(p.Kernels)) {
			t.Fatalf("%v %v: buffer %+v for %d kernels", c.tg, c.prec, b, len(p.Kernels))
		}
		res, err := ptx.CompileModule(p.Module, c.tg)
		if err != nil {
			t.Fatalf("%v %v: %v", c.tg, c.prec, err)
		}
		for _, k := range p.Kernels {
			if last := k.Params[len(k.Params)-1]; last.Buffer != launch.BufPhaseTimes {
				t.Errorf("%v %v: %s's last parameter is %q", c.tg, c.prec, k.Name, last.Name)
			}
			body := codegen.EntryBody(res.Text, k.Name)
			if n := strings.Count(body, "red.global.min.u64"); n != 1 {
				t.Errorf("%v %v: %s records its start %d times", c.tg, c.prec, k.Name, n)
			}
			if rets, ends := strings.Count(body, "\tret;"), strings.Count(body, "red.global.max.u64"); ends == 0 || ends < rets {
				t.Errorf("%v %v: %s has %d end records for %d returns", c.tg, c.prec, k.Name, ends, rets)
			}
		}
		texts = append(texts, res.Text)
	}
	for i, c := range cases { // after every structural check: a missing ptxas skips only this
		toolchain.NeedPtxas(t, c.tg.String())
		if err := toolchain.Assemble(texts[i], c.tg.String()); err != nil {
			t.Errorf("%v %v: %v", c.tg, c.prec, err)
		}
	}
}
