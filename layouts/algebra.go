package layouts

import (
	"fmt"
	"sort"
)

// This file holds CuTe's layout algebra: coalesce, composition, complement,
// right inverse, the divides (tiling) and products, and the partitioning
// helpers built on them. Definitions follow CUTLASS
// media/docs/cpp/cute/02_layout_algebra.md and Cecka, "CuTe Layout
// Representation and Algebra" (2024); the implementation is our own.

const infShape = -1 // marks the unbounded extension of a layout's last mode

// Coalesce returns the simplest flat layout with the same function on
// [0, Size): size-1 modes are dropped and adjacent modes (s0:d0),(s1:d1) with
// d1 == s0*d0 are merged. A layout of size 1 coalesces to 1:0.
func Coalesce(l Layout) Layout {
	sh, st := coalesceFlat(l.flat())
	return fromFlat(sh, st)
}

func coalesceFlat(sh, st []int) ([]int, []int) {
	var osh, ost []int
	for i := range sh {
		if sh[i] == 1 {
			continue
		}
		if n := len(osh); n > 0 && st[i] == osh[n-1]*ost[n-1] {
			osh[n-1] *= sh[i]
			continue
		}
		osh = append(osh, sh[i])
		ost = append(ost, st[i])
	}
	return osh, ost
}

// fromFlat builds a layout from flat modes: none -> 1:0, one -> a leaf,
// more -> a flat tuple.
func fromFlat(sh, st []int) Layout {
	switch len(sh) {
	case 0:
		return Layout{Shape: Int(1), Stride: Int(0)}
	case 1:
		return Layout{Shape: Int(sh[0]), Stride: Int(st[0])}
	}
	return Layout{Shape: Ints(sh...), Stride: Ints(st...)}
}

// Composition returns the layout R = A o B with R(i) = A(B(i)) for every i in
// [0, Size(B)); R has B's shape tree (each leaf of B may become a tuple).
// A is extended beyond its size through the last mode of its coalesced
// form, as in CuTe. As in CuTe the result is formed leaf by leaf
// (A o (B0,B1) = (A o B0, A o B1)), which equals the function A(B(i)) when
// the leaves of B do not carry into one another in A's index space (true
// for the tilers that the divides and products build, and for injective B
// whose leaves cover disjoint digit ranges of A). Each leaf s:d must be
// admissible: d and s must divide, or be divided by, the shapes of A they
// cross (CuTe's divisibility conditions); otherwise an error names them.
func Composition(a, b Layout) (Layout, error) {
	ash, ast := coalesceFlat(a.flat())
	if len(ash) == 0 {
		ash, ast = []int{1}, []int{0}
	}
	var errOut error
	var rec func(sh, st IntTuple) (IntTuple, IntTuple)
	rec = func(sh, st IntTuple) (IntTuple, IntTuple) {
		if !sh.IsTuple() {
			rs, rd, err := composeLeaf(ash, ast, sh.val, st.val)
			if err != nil && errOut == nil {
				errOut = fmt.Errorf("layouts: composition %v o %v: %v", a, b, err)
			}
			if len(rs) == 1 {
				return Int(rs[0]), Int(rd[0])
			}
			return Ints(rs...), Ints(rd...)
		}
		es := make([]IntTuple, len(sh.elems))
		ed := make([]IntTuple, len(sh.elems))
		for i := range sh.elems {
			es[i], ed[i] = rec(sh.elems[i], st.elems[i])
		}
		return IntTuple{elems: es}, IntTuple{elems: ed}
	}
	rs, rd := rec(b.Shape, b.Stride)
	if errOut != nil {
		return Layout{}, errOut
	}
	return Layout{Shape: rs, Stride: rd}, nil
}

