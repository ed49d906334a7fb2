package codegen

import (
	"testing"

	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// This file exports the cases of the internal tests to the GPU tests, which
// are the external package codegen_test (build tag cuda): they launch their
// kernels through package driver and see codegen as its callers do.

// ForwardCase is a layer of the forward GPU test (forwardCases).
type ForwardCase struct {
	Name  string         // case name, also the name of its testdata/forward PTX
	Layer schedule.Layer // the layer
}

// ForwardCases returns the layers of the forward GPU test (forwardCases).
func ForwardCases(t testing.TB) []ForwardCase {
	var out []ForwardCase
	for _, c := range forwardCases(t) {
		out = append(out, ForwardCase{Name: c.name, Layer: c.layer})
	}
	return out
}

// BuildForwardCase builds the sm_80 program of c (buildCase).
func BuildForwardCase(t testing.TB, c ForwardCase) *Program {
	return buildCase(t, fwdCase{name: c.Name, layer: c.Layer})
}

// BuildForwardCaseDispatch builds the sm_80 program of c with the
// routing ops run as k (schedule.Schedule.Dispatch).
func BuildForwardCaseDispatch(t testing.TB, c ForwardCase, k schedule.DispatchKind) *Program {
	t.Helper()
	s, err := schedule.DefaultSchedule(c.Layer, target.SM80)
	if err != nil {
		t.Fatal(err)
	}
	s.Dispatch = k
	p, err := Build(c.Layer, s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TimingSchedule is the sm_80 default schedule of l with "stages,warps,bk"
// applied (timingSchedule).
func TimingSchedule(l schedule.Layer, v string) (schedule.Schedule, error) {
	return timingSchedule(l, v)
}

// GemmCase is one grouped GEMM of the engine GPU tests (sm90GemmCase).
type GemmCase struct {
	Spec   GemmSpec // the GEMM
	Counts []int    // rows per expert (ATiled); one entry, the row count M, for ADense
}

func gemmCases(cs []sm90GemmCase) []GemmCase {
	out := make([]GemmCase, len(cs))
	for i, c := range cs {
		out[i] = GemmCase{Spec: c.spec, Counts: c.counts}
	}
	return out
}

// SM90GemmCases returns the sm_90a engine's test GEMMs (sm90GemmCases).
func SM90GemmCases(prefix string) []GemmCase { return gemmCases(sm90GemmCases(prefix)) }

// SM90NMajorCases returns the sm_90a engine's N-major-B GEMMs
// (sm90NMajorCases).
func SM90NMajorCases(prefix string) []GemmCase { return gemmCases(sm90NMajorCases(prefix)) }

// SM80NMajorCases returns the sm_80 engine's N-major-B GEMMs
// (sm80NMajorCases).
func SM80NMajorCases(prefix string) []GemmCase { return gemmCases(sm80NMajorCases(prefix)) }

// SM90MXCases returns the sm_90a engine's MXFP8 GEMMs (sm90MXCases).
func SM90MXCases() []GemmCase { return gemmCases(sm90MXCases()) }

// SM90MXWholeCases returns the MXFP8 GEMMs of one wgmma per 32-wide block
// (sm90MXWholeCases).
func SM90MXWholeCases() []GemmCase { return gemmCases(sm90MXWholeCases()) }

// SM90MXSwapCases returns the MXFP8 GEMMs of 32-row tiles run with the
// operand swap (sm90MXSwapCases).
func SM90MXSwapCases() []GemmCase { return gemmCases(sm90MXSwapCases()) }

// SM90MXRegFedCases returns the register-fed MXFP8 GEMMs
// (sm90MXRegFedCases).
func SM90MXRegFedCases() []GemmCase { return gemmCases(sm90MXRegFedCases()) }

// SM90MXExpandCases returns the same GEMMs run by expansion
// (sm90MXExpandCases).
func SM90MXExpandCases() []GemmCase { return gemmCases(sm90MXExpandCases()) }

// SM90PerfCases returns the sm_90a engine's timing GEMMs (sm90PerfCases).
func SM90PerfCases(prefix string) []GemmCase { return gemmCases(sm90PerfCases(prefix)) }

// SM100GemmCases returns the sm_100a engine's test GEMMs (sm100GemmCases).
func SM100GemmCases() []GemmCase { return gemmCases(sm100GemmCases()) }

// GemmModule builds every case with engine eng into one module and returns
// it with each kernel's launch information, in case order (sm90GemmModule).
func GemmModule(t testing.TB, eng Engine, cases []GemmCase) (*ir.Module, []KernelInfo) {
	cs := make([]sm90GemmCase, len(cases))
	for i, c := range cases {
		cs[i] = sm90GemmCase{spec: c.Spec, counts: c.Counts}
	}
	return sm90GemmModule(t, eng, cs)
}

// BackwardPerOps are the backward's ops with PerOp kernels of their own.
var BackwardPerOps = backwardPerOps

// WidenKernel adds the kernel "widen_e4m3" to m: thread i (of "n") widens
// the 16 e4m3 bytes at in[16i..] with the UE8M0 code codes[i] as an
// MXExpand converter widens a chunk (widenE4M3 by expandFactor, then
// widenE4M3Exact when the chunk holds an e4m3 NaN or the code is above
// 134) and stores the eight bf16 pairs at out[32i..].
func WidenKernel(m *ir.Module) {
	b := NewKernel(m, "widen_e4m3", 128, ir.P("in", GPtr), ir.P("codes", GPtr), ir.P("out", GPtr), ir.P("n", ir.I32))
	i := b.Add(b.MulI(b.BlockIdx(ir.X), 128), b.ThreadIdx(ir.X))
	b.ReturnIf(b.ICmp(enum.IPredSGE, i, b.Param("n")))
	v := b.LoadAt(ir.Vec(4, ir.I32), b.ByteOffset(b.Param("in"), b.MulI(b.Wide(i), 16)), 16)
	var w [4]value.Value
	for j := range w {
		w[j] = b.ExtractElement(v, j)
	}
	code := b.ZExt(b.LoadAt(ir.I8, b.ByteOffset(b.Param("codes"), b.Wide(i)), 1), ir.I32)
	fast, nan := b.widenE4M3(w, expandFactor(b, code))
	slow := b.Or(expandBeyond(b, code), b.ICmp(enum.IPredNE, nan, ir.Int32(0)))
	exact := b.widenE4M3Exact(w, code)
	dst := b.ByteOffset(b.Param("out"), b.MulI(b.Wide(i), 32))
	for h := 0; h < 2; h++ {
		var vec value.Value = ir.Undef(ir.Vec(4, ir.I32))
		for j := 0; j < 4; j++ {
			vec = b.InsertElement(vec, b.Select(slow, exact[4*h+j], fast[4*h+j]), j)
		}
		b.StoreAt(vec, b.ByteOffsetC(dst, int64(16*h)), 16)
	}
	b.Ret(nil)
}

// SplitKCase is a GEMM run split in parts (splitKCase): Gemm as a layer
// defines it, Split the spec of its split kernel.
type SplitKCase struct {
	Gemm  GemmCase
	Split GemmSpec
}

// SM90SplitKCases returns the split GEMMs of the sm_90a engine test
// (sm90SplitKCases).
func SM90SplitKCases() []SplitKCase {
	var out []SplitKCase
	for _, c := range sm90SplitKCases() {
		out = append(out, SplitKCase{Gemm: GemmCase{Spec: c.gemm.spec, Counts: c.gemm.counts}, Split: c.split})
	}
	return out
}

// SplitKModule builds the split kernels and their reduce kernels of cases
// into one module (splitKModule).
func SplitKModule(t testing.TB, eng Engine, cases []SplitKCase) (*ir.Module, []KernelInfo, []Kernel) {
	in := make([]splitKCase, len(cases))
	for i, c := range cases {
		in[i] = splitKCase{gemm: sm90GemmCase{spec: c.Gemm.Spec, counts: c.Gemm.Counts}, split: c.Split}
	}
	return splitKModule(t, eng, in)
}

// RoundOddBF16 is roundOddBF16: x rounded to bf16 by rounding to odd.
func RoundOddBF16(x float32) uint16 { return roundOddBF16(x) }

// EntryBody is entryBody, for the external tests that read a kernel's PTX.
var EntryBody = entryBody
