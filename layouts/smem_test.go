package layouts

import (
	"fmt"
	"testing"

	"github.com/mokc/mokc/target"
)

func TestSmemTileShapes(t *testing.T) {
	tl, err := NewSmemTile(target.SM90a, OperandA, DTypeBF16, 64, 64)
	if err != nil {
		t.Fatal(err)
	}
	if tl.Swizzle != Swizzle128B || tl.Layout.String() != "((8,8),(64,1)):((64,512),(1,4096))" ||
		tl.ElemSwizzle != (Swizzle{3, 3, 3}) || tl.Bytes() != 8192 {
		t.Fatalf("sm_90a A bf16 64x64 = %v", tl)
	}
	fp8, _ := NewSmemTile(target.SM100a, OperandB, DTypeE4M3, 256, 128)
	if fp8.Swizzle != Swizzle128B || fp8.Layout.String() != "((8,32),(128,1)):((128,1024),(1,32768))" || fp8.ElemSwizzle != (Swizzle{3, 4, 3}) {
		t.Fatalf("sm_100a B e4m3 256x128 = %v", fp8)
	}
	for _, c := range []struct {
		k    int
		want SwizzleMode
	}{{64, Swizzle128B}, {32, Swizzle64B}, {16, Swizzle32B}, {192, Swizzle128B}, {48, Swizzle32B}} {
		if tl, err := NewSmemTile(target.SM80, OperandA, DTypeBF16, 32, c.k); err != nil || tl.Swizzle != c.want {
			t.Errorf("sm_80 bf16 K=%d: %v, %v (want %v)", c.k, tl, err, c.want)
		}
	}
	for _, bad := range []struct {
		t      target.Target
		op     Operand
		d      DType
		rows   int
		k      int
		swzl   SwizzleMode
		reason string
	}{
		{target.SM80, OperandA, DTypeE4M3, 64, 64, Swizzle128B, "e4m3 on sm_80"},
		{target.SM90a, OperandA, DTypeBF16, 48, 64, Swizzle128B, "A rows not a multiple of 64"},
		{target.SM80, OperandA, DTypeBF16, 8, 64, Swizzle128B, "sm_80 A rows not a multiple of 16"},
		{target.SM90a, OperandB, DTypeBF16, 12, 64, Swizzle128B, "B rows not a multiple of 8"},
		{target.SM90a, OperandB, DTypeBF16, 64, 24, SwizzleNone, "K not a multiple of MMA K"},
		{target.SM90a, OperandB, DTypeBF16, 64, 32, Swizzle128B, "K below the atom"},
		{target.SM100a, OperandB, DTypeBF16, 64, 64, Swizzle128BAtom32B, "unmodelled swizzle"},
		{target.SM100a, OperandA, DTypeBF16, 1024, 128, Swizzle128B, "too large"},
		{target.Target(9), OperandA, DTypeBF16, 64, 64, Swizzle128B, "unknown target"},
	} {
		if _, err := NewSmemTileSwizzle(bad.t, bad.op, bad.d, bad.rows, bad.k, bad.swzl); err == nil {
			t.Errorf("accepted: %s", bad.reason)
		}
	}
}

func allTiles(t *testing.T) []*SmemTile {
	var out []*SmemTile
	for _, tg := range []target.Target{target.SM80, target.SM90a, target.SM100a} {
		for _, d := range []DType{DTypeBF16, DTypeE4M3} {
			for _, op := range []Operand{OperandA, OperandB} {
				for _, sw := range []SwizzleMode{SwizzleNone, Swizzle32B, Swizzle64B, Swizzle128B} {
					for _, rows := range []int{64, 128} {
						for _, kb := range []int{128, 256} { // K bytes
							tl, err := NewSmemTileSwizzle(tg, op, d, rows, kb/d.Bytes(), sw)
							if tg == target.SM80 && d == DTypeE4M3 {
								continue
							}
							if err != nil {
								t.Fatalf("%s %v %v %dx%d %v: %v", tg, op, d, rows, kb/d.Bytes(), sw, err)
							}
							out = append(out, tl)
						}
					}
				}
			}
		}
	}
	return out
}

