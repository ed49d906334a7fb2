package ir

import (
	"errors"
	"fmt"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/metadata"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"
)

// Target triple and data layout of every module built here: 64-bit NVPTX
// (LLVM NVPTX backend, NVPTXTargetMachine64).
const (
	Triple     = "nvptx64-nvidia-cuda"
	DataLayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
)

// Module is an LLVM IR module for NVPTX under construction. It wraps the
// llir module (field IR) and remembers the first error any builder of the
// module met; Finish returns it.
type Module struct {
	// IR is the underlying llir module (LLVM 14 syntax, typed pointers).
	IR *llir.Module

	intrinsics  map[string]*llir.Func
	annotations map[*llir.Func]*metadata.Tuple
	funcs       []*Func
	errs        []error
}

// NewModule returns an empty NVPTX module with the triple and data layout
// set. name becomes the module's source_filename.
func NewModule(name string) *Module {
	m := llir.NewModule()
	m.SourceFilename = name
	m.TargetTriple = Triple
	m.DataLayout = DataLayout
	return &Module{
		IR:          m,
		intrinsics:  map[string]*llir.Func{},
		annotations: map[*llir.Func]*metadata.Tuple{},
	}
}

func (m *Module) errorf(format string, args ...any) {
	m.errs = append(m.errs, fmt.Errorf("ir: "+format, args...))
}

// Err returns the errors the builders of the module met so far (joined), or
// nil.
func (m *Module) Err() error { return errors.Join(m.errs...) }

// Finish completes the module: every void function whose current block lacks
// a terminator gets `ret void`; then it returns the builder errors, if any,
// else the result of Check.
func (m *Module) Finish() (*llir.Module, error) {
	for _, f := range m.funcs {
		if f.cur != nil && f.cur.Term == nil && f.IR.Sig.RetType.Equal(types.Void) {
			f.cur.NewRet(nil)
		}
	}
	if err := m.Err(); err != nil {
		return nil, err
	}
	if err := Check(m.IR); err != nil {
		return nil, err
	}
	return m.IR, nil
}

// String returns the module in llir's LLVM 14 text (typed pointers). Use
// LLVM19Text for llc-19.
func (m *Module) String() string {
	s, err := text(m.IR)
	if err != nil {
		return "; " + err.Error()
	}
	return s
}

// Param is a function parameter: a name and a type from this package (I32,
// GlobalPtr(F32), ...). TensorMap marks the 128-byte byval CUtensorMap
// parameter; build it with TensorMapParam.
type Param struct {
	Name      string     // LLVM parameter name (kept in the PTX when it is a valid identifier)
	Type      types.Type // parameter type; with TensorMap, ptr to TensorMapType
	TensorMap bool       // byval 128-byte CUtensorMap, align 64
}

// P returns the parameter name of type t.
func P(name string, t types.Type) Param { return Param{Name: name, Type: t} }

// TensorMapType is the type of a CUtensorMap (CUDA driver API
// cuTensorMapEncodeTiled: 128 bytes, 64-byte aligned) as a kernel parameter
// value: [128 x i8].
var TensorMapType = types.NewArray(128, types.I8)

// TensorMapParam returns a kernel parameter holding a CUtensorMap by value.
// In IR it is `[128 x i8]* byval([128 x i8]) align 64 %name`, and the kernel's
// nvvm.annotations entry lists it under "grid_constant" (1-based parameter
// index), so the pointer is the generic address of the parameter itself
// (PTX: mov.b64 %rd, name; cvta.param.u64 %rd, %rd), usable by TMA
// instructions. See doc.go.
func TensorMapParam(name string) Param {
	return Param{Name: name, Type: types.NewPointer(TensorMapType), TensorMap: true}
}

func (m *Module) newFunc(name string, ret types.Type, params []Param) *Func {
	ps := make([]*llir.Param, len(params))
	for i, p := range params {
		if p.Type == nil {
			m.errorf("function @%s: parameter %q has no type", name, p.Name)
			p.Type = types.I32
		}
		lp := llir.NewParam(p.Name, p.Type)
		if p.TensorMap {
			lp.Attrs = append(lp.Attrs, llir.Byval{Typ: TensorMapType}, llir.Align(64))
		}
		ps[i] = lp
	}
	lf := m.IR.NewFunc(name, ret, ps...)
	f := &Func{IR: lf, M: m, params: params}
	f.cur = lf.NewBlock("entry")
	m.funcs = append(m.funcs, f)
	return f
}

