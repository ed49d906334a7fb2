package layouts

import (
	"math"
	"testing"
	"unsafe"
)

var testRows = []int{1, 127, 128, 129, 0, 255, 64, 3}

const testK = 2880 // H of gpt-oss: not a multiple of 128; nSF = 90, not a multiple of 4

func TestSFOffsetFormulaAndLayout(t *testing.T) {
	// Worked by hand from the formula in SFOffset's doc comment with nSF = 90
	// (23 K tiles).
	for _, c := range []struct{ r, c, want int }{
		{0, 0, 0}, {0, 1, 1}, {0, 3, 3}, {0, 4, 512}, {1, 0, 16}, {31, 0, 496}, {32, 0, 4}, {33, 2, 22},
		{127, 3, 31*16 + 3*4 + 3}, {128, 0, 23 * 512}, {129, 89, (23+22)*512 + 16 + 1},
	} {
		if got := SFOffset(c.r, c.c, 90); got != c.want {
			t.Errorf("SFOffset(%d, %d, 90) = %d, want %d", c.r, c.c, got, c.want)
		}
	}
	if SFAtomLayout().String() != "((32,4),4):((16,4),1)" || !SFAtomLayout().IsBijective() {
		t.Fatalf("atom %v", SFAtomLayout())
	}
	l, err := SFOperandLayout(3, 23)
	if err != nil {
		t.Fatal(err)
	}
	if !l.IsBijective() || l.Size() != 3*23*512 {
		t.Fatalf("%v is not a bijection onto %d bytes", l, 3*23*512)
	}
	for r := 0; r < 3*128; r++ {
		for c := 0; c < 92; c++ {
			o, err := l.OffsetAt(r, c)
			if err != nil || o != SFOffset(r, c, 90) {
				t.Fatalf("layout (%d,%d) = %d, %v; formula %d", r, c, o, err, SFOffset(r, c, 90))
			}
		}
	}
}