// TestSmemTilesAreBijective: every tile maps its elements one to one onto
// its bytes, and a 16-byte chunk of a row stays contiguous (the swizzle
// moves whole chunks).
func TestSmemTilesAreBijective(t *testing.T) {
	for _, tl := range allTiles(t) {
		b := tl.DType.Bytes()
		seen := make([]bool, tl.Bytes())
		for r := 0; r < tl.Rows; r++ {
			for k := 0; k < tl.K; k++ {
				o, err := tl.ByteOffset(r, k)
				if err != nil {
					t.Fatal(err)
				}
				if r%7 == 0 || k%5 == 0 { // the direct formula is the layout
					lo, _ := tl.Swizzled().OffsetAt(r, k)
					if lo*b != o {
						t.Fatalf("%v: (%d,%d) at %d, layout says %d", tl, r, k, o, lo*b)
					}
				}
				if o%b != 0 || o < 0 || o >= tl.Bytes() || seen[o] {
					t.Fatalf("%v: (%d,%d) -> %d (repeated or out of the tile)", tl, r, k, o)
				}
				seen[o] = true
				if k%(16/b) != 0 {
					first, _ := tl.ByteOffset(r, k-k%(16/b))
					if o != first+(k%(16/b))*b {
						t.Fatalf("%v: 16-byte chunk of (%d,%d) is split", tl, r, k)
					}
				}
			}
		}
	}
}

// emulateDescriptor computes the shared-memory byte address an MMA reads for
// row `row` (relative to the descriptor's first row) and byte kb (0..31) of
// the K slice, from the decoded descriptor alone, following the canonical
// K-major layouts of PTX ISA 9.7.16.3 (in 16-byte units T):
//
//	no swizzle: ((8,m),(T,2k)) : ((1T,SBO),(1,LBO))
//	swizzled:   ((8,m),(T,2k)) : ((sT,SBO),(1,T)), s = swizzle bytes / 16,
//	            then the swizzle applied to the address bits (pattern
//	            anchored at address 0; base offset 0).
func emulateDescriptor(d SmemDescriptor, row, kb int) int {
	if d.Swizzle == SwizzleNone {
		return int(d.Start) + (row%8)*16 + (row/8)*int(d.SBO) + (kb/16)*int(d.LBO) + kb%16
	}
	a := int(d.Start) + (row%8)*d.Swizzle.Bytes() + (row/8)*int(d.SBO) + kb
	p, _ := d.Swizzle.Pattern()
	return p.Apply(a)
}

// TestTileDescriptorsAddressTheTile: the descriptor a tile gives for each
// (row group, k-step), read the way the tensor core reads it, addresses
// exactly the bytes where the tile layout put the elements.
func TestTileDescriptorsAddressTheTile(t *testing.T) {
	const base = 0x6000 // a multiple of 1024
	for _, tl := range allTiles(t) {
		if tl.Target == target.SM80 {
			if _, err := tl.Descriptor(base, 0, 0); err == nil {
				t.Fatal("sm_80 tile gave a descriptor")
			}
			continue
		}
		mk, _ := MMAK(tl.Target, tl.DType)
		b := tl.DType.Bytes()
		// The rows one MMA reads: B its whole N; A a warpgroup's 64 rows
		// (wgmma) or tcgen05's M (up to 128).
		mmaRows := tl.Rows
		if tl.Operand == OperandA {
			mmaRows = 64
			if tl.Target == target.SM100a {
				mmaRows = min(tl.Rows, 128)
			}
		}
		for row0 := 0; row0 < tl.Rows; row0 += mmaRows {
			for ks := 0; ks < tl.K/mk; ks++ {
				v, err := tl.Descriptor(base, row0, ks)
				if err != nil {
					t.Fatal(err)
				}
				var d SmemDescriptor
				if tl.Target == target.SM100a {
					d, err = DecodeSM100SmemDescriptor(v)
				} else {
					d, err = DecodeSM90SmemDescriptor(v)
				}
				if err != nil {
					t.Fatal(err)
				}
				for r := 0; r < mmaRows; r++ {
					for kb := 0; kb < 32; kb += b {
						want, _ := tl.ByteOffset(row0+r, ks*mk+kb/b)
						if got := emulateDescriptor(d, r, kb); got != base+want {
							t.Fatalf("%v: descriptor %v (row0 %d, k-step %d) reads row %d byte %d at 0x%x, element is at 0x%x",
								tl, d, row0, ks, r, kb, got, base+want)
						}
					}
				}
			}
		}
	}
	// Pinned values (by hand): sm_90a A bf16 64x64 at 0x400, k-step 1:
	// start 0x420 -> 0x42, LBO 16 -> 1, SBO 1024 -> 0x40, 128B.
	tl, _ := NewSmemTile(target.SM90a, OperandA, DTypeBF16, 64, 64)
	if v, err := tl.Descriptor(0x400, 0, 1); err != nil || v != 0x4000004000010042 {
		t.Errorf("sm_90a k-step 1 = 0x%016x, %v", v, err)
	}
	tl, _ = NewSmemTile(target.SM100a, OperandB, DTypeE4M3, 256, 256)
	// k-step 4 is K 128: the second atom column, 256 rows x 128 bytes on
	// (LBO 0 on sm_100a, as the kernels encode it).
	if v, err := tl.Descriptor(0, 0, 4); err != nil || v != 0x4000404000000800 {
		t.Errorf("sm_100a k-step 4 = 0x%016x, %v", v, err)
	}
	// The rows 64..127 of an A tile: 8 row groups of 1024 bytes on.
	tl, _ = NewSmemTile(target.SM100a, OperandA, DTypeBF16, 128, 64)
	if v, err := tl.Descriptor(0x8000, 64, 0); err != nil || v != 0x4000404000000A00 {
		t.Errorf("sm_100a rows 64.. = 0x%016x, %v", v, err)
	}
	if _, err := tl.Descriptor(0x8200, 0, 0); err == nil {
		t.Error("base not aligned to 1024 accepted")
	}
	if _, err := tl.Descriptor(0x8000, 4, 0); err == nil {
		t.Error("row 4 accepted")
	}
	if _, err := tl.Descriptor(0x8000, 0, 4); err == nil {
		t.Error("k-step beyond K accepted")
	}
}

