package layouts

import (
	"math/rand"
	"testing"
	"time"
)

func newRand(t *testing.T) *rand.Rand {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewSource(seed))
}

func mustLayout(t *testing.T, s string) Layout {
	t.Helper()
	l, err := ParseLayout(s)
	if err != nil {
		t.Fatalf("ParseLayout(%q): %v", s, err)
	}
	return l
}

func TestPrinterAndOffsets(t *testing.T) {
	l := mustLayout(t, "(2,(2,2)):(4,(2,1))")
	if got := l.String(); got != "(2,(2,2)):(4,(2,1))" {
		t.Fatalf("String = %q", got)
	}
	want := []int{0, 4, 2, 6, 1, 5, 3, 7}
	for i, w := range want {
		o, err := l.Offset(i)
		if err != nil || o != w {
			t.Fatalf("offset(%d) = %d, %v; want %d", i, o, err, w)
		}
	}
	if !l.IsBijective() {
		t.Fatal("not bijective")
	}
	// Hierarchical and flat-per-mode coordinates.
	o, err := l.OffsetCoord(Tuple(Int(1), Ints(1, 0)))
	if err != nil || o != 4+2 {
		t.Fatalf("OffsetCoord((1,(1,0))) = %d, %v", o, err)
	}
	o, err = l.OffsetAt(1, 3) // 3 over (2,2) is (1,1)
	if err != nil || o != 4+2+1 {
		t.Fatalf("OffsetAt(1,3) = %d, %v", o, err)
	}
	if _, err := l.Offset(8); err == nil {
		t.Fatal("index 8 accepted")
	}
	if _, err := l.OffsetAt(2, 0); err == nil {
		t.Fatal("coordinate 2 accepted")
	}
	if got := mustLayout(t, "8:1").String(); got != "8:1" {
		t.Fatalf("leaf prints %q", got)
	}
	for _, bad := range []string{"(2,2):(1)", "(2,2)", "(0,2):(1,2)", "(2,2):(1,-1)", "((2,2):(1,2)"} {
		if _, err := ParseLayout(bad); err == nil {
			t.Errorf("ParseLayout(%q) accepted", bad)
		}
	}
	c, _ := ColMajor(Tuple(Int(4), Ints(2, 3)))
	if c.String() != "(4,(2,3)):(1,(4,8))" {
		t.Fatalf("ColMajor = %v", c)
	}
	r, _ := RowMajor(Ints(4, 8))
	if r.String() != "(4,8):(8,1)" {
		t.Fatalf("RowMajor = %v", r)
	}
}

// randomShape returns a random nested shape with leaves in [1,max].
func randomShape(r *rand.Rand, depth int, leaf func() int) IntTuple {
	if depth == 0 || r.Intn(3) == 0 {
		return Int(leaf())
	}
	n := 1 + r.Intn(3)
	e := make([]IntTuple, n)
	for i := range e {
		e[i] = randomShape(r, depth-1, leaf)
	}
	return Tuple(e...)
}

// randomCompact returns a random compact (bijective) layout: the leaves of a
// random shape get the strides of a random permutation of the leaves.
func randomCompact(r *rand.Rand, leaf func() int) Layout {
	sh := randomShape(r, 3, leaf)
	for sh.Product() > 2048 {
		sh = randomShape(r, 3, leaf)
	}
	fl := sh.Flatten()
	perm := r.Perm(len(fl))
	st := make([]int, len(fl))
	p := 1
	for _, k := range perm {
		st[k] = p
		p *= fl[k]
	}
	l, _ := MakeLayout(sh, sh.rebuild(st))
	return l
}

