package compiler

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/ir"
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
	Manifest Manifest
	// Timings holds the wall time of each stage, in stage order.
	Timings []StageTime
}

// StageTime is the wall time one stage took.
type StageTime struct {
	Stage string        `json:"stage"`
	Time  time.Duration `json:"ns"`
}

// Manifest describes the compiled kernels for a launcher in any language.
// Kernels appear in launch order; a kernel's grid is evaluated from the token
// count T with codegen.Expr's formula max(min, ceil((a*T+b)/d)).
type Manifest struct {
	Mokc string `json:"mokc"` // Version
	// SizeFormula is how every grid and buffer size of the manifest
	// ({a, b, d, min}) is evaluated at T tokens.
	SizeFormula string `json:"size_formula"`
	// Notes are what a launcher must know beyond the tables: the inputs
	// the caller provides, the shared-memory opt-in, tensor-map encoding.
	Notes      []string         `json:"notes"`
	Layer      string           `json:"layer"`       // preset or model name
	Target     string           `json:"target"`      // sm_80, sm_90a, sm_100a
	PTXVersion string           `json:"ptx_version"` // .version of the PTX
	Shape      ManifestShape    `json:"shape"`
	Kernels    []ManifestKernel `json:"kernels"`
	Buffers    []codegen.Buffer `json:"buffers"`
	Schedule   string           `json:"schedule"` // schedule.Schedule.String()
}

// ManifestShape holds the layer's sizes and what decides the meaning of the
// weights: hidden size H, intermediate size I, experts E, top-k K,
// shared-expert width S*I_s (0 when none), the activation (schedule's
// names) and the FC1 row order ("halves": gate rows 0..I-1 then up rows;
// "interleaved": gate even, up odd).
type ManifestShape struct {
	Hidden       int    `json:"hidden"`
	Intermediate int    `json:"intermediate"`
	Experts      int    `json:"experts"`
	TopK         int    `json:"top_k"`
	SharedWidth  int    `json:"shared_width"`
	Activation   string `json:"activation"`
	FC1Rows      string `json:"fc1_rows"`
}

// ManifestKernel is one kernel of the manifest: the launch plan's entry with
// the parameter layout of the PTX entry (offsets and sizes in the parameter
// buffer of cuLaunchKernel, in bytes).
type ManifestKernel struct {
	codegen.Kernel
	ParamBytes        int         `json:"param_bytes"`
	ParamLayout       []ptx.Param `json:"param_layout"`
	StaticSharedBytes int         `json:"static_shared_bytes"`
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

func (e *StageError) Error() string {
	msg := fmt.Sprintf("%s stage: %v", e.Stage, e.Err)
	if _, err := schedule.Preset(e.Layer); err == nil {
		msg += fmt.Sprintf(" (reproduce: mokc build --model %s --target %s --emit llvm)", e.Layer, e.Target)
	}
	return msg
}

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
	"Launch the kernels in order on one stream; kernels with skip_if_zero_t are not launched when T = 0; no host synchronisation is needed between them.",
	"A kernel whose shared_bytes exceed 48 KiB needs cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) first.",
	"Parameters are packed as param_layout gives (offset, size); a tensor_map parameter is 128 bytes from cuTensorMapEncodeTiled over its buffer with the listed dims, strides, box and swizzle, interleave none, L2 promotion 256B, out-of-bounds fill zero, re-encoded when T or the buffer address changes.",
	"Workspace buffers need no initialisation; after the forward the u32 err buffer is 0 when the routing was valid (bit 0: an expert id out of range; bit 1: more than K routes in a routing-map row).",
}

func buildManifest(a *Artifact) error {
	entries := map[string]ptx.KernelInfo{}
	for _, k := range a.PTX.Kernels {
		entries[k.Name] = k
	}
	rows := "halves"
	if a.Layer.GateUpInterleaved {
		rows = "interleaved"
	}
	m := Manifest{
		Mokc: Version, SizeFormula: "max(min, ceil((a*T + b) / d)), d = 0 read as 1", Notes: manifestNotes,
		Layer: a.Layer.Name, Target: a.Schedule.Target.String(), PTXVersion: a.PTX.Version,
		Shape: ManifestShape{Hidden: a.Layer.Hidden, Intermediate: a.Layer.Intermediate, Experts: a.Layer.Experts,
			TopK: a.Layer.TopK, SharedWidth: a.Layer.SharedWidth(), Activation: a.Layer.Activation.String(), FC1Rows: rows},
		Buffers: a.Program.Buffers, Schedule: a.Schedule.String(),
	}
	for _, k := range a.Program.Kernels {
		e := entries[k.Name]
		m.Kernels = append(m.Kernels, ManifestKernel{Kernel: k, ParamBytes: e.ParamBytes, ParamLayout: e.Params, StaticSharedBytes: e.StaticSharedBytes})
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
