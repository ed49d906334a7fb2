package runtime

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
)

// This file binds the caller's tensors to the buffers of a compiled
// program. The buffers are the manifest's (launch.Manifest.Buffers, declared
// once by codegen's program): the runtime knows none of their names, and
// checks every binding against the manifest's name, kind, dtype and shape.

// DType is the element type of a Tensor: the buffer dtypes of the moe
// program, spelled as in the launch manifest.
type DType = moe.DType

// Element types of the buffers of a layer (moe's).
const (
	BF16 = moe.BF16 // bfloat16, 2 bytes
	F32  = moe.F32  // IEEE-754 binary32, 4 bytes
	I32  = moe.I32  // signed 32-bit integer, 4 bytes
	U8   = moe.U8   // byte (a routing-map entry: nonzero = routed), 1 byte
	U32  = moe.U32  // unsigned 32-bit integer, 4 bytes
	U64  = moe.U64  // unsigned 64-bit integer (a device pointer), 8 bytes
	// E4M3 and UE8M0 are MXFP8's element and block scale, 1 byte each
	// (moe.E4M3, moe.UE8M0; docs/mxfp8.md).
	E4M3  = moe.E4M3
	UE8M0 = moe.UE8M0
)

// TensorAlign is the alignment, in bytes, Forward requires of every
// non-empty Tensor: TMA needs 16-byte aligned global addresses
// (cuTensorMapEncodeTiled) and the kernels load 16-byte vectors. Allocations
// from driver.Context.Alloc (cuMemAlloc) are 256-byte aligned.
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

// Bindings are the caller's tensors of one Layer.Forward, keyed by the
// names of the program's buffers (Layer.Inputs and Layer.Outputs list them
// with their dtypes and shapes; docs/manifest.md describes each one). Every
// input and output of the layer must be bound, and nothing else: a name
// that is not a caller buffer of the layer (one of another routing form or
// weight storage, a scratch buffer, the error word, a typo) is an error, so
// that a mismatch between the caller and the compiled layer is caught. The
// error word is the Layer's so that bad routing always reaches CheckErrors
// (package comment). A
// zero Tensor counts as not bound. The token count T is the outermost
// dimension of the layer's token input (the first input whose outermost
// dimension is T: the activations x).
type Bindings map[string]Tensor

// BufferSpec describes one buffer the caller binds: a buffer of the
// manifest of kind launch.BufInput or launch.BufOutput, other than the error
// word (which the Layer owns).
type BufferSpec struct {
	Name  string            // buffer name, the key of Bindings
	Kind  launch.BufferKind // launch.BufInput or launch.BufOutput
	DType DType             // element type
	Shape []launch.Expr     // dimensions as functions of T, outermost first
	Doc   string            // one-line description of the contents
}

// ShapeAt returns the dimensions of the buffer at T tokens.
func (b BufferSpec) ShapeAt(T int) []int {
	out := make([]int, len(b.Shape))
	for i, e := range b.Shape {
		out[i] = int(e.Eval(int64(T)))
	}
	return out
}

// BytesAt returns the bytes the buffer's shape holds at T tokens: the
// element size times the element count.
func (b BufferSpec) BytesAt(T int) int {
	n := int(b.DType.Size())
	for _, d := range b.ShapeAt(T) {
		n *= d
	}
	return n
}

// isCaller reports whether the caller binds buffer b: an input or an output
// other than the error word and the backward's saved state.
func isCaller(b launch.Buffer) bool {
	return b.Kind != launch.BufScratch && b.Name != launch.ErrBuffer && !isSaved(b)
}

// isSaved reports whether b is the backward's input of the forward's saved
// state (schedule.Layer.SaveFC1), which the Layer binds itself.
func isSaved(b launch.Buffer) bool { return b.Kind == launch.BufInput && b.Name == moe.BufFC1Out }

// isTokenDim reports whether dimension e is the token count T itself.
func isTokenDim(e launch.Expr) bool {
	return e.A == 1 && e.B == 0 && (e.D == 0 || e.D == 1) && e.Min == 0
}

