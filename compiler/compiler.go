package compiler

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// Version is the version of mokc's code generator, part of every manifest
// and of the runtime's compiled-module cache key.
const Version = "0.1.0"

// Artifact is one compiled layer.
type Artifact struct {
	Layer    schedule.Layer    // the layer compiled
	Schedule schedule.Schedule // the schedule it was compiled with
	Program  *codegen.Program  // launch plan and the LLVM IR module
	PTX      *ptx.Result       // PTX text and per-kernel metadata
	Manifest launch.Manifest   // launch manifest (the "manifest" stage)
	// Backward selects the backward program (moe.Backward) instead of the
	// forward (codegen.Build: moe.Forward).
	Backward bool
	// Timings holds the wall time of each stage, in stage order.
	Timings []StageTime
}

// StageTime is the wall time one stage took.
type StageTime struct {
	Stage string        `json:"stage"` // Stage.Name
	Time  time.Duration `json:"ns"`    // wall time of run and check (JSON: nanoseconds)
}

// Stage is one step of the pipeline: run transforms the artifact in place;
// check verifies what run produced.
type Stage struct {
	Name  string // "validate", "codegen", "ptx" or "manifest"
	run   func(*Artifact) error
	check func(*Artifact) error
}

// Stages is the pipeline, in order.
var Stages = []Stage{
	{"validate", func(a *Artifact) error { return a.Schedule.Validate(a.Layer) }, nil},
	{"codegen", func(a *Artifact) (err error) {
		if !a.Backward {
			a.Program, err = codegen.Build(a.Layer, a.Schedule)
			return err
		}
		p, err := moe.Backward(a.Layer)
		if err != nil {
			return err
		}
		a.Program, err = codegen.Lower(p, a.Schedule, codegen.LoweringOf(a.Schedule))
		return err
	}, func(a *Artifact) error { return ir.Check(a.Program.Module) }},
	{"ptx", func(a *Artifact) (err error) {
		a.PTX, err = ptx.CompileModule(a.Program.Module, a.Schedule.Target)
		return err
	}, checkPTX},
	{"manifest", buildManifest, nil},
}

// Compile runs every stage on layer l with schedule s: the forward.
func Compile(l schedule.Layer, s schedule.Schedule) (*Artifact, error) {
	return compile(&Artifact{Layer: l, Schedule: s})
}

// CompileBackward is Compile for the backward program (moe.Backward): its
// manifest has Pass "backward", dy among the inputs, dx and the
// routing-weight gradient among the outputs and the main grads as inout
// buffers.
func CompileBackward(l schedule.Layer, s schedule.Schedule) (*Artifact, error) {
	return compile(&Artifact{Layer: l, Schedule: s, Backward: true})
}

// compile runs every stage on a.
func compile(a *Artifact) (*Artifact, error) {
	l, s := a.Layer, a.Schedule
	fail := func(stage string, err error) error {
		repro, _ := reproduceCommand(l, s, a.Backward)
		return &StageError{Stage: stage, Layer: l.Name, Target: s.Target.String(), Reproduce: repro, Err: err}
	}
	for _, st := range Stages {
		t0 := time.Now()
		if err := st.run(a); err != nil {
			return nil, fail(st.Name, err)
		}
		if st.check != nil {
			if err := st.check(a); err != nil {
				return nil, fail(st.Name+" (check)", err)
			}
		}
		a.Timings = append(a.Timings, StageTime{st.Name, time.Since(t0)})
	}
	return a, nil
}

// CompileDefault compiles l for target with schedule.DefaultSchedule.
func CompileDefault(l schedule.Layer, target target.Target) (*Artifact, error) {
	s, err := schedule.DefaultSchedule(l, target)
	if err != nil {
		return nil, &StageError{Stage: "schedule", Layer: l.Name, Target: target.String(), Err: err}
	}
	return Compile(l, s)
}

