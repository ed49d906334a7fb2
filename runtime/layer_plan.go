package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/mokc/mokc/schedule"
)

// This file reads the launch manifest of a compiled layer: the JSON that
// package compiler writes (compiler.Manifest: codegen's launch plan joined
// with the PTX kernel metadata). The runtime reads it rather than importing
// codegen so that codegen's own GPU tests, which import this package, do not
// form an import cycle; the manifest is also the on-disk cache format.

// planExpr is codegen.Expr: max(Min, ceil((A*T + B) / D)), D = 0 read as 1.
type planExpr struct {
	A   int64 `json:"a"`
	B   int64 `json:"b"`
	D   int64 `json:"d"`
	Min int64 `json:"min"`
}

// eval returns the value of e at T tokens (the formula of codegen.Expr.Eval).
func (e planExpr) eval(T int64) int64 {
	d := e.D
	if d <= 0 {
		d = 1
	}
	n := e.A*T + e.B
	v := (n + d - 1) / d
	if n < 0 {
		v = n / d
	}
	if v < e.Min {
		v = e.Min
	}
	return v
}

// planTensorMap is codegen.TensorMap.
type planTensorMap struct {
	Operand     string     `json:"operand"`
	DType       string     `json:"dtype"`
	Dims        []planExpr `json:"dims"`
	StrideBytes []planExpr `json:"stride_bytes"`
	Box         []int      `json:"box"`
	Swizzle     int        `json:"swizzle"`
}

// planParam is codegen.Param.
type planParam struct {
	Name      string         `json:"name"`
	Type      string         `json:"type"`
	Size      int            `json:"size"`
	Align     int            `json:"align,omitempty"`
	Role      string         `json:"role,omitempty"`
	Buffer    string         `json:"buffer,omitempty"`
	Value     *planExpr      `json:"value,omitempty"`
	TensorMap *planTensorMap `json:"tensor_map,omitempty"`
}

// ptxParam is ptx.Param (the PTX entry's parameter layout).
type ptxParam struct {
	Name   string `json:"name"`
	Type   string `json:"type"`
	Size   int    `json:"size"`
	Align  int    `json:"align"`
	Offset int    `json:"offset"`
	ByVal  bool   `json:"byval"`
}

// planKernel is compiler.ManifestKernel: codegen.Kernel plus the PTX
// entry's parameter layout.
type planKernel struct {
	Name              string      `json:"name"`
	Params            []planParam `json:"params"`
	Block             int         `json:"block"`
	Grid              [3]planExpr `json:"grid"`
	SharedBytes       int         `json:"shared_bytes"`
	SkipIfZeroT       bool        `json:"skip_if_zero_t,omitempty"`
	ParamBytes        int         `json:"param_bytes"`
	ParamLayout       []ptxParam  `json:"param_layout"`
	StaticSharedBytes int         `json:"static_shared_bytes"`
}

// planBuffer is codegen.Buffer.
type planBuffer struct {
	Name  string     `json:"name"`
	Kind  string     `json:"kind"`
	DType string     `json:"dtype"`
	Shape []planExpr `json:"shape"`
	Bytes planExpr   `json:"bytes"`
	Doc   string     `json:"doc"`
}

// planShape is compiler.ManifestShape.
type planShape struct {
	Hidden       int    `json:"hidden"`
	Intermediate int    `json:"intermediate"`
	Experts      int    `json:"experts"`
	TopK         int    `json:"top_k"`
	SharedWidth  int    `json:"shared_width"`
	Activation   string `json:"activation"`
	FC1Rows      string `json:"fc1_rows"`
}

// shapeOf is the manifest shape of layer l (compiler.ManifestShape).
func shapeOf(l schedule.Layer) planShape {
	rows := "halves"
	if l.GateUpInterleaved {
		rows = "interleaved"
	}
	return planShape{Hidden: l.Hidden, Intermediate: l.Intermediate, Experts: l.Experts, TopK: l.TopK,
		SharedWidth: l.SharedWidth(), Activation: l.Activation.String(), FC1Rows: rows}
}

// plan is compiler.Manifest.
type plan struct {
	Mokc        string       `json:"mokc"`
	SizeFormula string       `json:"size_formula"`
	Notes       []string     `json:"notes"`
	Layer       string       `json:"layer"`
	Target      string       `json:"target"`
	PTXVersion  string       `json:"ptx_version"`
	Shape       planShape    `json:"shape"`
	Kernels     []planKernel `json:"kernels"`
	Buffers     []planBuffer `json:"buffers"`
	Schedule    string       `json:"schedule"`

	bufIndex map[string]int // buffer name -> index in Buffers
}

// Buffer kinds and parameter types of the manifest (codegen.BufferKind,
// codegen.ParamType).
const (
	bufInput   = "input"
	bufOutput  = "output"
	bufScratch = "scratch"

	paramPtr  = "ptr"
	paramI32  = "i32"
	paramI64  = "i64"
	paramF32  = "f32"
	paramTmap = "tmap"
)

