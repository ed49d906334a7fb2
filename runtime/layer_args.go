package runtime

import (
	"fmt"
	"math"
	"slices"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/launch"
)

// DType is the element type of a Tensor, spelled as in the launch manifest.
type DType string

// Element types of the buffers of a layer.
const (
	BF16 DType = "bf16" // bfloat16 (1 sign, 8 exponent, 7 fraction bits), 2 bytes
	F32  DType = "f32"  // IEEE-754 binary32, 4 bytes
	I32  DType = "i32"  // signed 32-bit integer, 4 bytes
	U8   DType = "u8"   // byte (a routing-map entry: nonzero = routed), 1 byte
	U32  DType = "u32"  // unsigned 32-bit integer, 4 bytes
	U64  DType = "u64"  // unsigned 64-bit integer (a device pointer), 8 bytes
)

// dtypeSize returns the size of one element in bytes (0 for an unknown type).
func dtypeSize(d DType) int {
	switch d {
	case U8:
		return 1
	case BF16:
		return 2
	case F32, I32, U32:
		return 4
	case U64:
		return 8
	}
	return 0
}

// Size returns the size of one element in bytes, 0 for an unknown type.
func (d DType) Size() int { return dtypeSize(d) }

// TensorAlign is the alignment, in bytes, Forward requires of every
// non-empty Tensor: TMA needs 16-byte aligned global addresses
// (cuTensorMapEncodeTiled) and the kernels load 16-byte vectors. Allocations
// from Context.Alloc (cuMemAlloc) are 256-byte aligned.
const TensorAlign = 16

// Tensor is a caller-owned device buffer handed to Layer.Forward: its
// address, the bytes available from that address, and the element type and
// shape (outermost first, row-major, contiguous) the caller says it holds.
// Forward checks DType and Shape against what the layer expects and that
// Bytes covers the shape; it never reads past the shape.
//
// A Tensor whose shape holds no element (T = 0) may have a null Ptr.
type Tensor struct {
	Ptr   driver.DevicePtr // device address of the first element (16-byte aligned)
	Bytes int              // size of the allocation from Ptr, in bytes (>= the shape's bytes)
	DType DType            // element type
	Shape []int            // dimensions, outermost first (row-major, contiguous)
}

// NewTensor returns the Tensor of a buffer of bytes bytes at ptr holding
// dtype elements of the given shape.
func NewTensor(ptr driver.DevicePtr, bytes int, dtype DType, shape ...int) Tensor {
	return Tensor{Ptr: ptr, Bytes: bytes, DType: dtype, Shape: shape}
}

// IsZero reports whether t is the zero Tensor (not given).
func (t Tensor) IsZero() bool {
	return t.Ptr == 0 && t.Bytes == 0 && t.DType == "" && len(t.Shape) == 0
}

// ForwardArgs are the buffers of one Layer.Forward call, all caller-owned
// device memory (the layer never copies or frees them). T, the token count,
// is X.Shape[0]. H is the hidden size, I the routed intermediate size, E
// the number of routed experts, K the top-k, S*I_s the total width of the
// shared experts (schedule.Layer.SharedWidth). Which fields a layer reads
// follows from its schedule.Layer: a field the layer does not read must be
// left zero, and a field it reads must be given (both are errors
// otherwise, so that a routing or storage mismatch is caught).
type ForwardArgs struct {
	// X is the input, bf16 [T, H].
	X Tensor

	// Fixed-width routing (schedule.RoutingIDs): IDs i32 [T, K], expert ids
	// with -1 for an empty slot (an id outside -1..E-1 is reported by
	// CheckErrors and treated as -1), and RouteWeights f32 [T, K], the
	// weight of each slot.
	IDs, RouteWeights Tensor
	// Dense routing (schedule.RoutingMap): RoutingMap u8 [T, E] (nonzero =
	// routed; at most K per token, more is reported by CheckErrors and the
	// first K in expert order are kept) and Probs f32 [T, E].
	RoutingMap, Probs Tensor

	// Grouped expert weights (schedule.GroupedWeights): FC1 bf16 [E, 2I, H]
	// (rows 0..I-1 gate, I..2I-1 up; even/odd rows with
	// schedule.Layer.GateUpInterleaved) and FC2 bf16 [E, H, I].
	FC1, FC2 Tensor
	// Per-expert weights (schedule.PerExpertWeights): FC1Table and FC2Table
	// u64 [E], device pointers to each expert's FC1 [2I, H] and FC2 [H, I]
	// bf16 matrices (16-byte aligned; their contents are not checked).
	FC1Table, FC2Table Tensor
	// Biases (schedule.Layer.Biases): FC1Bias f32 [E, 2I] in FC1's row
	// order and FC2Bias f32 [E, H].
	FC1Bias, FC2Bias Tensor

	// Shared experts (schedule.Layer.SharedExperts > 0): SharedFC1 bf16
	// [2*S*I_s, H] (all gate rows expert by expert, then all up rows),
	// SharedFC2 bf16 [H, S*I_s], and with schedule.Layer.SharedGate the gate
	// vector SharedGate bf16 [H].
	SharedFC1, SharedFC2, SharedGate Tensor

	// Y is the output, bf16 [T, H]; it must not overlap any input.
	Y Tensor

	// Stream is the stream the kernels are queued on; nil is the legacy
	// default stream.
	Stream *driver.Stream

	// Marks, when not nil, times each kernel: it holds len(Layer.Kernels())+1
	// events, and Forward records Marks[i] on Stream before kernel i and the
	// last one after the last kernel, so ElapsedMs(Marks[i], Marks[i+1]) is
	// kernel i's time in milliseconds, launch gap included (about 0 for a
	// kernel that does not run at this T). At T = 0 no event is recorded.
	// Recording costs a few microseconds per kernel; leave it nil when
	// timing the whole forward.
	Marks []*driver.Event
}