// ReproduceCommand returns the `mokc build` command line that compiles l
// with s: the preset named l.Name (with --routing map for a routing-map
// layer, --storage per-expert for per-expert weights, --save-fc1 for a layer
// that keeps its FC1 output) and the schedule
// flags that turn the target's default schedule into s. ok is false when l
// is not a preset (an HF config or a layer built in Go) or when s differs
// from the default in a way the flags cannot say.
func ReproduceCommand(l schedule.Layer, s schedule.Schedule) (cmd string, ok bool) {
	return reproduceCommand(l, s, false)
}

// reproduceCommand is ReproduceCommand for the forward or, with backward,
// the backward: then with --backward, and --main-grad bf16 and --wgrad
// where l and s have them (--save-fc1, --group-m, --mx-gemm, --gather,
// --cluster, --chain and --items in either).
func reproduceCommand(l schedule.Layer, s schedule.Schedule, backward bool) (cmd string, ok bool) {
	p, err := schedule.Preset(l.Name)
	if err != nil {
		return "", false
	}
	p.Routing, p.Storage, p.SaveFC1, p.Precision = l.Routing, l.Storage, l.SaveFC1, l.Precision
	if backward {
		p.MainGrad = l.MainGrad
	}
	if p != l {
		return "", false
	}
	def, err := schedule.DefaultSchedule(l, s.Target)
	if err != nil {
		return "", false
	}
	args := []string{"mokc build --model " + l.Name, "--target " + s.Target.String()}
	if l.Precision == schedule.MXFP8 {
		args = append(args, "--precision mxfp8")
	}
	if l.Routing == schedule.RoutingMap {
		args = append(args, "--routing map")
	}
	if l.Storage == schedule.PerExpertWeights {
		args = append(args, "--storage per-expert")
	}
	if l.SaveFC1 {
		args = append(args, "--save-fc1")
	}
	if backward {
		args = append(args, "--backward")
		if l.MainGrad == schedule.GradBF16 {
			args = append(args, "--main-grad bf16")
		}
		if s.WGrad != def.WGrad {
			args = append(args, "--wgrad "+s.WGrad.String())
		}
	}
	// The walk of work items mokc takes without --items: the default's
	// where s's other settings allow it (schedule.FixedItemsWhereNeeded).
	items := def
	items.Cluster, items.Chain, items.BlocksPerSM, items.MXGemm = s.Cluster, s.Chain, s.BlocksPerSM, s.MXGemm
	items = items.FixedItemsWhereNeeded(l)
	// The flags that keep the GEMM variant, where s differs from the default.
	for _, f := range []struct {
		differs bool
		arg     string
	}{
		{s.GroupM != def.GroupM, fmt.Sprintf("--group-m %d", s.GroupM)},
		{s.MXGemm != def.MXGemm, "--mx-gemm " + s.MXGemm.String()},
		{s.Gather != def.Gather, "--gather " + s.Gather.String()},
		{s.Cluster != def.Cluster, fmt.Sprintf("--cluster %d", s.Cluster)},
		{s.Chain != def.Chain, "--chain " + s.Chain.String()},
		{s.Items != items.Items, "--items " + s.Items.String()},
		{s.BlocksPerSM != def.BlocksPerSM, fmt.Sprintf("--blocks-per-sm %d", s.BlocksPerSM)},
	} {
		if f.differs {
			args = append(args, f.arg)
		}
	}
	// Said by --wgrad, --group-m and --mx-gemm, which keep the GEMM variant
	// (but for expand) and take the kind's default tiles
	// (schedule.DefaultScheduleMX, as the flag applies it).
	if d, err := schedule.DefaultScheduleMX(l, s.Target, s.MXGemm); err == nil {
		def = d
	}
	asGiven := s
	s.WGrad, s.GroupM, s.Gather, s.Cluster, s.Chain, s.Items, s.BlocksPerSM = def.WGrad, def.GroupM, def.Gather, def.Cluster, def.Chain, def.Items, def.BlocksPerSM
	if s.FC2Large != def.FC2Large {
		if r, d := s.FC2Large, def.FC2Large; r.Set() && d.Set() && r.Tile == d.Tile {
			if r.MinRows != d.MinRows {
				n := "off"
				if r.MinRows > 0 {
					n = fmt.Sprint(r.MinRows)
				}
				args = append(args, "--fc2-large-min-rows "+n)
			}
			if r.MidRows != d.MidRows {
				args = append(args, "--fc2-large-mid-rows "+r.MidRows.String())
			}
			s.FC2Large = d
		} else if !r.Set() {
			// --chain, --cluster 2 and the like leave FC2Large out
			// (schedule.Schedule.FC2LargeWhereValid, as mokc's flags do);
			// --fc2-large-min-rows off --fc2-large-mid-rows off says so
			// where they do not.
			if asGiven.WithFC2LargeFrom(d.MinRows).WithFC2LargeMid(d.MidRows).FC2LargeWhereValid(l).FC2Large.Set() {
				args = append(args, "--fc2-large-min-rows off", "--fc2-large-mid-rows off")
			}
			s.FC2Large = d
		}
	}
	// --decode-max-rows: the default's decode tiles with other rows, or
	// off, where that is all that differs (the shape flags drop them too).
	if d, dd := s.Decode, def.Decode; dd != nil && (d == nil || *d != *dd) {
		with := s
		with.Decode = dd
		rows := *dd // the default's tiles with d's rows
		n := "off"
		if d != nil {
			rows.MaxRows, n = d.MaxRows, fmt.Sprint(d.MaxRows)
		}
		if sameSchedule(with, def) && (d == nil || rows == *d) {
			args = append(args, "--decode-max-rows "+n)
			s = with
		}
	}
	if !sameSchedule(s, def) {
		// Any schedule flag drops the default's GEMM variant; the flags set
		// the rest.
		custom := def
		custom.Variant, custom.Decode, custom.FC2Large = nil, nil, schedule.LargeRowsTile{}
		custom.FC1, custom.FC2, custom.Stages, custom.Warps.MMA, custom.GridCTAs = s.FC1, s.FC2, s.Stages, s.Warps.MMA, s.GridCTAs
		if !sameSchedule(custom, s) {
			return "", false
		}
		args = append(args, "--fc1-tile "+s.FC1.String(), "--fc2-tile "+s.FC2.String(),
			fmt.Sprintf("--stages %d", s.Stages), fmt.Sprintf("--mma-warps %d", s.Warps.MMA))
		if s.GridCTAs != 0 {
			args = append(args, fmt.Sprintf("--grid-ctas %d", s.GridCTAs))
		}
	}
	return strings.Join(append(args, "--emit llvm"), " "), true
}

