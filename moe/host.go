package moe

import (
	"fmt"
	"reflect"

	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/schedule"
)

// HostInputs packs a layer's host data into the Input buffers of p, by
// buffer name, in the layouts Forward and Backward give them: x and dy [T,H],
// the routing in the layer's form (ids as float64 integers, the routing
// map as 0/1), fc1 [E,2I,H] and fc2 [E,H,I] (the experts' matrices one
// after another), biases [E,2I] and [E,H], shared_fc1 [2*S*I_s,H] (every
// shared expert's gate rows, then every one's up rows) and shared_fc2
// [H,S*I_s] (the experts' columns side by side), shared_gate [H]. Each
// value is rounded to its buffer's dtype (bf16 for x, dy and the weights).
// For an mxfp8 layer fc1 and fc2 are quantized (mxHost): their e4m3 values
// and fc1_scales / fc2_scales, the ue8m0 codes.
// dy is read only by programs that have a dy buffer. Buffers p does not
// have are left out; pointer tables (PerExpertWeights) are an error, as
// is data of the wrong length. The backward's fc1_out (schedule.Layer.SaveFC1)
// is not host data but the forward's: it is left out too (take it from the
// forward's Interpret).
func HostInputs(p *Program, w schedule.Weights, x []float32, r schedule.Routing, dy []float32) (map[string][]float64, error) {
	l := p.Layer
	if l.Storage == schedule.PerExpertWeights {
		return nil, fmt.Errorf("moe: host inputs: per-expert weight storage has pointer tables")
	}
	all := map[string][]float64{BufX: f64(x), BufDY: f64(dy), BufFC1: flat(w.FC1), BufFC2: flat(w.FC2),
		BufFC1Bias: flat(w.FC1Bias), BufFC2Bias: flat(w.FC2Bias), BufSharedGate: f64(w.SharedGate)}
	if l.Routing == schedule.RoutingMap {
		m := make([]float64, len(r.Map))
		for i, on := range r.Map {
			if on {
				m[i] = 1
			}
		}
		all[BufRoutingMap], all[BufProbs] = m, f64(r.Probs)
	} else {
		ids := make([]float64, len(r.IDs))
		for i, id := range r.IDs {
			ids[i] = float64(id)
		}
		all[BufIDs], all[BufWeights] = ids, f64(r.Weights)
	}
	if l.SharedExperts > 0 {
		all[BufSharedFC1], all[BufSharedFC2] = SharedLayout(l, w.SharedFC1, w.SharedFC2)
	}
	if l.Precision == schedule.MXFP8 {
		var err error
		if all[BufFC1], all[BufFC1Scales], err = mxHost(w.FC1, 2*l.Intermediate, l.Hidden); err != nil {
			return nil, fmt.Errorf("moe: host inputs: fc1: %w", err)
		}
		if all[BufFC2], all[BufFC2Scales], err = mxHost(w.FC2, l.Hidden, l.Intermediate); err != nil {
			return nil, fmt.Errorf("moe: host inputs: fc2: %w", err)
		}
	}
	out := map[string][]float64{}
	for _, b := range p.Buffers {
		if b.Kind != Input || b.Name == BufFC1Out {
			continue
		}
		v, ok := all[b.Name]
		if !ok {
			return nil, fmt.Errorf("moe: host inputs: no host data for %s", b.Name)
		}
		for i := range v {
			v[i] = round(b.DType, v[i])
		}
		out[b.Name] = v
	}
	return out, nil
}

// mxHost quantizes every expert's [rows, k] matrix of m along k
// (layouts.Quantize, round-up scale; schedule.MXWeights gives the same
// values dequantized) into the e4m3 values and the ue8m0 scale codes of
// the program's buffers.
func mxHost(m [][]float32, rows, k int) (data, scales []float64, err error) {
	for e, x := range m {
		d, s, err := mxHostValues(x, rows, k)
		if err != nil {
			return nil, nil, fmt.Errorf("expert %d: %w", e, err)
		}
		data, scales = append(data, d...), append(scales, s...)
	}
	return data, scales, nil
}