// errBuffer is the name of the error word buffer (u32[1]) every forward
// program has; the Layer owns it.
const errBuffer = "err"

// Error codes of the error word (codegen.ErrBadExpertID, codegen.ErrTooManyRoute).
const (
	errCodeBadExpertID  = 1
	errCodeTooManyRoute = 2
)

// parsePlan decodes a manifest strictly (an unknown field is an error: it
// would be something this runtime does not know how to launch) and checks
// it against the layer it claims to implement.
func parsePlan(manifest []byte, l schedule.Layer) (*plan, error) {
	dec := json.NewDecoder(bytes.NewReader(manifest))
	dec.DisallowUnknownFields()
	var p plan
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("mokc runtime: layer manifest: %w (a manifest field this runtime does not know is an error: update runtime/layer_plan.go with the compiler)", err)
	}
	if err := p.check(l); err != nil {
		return nil, fmt.Errorf("mokc runtime: layer manifest of %s: %w", l.Name, err)
	}
	return &p, nil
}

// check validates the manifest's internal consistency and its shape against
// l: every buffer a parameter names exists, scalar parameters have values,
// tensor maps are complete, the PTX parameter layout (when present) has the
// plan's sizes, and H, I, E, K and the shared width are those of l.
func (p *plan) check(l schedule.Layer) error {
	want := shapeOf(l)
	if p.Shape != want {
		return fmt.Errorf("shape %+v does not match the layer %+v", p.Shape, want)
	}
	if _, _, err := parseTarget(p.Target); err != nil {
		return err
	}
	p.bufIndex = map[string]int{}
	for i, b := range p.Buffers {
		if b.Name == "" {
			return fmt.Errorf("buffer %d has no name", i)
		}
		if _, dup := p.bufIndex[b.Name]; dup {
			return fmt.Errorf("buffer %q listed twice", b.Name)
		}
		switch b.Kind {
		case bufInput, bufOutput, bufScratch:
		default:
			return fmt.Errorf("buffer %q: unknown kind %q", b.Name, b.Kind)
		}
		if b.Kind != bufScratch && b.Name != errBuffer {
			if _, ok := argFields[b.Name]; !ok {
				return fmt.Errorf("%s buffer %q has no ForwardArgs field in this runtime", b.Kind, b.Name)
			}
			if dtypeSize(DType(b.DType)) == 0 {
				return fmt.Errorf("buffer %q: unknown dtype %q", b.Name, b.DType)
			}
		}
		if b.Bytes.A < 0 || b.Bytes.D < 0 || b.Bytes.Min < 0 {
			return fmt.Errorf("buffer %q: byte size %+v must not decrease with T", b.Name, b.Bytes)
		}
		p.bufIndex[b.Name] = i
	}
	if i, ok := p.bufIndex[errBuffer]; !ok || p.Buffers[i].Kind == bufScratch {
		return fmt.Errorf("no %q output buffer (the error word)", errBuffer)
	}
	if _, ok := p.bufIndex["x"]; !ok {
		return fmt.Errorf("no input buffer \"x\"")
	}
	if _, ok := p.bufIndex["y"]; !ok {
		return fmt.Errorf("no output buffer \"y\"")
	}
	if len(p.Kernels) == 0 {
		return fmt.Errorf("no kernels")
	}
	for _, k := range p.Kernels {
		if k.Name == "" {
			return fmt.Errorf("a kernel has no name")
		}
		if k.Block <= 0 || k.Block > 1024 {
			return fmt.Errorf("kernel %s: block of %d threads", k.Name, k.Block)
		}
		if k.SharedBytes < 0 {
			return fmt.Errorf("kernel %s: %d bytes of dynamic shared memory", k.Name, k.SharedBytes)
		}
		for _, prm := range k.Params {
			if err := p.checkParam(k, prm); err != nil {
				return err
			}
		}
		if k.ParamLayout != nil {
			if len(k.ParamLayout) != len(k.Params) {
				return fmt.Errorf("kernel %s: plan has %d parameters, PTX entry %d", k.Name, len(k.Params), len(k.ParamLayout))
			}
			for i, prm := range k.Params {
				if got := k.ParamLayout[i].Size; got != prm.Size {
					return fmt.Errorf("kernel %s parameter %d (%s): plan says %d bytes, PTX entry %d", k.Name, i, prm.Name, prm.Size, got)
				}
			}
		}
	}
	return nil
}

