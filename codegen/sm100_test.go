package codegen

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/goldenfile"
	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/layouts"
	mptx "github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/target"
)

// sm100Retarget turns llc-19's sm_90a PTX of an sm_100a module into sm_100a
// PTX (llc-19 knows no sm_100a): the tcgen05 instructions are inline PTX
// that llc copies verbatim, so only the .version and .target lines change.
func sm100Retarget(t *testing.T, text string) string {
	t.Helper()
	v := regexp.MustCompile(`(?m)^\.version [0-9.]+$`)
	tg := regexp.MustCompile(`(?m)^\.target sm_90a$`)
	if !v.MatchString(text) || !tg.MatchString(text) {
		t.Fatal("llc output lacks .version / .target sm_90a lines")
	}
	return tg.ReplaceAllString(v.ReplaceAllString(text, ".version 8.8"), ".target sm_100a")
}

// TestSM100PresetsAssemble builds every preset's grouped GEMMs with the
// sm_100a engine under the preset's default sm_100a schedule, compiles them
// with mokc's ptx backend (.version 8.8, .target sm_100a) and with llc-19
// (as sm_90a, then retargeted), and assembles both with the CUDA >= 12.8
// ptxas for sm_100a.
func TestSM100PresetsAssemble(t *testing.T) {
	for _, name := range presetsUnderTest() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, text := presetGEMMs(t, name, target.SM100a)
			ptx := sm100Retarget(t, llcPTX(t, text, "sm_90a"))
			for _, want := range []string{".target sm_100a", "tcgen05.alloc", "tcgen05.mma.cta_group::1.kind::f16",
				"tcgen05.commit", "tcgen05.ld.sync.aligned.32x32b", "tcgen05.dealloc", "cp.async.bulk.tensor.3d"} {
				if !strings.Contains(ptx, want) {
					t.Errorf("PTX lacks %q", want)
				}
			}
			toolchain.NeedPtxas(t, "sm_100a")
			if err := toolchain.Assemble(ptx, "sm_100a"); err != nil {
				t.Fatal("llc-19 (retargeted):", strings.SplitN(err.Error(), "\n", 20))
			}
			ours := assembleOurs(t, m, target.SM100a)
			if !strings.Contains(ours, ".version 8.8") || !strings.Contains(ours, ".target sm_100a") {
				t.Error("mokc ptx output is not .version 8.8 / .target sm_100a")
			}
		})
	}
}

// sm100GemmCases are the engine test shapes for sm_100a: the sm_90a cases
// (odd N and K, the three epilogues, dense rows, BTable) with M = 128 tiles
// and one MMA warp, plus 8 epilogue warps (two column groups per TMEM lane
// quarter).
func sm100GemmCases() []sm90GemmCase {
	var cases []sm90GemmCase
	for _, c := range sm90GemmCases("sm100t") {
		if c.spec.GatherK > 0 || c.spec.Tile.BlocksPerSM > 1 {
			continue // the sm_100a engine neither gathers A (no GathersA predicate) nor runs two blocks per SM
		}
		c.spec.Tile.BM, c.spec.Tile.Warps, c.spec.Tile.EpilogueWarps = 128, 1, 4
		cases = append(cases, c)
	}
	c8 := cases[0]
	c8.spec.Name, c8.spec.Tile.EpilogueWarps = "sm100t_store8", 8
	return append(cases, c8)
}

// sm100MXCases are the MXFP8 engine test shapes (sm90MXCases: K tails,
// K = 2880, gate/up halves and interleaved with biases, f32 C, empty
// experts) for sm_100a: M = 128 tiles, one MMA warp, four epilogue warps.
func sm100MXCases() []sm90GemmCase {
	var cases []sm90GemmCase
	for _, c := range sm90MXCases() {
		c.spec.Name = strings.Replace(c.spec.Name, "mx_", "sm100mx_", 1)
		c.spec.Tile.BM, c.spec.Tile.Warps, c.spec.Tile.EpilogueWarps = 128, 1, 4
		cases = append(cases, c)
	}
	// B tiles of 64 rows (padded to one 128-row scale tile) and of 192
	// (gate/up interleaved: two scale tiles, the second half padding).
	c64, c192 := cases[0], cases[2]
	c64.spec.Name, c64.spec.Tile.BN = "sm100mx_store64", 64
	c192.spec.Name, c192.spec.N, c192.spec.Tile.BN, c192.spec.Tile.Stages = "sm100mx_gptoss192", 200, 96, 3
	return append(cases, c64, c192)
}