// bankGroups returns whether the 8 addresses of each ldmatrix phase (lanes
// 8j..8j+7) fall into 8 different 16-byte bank groups ((addr/16) mod 8):
// then the phase reads all 32 banks once, without conflicts.
func conflictFree(offs [32]int) bool {
	for j := 0; j < 4; j++ {
		var seen [8]bool
		for l := 8 * j; l < 8*j+8; l++ {
			g := (offs[l] / 16) % 8
			if seen[g] {
				return false
			}
			seen[g] = true
		}
	}
	return true
}

func TestSM80LdmatrixConflictFree(t *testing.T) {
	for _, k := range []int{16, 32, 64, 128} {
		for _, op := range []Operand{OperandA, OperandB} {
			tl, err := NewSmemTile(target.SM80, op, DTypeBF16, 64, k)
			if err != nil {
				t.Fatal(err)
			}
			for r0 := 0; r0 < 64; r0 += 16 {
				for k0 := 0; k0 < k; k0 += 16 {
					offs, err := tl.LdmatrixX4Offsets(r0, k0)
					if err != nil {
						t.Fatal(err)
					}
					if !conflictFree(offs) {
						t.Fatalf("%v: ldmatrix at (%d,%d) has bank conflicts: %v", tl, r0, k0, offs)
					}
					for l := 0; l < 32; l++ {
						m := l / 8
						r, kk := r0+l%8+8*(m%2), k0+8*(m/2)
						if op == OperandB {
							r, kk = r0+l%8+8*(m/2), k0+8*(m%2)
						}
						for i := 0; i < 8; i++ {
							if o, _ := tl.ByteOffset(r, kk+i); o != offs[l]+2*i {
								t.Fatalf("%v lane %d: element (%d,%d) at %d, row address %d", tl, l, r, kk+i, o, offs[l])
							}
						}
					}
				}
			}
		}
	}
	// Without the swizzle, 128-byte rows put all 8 rows of a phase in the
	// same bank group: the check above would fail.
	tl, _ := NewSmemTileSwizzle(target.SM80, OperandA, DTypeBF16, 64, 64, SwizzleNone)
	plain, _ := RowMajor(Ints(64, 64))
	var offs [32]int
	for l := range offs {
		o, _ := plain.OffsetAt(l%8, 0)
		offs[l] = 2 * o
	}
	if conflictFree(offs) {
		t.Fatal("row-major 128-byte rows reported conflict-free")
	}
	if _, err := tl.LdmatrixX4Offsets(56, 0); err == nil {
		t.Fatal("ldmatrix block past the tile accepted")
	}
	fp8, _ := NewSmemTile(target.SM90a, OperandB, DTypeE4M3, 64, 128)
	if _, err := fp8.LdmatrixX4Offsets(0, 0); err == nil {
		t.Fatal("ldmatrix .b16 on an e4m3 tile accepted")
	}
}

