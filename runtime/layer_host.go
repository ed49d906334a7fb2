package runtime

import (
	"errors"
	"fmt"
	"math"

	"github.com/mokc/mokc/schedule"
)

// This file moves a layer's host-side data (schedule.Weights, an input x
// and a schedule.Routing, the forms the float64 reference reads) to device
// tensors in the layouts ForwardArgs describes, for tests, the mokc CLI and
// callers that start from host memory.

// ToBF16 rounds each value to the nearest bfloat16 (round to nearest even,
// schedule.RoundBF16) and returns its 16 bits: the upper half of the IEEE
// binary32 encoding.
func ToBF16(v []float32) []uint16 {
	out := make([]uint16, len(v))
	for i, x := range v {
		out[i] = uint16(math.Float32bits(schedule.RoundBF16(x)) >> 16)
	}
	return out
}

// FromBF16 widens bfloat16 bits to float32 (exact).
func FromBF16(b []uint16) []float32 {
	out := make([]float32, len(b))
	for i, x := range b {
		out[i] = math.Float32frombits(uint32(x) << 16)
	}
	return out
}

// DeviceTensors are device allocations made by UploadWeights or
// UploadInputs, described by the ForwardArgs fields they fill (Args; its
// other fields are zero). Free releases them.
type DeviceTensors struct {
	Args  ForwardArgs
	ctx   *Context
	alloc []DevicePtr
}

