package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// This file checks the launch manifest of a compiled layer (launch.Manifest,
// codegen's launch plan joined with the PTX kernel metadata): as a Go value
// from package compiler (NewLayer), or decoded from its JSON, the form
// `mokc build --emit manifest` writes (LoadLayer, and the on-disk cache).

// plan is a checked manifest, with its buffers indexed by name.
type plan struct {
	launch.Manifest

	bufIndex map[string]int // buffer name -> index in Buffers
	tokenBuf int            // index of the token input: T is its outermost dimension
}

// decodeManifest decodes the JSON of a launch manifest strictly: an unknown
// field is an error, since it would be something this runtime does not know
// how to launch.
func decodeManifest(manifest []byte) (*launch.Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(manifest))
	dec.DisallowUnknownFields()
	var m launch.Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("mokc runtime: layer manifest: %w (a manifest field this runtime does not know is refused: was the manifest written by another version of mokc?)", err)
	}
	return &m, nil
}

// newPlan checks manifest m against the layer l it claims to implement. The
// plan shares m's slices and never modifies them.
func newPlan(m *launch.Manifest, l schedule.Layer) (*plan, error) {
	p := &plan{Manifest: *m}
	if err := p.check(l); err != nil {
		return nil, fmt.Errorf("mokc runtime: layer manifest of %s: %w", l.Name, err)
	}
	return p, nil
}

// parsePlan decodes the JSON of a manifest (decodeManifest) and checks it
// against l (newPlan).
func parsePlan(manifest []byte, l schedule.Layer) (*plan, error) {
	m, err := decodeManifest(manifest)
	if err != nil {
		return nil, err
	}
	return newPlan(m, l)
}

// check validates the manifest's internal consistency and its shape against
// l: buffers have unique names, known kinds and (for the caller's) known
// dtypes; there is an error word, a token input and an output; every
// buffer a parameter names exists, scalar parameters have values, tensor
// maps are complete, the PTX parameter layout (when present) has the plan's
// sizes, and H, I, E, K and the shared width are those of l.
func (p *plan) check(l schedule.Layer) error {
	want := launch.ShapeOf(l)
	if p.Shape != want {
		return fmt.Errorf("shape %+v does not match the layer %+v", p.Shape, want)
	}
	if _, err := target.Parse(p.Target); err != nil {
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
		case launch.BufInput, launch.BufOutput, launch.BufScratch, launch.BufInOut:
		default:
			return fmt.Errorf("buffer %q: unknown kind %q", b.Name, b.Kind)
		}
		if isCaller(b) && DType(b.DType).Size() == 0 {
			return fmt.Errorf("buffer %q: unknown dtype %q", b.Name, b.DType)
		}
		if b.Bytes.A < 0 || b.Bytes.D < 0 || b.Bytes.Min < 0 {
			return fmt.Errorf("buffer %q: byte size %+v must not decrease with T", b.Name, b.Bytes)
		}
		p.bufIndex[b.Name] = i
	}
	if i, ok := p.bufIndex[launch.ErrBuffer]; !ok || p.Buffers[i].Kind == launch.BufScratch {
		return fmt.Errorf("no %q output buffer (the error word)", launch.ErrBuffer)
	}
	p.tokenBuf = slices.IndexFunc(p.Buffers, func(b launch.Buffer) bool {
		return b.Kind == launch.BufInput && len(b.Shape) > 0 && isTokenDim(b.Shape[0])
	})
	if p.tokenBuf < 0 {
		return fmt.Errorf("no input buffer whose outermost dimension is the token count T")
	}
	if len(p.specs(launch.BufOutput)) == 0 {
		return fmt.Errorf("no output buffer besides the error word")
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

func (p *plan) checkParam(k launch.ManifestKernel, prm launch.Param) error {
	where := fmt.Sprintf("kernel %s parameter %s", k.Name, prm.Name)
	switch prm.Type {
	case launch.ParamPtr:
		if prm.Size != 8 {
			return fmt.Errorf("%s: pointer of %d bytes", where, prm.Size)
		}
		if _, ok := p.bufIndex[prm.Buffer]; !ok {
			return fmt.Errorf("%s: names buffer %q that the plan lacks", where, prm.Buffer)
		}
	case launch.ParamI32, launch.ParamF32, launch.ParamI64:
		want := 4
		if prm.Type == launch.ParamI64 {
			want = 8
		}
		if prm.Size != want {
			return fmt.Errorf("%s: %s of %d bytes", where, prm.Type, prm.Size)
		}
		if prm.Value == nil {
			return fmt.Errorf("%s: scalar without a value", where)
		}
		if prm.Type == launch.ParamF32 {
			return fmt.Errorf("%s: f32 parameters bound to T are not supported by this runtime", where)
		}
	case launch.ParamTmap:
		if prm.Size != driver.TensorMapBytes {
			return fmt.Errorf("%s: tensor map of %d bytes, want %d", where, prm.Size, driver.TensorMapBytes)
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
		if _, err := driver.SwizzleOfBytes(tm.Swizzle); err != nil {
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

// tensorMapDType maps a manifest dtype to the driver's tensor map type.
func tensorMapDType(s string) (driver.TensorMapDataType, error) {
	switch s {
	case "bf16":
		return driver.TensorMapBF16, nil
	case "f32":
		return driver.TensorMapF32, nil
	case "u8":
		return driver.TensorMapU8, nil
	case "f16":
		return driver.TensorMapF16, nil
	case "i32":
		return driver.TensorMapI32, nil
	}
	return 0, fmt.Errorf("tensor map dtype %q is not known to the runtime", s)
}
