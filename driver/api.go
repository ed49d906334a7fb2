package driver

// The exported API, checked at compile time in both builds (with and without
// the "cuda" tag) so that the two cannot drift apart.
var (
	_ func() bool                           = Available
	_ func() (int, error)                   = DeviceCount
	_ func() (int, error)                   = DriverVersion
	_ func(int) (*Context, error)           = Open
	_ func(*Event, *Event) (float32, error) = ElapsedMs
	_ func(*Context, TensorMapDataType, int, DevicePtr, []uint64, []uint64, []uint32, []uint32,
		TensorMapInterleave, TensorMapSwizzle, TensorMapL2Promotion, TensorMapOOBFill) ([TensorMapBytes]byte, error) = (*Context).EncodeTensorMapTiled

	_ interface {
		Close() error
		Device() DeviceProps
		Synchronize() error
		Alloc(bytes int) (DevicePtr, error)
		Free(ptr DevicePtr) error
		Memset(ptr DevicePtr, value byte, bytes int) error
		MemsetAsync(ptr DevicePtr, value byte, bytes int, stream *Stream) error
		CopyToDevice(dst DevicePtr, src any) error
		CopyFromDevice(dst any, src DevicePtr) error
		CopyToDeviceAsync(dst DevicePtr, src any, stream *Stream) error
		CopyFromDeviceAsync(dst any, src DevicePtr, stream *Stream) error
		CopyDeviceToDevice(dst, src DevicePtr, bytes int) error
		NewStream() (*Stream, error)
		NewEvent() (*Event, error)
		LoadModule(ptx string) (*Module, error)
	} = (*Context)(nil)

	_ interface {
		Synchronize() error
		Destroy() error
	} = (*Stream)(nil)

	_ interface {
		Record(stream *Stream) error
		Synchronize() error
		Destroy() error
	} = (*Event)(nil)

	_ interface {
		Function(name string) (*Function, error)
		InfoLog() string
		Unload() error
	} = (*Module)(nil)

	_ interface {
		Name() string
		Attributes() (FuncAttributes, error)
		ParamSizes() ([]int, error)
		SetMaxDynamicSharedBytes(n int) error
		SetNonPortableClusterSizeAllowed(allowed bool) error
		MaxActiveBlocksPerSM(block, sharedBytes int) (int, error)
		SetPreferredSharedCarveout(percent int) error
		Launch(grid, block Dim3, sharedBytes int, stream *Stream, args *Args) error
		LaunchEx(cfg LaunchConfig, args *Args) error
	} = (*Function)(nil)
)
