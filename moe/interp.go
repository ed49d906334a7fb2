package moe

import (
	"fmt"
	"math"

	"github.com/mokc/mokc/internal/parallel"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/layouts"
	"github.com/mokc/mokc/schedule"
)

// Interpret runs program p for T tokens on the host, one op after another
// as the ops' doc comments define them: the executable meaning of a
// program, against which its lowering is checked and which is itself
// checked against schedule.Forward and schedule.Backward. Values are
// float64 rounded on every store to the buffer's dtype (bf16 round to
// nearest even through fp32, f32), so every rounding point of the program
// is the one the kernels have; sums run in float64 where the kernels use
// fp32, so results differ from a kernel's by fp32 rounding only.
//
// bind holds every Input and InOut buffer, by name, with the number of
// elements of its shape at T (integers and bytes as float64). Outputs and
// scratch start as NaN, so a value read before it is written shows.
// Interpret returns every buffer of the program, bound ones included (InOut
// buffers are updated in place). Pointer tables (Table storage: the weights
// of per-expert storage, and the backward's per-expert main grads) hold
// device addresses the host cannot follow: such programs are an error
// naming the table. The same layer with grouped storage computes the same
// values.
func Interpret(p *Program, T int, bind map[string][]float64) (map[string][]float64, error) {
	if T < 0 {
		return nil, fmt.Errorf("moe: interpret: T = %d", T)
	}
	for _, b := range p.Buffers {
		if b.DType == U64 {
			return nil, fmt.Errorf("moe: interpret: %s is a pointer table (u64 device pointers, per-expert storage): the host interpreter cannot follow device pointers; interpret the layer with grouped storage (schedule.GroupedWeights) instead", b.Name)
		}
	}
	in := &interp{p: p, T: T, v: map[*Buffer][]float64{}}
	out := map[string][]float64{}
	for _, b := range p.Buffers {
		n := int(b.Len(int64(T)))
		switch v, ok := bind[b.Name]; {
		case b.Kind == Input || b.Kind == InOut:
			if !ok || len(v) != n {
				return nil, fmt.Errorf("moe: interpret: %s %s needs %d values at T = %d, got %d (bound: %v)", b.Kind, b.Name, n, T, len(v), ok)
			}
			in.v[b] = v
		default:
			v := make([]float64, n)
			for i := range v {
				v[i] = math.NaN()
			}
			if b.Name == BufErr {
				v[1] = 0 // the word kept across runs: the launcher's, zero at allocation
			}
			in.v[b] = v
		}
		out[b.Name] = in.v[b]
	}
	for _, op := range p.Ops {
		if err := in.run(op); err != nil {
			return nil, fmt.Errorf("moe: interpret %s: %w", op.Name(), err)
		}
	}
	return out, nil
}

// interp is the state of one Interpret call.
type interp struct {
	p *Program
	T int
	v map[*Buffer][]float64
}

// round is v rounded to dtype d (e4m3: through f32 to nearest even,
// saturating; ue8m0 values are the codes 0..255).
func round(d DType, v float64) float64 {
	switch d {
	case BF16:
		return float64(schedule.RoundBF16(float32(v)))
	case F32:
		return float64(float32(v))
	case E4M3:
		return float64(layouts.F32FromE4M3(layouts.E4M3FromF32(float32(v))))
	}
	return v
}

// set stores v rounded to b's dtype at element i of b.
func (in *interp) set(b *Buffer, i int, v float64) { in.v[b][i] = round(b.DType, v) }

