package runtime

import (
	"errors"
	"fmt"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

// This file moves a layer's host-side data (schedule.Weights, an input x
// and a schedule.Routing, the forms the float64 reference reads) to device
// tensors in the layouts of the program's buffers (Bindings), for tests,
// the mokc CLI and callers that start from host memory.

// ToBF16 rounds each value to the nearest bfloat16 (round to nearest even,
// layouts.BF16FromF32) and returns its 16 bits: the upper half of the IEEE
// binary32 encoding.
func ToBF16(v []float32) []uint16 {
	out := make([]uint16, len(v))
	layouts.BF16FromF32Slice(out, v) // same lengths: cannot fail
	return out
}

// FromBF16 widens bfloat16 bits to float32 (exact; layouts.F32FromBF16).
func FromBF16(b []uint16) []float32 {
	out := make([]float32, len(b))
	layouts.F32FromBF16Slice(out, b) // same lengths: cannot fail
	return out
}

// DeviceTensors are device allocations made by UploadWeights,
// UploadWeightSource, UploadInputs or AllocMainGrads, keyed by the buffers
// they fill (Bindings). Free releases them.
type DeviceTensors struct {
	Tensors Bindings // the uploaded tensors by buffer name
	// Experts holds, by the name of a pointer table in Tensors, the
	// per-expert allocations its entries point at, entry e expert e's
	// (AllocMainGrads: the main grads of per-expert storage); nil or
	// without the table where they are not the caller's to see.
	Experts map[string][]Tensor
	ctx     *driver.Context
	alloc   []driver.DevicePtr
}

// SetIn copies every tensor d holds into b under its buffer name.
func (d *DeviceTensors) SetIn(b Bindings) {
	for name, t := range d.Tensors {
		b[name] = t
	}
}

// Free releases every allocation; the tensors must not be used afterwards.
func (d *DeviceTensors) Free() error {
	if d == nil {
		return nil
	}
	var errs []error
	for _, p := range d.alloc {
		errs = append(errs, d.ctx.Free(p))
	}
	d.alloc, d.Tensors, d.Experts = nil, nil, nil
	return errors.Join(errs...)
}

// put allocates bytes (at least 16) and fills them by calling fill with the
// allocation; on error the allocation is kept in d for Free.
func (d *DeviceTensors) put(bytes int, fill func(p driver.DevicePtr) error) (driver.DevicePtr, error) {
	p, err := d.ctx.Alloc(max(bytes, 16))
	if err != nil {
		return 0, err
	}
	d.alloc = append(d.alloc, p)
	if fill != nil {
		if err := fill(p); err != nil {
			return 0, err
		}
	}
	return p, nil
}

// hostTensor is one tensor of a layer in host memory, as the device wants
// it: the arrays are written one after another from the tensor's start.
type hostTensor struct {
	name  string // buffer name
	dtype DType
	shape []int
	parts []any // []uint16 (bf16), []float32, []int32, []uint8, in order
}

// checkWeights checks that w holds every tensor layer l needs, each of its
// length (schedule.Weights' shapes), and names the first one that does not.
func checkWeights(l schedule.Layer, w schedule.Weights) error {
	H, I, E := l.Hidden, l.Intermediate, l.Experts
	S, Is := l.SharedExperts, l.SharedIntermediate
	check := func(name string, got [][]float32, n, each int) error {
		if len(got) != n {
			return fmt.Errorf("mokc runtime: weights: %s has %d entries, want %d", name, len(got), n)
		}
		for i, v := range got {
			if len(v) != each {
				return fmt.Errorf("mokc runtime: weights: %s[%d] has %d values, want %d", name, i, len(v), each)
			}
		}
		return nil
	}
	if err := check("FC1", w.FC1, E, 2*I*H); err != nil {
		return err
	}
	if err := check("FC2", w.FC2, E, H*I); err != nil {
		return err
	}
	if l.Biases {
		if err := check("FC1Bias", w.FC1Bias, E, 2*I); err != nil {
			return err
		}
		if err := check("FC2Bias", w.FC2Bias, E, H); err != nil {
			return err
		}
	}
	if S > 0 {
		if err := check("SharedFC1", w.SharedFC1, S, 2*Is*H); err != nil {
			return err
		}
		if err := check("SharedFC2", w.SharedFC2, S, H*Is); err != nil {
			return err
		}
		if l.SharedGate && len(w.SharedGate) != H {
			return fmt.Errorf("mokc runtime: weights: SharedGate has %d values, want %d", len(w.SharedGate), H)
		}
	}
	return nil
}

// materialWeights is the WeightSource of weights held in host memory
// (schedule.Weights, checked by checkWeights), rounded to bf16 as they are
// handed out.
type materialWeights struct{ w schedule.Weights }

func (m materialWeights) RoutedBF16(e int, fc1, fc2 []uint16) error {
	return errors.Join(layouts.BF16FromF32Slice(fc1, m.w.FC1[e]), layouts.BF16FromF32Slice(fc2, m.w.FC2[e]))
}

func (m materialWeights) RoutedBias(e int, b1, b2 []float32) error {
	copy(b1, m.w.FC1Bias[e])
	copy(b2, m.w.FC2Bias[e])
	return nil
}

func (m materialWeights) SharedBF16(s int, fc1, fc2 []uint16) error {
	return errors.Join(layouts.BF16FromF32Slice(fc1, m.w.SharedFC1[s]), layouts.BF16FromF32Slice(fc2, m.w.SharedFC2[s]))
}

func (m materialWeights) SharedGateBF16(g []uint16) error {
	return layouts.BF16FromF32Slice(g, m.w.SharedGate)
}

// partBytes returns the size of one host array in bytes.
func partBytes(v any) int {
	switch v := v.(type) {
	case []uint16:
		return 2 * len(v)
	case []float32:
		return 4 * len(v)
	case []int32:
		return 4 * len(v)
	case []uint8:
		return len(v)
	case []uint64:
		return 8 * len(v)
	}
	return 0
}

// upload allocates one device tensor for h and copies its parts into it
// back to back.
func (d *DeviceTensors) upload(h hostTensor) (Tensor, error) {
	n := 0
	for _, p := range h.parts {
		n += partBytes(p)
	}
	p, err := d.put(n, func(p driver.DevicePtr) error {
		off := 0
		for _, part := range h.parts {
			if partBytes(part) > 0 {
				if err := d.ctx.CopyToDevice(p.Offset(off), part); err != nil {
					return err
				}
			}
			off += partBytes(part)
		}
		return nil
	})
	if err != nil {
		return Tensor{}, err
	}
	return NewTensor(p, n, h.dtype, h.shape...), nil
}

// UploadWeights copies the weights of layer l to the device in the layouts
// of the program's buffers (those of GenerateWeights): grouped tensors
// moe.BufFC1/moe.BufFC2, or with schedule.PerExpertWeights one allocation
// per expert and the pointer tables moe.BufFC1Table/moe.BufFC2Table;
// biases and shared-expert weights as the layer has them. Values are
// rounded to bf16 (weights) or kept f32 (biases). A tensor of the wrong
// length is an error naming it.
func UploadWeights(ctx *driver.Context, l schedule.Layer, w schedule.Weights) (*DeviceTensors, error) {
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("mokc runtime: weights: %w", err)
	}
	if err := checkWeights(l, w); err != nil {
		return nil, err
	}
	return UploadWeightSource(ctx, l, materialWeights{w})
}