// composeLeaf composes the coalesced flat layout (ash:ast) with s:d and
// returns flat modes (at least one).
func composeLeaf(ash, ast []int, s, d int) ([]int, []int, error) {
	if s == 1 {
		return []int{1}, []int{0}, nil
	}
	if d == 0 {
		return []int{s}, []int{0}, nil
	}
	// Step 1: divide A by d (skip the first d indices' worth of modes).
	var sh, st []int
	rest := d
	for j := range ash {
		last := j == len(ash)-1
		switch {
		case rest == 1:
			sh, st = append(sh, ash[j]), append(st, ast[j])
			if last {
				sh[len(sh)-1] = infShape
			}
		case last:
			sh, st = append(sh, infShape), append(st, ast[j]*rest)
			rest = 1
		case ash[j]%rest == 0:
			sh, st = append(sh, ash[j]/rest), append(st, ast[j]*rest)
			rest = 1
		case rest%ash[j] == 0:
			rest /= ash[j]
		default:
			return nil, nil, fmt.Errorf("stride %d and shape %d do not divide", rest, ash[j])
		}
	}
	// Step 2: keep the first s indices.
	var osh, ost []int
	rem := s
	for j := range sh {
		if rem == 1 {
			break
		}
		switch {
		case sh[j] == infShape:
			osh, ost = append(osh, rem), append(ost, st[j])
			rem = 1
		case sh[j] == 1:
		case rem <= sh[j]:
			// The last mode taken may be cut short: indices 0..rem-1 of it.
			osh, ost = append(osh, rem), append(ost, st[j])
			rem = 1
		case rem%sh[j] == 0:
			osh, ost = append(osh, sh[j]), append(ost, st[j])
			rem /= sh[j]
		default:
			return nil, nil, fmt.Errorf("shape %d and shape %d do not divide", rem, sh[j])
		}
	}
	if len(osh) == 0 {
		return []int{1}, []int{0}, nil
	}
	return osh, ost, nil
}

// Complement returns the CuTe complement of A with respect to cotarget M:
// the layout C, ordered by stride, such that (A, C) is injective and covers
// [0, M') for the least M' >= M that the construction allows; C's size is
// ceil(M / cosize-of-A-compacted). A must be injective with strides that
// divide each other when sorted (otherwise an error).
func Complement(a Layout, m int) (Layout, error) {
	sh, st := a.flat()
	type mode struct{ s, d int }
	var ms []mode
	for i := range sh {
		if sh[i] != 1 && st[i] != 0 {
			ms = append(ms, mode{sh[i], st[i]})
		}
	}
	sort.SliceStable(ms, func(i, j int) bool {
		if ms[i].d != ms[j].d {
			return ms[i].d < ms[j].d
		}
		return ms[i].s < ms[j].s
	})
	var osh, ost []int
	cur := 1
	for _, x := range ms {
		if x.d%cur != 0 {
			return Layout{}, fmt.Errorf("layouts: complement of %v: stride %d is not a multiple of %d", a, x.d, cur)
		}
		osh, ost = append(osh, x.d/cur), append(ost, cur)
		cur = x.s * x.d
	}
	osh, ost = append(osh, (m+cur-1)/cur), append(ost, cur)
	osh, ost = coalesceFlat(osh, ost)
	return fromFlat(osh, ost), nil
}

// RightInverse returns the CuTe right inverse R of A: A(R(i)) == i for every
// i in [0, Size(R)), with Size(R) the largest contiguous prefix of offsets
// [0, n) that A reaches. For a bijective layout R is its inverse function.
func RightInverse(a Layout) Layout {
	sh, st := a.flat()
	type mode struct{ s, d, idx int }
	ms := make([]mode, 0, len(sh))
	p := 1
	for i := range sh {
		if sh[i] != 1 && st[i] != 0 {
			ms = append(ms, mode{sh[i], st[i], p})
		}
		p *= sh[i]
	}
	sort.SliceStable(ms, func(i, j int) bool { return ms[i].d < ms[j].d })
	var osh, ost []int
	cur := 1
	for _, x := range ms {
		if x.d != cur {
			break
		}
		osh, ost = append(osh, x.s), append(ost, x.idx)
		cur *= x.s
	}
	osh, ost = coalesceFlat(osh, ost)
	return fromFlat(osh, ost)
}

