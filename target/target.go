package target

import (
	"fmt"
	"strings"
)

// Target is a GPU architecture mokc generates code for. The zero value is
// SM80. It marshals to and from its PTX name ("sm_90a") in JSON.
type Target int

// The targets, in order of compute capability.
const (
	// SM80 is Ampere (A100): mma.sync, ldmatrix, cp.async.
	SM80 Target = iota
	// SM90a is Hopper (H100/H200): TMA, wgmma, mbarrier, setmaxnreg.
	SM90a
	// SM100a is Blackwell (B200): TMA, tcgen05, tensor memory (TMEM).
	SM100a
)

// Info is one row of the target table: what the compiler, the schedules and
// the runtime need to know of an architecture. Counts are those of the
// reference part (Part); a launcher sizes persistent grids from the
// device's own SM count.
type Info struct {
	Name string // PTX `.target` spelling: "sm_80", "sm_90a", "sm_100a"
	// PTXVersion is the `.version` the backend emits: 8.0 is the lowest
	// with sm_90a and everything mokc emits (accepted by every ptxas
	// 12.x); sm_100a needs 8.8 for the tcgen05 block-scaled spellings
	// (PTX ISA, release notes).
	PTXVersion string
	// ComputeCapability is 10*major + minor of the devices that run it.
	ComputeCapability int
	// ArchSpecific: an "a" target (wgmma, setmaxnreg, tcgen05) runs only on
	// exactly ComputeCapability (PTX ISA, "Target ISA notes": sm_90a
	// features are not forward compatible); a plain target runs on that
	// capability or newer.
	ArchSpecific bool
	Part         string // the reference part the counts below describe
	SMs          int    // streaming multiprocessors of Part
	// SharedMemoryPerCTA is the largest dynamic shared memory of one CTA in
	// bytes, after cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)
	// (CUDA C Programming Guide, "Compute Capabilities": 163 KB on 8.0,
	// 227 KB on 9.0 and 10.0).
	SharedMemoryPerCTA int
	// SharedMemoryPerSM is the shared memory of one SM in bytes, which the
	// resident CTAs divide, each also holding 1 KB the system reserves
	// (CUDA C Programming Guide, "Compute Capabilities": 164 KB on 8.0,
	// 228 KB on 9.0 and 10.0; "reserved shared memory per thread block":
	// 1 KB).
	SharedMemoryPerSM int
	RegistersPerSM    int // 32-bit registers per SM (65536 on all three)
	MaxThreadsPerCTA  int // 1024
	// MemoryBytes is the device memory of the largest part of the
	// architecture, in bytes: A100 SXM 80 GB (80 GiB, NVIDIA A100 datasheet),
	// H200 SXM 141 GB (cuDeviceTotalMem of the H200 the GPU tests ran on:
	// 150109880320 bytes, docs/runs/run4/tests.log), B200 192 GB HBM3e
	// (8 stacks of 24 GB; NVIDIA's B200 product figures, of which HGX B200
	// exposes about 180 GB). It is a ceiling for sizes, not what a device
	// has free: a launcher reads the device's own memory.
	MemoryBytes int64
	// TMEMColumns and TMEMLanes are the tensor memory of one CTA (128
	// lanes x 512 columns of 32 bits on sm_100a; PTX ISA "Tensor Memory"),
	// 0 where there is none.
	TMEMColumns, TMEMLanes int
	// MMA names the matrix instruction the target's GEMM engine issues.
	MMA string
	// Features lists the instruction families the target has that the
	// engines rely on (Has).
	Features []Feature
}

// Feature is an instruction family a kernel may need.
type Feature string

// The instruction families (PTX ISA section names).
const (
	CpAsync    Feature = "cp.async"             // asynchronous global->shared copies (sm_80+)
	MMASync    Feature = "mma.sync"             // warp-level MMA m16n8k16 (sm_80+)
	TMA        Feature = "cp.async.bulk.tensor" // tensor memory accelerator (sm_90+)
	Mbarrier   Feature = "mbarrier.expect_tx"   // transaction-count mbarriers (sm_90+)
	WGMMA      Feature = "wgmma"                // warpgroup MMA (sm_90a only)
	SetMaxNReg Feature = "setmaxnreg"           // warpgroup register reallocation (sm_90a, sm_100a)
	TCGen05    Feature = "tcgen05"              // 5th-generation tensor cores and TMEM (sm_100a)
	FP8MMA     Feature = "fp8 mma"              // e4m3/e5m2 tensor-core MMA (sm_90a, sm_100a)
	// GridDepControl: griddepcontrol.wait and .launch_dependents, the
	// kernel side of programmatic dependent launch (sm_90+; PTX ISA
	// "Parallel Synchronization and Communication Instructions:
	// griddepcontrol").
	GridDepControl Feature = "griddepcontrol"
)

var table = [...]Info{
	SM80: {Name: "sm_80", PTXVersion: "8.0", ComputeCapability: 80, Part: "A100 SXM", SMs: 108,
		SharedMemoryPerCTA: 163 * 1024, SharedMemoryPerSM: 164 * 1024, RegistersPerSM: 65536, MaxThreadsPerCTA: 1024, MemoryBytes: 80 << 30,
		MMA: "mma.sync.aligned.m16n8k16", Features: []Feature{CpAsync, MMASync}},
	SM90a: {Name: "sm_90a", PTXVersion: "8.0", ComputeCapability: 90, ArchSpecific: true, Part: "H100/H200 SXM", SMs: 132,
		SharedMemoryPerCTA: 227 * 1024, SharedMemoryPerSM: 228 * 1024, RegistersPerSM: 65536, MaxThreadsPerCTA: 1024, MemoryBytes: 150109880320,
		MMA: "wgmma.mma_async m64nNk16", Features: []Feature{CpAsync, MMASync, TMA, Mbarrier, WGMMA, SetMaxNReg, FP8MMA, GridDepControl}},
	SM100a: {Name: "sm_100a", PTXVersion: "8.8", ComputeCapability: 100, ArchSpecific: true, Part: "B200", SMs: 148,
		SharedMemoryPerCTA: 227 * 1024, SharedMemoryPerSM: 228 * 1024, RegistersPerSM: 65536, MaxThreadsPerCTA: 1024, MemoryBytes: 192e9, TMEMColumns: 512, TMEMLanes: 128,
		MMA: "tcgen05.mma.cta_group::1", Features: []Feature{CpAsync, MMASync, TMA, Mbarrier, SetMaxNReg, TCGen05, FP8MMA, GridDepControl}},
}

