package main

import (
	"fmt"
	"maps"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/runtime"
	"github.com/mokc/mokc/schedule"
)

// backwardCost adds one backward to the cost c of a forward (forwardCost)
// of l. FLOPs: every GEMM the backward executes, 2 per multiply-add: per
// route FC1 recomputed (2I·H), dh = dy·FC2 (I·H), dxs = dgu·FC1 (2I·H)
// and the weight gradients (2I·H + H·I), 8·I·H multiply-adds in all (6·I·H
// with schedule.Layer.SaveFC1: no recompute), and 8·I_s·H per token for
// the shared experts. Bytes, compulsory: the weights of the active experts
// (and the shared ones) read once, their main grads (f32 or bf16) read and
// written once, dy and dx (bf16), the routing-weight gradient (f32 per
// slot) and, with SaveFC1, the saved FC1 output (f32 [routes, 2I]) read
// back (forwardCost counts its writing).
func backwardCost(l schedule.Layer, T int, c benchCost) benchCost {
	H, I, Is := float64(l.Hidden), float64(l.Intermediate), float64(l.SharedWidth())
	routed := 8.0
	if l.SaveFC1 {
		routed = 6
		c.bytes += float64(c.routes) * 2 * I * 4
	}
	c.flops += (float64(c.routes)*I*routed + float64(T)*Is*8) * H * 2
	grad := 4.0
	if l.MainGrad == schedule.GradBF16 {
		grad = 2
	}
	perElem := 2 + 2*grad // bf16 weight read, main grad read and written
	c.bytes += (float64(c.active)*3*I*H+3*Is*H)*perElem + 2*float64(T)*H*2 + float64(T*l.TopK)*4
	return c
}

// backwardBindings returns the bindings of Layer.Backward for one input set
// (args: the forward's, whose y it drops): dy (rounded to bf16), dx,
// the routing-weight gradient and the main grads, shared by every set
// through mainGrads (runtime.AllocMainGrads' tensors, the caller's to
// free; every backward adds to them; a main grad missing there is an
// error). free releases what it allocated.
func backwardBindings(ctx *driver.Context, ly *runtime.Layer, T int, dy []float32, args, mainGrads runtime.Bindings) (runtime.Bindings, func(), error) {
	specs, err := ly.BackwardBuffers()
	if err != nil {
		return nil, nil, err
	}
	var allocs []driver.DevicePtr
	free := func() {
		for _, p := range allocs {
			ctx.Free(p)
		}
	}
	b := runtime.Bindings{}
	maps.Copy(b, args)
	delete(b, moe.BufY)
	for _, s := range specs {
		if _, ok := b[s.Name]; ok || s.Kind == launch.BufInput && s.Name != moe.BufDY {
			continue
		}
		if s.Kind == launch.BufInOut {
			t, ok := mainGrads[s.Name]
			if !ok {
				free()
				return nil, nil, fmt.Errorf("backward: no main grad %s allocated (runtime.AllocMainGrads)", s.Name)
			}
			b[s.Name] = t
			continue
		}
		n := s.BytesAt(T)
		p, err := ctx.Alloc(max(n, 16))
		if err != nil {
			free()
			return nil, nil, err
		}
		t := runtime.NewTensor(p, n, s.DType, s.ShapeAt(T)...)
		allocs = append(allocs, p)
		if s.Name == moe.BufDY {
			err = ctx.CopyToDevice(p, runtime.ToBF16(dy))
		}
		if err != nil {
			free()
			return nil, nil, err
		}
		b[s.Name] = t
	}
	return b, free, nil
}