func TestCompactLayoutsAreBijectiveWithInverse(t *testing.T) {
	r := newRand(t)
	for n := 0; n < 300; n++ {
		l := randomCompact(r, func() int { return 1 + r.Intn(5) })
		if !l.IsBijective() {
			t.Fatalf("%v is not bijective", l)
		}
		p, _ := ParseLayout(l.String())
		if !p.Equal(l) {
			t.Fatalf("parse(print(%v)) = %v", l, p)
		}
		inv := RightInverse(l)
		if inv.Size() != l.Size() {
			t.Fatalf("right inverse of %v is %v (size %d)", l, inv, inv.Size())
		}
		for i := 0; i < l.Size(); i++ {
			j, _ := inv.Offset(i)
			o, _ := l.Offset(j)
			if o != i {
				t.Fatalf("%v(%v(%d)) = %d", l, inv, i, o)
			}
			c, _ := l.Coord(i)
			o1, _ := l.OffsetCoord(c)
			o2, _ := l.Offset(i)
			if o1 != o2 {
				t.Fatalf("coord %v of %d gives %d, index gives %d", c, i, o1, o2)
			}
		}
		co := Coalesce(l)
		if !SameFunction(co, l) {
			t.Fatalf("coalesce(%v) = %v changes the function", l, co)
		}
		if co.Size() > 1 && co.Depth() > 1 {
			t.Fatalf("coalesce(%v) = %v is not flat", l, co)
		}
	}
	// A layout with a repeated offset is not bijective.
	if mustLayout(t, "(2,2):(1,1)").IsBijective() || mustLayout(t, "(2,2):(2,4)").IsBijective() {
		t.Fatal("non-bijective layout reported bijective")
	}
}

func TestCompositionExamples(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"20:2", "(5,4):(4,1)", "(5,4):(8,2)"},
		{"(6,2):(8,2)", "(4,3):(3,1)", "((2,2),3):((24,2),8)"},
		{"(10,2):(16,4)", "(5,4):(1,5)", "(5,(2,2)):(16,(80,4))"},
		{"(4,2):(1,4)", "3:1", "3:1"},
		{"(2,(2,2)):(4,(2,1))", "4:2", "(2,2):(2,1)"},
		{"8:1", "(2,2):(0,1)", "(2,2):(0,1)"},
	} {
		a, b := mustLayout(t, c.a), mustLayout(t, c.b)
		got, err := Composition(a, b)
		if err != nil {
			t.Fatalf("%s o %s: %v", c.a, c.b, err)
		}
		if got.String() != c.want {
			t.Errorf("%s o %s = %v, want %s", c.a, c.b, got, c.want)
		}
		checkComposition(t, a, b, got)
	}
	if _, err := Composition(mustLayout(t, "(6,2):(1,7)"), mustLayout(t, "2:4")); err == nil {
		t.Error("inadmissible composition (stride 4 across shape 6) accepted")
	}
}

func checkComposition(t *testing.T, a, b, r Layout) {
	t.Helper()
	if r.Size() != b.Size() {
		t.Fatalf("%v o %v = %v: size %d, want %d", a, b, r, r.Size(), b.Size())
	}
	for i := 0; i < b.Size(); i++ {
		bi, _ := b.Offset(i)
		want := Coalesce(a).call(bi)
		got, _ := r.Offset(i)
		if got != want {
			t.Fatalf("(%v o %v)(%d) = %d, want A(B(%d)) = A(%d) = %d", a, b, i, got, i, bi, want)
		}
	}
}

func TestCompositionRandom(t *testing.T) {
	r := newRand(t)
	pow2 := func() int { return 1 << r.Intn(3) }
	for n := 0; n < 500; n++ {
		a := randomCompact(r, pow2)
		// B: power-of-2 leaves over disjoint bit ranges of A's index space
		// (with gaps), plus broadcast (stride-0) leaves: the leaves do not
		// carry into one another, so the by-mode composition is A(B(i)).
		sh := randomShape(r, 2, pow2)
		for sh.Product() > 256 {
			sh = randomShape(r, 2, pow2)
		}
		fl := sh.Flatten()
		st := make([]int, len(fl))
		bit := 0
		for _, k := range r.Perm(len(fl)) {
			if r.Intn(6) == 0 {
				st[k] = 0
				continue
			}
			bit += r.Intn(2)
			st[k] = 1 << bit
			for s := fl[k]; s > 1; s >>= 1 {
				bit++
			}
		}
		b, _ := MakeLayout(sh, sh.rebuild(st))
		got, err := Composition(a, b)
		if err != nil {
			t.Fatalf("%v o %v: %v", a, b, err)
		}
		checkComposition(t, a, b, got)
		if b.Shape.IsTuple() && (!got.Shape.IsTuple() || got.Shape.Len() != b.Shape.Len()) {
			t.Fatalf("%v o %v = %v does not keep B's structure", a, b, got)
		}
	}
}