// run executes one op.
func (in *interp) run(op Op) error {
	switch o := op.(type) {
	case Init:
		clear(in.v[o.Counts])
		in.v[o.Err][0] = 0
	case Route:
		in.route(o)
	case Count:
		in.count(o)
	case Scan:
		in.scan(o)
	case Permute:
		in.permute(o)
	case Gather:
		in.gather(o)
	case GEMM:
		in.gemm(o)
	case Quantize:
		in.quantize(o)
	case Dequantize:
		for i, v := range mxValues(in.v[o.Q], in.v[o.S], o.Cols) {
			in.set(o.Out, i, v)
		}
	case Combine:
		in.combine(o)
	case GateSigmoid:
		in.gateSigmoid(o)
	case Activate:
		in.activate(o)
	case ActGrad:
		in.actGrad(o)
	case WeightGrad:
		in.weightGrad(o)
	case CombineGrad:
		in.combineGrad(o)
	case ScatterProbs:
		in.scatterProbs(o)
	default:
		return fmt.Errorf("op type %T has no meaning here", op)
	}
	return nil
}

func (in *interp) route(o Route) {
	E, K := in.p.Layer.Experts, in.p.Layer.TopK
	m, probs, ids, wts := in.v[o.Map], in.v[o.Probs], in.v[o.IDs], in.v[o.Weights]
	for t := 0; t < in.T; t++ {
		k := 0
		for e := 0; e < E; e++ {
			if m[t*E+e] == 0 {
				continue
			}
			if k == K {
				in.v[o.Err][0] = float64(uint32(in.v[o.Err][0]) | launch.ErrTooManyRoute)
				break
			}
			ids[t*K+k], wts[t*K+k] = float64(e), probs[t*E+e]
			k++
		}
		for ; k < K; k++ {
			ids[t*K+k], wts[t*K+k] = -1, 0
		}
	}
}

// validID is id when it names an expert, else -1 (counted as no route).
func (in *interp) validID(id float64) int {
	if id < 0 || id >= float64(in.p.Layer.Experts) {
		return -1
	}
	return int(id)
}

func (in *interp) count(o Count) {
	ids, counts, rows := in.v[o.IDs], in.v[o.Counts], in.v[o.RowOfSlot]
	for s, id := range ids {
		if id < -1 || id >= float64(in.p.Layer.Experts) {
			in.v[o.Err][0] = float64(uint32(in.v[o.Err][0]) | launch.ErrBadExpertID)
		}
		if e := in.validID(id); e >= 0 {
			counts[e]++
		} else {
			rows[s] = -1
		}
	}
}

func (in *interp) scan(o Scan) {
	counts, off := in.v[o.Counts], in.v[o.Offsets]
	off[0] = 0
	for e, c := range counts {
		off[e+1] = off[e] + c
	}
}

func (in *interp) permute(o Permute) {
	ids, off := in.v[o.IDs], in.v[o.Offsets]
	next := append([]float64(nil), off...)
	for s, id := range ids {
		if e := in.validID(id); e >= 0 {
			in.v[o.RowOfSlot][s], in.v[o.SrcSlot][int(next[e])] = next[e], float64(s)
			next[e]++
		}
	}
}

// dispatched is the number of dispatched rows, offsets[E].
func (in *interp) dispatched(offsets *Buffer) int {
	off := in.v[offsets]
	return int(off[len(off)-1])
}

func (in *interp) gather(o Gather) {
	H, K := in.p.Layer.Hidden, in.p.Layer.TopK
	x := in.v[o.X]
	rows := in.dispatched(o.Offsets)
	var xs []float32 // the rows to quantize (Q and S, or V), bf16 values
	quantized := o.Q != nil || o.V != nil
	if quantized {
		xs = make([]float32, 0, rows*H)
	}
	for r := 0; r < rows; r++ {
		s := int(in.v[o.SrcSlot][r])
		t := s / K
		for c := 0; c < H; c++ {
			v := x[t*H+c]
			if o.Weights != nil {
				v *= in.v[o.Weights][s]
			}
			if quantized {
				xs = append(xs, float32(round(BF16, v)))
			} else {
				in.set(o.XS, r*H+c, v)
			}
		}
	}
	if quantized && rows > 0 {
		data, scales, err := mxHostValues(xs, rows, H)
		if err != nil {
			panic(err) // shapes come from a checked program
		}
		in.storeMX(o.Q, o.S, o.V, data, scales, H)
	}
}

