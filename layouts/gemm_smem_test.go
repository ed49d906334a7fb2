package layouts

import (
	"strings"
	"testing"

	"github.com/mokc/mokc/target"
)

// TestPlanGemmSmem pins the plans of the default tiles to the bytes the
// kernels have requested since before the plan existed (codegen's golden
// manifests): sm_80 128x128x64 with 3 stages, sm_90a with and without the
// staging tile, sm_100a with its TMEM.
func TestPlanGemmSmem(t *testing.T) {
	for _, c := range []struct {
		name                     string
		c                        GemmConfig
		stage, required, bytes   int
		staged                   bool
		barrier, staging, stride int
		tmem                     int
	}{
		{"sm80", GemmConfig{Target: target.SM80, M: 128, BRows: 128, K: 64, Stages: 3}, 36864, 110592, 110592, false, 0, 0, 0, 0},
		{"sm90 staged", GemmConfig{Target: target.SM90a, M: 128, BRows: 192, K: 64, Stages: 4, StagingCols: 96},
			40960, 164928, 191568, true, 190464, 163840, 208, 0},
		{"sm90 no room", GemmConfig{Target: target.SM90a, M: 128, BRows: 256, K: 64, Stages: 4, StagingCols: 256},
			49152, 197696, 197696, false, 196608, 0, 0, 0},
		{"sm100", GemmConfig{Target: target.SM100a, M: 128, BRows: 256, K: 64, Stages: 4}, 49152, 197744, 197744, false, 196608, 0, 0, 512},
		{"sm100 mxfp8", GemmConfig{Target: target.SM100a, DType: DTypeE4M3, M: 128, BRows: 128, K: 128, Stages: 4, Scales: true},
			32768 + 256*4, 1024 + 4*33792 + 64 + 48, 1024 + 4*33792 + 64 + 48, false, 4 * 33792, 0, 0, 512},
	} {
		p, err := PlanGemmSmem(c.c)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got := []int{p.StageBytes, p.Required, p.Bytes, p.BarrierOffset, p.StagingOffset, p.StagingStride, p.TMEMColumns}
		want := []int{c.stage, c.required, c.bytes, c.barrier, c.staging, c.stride, c.tmem}
		for i := range got {
			if got[i] != want[i] || p.Staged != c.staged {
				t.Errorf("%s: stage, required, bytes, barrier, staging, stride, tmem = %v staged %v, want %v staged %v", c.name, got, p.Staged, want, c.staged)
				break
			}
		}
	}
	if _, err := PlanGemmSmem(GemmConfig{Target: target.SM90a, M: 48, BRows: 64, K: 64, Stages: 2}); err == nil {
		t.Error("sm_90a A tile of 48 rows accepted")
	}
	if _, err := PlanGemmSmem(GemmConfig{Target: target.SM80, M: 64, BRows: 64, K: 64}); err == nil {
		t.Error("0 stages accepted")
	}
}

// TestGemmOperandTiles checks that the tiles are what the kernels address:
// sm_80 rows of K*2+16 bytes, sm_90a / sm_100a 128B-swizzled atoms of
// rows x 128 bytes along K with descriptor steps of 32 bytes per k16.
func TestGemmOperandTiles(t *testing.T) {
	a, b, err := GemmOperandTiles(target.SM80, DTypeBF16, 128, 256, 64)
	if err != nil {
		t.Fatal(err)
	}
	pa := a.(*PaddedTile)
	if pa.RowBytes() != 144 || a.Bytes() != 128*144 || b.Bytes() != 256*144 || pa.Layout().String() != "(128,64):(72,1)" {
		t.Errorf("sm_80 tiles %v, %v", a, b)
	}
	if o, _ := a.ByteOffset(3, 10); o != 3*144+20 {
		t.Errorf("sm_80 (3, 10) at %d", o)
	}
	offs, err := pa.LdmatrixX4Offsets(0, 0)
	if err != nil || offs[1] != 144 || offs[16] != 16 || offs[8] != 8*144 {
		t.Errorf("sm_80 ldmatrix offsets %v, %v", offs, err)
	}
	if s, err := pa.Describe(0, 0); err != nil || !strings.Contains(s, "row stride 144 bytes") {
		t.Errorf("describe: %q, %v", s, err)
	}
	for _, tg := range []target.Target{target.SM90a, target.SM100a} {
		a, b, err := GemmOperandTiles(tg, DTypeBF16, 128, 192, 128)
		if err != nil {
			t.Fatal(err)
		}
		sa, sb := a.(*SmemTile), b.(*SmemTile)
		if sa.Swizzle != Swizzle128B || sa.AtomBytes() != 128*128 || sb.AtomBytes() != 192*128 {
			t.Errorf("%v tiles %v, %v", tg, a, b)
		}
		if d, _ := sb.DescriptorFields(0, 0, 5); d.Start != uint32(sb.AtomBytes()+32) {
			t.Errorf("%v k-step 5 of B at %d, want the second atom + 32", tg, d.Start)
		}
	}
}

