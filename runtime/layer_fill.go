package runtime

import (
	"errors"
	"fmt"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

// This file uploads weights that are generated one expert at a time
// (WeightSource, implemented by schedule.WeightGen), for layers whose
// weights do not fit in host memory as float32 (schedule.Weights needs
// 12*E*I*H bytes for the routed experts: 100 GB for a DeepSeek-V4-Pro-sized
// layer). UploadWeights uses the same path for weights held in host memory.

// WeightSource generates the weights of a layer on demand, in the row
// orders of schedule.Weights: matrices as bf16 bits (the upper 16 bits of
// the binary32 value), biases as float32. Each method fills the slices it
// is given (of exactly the lengths named) and returns an error for an index
// out of range or a wrong length; it must give the same values every time
// it is called. *schedule.WeightGen implements it.
type WeightSource interface {
	// RoutedBF16 fills routed expert e's FC1 [2I*H] and FC2 [H*I].
	RoutedBF16(e int, fc1, fc2 []uint16) error
	// RoutedBias fills routed expert e's FC1 bias [2I] and FC2 bias [H]
	// (only called for layers with schedule.Layer.Biases).
	RoutedBias(e int, b1, b2 []float32) error
	// SharedBF16 fills shared expert s's FC1 [2I_s*H] (gate rows, then up
	// rows) and FC2 [H*I_s].
	SharedBF16(s int, fc1, fc2 []uint16) error
	// SharedGateBF16 fills the shared gate vector [H] (only called for
	// layers with schedule.Layer.SharedGate).
	SharedGateBF16(g []uint16) error
}

// WeightPart is one piece of a layer's weights as GenerateWeights hands it
// out, in the device layout of the program's buffer it belongs to.
type WeightPart struct {
	// Buffer is the name of the program's buffer (the key of Bindings):
	// moe.BufFC1, moe.BufFC2, moe.BufFC1Bias, moe.BufFC2Bias,
	// moe.BufSharedFC1, moe.BufSharedFC2 or moe.BufSharedGate.
	Buffer string
	// Expert is the routed expert of a moe.BufFC1 or moe.BufFC2 part, which
	// holds that expert's [2I, H] or [H, I] matrix; -1 for the other parts,
	// which hold the whole tensor.
	Expert int
	// DType and Shape are those of the whole buffer, e.g. BF16
	// [E, 2I, H] for every moe.BufFC1 part.
	DType DType
	Shape []int // dimensions of the whole tensor, outermost first
	// Data is the part's values: []uint16 (bf16 bits) or []float32. It is
	// valid only during the call that receives it (buffers are reused).
	Data any
}

// generatePipeline is the number of routed experts GenerateWeights holds at
// once: one being handed out, one being generated.
const generatePipeline = 2

// GenerateWeights generates the weights of l with src and calls put with
// each part in the layouts of the program's buffers (moe's names): fc1
// and fc2 of every routed expert in increasing expert order (FC1 [2I, H]
// and FC2 [H, I] bf16, one expert per part), then, with biases, fc1_bias
// f32 [E, 2I] and fc2_bias f32 [E, H], then, with shared experts,
// shared_fc1 bf16 [2*S*I_s, H] (every shared expert's gate rows, then every
// up row), shared_fc2 bf16 [H, S*I_s] and with the gate shared_gate bf16
// [H]. The next expert is generated while put handles
// the current one, so host memory holds two routed experts' bf16 weights
// (2 * 6*I*H bytes) and the shared and bias tensors, never the whole layer.
// The first error of src or put stops the generation and is returned.
func GenerateWeights(l schedule.Layer, src WeightSource, put func(WeightPart) error) error {
	if err := l.Validate(); err != nil {
		return fmt.Errorf("mokc runtime: weights: %w", err)
	}
	if src == nil {
		return errors.New("mokc runtime: weights: nil WeightSource")
	}
	H, I, E := l.Hidden, l.Intermediate, l.Experts
	type job struct {
		e        int
		fc1, fc2 []uint16
		err      error
	}
	free := make(chan job, generatePipeline)
	for range generatePipeline {
		free <- job{fc1: make([]uint16, 2*I*H), fc2: make([]uint16, H*I)}
	}
	ready := make(chan job, generatePipeline)
	done := make(chan struct{})
	go func() {
		defer close(ready)
		for e := 0; e < E; e++ {
			var j job
			select {
			case j = <-free:
			case <-done:
				return
			}
			j.e = e
			j.err = src.RoutedBF16(e, j.fc1, j.fc2)
			ready <- j
			if j.err != nil {
				return
			}
		}
	}()
	err := func() error {
		for j := range ready {
			if j.err != nil {
				return fmt.Errorf("mokc runtime: weights: expert %d: %w", j.e, j.err)
			}
			if err := put(WeightPart{Buffer: moe.BufFC1, Expert: j.e, DType: BF16, Shape: []int{E, 2 * I, H}, Data: j.fc1}); err != nil {
				return err
			}
			if err := put(WeightPart{Buffer: moe.BufFC2, Expert: j.e, DType: BF16, Shape: []int{E, H, I}, Data: j.fc2}); err != nil {
				return err
			}
			free <- j
		}
		return nil
	}()
	close(done)
	for range ready { // let the generator finish its current expert
	}
	if err != nil {
		return err
	}
	if l.Biases {
		b1, b2 := make([]float32, E*2*I), make([]float32, E*H)
		for e := 0; e < E; e++ {
			if err := src.RoutedBias(e, b1[e*2*I:(e+1)*2*I], b2[e*H:(e+1)*H]); err != nil {
				return fmt.Errorf("mokc runtime: weights: biases of expert %d: %w", e, err)
			}
		}
		if err := put(WeightPart{Buffer: moe.BufFC1Bias, Expert: -1, DType: F32, Shape: []int{E, 2 * I}, Data: b1}); err != nil {
			return err
		}
		if err := put(WeightPart{Buffer: moe.BufFC2Bias, Expert: -1, DType: F32, Shape: []int{E, H}, Data: b2}); err != nil {
			return err
		}
	}
	S, Is := l.SharedExperts, l.SharedIntermediate
	if S == 0 {
		return nil
	}
	s1 := make([]uint16, 2*S*Is*H) // gate rows of every expert, then up rows
	s2 := make([]uint16, H*S*Is)
	fc1, fc2 := make([]uint16, 2*Is*H), make([]uint16, H*Is)
	for s := 0; s < S; s++ {
		if err := src.SharedBF16(s, fc1, fc2); err != nil {
			return fmt.Errorf("mokc runtime: weights: shared expert %d: %w", s, err)
		}
		copy(s1[s*Is*H:(s+1)*Is*H], fc1[:Is*H])
		copy(s1[(S+s)*Is*H:(S+s+1)*Is*H], fc1[Is*H:])
		for h := 0; h < H; h++ {
			copy(s2[h*S*Is+s*Is:h*S*Is+(s+1)*Is], fc2[h*Is:(h+1)*Is])
		}
	}
	if err := put(WeightPart{Buffer: moe.BufSharedFC1, Expert: -1, DType: BF16, Shape: []int{2 * S * Is, H}, Data: s1}); err != nil {
		return err
	}
	if err := put(WeightPart{Buffer: moe.BufSharedFC2, Expert: -1, DType: BF16, Shape: []int{H, S * Is}, Data: s2}); err != nil {
		return err
	}
	if l.SharedGate {
		g := make([]uint16, H)
		if err := src.SharedGateBF16(g); err != nil {
			return fmt.Errorf("mokc runtime: weights: shared gate: %w", err)
		}
		return put(WeightPart{Buffer: moe.BufSharedGate, Expert: -1, DType: BF16, Shape: []int{H}, Data: g})
	}
	return nil
}

// UploadWeightSource is UploadWeights for weights generated by src one
// routed expert at a time (GenerateWeights): each expert's bf16 weights are
// generated on the host, copied into the grouped tensors fc1 [E, 2I, H]
// and fc2 [E, H, I] (or, with schedule.PerExpertWeights, into their own
// allocations listed by fc1_table/fc2_table) and dropped, while the next
// expert is generated. Host memory: two experts' bf16 weights plus the
// shared and bias tensors. On error every allocation is freed.
func UploadWeightSource(ctx *driver.Context, l schedule.Layer, src WeightSource) (*DeviceTensors, error) {
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("mokc runtime: weights: %w", err)
	}
	H, I, E := l.Hidden, l.Intermediate, l.Experts
	d := &DeviceTensors{Tensors: Bindings{}, ctx: ctx}
	fail := func(err error) (*DeviceTensors, error) {
		d.Free()
		return nil, err
	}
	perExpert := l.Storage == schedule.PerExpertWeights
	if l.Precision == schedule.MXFP8 {
		if perExpert {
			return nil, fmt.Errorf("mokc runtime: weights: mxfp8 weights with per-expert storage are not supported yet (grouped only)")
		}
		return uploadMXFP8(ctx, l, src)
	}
	var fc1, fc2 driver.DevicePtr
	var table1, table2 []uint64
	if perExpert {
		table1, table2 = make([]uint64, E), make([]uint64, E)
	} else {
		var err error
		if fc1, err = d.put(E*2*I*H*2, nil); err != nil {
			return fail(err)
		}
		if fc2, err = d.put(E*H*I*2, nil); err != nil {
			return fail(err)
		}
		d.Tensors[moe.BufFC1] = NewTensor(fc1, E*2*I*H*2, BF16, E, 2*I, H)
		d.Tensors[moe.BufFC2] = NewTensor(fc2, E*H*I*2, BF16, E, H, I)
	}
	err := GenerateWeights(l, src, func(p WeightPart) error {
		if p.Expert < 0 {
			return d.uploadWhole(p)
		}
		if perExpert {
			t, err := d.upload(hostTensor{dtype: BF16, parts: []any{p.Data}})
			if err != nil {
				return err
			}
			if p.Buffer == moe.BufFC1 {
				table1[p.Expert] = uint64(t.Ptr)
			} else {
				table2[p.Expert] = uint64(t.Ptr)
			}
			return nil
		}
		base, n := fc1, 2*I*H
		if p.Buffer == moe.BufFC2 {
			base, n = fc2, H*I
		}
		return ctx.CopyToDevice(base.Offset(p.Expert*n*2), p.Data)
	})
	if err != nil {
		return fail(err)
	}
	if perExpert {
		for _, tb := range []struct {
			name string
			v    []uint64
		}{{moe.BufFC1Table, table1}, {moe.BufFC2Table, table2}} {
			if err := d.uploadTable(tb.name, tb.v); err != nil {
				return fail(err)
			}
		}
	}
	return d, nil
}

