package launch

import "github.com/mokc/mokc/schedule"

// Manifest describes the compiled kernels of one layer for a launcher in any
// language; compiler writes it as indented JSON (`mokc build --emit
// manifest`) and runtime reads it back. Kernels appear in launch order; a
// kernel's grid, like every size of the manifest, is an Expr of the token
// count T (SizeFormula).
type Manifest struct {
	Mokc string `json:"mokc"` // version of the code generator (compiler.Version)
	// SizeFormula is how every grid and buffer size of the manifest
	// ({a, b, d, min}) is evaluated at T tokens (the constant SizeFormula).
	SizeFormula string `json:"size_formula"`
	// Notes are what a launcher must know beyond the tables: the inputs
	// the caller provides, the shared-memory opt-in, tensor-map encoding.
	Notes      []string         `json:"notes"`
	Layer      string           `json:"layer"`       // preset or model name
	Target     string           `json:"target"`      // sm_80, sm_90a, sm_100a
	PTXVersion string           `json:"ptx_version"` // .version of the PTX
	Shape      Shape            `json:"shape"`       // layer sizes and weight layout
	Kernels    []ManifestKernel `json:"kernels"`     // in launch order
	Buffers    []Buffer         `json:"buffers"`     // inputs, outputs and scratch of the kernels
	Schedule   string           `json:"schedule"`    // schedule.Schedule.String()
	// Pass is "backward" for the backward program (moe.Backward: dy in;
	// dx, the routing-weight gradient out; main grads accumulated); empty
	// for the forward.
	Pass string `json:"pass,omitempty"`
}

// Shape holds the layer's sizes and what decides the meaning of the
// weights: hidden size H, intermediate size I, experts E, top-k K,
// shared-expert width S*I_s (0 when none), the activation (schedule's
// names) and the FC1 row order (FC1Halves or FC1Interleaved).
type Shape struct {
	Hidden       int    `json:"hidden"`       // H, hidden size
	Intermediate int    `json:"intermediate"` // I, routed expert intermediate size
	Experts      int    `json:"experts"`      // E, routed experts
	TopK         int    `json:"top_k"`        // K, routes per token
	SharedWidth  int    `json:"shared_width"` // S*I_s, total shared-expert intermediate size; 0 = none
	Activation   string `json:"activation"`   // routed activation: "swiglu", "clamped-swiglu" or "gpt-oss"
	FC1Rows      string `json:"fc1_rows"`     // FC1Halves or FC1Interleaved
	// SaveFC1: the forward keeps the routed FC1 output for the backward
	// (schedule.Layer.SaveFC1: the forward's scratch fc1_out, the backward's
	// input of that name, f32 [T*K, 2I]).
	SaveFC1 bool `json:"save_fc1,omitempty"`
}

// FC1 row orders of Shape.FC1Rows: which rows of an expert's FC1 weight
// [2I, H] are the gate and which the up projection.
const (
	FC1Halves      = "halves"      // gate rows 0..I-1, then up rows I..2I-1
	FC1Interleaved = "interleaved" // gate rows even, up rows odd (GPT-OSS)
)

// ManifestKernel is one kernel of the manifest: the launch plan's Kernel
// with the parameter layout of its PTX entry (offsets and sizes in the
// parameter buffer of cuLaunchKernel, in bytes) and its static shared
// memory in bytes.
type ManifestKernel struct {
	Kernel
	ParamBytes        int        `json:"param_bytes"`         // size of the parameter buffer, bytes
	ParamLayout       []PTXParam `json:"param_layout"`        // PTX layout of each of Params, same order
	StaticSharedBytes int        `json:"static_shared_bytes"` // static shared memory from the PTX, bytes
}

// PTXParam is one parameter of a PTX .entry as laid out in the parameter
// buffer of cuLaunchKernel (ptx.Param is this type).
type PTXParam struct {
	Name   string `json:"name"`   // PTX parameter name
	Type   string `json:"type"`   // PTX type of the declaration: ".u32", ".u64", ".f32", ".b8" (byte arrays: byval aggregates) ...
	Size   int    `json:"size"`   // bytes
	Align  int    `json:"align"`  // bytes
	Offset int    `json:"offset"` // byte offset in the parameter buffer (aligned to Align)
	ByVal  bool   `json:"byval"`  // a byval aggregate (e.g. a 128-byte TMA tensor map) declared `.param .align A .b8 name[Size]`
}

// ShapeOf is the manifest shape of layer l.
func ShapeOf(l schedule.Layer) Shape {
	rows := FC1Halves
	if l.GateUpInterleaved {
		rows = FC1Interleaved
	}
	return Shape{Hidden: l.Hidden, Intermediate: l.Intermediate, Experts: l.Experts, TopK: l.TopK,
		SharedWidth: l.SharedWidth(), Activation: l.Activation.String(), FC1Rows: rows, SaveFC1: l.SaveFC1}
}
