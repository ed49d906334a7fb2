package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
)

// Layer is one MoE layer compiled for one target and loaded on a device:
// the executor of a compiled forward program (launch.Manifest). Forward
// queues the whole forward (routing, dispatch, the grouped GEMMs, the shared
// expert, combine) on a stream without host synchronisation; CheckErrors
// waits for it and reports the program's error word.
//
// The Layer owns its module, its workspace (the program's scratch buffers,
// sized from T and grown as needed) and its error word; the caller owns
// every tensor it binds (Bindings: the program's inputs and outputs, listed
// by Inputs and Outputs). A Layer may be used from several goroutines
// (calls are serialised), but its workspace is shared by all calls, so the
// forwards of one Layer must run in order on one stream: two Forwards queued
// on different streams may overlap on the device and race on the
// workspace. Use one Layer per stream for concurrency.
type Layer struct {
	ctx   *driver.Context
	layer schedule.Layer
	sched schedule.Schedule
	plan  *plan
	ptx   string
	mod   *driver.Module
	funcs []*driver.Function

	mu     sync.Mutex
	closed bool
	errPtr driver.DevicePtr // the error words, u32 [2] (launch.ErrBuffer; 16 bytes allocated)
	// plain: launch every kernel with cuLaunchKernel, without programmatic
	// stream serialization (LaunchPlainly).
	plain bool
	// deviceGrids is the grid of each persistent kernel whose grid the
	// device's occupancy sets (by index in the plan): in clusters
	// (clusterGrid) or of several blocks per SM (perSMGrid).
	deviceGrids map[int]int
	// gridOverride is the x-grid a test sets for a kernel (by index in
	// the plan; SetLaunchGrid in export_test.go), over any other.
	gridOverride map[int]int
	// waitLimit overrides the wait limit of the co-resident kernels
	// (launch.ParamWaitLimit, nanoseconds) when not nil (SetWaitLimit).
	waitLimit *int64
	// bwd is the backward program, loaded by the first Backward (nil
	// before): a Layer of its own (plan, module, workspace, error word).
	bwd *Layer
	// isBackward: this Layer is another's bwd, whose Backward runs (and
	// lays out the workspace of) this one's program.
	isBackward bool
	// saved is the forward's saved state (schedule.Layer.SaveFC1: the
	// scratch moe.BufFC1Out in the forward's workspace), shared with bwd,
	// which reads it; nil when the layer saves nothing.
	saved *savedState

	// workspace: one allocation holding every scratch buffer, laid out for
	// wsT tokens (valid for every T <= wsT: buffer sizes grow with T).
	ws      driver.DevicePtr
	wsBytes int
	wsT     int
	// graphs counts the graphs CaptureForward recorded: they replay the
	// workspace's addresses, so it can no longer grow.
	graphs int
	wsOff  []int // offset of each scratch buffer (by plan buffer index), -1 otherwise

	// launch cache: the arguments of the last Forward, reused while T and
	// every buffer address stay the same.
	lastT    int
	lastBind []driver.DevicePtr
	args     []*driver.Args // per kernel; nil for a kernel not launched at lastT
	tmaps    map[[2]int]tmapEntry
	// encode encodes a tensor map; nil means ly.ctx.EncodeTensorMapTiled (tests
	// of the argument packing substitute a pure-Go stand-in).
	encode func(driver.TensorMapDataType, int, driver.DevicePtr, []uint64, []uint64, []uint32, []uint32,
		driver.TensorMapInterleave, driver.TensorMapSwizzle, driver.TensorMapL2Promotion, driver.TensorMapOOBFill) ([driver.TensorMapBytes]byte, error)
}

// savedState is where the last Forward (or CaptureForward) left the state
// its Backward reads (the forward's scratch moe.BufFC1Out). It is guarded
// by the forward Layer's mu, which Backward holds around the backward's
// run. Replays of captured graphs are invisible to it: the Layer checks
// the T of the last Forward call, not what a replay wrote.
type savedState struct {
	ptr driver.DevicePtr // its address in the forward's workspace (0: none valid)
	T   int              // the T of that Forward
	// graphs counts the backward's captured graphs, which replay ptr: the
	// forward's workspace can no longer move (destroying such a graph does
	// not lift this, as for CaptureForward's graphs).
	graphs int
}

// tmapEntry is an encoded tensor map and what it was encoded for.
type tmapEntry struct {
	ptr     driver.DevicePtr
	dims    []uint64
	strides []uint64
	enc     [driver.TensorMapBytes]byte
}

// ErrLayerClosed is returned by the methods of a closed Layer.
var ErrLayerClosed = errors.New("mokc runtime: layer is closed")

// NewLayer compiles layer l with schedule s with package compiler (behind
// the compiled-module cache: in memory per process and on disk, see
// CacheDirEnv; the key is compiler.Version and the executable, l, s, the
// target and the driver version) and loads it on ctx as LoadLayer does,
// using the compiled manifest as it is (no JSON in between).
//
// Errors: an invalid layer or schedule (the FieldError of schedule), a
// target the device cannot run (see target.Target.RunsOn), compile errors
// (a *compiler.StageError, wrapped), and everything LoadLayer reports.
// Without the cuda build tag the error is driver.ErrNoCUDA.
func NewLayer(ctx *driver.Context, l schedule.Layer, s schedule.Schedule) (*Layer, error) {
	if err := preflight(ctx, l, s); err != nil {
		return nil, err
	}
	return compileAndLoad(ctx, l, s, false)
}

// compileAndLoad compiles the forward (or, with backward, the backward) of
// l with s behind the compiled-module cache and loads it on ctx.
func compileAndLoad(ctx *driver.Context, l schedule.Layer, s schedule.Schedule, backward bool) (*Layer, error) {
	drv, err := driver.DriverVersion()
	if err != nil {
		return nil, err
	}
	c, err := compileCached(l, s, drv, backward)
	if err != nil {
		return nil, err
	}
	p, err := newPlan(c.manifest, l)
	if err != nil {
		return nil, err
	}
	return load(ctx, l, s, c.ptx, p)
}

// preflight checks what NewLayer and LoadLayer can check before compiling or
// loading anything.
func preflight(ctx *driver.Context, l schedule.Layer, s schedule.Schedule) error {
	if _, err := driver.DeviceCount(); err != nil {
		return err // ErrNoCUDA without the cuda tag, ErrNoDevice without a GPU
	}
	if ctx == nil {
		return errors.New("mokc runtime: NewLayer: nil Context")
	}
	if err := l.Validate(); err != nil {
		return fmt.Errorf("mokc runtime: layer %s: %w", l.Name, err)
	}
	if err := s.Validate(l); err != nil {
		return fmt.Errorf("mokc runtime: layer %s: %w", l.Name, err)
	}
	if err := s.Target.RunsOn(ctx.Device().ComputeCapability()); err != nil {
		return fmt.Errorf("mokc runtime: %w", err)
	}
	return nil
}