// storeMX stores quantized rows of k, their e4m3 values data and scale
// codes scales: into q and s, or (v set) their MXFP8 values into v in
// the register-fed order (RegisterFed).
func (in *interp) storeMX(q, s, v *Buffer, data, scales []float64, k int) {
	if v != nil {
		registerFedValues(in.v[v], mxValues(data, scales, k))
		return
	}
	copy(in.v[q], data)
	copy(in.v[s], scales)
}

// groups returns the row ranges [lo, hi) of each expert: from offsets, or
// one dense range of rows rows.
func (in *interp) groups(offsets *Buffer, experts, rows int) [][2]int {
	if offsets == nil {
		return [][2]int{{0, rows}}
	}
	off := in.v[offsets]
	g := make([][2]int, experts)
	for e := range g {
		g[e] = [2]int{int(off[e]), int(off[e+1])}
	}
	return g
}

// gateUp is the position of gate and up column j in a row of 2n FC1
// outputs.
func gateUp(order GateUp, n, j int) (g, u int) {
	if order == GateUpInterleaved {
		return 2 * j, 2*j + 1
	}
	return j, n + j
}

// quantize is Quantize: layouts.Quantize of each row (through f32),
// storing the e4m3 values and the scale codes.
func (in *interp) quantize(o Quantize) {
	x := in.v[o.X]
	rows := len(x) / o.K
	src := make([]float32, len(x))
	for i, v := range x {
		src[i] = float32(v)
	}
	data, scales, err := mxHostValues(src, rows, o.K)
	if err != nil {
		panic(err) // shapes come from a checked program
	}
	in.storeMX(o.Q, o.S, o.V, data, scales, o.K)
}

// mxValues is the logical value of e4m3 values v [rows, k] with ue8m0
// scale codes s [rows, k/32] (nil: v itself).
func mxValues(v, s []float64, k int) []float64 {
	if s == nil {
		return v
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = x * float64(layouts.F32FromUE8M0(uint8(s[(i/k)*(k/32)+(i%k)/32])))
	}
	return out
}

// gemm is GEMM with Stacked weights (Interpret refuses pointer tables).
func (in *interp) gemm(o GEMM) {
	nb := o.N
	if o.Gated {
		nb = 2 * o.N
	}
	a, b := in.v[o.A], in.v[o.B]
	if o.AScales != nil { // MXFP8: the scaled values
		a, b = mxValues(a, in.v[o.AScales], o.K), mxValues(b, in.v[o.BScales], o.K)
	}
	if o.ARegisterFed { // A holds the values already, in the register-fed order
		a, b = naturalOrder(a), mxValues(b, in.v[o.BScales], o.K)
	}
	rows := len(a) / o.K
	type row struct{ e, r int }
	var todo []row
	for e, g := range in.groups(o.Offsets, o.Experts, rows) {
		for r := g[0]; r < g[1]; r++ {
			todo = append(todo, row{e, r})
		}
	}
	parallel.Range(len(todo), nb*o.K, func(lo, hi int) {
		pre := make([]float64, nb)
		for _, w := range todo[lo:hi] {
			e, r := w.e, w.r
			be := b[e*nb*o.K : (e+1)*nb*o.K]
			ar := a[r*o.K : (r+1)*o.K]
			// pre[j] sums ar[k]·B[k][j] over k in ascending order; an
			// N-major B is walked row by row (the same sums, in cache order).
			if o.BMajor == NMajor {
				clear(pre)
				for k, av := range ar {
					for j, bv := range be[k*nb : (k+1)*nb] {
						pre[j] += av * bv
					}
				}
			} else {
				for j := range pre {
					var acc float64
					for k, bv := range be[j*o.K : (j+1)*o.K] {
						acc += ar[k] * bv
					}
					pre[j] = acc
				}
			}
			if o.Bias != nil {
				for j, bias := range in.v[o.Bias][e*nb : (e+1)*nb] {
					pre[j] += bias
				}
			}
			for n := 0; n < o.N; n++ {
				v := pre[n]
				if o.Gated {
					gi, ui := gateUp(o.GateUp, o.N, n)
					v = o.Act.Kind.Apply(pre[gi], pre[ui], o.Act.Limit, o.Act.Alpha)
				}
				in.set(o.C, r*o.N+n, v)
			}
		}
	})
}