// LogicalDivide returns A / B = A o (B, complement(B, Size(A))): mode 0 is
// the tile B selects, mode 1 iterates over the tiles (CuTe logical_divide
// with a layout tiler).
func LogicalDivide(a, b Layout) (Layout, error) {
	c, err := Complement(b, a.Size())
	if err != nil {
		return Layout{}, err
	}
	return Composition(a, Concat(b, c))
}

// ZippedDivide divides mode i of A by tilers[i] (CuTe zipped_divide with a
// tuple of layout tilers) and gathers the result as
// ((tile_0, tile_1, ...), (rest_0, rest_1, ..., untiled modes of A)).
// With tilers of the form n:1 it cuts A into tiles of shape (n_0, n_1, ...).
func ZippedDivide(a Layout, tilers ...Layout) (Layout, error) {
	modes := a.Modes()
	if len(tilers) > len(modes) {
		return Layout{}, fmt.Errorf("layouts: %d tilers for rank-%d layout %v", len(tilers), len(modes), a)
	}
	var tiles, rests []Layout
	for i, m := range modes {
		if i >= len(tilers) {
			rests = append(rests, m)
			continue
		}
		d, err := LogicalDivide(m, tilers[i])
		if err != nil {
			return Layout{}, err
		}
		ms := d.Modes()
		tiles, rests = append(tiles, ms[0]), append(rests, ms[1])
	}
	return Concat(Concat(tiles...), Concat(rests...)), nil
}

// LogicalProduct returns (A, complement(A, Size(A)*Cosize(B)) o B): mode 0 is
// A, mode 1 repeats A in the arrangement B describes (CuTe logical_product).
func LogicalProduct(a, b Layout) (Layout, error) {
	r, err := productRest(a, b)
	if err != nil {
		return Layout{}, err
	}
	return Concat(a, r), nil
}

// productRest is complement(A, Size(A)*Cosize(B)) o B: the copies of A
// arranged as B says, the second factor of every product.
func productRest(a, b Layout) (Layout, error) {
	c, err := Complement(a, a.Size()*b.Cosize())
	if err != nil {
		return Layout{}, err
	}
	return Composition(c, b)
}

// BlockedProduct tiles the block A over the arrangement B mode by mode:
// mode i of the result is (A_i, R_i) where R = complement(A, Size(A)*Cosize(B))
// o B (CuTe blocked_product). A and B must have the same rank.
func BlockedProduct(a, b Layout) (Layout, error) { return product(a, b, false) }

// RakedProduct is BlockedProduct with each mode's order swapped: mode i is
// (R_i, A_i), interleaving the copies of A (CuTe raked_product).
func RakedProduct(a, b Layout) (Layout, error) { return product(a, b, true) }

func product(a, b Layout, raked bool) (Layout, error) {
	if a.Rank() != b.Rank() {
		return Layout{}, fmt.Errorf("layouts: product of rank-%d %v and rank-%d %v", a.Rank(), a, b.Rank(), b)
	}
	r, err := productRest(a, b)
	if err != nil {
		return Layout{}, err
	}
	am, rm := a.Modes(), r.Modes()
	if !a.Shape.IsTuple() {
		if raked {
			return Concat(r, a), nil
		}
		return Concat(a, r), nil
	}
	out := make([]Layout, len(am))
	for i := range am {
		if raked {
			out[i] = Concat(rm[i], am[i])
		} else {
			out[i] = Concat(am[i], rm[i])
		}
	}
	return Concat(out...), nil
}

