package codegen

import (
	"fmt"
	"sort"
	"sync"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// Engine emits the grouped GEMM kernels of one target into an LLVM module.
//
// GroupedGEMM adds one kernel (a function annotated as a kernel, plus any
// helpers) named spec.Name to m, taking GemmParams(spec) (then any tensor-map
// parameters), and returns its launch shape. m is the program's one
// ir.Module (the kernels share its intrinsic declarations and dynamic shared
// memory); builder errors surface from m.Finish. rowsPerT is how many A rows there
// are per token (K for routed GEMMs, 1 for the shared expert), for the grid.
// Every engine computes the epilogue with type Epilogue (epilogue.go) so the
// numerics are identical across targets.
//
// ReadsNMajorB reports whether GroupedGEMM takes spec with BNMajor set (B_e
// stored [K, N]): the one place a target's support for an N-major B is
// decided; where it is false the lowering reads a K-major copy instead.
//
// QuantizesC reports whether GroupedGEMM takes spec with QuantizeC set (C's
// MXFP8 form written by the epilogue): the one place a target's support
// for it is decided; where it is false the lowering launches the Quantize
// op's kernel instead.
//
// GathersA reports whether GroupedGEMM takes spec with GatherK = topK (the
// layer's top-k; the dispatched rows read from the token rows by their
// slots): the one place
// a target's support for it is decided; where it is false the lowering
// launches the Gather op's kernel instead.
//
// StoresGather reports whether GroupedGEMM takes spec, a GEMM phase of a
// persistent kernel, with its staged epilogue's store warps gathering A's
// rows from the token rows beside the items (GemmSpec.storeGatherK =
// topK; store_gather.go): the one place a target's support for it is
// decided; where it is false the lowering keeps the gather phase.
//
// SplitsK reports whether GroupedGEMM takes spec with SplitK = splits
// (the number of parts of the reduction, summed by a reduce kernel): the
// one place a target's support for it is decided; where it is false the
// lowering keeps the whole reduction in one work item. It is false (never
// an error) for splits < 2, for splits not dividing ceil(K/BK) and for
// any spec Validate refuses with it.
//
// QueuesItems reports whether GroupedGEMM takes spec with QueueItems set
// (each block's work items past the fixed walk's rounds but its last
// taken from a queue): the one place a target's support for it is
// decided.
//
// Clusters reports whether GroupedGEMM takes spec with Tile.Cluster = 2
// (spec's CTAs in pairs of a thread-block cluster): the one place a
// target's support for it is decided; where it is false the lowering
// builds the GEMM without clusters, and a schedule whose GEMMs all run
// without is refused.
//
// SharesSM returns nil when GroupedGEMM takes spec with Tile.BlocksPerSM
// = 2 (two blocks of the kernel resident on each SM, each within half its
// registers and shared memory), else the reason: the one place a target's
// support for it is decided; where it refuses, the lowering builds the
// GEMM one block per SM, and a schedule whose GEMMs all run so is refused
// with the reasons.
//
// ChainedGEMM adds one kernel named name to m that runs the work items of
// first and then those of second, a GEMM over the same dispatched rows in
// the same row tiles whose A is first's C (K = first.N), each item of
// second starting once its row tile of first's C is stored (gemm_chain.go;
// the forward's FC1 and FC2 in one launch, docs/megakernel.md). Its
// parameters are first's (GemmParams, ending with tile_done, RoleTileDone:
// u32 per row tile of the tile list, zero before the launch; then its
// tensor maps), then second's but tile_done with names prefixed "g2_",
// where the same roles bind to second's buffers; its blocks wait for one
// another (KernelInfo.CoResident). Errors: ChainsGEMMs'. ChainsGEMMs
// returns nil when ChainedGEMM takes the pair, else the reason: the one
// place a target's support for it is decided.
//
// MXFP8 returns nil when GroupedGEMM builds MXFP8 GEMMs (GemmSpec.MX), else
// the reason it refuses them: the one place a target's MXFP8 support is
// decided.
type Engine interface {
	Target() target.Target
	GroupedGEMM(m *ir.Module, spec GemmSpec, rowsPerT int64) (KernelInfo, error)
	ReadsNMajorB(spec GemmSpec) bool
	QuantizesC(spec GemmSpec) bool
	GathersA(spec GemmSpec, topK int) bool
	StoresGather(spec GemmSpec, topK int) bool
	SplitsK(spec GemmSpec, splits int) bool
	QueuesItems(spec GemmSpec) bool
	Clusters(spec GemmSpec) bool
	SharesSM(spec GemmSpec) error
	ChainedGEMM(m *ir.Module, name string, first, second GemmSpec, rowsPerT int64) (KernelInfo, error)
	ChainsGEMMs(first, second GemmSpec) error
	MXFP8() error
}

// atom is one target's part of the grouped-GEMM task, planned from a spec
// (operand tiles and shared memory from layouts.PlanGemmSmem, the target's
// limits): it builds the kernel. The neutral parts (work list, ring, gate/up
// layouts, epilogue) are in gemm_task.go.
type atom interface {
	build(m *ir.Module, spec GemmSpec, rowsPerT int64) (KernelInfo, error)
}

// atomEngine is the Engine of a target: validate the spec, plan the atom,
// build the kernel.
type atomEngine struct {
	target target.Target
	plan   func(GemmSpec) (atom, error)
	atomCaps
}

// atomCaps are the optional forms of a GEMM an atom builds, each a
// predicate over specs (nil: none) that Validate has accepted with the
// form set; for all but nMajorB the plan must also fit.
type atomCaps struct {
	nMajorB   func(GemmSpec) bool // an N-major B (BNMajor)
	quantizeC func(GemmSpec) bool // C's MXFP8 form in the epilogue (QuantizeC)
	gatherA   func(GemmSpec) bool // A's rows read by slot (GatherK)
	// storeGather: A's rows gathered by the store warps (storeGatherK)
	storeGather func(GemmSpec) bool
	splitK      func(GemmSpec) bool // the reduction in parts (SplitK)
	queue       func(GemmSpec) bool // work items from a queue (QueueItems)
	cluster     func(GemmSpec) bool // CTA pairs of a 2-CTA cluster (Tile.Cluster = 2)
	sharesSM    func(GemmSpec) bool // two blocks per SM (Tile.BlocksPerSM = 2)
	// noMX is why the atom has no MXFP8 GEMM ("": it has one).
	noMX string
}

// MXFP8 says whether the atom builds MXFP8 GEMMs (see Engine).
func (e atomEngine) MXFP8() error {
	if e.noMX != "" {
		return fmt.Errorf("the %v engine has no MXFP8 GEMM: %s", e.target, e.noMX)
	}
	return nil
}

// ReadsNMajorB reports whether the atom reads spec's B N-major (see Engine).
func (e atomEngine) ReadsNMajorB(spec GemmSpec) bool {
	s := spec
	s.BNMajor = true
	return e.nMajorB != nil && s.Validate() == nil && e.nMajorB(s)
}

// QuantizesC reports whether the atom writes C's MXFP8 form in spec's
// epilogue (see Engine): its predicate holds and the plan, with the
// quantization's shared memory, fits.
func (e atomEngine) QuantizesC(spec GemmSpec) bool {
	s := spec
	s.QuantizeC = true
	return e.builds(s, e.quantizeC)
}

// builds reports whether the atom builds s in the optional form whose
// predicate is form (nil: the atom has no such form): s is valid, the
// predicate holds and the plan fits.
func (e atomEngine) builds(s GemmSpec, form func(GemmSpec) bool) bool {
	if form == nil || s.Validate() != nil || !form(s) {
		return false
	}
	_, err := e.plan(s)
	return err == nil
}

// GathersA reports whether the atom reads spec's A rows from the token
// rows with top-k topK (GemmSpec.GatherK; see Engine): its predicate holds
// and the plan fits.
func (e atomEngine) GathersA(spec GemmSpec, topK int) bool {
	s := spec
	s.GatherK = topK
	return e.builds(s, e.gatherA)
}

// StoresGather reports whether the atom's store warps gather spec's A
// rows from the token rows with top-k topK (GemmSpec.storeGatherK; see
// Engine): its predicate holds and the plan fits.
func (e atomEngine) StoresGather(spec GemmSpec, topK int) bool {
	s := spec
	s.storeGatherK = topK
	return e.builds(s, e.storeGather)
}

// SplitsK reports whether the atom splits spec's reduction into splits
// parts (GemmSpec.SplitK; see Engine): its predicate holds and the plan
// fits.
func (e atomEngine) SplitsK(spec GemmSpec, splits int) bool {
	s := spec
	s.SplitK = splits
	return splits >= 2 && e.builds(s, e.splitK)
}

// QueuesItems reports whether the atom takes spec's work items from a
// queue (GemmSpec.QueueItems; see Engine): its predicate holds and the
// plan, with the item ring, fits.
func (e atomEngine) QueuesItems(spec GemmSpec) bool {
	s := spec
	s.QueueItems = true
	return e.builds(s, e.queue)
}

// Clusters reports whether the atom builds spec in 2-CTA clusters
// (Tile.Cluster = 2; see Engine): its predicate holds and the plan fits.
func (e atomEngine) Clusters(spec GemmSpec) bool {
	s := spec
	s.Tile.Cluster = 2
	return e.builds(s, e.cluster)
}

// SharesSM returns nil when the atom builds spec two blocks per SM
// (Tile.BlocksPerSM = 2; see Engine): its predicate holds and the plan,
// within half an SM, fits; else the plan's reason, or the predicate's.
func (e atomEngine) SharesSM(spec GemmSpec) error {
	s := spec
	s.Tile.BlocksPerSM = 2
	if e.sharesSM == nil {
		return fmt.Errorf("codegen: %s: the %v engine runs one block per SM", s.Name, e.target)
	}
	if err := s.Validate(); err != nil {
		return err
	}
	if _, err := e.plan(s); err != nil {
		return err
	}
	if !e.sharesSM(s) {
		return fmt.Errorf("codegen: %s: the %v engine builds this GEMM one block per SM (its rows gathered, its weights in a pointer table, promoted MXFP8, a split reduction or a queue)", s.Name, e.target)
	}
	return nil
}

// Target is the engine's target.
func (e atomEngine) Target() target.Target { return e.target }

// GroupedGEMM adds the kernel of spec to m (see Engine).
func (e atomEngine) GroupedGEMM(m *ir.Module, spec GemmSpec, rowsPerT int64) (KernelInfo, error) {
	if err := spec.Validate(); err != nil {
		return KernelInfo{}, err
	}
	if err := e.MXFP8(); spec.MX && err != nil {
		return KernelInfo{}, fmt.Errorf("codegen: %s: %w", spec.Name, err)
	}
	if spec.QuantizeC && !e.QuantizesC(spec) {
		return KernelInfo{}, fmt.Errorf("codegen: %s: the %v engine does not quantize C in the epilogue with tile %dx%dx%d", spec.Name, e.target, spec.Tile.BM, spec.Tile.BN, spec.Tile.BK)
	}
	if spec.GatherK > 0 && !e.GathersA(spec, spec.GatherK) {
		return KernelInfo{}, fmt.Errorf("codegen: %s: the %v engine does not gather the rows of A with tile %dx%dx%d", spec.Name, e.target, spec.Tile.BM, spec.Tile.BN, spec.Tile.BK)
	}
	if spec.storeGatherK > 0 && !e.StoresGather(spec, spec.storeGatherK) {
		return KernelInfo{}, fmt.Errorf("codegen: %s: the %v engine's store warps do not gather the rows of A with tile %dx%dx%d (a GEMM phase of a persistent kernel with the staged epilogue)", spec.Name, e.target, spec.Tile.BM, spec.Tile.BN, spec.Tile.BK)
	}
	if spec.SplitK > 1 && !e.SplitsK(spec, spec.SplitK) {
		return KernelInfo{}, fmt.Errorf("codegen: %s: the %v engine does not split the reduction in %d parts with tile %dx%dx%d", spec.Name, e.target, spec.SplitK, spec.Tile.BM, spec.Tile.BN, spec.Tile.BK)
	}
	if spec.QueueItems && !e.QueuesItems(spec) {
		return KernelInfo{}, fmt.Errorf("codegen: %s: the %v engine does not take this GEMM's work items from a queue (QueueItems: sm_90a, dispatched rows, not with MXExpand, the item ring within shared memory)", spec.Name, e.target)
	}
	if spec.BNMajor && !e.ReadsNMajorB(spec) {
		return KernelInfo{}, fmt.Errorf("codegen: %s: the %v engine does not read an N-major B with tile %dx%dx%d", spec.Name, e.target, spec.Tile.BM, spec.Tile.BN, spec.Tile.BK)
	}
	a, err := e.plan(spec)
	if err != nil {
		return KernelInfo{}, err
	}
	return a.build(m, spec, rowsPerT)
}

// registerAtom registers the engine of t whose atom plan derives, with
// the optional forms caps.
func registerAtom[A atom](t target.Target, plan func(GemmSpec) (A, error), caps atomCaps) {
	RegisterEngine(t, func() Engine {
		return atomEngine{target: t, plan: func(s GemmSpec) (atom, error) { return plan(s) }, atomCaps: caps}
	})
}

var (
	enginesMu sync.Mutex
	engines   = map[target.Target]func() Engine{}
)

// RegisterEngine makes an engine constructor available to EngineFor. Engines
// register themselves from an init function in their own file.
func RegisterEngine(t target.Target, mk func() Engine) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	engines[t] = mk
}

// EngineFor returns the GEMM engine of t, or an error naming the targets
// that have one.
func EngineFor(t target.Target) (Engine, error) {
	enginesMu.Lock()
	defer enginesMu.Unlock()
	if mk, ok := engines[t]; ok {
		return mk(), nil
	}
	var have []string
	for t := range engines {
		have = append(have, t.String())
	}
	sort.Strings(have)
	return nil, fmt.Errorf("codegen: no GEMM engine for target %v (have %v)", t, have)
}

// CheckLayer returns why t's engine cannot build the routed GEMMs of layer
// l, or nil: today only the precision decides (MXFP8 needs an engine whose
// MXFP8 returns nil). It builds nothing, so commands can refuse a layer
// before they compile or open a device. Errors: EngineFor's, and the
// engine's MXFP8 refusal.
func CheckLayer(l schedule.Layer, t target.Target) error {
	e, err := EngineFor(t)
	if err != nil {
		return err
	}
	if l.Precision == schedule.MXFP8 {
		if err := e.MXFP8(); err != nil {
			return fmt.Errorf("mxfp8 weights on %v: %w", t, err)
		}
	}
	return nil
}