// mxHostValues quantizes x [rows, k] along k (layouts.Quantize, default
// options: the round-up scale) into the host values of an e4m3 buffer
// (each element's E4M3 value, unscaled) and of its ue8m0 scales (the codes).
func mxHostValues(x []float32, rows, k int) (data, scales []float64, err error) {
	q, err := layouts.Quantize(x, 1, rows, k, layouts.QuantizeOptions{})
	if err != nil {
		return nil, nil, err
	}
	data, scales = make([]float64, len(q.Data)), make([]float64, len(q.Scales))
	for i, code := range q.Data {
		data[i] = float64(layouts.F32FromE4M3(code))
	}
	for i, code := range q.Scales {
		scales[i] = float64(code)
	}
	return data, scales, nil
}

// SharedLayout packs the S shared experts' FC1 [2I_s*H] and FC2 [H*I_s]
// (schedule.Weights' per-expert layout) into the program's concatenated
// layouts: fc1 [2*S*I_s, H] with every expert's gate rows, then every
// one's up rows; fc2 [H, S*I_s] with the experts' columns side by side. S
// experts of width I_s then compute the same as one of width S*I_s.
func SharedLayout(l schedule.Layer, fc1, fc2 [][]float32) (s1, s2 []float64) {
	H, S, Is := l.Hidden, l.SharedExperts, l.SharedIntermediate
	s1, s2 = make([]float64, 2*S*Is*H), make([]float64, H*S*Is)
	for s := 0; s < S; s++ {
		for i, v := range fc1[s] {
			row, col := i/H, i%H
			dst := s*Is + row // gate rows
			if row >= Is {
				dst = (S+s)*Is + row - Is // up rows
			}
			s1[dst*H+col] = float64(v)
		}
		for i, v := range fc2[s] {
			s2[(i/Is)*S*Is+s*Is+i%Is] = float64(v)
		}
	}
	return s1, s2
}

