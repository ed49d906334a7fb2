package layouts

import (
	"fmt"
	"slices"
	"strings"
)

// IntTuple is CuTe's hierarchical integer tuple: either a single integer
// (a leaf) or an ordered tuple of IntTuples. Shapes, strides and coordinates
// of a Layout are IntTuples. It is printed as CuTe prints it: a leaf as its
// decimal value, a tuple as "(a,b,...)", e.g. (2,(2,2)).
//
// Source: CuTe's IntTuple (CUTLASS cute/int_tuple.hpp, docs
// media/docs/cpp/cute/01_layout.md); only dynamic integers are modelled.
type IntTuple struct {
	val   int
	elems []IntTuple // nil for a leaf; non-nil (possibly empty) for a tuple
}

// Int returns the leaf IntTuple holding v.
func Int(v int) IntTuple { return IntTuple{val: v} }

// Tuple returns the tuple of the given elements (copied).
func Tuple(elems ...IntTuple) IntTuple {
	e := make([]IntTuple, len(elems))
	copy(e, elems)
	return IntTuple{elems: e}
}

// Ints returns the flat tuple (v0,v1,...).
func Ints(vs ...int) IntTuple {
	e := make([]IntTuple, len(vs))
	for i, v := range vs {
		e[i] = Int(v)
	}
	return IntTuple{elems: e}
}

// IsTuple reports whether t is a tuple (as opposed to a leaf).
func (t IntTuple) IsTuple() bool { return t.elems != nil }

// Value returns the integer of a leaf; 0 for a tuple.
func (t IntTuple) Value() int { return t.val }

// Len returns the number of elements of a tuple, 1 for a leaf (CuTe rank).
func (t IntTuple) Len() int {
	if t.IsTuple() {
		return len(t.elems)
	}
	return 1
}

// At returns the i-th element of a tuple; At(0) of a leaf is the leaf
// itself. An index out of range returns an error.
func (t IntTuple) At(i int) (IntTuple, error) {
	if !t.IsTuple() {
		if i == 0 {
			return t, nil
		}
		return IntTuple{}, fmt.Errorf("layouts: index %d of leaf %v", i, t)
	}
	if i < 0 || i >= len(t.elems) {
		return IntTuple{}, fmt.Errorf("layouts: index %d out of range for %v (rank %d)", i, t, len(t.elems))
	}
	return t.elems[i], nil
}

// Elems returns a copy of the elements of a tuple (a leaf gives itself).
func (t IntTuple) Elems() []IntTuple {
	if !t.IsTuple() {
		return []IntTuple{t}
	}
	out := make([]IntTuple, len(t.elems))
	copy(out, t.elems)
	return out
}

// Flatten returns the leaves of t in order (depth first, left to right).
func (t IntTuple) Flatten() []int {
	var out []int
	t.walk(func(v int) { out = append(out, v) })
	return out
}

func (t IntTuple) walk(f func(int)) {
	if !t.IsTuple() {
		f(t.val)
		return
	}
	for _, e := range t.elems {
		e.walk(f)
	}
}

// Product returns the product of all leaves (CuTe size of a shape); 1 for
// an empty tuple.
func (t IntTuple) Product() int {
	p := 1
	t.walk(func(v int) { p *= v })
	return p
}

// Depth returns 0 for a leaf and 1 + the deepest element for a tuple.
func (t IntTuple) Depth() int {
	if !t.IsTuple() {
		return 0
	}
	d := 0
	for _, e := range t.elems {
		if x := e.Depth(); x > d {
			d = x
		}
	}
	return d + 1
}

// Congruent reports whether a and b have the same tree structure.
func Congruent(a, b IntTuple) bool {
	if a.IsTuple() != b.IsTuple() {
		return false
	}
	if !a.IsTuple() {
		return true
	}
	if len(a.elems) != len(b.elems) {
		return false
	}
	for i := range a.elems {
		if !Congruent(a.elems[i], b.elems[i]) {
			return false
		}
	}
	return true
}