// sigmoidDot is sigmoid(x[t]·gate) rounded to fp32.
func (in *interp) sigmoidDot(x, gate *Buffer, t int) float64 {
	H := in.p.Layer.Hidden
	var z float64
	for c := 0; c < H; c++ {
		z += in.v[x][t*H+c] * in.v[gate][c]
	}
	return float64(float32(1 / (1 + math.Exp(-z))))
}

func (in *interp) combine(o Combine) {
	H, K := in.p.Layer.Hidden, in.p.Layer.TopK
	acc := make([]float64, H)
	for t := 0; t < in.T; t++ {
		clear(acc)
		if o.SharedOut != nil {
			g := 1.0
			if o.SharedGate != nil {
				g = in.sigmoidDot(o.X, o.SharedGate, t)
			}
			for c := range acc {
				acc[c] = g * in.v[o.SharedOut][t*H+c]
			}
		}
		for k := 0; k < K; k++ {
			row := int(in.v[o.RowOfSlot][t*K+k])
			if row < 0 {
				continue
			}
			w := 1.0
			if !o.WeightOnInput {
				w = in.v[o.Weights][t*K+k]
			}
			for c := range acc {
				acc[c] += w * in.v[o.OutRows][row*H+c]
			}
		}
		for c, v := range acc {
			in.set(o.Y, t*H+c, v)
		}
	}
}

func (in *interp) gateSigmoid(o GateSigmoid) {
	for t := 0; t < in.T; t++ {
		in.set(o.G, t, in.sigmoidDot(o.X, o.Gate, t))
	}
}

// rowScale is the scale s_r of row r: Weights[SrcSlot[r]], Scale[r] or 1.
func (in *interp) rowScale(weights, srcSlot, scale *Buffer, r int) float64 {
	switch {
	case weights != nil:
		return in.v[weights][int(in.v[srcSlot][r])]
	case scale != nil:
		return in.v[scale][r]
	}
	return 1
}

func (in *interp) activate(o Activate) {
	N, gu := o.N, in.v[o.GU]
	for r := range in.dispatched(o.Offsets) {
		for j := 0; j < N; j++ {
			gi, ui := gateUp(o.GateUp, N, j)
			in.set(o.H, r*N+j, o.Act.Kind.Apply(gu[r*2*N+gi], gu[r*2*N+ui], o.Act.Limit, o.Act.Alpha))
		}
	}
}

func (in *interp) actGrad(o ActGrad) {
	rows := in.T
	if o.Offsets != nil {
		rows = in.dispatched(o.Offsets)
	}
	N := o.N
	h := make([]float64, N)
	for r := 0; r < rows; r++ {
		s := in.rowScale(o.Weights, o.SrcSlot, o.Scale, r)
		for j := range h {
			gi, ui := gateUp(o.GateUp, N, j)
			h[j] = float64(float32(o.Act.Kind.Apply(in.v[o.GU][r*2*N+gi], in.v[o.GU][r*2*N+ui], o.Act.Limit, o.Act.Alpha)))
		}
		hd := h // the h the dot reads: the MXFP8 values with MX
		if o.MX {
			hd = schedule.MXActivations(h, 1, N)
		}
		var dot float64
		for j := 0; j < N; j++ {
			gi, ui := gateUp(o.GateUp, N, j)
			g, u := in.v[o.GU][r*2*N+gi], in.v[o.GU][r*2*N+ui]
			dh := in.v[o.DH][r*N+j]
			dg, du := o.Act.Kind.Grad(g, u, o.Act.Limit, o.Act.Alpha, s*dh)
			if o.FC1X != nil {
				dot += dg*in.v[o.FC1X][r*2*N+gi] + du*in.v[o.FC1X][r*2*N+ui]
			} else {
				dot += dh * hd[j]
			}
			in.set(o.DGU, r*2*N+gi, dg)
			in.set(o.DGU, r*2*N+ui, du)
			in.set(o.HS, r*N+j, s*h[j])
		}
		in.set(o.Dot, r, dot)
	}
}

