package runtime

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

func TestBF16RoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(rand.Uint64(), 1))
	v := make([]float32, 1000)
	for i := range v {
		v[i] = float32(r.NormFloat64() * 3)
	}
	got := FromBF16(ToBF16(v))
	for i := range v {
		if want := schedule.RoundBF16(v[i]); got[i] != want {
			t.Fatalf("%v -> %v, want %v", v[i], got[i], want)
		}
		if math.Abs(float64(got[i]-v[i])) > math.Abs(float64(v[i]))/128 {
			t.Fatalf("%v -> %v: more than half an ulp of bf16", v[i], got[i])
		}
	}
	if b := ToBF16([]float32{1, -2}); b[0] != 0x3F80 || b[1] != 0xC000 {
		t.Fatalf("ToBF16(1, -2) = %#04x", b)
	}
}

// packWeights returns the tensors UploadWeights copies for w (checkWeights,
// then GenerateWeights over materialWeights), one part per routed expert
// for fc1, fc2 and the biases, one part for the other tensors.
func packWeights(l schedule.Layer, w schedule.Weights) ([]hostTensor, error) {
	if err := checkWeights(l, w); err != nil {
		return nil, err
	}
	var out []hostTensor
	index := map[string]int{}
	err := GenerateWeights(l, materialWeights{w}, func(p WeightPart) error {
		i, ok := index[p.Buffer]
		if !ok {
			i = len(out)
			index[p.Buffer] = i
			out = append(out, hostTensor{name: p.Buffer, dtype: p.DType, shape: p.Shape})
		}
		switch d := p.Data.(type) {
		case []uint16:
			out[i].parts = append(out[i].parts, append([]uint16(nil), d...))
		case []float32:
			if p.Buffer == moe.BufFC1Bias || p.Buffer == moe.BufFC2Bias {
				n := len(d) / l.Experts
				for e := 0; e < l.Experts; e++ {
					out[i].parts = append(out[i].parts, append([]float32(nil), d[e*n:(e+1)*n]...))
				}
				break
			}
			out[i].parts = append(out[i].parts, append([]float32(nil), d...))
		}
		return nil
	})
	return out, err
}

func TestPackWeights(t *testing.T) {
	l := schedule.Layer{Name: "pack", Hidden: 16, Intermediate: 8, Experts: 3, TopK: 2,
		SharedExperts: 2, SharedIntermediate: 8, SharedGate: true,
		Activation: schedule.GPTOSS, SwiGLULimit: 7, GPTOSSAlpha: 1.702, GateUpInterleaved: true, Biases: true}
	w, err := schedule.RandomWeights(l, rand.Uint64())
	if err != nil {
		t.Fatal(err)
	}
	hts, err := packWeights(l, w)
	if err != nil {
		t.Fatal(err)
	}
	byField := map[string]hostTensor{}
	for _, h := range hts {
		n := 0
		for _, p := range h.parts {
			n += partBytes(p)
		}
		want := int(h.dtype.Size())
		for _, d := range h.shape {
			want *= d
		}
		if n != want {
			t.Fatalf("%s: %d bytes for %s %v (%d)", h.name, n, h.dtype, h.shape, want)
		}
		byField[h.name] = h
	}
	for _, f := range []string{moe.BufFC1, moe.BufFC2, moe.BufFC1Bias, moe.BufFC2Bias, moe.BufSharedFC1, moe.BufSharedFC2, moe.BufSharedGate} {
		if _, ok := byField[f]; !ok {
			t.Fatalf("no %s", f)
		}
	}
	H, Is, S := l.Hidden, l.SharedIntermediate, l.SharedExperts
	bf := func(v float32) uint16 { return ToBF16([]float32{v})[0] }
	// Expert e's FC1 is part e, row-major [2I, H].
	if got := byField[moe.BufFC1].parts[2].([]uint16)[5*H+3]; got != bf(w.FC1[2][5*H+3]) {
		t.Fatalf("fc1[2][5][3] = %#04x", got)
	}
	// Shared FC1: gate rows of expert 0, of expert 1, then up rows of 0, 1.
	var s1 []uint16
	for _, p := range byField[moe.BufSharedFC1].parts {
		s1 = append(s1, p.([]uint16)...)
	}
	for _, c := range []struct{ row, s, srcRow int }{{0, 0, 0}, {Is + 2, 1, 2}, {S*Is + 1, 0, Is + 1}, {S*Is + Is + 7, 1, Is + 7}} {
		for h := 0; h < H; h++ {
			if s1[c.row*H+h] != bf(w.SharedFC1[c.s][c.srcRow*H+h]) {
				t.Fatalf("shared_fc1 row %d col %d is not row %d of shared expert %d", c.row, h, c.srcRow, c.s)
			}
		}
	}
	// Shared FC2 [H, S*I_s]: column s*I_s + j of row h is FC2_s[h, j].
	s2 := byField[moe.BufSharedFC2].parts[0].([]uint16)
	for h := 0; h < H; h++ {
		for s := 0; s < S; s++ {
			for j := 0; j < Is; j++ {
				if s2[h*S*Is+s*Is+j] != bf(w.SharedFC2[s][h*Is+j]) {
					t.Fatalf("shared_fc2[%d][%d]", h, s*Is+j)
				}
			}
		}
	}
	if got := byField[moe.BufFC2Bias].parts[1].([]float32)[H-1]; got != w.FC2Bias[1][H-1] {
		t.Fatalf("fc2_bias[1][H-1] = %v", got)
	}

	bad := w
	bad.FC2 = append([][]float32(nil), w.FC2...)
	bad.FC2[1] = bad.FC2[1][:10]
	if _, err := packWeights(l, bad); err == nil || !strings.Contains(err.Error(), "FC2[1] has 10 values") {
		t.Fatalf("short FC2[1]: %v", err)
	}
	bad = w
	bad.SharedGate = nil
	if _, err := packWeights(l, bad); err == nil || !strings.Contains(err.Error(), "SharedGate") {
		t.Fatalf("no shared gate: %v", err)
	}
}