// All lists every target in order: sm_80, sm_90a, sm_100a.
func All() []Target { return []Target{SM80, SM90a, SM100a} }

// Valid reports whether t is one of the targets of the table.
func (t Target) Valid() bool { return t >= 0 && int(t) < len(table) }

// Info returns t's row of the table (the zero Info for an invalid t).
func (t Target) Info() Info {
	if !t.Valid() {
		return Info{}
	}
	return table[t]
}

// String returns the PTX spelling, e.g. "sm_90a".
func (t Target) String() string {
	if !t.Valid() {
		return fmt.Sprintf("Target(%d)", int(t))
	}
	return table[t].Name
}

// Names is the list of target names for messages: "sm_80, sm_90a or sm_100a".
func Names() string {
	var n []string
	for _, t := range All() {
		n = append(n, t.String())
	}
	return strings.Join(n[:len(n)-1], ", ") + " or " + n[len(n)-1]
}

// Parse reads a target name: "sm_80", "sm_90a", "sm_100a", also without
// the "sm_" prefix ("90a") and in any case. The error names the accepted
// spellings.
func Parse(s string) (Target, error) {
	v := strings.ToLower(strings.TrimSpace(s))
	if !strings.HasPrefix(v, "sm_") {
		v = "sm_" + v
	}
	for _, t := range All() {
		if v == t.String() {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown target %q (want %s)", s, Names())
}

// MarshalText writes the PTX name.
func (t Target) MarshalText() ([]byte, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("target: invalid Target(%d)", int(t))
	}
	return []byte(t.String()), nil
}

// UnmarshalText reads a PTX name (Parse).
func (t *Target) UnmarshalText(b []byte) error {
	v, err := Parse(string(b))
	if err != nil {
		return err
	}
	*t = v
	return nil
}

// PTXVersion is the `.version` emitted for t (Info.PTXVersion).
func (t Target) PTXVersion() string { return t.Info().PTXVersion }

// ComputeCapability is 10*major + minor (Info.ComputeCapability).
func (t Target) ComputeCapability() int { return t.Info().ComputeCapability }

// SMs is the SM count of the reference part (Info.SMs): the default size
// of a persistent grid.
func (t Target) SMs() int { return t.Info().SMs }

// SharedMemoryLimit is the largest dynamic shared memory of one CTA in
// bytes (Info.SharedMemoryPerCTA).
func (t Target) SharedMemoryLimit() int { return t.Info().SharedMemoryPerCTA }

// SharedMemoryFor is the largest dynamic shared memory of one CTA in bytes
// when n CTAs (n >= 1) are to be resident on an SM at once: the SM's
// shared memory shared among them, less each one's reserved 1 KB
// (Info.SharedMemoryPerSM), and at most SharedMemoryLimit.
func (t Target) SharedMemoryFor(n int) int {
	return min(t.SharedMemoryLimit(), t.Info().SharedMemoryPerSM/max(1, n)-1024)
}

// MaxMemoryBytes is the largest Info.MemoryBytes of the table (B200's 192
// GB): no layer whose weights exceed it fits on any GPU mokc targets.
func MaxMemoryBytes() int64 {
	var m int64
	for _, t := range All() {
		m = max(m, t.Info().MemoryBytes)
	}
	return m
}

// TMEMColumns is the tensor-memory columns of one CTA (0 without TMEM).
func (t Target) TMEMColumns() int { return t.Info().TMEMColumns }

// Has reports whether t has the instruction family f.
func (t Target) Has(f Feature) bool {
	for _, g := range t.Info().Features {
		if g == f {
			return true
		}
	}
	return false
}

// RunsOn reports whether PTX for t runs on a device of compute capability
// cc (10*major + minor): a plain target on cc >= its capability, an
// architecture-specific one only on exactly its capability. The error
// names the target, the device's capability and the targets that would
// run there.
func (t Target) RunsOn(cc int) error {
	if !t.Valid() {
		return fmt.Errorf("invalid Target(%d)", int(t))
	}
	if t.runsOn(cc) {
		return nil
	}
	var fits []string
	for _, u := range All() {
		if u.runsOn(cc) {
			fits = append(fits, u.String())
		}
	}
	hint := "none of mokc's targets runs on it"
	if len(fits) > 0 {
		hint = "use --target " + strings.Join(fits, " or ")
	}
	want := t.ComputeCapability()
	rule := fmt.Sprintf("needs compute capability %d.%d or newer", want/10, want%10)
	if t.Info().ArchSpecific {
		rule = fmt.Sprintf("needs compute capability exactly %d.%d (architecture-specific PTX)", want/10, want%10)
	}
	return fmt.Errorf("target %s %s; the device has %d.%d: %s", t, rule, cc/10, cc%10, hint)
}

func (t Target) runsOn(cc int) bool {
	in := t.Info()
	if in.ArchSpecific {
		return cc == in.ComputeCapability
	}
	return cc >= in.ComputeCapability
}
