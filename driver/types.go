package driver

import (
	"fmt"
)

// DevicePtr is a device (global memory) address in the current process's
// unified virtual address space, as returned by cuMemAlloc. 0 is the null
// pointer.
type DevicePtr uint64

// Offset returns p advanced by bytes (which may be negative).
func (p DevicePtr) Offset(bytes int) DevicePtr { return DevicePtr(int64(p) + int64(bytes)) }

// String formats p in hexadecimal.
func (p DevicePtr) String() string { return fmt.Sprintf("0x%x", uint64(p)) }

// Dim3 is a grid size (in thread blocks) or a block size (in threads) along
// x, y and z. A zero Y or Z counts as 1, so Dim3{X: n} is one-dimensional; a
// zero or negative X is an error.
type Dim3 struct {
	X int // extent along x; must be >= 1
	Y int // extent along y; 0 counts as 1
	Z int // extent along z; 0 counts as 1
}

// Count returns X*Y*Z with zero Y and Z counted as 1.
func (d Dim3) Count() int {
	y, z := d.Y, d.Z
	if y == 0 {
		y = 1
	}
	if z == 0 {
		z = 1
	}
	return d.X * y * z
}

// normalized returns the three extents with zero Y and Z replaced by 1.
func (d Dim3) normalized() [3]int {
	v := [3]int{d.X, d.Y, d.Z}
	for i := 1; i < 3; i++ {
		if v[i] == 0 {
			v[i] = 1
		}
	}
	return v
}

// DeviceProps are the properties of the device a Context was opened on,
// read once with cuDeviceGetAttribute / cuDeviceGetName / cuDeviceTotalMem.
type DeviceProps struct {
	Ordinal      int    // device ordinal passed to Open
	Name         string // marketing name, e.g. "NVIDIA H200"
	ComputeMajor int    // compute capability major (9 for Hopper)
	ComputeMinor int    // compute capability minor
	SMCount      int    // number of streaming multiprocessors

	MaxThreadsPerBlock int // threads
	WarpSize           int // threads

	// MaxSharedBytesPerBlock is the shared memory a block may use without
	// opting in (static plus dynamic), in bytes: 48 KiB on current GPUs.
	MaxSharedBytesPerBlock int
	// MaxSharedBytesPerBlockOptin is the most shared memory a block may use
	// after Function.SetMaxDynamicSharedBytes, in bytes (227 KiB on H100/H200).
	MaxSharedBytesPerBlockOptin int
	// MaxSharedBytesPerSM is the shared memory of one SM, in bytes.
	MaxSharedBytesPerSM int
	// MaxRegistersPerBlock is the register file available to one block, in
	// 32-bit registers.
	MaxRegistersPerBlock int

	L2Bytes            int // L2 cache size, bytes
	TotalMemBytes      int // device memory, bytes
	ClockKHz           int // peak SM clock, kHz
	MemoryClockKHz     int // peak memory clock, kHz
	MemoryBusWidthBits int // global memory bus width, bits
}

// ComputeCapability returns 10*major + minor, e.g. 90 for sm_90.
func (p DeviceProps) ComputeCapability() int { return 10*p.ComputeMajor + p.ComputeMinor }

// FuncAttributes are a kernel's resource usage as compiled by the JIT, read
// with cuFuncGetAttribute.
type FuncAttributes struct {
	MaxThreadsPerBlock int // most threads per block a launch may use (limited by registers)
	StaticSharedBytes  int // statically declared shared memory, bytes
	ConstBytes         int // user constant memory, bytes
	LocalBytes         int // local memory per thread (spills, stack), bytes
	NumRegs            int // registers per thread
	PTXVersion         int // PTX virtual architecture, 10*major+minor (e.g. 80)
	BinaryVersion      int // SASS architecture, 10*major+minor (e.g. 90)
	// MaxDynamicSharedBytes is the dynamic shared memory a launch may
	// request, bytes (set by SetMaxDynamicSharedBytes; 48 KiB minus the static
	// part by default).
	MaxDynamicSharedBytes int
}

// LaunchConfig is a launch through cuLaunchKernelEx.
type LaunchConfig struct {
	Grid        Dim3    // grid size in thread blocks
	Block       Dim3    // block size in threads
	SharedBytes int     // dynamic shared memory per block, bytes
	Stream      *Stream // nil: the legacy default stream
	// Cluster is the thread-block cluster size in blocks (sm_90+), sent as
	// CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION. The zero value sends no cluster
	// attribute. Each grid extent must be a multiple of the cluster extent;
	// more than 8 blocks per cluster needs
	// Function.SetNonPortableClusterSizeAllowed.
	Cluster Dim3
	// Programmatic sends CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
	// (sm_90+, programmatic dependent launch): the kernel may begin before
	// the previous kernel in the stream has finished, once that kernel's
	// blocks have run griddepcontrol.launch_dependents or exited, and must
	// run griddepcontrol.wait before it touches memory the previous kernel
	// reads or writes (launch.Kernel.Programmatic; CUDA Programming Guide,
	// "Programmatic Dependent Launch and Synchronization").
	Programmatic bool
}

// checkLaunch validates launch dimensions against the CUDA limits that hold
// on every supported GPU (CUDA C Programming Guide, "Compute Capabilities",
// technical specifications): block x,y <= 1024, z <= 64, at most 1024
// threads per block; grid x < 2^31, grid y,z <= 65535.
func checkLaunch(grid, block Dim3, sharedBytes int, cluster Dim3) error {
	if grid.X <= 0 || grid.Y < 0 || grid.Z < 0 {
		return fmt.Errorf("mokc driver: launch: grid %v: every extent must be >= 1 (Y, Z may be 0 for 1)", grid)
	}
	if block.X <= 0 || block.Y < 0 || block.Z < 0 {
		return fmt.Errorf("mokc driver: launch: block %v: every extent must be >= 1 (Y, Z may be 0 for 1)", block)
	}
	g, b := grid.normalized(), block.normalized()
	if g[0] > 1<<31-1 || g[1] > 65535 || g[2] > 65535 {
		return fmt.Errorf("mokc driver: launch: grid %v exceeds (2^31-1, 65535, 65535)", grid)
	}
	if b[0] > 1024 || b[1] > 1024 || b[2] > 64 {
		return fmt.Errorf("mokc driver: launch: block %v exceeds (1024, 1024, 64)", block)
	}
	if n := b[0] * b[1] * b[2]; n > 1024 {
		return fmt.Errorf("mokc driver: launch: block %v has %d threads, more than 1024", block, n)
	}
	if sharedBytes < 0 || sharedBytes > 1<<31-1 {
		return fmt.Errorf("mokc driver: launch: dynamic shared memory %d bytes out of range", sharedBytes)
	}
	if cluster == (Dim3{}) {
		return nil
	}
	if cluster.X <= 0 || cluster.Y < 0 || cluster.Z < 0 {
		return fmt.Errorf("mokc driver: launch: cluster %v: every extent must be >= 1 (Y, Z may be 0 for 1)", cluster)
	}
	c := cluster.normalized()
	for i := range 3 {
		if g[i]%c[i] != 0 {
			return fmt.Errorf("mokc driver: launch: grid %v is not a multiple of cluster %v", grid, cluster)
		}
	}
	return nil
}