// sameSchedule compares two schedules by value (the GEMM variant and the
// decode tiles too).
func sameSchedule(a, b schedule.Schedule) bool {
	same := func(x, y *schedule.TileVariant) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	va, vb, da, db := a.Variant, b.Variant, a.Decode, b.Decode
	a.Variant, b.Variant, a.Decode, b.Decode = nil, nil, nil, nil
	return a == b && same(va, vb) && same(da, db)
}

// StageError reports the stage that failed and, where one exists, a
// command reproducing it (ReproduceCommand).
type StageError struct {
	Stage     string // Stage.Name (plus " (check)" when its check failed), or "schedule"
	Layer     string // schedule.Layer.Name
	Target    string // "sm_80", "sm_90a" or "sm_100a"
	Reproduce string // a `mokc build` command line, or "" when none reproduces it
	Err       error  // the stage's own error
}

// Error names the stage and, when there is one, a reproducing command.
func (e *StageError) Error() string {
	msg := fmt.Sprintf("%s stage: %v", e.Stage, e.Err)
	if e.Reproduce != "" {
		msg += " (reproduce: " + e.Reproduce + ")"
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

// manifestNotes returns the launch contract that the tables do not spell
// out, for the features the program uses.
func manifestNotes(p *codegen.Program) []string {
	var tokens, perSM, coResident, tmaps, programmatic, cluster, blocksPerSM bool
	for _, k := range p.Kernels {
		tokens = tokens || len(k.Tokens) > 0
		cluster = cluster || k.Cluster > 1
		blocksPerSM = blocksPerSM || k.BlocksPerSM > 1
		perSM = perSM || k.GridPerSM
		coResident = coResident || k.CoResident
		programmatic = programmatic || k.Programmatic
		for _, prm := range k.Params {
			tmaps = tmaps || prm.Type == launch.ParamTmap
		}
	}
	notes := []string{
		"The router is not part of the kernels: the caller provides the routing (" + moe.BufIDs + " [T,K] int32 with -1 for no route and " + moe.BufWeights +
			" [T,K] f32, or " + moe.BufRoutingMap + " [T,E] u8 and " + moe.BufProbs + " [T,E] f32).",
		"Launch the kernels in order on one stream; kernels with skip_if_zero_t are not launched when T = 0; no host synchronisation is needed between them.",
	}
	if tokens {
		notes = append(notes, "A kernel with tokens is launched only when T lies in one of its inclusive [min, max] ranges: kernels that replace one another by T carry ranges that partition the T they serve, so exactly one of each group runs (the variants of one GEMM, same name up to a suffix such as _mid, tuned for different rows per expert, at each T >= 1; moe_dispatch_small (few tokens), the four routing kernels or moe_dispatch (past 8192 routed slots), at each T >= 0; moe_quantize_h where the FC1 variant does not write h's quantized form itself; on sm_90a mxfp8, moe_gather / moe_gather_rf, moe_quantize_xs / moe_quantize_xs_rf and the decode FC1 / moe_quantize_h_rf, which write the quantized rows in the form of the GEMMs of their T range: e4m3 with scales for the decode variant, bf16 MXFP8 values for the register-fed GEMMs); max 2147483647 means no upper limit.")
	}
	if programmatic {
		notes = append(notes, "A kernel with programmatic begins with griddepcontrol.wait: it may be launched with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1 (cuLaunchKernelEx), so that its launch overlaps the previous kernel, which it waits for before any memory access; a plain launch is correct too.")
	}
	if perSM {
		note := "A kernel with grid_per_sm is a persistent GEMM whose grid[0] is one block per SM of the target's reference part (blocks_per_sm per SM where set): launch one block per SM of the device instead (blocks_per_sm where set; it strides over its tiles by gridDim.x, so any grid is correct"
		if coResident {
			note += ", except for a kernel with co_resident: at most one block per SM"
		}
		notes = append(notes, note+").")
	}
	if cluster {
		notes = append(notes, "A kernel with cluster declares its thread-block cluster in the PTX (.reqnctapercluster): launch it as any other (no cluster attribute is needed), with grid[0] a multiple of cluster (for grid_per_sm, the device's SM count rounded down to one, and no more clusters than cuOccupancyMaxActiveClusters gives: more are correct but start only as others end). The sm_90a routed GEMMs built with cluster 2 walk their work items in CTA pairs that share each row tile's A rows by TMA multicast.")
	}
	if blocksPerSM {
		notes = append(notes, "A kernel with blocks_per_sm is built for that many blocks resident on each SM at once (its .maxnreg and shared memory are within that share): set its CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT to 100 and launch blocks_per_sm blocks per SM of the device; where cuOccupancyMaxActiveBlocksPerMultiprocessor gives fewer, the results are still correct but the kernel runs one block per SM (the Go runtime refuses such a device).")
	}
	if coResident {
		notes = append(notes, "A kernel with co_resident (moe_fc1_fc2 and its other forms: the routed FC1 and FC2 in one kernel, whose phases name its FC1 and FC2 items for the phase_times records) has blocks that wait for one another's work: launch it with at most one block per SM of the device, all resident at once (the Go runtime launches one per SM, rounded down to whole clusters that can all be resident for a kernel with cluster; never the reference part's grid[0] on a device with fewer SMs), with no other work holding an SM until it ends. Its parameter wait_limit_ns bounds each wait (nanoseconds of %globaltimer; 0: no bound): a wait that lasts longer sets bit 2 (4) of both words of err (word 1 is not cleared by the next run: clear it after reading it) and the kernel ends with its outputs not valid instead of hanging.")
	}
	notes = append(notes,
		"A kernel whose shared_bytes exceed 48 KiB needs cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) first.",
		"Parameters are packed as param_layout gives (offset, size); params gives each one's kind (ptr: a buffer's device address; i32, i64, f32: a value, constant or a function of T; tmap: a tensor map).")
	if src := p.Source; src != nil {
		for _, b := range src.Buffers {
			if dt, shape, ok := src.TableEntry(b.Name); ok {
				notes = append(notes, fmt.Sprintf("%s (%s) is a u64 [E] table of device addresses, entry e that of expert e's own %s %v tensor (row-major, 16-byte aligned); the kernels read the table and the tensors behind it%s.",
					b.Name, b.Kind, dt, shape, map[bool]string{true: " and add to those tensors"}[b.Kind == launch.BufInOut]))
			}
			switch {
			case b.Name != moe.BufFC1Out:
			case b.Kind == moe.Scratch:
				notes = append(notes, "The scratch "+moe.BufFC1Out+" is the forward's saved state for the backward (the layer was built with --save-fc1): keep it, unchanged, from this forward until the backward of the same tokens, which reads it as its input "+moe.BufFC1Out+"; the next forward overwrites it.")
			default:
				notes = append(notes, "The input "+moe.BufFC1Out+" is the forward's saved state (built with --save-fc1): bind the forward's scratch "+moe.BufFC1Out+" of the same tokens, kept unchanged since that forward.")
			}
		}
	}
	if tmaps {
		notes = append(notes,
			"A tensor_map parameter is 128 bytes from cuTensorMapEncodeTiled over its buffer with the listed dims, strides, box and swizzle, interleave none, L2 promotion 256B, out-of-bounds fill zero, element strides all 1, re-encoded when T or the buffer address changes; dims and box are innermost first and stride_bytes are for dims 1...")
	}
	if p.Buffer(launch.BufWorkQueue) != nil {
		var users []string // the kernels taking it
		for _, k := range p.Kernels {
			if slices.ContainsFunc(k.Params, func(q codegen.Param) bool { return q.Buffer == launch.BufWorkQueue }) {
				users = append(users, k.Name)
			}
		}
		notes = append(notes, "The scratch "+launch.BufWorkQueue+" holds the work queues and dependency counters of "+strings.Join(users, ", ")+": zero it when the workspace is allocated; the kernels leave it zero after every run (a run that faults leaves it as it was: zero it again), so later runs and graph replays need nothing. Do not share it between workspaces that run at the same time.")
	}
	return append(notes,
		"Workspace buffers need no initialisation but where a note says otherwise; after the forward word 0 of the u32 [2] "+moe.BufErr+" buffer is 0 when the routing was valid (bit 0: an expert id out of range; bit 1: more than K routes in a routing-map row) and, in a program with co_resident kernels, every wait ended in time (bit 2: the outputs are not valid).",
		"Buffer shapes are outermost first (row-major); allocate bytes (an upper bound of the shape times the element size; at least 1 byte when it evaluates to 0) at a 16-byte aligned address (TMA and the 16-byte vector accesses need it); every element of "+moe.BufY+" is written by the forward.",
		"Every {a, b, d, min} (grids, shapes, bytes, scalar arguments) is evaluated as size_formula says.")
}

func buildManifest(a *Artifact) error {
	entries := map[string]ptx.KernelInfo{}
	for _, k := range a.PTX.Kernels {
		entries[k.Name] = k
	}
	m := launch.Manifest{
		Mokc: Version, SizeFormula: launch.SizeFormula, Notes: manifestNotes(a.Program),
		Layer: a.Layer.Name, Target: a.Schedule.Target.String(), PTXVersion: a.PTX.Version,
		Shape:   launch.ShapeOf(a.Layer),
		Buffers: a.Program.Buffers, Schedule: a.Schedule.String(),
	}
	if a.Backward {
		m.Pass = "backward"
		m.Notes = append(m.Notes, "This is the backward: "+moe.BufDY+" is the upstream gradient; the inout buffers are the caller's main grads (or, for per-expert storage, pointer tables of them), which the kernels add the weight gradients to (main += dW) and leave untouched for experts without routes; every element of "+moe.BufDX+" and of the routing-weight gradient is written.")
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