func TestGateUpRows(t *testing.T) {
	for _, c := range []struct {
		t      target.Target
		g      GateUp
		want   string
		origin int
		row    [2]int // B_e row offset of tile row 1 and tile row bn
	}{
		{target.SM90a, GateUpNone, "64:1", 1, [2]int{1, -1}},
		{target.SM90a, GateUpInterleaved, "128:1", 2, [2]int{1, 64}},
		{target.SM90a, GateUpHalves, "(64,2):(1,768)", 1, [2]int{1, 768}},
		{target.SM80, GateUpHalves, "(2,64):(768,1)", 1, [2]int{768, 32}},
		{target.SM90a, GateUpHalvesInPairs, "(2,64):(768,1)", 1, [2]int{768, 32}},
	} {
		l, origin, err := GateUpRows(c.t, c.g, 64, 768)
		if err != nil || l.String() != c.want || origin != c.origin {
			t.Errorf("%v %v: %v origin %d, %v (want %s origin %d)", c.t, c.g, l, origin, err, c.want, c.origin)
			continue
		}
		if r, _ := l.Offset(1); r != c.row[0] {
			t.Errorf("%v %v: tile row 1 holds %d", c.t, c.g, r)
		}
		if c.row[1] >= 0 {
			if r, _ := l.Offset(64); r != c.row[1] {
				t.Errorf("%v %v: tile row 64 holds %d", c.t, c.g, r)
			}
		}
	}
}