// uploadMXFP8 is UploadWeightSource for an mxfp8 layer (grouped storage):
// each routed expert's bf16 weights from src are quantized on the host
// along K (layouts.MXFP8.QuantizeExpertBF16, round-up scale: the values
// schedule.WeightGen.Routed gives the reference) and copied into fc1 e4m3
// [E, 2I, H], fc2 e4m3 [E, H, I], fc1_scales ue8m0 [E, 2I, H/32] and
// fc2_scales ue8m0 [E, H, I/32]; the other tensors as for bf16.
func uploadMXFP8(ctx *driver.Context, l schedule.Layer, src WeightSource) (*DeviceTensors, error) {
	H, I, E := l.Hidden, l.Intermediate, l.Experts
	d := &DeviceTensors{Tensors: Bindings{}, ctx: ctx}
	fail := func(err error) (*DeviceTensors, error) {
		d.Free()
		return nil, err
	}
	type part struct {
		scales   string // the buffer of the scales
		rows, k  int
		q        *layouts.MXFP8
		data, sc driver.DevicePtr
	}
	parts := map[string]*part{
		moe.BufFC1: {scales: moe.BufFC1Scales, rows: 2 * I, k: H},
		moe.BufFC2: {scales: moe.BufFC2Scales, rows: H, k: I},
	}
	for name, p := range parts {
		var err error
		if p.q, err = layouts.NewMXFP8(1, p.rows, p.k, layouts.QuantizeOptions{}); err != nil {
			return fail(err)
		}
		n, ns := p.rows*p.k, p.rows*(p.k/layouts.MXBlockSize)
		if p.data, err = d.put(E*n, nil); err != nil {
			return fail(err)
		}
		if p.sc, err = d.put(E*ns, nil); err != nil {
			return fail(err)
		}
		d.Tensors[name] = NewTensor(p.data, E*n, E4M3, E, p.rows, p.k)
		d.Tensors[p.scales] = NewTensor(p.sc, E*ns, UE8M0, E, p.rows, p.k/layouts.MXBlockSize)
	}
	err := GenerateWeights(l, src, func(w WeightPart) error {
		if w.Expert < 0 {
			return d.uploadWhole(w)
		}
		p := parts[w.Buffer]
		if err := p.q.QuantizeExpertBF16(0, w.Data.([]uint16)); err != nil {
			return err
		}
		if err := ctx.CopyToDevice(p.data.Offset(w.Expert*len(p.q.Data)), p.q.Data); err != nil {
			return err
		}
		return ctx.CopyToDevice(p.sc.Offset(w.Expert*len(p.q.Scales)), p.q.Scales)
	})
	if err != nil {
		return fail(err)
	}
	return d, nil
}

// uploadWhole uploads a whole-tensor part of GenerateWeights (Expert < 0:
// biases, shared experts, the shared gate) under its buffer's name.
func (d *DeviceTensors) uploadWhole(p WeightPart) error {
	t, err := d.upload(hostTensor{name: p.Buffer, dtype: p.DType, shape: p.Shape, parts: []any{p.Data}})
	if err != nil {
		return err
	}
	d.Tensors[p.Buffer] = t
	return nil
}
