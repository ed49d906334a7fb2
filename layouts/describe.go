package layouts

import (
	"fmt"
	"strings"

	"github.com/mokc/mokc/target"
)

// Describe returns a multi-line, human-readable account of the tile for
// `mokc inspect layout`: the layout in CuTe notation, the byte swizzle and a
// picture of it (which 16-byte chunk of each of the first 8 rows lands in
// which chunk slot), and per target the operand access: the descriptor of
// every k-step with its fields decoded (sm_90a, sm_100a; the tile placed at
// shared address base, which must be aligned to the swizzle period), the
// tcgen05 instruction descriptor of an M x n MMA (sm_100a, n > 0; M = the
// A tile's rows, at most 128), or the ldmatrix.x4 row addresses of the first
// 16x16 block (sm_80).
func (t *SmemTile) Describe(base uint32, n int) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s operand %v: %s x K = %d x %d %v, K-major\n", t.Target, t.Operand, rowRole(t.Operand), t.Rows, t.K, t.DType)
	fmt.Fprintf(&b, "layout   %v\n", t.Swizzled())
	fmt.Fprintf(&b, "         (row, k) -> element offset; bytes = %d x element offset\n", t.DType.Bytes())
	pat, _ := t.Swizzle.Pattern()
	if t.Swizzle == SwizzleNone {
		fmt.Fprintf(&b, "swizzle  none: core matrices of 8 rows x 16 bytes\n")
	} else {
		fmt.Fprintf(&b, "swizzle  %v: bytes %v (16-byte chunk index ^= 128-byte row index mod %d), period %d bytes\n",
			t.Swizzle, pat, 1<<pat.B, t.Swizzle.RepeatBytes())
	}
	fmt.Fprintf(&b, "size     %d bytes\n", t.Bytes())
	chunks := t.Swizzle.Bytes() / 16
	if t.Swizzle != SwizzleNone {
		fmt.Fprintf(&b, "chunks   slot of 16-byte chunk j of row r inside the %d-byte atom row:\n", t.Swizzle.Bytes())
		for r := 0; r < 8; r++ {
			fmt.Fprintf(&b, "         row %d:", r)
			for j := 0; j < chunks; j++ {
				o, _ := t.ByteOffset(r, j*16/t.DType.Bytes())
				fmt.Fprintf(&b, " %d", (o%t.Swizzle.Bytes())/16)
			}
			b.WriteByte('\n')
		}
	}
	switch t.Target {
	case target.SM80:
		writeLdmatrix(&b, t.LdmatrixX4Offsets)
	default:
		mk, _ := MMAK(t.Target, t.DType)
		kind := "wgmma matrix descriptor (PTX ISA 9.7.15.5.1.2.2)"
		if t.Target == target.SM100a {
			kind = "tcgen05 shared memory descriptor (PTX ISA 9.7.16.4.1)"
		}
		fmt.Fprintf(&b, "%s, tile at 0x%x, rows 0.., one per k-step of %d elements:\n", kind, base, mk)
		for ks := 0; ks < t.K/mk; ks++ {
			v, err := t.Descriptor(base, 0, ks)
			if err != nil {
				return "", err
			}
			d, _ := t.DescriptorFields(base, 0, ks)
			fmt.Fprintf(&b, "         k-step %2d: 0x%016x  %v\n", ks, v, d)
		}
		if t.Target == target.SM100a && n > 0 {
			m := min(t.Rows, 128)
			var v uint32
			var err error
			var s string
			if t.DType == DTypeBF16 {
				d := TCGen05InstrF16{M: m, N: n, AType: TCGen05BF16, BType: TCGen05BF16, F32Accum: true}
				v, err = TCGen05InstrDescF16(d)
				s = d.String()
			} else {
				d := TCGen05InstrMXF8F6F4{M: m, N: n}
				v, err = TCGen05InstrDescMXF8F6F4(d)
				s = d.String() + " (sf ids: add k to both for the k-th MMA of a 128-wide K block)"
			}
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "instruction descriptor (PTX ISA 9.7.16.4.2): 0x%08x  %s\n", v, s)
		}
	}
	return b.String(), nil
}

// Describe returns a multi-line account of the scale-factor layout for
// `mokc inspect layout --scales`: sizes, the formula, the tile atom and
// each expert's region as CuTe layouts, the padding, and the tcgen05.cp
// source descriptor of the first tile placed at shared address addr.
func (l *SFLayout) Describe(addr uint32) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "sm_100a scale-factor layout: %d expert(s), K = %d -> %d UE8M0 scales per row (K/32), %d K tile(s) of 4\n",
		len(l.Rows), l.K, l.NSF, l.KTiles)
	fmt.Fprintf(&b, "tile     128 rows x 4 scales = 512 bytes: (row, col) -> byte %v\n", SFAtomLayout())
	fmt.Fprintf(&b, "offset   ((r/128)*%d + c/4)*512 + (r%%32)*16 + ((r%%128)/32)*4 + c%%4\n", l.KTiles)
	real := 0
	for e, rows := range l.Rows {
		if rows == 0 {
			fmt.Fprintf(&b, "expert %d: 0 rows, no tiles\n", e)
			continue
		}
		lay, _ := l.ExpertLayout(e)
		size := l.RowTiles[e] * l.KTiles * SFTileBytes
		fmt.Fprintf(&b, "expert %d: %d rows -> %d row tile(s), bytes [%d, %d), layout %v\n", e, rows, l.RowTiles[e], l.Base[e], l.Base[e]+size, lay)
		real += rows * l.NSF
	}
	fmt.Fprintf(&b, "total    %d bytes, %d real scales, %d padding bytes (written as 0x%02x = 1.0)\n", l.Size, real, l.Size-real, SFPadByte)
	v, err := SM100ScaleTileDescriptor(addr)
	if err != nil {
		return "", err
	}
	d, _ := DecodeSM100SmemDescriptor(v)
	fmt.Fprintf(&b, "tcgen05.cp.cta_group::1.32x128b.warpx4 source descriptor, tile at 0x%x: 0x%016x  %v\n", addr, v, d)
	return b.String(), nil
}