// TestPlanGemmSmemE4M3Staging: the expansion's e4m3 tiles and their rows'
// codes follow the bf16 tiles in each stage, 1024-aligned, with a second
// barrier pair per stage;
// anything but an sm_90a K-major bf16 ring of K = 64 without a staged
// epilogue is refused.
func TestPlanGemmSmemE4M3Staging(t *testing.T) {
	c := GemmConfig{Target: target.SM90a, DType: DTypeBF16, M: 128, BRows: 192, K: 64, Stages: 3, E4M3Staging: true}
	p, err := PlanGemmSmem(c)
	if err != nil {
		t.Fatal(err)
	}
	bf := (128 + 192) * 128
	codes := bf + (128+192)*64 // 8 bytes of codes per row follow the e4m3 tiles
	if want := (codes + (128+192)*8 + 1023) &^ 1023; p.E4M3Offset != bf || p.E4M3CodeOffset != codes || p.StageBytes != want {
		t.Errorf("stage %d bytes, e4m3 at %d, codes at %d: want %d, %d, %d", p.StageBytes, p.E4M3Offset, p.E4M3CodeOffset, want, bf, codes)
	}
	if want := 1024 + 3*p.StageBytes + 32*3; p.Required != want || p.BarrierOffset != 3*p.StageBytes {
		t.Errorf("required %d (barriers at %d), want %d", p.Required, p.BarrierOffset, want)
	}
	for name, edit := range map[string]func(*GemmConfig){
		"sm_100a": func(c *GemmConfig) { c.Target = target.SM100a },
		"K 128":   func(c *GemmConfig) { c.K = 128 },
		"e4m3":    func(c *GemmConfig) { c.DType, c.K = DTypeE4M3, 128 },
		"staging": func(c *GemmConfig) { c.StagingCols = 64 },
	} {
		bad := c
		edit(&bad)
		if _, err := PlanGemmSmem(bad); err == nil || !strings.Contains(err.Error(), "e4m3 staging") {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestPlanGemmSmemCodeSlots: the producer's code slots follow the stages
// (before the barriers), 8 bytes per A row and per B row rounded up to 32
// rows (128 on sm_100a); slots without scales are refused.
func TestPlanGemmSmemCodeSlots(t *testing.T) {
	for _, tc := range []struct {
		t        target.Target
		bRows    int
		slotRows int
	}{{target.SM90a, 72, 128 + 96}, {target.SM90a, 128, 256}, {target.SM100a, 192, 128 + 256}} {
		c := GemmConfig{Target: tc.t, DType: DTypeE4M3, Scales: true, M: 128, BRows: tc.bRows, K: 128, Stages: 4, CodeSlots: 3}
		p, err := PlanGemmSmem(c)
		if err != nil {
			t.Fatal(err)
		}
		if p.CodeOffset != 4*p.StageBytes || p.CodeSlotBytes != 8*tc.slotRows || p.BarrierOffset != p.CodeOffset+3*p.CodeSlotBytes {
			t.Errorf("%v B %d: codes at %d, %d bytes a slot, barriers at %d; want %d, %d, %d", tc.t, tc.bRows,
				p.CodeOffset, p.CodeSlotBytes, p.BarrierOffset, 4*p.StageBytes, 8*tc.slotRows, 4*p.StageBytes+3*8*tc.slotRows)
		}
		if got := CodeRows(tc.t, 128, tc.bRows); got != tc.slotRows {
			t.Errorf("CodeRows(%v, 128, %d) = %d, want %d", tc.t, tc.bRows, got, tc.slotRows)
		}
	}
	if _, err := PlanGemmSmem(GemmConfig{Target: target.SM90a, DType: DTypeBF16, M: 128, BRows: 128, K: 64, Stages: 4, CodeSlots: 2}); err == nil {
		t.Error("code slots without scales: no error")
	}
}

// TestPlanGemmSmemItemSlots: the item ring follows the code slots (before
// the barriers and the staging tile), 8 bytes of mbarrier and 4 of item
// number per slot, rounded up to 128 bytes so that the staging tile after
// it keeps its alignment; a negative count, and any on sm_80, is refused.
func TestPlanGemmSmemItemSlots(t *testing.T) {
	for _, slots := range []int{7, 8, 12} {
		c := GemmConfig{Target: target.SM90a, DType: DTypeBF16, M: 128, BRows: 256, K: 64, Stages: 3, StagingCols: 128, ItemSlots: slots}
		p, err := PlanGemmSmem(c)
		if err != nil {
			t.Fatal(err)
		}
		c.ItemSlots = 0
		q, err := PlanGemmSmem(c)
		if err != nil {
			t.Fatal(err)
		}
		ring := (12*slots + 127) / 128 * 128
		if p.ItemOffset != 3*p.StageBytes || p.BarrierOffset != q.BarrierOffset+ring || p.Required != q.Required+ring {
			t.Errorf("%d slots: items at %d, barriers at %d, %d bytes required; want %d, %d, %d", slots,
				p.ItemOffset, p.BarrierOffset, p.Required, 3*p.StageBytes, q.BarrierOffset+ring, q.Required+ring)
		}
		if !p.Staged || p.StagingOffset%128 != 0 || p.StagingOffset != q.StagingOffset+ring {
			t.Errorf("%d slots: staging tile at %d (staged %v), without the ring at %d", slots, p.StagingOffset, p.Staged, q.StagingOffset)
		}
	}
	if _, err := PlanGemmSmem(GemmConfig{Target: target.SM90a, DType: DTypeBF16, M: 128, BRows: 128, K: 64, Stages: 4, ItemSlots: -1}); err == nil {
		t.Error("-1 item slots: no error")
	}
	if _, err := PlanGemmSmem(GemmConfig{Target: target.SM80, DType: DTypeBF16, M: 128, BRows: 128, K: 32, Stages: 4, ItemSlots: 8}); err == nil {
		t.Error("item slots on sm_80: no error")
	}
}

// TestPlanGemmSmemSwapAB: the operand swap plans a 32-row token tile (B
// operand rules: rows a multiple of 8) beside a weight tile of 64-row
// slices, with the bytes and descriptors of the unswapped tiles and no
// staging tile; 32 rows
// without the swap, a weight tile of 96 rows with it, and the swap off
// sm_90a are refused.
func TestPlanGemmSmemSwapAB(t *testing.T) {
	c := GemmConfig{Target: target.SM90a, DType: DTypeE4M3, Scales: true, M: 32, BRows: 128, K: 128, Stages: 8,
		StagingCols: 128, CodeSlots: 4, SwapAB: true}
	p, err := PlanGemmSmem(c)
	if err != nil {
		t.Fatal(err)
	}
	if p.Staged {
		t.Errorf("the swap planned a staging tile (its producer warps stage the scale codes)")
	}
	a, b := p.A.(*SmemTile), p.B.(*SmemTile)
	if a.Rows != 32 || a.Operand != OperandB || b.Rows != 128 || b.Operand != OperandA {
		t.Errorf("swapped tiles: A %d rows as %v, B %d rows as %v", a.Rows, a.Operand, b.Rows, b.Operand)
	}
	// A, B and the f32 scales (23040 bytes), rounded up to 1024 so that
	// every stage's swizzled tiles stay 1024-byte aligned.
	if want := (32*128 + 128*128 + (32+128)*4*4 + 1023) &^ 1023; p.StageBytes != want {
		t.Errorf("stage bytes %d, want %d", p.StageBytes, want)
	}
	u := c
	u.M, u.SwapAB = 64, false
	pu, err := PlanGemmSmem(u)
	if err != nil {
		t.Fatal(err)
	}
	want, err := pu.A.(*SmemTile).Descriptor(0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tl := range []*SmemTile{a, b} {
		if d, err := tl.Descriptor(0, 0, 0); err != nil || d != want {
			t.Errorf("%d-row tile descriptor %#x (%v), want the unswapped %#x", tl.Rows, d, err, want)
		}
	}
	for name, bad := range map[string]GemmConfig{
		"no swap":    func() GemmConfig { x := c; x.SwapAB = false; return x }(),
		"96 rows":    func() GemmConfig { x := c; x.BRows = 96; return x }(),
		"sm_100a":    func() GemmConfig { x := c; x.Target = target.SM100a; return x }(),
		"MN-major B": func() GemmConfig { x := c; x.BMajor = MNMajor; return x }(),
	} {
		if _, err := PlanGemmSmem(bad); err == nil {
			t.Errorf("%s: planned", name)
		}
	}
}

// TestPlanGemmSmemStageAlign: on sm_90a and sm_100a every stage is a
// multiple of 1024 bytes, so each stage's 128-byte swizzled tiles start
// 1024-byte aligned like the first's.
func TestPlanGemmSmemStageAlign(t *testing.T) {
	for _, tg := range []target.Target{target.SM90a, target.SM100a} {
		for _, m := range []int{32, 64, 128, 192} {
			for _, n := range []int{64, 128, 192, 256} {
				for _, k := range []int{64, 128, 256} {
					for _, mx := range []bool{false, true} {
						c := GemmConfig{Target: tg, DType: DTypeBF16, M: m, BRows: n, K: k, Stages: 2}
						if mx {
							c.DType, c.Scales = DTypeE4M3, true
						}
						c.SwapAB = tg == target.SM90a && mx && m == 32
						if m == 32 && !c.SwapAB || tg == target.SM100a && m != 128 {
							continue
						}
						p, err := PlanGemmSmem(c)
						if err != nil {
							continue // a shape the plan refuses has no stage to check
						}
						if p.StageBytes%1024 != 0 {
							t.Errorf("%v %dx%dx%d mxfp8 %v: stage of %d bytes, not a multiple of 1024", tg, m, n, k, mx, p.StageBytes)
						}
					}
				}
			}
		}
	}
}

// TestPlanGemmSmemScaleOffset: the scales sit right after the A and B
// tiles (the bytes TMA delivers, which the producer's full barrier
// expects) and inside the stage, whatever padding follows them.
func TestPlanGemmSmemScaleOffset(t *testing.T) {
	for _, tg := range []target.Target{target.SM90a, target.SM100a} {
		for _, c := range []GemmConfig{
			{M: 32, BRows: 128, K: 128, SwapAB: true},
			{M: 128, BRows: 72, K: 128},
			{M: 64, BRows: 128, K: 128},
			{M: 128, BRows: 256, K: 128},
		} {
			if tg == target.SM100a && (c.M != 128 || c.SwapAB) {
				continue
			}
			c.Target, c.DType, c.Scales, c.Stages = tg, DTypeE4M3, true, 4
			p, err := PlanGemmSmem(c)
			if err != nil {
				t.Fatalf("%v %dx%d: %v", tg, c.M, c.BRows, err)
			}
			if p.ScaleOffset != p.A.Bytes()+p.B.Bytes() || p.ScaleOffset+p.ScaleBytes > p.StageBytes || p.StageBytes%1024 != 0 {
				t.Errorf("%v %dx%d: scales %d at %d, A %d + B %d, stage %d", tg, c.M, c.BRows, p.ScaleBytes, p.ScaleOffset, p.A.Bytes(), p.B.Bytes(), p.StageBytes)
			}
		}
	}
}