func TestParseNames(t *testing.T) {
	for s, want := range map[string]SwizzleMode{"128B": Swizzle128B, "64": Swizzle64B, "32b": Swizzle32B, "none": SwizzleNone} {
		if got, err := ParseSwizzleMode(s); err != nil || got != want || (fmt.Sprint(got) == "") {
			t.Errorf("ParseSwizzleMode(%q) = %v, %v", s, got, err)
		}
	}
	if _, err := ParseDType("fp16"); err == nil {
		t.Error("fp16 accepted")
	}
}

// emulateDescriptorMN is emulateDescriptor for the MN-major swizzled
// layouts (PTX ISA 9.7.15.5.1.2.1, in elements of b bytes, T = 16/b):
// ((T,s,m),(8,k)) : ((1,T,LBO),(sT,SBO)), s = swizzle bytes / 16, then the
// swizzle on the address bits: element (mn, kk) of the MMA's operand.
func emulateDescriptorMN(d SmemDescriptor, b, mn, kk int) int {
	w := d.Swizzle.Bytes() / b
	a := int(d.Start) + (mn%w)*b + (mn/w)*int(d.LBO) + (kk%8)*d.Swizzle.Bytes() + (kk/8)*int(d.SBO)
	p, _ := d.Swizzle.Pattern()
	return p.Apply(a)
}

// TestMNMajorTiles: the MN-major tiles map their elements one to one onto
// their bytes, keep 16-byte chunks along the rows (what a TMA box with the
// contiguous dimension innermost writes), agree with their layout, and
// their descriptors, read the canonical MN-major way, address exactly the
// elements (B: all rows of the tile; A: a warpgroup's 64).
func TestMNMajorTiles(t *testing.T) {
	const base = 0x6000
	for _, op := range []Operand{OperandA, OperandB} {
		for _, sw := range []SwizzleMode{Swizzle32B, Swizzle64B, Swizzle128B} {
			for _, rows := range []int{64, 128, 256} {
				for _, k := range []int{16, 64, 128} {
					tl, err := NewSmemTileMN(target.SM90a, op, DTypeBF16, rows, k, sw)
					if err != nil {
						t.Fatal(err)
					}
					seen := make([]bool, tl.Bytes())
					for r := 0; r < rows; r++ {
						for kk := 0; kk < k; kk++ {
							o, err := tl.ByteOffset(r, kk)
							if err != nil {
								t.Fatal(err)
							}
							if lo, _ := tl.Swizzled().OffsetAt(r, kk); lo*2 != o {
								t.Fatalf("%v: (%d,%d) at %d, layout says %d", tl, r, kk, o, lo*2)
							}
							if o < 0 || o >= tl.Bytes() || seen[o] {
								t.Fatalf("%v: (%d,%d) -> %d (repeated or out of the tile)", tl, r, kk, o)
							}
							seen[o] = true
							if first, _ := tl.ByteOffset(r-r%8, kk); o != first+(r%8)*2 {
								t.Fatalf("%v: 16-byte chunk of (%d,%d) is split", tl, r, kk)
							}
						}
					}
					mmaRows := rows
					if op == OperandA {
						mmaRows = 64
					}
					for row0 := 0; row0 < rows; row0 += mmaRows {
						for ks := 0; ks < k/16; ks++ {
							v, err := tl.Descriptor(base, row0, ks)
							if err != nil {
								t.Fatal(err)
							}
							d, err := DecodeSM90SmemDescriptor(v)
							if err != nil {
								t.Fatal(err)
							}
							for r := 0; r < mmaRows; r++ {
								for kk := 0; kk < 16; kk++ {
									want, _ := tl.ByteOffset(row0+r, ks*16+kk)
									if got := emulateDescriptorMN(d, 2, r, kk); got != base+want {
										t.Fatalf("%v: descriptor %v (row0 %d, k-step %d) reads (%d,%d) at 0x%x, element is at 0x%x",
											tl, d, row0, ks, r, kk, got, base+want)
									}
								}
							}
						}
					}
				}
			}
		}
	}
	// Pinned by hand: B 256x64 at 0, k-step 1: start 16 rows x 128 B =
	// 0x800 -> 0x80, LBO 64 rows x 128 B = 8192 -> 0x200, SBO 1024 -> 0x40.
	tl, _ := NewSmemTileMN(target.SM90a, OperandB, DTypeBF16, 256, 64, Swizzle128B)
	if v, err := tl.Descriptor(0, 0, 1); err != nil || v != 0x4000004002000080 {
		t.Errorf("MN-major k-step 1 = 0x%016x, %v", v, err)
	}
	for _, bad := range []struct {
		tg      target.Target
		d       DType
		op      Operand
		rows, k int
		sw      SwizzleMode
		why     string
	}{
		{target.SM100a, DTypeBF16, OperandB, 64, 64, Swizzle128B, "sm_100a"},
		{target.SM90a, DTypeE4M3, OperandB, 64, 64, Swizzle128B, "e4m3"},
		{target.SM90a, DTypeBF16, OperandB, 64, 64, SwizzleNone, "no swizzle"},
		{target.SM90a, DTypeBF16, OperandB, 96, 64, Swizzle128B, "rows not whole columns"},
		{target.SM90a, DTypeBF16, OperandA, 32, 64, Swizzle64B, "A below a warpgroup"},
		{target.SM90a, DTypeBF16, OperandB, 64, 8, Swizzle128B, "K below the MMA K"},
	} {
		if _, err := NewSmemTileMN(bad.tg, bad.op, bad.d, bad.rows, bad.k, bad.sw); err == nil {
			t.Errorf("accepted: %s", bad.why)
		}
	}
	if _, err := tl.Descriptor(0, 32, 0); err == nil {
		t.Error("MN-major descriptor at row 32 accepted")
	}
}

