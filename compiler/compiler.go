package compiler

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
)

// Version is the version of mokc's code generator, part of every manifest
// and of the runtime's compiled-module cache key.
const Version = "0.1.0"

// Artifact is one compiled layer.
type Artifact struct {
	Layer    schedule.Layer
	Schedule schedule.Schedule
	Program  *codegen.Program // launch plan and the LLVM IR module
	PTX      *ptx.Result      // PTX text and per-kernel metadata
	Manifest launch.Manifest
	// Timings holds the wall time of each stage, in stage order.
	Timings []StageTime
}

// StageTime is the wall time one stage took.
type StageTime struct {
	Stage string        `json:"stage"`
	Time  time.Duration `json:"ns"`
}

// Stage is one step of the pipeline: run transforms the artifact in place;
// check verifies what run produced.
type Stage struct {
	Name  string
	run   func(*Artifact) error
	check func(*Artifact) error
}

// Stages is the pipeline, in order.
var Stages = []Stage{
	{"validate", func(a *Artifact) error { return a.Schedule.Validate(a.Layer) }, nil},
	{"codegen", func(a *Artifact) (err error) {
		a.Program, err = codegen.Build(a.Layer, a.Schedule)
		return err
	}, func(a *Artifact) error { return ir.Check(a.Program.Module) }},
	{"ptx", func(a *Artifact) (err error) {
		a.PTX, err = ptx.CompileModule(a.Program.Module, ptx.Target(a.Schedule.Target.String()))
		return err
	}, checkPTX},
	{"manifest", buildManifest, nil},
}

// Compile runs every stage on layer l with schedule s.
func Compile(l schedule.Layer, s schedule.Schedule) (*Artifact, error) {
	a := &Artifact{Layer: l, Schedule: s}
	for _, st := range Stages {
		t0 := time.Now()
		if err := st.run(a); err != nil {
			return nil, &StageError{Stage: st.Name, Layer: l.Name, Target: s.Target.String(), Err: err}
		}
		if st.check != nil {
			if err := st.check(a); err != nil {
				return nil, &StageError{Stage: st.Name + " (check)", Layer: l.Name, Target: s.Target.String(), Err: err}
			}
		}
		a.Timings = append(a.Timings, StageTime{st.Name, time.Since(t0)})
	}
	return a, nil
}

// CompileDefault compiles l for target with schedule.DefaultSchedule.
func CompileDefault(l schedule.Layer, target schedule.Target) (*Artifact, error) {
	s, err := schedule.DefaultSchedule(l, target)
	if err != nil {
		return nil, &StageError{Stage: "schedule", Layer: l.Name, Target: target.String(), Err: err}
	}
	return Compile(l, s)
}

// StageError reports the stage that failed and, for a preset layer, a
// command reproducing it.
type StageError struct {
	Stage  string
	Layer  string
	Target string
	Err    error
}

// Error names the stage and, for a preset, a reproducing command.
func (e *StageError) Error() string {
	msg := fmt.Sprintf("%s stage: %v", e.Stage, e.Err)
	if _, err := schedule.Preset(e.Layer); err == nil {
		msg += fmt.Sprintf(" (reproduce: mokc build --model %s --target %s --emit llvm)", e.Layer, e.Target)
	}
	return msg
}

// Unwrap returns the stage's own error.
func (e *StageError) Unwrap() error { return e.Err }

// checkPTX verifies that every kernel of the launch plan is an entry of the
// PTX, with the launch plan's parameter count and sizes.
func checkPTX(a *Artifact) error {
	entries := map[string]ptx.KernelInfo{}
	for _, k := range a.PTX.Kernels {
		entries[k.Name] = k
	}
	for _, k := range a.Program.Kernels {
		e, ok := entries[k.Name]
		if !ok {
			return fmt.Errorf("launch plan names kernel %s, which the PTX lacks", k.Name)
		}
		if len(e.Params) != len(k.Params) {
			return fmt.Errorf("kernel %s: launch plan has %d parameters, PTX entry %d", k.Name, len(k.Params), len(e.Params))
		}
		for i, p := range k.Params {
			if p.Size != e.Params[i].Size {
				return fmt.Errorf("kernel %s parameter %d (%s): launch plan says %d bytes, PTX %d", k.Name, i, p.Name, p.Size, e.Params[i].Size)
			}
		}
		if k.SharedBytes > a.Schedule.Target.SharedMemoryLimit() {
			return fmt.Errorf("kernel %s: %d bytes of dynamic shared memory exceed the %s limit of %d", k.Name, k.SharedBytes, a.Schedule.Target, a.Schedule.Target.SharedMemoryLimit())
		}
	}
	return nil
}

// manifestNotes is the launch contract that the tables do not spell out.
var manifestNotes = []string{
	"The router is not part of the kernels: the caller provides the routing (ids [T,K] int32 with -1 for no route and weights [T,K] f32, or routing_map [T,E] u8 and probs [T,E] f32).",
	"Launch the kernels in order on one stream; kernels with skip_if_zero_t are not launched when T = 0; a kernel with tokens is launched only when T lies in one of its inclusive [min, max] ranges (variants of one GEMM tuned for different rows per expert; exactly one variant runs at each T); no host synchronisation is needed between them.",
	"A kernel whose shared_bytes exceed 48 KiB needs cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) first.",
	"Parameters are packed as param_layout gives (offset, size); a tensor_map parameter is 128 bytes from cuTensorMapEncodeTiled over its buffer with the listed dims, strides, box and swizzle, interleave none, L2 promotion 256B, out-of-bounds fill zero, re-encoded when T or the buffer address changes.",
	"Workspace buffers need no initialisation; after the forward the u32 err buffer is 0 when the routing was valid (bit 0: an expert id out of range; bit 1: more than K routes in a routing-map row).",
}

func buildManifest(a *Artifact) error {
	entries := map[string]ptx.KernelInfo{}
	for _, k := range a.PTX.Kernels {
		entries[k.Name] = k
	}
	m := launch.Manifest{
		Mokc: Version, SizeFormula: launch.SizeFormula, Notes: manifestNotes,
		Layer: a.Layer.Name, Target: a.Schedule.Target.String(), PTXVersion: a.PTX.Version,
		Shape:   launch.ShapeOf(a.Layer),
		Buffers: a.Program.Buffers, Schedule: a.Schedule.String(),
	}
	for _, k := range a.Program.Kernels {
		e := entries[k.Name]
		m.Kernels = append(m.Kernels, launch.ManifestKernel{Kernel: k, ParamBytes: e.ParamBytes,
			ParamLayout: e.Params, StaticSharedBytes: e.StaticSharedBytes})
	}
	a.Manifest = m
	return nil
}

// ManifestJSON returns the manifest as indented JSON.
func (a *Artifact) ManifestJSON() ([]byte, error) {
	return json.MarshalIndent(a.Manifest, "", "  ")
}

// LLVMText returns the LLVM IR of the artifact in LLVM 19 syntax (opaque
// pointers), the form llc-19 reads.
func (a *Artifact) LLVMText() (string, error) {
	return ir.LLVM19Text(a.Program.Module)
}