func TestComplement(t *testing.T) {
	for _, c := range []struct {
		a    string
		m    int
		want string
	}{
		{"4:1", 24, "6:4"},
		{"6:4", 24, "4:1"},
		{"(4,6):(1,4)", 24, "1:0"},
		{"4:2", 24, "(2,3):(1,8)"},
		{"(2,2):(1,6)", 24, "(3,2):(2,12)"},
		{"(2,4):(1,6)", 8, "3:2"},
	} {
		a := mustLayout(t, c.a)
		got, err := Complement(a, c.m)
		if err != nil {
			t.Fatalf("complement(%s,%d): %v", c.a, c.m, err)
		}
		if got.String() != c.want {
			t.Errorf("complement(%s,%d) = %v, want %s", c.a, c.m, got, c.want)
		}
	}
	if _, err := Complement(mustLayout(t, "(2,2):(2,3)"), 12); err == nil {
		t.Error("complement of a layout with non-dividing strides accepted")
	}
	r := newRand(t)
	for n := 0; n < 300; n++ {
		// A: an injective layout with power-of-2 shapes whose sorted strides
		// leave gaps.
		k := 1 + r.Intn(3)
		sh, st := make([]int, k), make([]int, k)
		cur := 1
		for i := 0; i < k; i++ {
			cur <<= r.Intn(3)
			sh[i] = 1 << r.Intn(3)
			st[i] = cur
			cur *= sh[i]
		}
		perm := r.Perm(k)
		psh, pst := make([]int, k), make([]int, k)
		for i, p := range perm {
			psh[i], pst[i] = sh[p], st[p]
		}
		a, _ := MakeLayout(Ints(psh...), Ints(pst...))
		m := a.Cosize() << r.Intn(3)
		c, err := Complement(a, m)
		if err != nil {
			t.Fatalf("complement(%v,%d): %v", a, m, err)
		}
		ac := Concat(a, c)
		if !ac.IsInjective() {
			t.Fatalf("(%v, complement %v) is not injective", a, c)
		}
		if ac.Size() < m || !ac.IsBijective() {
			t.Fatalf("(%v, complement %v) of size %d does not tile [0,%d)", a, c, ac.Size(), m)
		}
	}
}