func TestPoisonCounts(t *testing.T) {
	y := ToBF16([]float32{1, float32(math.NaN()), float32(math.Inf(-1)), 0, -2})
	y = append(y, PoisonBF16, PoisonBF16)
	if u, n := PoisonCounts(y); u != 2 || n != 2 {
		t.Fatalf("PoisonCounts: %d unwritten, %d non-finite; want 2, 2", u, n)
	}
	for _, c := range []struct {
		t    Tensor
		want int
	}{{NewTensor(0, 0, BF16, 0, 7), 0}, {NewTensor(0, 0, BF16, 3, 7), 21}, {NewTensor(0, 0, U32), 1}} {
		if got := c.t.Len(); got != c.want {
			t.Errorf("%v.Len() = %d, want %d", c.t.Shape, got, c.want)
		}
	}
	if err := Poison(nil, nil, NewTensor(0, 0, BF16, 0, 7)); err != nil {
		t.Errorf("Poison of an empty tensor: %v", err)
	}
}

// TestPhaseRecords: the phase_times buffer holds a record per kernel, then
// one per inner phase (launch.BufPhaseTimes), and its reset image sets
// every record's start words to all ones and its end words to zero.
func TestPhaseRecords(t *testing.T) {
	ly := &Layer{plan: &plan{Manifest: launch.Manifest{Kernels: []launch.ManifestKernel{
		{Kernel: launch.Kernel{Name: "moe_dispatch"}},
		{Kernel: launch.Kernel{Name: "moe_fc1_fc2", Phases: []string{"moe_fc1_fc2/fc1", "moe_fc1_fc2/fc2"}}},
		{Kernel: launch.Kernel{Name: "moe_combine"}},
	}}}}
	if n := ly.phaseRecords(); n != 5 {
		t.Fatalf("phaseRecords = %d, want 5", n)
	}
	img := ly.phaseResetImage(16 * launch.PhaseSlots * 5)
	for r := range 5 {
		for s := range launch.PhaseSlots {
			if img[phaseWord(r, s, false)] != math.MaxUint64 || img[phaseWord(r, s, true)] != 0 {
				t.Fatalf("record %d slot %d: start %#x end %#x", r, s, img[phaseWord(r, s, false)], img[phaseWord(r, s, true)])
			}
		}
	}
}