// specs returns the caller buffers of kind kind, in manifest order.
func (p *plan) specs(kind launch.BufferKind) []BufferSpec {
	var out []BufferSpec
	for _, b := range p.Buffers {
		if isCaller(b) && b.Kind == kind {
			out = append(out, BufferSpec{Name: b.Name, Kind: b.Kind, DType: DType(b.DType), Shape: b.Shape, Doc: b.Doc})
		}
	}
	return out
}

// callerNames lists the caller buffers, for error messages.
func (p *plan) callerNames() string {
	var names []string
	for _, b := range p.Buffers {
		if isCaller(b) {
			names = append(names, b.Name)
		}
	}
	return strings.Join(names, ", ")
}

// shapeString writes a buffer's shape with its token dimension as T, e.g.
// "[T, 2048]".
func shapeString(shape []launch.Expr) string {
	parts := make([]string, len(shape))
	for i, e := range shape {
		switch {
		case isTokenDim(e):
			parts[i] = "T"
		case e.A == 0:
			parts[i] = fmt.Sprint(e.Eval(0))
		default:
			parts[i] = e.String()
		}
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// maxTokens bounds T so that every token-dependent count the kernels hold in
// 32-bit integers (T*K routed rows, T*E map entries, grid sizes) fits.
const maxTokens = math.MaxInt32

// bindError is an error of Forward's arguments, naming the layer.
func (p *plan) bindError(format string, args ...any) error {
	call := "Forward"
	if p.Pass == "backward" {
		call = "Backward"
	}
	return fmt.Errorf("mokc runtime: "+call+" (%s): "+format, append([]any{p.Layer}, args...)...)
}

// tokens returns T, read from the token buffer's binding, after checking
// that every scalar parameter fits its type at T.
func (p *plan) tokens(b Bindings) (int, error) {
	tb := p.Buffers[p.tokenBuf]
	t := b[tb.Name]
	if t.IsZero() {
		return 0, p.bindError("buffer %q is not bound; this layer reads it: %s %s, T = tokens (%s)", tb.Name, tb.DType, shapeString(tb.Shape), tb.Doc)
	}
	if len(t.Shape) != len(tb.Shape) {
		return 0, p.bindError("buffer %q: shape %v; want %s (T = tokens)", tb.Name, t.Shape, shapeString(tb.Shape))
	}
	T := t.Shape[0]
	if T < 0 {
		return 0, p.bindError("buffer %q: shape %v: the token count T = %d is negative", tb.Name, t.Shape, T)
	}
	if T > maxTokens/max(p.Shape.TopK, p.Shape.Experts, 1) {
		return 0, p.bindError("buffer %q: T = %d tokens is too many (T*max(K, E) must fit in 32 bits)", tb.Name, T)
	}
	for _, k := range p.Kernels {
		for _, prm := range k.Params {
			if prm.Value != nil && prm.Type == launch.ParamI32 {
				if v := prm.Value.Eval(int64(T)); v > math.MaxInt32 || v < math.MinInt32 {
					return 0, p.bindError("T = %d: kernel %s parameter %s = %d does not fit in 32 bits", T, k.Name, prm.Name, v)
				}
			}
		}
	}
	return T, nil
}

// checkNames refuses a non-zero binding of a name that is not a caller
// buffer, naming the first such name in sorted order.
func (p *plan) checkNames(b Bindings) error {
	names := make([]string, 0, len(b))
	for name := range b {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if b[name].IsZero() {
			continue
		}
		i, ok := p.bufIndex[name]
		switch {
		case !ok:
			return p.bindError("buffer %q is bound, but this layer has no such buffer (its buffers: %s)", name, p.callerNames())
		case name == launch.ErrBuffer:
			return p.bindError("buffer %q is bound, but the error word is the layer's own (CheckErrors reads it); bind only: %s", name, p.callerNames())
		case isSaved(p.Buffers[i]):
			return p.bindError("buffer %q is bound, but it is the forward's saved state, which the layer keeps from the last Forward; bind only: %s", name, p.callerNames())
		case !isCaller(p.Buffers[i]):
			return p.bindError("buffer %q is bound, but it is a scratch buffer of the layer's workspace; bind only: %s", name, p.callerNames())
		}
	}
	return nil
}

// span is the address range a bound tensor's shape covers.
type span struct {
	name     string
	lo, hi   uint64
	isOutput bool
}

// checkTensor checks the binding t of caller buffer buf at T tokens: bound,
// dtype, shape, bytes, address. It returns the range the shape covers (hi =
// lo when empty).
func (p *plan) checkTensor(buf launch.Buffer, t Tensor, T int) (span, error) {
	spec := BufferSpec{Name: buf.Name, Kind: buf.Kind, DType: DType(buf.DType), Shape: buf.Shape, Doc: buf.Doc}
	shape := spec.ShapeAt(T)
	if t.IsZero() {
		verb := "reads"
		switch buf.Kind {
		case launch.BufOutput:
			verb = "writes"
		case launch.BufInOut:
			verb = "adds to"
		}
		return span{}, p.bindError("buffer %q is not bound; this layer %s it: %s %v (%s)", buf.Name, verb, buf.DType, shape, buf.Doc)
	}
	if t.DType != spec.DType {
		return span{}, p.bindError("buffer %q: dtype %q; want %s %v", buf.Name, t.DType, buf.DType, shape)
	}
	if !slices.Equal(t.Shape, shape) {
		return span{}, p.bindError("buffer %q: shape %v; want %v at T = %d", buf.Name, t.Shape, shape, T)
	}
	need := int64(spec.BytesAt(T))
	if t.Bytes < 0 || int64(t.Bytes) < need {
		return span{}, p.bindError("buffer %q: %d bytes; %s %v needs %d", buf.Name, t.Bytes, buf.DType, shape, need)
	}
	s := span{name: buf.Name, lo: uint64(t.Ptr), hi: uint64(t.Ptr), isOutput: buf.Kind == launch.BufOutput || buf.Kind == launch.BufInOut}
	if need == 0 {
		return s, nil
	}
	if t.Ptr == 0 {
		return span{}, p.bindError("buffer %q: null pointer for %d bytes", buf.Name, need)
	}
	if uint64(t.Ptr)%TensorAlign != 0 {
		return span{}, p.bindError("buffer %q: address %v is not %d-byte aligned", buf.Name, t.Ptr, TensorAlign)
	}
	if uint64(t.Ptr)+uint64(need) < uint64(t.Ptr) {
		return span{}, p.bindError("buffer %q: address %v + %d bytes wraps around", buf.Name, t.Ptr, need)
	}
	s.hi = s.lo + uint64(need)
	return s, nil
}

// bind validates b against the plan and returns T and the device address of
// every caller buffer, indexed like p.Buffers (scratch and err entries are
// left 0 for the Layer to fill). No output may overlap another bound
// tensor. It is pure Go.
func (p *plan) bind(b Bindings) (int, []driver.DevicePtr, error) {
	if err := p.checkNames(b); err != nil {
		return 0, nil, err
	}
	T, err := p.tokens(b)
	if err != nil {
		return 0, nil, err
	}
	bind := make([]driver.DevicePtr, len(p.Buffers))
	var spans []span
	for i, buf := range p.Buffers {
		if !isCaller(buf) {
			continue
		}
		s, err := p.checkTensor(buf, b[buf.Name], T)
		if err != nil {
			return 0, nil, err
		}
		if s.hi > s.lo {
			spans = append(spans, s)
		}
		bind[i] = b[buf.Name].Ptr
	}
	for _, o := range spans {
		if !o.isOutput {
			continue
		}
		for _, s := range spans {
			if s.name != o.name && o.lo < s.hi && s.lo < o.hi {
				return 0, nil, p.bindError("buffer %q [%#x, %#x) overlaps buffer %q [%#x, %#x)", o.name, o.lo, o.hi, s.name, s.lo, s.hi)
			}
		}
	}
	return T, bind, nil
}