func TestDivideAndProduct(t *testing.T) {
	a, b := mustLayout(t, "(4,2,3):(2,1,8)"), mustLayout(t, "4:2")
	d, err := LogicalDivide(a, b)
	if err != nil || d.String() != "((2,2),(2,3)):((4,1),(2,8))" {
		t.Fatalf("logical_divide = %v, %v", d, err)
	}
	p, err := LogicalProduct(mustLayout(t, "(2,2):(4,1)"), mustLayout(t, "6:1"))
	if err != nil || p.String() != "((2,2),(2,3)):((4,1),(2,8))" {
		t.Fatalf("logical_product = %v, %v", p, err)
	}
	bp, err := BlockedProduct(mustLayout(t, "(2,5):(5,1)"), mustLayout(t, "(3,4):(1,3)"))
	if err != nil || bp.String() != "((2,3),(5,4)):((5,10),(1,30))" {
		t.Fatalf("blocked_product = %v, %v", bp, err)
	}
	rp, err := RakedProduct(mustLayout(t, "(2,5):(5,1)"), mustLayout(t, "(3,4):(1,3)"))
	if err != nil || rp.String() != "((3,2),(4,5)):((10,5),(30,1))" {
		t.Fatalf("raked_product = %v, %v", rp, err)
	}
	for _, l := range []Layout{bp, rp} {
		if !l.IsBijective() {
			t.Fatalf("%v is not bijective", l)
		}
	}

	r := newRand(t)
	pow2 := func() int { return 1 << r.Intn(3) }
	for n := 0; n < 300; n++ {
		a := randomCompact(r, pow2)
		tile := Layout{Shape: Int(1 << r.Intn(3)), Stride: Int(1 << r.Intn(2))}
		if tile.Cosize() > a.Size() {
			continue
		}
		d, err := LogicalDivide(a, tile)
		if err != nil {
			t.Fatalf("%v / %v: %v", a, tile, err)
		}
		if d.Size() != a.Size() {
			t.Fatalf("%v / %v = %v changes the size", a, tile, d)
		}
		comp, _ := Complement(tile, a.Size())
		checkComposition(t, a, Concat(tile, comp), d)
		// A divide only reorders A's offsets.
		seen := map[int]int{}
		for _, o := range a.Offsets() {
			seen[o]++
		}
		for _, o := range d.Offsets() {
			seen[o]--
		}
		for o, c := range seen {
			if c != 0 {
				t.Fatalf("%v / %v = %v: offset %d count differs by %d", a, tile, d, o, c)
			}
		}
		p, err := LogicalProduct(a, Layout{Shape: Int(1 + r.Intn(4)), Stride: Int(1)})
		if err != nil || !p.IsBijective() {
			t.Fatalf("logical_product(%v, n:1) = %v, %v: not a bijection", a, p, err)
		}
	}
}

func TestTilingAndPartitioning(t *testing.T) {
	// An 8x12 row-major matrix.
	m, _ := RowMajor(Ints(8, 12))
	for ti := 0; ti < 4; ti++ {
		for tj := 0; tj < 3; tj++ {
			tile, off, err := LocalTile(m, []int{2, 4}, []int{ti, tj})
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < 2; i++ {
				for j := 0; j < 4; j++ {
					o, err := tile.OffsetAt(i, j)
					if err != nil {
						t.Fatal(err)
					}
					if want := (ti*2+i)*12 + tj*4 + j; off+o != want {
						t.Fatalf("tile (%d,%d) %v + %d at (%d,%d) = %d, want %d", ti, tj, tile, off, i, j, off+o, want)
					}
				}
			}
		}
	}
	if _, _, err := LocalTile(m, []int{3, 4}, []int{0, 0}); err == nil {
		t.Fatal("non-dividing tile accepted")
	}
	// 4x2 threads arranged row-major (thread = 2*i + j) over the 8x12 matrix:
	// thread (i,j) owns rows i, i+4 and columns j, j+2, ..., j+10.
	thr, _ := RowMajor(Ints(4, 2))
	owned := map[int]int{}
	for th := 0; th < 8; th++ {
		part, off, err := LocalPartition(m, thr, th)
		if err != nil {
			t.Fatal(err)
		}
		if part.Size() != 12 {
			t.Fatalf("thread %d owns %v (size %d), want 12 elements", th, part, part.Size())
		}
		i, j := th/2, th%2
		for a := 0; a < 2; a++ {
			for b := 0; b < 6; b++ {
				o, err := part.OffsetAt(a, b)
				if err != nil {
					t.Fatal(err)
				}
				if want := (i+4*a)*12 + j + 2*b; off+o != want {
					t.Fatalf("thread %d element (%d,%d) at %d, want %d", th, a, b, off+o, want)
				}
				owned[off+o]++
			}
		}
	}
	if len(owned) != 96 {
		t.Fatalf("threads own %d distinct elements, want 96", len(owned))
	}
	if _, _, err := LocalPartition(m, thr, 8); err == nil {
		t.Fatal("thread 8 of 8 accepted")
	}
	// TileToShape: an 8x64 atom over 64x128, atoms M-first.
	atom, _ := RowMajor(Ints(8, 64))
	tl, err := TileToShape(atom, 64, 128)
	if err != nil {
		t.Fatal(err)
	}
	if tl.String() != "((8,8),(64,2)):((64,512),(1,4096))" {
		t.Fatalf("tile_to_shape = %v", tl)
	}
}

