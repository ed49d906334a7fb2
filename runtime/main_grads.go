package runtime

import (
	"fmt"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

// This file allocates the main grads Layer.Backward adds to, in the forms
// of the backward program's buffers: grouped tensors, and for per-expert
// weight storage one allocation per routed expert behind a pointer table.

// AllocMainGrads allocates, zeroed, every main grad Layer.Backward of layer
// l adds to (the inout buffers of moe.Backward(l), Layer.BackwardBuffers),
// in the main-grad dtype (schedule.Layer.MainGrad), as Bindings
// (DeviceTensors.Tensors, ready for Backward next to the forward's inputs,
// dy, dx and dw or dprobs): the grouped ones (fc1_grad [E,2I,H], fc2_grad
// [E,H,I], the biases' and the shared experts') one tensor each. With
// per-expert weight storage (schedule.PerExpertWeights) the routed
// experts' main grads are one allocation per expert, fc1 [2I,H] and fc2
// [H,I] (moe.Program.TableEntry), listed in order by the uploaded pointer
// tables fc1_grad_table and fc2_grad_table (u64 [E]); DeviceTensors.Experts
// holds those allocations by table name, entry e expert e's. Free releases
// everything. Errors: an invalid layer, and the driver's.
func AllocMainGrads(ctx *driver.Context, l schedule.Layer) (*DeviceTensors, error) {
	p, err := moe.Backward(l)
	if err != nil {
		return nil, fmt.Errorf("mokc runtime: main grads: %w", err)
	}
	d := &DeviceTensors{Tensors: Bindings{}, Experts: map[string][]Tensor{}, ctx: ctx}
	fail := func(err error) (*DeviceTensors, error) {
		d.Free()
		return nil, fmt.Errorf("mokc runtime: main grads of %s: %w", l.Name, err)
	}
	zeroed := func(dtype DType, shape ...int) (Tensor, error) {
		n := int(dtype.Size())
		for _, s := range shape {
			n *= s
		}
		ptr, err := d.put(n, func(p driver.DevicePtr) error { return ctx.Memset(p, 0, max(n, 16)) })
		if err != nil {
			return Tensor{}, err
		}
		return NewTensor(ptr, n, dtype, shape...), nil
	}
	for _, b := range p.Buffers {
		if b.Kind != launch.BufInOut {
			continue
		}
		if dt, shape, ok := p.TableEntry(b.Name); ok {
			table := make([]uint64, l.Experts)
			for e := range table {
				t, err := zeroed(dt, shape...)
				if err != nil {
					return fail(err)
				}
				d.Experts[b.Name] = append(d.Experts[b.Name], t)
				table[e] = uint64(t.Ptr)
			}
			if err := d.uploadTable(b.Name, table); err != nil {
				return fail(err)
			}
			continue
		}
		// Main grads do not depend on T.
		t, err := zeroed(b.DType, BufferSpec{DType: b.DType, Shape: b.Shape}.ShapeAt(0)...)
		if err != nil {
			return fail(err)
		}
		d.Tensors[b.Name] = t
	}
	return d, nil
}

// MainGradTensors returns every tensor of main grads that d holds (from
// AllocMainGrads), in no particular order: the grouped ones and each
// expert's allocation behind a pointer table, without the tables
// themselves: the tensors to zero, fill or read.
func (d *DeviceTensors) MainGradTensors() []Tensor {
	var out []Tensor
	for name, t := range d.Tensors {
		if _, table := d.Experts[name]; !table {
			out = append(out, t)
		}
	}
	for _, ts := range d.Experts {
		out = append(out, ts...)
	}
	return out
}

// uploadTable uploads the u64 [len(ptrs)] pointer table ptrs as d's tensor
// name.
func (d *DeviceTensors) uploadTable(name string, ptrs []uint64) error {
	t, err := d.upload(hostTensor{name: name, dtype: U64, shape: []int{len(ptrs)}, parts: []any{ptrs}})
	if err != nil {
		return err
	}
	d.Tensors[name] = t
	return nil
}