// LoadLayer loads an already compiled layer: PTX text and its launch
// manifest (launch.Manifest as JSON, as written by `mokc build --emit
// manifest`), for layer l with schedule s. It decodes the manifest strictly
// (an unknown field is an error) and checks it against l and s, checks that
// the device's compute capability fits the target (target.Target.RunsOn),
// JIT-loads the module (a *driver.DriverError with ptxas's log on refusal),
// resolves every kernel, checks each kernel's block size against the
// registers the JIT gave it and its shared memory against the device's
// opt-in limit, raises the dynamic shared memory limit of the kernels that
// need more than the default 48 KiB, and allocates the error word. No
// workspace is allocated until the first Forward.
func LoadLayer(ctx *driver.Context, l schedule.Layer, s schedule.Schedule, ptx string, manifest []byte) (*Layer, error) {
	if err := preflight(ctx, l, s); err != nil {
		return nil, err
	}
	p, err := parsePlan(manifest, l)
	if err != nil {
		return nil, err
	}
	return load(ctx, l, s, ptx, p)
}

// load loads the PTX of plan p on ctx (the part of LoadLayer after the
// manifest is checked).
func load(ctx *driver.Context, l schedule.Layer, s schedule.Schedule, ptx string, p *plan) (*Layer, error) {
	if p.Target != s.Target.String() {
		return nil, fmt.Errorf("mokc runtime: layer %s: manifest is for %s, the schedule for %s", l.Name, p.Target, s.Target)
	}
	if !strings.Contains(ptx, ".target "+p.Target) {
		return nil, fmt.Errorf("mokc runtime: layer %s: the PTX has no \".target %s\" directive", l.Name, p.Target)
	}
	dev := ctx.Device()
	mod, err := ctx.LoadModule(ptx)
	if err != nil {
		return nil, fmt.Errorf("mokc runtime: layer %s (%s): %w", l.Name, p.Target, err)
	}
	ly := &Layer{ctx: ctx, layer: l, sched: s, plan: p, ptx: ptx, mod: mod, lastT: -1, tmaps: map[[2]int]tmapEntry{}}
	// The saved FC1 output: the forward's scratch, the backward's input,
	// exactly when the layer keeps it.
	pass, want := "forward", launch.BufScratch
	if p.Pass == "backward" {
		pass, want = p.Pass, launch.BufInput
	}
	i, has := p.bufIndex[moe.BufFC1Out]
	if has = has && p.Buffers[i].Kind == want; has != l.SaveFC1 {
		mod.Unload()
		return nil, fmt.Errorf("mokc runtime: layer %s: the %s manifest has the saved FC1 output (%s %s): %v, but schedule.Layer.SaveFC1 = %v (build with --save-fc1 exactly when the layer says so)", l.Name, pass, want, moe.BufFC1Out, has, l.SaveFC1)
	}
	if has && want == launch.BufScratch {
		ly.saved = &savedState{}
	}
	fail := func(err error) (*Layer, error) {
		mod.Unload()
		return nil, err
	}
	for _, k := range p.Kernels {
		f, err := mod.Function(k.Name)
		if err != nil {
			return fail(fmt.Errorf("mokc runtime: layer %s: kernel %s: %w", l.Name, k.Name, err))
		}
		attr, err := f.Attributes()
		if err != nil {
			return fail(err)
		}
		if k.Block > attr.MaxThreadsPerBlock {
			return fail(fmt.Errorf("mokc runtime: layer %s: kernel %s launches %d threads per block, but with %d registers per thread the device allows %d",
				l.Name, k.Name, k.Block, attr.NumRegs, attr.MaxThreadsPerBlock))
		}
		if total := k.SharedBytes + attr.StaticSharedBytes; total > dev.MaxSharedBytesPerBlockOptin {
			return fail(fmt.Errorf("mokc runtime: layer %s: kernel %s needs %d bytes of shared memory (%d dynamic + %d static); %s allows %d per block",
				l.Name, k.Name, total, k.SharedBytes, attr.StaticSharedBytes, dev.Name, dev.MaxSharedBytesPerBlockOptin))
		}
		if k.SharedBytes > attr.MaxDynamicSharedBytes {
			if err := f.SetMaxDynamicSharedBytes(k.SharedBytes); err != nil {
				return fail(fmt.Errorf("mokc runtime: layer %s: kernel %s: %w", l.Name, k.Name, err))
			}
		}
		if k.BlocksPerSM > 1 {
			// Several blocks per SM each need their share of its shared
			// memory: ask for the largest carveout.
			if err := f.SetPreferredSharedCarveout(100); err != nil {
				return fail(fmt.Errorf("mokc runtime: layer %s: kernel %s: %w", l.Name, k.Name, err))
			}
		}
		if k.GridPerSM && (k.Cluster > 1 || k.BlocksPerSM > 1) {
			grid := clusterGrid
			if k.Cluster <= 1 {
				grid = perSMGrid
			}
			g, err := grid(f, k, dev.SMCount)
			if err != nil {
				return fail(fmt.Errorf("mokc runtime: layer %s: kernel %s: %w", l.Name, k.Name, err))
			}
			if ly.deviceGrids == nil {
				ly.deviceGrids = map[int]int{}
			}
			ly.deviceGrids[len(ly.funcs)] = g
		}
		ly.funcs = append(ly.funcs, f)
	}
	if ly.errPtr, err = ctx.Alloc(16); err != nil {
		return fail(err)
	}
	if err := ctx.Memset(ly.errPtr, 0, 16); err != nil {
		ctx.Free(ly.errPtr)
		return fail(err)
	}
	return ly, nil
}

// clusterGrid is the grid of persistent kernel k (GridPerSM) built in
// clusters of k.Cluster blocks on a device of sms SMs: one block per SM,
// rounded down to whole clusters, and no more clusters than can be
// resident at once (driver.Function.MaxActiveClusters): a cluster past
// those would start only when another ends and run its items after
// everyone else's.
func clusterGrid(f *driver.Function, k launch.ManifestKernel, sms int) (int, error) {
	g := sms - sms%k.Cluster
	if g < k.Cluster {
		return 0, fmt.Errorf("%d SMs hold no cluster of %d blocks", sms, k.Cluster)
	}
	n, err := f.MaxActiveClusters(g, k.Block, k.SharedBytes, k.Cluster)
	if err != nil {
		return 0, err
	}
	if n < 1 {
		return 0, fmt.Errorf("no cluster of %d blocks of %d threads and %d bytes of shared memory fits the device", k.Cluster, k.Block, k.SharedBytes)
	}
	return min(g, n*k.Cluster), nil
}