func (in *interp) weightGrad(o WeightGrad) {
	a, b := in.v[o.A], in.v[o.B]
	rows := len(a) / o.M
	M, N := o.M, o.N
	dw := make([]float64, M*N)
	db := make([]float64, M)
	for e, g := range in.groups(o.Offsets, o.Experts, rows) {
		if g[0] == g[1] {
			continue
		}
		clear(dw)
		clear(db)
		scale := make([]float64, g[1]-g[0])
		for r := g[0]; r < g[1]; r++ {
			scale[r-g[0]] = in.rowScale(o.Weights, o.SrcSlot, nil, r)
		}
		// Each m's row of dw (and db[m]) sums over the rows in order, on
		// one goroutine.
		parallel.Range(M, (g[1]-g[0])*N, func(lo, hi int) {
			for r := g[0]; r < g[1]; r++ {
				s, br := scale[r-g[0]], b[r*N:(r+1)*N]
				for m := lo; m < hi; m++ {
					am := a[r*M+m]
					db[m] += s * am
					dwm := dw[m*N : (m+1)*N]
					for n, bv := range br {
						dwm[n] += am * bv
					}
				}
			}
		})
		main := in.v[o.Main][e*M*N : (e+1)*M*N]
		for i, v := range dw {
			main[i] = round(o.MainDType(), main[i]+v)
		}
		if o.Bias != nil {
			bias := in.v[o.Bias][e*M : (e+1)*M]
			for i, v := range db {
				bias[i] = round(o.Bias.DType, bias[i]+v)
			}
		}
	}
}

func (in *interp) combineGrad(o CombineGrad) {
	H, K := in.p.Layer.Hidden, in.p.Layer.TopK
	acc := make([]float64, H)
	for t := 0; t < in.T; t++ {
		clear(acc)
		for k := 0; k < K; k++ {
			s := t*K + k
			row := int(in.v[o.RowOfSlot][s])
			if row < 0 {
				in.set(o.DW, s, 0)
				continue
			}
			dxs := in.v[o.DXS][row*H : (row+1)*H]
			v, dw := 1.0, in.v[o.Dot][row]
			if o.WeightOnInput {
				v = in.v[o.Weights][s]
			}
			if o.FC2Bias != nil {
				e := int(in.v[o.IDs][s])
				for c := 0; c < H; c++ {
					dw += in.v[o.DY][t*H+c] * in.v[o.FC2Bias][e*H+c]
				}
			}
			in.set(o.DW, s, dw)
			for c, d := range dxs {
				acc[c] += v * d
			}
		}
		if o.SharedDX != nil {
			for c := range acc {
				acc[c] += in.v[o.SharedDX][t*H+c]
			}
		}
		if o.DZ != nil {
			g := in.v[o.G][t]
			in.set(o.DZ, t, in.v[o.SharedDot][t]*g*(1-g))
			for c := range acc {
				acc[c] += in.v[o.DZ][t] * in.v[o.Gate][c]
			}
		}
		for c, v := range acc {
			in.set(o.DX, t*H+c, v)
		}
	}
}

func (in *interp) scatterProbs(o ScatterProbs) {
	E, K := in.p.Layer.Experts, in.p.Layer.TopK
	clear(in.v[o.DProbs])
	for s, id := range in.v[o.IDs] {
		if e := in.validID(id); e >= 0 {
			in.set(o.DProbs, (s/K)*E+e, in.v[o.DW][s])
		}
	}
}