func (p *plan) checkParam(k planKernel, prm planParam) error {
	where := fmt.Sprintf("kernel %s parameter %s", k.Name, prm.Name)
	switch prm.Type {
	case paramPtr:
		if prm.Size != 8 {
			return fmt.Errorf("%s: pointer of %d bytes", where, prm.Size)
		}
		if _, ok := p.bufIndex[prm.Buffer]; !ok {
			return fmt.Errorf("%s: names buffer %q that the plan lacks", where, prm.Buffer)
		}
	case paramI32, paramF32, paramI64:
		want := 4
		if prm.Type == paramI64 {
			want = 8
		}
		if prm.Size != want {
			return fmt.Errorf("%s: %s of %d bytes", where, prm.Type, prm.Size)
		}
		if prm.Value == nil {
			return fmt.Errorf("%s: scalar without a value", where)
		}
		if prm.Type == paramF32 {
			return fmt.Errorf("%s: f32 parameters bound to T are not supported by this runtime", where)
		}
	case paramTmap:
		if prm.Size != TensorMapBytes {
			return fmt.Errorf("%s: tensor map of %d bytes, want %d", where, prm.Size, TensorMapBytes)
		}
		tm := prm.TensorMap
		if tm == nil {
			return fmt.Errorf("%s: tensor map without a description", where)
		}
		if _, ok := p.bufIndex[prm.Buffer]; !ok {
			return fmt.Errorf("%s: tensor map over buffer %q that the plan lacks", where, prm.Buffer)
		}
		if _, err := tensorMapDType(tm.DType); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if _, err := tensorMapSwizzle(tm.Swizzle); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if len(tm.Dims) == 0 || len(tm.Box) != len(tm.Dims) || len(tm.StrideBytes) != len(tm.Dims)-1 {
			return fmt.Errorf("%s: tensor map with %d dims, %d box sizes and %d strides", where, len(tm.Dims), len(tm.Box), len(tm.StrideBytes))
		}
	default:
		return fmt.Errorf("%s: unknown parameter type %q", where, prm.Type)
	}
	return nil
}

// buffer returns the buffer named name (nil if absent).
func (p *plan) buffer(name string) *planBuffer {
	if i, ok := p.bufIndex[name]; ok {
		return &p.Buffers[i]
	}
	return nil
}

// tensorMapDType maps a manifest dtype to the driver's tensor map type.
func tensorMapDType(s string) (TensorMapDataType, error) {
	switch s {
	case "bf16":
		return TensorMapBF16, nil
	case "f32":
		return TensorMapF32, nil
	case "u8":
		return TensorMapU8, nil
	case "f16":
		return TensorMapF16, nil
	case "i32":
		return TensorMapI32, nil
	}
	return 0, fmt.Errorf("tensor map dtype %q is not known to the runtime", s)
}

// tensorMapSwizzle maps a swizzle span in bytes to the driver's enum.
func tensorMapSwizzle(bytes int) (TensorMapSwizzle, error) {
	switch bytes {
	case 0:
		return SwizzleNone, nil
	case 32:
		return Swizzle32B, nil
	case 64:
		return Swizzle64B, nil
	case 128:
		return Swizzle128B, nil
	}
	return 0, fmt.Errorf("tensor map swizzle of %d bytes (want 0, 32, 64 or 128)", bytes)
}

// parseTarget returns the compute capability a PTX target is built for and
// whether it is an architecture-specific ("a") target.
func parseTarget(target string) (cc int, archSpecific bool, err error) {
	switch strings.TrimSpace(target) {
	case "sm_80":
		return 80, false, nil
	case "sm_90a":
		return 90, true, nil
	case "sm_100a":
		return 100, true, nil
	}
	return 0, false, fmt.Errorf("unknown target %q (want sm_80, sm_90a or sm_100a)", target)
}

// CheckTarget reports whether PTX for target (sm_80, sm_90a or sm_100a) can
// run on a device of compute capability cc (10*major + minor, see
// DeviceProps.ComputeCapability). PTX for a plain target such as sm_80 is
// JIT-compiled for any device of that capability or newer; the
// architecture-specific targets sm_90a and sm_100a (wgmma, setmaxnreg;
// tcgen05) run only on exactly that capability (PTX ISA, "Target ISA
// notes": "sm_90a ... features are not forward compatible"). The error names
// the target, the device's capability and the targets that would run.
func CheckTarget(target string, cc int) error {
	want, exact, err := parseTarget(target)
	if err != nil {
		return fmt.Errorf("mokc runtime: %w", err)
	}
	ok := cc >= want
	if exact {
		ok = cc == want
	}
	if ok {
		return nil
	}
	var fits []string
	for _, t := range []string{"sm_80", "sm_90a", "sm_100a"} {
		if w, ex, _ := parseTarget(t); (ex && cc == w) || (!ex && cc >= w) {
			fits = append(fits, t)
		}
	}
	hint := "none of mokc's targets runs on it"
	if len(fits) > 0 {
		hint = "use --target " + strings.Join(fits, " or ")
	}
	rule := fmt.Sprintf("needs compute capability %d.%d or newer", want/10, want%10)
	if exact {
		rule = fmt.Sprintf("needs compute capability exactly %d.%d (architecture-specific PTX)", want/10, want%10)
	}
	return fmt.Errorf("mokc runtime: target %s %s; the device has %d.%d: %s", target, rule, cc/10, cc%10, hint)
}