// argFields maps the manifest's buffer names to ForwardArgs fields.
var argFields = map[string]struct {
	field string
	get   func(*ForwardArgs) *Tensor
}{
	"x":           {"X", func(a *ForwardArgs) *Tensor { return &a.X }},
	"ids":         {"IDs", func(a *ForwardArgs) *Tensor { return &a.IDs }},
	"weights":     {"RouteWeights", func(a *ForwardArgs) *Tensor { return &a.RouteWeights }},
	"routing_map": {"RoutingMap", func(a *ForwardArgs) *Tensor { return &a.RoutingMap }},
	"probs":       {"Probs", func(a *ForwardArgs) *Tensor { return &a.Probs }},
	"fc1":         {"FC1", func(a *ForwardArgs) *Tensor { return &a.FC1 }},
	"fc2":         {"FC2", func(a *ForwardArgs) *Tensor { return &a.FC2 }},
	"fc1_table":   {"FC1Table", func(a *ForwardArgs) *Tensor { return &a.FC1Table }},
	"fc2_table":   {"FC2Table", func(a *ForwardArgs) *Tensor { return &a.FC2Table }},
	"fc1_bias":    {"FC1Bias", func(a *ForwardArgs) *Tensor { return &a.FC1Bias }},
	"fc2_bias":    {"FC2Bias", func(a *ForwardArgs) *Tensor { return &a.FC2Bias }},
	"shared_fc1":  {"SharedFC1", func(a *ForwardArgs) *Tensor { return &a.SharedFC1 }},
	"shared_fc2":  {"SharedFC2", func(a *ForwardArgs) *Tensor { return &a.SharedFC2 }},
	"shared_gate": {"SharedGate", func(a *ForwardArgs) *Tensor { return &a.SharedGate }},
	"y":           {"Y", func(a *ForwardArgs) *Tensor { return &a.Y }},
}

// argOrder lists argFields in the order of ForwardArgs, for deterministic
// error messages.
var argOrder = []string{"x", "ids", "weights", "routing_map", "probs", "fc1", "fc2", "fc1_table", "fc2_table",
	"fc1_bias", "fc2_bias", "shared_fc1", "shared_fc2", "shared_gate", "y"}

// maxTokens bounds T so that every token-dependent count the kernels hold in
// 32-bit integers (T*K routed rows, T*E map entries, grid sizes) fits.
const maxTokens = math.MaxInt32

