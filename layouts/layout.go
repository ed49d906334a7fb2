package layouts

import (
	"fmt"
	"slices"
	"strings"
)

// Layout is a CuTe layout Shape:Stride: a function from a coordinate (or a
// linear index in [0, Size)) to an offset, offset = sum_i coord_i*stride_i
// over the leaves. Shape and Stride are congruent IntTuples; shapes are >= 1,
// strides >= 0 (negative strides are not modelled). Offsets are in whatever
// unit the strides are in (elements, bytes); each constructor says which.
// Linear indices are decomposed colexicographically (leftmost leaf fastest),
// as in CuTe.
//
// Printed as CuTe prints it: "(2,(2,2)):(4,(2,1))"; a rank-1 leaf layout as
// "8:1". Source: CUTLASS cute/layout.hpp and media/docs/cpp/cute/01_layout.md.
type Layout struct {
	Shape  IntTuple // extent of each mode, every leaf >= 1
	Stride IntTuple // stride of each mode, congruent with Shape, every leaf >= 0
}

// MakeLayout returns the layout shape:stride after checking that the two are
// congruent, that every shape is >= 1 and every stride >= 0.
func MakeLayout(shape, stride IntTuple) (Layout, error) {
	if !Congruent(shape, stride) {
		return Layout{}, fmt.Errorf("layouts: shape %v and stride %v are not congruent", shape, stride)
	}
	for _, s := range shape.Flatten() {
		if s < 1 {
			return Layout{}, fmt.Errorf("layouts: shape %v has a mode of size %d (must be >= 1)", shape, s)
		}
	}
	for _, d := range stride.Flatten() {
		if d < 0 {
			return Layout{}, fmt.Errorf("layouts: stride %v is negative (not supported)", stride)
		}
	}
	return Layout{Shape: shape, Stride: stride}, nil
}

// ColMajor returns the compact column-major (CuTe LayoutLeft) layout of
// shape: the leftmost leaf has stride 1. E.g. (4,(2,3)) -> (4,(2,3)):(1,(4,8)).
func ColMajor(shape IntTuple) (Layout, error) {
	fl := shape.Flatten()
	st := make([]int, len(fl))
	p := 1
	for i, s := range fl {
		st[i] = p
		p *= s
	}
	return MakeLayout(shape, shape.rebuild(st))
}

// RowMajor returns the compact row-major (CuTe LayoutRight) layout of shape:
// the rightmost leaf has stride 1. E.g. (4,8) -> (4,8):(8,1).
func RowMajor(shape IntTuple) (Layout, error) {
	fl := shape.Flatten()
	st := make([]int, len(fl))
	p := 1
	for i := len(fl) - 1; i >= 0; i-- {
		st[i] = p
		p *= fl[i]
	}
	return MakeLayout(shape, shape.rebuild(st))
}

// ParseLayout parses "shape:stride" in CuTe notation, e.g.
// "(2,(2,2)):(4,(2,1))" or "8:1".
func ParseLayout(s string) (Layout, error) {
	i := strings.LastIndex(s, ":")
	if i < 0 {
		return Layout{}, fmt.Errorf("layouts: %q is not shape:stride", s)
	}
	sh, err := ParseIntTuple(s[:i])
	if err != nil {
		return Layout{}, err
	}
	st, err := ParseIntTuple(s[i+1:])
	if err != nil {
		return Layout{}, err
	}
	return MakeLayout(sh, st)
}

// String prints the layout as shape:stride in CuTe notation.
func (l Layout) String() string { return l.Shape.String() + ":" + l.Stride.String() }

// Size returns the number of coordinates (the product of the shape).
func (l Layout) Size() int { return l.Shape.Product() }

// Cosize returns 1 + the largest offset the layout produces (the extent of
// the codomain), i.e. 1 + sum over leaves (shape-1)*stride.
func (l Layout) Cosize() int {
	sh, st := l.Shape.Flatten(), l.Stride.Flatten()
	c := 1
	for i := range sh {
		c += (sh[i] - 1) * st[i]
	}
	return c
}

// Rank returns the number of top-level modes.
func (l Layout) Rank() int { return l.Shape.Len() }

// Depth returns the nesting depth of the shape (0 for a leaf).
func (l Layout) Depth() int { return l.Shape.Depth() }

// Mode returns the i-th top-level mode as a layout.
func (l Layout) Mode(i int) (Layout, error) {
	sh, err := l.Shape.At(i)
	if err != nil {
		return Layout{}, err
	}
	st, _ := l.Stride.At(i)
	return Layout{Shape: sh, Stride: st}, nil
}

// Modes returns the top-level modes.
func (l Layout) Modes() []Layout {
	sh, st := l.Shape.Elems(), l.Stride.Elems()
	out := make([]Layout, len(sh))
	for i := range sh {
		out[i] = Layout{Shape: sh[i], Stride: st[i]}
	}
	return out
}

// Concat returns the layout whose top-level modes are the given layouts
// (CuTe make_layout(l0, l1, ...)).
func Concat(ls ...Layout) Layout {
	sh := make([]IntTuple, len(ls))
	st := make([]IntTuple, len(ls))
	for i, l := range ls {
		sh[i], st[i] = l.Shape, l.Stride
	}
	return Layout{Shape: IntTuple{elems: sh}, Stride: IntTuple{elems: st}}
}

