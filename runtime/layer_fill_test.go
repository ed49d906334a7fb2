package runtime

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

// fillLayers are small layers covering every part GenerateWeights writes:
// biases with interleaved gate/up, several shared experts with the gate,
// and a plain layer.
func fillLayers() []schedule.Layer {
	return []schedule.Layer{
		{Name: "gpt-oss-like", Hidden: 24, Intermediate: 16, Experts: 5, TopK: 2,
			Activation: schedule.GPTOSS, SwiGLULimit: 7, GPTOSSAlpha: 1.702, GateUpInterleaved: true, Biases: true},
		{Name: "shared+gate", Hidden: 16, Intermediate: 8, Experts: 3, TopK: 2,
			SharedExperts: 3, SharedIntermediate: 24, SharedGate: true},
		{Name: "plain", Hidden: 32, Intermediate: 24, Experts: 7, TopK: 3},
	}
}

// TestGenerateWeightsMatchesPack checks that the parts GenerateWeights
// hands out, put together, are byte for byte the tensors UploadWeights
// copies (packWeights) from the same weights materialised as
// schedule.Weights.
func TestGenerateWeightsMatchesPack(t *testing.T) {
	for _, l := range fillLayers() {
		g, err := schedule.NewWeightGen(l, rand.Uint64())
		if err != nil {
			t.Fatal(err)
		}
		hts, err := packWeights(l, g.Weights())
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]byte{}
		for _, h := range hts {
			want[h.name] = hostTensorBytes(h.parts)
		}
		got := map[string][]byte{}
		bufs := map[uintptr]bool{}
		next := map[string]int{}
		err = GenerateWeights(l, g, func(p WeightPart) error {
			if p.Expert >= 0 {
				if p.Expert != next[p.Buffer] {
					t.Errorf("%s: %s part of expert %d, want expert %d", l.Name, p.Buffer, p.Expert, next[p.Buffer])
				}
				next[p.Buffer]++
				bufs[uintptr(unsafe.Pointer(&p.Data.([]uint16)[0]))] = true
			} else if _, dup := got[p.Buffer]; dup {
				t.Errorf("%s: %s handed out twice", l.Name, p.Buffer)
			}
			wantShape := map[string][]int{
				moe.BufFC1: {l.Experts, 2 * l.Intermediate, l.Hidden}, moe.BufFC2: {l.Experts, l.Hidden, l.Intermediate},
				moe.BufFC1Bias: {l.Experts, 2 * l.Intermediate}, moe.BufFC2Bias: {l.Experts, l.Hidden},
				moe.BufSharedFC1: {2 * l.SharedWidth(), l.Hidden}, moe.BufSharedFC2: {l.Hidden, l.SharedWidth()},
				moe.BufSharedGate: {l.Hidden}}[p.Buffer]
			if !slices.Equal(p.Shape, wantShape) {
				t.Errorf("%s: %s shape %v, want %v", l.Name, p.Buffer, p.Shape, wantShape)
			}
			got[p.Buffer] = append(got[p.Buffer], hostTensorBytes([]any{p.Data})...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Errorf("%s: fields %v, want those of packWeights (%d)", l.Name, keys(got), len(want))
		}
		for f, w := range want {
			if !slices.Equal(got[f], w) {
				t.Errorf("%s: %s differs from packWeights (%d vs %d bytes)", l.Name, f, len(got[f]), len(w))
			}
		}
		if len(bufs) > generatePipeline*2 {
			t.Errorf("%s: routed parts in %d distinct buffers, want at most %d (reused)", l.Name, len(bufs), generatePipeline*2)
		}
	}
}

func keys(m map[string][]byte) []string {
	var k []string
	for f := range m {
		k = append(k, f)
	}
	slices.Sort(k)
	return k
}

// hostTensorBytes returns the bytes of host arrays written back to back.
func hostTensorBytes(parts []any) []byte {
	var out []byte
	for _, p := range parts {
		n := partBytes(p)
		if n == 0 {
			continue
		}
		var ptr unsafe.Pointer
		switch v := p.(type) {
		case []uint16:
			ptr = unsafe.Pointer(&v[0])
		case []float32:
			ptr = unsafe.Pointer(&v[0])
		case []uint64:
			ptr = unsafe.Pointer(&v[0])
		}
		out = append(out, unsafe.Slice((*byte)(ptr), n)...)
	}
	return out
}

// failingSource fails on one expert.
type failingSource struct {
	WeightSource
	bad int
}

func (f failingSource) RoutedBF16(e int, fc1, fc2 []uint16) error {
	if e == f.bad {
		return errors.New("source broke")
	}
	return f.WeightSource.RoutedBF16(e, fc1, fc2)
}

func TestGenerateWeightsErrors(t *testing.T) {
	l := fillLayers()[2]
	g, _ := schedule.NewWeightGen(l, 3)
	// An error of put stops the generation at once.
	calls := 0
	err := GenerateWeights(l, g, func(p WeightPart) error {
		calls++
		if p.Buffer == moe.BufFC2 && p.Expert == 2 {
			return errors.New("sink full")
		}
		return nil
	})
	if err == nil || err.Error() != "sink full" || calls != 6 {
		t.Errorf("put error: %v after %d calls, want \"sink full\" after 6", err, calls)
	}
	// An error of the source names the expert.
	calls = 0
	err = GenerateWeights(l, failingSource{g, 4}, func(WeightPart) error { calls++; return nil })
	if err == nil || !strings.Contains(err.Error(), "expert 4: source broke") || calls != 8 {
		t.Errorf("source error: %v after %d calls", err, calls)
	}
	if err := GenerateWeights(schedule.Layer{}, g, func(WeightPart) error { return nil }); err == nil {
		t.Error("invalid layer: want an error")
	}
	if err := GenerateWeights(l, nil, func(WeightPart) error { return nil }); err == nil {
		t.Error("nil source: want an error")
	}
	// A source of another layer: wrong lengths are errors, not panics.
	other, _ := schedule.NewWeightGen(fillLayers()[0], 1)
	if err := GenerateWeights(l, other, func(WeightPart) error { return nil }); err == nil {
		t.Error("source of another layer: want an error")
	}
	// Without a device the upload fails cleanly.
	if _, err := UploadWeightSource(nil, l, g); err == nil {
		t.Error("UploadWeightSource without a context: want an error")
	}
}