// perSMGrid is the grid of persistent kernel k (GridPerSM) built for
// k.BlocksPerSM blocks per SM on a device of sms SMs: that many per SM.
// An error where fewer fit at once (driver.Function.MaxActiveBlocksPerSM,
// after the largest shared-memory carveout was asked for): the kernel
// would still be correct, but run as one block per SM of a kernel built
// for more, which is the schedule's choice to undo, not the runtime's.
func perSMGrid(f *driver.Function, k launch.ManifestKernel, sms int) (int, error) {
	n, err := f.MaxActiveBlocksPerSM(k.Block, k.SharedBytes)
	if err != nil {
		return 0, err
	}
	if n < k.BlocksPerSM {
		return 0, fmt.Errorf("built for %d blocks per SM, but %d of %d threads, %d bytes of shared memory and their registers fit an SM of this device: build it one per SM (no --blocks-per-sm; schedule.Schedule.BlocksPerSM)",
			k.BlocksPerSM, n, k.Block, k.SharedBytes)
	}
	return sms * k.BlocksPerSM, nil
}

// Layer returns the layer description the Layer was built for.
func (ly *Layer) Layer() schedule.Layer { return ly.layer }

// Schedule returns the schedule the Layer was built with.
func (ly *Layer) Schedule() schedule.Schedule { return ly.sched }

// PTX returns the loaded PTX text.
func (ly *Layer) PTX() string { return ly.ptx }

// InfoLog returns the JIT's verbose log of the module (registers, shared
// memory and spills per kernel).
func (ly *Layer) InfoLog() string { return ly.mod.InfoLog() }

// Kernels returns the kernel names in launch order.
func (ly *Layer) Kernels() []string {
	out := make([]string, len(ly.plan.Kernels))
	for i, k := range ly.plan.Kernels {
		out[i] = k.Name
	}
	return out
}

// ClusterGrids returns, by kernel name, the blocks each persistent kernel
// built in thread-block clusters (launch.Kernel.Cluster) is launched with
// on this device: one per SM in whole clusters, no more clusters than can
// be resident at once (driver.Function.MaxActiveClusters). Empty when no
// kernel has clusters.
func (ly *Layer) ClusterGrids() map[string]int {
	return ly.gridsWhere(func(k launch.ManifestKernel) bool { return k.Cluster > 1 })
}

// PerSMGrids returns, by kernel name, the blocks each persistent kernel
// built for several blocks per SM (launch.Kernel.BlocksPerSM) is launched
// with on this device: that many per SM (NewLayer fails where fewer fit at
// once: driver.Function.MaxActiveBlocksPerSM). Empty when no kernel is.
func (ly *Layer) PerSMGrids() map[string]int {
	return ly.gridsWhere(func(k launch.ManifestKernel) bool { return k.Cluster <= 1 && k.BlocksPerSM > 1 })
}

// gridsWhere is the device grids (deviceGrids) of the kernels for which
// keep holds, by name.
func (ly *Layer) gridsWhere(keep func(launch.ManifestKernel) bool) map[string]int {
	out := map[string]int{}
	for i, g := range ly.deviceGrids {
		if k := ly.plan.Kernels[i]; keep(k) {
			out[k.Name] = g
		}
	}
	return out
}

// Inputs returns the input buffers the caller binds (Bindings), in the
// manifest's order: activations, routing, weights.
func (ly *Layer) Inputs() []BufferSpec { return ly.plan.specs(launch.BufInput) }

// Outputs returns the output buffers the caller binds (Bindings); the error
// word is the Layer's own (CheckErrors).
func (ly *Layer) Outputs() []BufferSpec { return ly.plan.specs(launch.BufOutput) }

// WorkspaceBytes returns the bytes of device memory the workspaces hold
// now: the forward's (0 before the first Forward with T > 0) plus, once
// Backward has run, the backward program's.
func (ly *Layer) WorkspaceBytes() int {
	ly.mu.Lock()
	n, bwd := ly.wsBytes, ly.bwd
	ly.mu.Unlock()
	if bwd != nil {
		n += bwd.WorkspaceBytes()
	}
	return n
}

// WorkspaceBytesFor returns the workspace a Forward of T tokens needs: the
// program's scratch buffers at T, each rounded up to 256 bytes. Pure Go.
func (ly *Layer) WorkspaceBytesFor(T int) int {
	_, total := ly.plan.scratchLayout(T)
	return total
}

// scratchLayout returns the offset of each scratch buffer (-1 for the
// others) and the total bytes, for T tokens: each buffer gets
// max(1, Bytes(T)) bytes rounded up to 256 (cuMemAlloc's alignment).
func (p *plan) scratchLayout(T int) ([]int, int) {
	off := make([]int, len(p.Buffers))
	total := 0
	for i, b := range p.Buffers {
		off[i] = -1
		if b.Kind != launch.BufScratch {
			continue
		}
		n := max(b.Bytes.Eval(int64(T)), 1)
		off[i] = total
		total += int((n + 255) &^ 255)
	}
	return off, total
}

// grow makes the workspace hold the scratch buffers of T tokens. A larger
// workspace is laid out for max(T, 5/4 of the current size) tokens so that
// slowly growing T does not reallocate every call. Replacing the workspace
// synchronises the context first (forwards still running may use the old
// one): the only host synchronisation Forward ever does.
func (ly *Layer) grow(T int) error {
	if ly.ws != 0 && T <= ly.wsT {
		return nil
	}
	graphs := ly.graphs
	if _, w := ly.writesSaved(); w {
		graphs += ly.saved.graphs // the backward's graphs replay this workspace's saved state
	}
	if ly.ws != 0 && graphs > 0 {
		return fmt.Errorf("mokc runtime: layer %s: T = %d needs a larger workspace, but %d captured graph(s) replay the workspace of T <= %d: capture after the largest T (CaptureForward)", ly.layer.Name, T, graphs, ly.wsT)
	}
	newT := T
	if ly.ws != 0 {
		newT = max(T, ly.wsT+ly.wsT/4)
	}
	off, total := ly.plan.scratchLayout(newT)
	if ly.ws != 0 {
		if err := ly.ctx.Synchronize(); err != nil {
			return err
		}
		if err := ly.ctx.Free(ly.ws); err != nil {
			return err
		}
		ly.ws, ly.wsBytes, ly.wsT = 0, 0, 0
		ly.clearSaved() // it was in the old workspace
	}
	ws, err := ly.ctx.Alloc(total)
	if err != nil {
		return fmt.Errorf("mokc runtime: layer %s: workspace of %d bytes for T = %d: %w", ly.layer.Name, total, newT, err)
	}
	ly.ws, ly.wsBytes, ly.wsT, ly.wsOff = ws, total, newT, off
	ly.lastT = -1 // addresses changed
	if i, ok := ly.plan.bufIndex[launch.BufWorkQueue]; ok {
		// The work queues start at zero; the kernels leave them so.
		n := int(max(ly.plan.Buffers[i].Bytes.Eval(int64(newT)), 1))
		if err := ly.ctx.Memset(ly.ws.Offset(off[i]), 0, n); err != nil {
			return err
		}
	}
	if _, ok := ly.plan.bufIndex[launch.BufPhaseTimes]; ok {
		// The phase-time records start reset in every new workspace.
		ptr, n, err := ly.phaseBuffer()
		if err != nil {
			return err
		}
		return ly.ctx.CopyToDevice(ptr, ly.phaseResetImage(n))
	}
	return nil
}