func TestSwizzleBasics(t *testing.T) {
	for _, s := range []Swizzle{{1, 4, 3}, {2, 4, 3}, {3, 4, 3}, {3, 3, 3}, {2, 5, 3}} {
		seen := map[int]bool{}
		for x := 0; x < 4096; x++ {
			y := s.Apply(x)
			if s.Apply(y) != x {
				t.Fatalf("%v is not an involution at %d", s, x)
			}
			if y>>(s.M+s.S+s.B) != x>>(s.M+s.S+s.B) {
				t.Fatalf("%v moves %d out of its block", s, x)
			}
			seen[y] = true
		}
		if len(seen) != 4096 {
			t.Fatalf("%v is not a bijection on [0,4096)", s)
		}
	}
	if s, _ := (Swizzle{3, 4, 3}).InUnits(1); s != (Swizzle{3, 3, 3}) {
		t.Fatalf("Sw<3,4,3> in bf16 units = %v", s)
	}
	if _, err := (Swizzle{3, 4, 3}).InUnits(5); err == nil {
		t.Fatal("32-byte unit accepted for a 16-byte chunk swizzle")
	}
}

// TestSwizzleModesMatchPTX checks the byte patterns against the swizzling
// modes of the PTX ISA (9.7.15.5.1 and the TMA swizzle figures), written
// here in the ISA's own terms: the shared memory is seen as rows of 128
// bytes made of eight 16-byte chunks; within each block of RepeatBytes, the
// 128B mode stores chunk c of row r at chunk c^(r%8); the 64B mode swaps
// chunks within each 64-byte half, c^(r%4) on the low two chunk bits; the
// 32B mode swaps chunk pairs within each 32-byte quarter, c^(r%2) on the
// low chunk bit. Bytes inside a chunk never move.
func TestSwizzleModesMatchPTX(t *testing.T) {
	want := map[SwizzleMode]func(row, chunk int) int{
		SwizzleNone: func(r, c int) int { return c },
		Swizzle32B:  func(r, c int) int { return c&^1 | (c&1 ^ r&1) },
		Swizzle64B:  func(r, c int) int { return c&^3 | (c&3 ^ r&3) },
		Swizzle128B: func(r, c int) int { return c ^ r&7 },
	}
	period := map[SwizzleMode]int{SwizzleNone: 16, Swizzle32B: 256, Swizzle64B: 512, Swizzle128B: 1024}
	for mode, f := range want {
		p, err := mode.Pattern()
		if err != nil {
			t.Fatal(err)
		}
		if mode.RepeatBytes() != period[mode] {
			t.Fatalf("%v repeats every %d bytes, want %d", mode, mode.RepeatBytes(), period[mode])
		}
		for a := 0; a < 4*1024; a++ {
			block := a &^ 1023
			row := (a >> 7) & 7
			chunk := (a >> 4) & 7
			exp := block | row<<7 | f(row, chunk)<<4 | a&15
			if got := p.Apply(a); got != exp {
				t.Fatalf("%v: byte %d -> %d, PTX pattern gives %d", mode, a, got, exp)
			}
		}
	}
	// The pattern is anchored at RepeatBytes boundaries: shifting an address
	// by one period shifts the result by one period.
	for _, mode := range []SwizzleMode{Swizzle32B, Swizzle64B, Swizzle128B} {
		p, _ := mode.Pattern()
		for a := 0; a < 2048; a++ {
			if p.Apply(a+mode.RepeatBytes()) != p.Apply(a)+mode.RepeatBytes() {
				t.Fatalf("%v is not periodic with period %d", mode, mode.RepeatBytes())
			}
		}
	}
	if _, err := Swizzle128BAtom32B.Pattern(); err == nil {
		t.Fatal("unmodelled pattern returned")
	}
}