// bind validates a against the plan and returns T and the device address of
// every caller buffer, indexed like p.Buffers (scratch and err entries are
// left 0 for the Layer to fill). It is pure Go.
func (p *plan) bind(a *ForwardArgs) (int, []driver.DevicePtr, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("mokc runtime: Forward (%s): "+format, append([]any{p.Layer}, args...)...)
	}
	if len(a.X.Shape) != 2 {
		return 0, nil, fail("ForwardArgs.X: shape %v; want [T, %d] (T = tokens)", a.X.Shape, p.Shape.Hidden)
	}
	T := a.X.Shape[0]
	if T < 0 {
		return 0, nil, fail("ForwardArgs.X: shape %v: the token count T = %d is negative", a.X.Shape, T)
	}
	if T > maxTokens/max(p.Shape.TopK, p.Shape.Experts, 1) {
		return 0, nil, fail("ForwardArgs.X: T = %d tokens is too many (T*max(K, E) must fit in 32 bits)", T)
	}
	T64 := int64(T)
	for _, k := range p.Kernels {
		for _, prm := range k.Params {
			if prm.Value != nil && prm.Type == launch.ParamI32 {
				if v := prm.Value.Eval(T64); v > math.MaxInt32 || v < math.MinInt32 {
					return 0, nil, fail("T = %d: kernel %s parameter %s = %d does not fit in 32 bits", T, k.Name, prm.Name, v)
				}
			}
		}
	}
	bind := make([]driver.DevicePtr, len(p.Buffers))
	type span struct {
		field    string
		lo, hi   uint64
		isOutput bool
	}
	var spans []span
	for _, name := range argOrder {
		f := argFields[name]
		t := f.get(a)
		i, used := p.bufIndex[name]
		if !used || p.Buffers[i].Kind == launch.BufScratch {
			if !t.IsZero() {
				return 0, nil, fail("ForwardArgs.%s is set, but this layer does not read it (%s)", f.field, p.layerForm())
			}
			continue
		}
		b := p.Buffers[i]
		shape := make([]int, len(b.Shape))
		n := int64(1)
		for j, e := range b.Shape {
			v := e.Eval(T64)
			shape[j] = int(v)
			n *= v
		}
		if t.IsZero() {
			return 0, nil, fail("ForwardArgs.%s is not set; this layer reads it: %s %v (%s)", f.field, b.DType, shape, b.Doc)
		}
		if t.DType != DType(b.DType) {
			return 0, nil, fail("ForwardArgs.%s: dtype %q; want %s %v", f.field, t.DType, b.DType, shape)
		}
		if !slices.Equal(t.Shape, shape) {
			return 0, nil, fail("ForwardArgs.%s: shape %v; want %v at T = %d", f.field, t.Shape, shape, T)
		}
		need := n * int64(dtypeSize(t.DType))
		if t.Bytes < 0 || int64(t.Bytes) < need {
			return 0, nil, fail("ForwardArgs.%s: %d bytes; %s %v needs %d", f.field, t.Bytes, b.DType, shape, need)
		}
		if need > 0 {
			if t.Ptr == 0 {
				return 0, nil, fail("ForwardArgs.%s: null pointer for %d bytes", f.field, need)
			}
			if uint64(t.Ptr)%TensorAlign != 0 {
				return 0, nil, fail("ForwardArgs.%s: address %v is not %d-byte aligned", f.field, t.Ptr, TensorAlign)
			}
			if uint64(t.Ptr)+uint64(need) < uint64(t.Ptr) {
				return 0, nil, fail("ForwardArgs.%s: address %v + %d bytes wraps around", f.field, t.Ptr, need)
			}
			spans = append(spans, span{f.field, uint64(t.Ptr), uint64(t.Ptr) + uint64(need), b.Kind == launch.BufOutput})
		}
		bind[i] = t.Ptr
	}
	for _, o := range spans {
		if !o.isOutput {
			continue
		}
		for _, s := range spans {
			if s.field != o.field && o.lo < s.hi && s.lo < o.hi {
				return 0, nil, fail("ForwardArgs.%s [%#x, %#x) overlaps ForwardArgs.%s [%#x, %#x)", o.field, o.lo, o.hi, s.field, s.lo, s.hi)
			}
		}
	}
	return T, bind, nil
}

// layerForm describes the routing form and weight storage of the plan, for
// error messages.
func (p *plan) layerForm() string {
	routing, storage := "ids", "grouped"
	if _, ok := p.bufIndex["routing_map"]; ok {
		routing = "map"
	}
	if _, ok := p.bufIndex["fc1_table"]; ok {
		storage = "per-expert"
	}
	s := fmt.Sprintf("routing %s, %s weights", routing, storage)
	if _, ok := p.bufIndex["fc1_bias"]; !ok {
		s += ", no biases"
	}
	if p.Shape.SharedWidth == 0 {
		s += ", no shared experts"
	} else if _, ok := p.bufIndex["shared_gate"]; !ok {
		s += ", no shared gate"
	}
	return s
}