// Forward queues the forward of the layer on stream (nil: the legacy
// default stream) for the tensors of b and returns without waiting: y =
// shared(x) + sum over the routed slots of w * expert(x), in bf16 (fp32
// accumulation). T, the token count, is the outermost dimension of the
// token input (Bindings). Every kernel of the program that runs at T is
// launched in order (launch.Kernel.RunsAt: a GEMM variant runs only in its
// token range), those marked launch.Kernel.Programmatic with programmatic
// stream serialization (each waits for the previous kernel at its first
// instruction, so its launch may overlap that kernel's run, as far as the
// previous kernel lets its dependents launch early: codegen/programmatic.go).
// T = 0 is valid
// and does nothing: no kernel runs and no tensor is read or written (null
// pointers are fine); only the error word is cleared.
//
// Forward validates every binding first against the manifest's buffers
// (every input and output bound and nothing else, dtype, shape at T, bytes,
// 16-byte alignment, an output overlapping another tensor) and returns an
// error naming the buffer before launching anything; a T above
// schedule.Schedule.MaxTokens is an error too. Launch errors (and
// asynchronous faults of earlier work) are returned as *driver.DriverError.
//
// Faults on the device and the program's error word (an expert id out of
// range, too many routes in a routing-map row) are reported by CheckErrors,
// which synchronises; Forward never does, except when the workspace grows
// (see Layer). Callers call CheckErrors when they want the verdict, e.g.
// once after a batch of Forwards.
func (ly *Layer) Forward(stream *driver.Stream, b Bindings) error {
	return ly.forward(stream, b, nil)
}

// ForwardMarked is Forward timing each kernel: marks holds
// len(Layer.Kernels())+1 events (another count is an error before any
// launch), and marks[i] is recorded on stream before kernel i and the last
// one after the last kernel, so driver.ElapsedMs(marks[i], marks[i+1]) is
// kernel i's time in milliseconds, launch gap included (about 0 for a
// kernel that does not run at this T). At T = 0 no event is recorded.
// Recording costs a few microseconds per kernel; use Forward when timing
// the whole forward.
func (ly *Layer) ForwardMarked(stream *driver.Stream, b Bindings, marks []*driver.Event) error {
	if marks == nil {
		marks = []*driver.Event{}
	}
	return ly.forward(stream, b, marks)
}

// CaptureForward records the forward of the tensors of b on stream (a
// stream of driver.Context.NewStream, not nil) into a CUDA graph and
// returns it instead of running it: each Graph.Launch replays that forward
// of the same T on the same buffers, so a training or serving loop writes
// new inputs into b's tensors and replays (the results are those of
// Forward, bit for bit). The workspace is grown and the arguments packed
// before the capture (nothing is allocated inside it), and from then on
// the workspace cannot grow (a Forward of more tokens than any captured
// one is an error): capture the largest T first. The graph holds the
// Layer's addresses: Destroy the graph before closing the Layer.
// CheckErrors reads the error word of the last replay like a Forward's.
// Errors: those of Forward, and of the capture.
func (ly *Layer) CaptureForward(stream *driver.Stream, b Bindings) (*driver.Graph, error) {
	if stream == nil {
		return nil, errors.New("mokc runtime: CaptureForward needs a stream of its own (the default stream cannot be captured)")
	}
	ly.mu.Lock()
	defer ly.mu.Unlock()
	T, err := ly.prepare(b, nil)
	if err != nil {
		return nil, err
	}
	if err := stream.BeginCapture(); err != nil {
		return nil, fmt.Errorf("mokc runtime: layer %s: %w", ly.layer.Name, err)
	}
	runErr := ly.run(stream, T, nil)
	g, err := stream.EndCapture()
	if runErr != nil || err != nil {
		if g != nil {
			g.Destroy()
		}
		return nil, fmt.Errorf("mokc runtime: layer %s: capturing the forward: %w", ly.layer.Name, errors.Join(runErr, err))
	}
	ly.graphs++
	if _, w := ly.writesSaved(); ly.saved != nil && !w && T > 0 {
		ly.saved.graphs++ // a backward's graph replays the forward's saved state
	}
	ly.recordSaved(T) // the capture counts as the last Forward (its replays write the state)
	return g, nil
}

// forward is Forward, recording marks when marks is not nil.
func (ly *Layer) forward(stream *driver.Stream, b Bindings, marks []*driver.Event) error {
	ly.mu.Lock()
	defer ly.mu.Unlock()
	T, err := ly.prepare(b, marks)
	if err != nil {
		return err
	}
	ly.clearSaved() // this Forward overwrites it (and, failing, may spoil it)
	if err := ly.run(stream, T, marks); err != nil {
		return err
	}
	ly.recordSaved(T)
	return nil
}

// recordSaved notes, after a Forward of T tokens was queued (or captured),
// where it leaves the saved state for the Backward (nothing for T = 0).
func (ly *Layer) recordSaved(T int) {
	if i, ok := ly.writesSaved(); ok && T > 0 {
		ly.saved.ptr, ly.saved.T = ly.ws.Offset(ly.wsOff[i]), T
	}
}

// clearSaved forgets the forward's saved state (no Backward may read it).
func (ly *Layer) clearSaved() {
	if _, ok := ly.writesSaved(); ok {
		ly.saved.ptr, ly.saved.T = 0, 0
	}
}

// prepare checks the bindings b and marks, grows the workspace and packs
// the kernels' arguments for their T, which it returns. Called with ly.mu
// held.
func (ly *Layer) prepare(b Bindings, marks []*driver.Event) (int, error) {
	if ly.closed {
		return 0, ErrLayerClosed
	}
	p := ly.plan
	T, bind, err := p.bind(b)
	if err != nil {
		return 0, err
	}
	if limit := ly.sched.MaxTokens(ly.layer); T > limit {
		return 0, fmt.Errorf("mokc runtime: layer %s: T = %d: more than the %d tokens the kernels index in 32 bits (schedule.Schedule.MaxTokens)", ly.layer.Name, T, limit)
	}
	if T == 0 {
		return 0, nil
	}
	if marks != nil && len(marks) != len(p.Kernels)+1 {
		return 0, fmt.Errorf("mokc runtime: Forward (%s): %d marks, want %d (one per kernel and one after the last)",
			ly.layer.Name, len(marks), len(p.Kernels)+1)
	}
	if err := ly.grow(T); err != nil {
		return 0, err
	}
	if err := ly.bindOwn(bind, T); err != nil {
		return 0, err
	}
	if T != ly.lastT || !slices.Equal(bind, ly.lastBind) {
		if err := ly.buildArgs(T, bind); err != nil {
			return 0, err
		}
	}
	return T, nil
}