// flat returns the leaves of shape and stride.
func (l Layout) flat() (sh, st []int) { return l.Shape.Flatten(), l.Stride.Flatten() }

// Flatten returns the layout with all leaves as top-level modes, e.g.
// (2,(2,2)):(4,(2,1)) -> (2,2,2):(4,2,1).
func (l Layout) Flatten() Layout {
	sh, st := l.flat()
	return Layout{Shape: Ints(sh...), Stride: Ints(st...)}
}

// call evaluates the layout at linear index i without a range check; the
// last leaf absorbs any overflow (CuTe's extension of a layout to all
// non-negative integers).
func (l Layout) call(i int) int {
	sh, st := l.flat()
	off := 0
	for k := range sh {
		if k == len(sh)-1 {
			off += i * st[k]
			break
		}
		off += (i % sh[k]) * st[k]
		i /= sh[k]
	}
	return off
}

// Offset returns the offset of linear index i in [0, Size); out-of-range
// indices return an error.
func (l Layout) Offset(i int) (int, error) {
	if i < 0 || i >= l.Size() {
		return 0, fmt.Errorf("layouts: index %d out of range [0,%d) of %v", i, l.Size(), l)
	}
	return l.call(i), nil
}

// OffsetCoord returns the offset of a hierarchical coordinate. The
// coordinate follows the shape's tree, but wherever the shape has a tuple
// the coordinate may give a single integer, which is decomposed
// colexicographically over that sub-shape (CuTe crd2idx). Coordinates out of
// range return an error.
func (l Layout) OffsetCoord(c IntTuple) (int, error) {
	return crd2off(c, l.Shape, l.Stride)
}

// OffsetAt is OffsetCoord for a flat list of top-level coordinates, e.g.
// OffsetAt(row, col) for a rank-2 layout.
func (l Layout) OffsetAt(coords ...int) (int, error) {
	if len(coords) != l.Rank() && !(len(coords) == 1 && !l.Shape.IsTuple()) {
		return 0, fmt.Errorf("layouts: %d coordinates for a rank-%d layout %v", len(coords), l.Rank(), l)
	}
	if !l.Shape.IsTuple() {
		return crd2off(Int(coords[0]), l.Shape, l.Stride)
	}
	return crd2off(Ints(coords...), l.Shape, l.Stride)
}

func crd2off(c, shape, stride IntTuple) (int, error) {
	if !c.IsTuple() {
		n := shape.Product()
		if c.val < 0 || c.val >= n {
			return 0, fmt.Errorf("layouts: coordinate %d out of range [0,%d) of shape %v", c.val, n, shape)
		}
		return Layout{Shape: shape, Stride: stride}.call(c.val), nil
	}
	if !shape.IsTuple() || len(c.elems) != len(shape.elems) {
		return 0, fmt.Errorf("layouts: coordinate %v does not match shape %v", c, shape)
	}
	off := 0
	for i := range c.elems {
		o, err := crd2off(c.elems[i], shape.elems[i], stride.elems[i])
		if err != nil {
			return 0, err
		}
		off += o
	}
	return off, nil
}

// Coord returns the hierarchical coordinate (congruent to the shape) of
// linear index i in [0, Size), colexicographically (CuTe idx2crd).
func (l Layout) Coord(i int) (IntTuple, error) {
	if i < 0 || i >= l.Size() {
		return IntTuple{}, fmt.Errorf("layouts: index %d out of range [0,%d) of %v", i, l.Size(), l)
	}
	sh := l.Shape.Flatten()
	cs := make([]int, len(sh))
	for k, s := range sh {
		cs[k] = i % s
		i /= s
	}
	return l.Shape.rebuild(cs), nil
}

// Offsets returns the offsets of all linear indices 0..Size-1 in order.
func (l Layout) Offsets() []int {
	sh, st := l.flat()
	out := make([]int, 0, l.Size())
	idx := make([]int, len(sh))
	off := 0
	for n := l.Size(); n > 0; n-- {
		out = append(out, off)
		for k := range sh {
			idx[k]++
			off += st[k]
			if idx[k] < sh[k] {
				break
			}
			off -= idx[k] * st[k]
			idx[k] = 0
		}
	}
	return out
}

// IsInjective reports whether distinct indices give distinct offsets.
func (l Layout) IsInjective() bool {
	seen := make(map[int]bool, l.Size())
	for _, o := range l.Offsets() {
		if seen[o] {
			return false
		}
		seen[o] = true
	}
	return true
}

// IsBijective reports whether the layout maps [0, Size) one-to-one onto
// [0, Size) (a compact permutation).
func (l Layout) IsBijective() bool {
	n := l.Size()
	if l.Cosize() != n {
		return false
	}
	seen := make([]bool, n)
	for _, o := range l.Offsets() {
		if o >= n || seen[o] {
			return false
		}
		seen[o] = true
	}
	return true
}

// Equal reports whether two layouts are the same shape:stride (not just the
// same function).
func (l Layout) Equal(m Layout) bool { return l.Shape.Equal(m.Shape) && l.Stride.Equal(m.Stride) }

// SameFunction reports whether l and m have the same size and give the same
// offset for every linear index.
func SameFunction(l, m Layout) bool {
	return l.Size() == m.Size() && slices.Equal(l.Offsets(), m.Offsets())
}