// SetIn copies every tensor d holds into the same field of a.
func (d *DeviceTensors) SetIn(a *ForwardArgs) {
	for _, name := range argOrder {
		f := argFields[name]
		if t := f.get(&d.Args); !t.IsZero() {
			*f.get(a) = *t
		}
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
	d.alloc, d.Args = nil, ForwardArgs{}
	return errors.Join(errs...)
}

// put allocates bytes (at least 16) and fills them by calling fill with the
// allocation; on error the allocation is kept in d for Free.
func (d *DeviceTensors) put(bytes int, fill func(p DevicePtr) error) (DevicePtr, error) {
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
	field string
	dtype DType
	shape []int
	parts []any // []uint16 (bf16), []float32, []int32, []uint8, in order
}

// packWeights returns the weight tensors of l in ForwardArgs layouts from
// w: FC1 [E, 2I, H] and FC2 [E, H, I] bf16 (one part per expert; per-expert
// storage uploads each part separately and builds the pointer tables),
// biases f32 [E, 2I] and [E, H], SharedFC1 [2*S*I_s, H] with the gate rows
// of every shared expert first, then the up rows, SharedFC2 [H, S*I_s] (the
// shared experts' FC2 side by side along I), SharedGate [H]. Weight values
// are rounded to bf16. A slice of the wrong length is an error naming it.
func packWeights(l schedule.Layer, w schedule.Weights) ([]hostTensor, error) {
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
		return nil, err
	}
	if err := check("FC2", w.FC2, E, H*I); err != nil {
		return nil, err
	}
	var out []hostTensor
	fc1 := hostTensor{field: "fc1", dtype: BF16, shape: []int{E, 2 * I, H}}
	fc2 := hostTensor{field: "fc2", dtype: BF16, shape: []int{E, H, I}}
	for e := 0; e < E; e++ {
		fc1.parts = append(fc1.parts, ToBF16(w.FC1[e]))
		fc2.parts = append(fc2.parts, ToBF16(w.FC2[e]))
	}
	out = append(out, fc1, fc2)
	if l.Biases {
		if err := check("FC1Bias", w.FC1Bias, E, 2*I); err != nil {
			return nil, err
		}
		if err := check("FC2Bias", w.FC2Bias, E, H); err != nil {
			return nil, err
		}
		b1 := hostTensor{field: "fc1_bias", dtype: F32, shape: []int{E, 2 * I}}
		b2 := hostTensor{field: "fc2_bias", dtype: F32, shape: []int{E, H}}
		for e := 0; e < E; e++ {
			b1.parts = append(b1.parts, w.FC1Bias[e])
			b2.parts = append(b2.parts, w.FC2Bias[e])
		}
		out = append(out, b1, b2)
	}
	if S > 0 {
		if err := check("SharedFC1", w.SharedFC1, S, 2*Is*H); err != nil {
			return nil, err
		}
		if err := check("SharedFC2", w.SharedFC2, S, H*Is); err != nil {
			return nil, err
		}
		s1 := hostTensor{field: "shared_fc1", dtype: BF16, shape: []int{2 * S * Is, H}}
		for _, m := range w.SharedFC1 {
			s1.parts = append(s1.parts, ToBF16(m[:Is*H]))
		}
		for _, m := range w.SharedFC1 {
			s1.parts = append(s1.parts, ToBF16(m[Is*H:]))
		}
		packed := make([]float32, 0, H*S*Is)
		for h := 0; h < H; h++ {
			for s := 0; s < S; s++ {
				packed = append(packed, w.SharedFC2[s][h*Is:(h+1)*Is]...)
			}
		}
		out = append(out, s1, hostTensor{field: "shared_fc2", dtype: BF16, shape: []int{H, S * Is}, parts: []any{ToBF16(packed)}})
		if l.SharedGate {
			if len(w.SharedGate) != H {
				return nil, fmt.Errorf("mokc runtime: weights: SharedGate has %d values, want %d", len(w.SharedGate), H)
			}
			out = append(out, hostTensor{field: "shared_gate", dtype: BF16, shape: []int{H}, parts: []any{ToBF16(w.SharedGate)}})
		}
	}
	return out, nil
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
	p, err := d.put(n, func(p DevicePtr) error {
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
// of ForwardArgs (see packWeights): grouped tensors FC1/FC2, or with
// schedule.PerExpertWeights one allocation per expert and the pointer
// tables FC1Table/FC2Table; biases and shared-expert weights as the layer
// has them. Values are rounded to bf16 (weights) or kept f32 (biases).
func UploadWeights(ctx *Context, l schedule.Layer, w schedule.Weights) (*DeviceTensors, error) {
	if err := l.Validate(); err != nil {
		return nil, fmt.Errorf("mokc runtime: weights: %w", err)
	}
	hts, err := packWeights(l, w)
	if err != nil {
		return nil, err
	}
	d := &DeviceTensors{ctx: ctx}
	fail := func(err error) (*DeviceTensors, error) {
		d.Free()
		return nil, err
	}
	for _, h := range hts {
		if l.Storage == schedule.PerExpertWeights && (h.field == "fc1" || h.field == "fc2") {
			table := make([]uint64, len(h.parts))
			for e, part := range h.parts {
				t, err := d.upload(hostTensor{dtype: BF16, parts: []any{part}})
				if err != nil {
					return fail(err)
				}
				table[e] = uint64(t.Ptr)
			}
			t, err := d.upload(hostTensor{dtype: U64, shape: []int{len(table)}, parts: []any{table}})
			if err != nil {
				return fail(err)
			}
			*argFields[h.field+"_table"].get(&d.Args) = t
			continue
		}
		t, err := d.upload(h)
		if err != nil {
			return fail(err)
		}
		*argFields[h.field].get(&d.Args) = t
	}
	return d, nil
}

// UploadInputs copies an input x [T*H] (rounded to bf16) and its routing r
// (in l.Routing's form: ids i32 [T,K] + weights f32 [T,K], or the map as u8
// [T,E] + probs f32 [T,E]) to the device and allocates the output y bf16
// [T,H] (not initialised). T = len(x)/H; at T = 0 the tensors have null
// pointers.
func UploadInputs(ctx *Context, l schedule.Layer, x []float32, r schedule.Routing) (*DeviceTensors, error) {
	H, E, K := l.Hidden, l.Experts, l.TopK
	if H <= 0 || len(x)%H != 0 {
		return nil, fmt.Errorf("mokc runtime: inputs: x has %d values, not a multiple of H = %d", len(x), H)
	}
	T := len(x) / H
	var hts []hostTensor
	hts = append(hts, hostTensor{field: "x", dtype: BF16, shape: []int{T, H}, parts: []any{ToBF16(x)}})
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
		hts = append(hts, hostTensor{field: "routing_map", dtype: U8, shape: []int{T, E}, parts: []any{m}},
			hostTensor{field: "probs", dtype: F32, shape: []int{T, E}, parts: []any{r.Probs}})
	} else {
		if len(r.IDs) != T*K || len(r.Weights) != T*K {
			return nil, fmt.Errorf("mokc runtime: inputs: %d ids and %d weights, want T*K = %d", len(r.IDs), len(r.Weights), T*K)
		}
		hts = append(hts, hostTensor{field: "ids", dtype: I32, shape: []int{T, K}, parts: []any{r.IDs}},
			hostTensor{field: "weights", dtype: F32, shape: []int{T, K}, parts: []any{r.Weights}})
	}
	d := &DeviceTensors{ctx: ctx}
	for _, h := range hts {
		if T == 0 {
			*argFields[h.field].get(&d.Args) = NewTensor(0, 0, h.dtype, h.shape...)
			continue
		}
		t, err := d.upload(h)
		if err != nil {
			d.Free()
			return nil, err
		}
		*argFields[h.field].get(&d.Args) = t
	}
	if T == 0 {
		d.Args.Y = NewTensor(0, 0, BF16, 0, H)
		return d, nil
	}
	y, err := d.put(2*T*H, nil)
	if err != nil {
		d.Free()
		return nil, err
	}
	d.Args.Y = NewTensor(y, 2*T*H, BF16, T, H)
	return d, nil
}