// run queues the forward prepare made ready for T on stream: at T = 0
// only the error word is cleared (nothing to compute: no launch, no
// workspace), as the program's first kernel does, so CheckErrors reports
// this (empty) forward; otherwise every kernel (launch).
func (ly *Layer) run(stream *driver.Stream, T int, marks []*driver.Event) error {
	if T == 0 {
		if err := ly.ctx.MemsetAsync(ly.errPtr, 0, 4, stream); err != nil {
			return fmt.Errorf("mokc runtime: layer %s: T = 0: %w", ly.layer.Name, err)
		}
		return nil
	}
	return ly.launch(stream, T, marks)
}

// launch launches every kernel that runs at T with the packed arguments,
// recording marks (when not nil) around them.
func (ly *Layer) launch(stream *driver.Stream, T int, marks []*driver.Event) error {
	mark := func(i int) error {
		if marks == nil {
			return nil
		}
		if err := marks[i].Record(stream); err != nil {
			return fmt.Errorf("mokc runtime: layer %s: mark %d: %w", ly.layer.Name, i, err)
		}
		return nil
	}
	for i, k := range ly.plan.Kernels {
		if err := mark(i); err != nil {
			return err
		}
		a := ly.args[i]
		if a == nil {
			continue
		}
		grid := driver.Dim3{X: int(k.Grid[0].Eval(int64(T))), Y: int(k.Grid[1].Eval(int64(T))), Z: int(k.Grid[2].Eval(int64(T)))}
		if sms := ly.ctx.Device().SMCount; k.GridPerSM && sms > 0 {
			grid.X = sms // one block per SM of this device
		}
		if g, ok := ly.deviceGrids[i]; ok {
			grid.X = g // whole clusters, all resident at once; or BlocksPerSM per SM
		}
		if g, ok := ly.gridOverride[i]; ok {
			grid.X = g
		}
		cfg := driver.LaunchConfig{Grid: grid, Block: driver.Dim3{X: k.Block}, SharedBytes: k.SharedBytes, Stream: stream}
		var err error
		if k.Programmatic && !ly.plain {
			cfg.Programmatic = true
			err = ly.funcs[i].LaunchEx(cfg, a)
		} else {
			err = ly.funcs[i].Launch(cfg.Grid, cfg.Block, cfg.SharedBytes, stream, a)
		}
		if err != nil {
			return fmt.Errorf("mokc runtime: layer %s: T = %d: %w", ly.layer.Name, T, err)
		}
	}
	return mark(len(ly.plan.Kernels))
}

// bindOwn fills the addresses of the buffers the Layer owns for a run of T
// tokens: the error word, the scratch buffers in the workspace and, for a
// backward, the saved state of the last Forward (an error when that
// Forward had another T, or none left one).
func (ly *Layer) bindOwn(bind []driver.DevicePtr, T int) error {
	for i, b := range ly.plan.Buffers {
		switch {
		case b.Name == launch.ErrBuffer:
			bind[i] = ly.errPtr
		case b.Kind == launch.BufScratch:
			bind[i] = ly.ws.Offset(ly.wsOff[i])
		case isSaved(b):
			s := ly.saved
			switch {
			case s.ptr == 0:
				return fmt.Errorf("mokc runtime: Backward (%s): T = %d, but no Forward has left its FC1 output (schedule.Layer.SaveFC1: the Backward reads the last Forward's; run the Forward of these tokens first)", ly.layer.Name, T)
			case s.T != T:
				return fmt.Errorf("mokc runtime: Backward (%s): T = %d, but the saved FC1 output (schedule.Layer.SaveFC1) is that of the last Forward, of T = %d: run the Forward of these tokens first", ly.layer.Name, T, s.T)
			}
			bind[i] = s.ptr
		}
	}
	return nil
}

// writesSaved returns the index of the saved state moe.BufFC1Out in ly's
// plan when ly's program writes it (a forward with SaveFC1: its scratch).
func (ly *Layer) writesSaved() (int, bool) {
	i, ok := ly.plan.bufIndex[moe.BufFC1Out]
	return i, ok && ly.plan.Buffers[i].Kind == launch.BufScratch
}

// buildArgs packs every launched kernel's arguments for T tokens and the
// buffer addresses bind, encoding tensor maps whose address or extents
// changed.
func (ly *Layer) buildArgs(T int, bind []driver.DevicePtr) error {
	p := ly.plan
	sizes := ly.bufferBytes(T)
	ly.args = make([]*driver.Args, len(p.Kernels))
	for i, k := range p.Kernels {
		if !k.RunsAt(int64(T)) {
			continue
		}
		a := driver.NewArgs()
		for j, prm := range k.Params {
			switch prm.Type {
			case launch.ParamPtr:
				a.Ptr(bind[p.bufIndex[prm.Buffer]])
			case launch.ParamI32:
				a.I32(int32(prm.Value.Eval(int64(T))))
			case launch.ParamI64:
				v := prm.Value.Eval(int64(T))
				if prm.Name == launch.ParamWaitLimit && ly.waitLimit != nil {
					v = *ly.waitLimit
				}
				a.I64(v)
			case launch.ParamTmap:
				bi := p.bufIndex[prm.Buffer]
				enc, err := ly.tensorMap([2]int{i, j}, prm, bind[bi], sizes[bi], T)
				if err != nil {
					return fmt.Errorf("mokc runtime: layer %s: kernel %s parameter %s (buffer %s): %w", ly.layer.Name, k.Name, prm.Name, prm.Buffer, err)
				}
				a.Bytes(enc[:])
			default:
				return fmt.Errorf("mokc runtime: layer %s: kernel %s parameter %s: type %q", ly.layer.Name, k.Name, prm.Name, prm.Type)
			}
		}
		ly.args[i] = a
	}
	ly.lastT, ly.lastBind = T, bind
	return nil
}

// bufferBytes returns the bytes each buffer is known to hold at T: the
// shape's bytes for caller buffers (what Forward validated), the allocated
// bytes for scratch buffers and the error word.
func (ly *Layer) bufferBytes(T int) []int64 {
	p := ly.plan
	out := make([]int64, len(p.Buffers))
	for i, b := range p.Buffers {
		switch {
		case b.Name == launch.ErrBuffer:
			out[i] = 16
		case b.Kind == launch.BufScratch:
			out[i] = max(b.Bytes.Eval(int64(T)), 1)
		default:
			n := DType(b.DType).Size()
			for _, e := range b.Shape {
				n *= e.Eval(int64(T))
			}
			out[i] = n
		}
	}
	return out
}