// f64 widens v (nil stays nil).
func f64(v []float32) []float64 {
	if v == nil {
		return nil
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// flat concatenates per-expert arrays.
func flat(s [][]float32) []float64 {
	var out []float64
	for _, v := range s {
		out = append(out, f64(v)...)
	}
	return out
}

// Isolate returns a program of op alone: the buffers it uses, each read
// operand an Input, each written one an Output and each accumulated one
// (ReadWrite) InOut; op itself unchanged. It runs one op of a program on
// its own, e.g. its kernel on the GPU against Interpret of the whole
// program. Errors: no op of that name.
func (p *Program) Isolate(name string) (*Program, error) {
	for _, op := range p.Ops {
		if op.Name() != name {
			continue
		}
		q := &Program{Layer: p.Layer}
		kinds := map[string]Kind{}
		for _, o := range op.Operands() {
			k := Input
			switch o.Access {
			case Write:
				k = Output
			case ReadWrite:
				k = InOut
			}
			if prev, ok := kinds[o.Buffer.Name]; ok {
				if prev != k {
					kinds[o.Buffer.Name] = InOut
				}
				continue
			}
			kinds[o.Buffer.Name] = k
			b := *o.Buffer
			q.Buffers = append(q.Buffers, &b)
		}
		for _, b := range q.Buffers {
			b.Kind = kinds[b.Name]
		}
		q.Ops = []Op{rebind(op, q)}
		return q, q.Check()
	}
	return nil, fmt.Errorf("moe: no op %s", name)
}

// rebind is a copy of op whose *Buffer fields point at q's buffers of the
// same names.
func rebind(op Op, q *Program) Op {
	v := reflect.New(reflect.TypeOf(op)).Elem()
	v.Set(reflect.ValueOf(op))
	for i := 0; i < v.NumField(); i++ {
		if b, ok := v.Field(i).Interface().(*Buffer); ok && b != nil {
			v.Field(i).Set(reflect.ValueOf(q.Buffer(b.Name)))
		}
	}
	return v.Interface().(Op)
}

// MainGradBuffers lays main grads in schedule.MainGrads form (per expert)
// out as Backward's main-grad buffers, by buffer name: fc1_grad [E,2I,H],
// fc2_grad [E,H,I], the biases' [E,2I] and [E,H], and the shared experts'
// in SharedLayout's concatenated layouts (shared_gate_grad [H]). Entries
// mg does not hold are left out. Values are not rounded. For per-expert
// storage, whose routed main grads are the allocations behind
// fc1_grad_table and fc2_grad_table, fc1_grad and fc2_grad are those
// allocations' contents one after another in expert order (expert e's
// [2I*H] or [H*I] values at e*2I*H or e*H*I).
func MainGradBuffers(l schedule.Layer, mg schedule.MainGrads) map[string][]float64 {
	out := map[string][]float64{}
	put := func(name string, v []float64) {
		if len(v) > 0 {
			out[name] = v
		}
	}
	put(BufFC1Grad, flat(mg.FC1))
	put(BufFC2Grad, flat(mg.FC2))
	put(BufFC1BiasGrad, flat(mg.FC1Bias))
	put(BufFC2BiasGrad, flat(mg.FC2Bias))
	if l.SharedExperts > 0 && len(mg.SharedFC1) == l.SharedExperts && len(mg.SharedFC2) == l.SharedExperts {
		s1, s2 := SharedLayout(l, mg.SharedFC1, mg.SharedFC2)
		put(BufSharedFC1Grad, s1)
		put(BufSharedFC2Grad, s2)
	}
	put(BufSharedGateGrad, f64(mg.SharedGate))
	return out
}

// MainGradsOf is the inverse of MainGradBuffers: Backward's main-grad
// buffers (by name, in the program's layouts) as schedule.MainGrads, one
// array per expert. Buffers not in bufs stay nil (schedule.Backward then
// skips those gradients).
func MainGradsOf(l schedule.Layer, bufs map[string][]float64) schedule.MainGrads {
	H, I, S, Is := l.Hidden, l.Intermediate, l.SharedExperts, l.SharedIntermediate
	mg := schedule.MainGrads{FC1: split(bufs[BufFC1Grad], 2*I*H), FC2: split(bufs[BufFC2Grad], H*I),
		FC1Bias: split(bufs[BufFC1BiasGrad], 2*I), FC2Bias: split(bufs[BufFC2BiasGrad], H)}
	if s1, s2 := bufs[BufSharedFC1Grad], bufs[BufSharedFC2Grad]; S > 0 && s1 != nil && s2 != nil {
		mg.SharedFC1, mg.SharedFC2 = make([][]float32, S), make([][]float32, S)
		for s := 0; s < S; s++ {
			mg.SharedFC1[s], mg.SharedFC2[s] = make([]float32, 2*Is*H), make([]float32, H*Is)
			for i := range mg.SharedFC1[s] {
				row, col := i/H, i%H
				src := s*Is + row // gate rows
				if row >= Is {
					src = (S+s)*Is + row - Is // up rows
				}
				mg.SharedFC1[s][i] = float32(s1[src*H+col])
			}
			for i := range mg.SharedFC2[s] {
				mg.SharedFC2[s][i] = float32(s2[(i/Is)*S*Is+s*Is+i%Is])
			}
		}
	}
	if g := split(bufs[BufSharedGateGrad], H); g != nil {
		mg.SharedGate = g[0]
	}
	return mg
}

// split cuts v into arrays of n float32 (nil for nil).
func split(v []float64, n int) [][]float32 {
	if v == nil {
		return nil
	}
	out := make([][]float32, len(v)/n)
	for i := range out {
		out[i] = make([]float32, n)
		for j := range out[i] {
			out[i][j] = float32(v[i*n+j])
		}
	}
	return out
}
