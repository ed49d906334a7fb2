//go:build !cuda

package driver

// This file is the API without the "cuda" build tag: the types exist and
// every call that needs a GPU returns ErrNoCUDA.

// Available reports whether a CUDA device can be used; always false without
// the "cuda" build tag.
func Available() bool { return false }

// DeviceCount returns ErrNoCUDA without the "cuda" build tag.
func DeviceCount() (int, error) { return 0, ErrNoCUDA }

// DriverVersion returns ErrNoCUDA without the "cuda" build tag.
func DriverVersion() (int, error) { return 0, ErrNoCUDA }

// Context is an open device; without the "cuda" build tag none can be opened.
type Context struct{}

// Open returns ErrNoCUDA without the "cuda" build tag.
func Open(deviceOrdinal int) (*Context, error) { return nil, ErrNoCUDA }

// Close returns ErrNoCUDA.
func (c *Context) Close() error { return ErrNoCUDA }

// Device returns zero properties.
func (c *Context) Device() DeviceProps { return DeviceProps{} }

// Synchronize returns ErrNoCUDA.
func (c *Context) Synchronize() error { return ErrNoCUDA }

// Alloc returns ErrNoCUDA.
func (c *Context) Alloc(bytes int) (DevicePtr, error) { return 0, ErrNoCUDA }

// Free returns ErrNoCUDA.
func (c *Context) Free(ptr DevicePtr) error { return ErrNoCUDA }

// Memset returns ErrNoCUDA.
func (c *Context) Memset(ptr DevicePtr, value byte, bytes int) error { return ErrNoCUDA }

// MemsetAsync returns ErrNoCUDA.
func (c *Context) MemsetAsync(ptr DevicePtr, value byte, bytes int, stream *Stream) error {
	return ErrNoCUDA
}

// CopyToDevice returns ErrNoCUDA.
func (c *Context) CopyToDevice(dst DevicePtr, src any) error { return ErrNoCUDA }

// CopyFromDevice returns ErrNoCUDA.
func (c *Context) CopyFromDevice(dst any, src DevicePtr) error { return ErrNoCUDA }

// CopyToDeviceAsync returns ErrNoCUDA.
func (c *Context) CopyToDeviceAsync(dst DevicePtr, src any, stream *Stream) error { return ErrNoCUDA }

// CopyFromDeviceAsync returns ErrNoCUDA.
func (c *Context) CopyFromDeviceAsync(dst any, src DevicePtr, stream *Stream) error {
	return ErrNoCUDA
}

// CopyDeviceToDevice returns ErrNoCUDA.
func (c *Context) CopyDeviceToDevice(dst, src DevicePtr, bytes int) error { return ErrNoCUDA }

// NewStream returns ErrNoCUDA.
func (c *Context) NewStream() (*Stream, error) { return nil, ErrNoCUDA }

// NewEvent returns ErrNoCUDA.
func (c *Context) NewEvent() (*Event, error) { return nil, ErrNoCUDA }

// LoadModule returns ErrNoCUDA.
func (c *Context) LoadModule(ptx string) (*Module, error) { return nil, ErrNoCUDA }

// Stream is a CUDA stream; without the "cuda" build tag none can be made.
type Stream struct{}

// Synchronize returns ErrNoCUDA.
func (s *Stream) Synchronize() error { return ErrNoCUDA }

// Destroy returns ErrNoCUDA.
func (s *Stream) Destroy() error { return ErrNoCUDA }

// Event is a CUDA event; without the "cuda" build tag none can be made.
type Event struct{}

// BeginCapture returns ErrNoCUDA.
func (s *Stream) BeginCapture() error { return ErrNoCUDA }

// EndCapture returns ErrNoCUDA.
func (s *Stream) EndCapture() (*Graph, error) { return nil, ErrNoCUDA }

// Graph is recorded, instantiated work (no CUDA support: every method
// returns ErrNoCUDA).
type Graph struct{}

// Launch returns ErrNoCUDA.
func (g *Graph) Launch(stream *Stream) error { return ErrNoCUDA }

// Destroy returns ErrNoCUDA.
func (g *Graph) Destroy() error { return ErrNoCUDA }

// Record returns ErrNoCUDA.
func (e *Event) Record(stream *Stream) error { return ErrNoCUDA }

// Synchronize returns ErrNoCUDA.
func (e *Event) Synchronize() error { return ErrNoCUDA }

// Destroy returns ErrNoCUDA.
func (e *Event) Destroy() error { return ErrNoCUDA }

// ElapsedMs returns ErrNoCUDA.
func ElapsedMs(start, end *Event) (float32, error) { return 0, ErrNoCUDA }

// Module is a loaded PTX module; without the "cuda" build tag none can be
// loaded.
type Module struct{}

// Function returns ErrNoCUDA.
func (m *Module) Function(name string) (*Function, error) { return nil, ErrNoCUDA }

// InfoLog returns "".
func (m *Module) InfoLog() string { return "" }

// Unload returns ErrNoCUDA.
func (m *Module) Unload() error { return ErrNoCUDA }

// Function is a kernel of a Module; without the "cuda" build tag none exists.
type Function struct{}

// Name returns "".
func (f *Function) Name() string { return "" }

// Attributes returns ErrNoCUDA.
func (f *Function) Attributes() (FuncAttributes, error) { return FuncAttributes{}, ErrNoCUDA }

// ParamSizes returns ErrNoCUDA.
func (f *Function) ParamSizes() ([]int, error) { return nil, ErrNoCUDA }

// SetMaxDynamicSharedBytes returns ErrNoCUDA.
func (f *Function) SetMaxDynamicSharedBytes(n int) error { return ErrNoCUDA }

// MaxActiveClusters returns ErrNoCUDA.
func (f *Function) MaxActiveClusters(grid, block, sharedBytes, cluster int) (int, error) {
	return 0, ErrNoCUDA
}

// MaxActiveBlocksPerSM returns ErrNoCUDA.
func (f *Function) MaxActiveBlocksPerSM(block, sharedBytes int) (int, error) { return 0, ErrNoCUDA }

// SetPreferredSharedCarveout returns ErrNoCUDA.
func (f *Function) SetPreferredSharedCarveout(percent int) error { return ErrNoCUDA }

// SetNonPortableClusterSizeAllowed returns ErrNoCUDA.
func (f *Function) SetNonPortableClusterSizeAllowed(allowed bool) error { return ErrNoCUDA }

// Launch returns ErrNoCUDA.
func (f *Function) Launch(grid, block Dim3, sharedBytes int, stream *Stream, args *Args) error {
	return ErrNoCUDA
}

// LaunchEx returns ErrNoCUDA.
func (f *Function) LaunchEx(cfg LaunchConfig, args *Args) error { return ErrNoCUDA }

// EncodeTensorMapTiled returns ErrNoCUDA without the "cuda" build tag
// (CheckTensorMapTiled validates the same arguments without a GPU).
func (c *Context) EncodeTensorMapTiled(dtype TensorMapDataType, rank int, globalAddr DevicePtr, globalDims, globalStrides []uint64,
	boxDims, elementStrides []uint32, interleave TensorMapInterleave, swizzle TensorMapSwizzle,
	l2Promotion TensorMapL2Promotion, oobFill TensorMapOOBFill) ([TensorMapBytes]byte, error) {
	return [TensorMapBytes]byte{}, ErrNoCUDA
}