// tensorMap returns the encoded tensor map of parameter prm over the buffer
// at ptr (bufBytes long) at T tokens, from the cache when nothing changed.
func (ly *Layer) tensorMap(key [2]int, prm launch.Param, ptr driver.DevicePtr, bufBytes int64, T int) ([driver.TensorMapBytes]byte, error) {
	dtype, dims, strides, box, swz, err := tensorMapArgs(prm.TensorMap, ptr, bufBytes, T)
	if err != nil {
		return [driver.TensorMapBytes]byte{}, err
	}
	if e, ok := ly.tmaps[key]; ok && e.ptr == ptr && slices.Equal(e.dims, dims) && slices.Equal(e.strides, strides) {
		return e.enc, nil
	}
	encode := ly.encode
	if encode == nil {
		encode = ly.ctx.EncodeTensorMapTiled
	}
	enc, err := encode(dtype, len(dims), ptr, dims, strides, box, nil,
		driver.InterleaveNone, swz, driver.L2Promotion256B, driver.OOBFillZero)
	if err != nil {
		return enc, err
	}
	ly.tmaps[key] = tmapEntry{ptr: ptr, dims: dims, strides: strides, enc: enc}
	return enc, nil
}

// tensorMapArgs evaluates a tensor map description at T and checks it
// (CheckTensorMapTiled, and that the mapped extent lies inside the buffer's
// bufBytes so TMA can never read or write past it). Pure Go.
func tensorMapArgs(tm *launch.TensorMap, ptr driver.DevicePtr, bufBytes int64, T int) (driver.TensorMapDataType, []uint64, []uint64, []uint32, driver.TensorMapSwizzle, error) {
	dtype, err := tensorMapDType(tm.DType)
	if err != nil {
		return 0, nil, nil, nil, 0, err
	}
	swz, err := driver.SwizzleOfBytes(tm.Swizzle)
	if err != nil {
		return 0, nil, nil, nil, 0, err
	}
	dims, err := evalPositive(tm.Dims, T, "dimension %d is %d")
	if err != nil {
		return 0, nil, nil, nil, 0, err
	}
	strides, err := evalPositive(tm.StrideBytes, T, "stride %d is %d bytes")
	if err != nil {
		return 0, nil, nil, nil, 0, err
	}
	box := make([]uint32, len(tm.Box))
	for i, b := range tm.Box {
		box[i] = uint32(b)
	}
	if err := driver.CheckTensorMapTiled(dtype, len(dims), ptr, dims, strides, box, nil,
		driver.InterleaveNone, swz, driver.L2Promotion256B, driver.OOBFillZero); err != nil {
		return 0, nil, nil, nil, 0, err
	}
	// The last byte addressed is sum (dims[i]-1)*stride[i] over the outer
	// dimensions plus the innermost row.
	extent := dims[0] * uint64(dtype.Size())
	for i, s := range strides {
		extent += (dims[i+1] - 1) * s
	}
	if extent > uint64(bufBytes) {
		return 0, nil, nil, nil, 0, fmt.Errorf("tensor map spans %d bytes (dims %v, strides %v) but the buffer holds %d at T = %d", extent, dims, strides, bufBytes, T)
	}
	return dtype, dims, strides, box, swz, nil
}

// evalPositive evaluates each of es at T; a value <= 0 is an error
// "tensor map " + what (formatted with the index and the value) + " at T".
func evalPositive(es []launch.Expr, T int, what string) ([]uint64, error) {
	out := make([]uint64, len(es))
	for i, e := range es {
		v := e.Eval(int64(T))
		if v <= 0 {
			return nil, fmt.Errorf("tensor map "+what+" at T = %d", i, v, T)
		}
		out[i] = uint64(v)
	}
	return out, nil
}

// Backward queues the backward of the layer (moe.Backward) on stream (nil:
// the legacy default stream) for the tensors of b and returns without
// waiting. From the forward's inputs (the same x, routing and weights,
// bound under the same names) and the upstream gradient dy bf16 [T,H] it
// writes dx bf16 [T,H] and the routing-weight gradient (dw f32 [T,K], or
// dprobs f32 [T,E] with a routing map) and adds the weight gradients to the
// caller's main grads (the inout buffers fc1_grad, fc2_grad, ...: main +=
// dW in f32, or bf16 after schedule.Layer.MainGrad; an expert without
// routes is not touched). BackwardBuffers lists every buffer to bind;
// AllocMainGrads allocates the main grads in their forms.
//
// With per-expert weight storage (schedule.PerExpertWeights) the weights
// are bound as in Forward (fc1_table, fc2_table) and the routed main grads
// are per expert too: fc1_grad_table and fc2_grad_table, u64 [E] device
// tables whose entry e is the address of the caller's allocation of expert
// e's main grad, [2I,H] resp. [H,I] in the main-grad dtype, 16-byte
// aligned; the biases' and the shared experts' main grads stay grouped.
// Backward checks the tables as it checks every binding (u64, [E], bytes,
// alignment, overlap); it cannot check what their entries point at (that
// is device memory, read by the kernels only), so an entry must hold a
// valid allocation of that size and dtype, distinct from every other
// tensor, for every expert that has routes (an entry of an expert without
// routes is not read).
//
// By default nothing is kept from Forward: the backward re-dispatches the
// tokens and recomputes FC1 (moe.Backward's saved-state policy), so Forward
// and Backward may run in any order and a training step is Forward, then
// Backward on the same bindings plus dy, dx, dw and the main grads. With
// schedule.Layer.SaveFC1 the Forward leaves the routed FC1 output in its
// workspace (8·K·I bytes per token) and Backward reads it there instead of
// recomputing FC1 (the same results): Backward must then follow the Forward
// of the same tokens, on the same stream, before the next Forward (a
// Backward of another T than the last Forward's is an error; the Layer
// cannot see whether the inputs changed), and once a Backward is captured
// (CaptureBackward) the forward's workspace can no longer grow. The
// first call compiles the backward (package compiler, cached as NewLayer's
// forward is) and loads it; it has a workspace of its own. Binding errors
// name the buffer before any launch, as Forward's do; CheckErrors reports
// device faults and the routing errors the backward finds. Every reduction
// runs in a fixed order: repeated calls give the same bits.
func (ly *Layer) Backward(stream *driver.Stream, b Bindings) error {
	return ly.withBackward(func(bwd *Layer) error { return bwd.forward(stream, b, nil) })
}