// The sm_80 MN-major B tile (a B_e stored [K, N]): every element at its
// layout offset, ldmatrix .trans lane addresses conflict-free and pointing
// at the 8 consecutive n of one k line that the lane's matrix row holds.
func TestPaddedTileMN(t *testing.T) {
	for _, n := range []int{16, 64, 128, 256} {
		for _, k := range []int{16, 32, 64} {
			tl, err := NewPaddedTileMN(target.SM80, OperandB, DTypeBF16, n, k, 16)
			if err != nil {
				t.Fatal(err)
			}
			if tl.RowBytes() != 2*n+16 || tl.Bytes() != k*(2*n+16) {
				t.Fatalf("%v: line %d bytes, tile %d", tl, tl.RowBytes(), tl.Bytes())
			}
			lay := tl.Layout()
			seen := map[int]bool{}
			for r := 0; r < n; r++ {
				for kk := 0; kk < k; kk++ {
					o, err := tl.ByteOffset(r, kk)
					e, _ := lay.OffsetAt(r, kk)
					if err != nil || o != kk*(2*n+16)+2*r || o != 2*e || seen[o] {
						t.Fatalf("%v: (%d,%d) at %d (layout %d, err %v)", tl, r, kk, o, e, err)
					}
					seen[o] = true
				}
			}
			for r0 := 0; r0 < n; r0 += 16 {
				for k0 := 0; k0 < k; k0 += 16 {
					offs, err := tl.LdmatrixX4Offsets(r0, k0)
					if err != nil {
						t.Fatal(err)
					}
					if !conflictFree(offs) {
						t.Fatalf("%v: ldmatrix .trans at (%d,%d) has bank conflicts: %v", tl, r0, k0, offs)
					}
					for l := 0; l < 32; l++ {
						m := l / 8
						for i := 0; i < 8; i++ {
							if o, _ := tl.ByteOffset(r0+8*(m/2)+i, k0+8*(m%2)+l%8); o != offs[l]+2*i {
								t.Fatalf("%v lane %d: element %d of its line at %d, line address %d", tl, l, i, o, offs[l])
							}
						}
					}
				}
			}
		}
	}
	if _, err := NewPaddedTileMN(target.SM80, OperandB, DTypeBF16, 12, 16, 16); err == nil {
		t.Fatal("MN-major tile of 12 rows (not whole 16-byte chunks) accepted")
	}
	a, _ := NewPaddedTileMN(target.SM80, OperandA, DTypeBF16, 64, 16, 16)
	if _, err := a.LdmatrixX4Offsets(0, 0); err == nil {
		t.Fatal("ldmatrix .trans of an MN-major A accepted")
	}
	p, err := PlanGemmSmem(GemmConfig{Target: target.SM80, DType: DTypeBF16, M: 128, BRows: 128, K: 32, Stages: 3, BMajor: MNMajor})
	if err != nil {
		t.Fatal(err)
	}
	if b, ok := p.B.(*PaddedTile); !ok || b.Major != MNMajor || p.StageBytes != 128*(64+16)+32*(256+16) {
		t.Fatalf("sm_80 plan with an MN-major B: %v, stage %d bytes", p.B, p.StageBytes)
	}
}