// Kernel is a __global__ function: a void function listed in nvvm.annotations
// with "kernel". It embeds the body builder (*Func).
type Kernel struct {
	*Func
	md *metadata.Tuple
}

// Kernel adds a kernel (PTX .entry) called name with the given parameters,
// and returns it with its builder positioned in the entry block.
func (m *Module) Kernel(name string, params ...Param) *Kernel {
	f := m.newFunc(name, types.Void, params)
	md := &metadata.Tuple{MetadataID: -1, Fields: []metadata.Field{
		f.IR, &metadata.String{Value: "kernel"}, constant.NewInt(types.I32, 1),
	}}
	var grid []metadata.Field
	for i, p := range params {
		if p.TensorMap {
			grid = append(grid, constant.NewInt(types.I32, int64(i+1)))
		}
	}
	if len(grid) > 0 {
		md.Fields = append(md.Fields, &metadata.String{Value: "grid_constant"},
			&metadata.Tuple{MetadataID: -1, Fields: grid})
	}
	m.IR.MetadataDefs = append(m.IR.MetadataDefs, md)
	nd := m.IR.NamedMetadataDefs["nvvm.annotations"]
	if nd == nil {
		nd = &metadata.NamedDef{Name: "nvvm.annotations"}
		m.IR.NamedMetadataDefs["nvvm.annotations"] = nd
	}
	nd.Nodes = append(nd.Nodes, md)
	m.annotations[f.IR] = md
	return &Kernel{Func: f, md: md}
}

// DeviceFunc adds an internal (non-kernel) function, PTX .func, returning
// ret (types.Void for none). Call it with (*Func).Call.
func (m *Module) DeviceFunc(name string, ret types.Type, params ...Param) *Func {
	for _, p := range params {
		if p.TensorMap {
			m.errorf("function @%s: tensor-map parameter %q is only allowed on kernels", name, p.Name)
		}
	}
	f := m.newFunc(name, ret, params)
	f.IR.Linkage = enum.LinkageInternal
	return f
}

func (k *Kernel) annotate(key string, n int, lo, hi int) *Kernel {
	if n < lo || n > hi {
		k.M.errorf("kernel @%s: %s %d out of range [%d, %d]", k.IR.Name(), key, n, lo, hi)
		return k
	}
	k.md.Fields = append(k.md.Fields, &metadata.String{Value: key}, constant.NewInt(types.I32, int64(n)))
	return k
}

// MaxThreads sets the maximum number of threads per block (nvvm annotation
// "maxntidx" → PTX `.maxntid n, 1, 1`), 1..1024.
func (k *Kernel) MaxThreads(n int) *Kernel { return k.annotate("maxntidx", n, 1, 1024) }

// MinBlocksPerSM sets the minimum number of resident blocks per SM
// (annotation "minctasm" → PTX `.minnctapersm n`), 1..32.
func (k *Kernel) MinBlocksPerSM(n int) *Kernel { return k.annotate("minctasm", n, 1, 32) }

// MaxRegisters caps registers per thread (annotation "maxnreg" → PTX
// `.maxnreg n`), 16..255.
func (k *Kernel) MaxRegisters(n int) *Kernel { return k.annotate("maxnreg", n, 16, 255) }

// ClusterDims sets the kernel's thread-block cluster shape (annotations
// cluster_dim_x/y/z → PTX `.explicitcluster` and `.reqnctapercluster x,
// y, z`; sm_90 or newer): a launch groups the grid's blocks into clusters
// of x*y*z blocks (each extent 1..8, the portable cluster size), and every
// grid extent must be a multiple of the cluster's.
func (k *Kernel) ClusterDims(x, y, z int) *Kernel {
	return k.annotate("cluster_dim_x", x, 1, 8).annotate("cluster_dim_y", y, 1, 8).annotate("cluster_dim_z", z, 1, 8)
}