// withBackward runs f on the backward program's Layer (compiled and loaded
// on the first call); when the backward reads the forward's saved state,
// with the forward's lock held, so that no Forward moves or overwrites that
// state while the backward binds and queues (or captures) its kernels.
func (ly *Layer) withBackward(f func(bwd *Layer) error) error {
	bwd, err := ly.backward()
	if err != nil {
		return err
	}
	if ly.saved != nil {
		ly.mu.Lock()
		defer ly.mu.Unlock()
		if ly.closed {
			return ErrLayerClosed
		}
	}
	return f(bwd)
}

// CaptureBackward is CaptureForward for the backward (the bindings of
// Backward): each replay of the graph is one Backward on the same buffers,
// the main grads accumulating as they do. The backward program is compiled
// and loaded first when Backward has not run yet. With
// schedule.Layer.SaveFC1 the capture needs a Forward or CaptureForward of
// the same T before it (as Backward does), and each replay reads the saved
// FC1 output where the forward's workspace holds it: replay it after a
// Forward, or a replay of the captured forward, of the same tokens (the
// Layer cannot check replays). From then on the forward's workspace cannot
// grow.
func (ly *Layer) CaptureBackward(stream *driver.Stream, b Bindings) (*driver.Graph, error) {
	var g *driver.Graph
	err := ly.withBackward(func(bwd *Layer) (err error) {
		g, err = bwd.CaptureForward(stream, b)
		return err
	})
	return g, err
}

// BackwardMarked is Backward timing each kernel, as ForwardMarked does for
// Forward: marks holds len(BackwardKernels())+1 events.
func (ly *Layer) BackwardMarked(stream *driver.Stream, b Bindings, marks []*driver.Event) error {
	return ly.withBackward(func(bwd *Layer) error { return bwd.ForwardMarked(stream, b, marks) })
}

// BackwardKernels returns the backward's kernel names in launch order,
// compiling and loading the backward when Backward has not run yet.
func (ly *Layer) BackwardKernels() ([]string, error) {
	bwd, err := ly.backward()
	if err != nil {
		return nil, err
	}
	return bwd.Kernels(), nil
}

// BackwardBuffers returns the buffers Backward binds, in the manifest's
// order: inputs (the forward's and dy), outputs (dx, dw or dprobs) and the
// main grads (Kind launch.BufInOut; with per-expert storage the routed
// ones are the u64 [E] pointer tables fc1_grad_table and fc2_grad_table,
// see Backward). It compiles and loads the backward when Backward has not
// run yet.
func (ly *Layer) BackwardBuffers() ([]BufferSpec, error) {
	bwd, err := ly.backward()
	if err != nil {
		return nil, err
	}
	var out []BufferSpec
	for _, k := range []launch.BufferKind{launch.BufInput, launch.BufOutput, launch.BufInOut} {
		out = append(out, bwd.plan.specs(k)...)
	}
	return out, nil
}

// backward returns the backward program's Layer, compiling and loading it
// on the first call.
func (ly *Layer) backward() (*Layer, error) {
	ly.mu.Lock()
	defer ly.mu.Unlock()
	if ly.closed {
		return nil, ErrLayerClosed
	}
	if ly.bwd != nil {
		return ly.bwd, nil
	}
	bwd, err := compileAndLoad(ly.ctx, ly.layer, ly.sched, true)
	if err != nil {
		return nil, err
	}
	bwd.saved = ly.saved // nil unless the layer saves FC1 (load checked both plans against it)
	bwd.plain, bwd.waitLimit, bwd.isBackward = ly.plain, ly.waitLimit, true
	ly.bwd = bwd
	return bwd, nil
}

// LaunchPlainly makes the layer launch every kernel with cuLaunchKernel,
// without the programmatic stream serialization its plan allows
// (launch.Kernel.Programmatic), from the next Forward or Backward on, and
// in the graphs captured from then on (graphs captured before keep their
// launches): for tools that do not follow programmatic launches, and to
// measure what they save. The results are the same.
func (ly *Layer) LaunchPlainly() {
	ly.mu.Lock()
	defer ly.mu.Unlock()
	ly.plain = true
	if bwd := ly.bwd; bwd != nil { // the lock order of withBackward: ly.mu, then bwd.mu
		bwd.mu.Lock()
		bwd.plain = true
		bwd.mu.Unlock()
	}
}

// SetWaitLimit sets how long one wait of a co-resident kernel
// (launch.Kernel.CoResident: a block waiting for another block's work)
// may last before it gives up, the run's outputs then not valid and
// CheckErrors returning a *WaitTimeoutError (launch.ErrWaitTimeout), from
// the next Forward or Backward on and in
// the graphs captured from then on; 0 waits without limit. The default is
// the manifest's (launch.DefaultWaitLimitNs, 10 s). Raise it for tools
// that slow a kernel by more than that (compute-sanitizer's racecheck on
// a large T). Errors: a negative d.
func (ly *Layer) SetWaitLimit(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("mokc runtime: layer %s: wait limit %v: must be >= 0 (0: no limit)", ly.layer.Name, d)
	}
	ly.mu.Lock()
	defer ly.mu.Unlock()
	ns := d.Nanoseconds()
	ly.waitLimit, ly.lastBind = &ns, nil // pack the arguments again
	if bwd := ly.bwd; bwd != nil {       // the lock order of withBackward: ly.mu, then bwd.mu
		bwd.mu.Lock()
		bwd.waitLimit, bwd.lastBind = &ns, nil
		bwd.mu.Unlock()
	}
	return nil
}

// takeWord reads the error words (launch.ErrBuffer: the last run's, and
// the timeouts of every run since the last take) and clears them when
// they are not 0 (the context has been synchronised); it returns their OR.
func (ly *Layer) takeWord() (uint32, error) {
	var word [2]uint32
	if err := ly.ctx.CopyFromDevice(word[:], ly.errPtr); err != nil {
		return 0, err
	}
	if word[0]|word[1] != 0 {
		if err := ly.ctx.Memset(ly.errPtr, 0, 8); err != nil {
			return 0, err
		}
	}
	return word[0] | word[1], nil
}