// Describe returns the account `mokc inspect layout --model` prints of one
// grouped GEMM's shared memory: the stage (A, B, scales), the offsets of
// the ring, staging tile and mbarriers, the totals, TMEM, the B tile's row
// map, the operand swap's roles, then each operand tile (OperandTile.Describe,
// placed at shared address 0; the stage's offsets are printed above it).
func (p *GemmSmem) Describe() (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%v grouped GEMM CTA: A %dx%d, B %dx%d %v, %d stages\n", p.Target, p.M, p.K, p.BRows, p.K, p.DType, p.Stages)
	fmt.Fprintf(&b, "stage    %d bytes: A %d + B %d", p.StageBytes, p.A.Bytes(), p.B.Bytes())
	if p.ScaleBytes > 0 {
		fmt.Fprintf(&b, " + scales %d at %d", p.ScaleBytes, p.ScaleOffset)
		if pad := p.StageBytes - p.ScaleOffset - p.ScaleBytes; pad > 0 {
			fmt.Fprintf(&b, " + %d bytes of padding (stages 1024-byte aligned)", pad)
		}
	}
	if p.E4M3Staging {
		fmt.Fprintf(&b, " + e4m3 A %d at %d + e4m3 B %d (64-byte swizzled rows the expansion widens) + codes %d at %d",
			p.M*64, p.E4M3Offset, p.BRows*64, (p.M+p.BRows)*8, p.E4M3CodeOffset)
	}
	fmt.Fprintf(&b, "\nring     [0, %d) from the base", p.Stages*p.StageBytes)
	if p.AlignSlack > 0 {
		fmt.Fprintf(&b, " (dynamic shared memory rounded up to 1024: %d bytes of slack)", p.AlignSlack)
	}
	b.WriteByte('\n')
	if p.CodeSlots > 0 {
		fmt.Fprintf(&b, "codes    %d slots x %d bytes at %d (the producer's UE8M0 code windows, copied ahead by cp.async: 8 bytes per row)\n",
			p.CodeSlots, p.CodeSlotBytes, p.CodeOffset)
	}
	if p.ItemSlots > 0 {
		fmt.Fprintf(&b, "items    %d mbarriers at %d, %d item numbers at %d (the work items the producer takes from the queue, for the other roles)\n",
			p.ItemSlots, p.ItemOffset, p.ItemSlots, p.ItemOffset+8*p.ItemSlots)
	}
	if p.Staged {
		fmt.Fprintf(&b, "staging  %d rows x %d bytes at %d (bf16 epilogue tile, rows padded by 16 bytes)\n", p.M, p.StagingStride, p.StagingOffset)
	}
	if p.Target != target.SM80 {
		fmt.Fprintf(&b, "mbarrier full[%d], empty[%d] at %d", p.Stages, p.Stages, p.BarrierOffset)
		if p.E4M3Staging {
			fmt.Fprintf(&b, "; e4m3 full[%d], empty[%d] at %d", p.Stages, p.Stages, p.BarrierOffset+16*p.Stages)
		}
		b.WriteByte('\n')
	}
	if p.Bytes != p.Required {
		fmt.Fprintf(&b, "total    %d bytes of dynamic shared memory (%d without the staging tile, the least the kernel runs with)\n", p.Bytes, p.Required)
	} else {
		fmt.Fprintf(&b, "total    %d bytes of dynamic shared memory\n", p.Bytes)
	}
	if p.TMEMColumns > 0 {
		fmt.Fprintf(&b, "TMEM     %d columns x 128 lanes (two fp32 accumulators of %d columns", p.TMEMColumns, p.BRows)
		if sc := sm100ScaleColumns(p.GemmConfig); sc > 0 {
			fmt.Fprintf(&b, ", then %d stages x %d scale-factor columns", p.Stages, sc)
		}
		b.WriteString(")\n")
	}
	if p.BRowOrigin > 0 {
		fmt.Fprintf(&b, "B rows   %v: tile row r holds B_e row %d*n0 + %v(r)\n", p.GateUp, p.BRowOrigin, p.BRowMap)
	}
	if p.SwapAB {
		b.WriteString("operands the operand swap: tile A (the token rows) is laid out as wgmma's operand B, tile B (the weights) as its operand A\n")
	}
	fmt.Fprintf(&b, "tiles    each described below at shared address 0; in a stage A starts at byte 0, B at byte %d\n", p.A.Bytes())
	for i, t := range []OperandTile{p.A, p.B} {
		n := 0
		if i == 0 && p.Target == target.SM100a && p.DType == DTypeBF16 {
			n = p.BRows // the instruction descriptor of the M x BRows MMA
		}
		s, err := t.Describe(0, n)
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}