func (m *Module) checkGlobalName(name string) bool {
	for _, g := range m.IR.Globals {
		if g.Name() == name {
			m.errorf("global @%s defined twice", name)
			return false
		}
	}
	return true
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// DynamicShared declares the block's dynamic shared memory,
// `@name = external addrspace(3) global [0 x i8], align A` (PTX
// `.extern .shared .align A .b8 name[];`); its size is given at launch.
// The value is a `[0 x i8] addrspace(3)*`; address bytes with
// (*Func).SharedBytes. align is a power of two (16 for TMA, 1024 for 128-byte
// swizzled tiles).
func (m *Module) DynamicShared(name string, align int) *llir.Global {
	if !isPow2(align) {
		m.errorf("dynamic shared @%s: alignment %d is not a power of two", name, align)
		align = 16
	}
	m.checkGlobalName(name)
	g := m.IR.NewGlobal(name, types.NewArray(0, types.I8))
	g.Linkage = enum.LinkageExternal
	g.AddrSpace = Shared
	g.Align = llir.Align(align)
	g.Typ = PtrTo(g.ContentType, Shared)
	return g
}

// StaticShared defines a zero-initialised static shared variable of type t
// (PTX `.shared .align A .b8 name[size]`). The value is a
// `t addrspace(3)*`.
func (m *Module) StaticShared(name string, t types.Type, align int) *llir.Global {
	if !isPow2(align) {
		m.errorf("static shared @%s: alignment %d is not a power of two", name, align)
		align = 16
	}
	m.checkGlobalName(name)
	g := m.IR.NewGlobalDef(name, constant.NewZeroInitializer(t))
	g.Linkage = enum.LinkageInternal
	g.AddrSpace = Shared
	g.Align = llir.Align(align)
	g.Typ = PtrTo(t, Shared)
	return g
}

// ConstArray defines an initialised array of integers of type elem (i8, i16,
// i32 or i64) in address space as (Global or Const): a lookup table. The
// value is a `[len x elem] addrspace(as)*`.
func (m *Module) ConstArray(name string, as types.AddrSpace, elem *types.IntType, vals []int64) *llir.Global {
	if as != Global && as != Const {
		m.errorf("constant array @%s: address space %d is neither global (1) nor const (4)", name, as)
		as = Const
	}
	m.checkGlobalName(name)
	cs := make([]constant.Constant, len(vals))
	for i, v := range vals {
		cs[i] = constant.NewInt(elem, v)
	}
	at := types.NewArray(uint64(len(vals)), elem)
	g := m.IR.NewGlobalDef(name, constant.NewArray(at, cs...))
	g.Linkage = enum.LinkageInternal
	g.Immutable = as == Const
	g.AddrSpace = as
	g.Align = llir.Align(int(elem.BitSize / 8))
	g.Typ = PtrTo(at, as)
	return g
}

// intrinsic returns the declaration of intrinsic name (from the table in
// intrinsics.go), adding it to the module the first time.
func (m *Module) intrinsic(name string) *llir.Func {
	if f, ok := m.intrinsics[name]; ok {
		return f
	}
	sig, ok := intrinsicSigs[name]
	if !ok {
		m.errorf("unknown intrinsic %s", name)
		sig = intrinsicSig{ret: types.Void}
	}
	ps := make([]*llir.Param, len(sig.params))
	for i, t := range sig.params {
		ps[i] = llir.NewParam("", t)
	}
	f := m.IR.NewFunc(name, sig.ret, ps...)
	m.intrinsics[name] = f
	return f
}

var _ value.Value = (*llir.Global)(nil)

// FuncNamed returns the builder of the kernel or device function called
// name that the module already holds, or nil: for passes that add to
// finished functions (codegen's instrumentation).
func (m *Module) FuncNamed(name string) *Func {
	for _, f := range m.funcs {
		if f.IR.Name() == name {
			return f
		}
	}
	return nil
}

// AppendParam adds parameter p after f's last one and returns it (the
// llir parameter; its type is p.Type). Meant for kernels, whose callers
// are launchers: the calls of a device function are not updated. Tensor-
// map parameters keep their 1-based positions in the kernel's
// grid_constant annotation, so appending never moves one. Errors,
// recorded in the module (Finish returns them) with an undef i32 returned
// instead: p is a tensor map, p has no type, or f has a parameter named
// p.Name already.
func (f *Func) AppendParam(p Param) value.Value {
	if p.TensorMap || p.Type == nil {
		f.errorf("appended parameter %q: a typed, non-tensor-map parameter is required", p.Name)
		return constant.NewUndef(types.I32)
	}
	for _, q := range f.IR.Params {
		if q.Name() == p.Name {
			f.errorf("appended parameter %q: the function has one of that name", p.Name)
			return constant.NewUndef(types.I32)
		}
	}
	lp := llir.NewParam(p.Name, p.Type)
	f.IR.Params = append(f.IR.Params, lp)
	f.IR.Sig.Params = append(f.IR.Sig.Params, p.Type)
	f.params = append(f.params, p)
	return lp
}