// CheckErrors waits for the work queued on stream (nil: the whole context)
// and returns the first device fault as a *DriverError, or the error words
// (launch.ErrBuffer) of the most recent Forward (ORed with the most recent
// Backward's) as a *RoutingError for the routing problems and a
// *WaitTimeoutError for a co-resident kernel's wait that gave up in any
// run since the last CheckErrors (both joined by errors.Join when both
// occurred), and then clears the words. The routing word is reset by every
// Forward, so a caller that wants the routing verdict of each Forward
// calls CheckErrors after each one (mokc run and the tests do; mokc bench
// after each batch of runs, where a timeout anywhere in the batch fails
// it).
func (ly *Layer) CheckErrors(stream *driver.Stream) error {
	ly.mu.Lock()
	defer ly.mu.Unlock()
	if ly.closed {
		return ErrLayerClosed
	}
	var err error
	if stream != nil {
		err = stream.Synchronize()
	} else {
		err = ly.ctx.Synchronize()
	}
	if err != nil {
		return fmt.Errorf("mokc runtime: layer %s: %w", ly.layer.Name, err)
	}
	word, err := ly.takeWord()
	if err != nil {
		return err
	}
	if ly.bwd != nil {
		w, err := ly.bwd.takeWord()
		if err != nil {
			return err
		}
		word |= w
	}
	return wordErrors(ly.layer, word, ly.waitTimeout)
}

// wordErrors is the error of the error words' OR word of a run of layer
// l: nil for 0, a *RoutingError for the routing codes, the
// *WaitTimeoutError timeout gives for launch.ErrWaitTimeout, both joined
// (errors.Join) when both occurred.
func wordErrors(l schedule.Layer, word uint32, timeout func() *WaitTimeoutError) error {
	var errs []error
	if code := word &^ launch.ErrWaitTimeout; code != 0 {
		errs = append(errs, &RoutingError{Layer: l.Name, Code: code, Experts: l.Experts, TopK: l.TopK})
	}
	if word&launch.ErrWaitTimeout != 0 {
		errs = append(errs, timeout())
	}
	if len(errs) == 1 {
		return errs[0]
	}
	return errors.Join(errs...) // nil when word is 0
}

// waitTimeout describes a run whose error word holds
// launch.ErrWaitTimeout: the co-resident kernels of ly's plan (and of its
// backward's) launched at the last run's T and the wait limit in effect.
func (ly *Layer) waitTimeout() *WaitTimeoutError {
	e := &WaitTimeoutError{Layer: ly.layer.Name, Limit: time.Duration(launch.DefaultWaitLimitNs)}
	for _, l := range []*Layer{ly, ly.bwd} {
		if l == nil {
			continue
		}
		for _, k := range l.plan.Kernels {
			if !k.CoResident || l.lastT >= 0 && !k.RunsAt(int64(l.lastT)) {
				continue
			}
			e.Kernels = append(e.Kernels, k.Name)
			for _, prm := range k.Params {
				if prm.Name == launch.ParamWaitLimit && prm.Value != nil {
					e.Limit = time.Duration(prm.Value.Eval(0))
				}
			}
		}
	}
	if ly.waitLimit != nil {
		e.Limit = time.Duration(*ly.waitLimit)
	}
	return e
}

// WaitTimeoutError reports a run in which a block of a co-resident kernel
// (launch.Kernel.CoResident: a chained kernel's second GEMM waiting for
// the first's rows) waited longer than the wait limit for another block's
// work and went on without it (launch.ErrWaitTimeout): the run's outputs
// are not valid. The grid's blocks, one per SM, were not all resident at
// once: other persistent work on the device, an MPS or green-context
// share of its SMs, or a block that stopped early. A tool that slows the
// kernels by more than the limit allows (compute-sanitizer at a large T)
// needs a larger one (Layer.SetWaitLimit).
type WaitTimeoutError struct {
	Layer   string        // schedule.Layer.Name of the layer that ran
	Kernels []string      // the co-resident kernels the last run launched, one of which gave up
	Limit   time.Duration // the wait limit in effect
}

// Error says which kernels could have given up, the limit and what it
// means for the run.
func (e *WaitTimeoutError) Error() string {
	which := strings.Join(e.Kernels, " or ")
	if which == "" {
		which = "a co-resident kernel"
	}
	return fmt.Sprintf("mokc runtime: layer %s: a block of %s waited longer than the wait limit (%v) for another block's work and went on without it, so this run's outputs are not valid (error word bit 2, value %d). Likely causes: the kernel's blocks, one per SM, were not all resident at once (other persistent work on the device, an MPS or green-context share of its SMs), a block stopped, or a tool slowed the kernel past the limit (Layer.SetWaitLimit, mokc run/bench --wait-limit, raises it)",
		e.Layer, which, e.Limit, launch.ErrWaitTimeout)
}

// RoutingError is the error word of a forward program: the OR of the codes
// of every problem any thread found in the routing input. The word records
// which kinds of problem occurred, not in which token or slot (the kernels
// set it with an atomic OR, which keeps them free of any ordering). It
// covers the routing's structure (ids, the map); NaN or Inf routing
// weights are not in it: they make their token's output non-finite.
type RoutingError struct {
	Layer   string // schedule.Layer.Name of the layer that ran
	Code    uint32 // bit 0: expert id out of range; bit 1: too many routes in a routing-map row
	Experts int    // E
	TopK    int    // K
}

// BadExpertID reports an id outside -1..E-1 in ids (the slot was treated
// as -1: it contributed nothing).
func (e *RoutingError) BadExpertID() bool { return e.Code&launch.ErrBadExpertID != 0 }

// TooManyRoutes reports a routing-map row with more than K routed experts
// (the first K in increasing expert order were kept).
func (e *RoutingError) TooManyRoutes() bool { return e.Code&launch.ErrTooManyRoute != 0 }

// Error lists the routing problems the error word reports.
func (e *RoutingError) Error() string {
	var parts []string
	if e.BadExpertID() {
		parts = append(parts, fmt.Sprintf("expert id out of range [-1, %d) in at least one slot of ids (treated as -1: no contribution)", e.Experts))
	}
	if e.TooManyRoutes() {
		parts = append(parts, fmt.Sprintf("more than K = %d routes in at least one routing-map row (the first %d in expert order were kept)", e.TopK, e.TopK))
	}
	if rest := e.Code &^ (launch.ErrBadExpertID | launch.ErrTooManyRoute); rest != 0 {
		parts = append(parts, fmt.Sprintf("unknown error bits %#x", rest))
	}
	return fmt.Sprintf("mokc runtime: layer %s: routing: %s (error word %#x)", e.Layer, strings.Join(parts, "; "), e.Code)
}

// Close waits for the device, frees the workspace and the error word and
// unloads the module. The caller's tensors are untouched. Closing twice is
// not an error.
func (ly *Layer) Close() error {
	ly.mu.Lock()
	defer ly.mu.Unlock()
	if ly.closed {
		return nil
	}
	ly.closed = true
	errs := []error{ly.ctx.Synchronize()}
	if ly.bwd != nil {
		errs = append(errs, ly.bwd.Close())
	}
	if ly.ws != 0 {
		errs = append(errs, ly.ctx.Free(ly.ws))
	}
	errs = append(errs, ly.ctx.Free(ly.errPtr), ly.mod.Unload())
	ly.ws, ly.errPtr, ly.args = 0, 0, nil
	return errors.Join(errs...)
}