// TestSM100MXAssemble builds the MXFP8 GEMM cases with the sm_100a engine
// (TMA of the e4m3 tiles, the producer's scale-factor tiles, tcgen05.cp to
// TMEM, block-scaled tcgen05.mma) and assembles mokc's PTX for sm_100a; the
// scale-factor tiles of a stage fit the TMEM the plan allocates.
func TestSM100MXAssemble(t *testing.T) {
	eng, err := EngineFor(target.SM100a)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := sm90GemmModule(t, eng, sm100MXCases())
	toolchain.NeedPtxas(t, "sm_100a")
	ours := assembleOurs(t, m.IR, target.SM100a)
	for _, want := range mxGEMMPTX[target.SM100a] {
		if n := strings.Count(ours, want); n < len(sm100MXCases()) {
			t.Errorf("%q %d times, want one per kernel at least", want, n)
		}
	}
	for _, c := range sm100MXCases() {
		l, err := sm100Plan(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		if end := l.mx.col0 + l.S*l.mx.colsPer; end > l.smem.TMEMColumns || l.mx.col0 != 2*l.NB {
			t.Errorf("%s: scale columns %d..%d past the %d allocated, or not after the accumulators", c.spec.Name, l.mx.col0, end, l.smem.TMEMColumns)
		}
		if l.smem.ScaleBytes%1024 != 0 || l.smem.ScaleBytes < (1+l.mx.bTiles)*layouts.SFTileBytes || l.mx.bTiles != (l.NB+127)/128 {
			t.Errorf("%s: %d scale bytes per stage for %d tiles (B tile of %d rows)", c.spec.Name, l.smem.ScaleBytes, 1+l.mx.bTiles, l.NB)
		}
		if l.stageBytes%1024 != 0 {
			t.Errorf("%s: stage of %d bytes: the next stage's swizzled tiles lose their 1024-byte alignment", c.spec.Name, l.stageBytes)
		}
	}
}

// TestSM100MXDescriptors checks the MXFP8 descriptors the sm_100a kernels
// use: the instruction descriptor of K step ks decodes to M 128, the B
// tile's rows as N, e4m3 x e4m3 and scale-factor ids ks (the encoder is
// pinned to CUTLASS's values in layouts), and the scale-factor tile's
// shared-memory descriptor is no swizzle, SBO 128 bytes, version bits
// 0b001. A B tile whose accumulators and scales exceed the 512 TMEM
// columns is refused.
func TestSM100MXDescriptors(t *testing.T) {
	for _, c := range sm100MXCases() {
		l, err := sm100Plan(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		for ks, v := range l.mx.idesc {
			d, err := layouts.DecodeTCGen05InstrDescMXF8F6F4(v)
			if err != nil || d.M != 128 || d.N != l.NB || d.SFIDA != ks || d.SFIDB != ks || d.AType != layouts.TCGen05E4M3 || d.BType != layouts.TCGen05E4M3 {
				t.Errorf("%s: K step %d: %+v, %v", c.spec.Name, ks, d, err)
			}
		}
		if len(l.mx.idesc) != 4 || l.mx.sfDescHi != 1<<46|(128>>4)<<32 {
			t.Errorf("%s: %d K steps, scale-factor descriptor %#x", c.spec.Name, len(l.mx.idesc), l.mx.sfDescHi)
		}
	}
	c := sm100MXCases()[0]
	c.spec.Tile.BN, c.spec.N = 256, 512
	if _, err := sm100Plan(c.spec); err == nil || !strings.Contains(err.Error(), "TMEM columns") {
		t.Errorf("256-row MXFP8 B tile with 3 stages: %v", err)
	}
	e := sm100MXCases()[0]
	e.spec.MXExpand = true
	if _, err := sm100Plan(e.spec); err == nil || !strings.Contains(err.Error(), "MXExpand") {
		t.Errorf("MXExpand on sm_100a: %v", err)
	}
}

// TestSM100GemmCasesAssemble keeps testdata/sm100/gemm.llc.ptx (llc-19's
// PTX of the engine test kernels, retargeted to sm_100a; the Blackwell GPU
// test runs it next to mokc's) in step with the generator, and assembles it
// and mokc's PTX of the same module for sm_100a.
func TestSM100GemmCasesAssemble(t *testing.T) {
	eng, err := EngineFor(target.SM100a)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := sm90GemmModule(t, eng, sm100GemmCases())
	text, err := ir.LLVM19Text(m.IR)
	if err != nil {
		t.Fatal(err)
	}
	ptx := sm100Retarget(t, llcPTX(t, text, "sm_90a"))
	goldenfile.Check(t, filepath.Join("testdata", "sm100", "gemm.llc.ptx"), ptx, *update,
		"go test ./codegen -run TestSM100GemmCasesAssemble -update")
	toolchain.NeedPtxas(t, "sm_100a")
	if err := toolchain.Assemble(ptx, "sm_100a"); err != nil {
		t.Fatal("llc-19 (retargeted):", strings.SplitN(err.Error(), "\n", 20))
	}
	ours, err := mptx.Compile(m.IR, target.SM100a)
	if err != nil {
		t.Fatal(err)
	}
	if err := toolchain.Assemble(ours, "sm_100a"); err != nil {
		t.Fatal("mokc ptx:", strings.SplitN(err.Error(), "\n", 20))
	}
}

// TestSM100Descriptors pins the descriptor encoders to known-good values
// (computed with CUTLASS's bit-field unions in cute/arch/mma_sm100_desc.hpp):
// ptxas does not check descriptors, so a wrong bit would only show on
// hardware.
func TestSM100Descriptors(t *testing.T) {
	for _, c := range []struct {
		m, n int
		want uint32
	}{{128, 256, 0x08400490}, {128, 128, 0x08200490}} {
		got, err := TCGen05IDescF16(c.m, c.n)
		if err != nil || got != c.want {
			t.Errorf("TCGen05IDescF16(%d, %d) = %#x, %v; want %#x", c.m, c.n, got, err, c.want)
		}
	}
	for _, bad := range [][2]int{{128, 264}, {96, 128}, {64, 4}} {
		if _, err := TCGen05IDescF16(bad[0], bad[1]); err == nil {
			t.Errorf("TCGen05IDescF16(%d, %d) accepted", bad[0], bad[1])
		}
	}
	// Smem descriptor of the tile at 0x400, 128B swizzle, SBO 1024.
	hi100, err := SM100DescK128B()
	if err != nil {
		t.Fatal(err)
	}
	if got := hi100 | 0x400>>4; got != 0x4000404000000040 {
		t.Errorf("sm_100 descriptor = %#x, want 0x4000404000000040", got)
	}
	hi90, err := SM90DescK128B()
	if err != nil {
		t.Fatal(err)
	}
	// The kernels OR the start-address field in at run time.
	if hi100&0x3FFF != 0 || hi90&0x3FFF != 0 {
		t.Error("descriptor constants overlap the start-address field")
	}
	// sm_90 descriptor: swizzle 128B = 1 in bits 62-63, SBO 1024 (64 at bit 32), LBO 16 (1 at bit 16).
	if got := hi90 | 0x400>>4; got != 1<<62|64<<32|1<<16|0x40 {
		t.Errorf("sm_90 descriptor = %#x", got)
	}
	// The atoms take these bits from the layouts tiles they address.
	for tg, want := range map[target.Target]uint64{target.SM90a: hi90, target.SM100a: hi100} {
		a, b, err := layouts.GemmOperandTiles(tg, layouts.DTypeBF16, 128, 256, 64)
		if err != nil {
			t.Fatal(err)
		}
		for _, tile := range []layouts.OperandTile{a, b} {
			if got, err := tile.(*layouts.SmemTile).Descriptor(0, 0, 0); err != nil || got != want {
				t.Errorf("%v %v: descriptor %#x, %v, want %#x", tg, tile, got, err, want)
			}
		}
	}
}

// TestSM100Refusals checks the errors of unsupported sm_100a specs.
func TestSM100Refusals(t *testing.T) {
	eng, err := EngineFor(target.SM100a)
	if err != nil {
		t.Fatal(err)
	}
	base := sm90GemmCases("sm100r")[0].spec
	base.Tile = Tile{BM: 128, BN: 128, BK: 64, Stages: 4, Warps: 1, ProducerWarps: 1, EpilogueWarps: 4}
	if _, err := eng.GroupedGEMM(ir.NewModule("ok"), base, 1); err != nil {
		t.Fatalf("base spec refused: %v", err)
	}
	for name, mod := range map[string]func(s *GemmSpec){
		"bm64":    func(s *GemmSpec) { s.Tile.BM = 64 },
		"cluster": func(s *GemmSpec) { s.Tile.Cluster = 2 },
		"n264":    func(s *GemmSpec) { s.Tile.BN = 264 },
		"n24":     func(s *GemmSpec) { s.Tile.BN = 24 },
		"epi6":    func(s *GemmSpec) { s.Tile.EpilogueWarps = 6 },
		"mma2":    func(s *GemmSpec) { s.Tile.Warps = 2 },
		"smem":    func(s *GemmSpec) { s.Tile.Stages = 6; s.Tile.BN = 256 },
	} {
		s := base
		s.Name = "sm100r_" + name
		mod(&s)
		if _, err := eng.GroupedGEMM(ir.NewModule("r"), s, 1); err == nil {
			t.Errorf("%s: spec accepted, want an error", name)
		} else if !strings.Contains(err.Error(), s.Name) {
			t.Errorf("%s: error %q does not name the kernel", name, err)
		}
	}
}