func TestSFLayoutPackUnpack(t *testing.T) {
	r := newRand(t)
	l, err := NewSFLayout(testRows, testK)
	if err != nil {
		t.Fatal(err)
	}
	if l.NSF != 90 || l.KTiles != 23 || l.Size != 9*23*512 || l.TotalRows() != 707 {
		t.Fatalf("layout %+v", l)
	}
	wantTiles := []int{1, 1, 1, 2, 0, 2, 1, 1}
	for e, rt := range wantTiles {
		if l.RowTiles[e] != rt {
			t.Fatalf("expert %d: %d row tiles, want %d", e, l.RowTiles[e], rt)
		}
	}
	// Real positions are distinct, inside the buffer, and invert.
	real := 0
	seen := make([]bool, l.Size)
	for e, rows := range testRows {
		for i := 0; i < rows; i++ {
			for c := 0; c < l.NSF; c++ {
				o, err := l.Offset(e, i, c)
				if err != nil {
					t.Fatal(err)
				}
				if seen[o] || l.IsPadding(o) {
					t.Fatalf("(%d,%d,%d) at %d: repeated or marked padding", e, i, c, o)
				}
				seen[o] = true
				if ee, rr, cc, ok := l.locate(o); !ok || ee != e || rr != i || cc != c {
					t.Fatalf("locate(%d) = %d,%d,%d, want %d,%d,%d", o, ee, rr, cc, e, i, c)
				}
				real++
			}
		}
	}
	pad := 0
	for o := range seen {
		if !seen[o] {
			if !l.IsPadding(o) {
				t.Fatalf("byte %d holds no scale but is not padding", o)
			}
			pad++
		}
	}
	if real != 707*90 || real+pad != l.Size {
		t.Fatalf("%d real + %d padding bytes, size %d", real, pad, l.Size)
	}
	if _, err := l.ExpertLayout(4); err == nil {
		t.Fatal("layout of an expert with no rows")
	}
	if el, err := l.ExpertLayout(3); err != nil || el.Size() != 2*128*92 {
		t.Fatalf("expert 3 layout %v, %v", el, err)
	}
	for _, bad := range [][3]int{{4, 0, 0}, {0, 1, 0}, {3, 0, 90}, {8, 0, 0}, {-1, 0, 0}} {
		if _, err := l.Offset(bad[0], bad[1], bad[2]); err == nil {
			t.Fatalf("Offset%v accepted", bad)
		}
	}

	src := make([]uint8, l.TotalRows()*l.NSF)
	for i := range src {
		src[i] = uint8(r.Intn(255))
	}
	packed, err := l.Pack(src)
	if err != nil {
		t.Fatal(err)
	}
	for o, b := range packed {
		if l.IsPadding(o) && b != SFPadByte {
			t.Fatalf("padding byte %d = %#x", o, b)
		}
	}
	back, err := l.Unpack(packed)
	if err != nil || string(back) != string(src) {
		t.Fatalf("unpack(pack) differs: %v", err)
	}

	// In-place refresh: a caller-owned buffer full of garbage is rewritten
	// at the same address to exactly the packed bytes.
	dst := make([]uint8, l.Size)
	for i := range dst {
		dst[i] = uint8(r.Intn(256))
	}
	addr := unsafe.SliceData(dst)
	if err := l.Refresh(dst, src); err != nil {
		t.Fatal(err)
	}
	if unsafe.SliceData(dst) != addr || string(dst) != string(packed) {
		t.Fatal("Refresh did not rewrite the buffer in place")
	}
	// Refreshing one expert changes only its region.
	e := 5
	ne := make([]uint8, testRows[e]*l.NSF)
	for i := range ne {
		ne[i] = uint8(r.Intn(255))
	}
	before := append([]uint8(nil), dst...)
	if err := l.RefreshExpert(dst, e, ne); err != nil {
		t.Fatal(err)
	}
	lo, hi := l.Base[e], l.Base[e]+l.RowTiles[e]*l.KTiles*SFTileBytes
	for o := range dst {
		if (o < lo || o >= hi) && dst[o] != before[o] {
			t.Fatalf("RefreshExpert(%d) changed byte %d outside [%d,%d)", e, o, lo, hi)
		}
	}
	copy(src[l.RowStart[e]*l.NSF:], ne)
	if want, _ := l.Pack(src); string(dst) != string(want) {
		t.Fatal("RefreshExpert result differs from a full pack")
	}
	if l.Refresh(dst[:10], src) == nil || l.Refresh(dst, src[1:]) == nil || l.RefreshExpert(dst, 8, ne) == nil ||
		l.RefreshExpert(dst, 0, ne) == nil {
		t.Fatal("bad lengths or expert accepted")
	}
	for _, bad := range []struct {
		rows []int
		k    int
	}{{nil, 64}, {[]int{4, -1}, 64}, {[]int{4}, 0}} {
		if _, err := NewSFLayout(bad.rows, bad.k); err == nil {
			t.Fatalf("NewSFLayout(%v, %d) accepted", bad.rows, bad.k)
		}
	}
}