// TileToShape repeats the atom (rank r) to cover shape (r extents, each a
// multiple of the atom's extent in that mode), atoms ordered column-major
// (mode 0 fastest), as CuTe tile_to_shape does with its default order.
func TileToShape(atom Layout, shape ...int) (Layout, error) {
	am := atom.Modes()
	if len(shape) != len(am) {
		return Layout{}, fmt.Errorf("layouts: tile_to_shape of rank-%d atom %v to %d extents", len(am), atom, len(shape))
	}
	reps := make([]int, len(shape))
	for i, m := range am {
		if m.Size() == 0 || shape[i]%m.Size() != 0 {
			return Layout{}, fmt.Errorf("layouts: extent %d of mode %d is not a multiple of the atom's %d", shape[i], i, m.Size())
		}
		reps[i] = shape[i] / m.Size()
	}
	arr, err := ColMajor(Ints(reps...))
	if err != nil {
		return Layout{}, err
	}
	return BlockedProduct(atom, arr)
}

// LocalTile returns the tile of A at tile coordinate coord when A is cut
// into tiles of shape tile (one extent per top-level mode of A, each
// dividing that mode's size), as a layout of the tile plus the offset of its
// first element (CuTe local_tile).
func LocalTile(a Layout, tile []int, coord []int) (Layout, int, error) {
	if len(tile) != a.Rank() || len(coord) != a.Rank() {
		return Layout{}, 0, fmt.Errorf("layouts: local_tile of rank-%d %v with tile %v, coord %v", a.Rank(), a, tile, coord)
	}
	tilers := make([]Layout, len(tile))
	for i, m := range a.Modes() {
		if tile[i] < 1 || m.Size()%tile[i] != 0 {
			return Layout{}, 0, fmt.Errorf("layouts: tile extent %d does not divide mode %d of size %d", tile[i], i, m.Size())
		}
		tilers[i] = Layout{Shape: Int(tile[i]), Stride: Int(1)}
	}
	z, err := ZippedDivide(a, tilers...)
	if err != nil {
		return Layout{}, 0, err
	}
	zm := z.Modes()
	off, err := zm[1].OffsetCoord(Ints(coord...))
	if err != nil {
		return Layout{}, 0, err
	}
	if a.Rank() == 1 {
		t, _ := zm[0].Mode(0)
		return t, off, nil
	}
	return zm[0], off, nil
}

// LocalPartition returns the elements of A that thread t owns when the
// threads, arranged by the layout thr (coordinate -> thread index, one mode
// per top-level mode of A that is partitioned), repeat over A: thread t owns
// the element at its coordinate inside every thr-shaped tile. It returns the
// layout over those elements and the offset of the first one (CuTe
// local_partition). thr must be injective and t one of its values.
func LocalPartition(a Layout, thr Layout, t int) (Layout, int, error) {
	tm := thr.Modes()
	if !thr.Shape.IsTuple() {
		tm = []Layout{thr}
	}
	if len(tm) > a.Rank() {
		return Layout{}, 0, fmt.Errorf("layouts: thread layout %v has more modes than %v", thr, a)
	}
	idx := -1
	for i, o := range thr.Offsets() {
		if o == t {
			if idx >= 0 {
				return Layout{}, 0, fmt.Errorf("layouts: thread layout %v is not injective", thr)
			}
			idx = i
		}
	}
	if idx < 0 {
		return Layout{}, 0, fmt.Errorf("layouts: thread %d is not in the image of %v", t, thr)
	}
	tilers := make([]Layout, len(tm))
	coord := make([]int, len(tm))
	am := a.Modes()
	for i, m := range tm {
		n := m.Size()
		if am[i].Size()%n != 0 {
			return Layout{}, 0, fmt.Errorf("layouts: %d threads in mode %d do not divide its size %d", n, i, am[i].Size())
		}
		tilers[i] = Layout{Shape: Int(n), Stride: Int(1)}
		coord[i] = idx % n
		idx /= n
	}
	z, err := ZippedDivide(a, tilers...)
	if err != nil {
		return Layout{}, 0, err
	}
	zm := z.Modes()
	var off int
	if len(coord) == 1 && !zm[0].Shape.IsTuple() {
		off, err = zm[0].OffsetCoord(Int(coord[0]))
	} else {
		off, err = zm[0].OffsetCoord(Ints(coord...))
	}
	if err != nil {
		return Layout{}, 0, err
	}
	return zm[1], off, nil
}