// Equal reports whether a and b have the same structure and leaves.
func (t IntTuple) Equal(b IntTuple) bool {
	if !Congruent(t, b) {
		return false
	}
	return slices.Equal(t.Flatten(), b.Flatten())
}

// String prints t in CuTe notation, e.g. (2,(2,2)).
func (t IntTuple) String() string {
	var b strings.Builder
	t.format(&b)
	return b.String()
}

func (t IntTuple) format(b *strings.Builder) {
	if !t.IsTuple() {
		fmt.Fprintf(b, "%d", t.val)
		return
	}
	b.WriteByte('(')
	for i, e := range t.elems {
		if i > 0 {
			b.WriteByte(',')
		}
		e.format(b)
	}
	b.WriteByte(')')
}

// rebuild returns a tuple congruent to t whose leaves are taken in order
// from leaves (which must hold exactly as many entries as t has leaves).
func (t IntTuple) rebuild(leaves []int) IntTuple {
	i := 0
	var rec func(IntTuple) IntTuple
	rec = func(x IntTuple) IntTuple {
		if !x.IsTuple() {
			v := leaves[i]
			i++
			return Int(v)
		}
		e := make([]IntTuple, len(x.elems))
		for j, c := range x.elems {
			e[j] = rec(c)
		}
		return IntTuple{elems: e}
	}
	return rec(t)
}

// ParseIntTuple parses CuTe notation: an integer or a parenthesised,
// comma-separated list of IntTuples, e.g. "(2,(2,2))". Spaces are allowed.
// A leading underscore on an integer (CuTe's static "_8") is accepted.
func ParseIntTuple(s string) (IntTuple, error) {
	p := &tupleParser{s: strings.TrimSpace(s)}
	t, err := p.parse()
	if err != nil {
		return IntTuple{}, err
	}
	p.skip()
	if p.i != len(p.s) {
		return IntTuple{}, fmt.Errorf("layouts: unexpected %q at offset %d of %q", p.s[p.i:], p.i, s)
	}
	return t, nil
}

type tupleParser struct {
	s string
	i int
}

func (p *tupleParser) skip() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *tupleParser) parse() (IntTuple, error) {
	p.skip()
	if p.i >= len(p.s) {
		return IntTuple{}, fmt.Errorf("layouts: unexpected end of %q", p.s)
	}
	if p.s[p.i] == '(' {
		p.i++
		elems := []IntTuple{}
		for {
			e, err := p.parse()
			if err != nil {
				return IntTuple{}, err
			}
			elems = append(elems, e)
			p.skip()
			if p.i >= len(p.s) {
				return IntTuple{}, fmt.Errorf("layouts: missing ')' in %q", p.s)
			}
			if p.s[p.i] == ',' {
				p.i++
				continue
			}
			if p.s[p.i] == ')' {
				p.i++
				return IntTuple{elems: elems}, nil
			}
			return IntTuple{}, fmt.Errorf("layouts: unexpected %q at offset %d of %q", p.s[p.i], p.i, p.s)
		}
	}
	if p.s[p.i] == '_' {
		p.i++
	}
	start := p.i
	if p.i < len(p.s) && p.s[p.i] == '-' {
		p.i++
	}
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		p.i++
	}
	if p.i == start || (p.i == start+1 && p.s[start] == '-') {
		return IntTuple{}, fmt.Errorf("layouts: expected an integer at offset %d of %q", start, p.s)
	}
	v := 0
	neg := p.s[start] == '-'
	for _, c := range p.s[start:p.i] {
		if c == '-' {
			continue
		}
		v = v*10 + int(c-'0')
		if v > 1<<40 {
			return IntTuple{}, fmt.Errorf("layouts: integer too large in %q", p.s)
		}
	}
	if neg {
		v = -v
	}
	return Int(v), nil
}