// TestSFPaddingNeverChangesValues quantizes per-expert activations (rows
// [1,127,128,129,0,255,64,3], K 2880), packs their scales, and checks that
// (1) dequantizing through the packed layout gives the same bits as the
// plain scales, whatever the padding bytes hold; (2) an emulated
// tcgen05 block-scaled MMA that walks whole padded tiles (128 rows, K
// padded to 23*128 = 2944 with zero-filled data, as TMA fills outside K)
// gives the same real rows for every padding value Pack may write, and a NaN
// padding scale (0xFF, which Pack never writes) would poison them.
func TestSFPaddingNeverChangesValues(t *testing.T) {
	r := newRand(t)
	l, _ := NewSFLayout(testRows, testK)
	n := l.TotalRows()
	src := randomTensor(r, n*testK)
	q, err := Quantize(src, 1, n, testK, QuantizeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	packed, err := l.Pack(q.Scales)
	if err != nil {
		t.Fatal(err)
	}
	want := q.Dequantize()
	check := func(buf []uint8, what string) {
		got, err := DequantizeSF(q.Data, buf, l)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: element %d = %g, want %g", what, i, got[i], want[i])
			}
		}
	}
	check(packed, "packed")
	garbage := append([]uint8(nil), packed...)
	for o := range garbage {
		if l.IsPadding(o) {
			garbage[o] = uint8(r.Intn(256))
		}
	}
	check(garbage, "garbage padding")
	if _, err := DequantizeSF(q.Data[1:], packed, l); err == nil {
		t.Fatal("short data accepted")
	}

	// B operand: N = 8 rows of weights over the same K, its own layout.
	const nB = 8
	lb, _ := NewSFLayout([]int{nB}, testK)
	wsrc := randomTensor(r, nB*testK)
	qb, _ := Quantize(wsrc, 1, nB, testK, QuantizeOptions{})
	pb, _ := lb.Pack(qb.Scales)
	kPad := l.KTiles * SFTileCols * MXBlockSize
	// The reference: real rows, real K, plain scales, float64 sums.
	ref := make([]float64, n*nB)
	deqB := qb.Dequantize()
	for i := 0; i < n; i++ {
		for j := 0; j < nB; j++ {
			s := 0.0
			for k := 0; k < testK; k++ {
				s += float64(want[i*testK+k]) * float64(deqB[j*testK+k])
			}
			ref[i*nB+j] = s
		}
	}
	// mma walks every padded tile row of each expert and the padded K,
	// reading scales at SFOffset; data outside K is 0, padded rows read
	// random codes (another expert's rows, or out of bounds).
	mma := func(pa, pbuf []uint8) []float64 {
		out := make([]float64, n*nB)
		for e, rows := range l.Rows {
			for i := 0; i < l.RowTiles[e]*SFTileRows; i++ {
				for j := 0; j < nB; j++ {
					s := 0.0
					for k := 0; k < kPad; k++ {
						var a, b float64
						if k < testK {
							if i < rows {
								a = float64(F32FromE4M3(q.Data[(l.RowStart[e]+i)*testK+k]))
							} else {
								a = float64(F32FromE4M3(uint8(r.Intn(0x7E))))
							}
							b = float64(F32FromE4M3(qb.Data[j*testK+k]))
						}
						sa := float64(F32FromUE8M0(pa[l.Base[e]+SFOffset(i, k/32, l.NSF)]))
						sb := float64(F32FromUE8M0(pbuf[SFOffset(j, k/32, lb.NSF)]))
						s += a * sa * b * sb
					}
					if i < rows {
						out[(l.RowStart[e]+i)*nB+j] = s
					}
				}
			}
		}
		return out
	}
	// Different summation grouping (scales applied per product) does not
	// matter here: every product a*sa*b*sb is exact in float64 (4+4
	// significant bits and powers of two), and so is the same as
	// float64(deqA)*float64(deqB); the sums are done in the same order.
	same := func(got []float64) bool {
		for i := range ref {
			if got[i] != ref[i] {
				return false
			}
		}
		return true
	}
	if !same(mma(packed, pb)) {
		t.Fatal("emulated MMA over padded tiles differs from the reference")
	}
	for _, pad := range []uint8{0x00, 0x7F, 0xFE} {
		pa := append([]uint8(nil), packed...)
		pbb := append([]uint8(nil), pb...)
		for o := range pa {
			if l.IsPadding(o) {
				pa[o] = pad
			}
		}
		for o := range pbb {
			if lb.IsPadding(o) {
				pbb[o] = pad
			}
		}
		if !same(mma(pa, pbb)) {
			t.Fatalf("padding byte %#x changes the MMA result", pad)
		}
	}
	// The test can fail: a NaN scale in the K padding poisons real rows.
	pa := append([]uint8(nil), packed...)
	for o := range pa {
		if _, rr, cc, _ := l.locate(o); l.IsPadding(o) && cc >= l.NSF && rr == 0 {
			pa[o] = UE8M0NaN
		}
	}
	if same(mma(pa, pb)) {
		t.Fatal("a NaN padding scale went unnoticed")
	}
}