// UploadInputs copies an input x [T*H] (rounded to bf16; buffer moe.BufX)
// and its routing r (in l.Routing's form: moe.BufIDs i32 [T,K] +
// moe.BufWeights f32 [T,K], or the map as moe.BufRoutingMap u8 [T,E] +
// moe.BufProbs f32 [T,E]) to the device and allocates the output moe.BufY
// bf16 [T,H] (not initialised). T = len(x)/H; at T = 0 the tensors have
// null pointers.
func UploadInputs(ctx *driver.Context, l schedule.Layer, x []float32, r schedule.Routing) (*DeviceTensors, error) {
	H, E, K := l.Hidden, l.Experts, l.TopK
	if H <= 0 || len(x)%H != 0 {
		return nil, fmt.Errorf("mokc runtime: inputs: x has %d values, not a multiple of H = %d", len(x), H)
	}
	T := len(x) / H
	var hts []hostTensor
	hts = append(hts, hostTensor{name: moe.BufX, dtype: BF16, shape: []int{T, H}, parts: []any{ToBF16(x)}})
	if l.Routing == schedule.RoutingMap {
		if len(r.Map) != T*E || len(r.Probs) != T*E {
			return nil, fmt.Errorf("mokc runtime: inputs: routing map of %d and probs of %d entries, want T*E = %d", len(r.Map), len(r.Probs), T*E)
		}
		m := make([]uint8, len(r.Map))
		for i, b := range r.Map {
			if b {
				m[i] = 1
			}
		}
		hts = append(hts, hostTensor{name: moe.BufRoutingMap, dtype: U8, shape: []int{T, E}, parts: []any{m}},
			hostTensor{name: moe.BufProbs, dtype: F32, shape: []int{T, E}, parts: []any{r.Probs}})
	} else {
		if len(r.IDs) != T*K || len(r.Weights) != T*K {
			return nil, fmt.Errorf("mokc runtime: inputs: %d ids and %d weights, want T*K = %d", len(r.IDs), len(r.Weights), T*K)
		}
		hts = append(hts, hostTensor{name: moe.BufIDs, dtype: I32, shape: []int{T, K}, parts: []any{r.IDs}},
			hostTensor{name: moe.BufWeights, dtype: F32, shape: []int{T, K}, parts: []any{r.Weights}})
	}
	d := &DeviceTensors{Tensors: Bindings{}, ctx: ctx}
	for _, h := range hts {
		if T == 0 {
			d.Tensors[h.name] = NewTensor(0, 0, h.dtype, h.shape...)
			continue
		}
		t, err := d.upload(h)
		if err != nil {
			d.Free()
			return nil, err
		}
		d.Tensors[h.name] = t
	}
	if T == 0 {
		d.Tensors[moe.BufY] = NewTensor(0, 0, BF16, 0, H)
		return d, nil
	}
	y, err := d.put(2*T*H, nil)
	if err != nil {
		d.Free()
		return nil, err
	}
	d.Tensors[moe.BufY] = NewTensor(y, 2*T*H, BF16, T, H)
	return d, nil
}
