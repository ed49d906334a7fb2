//go:build cuda

package driver

/*
#cgo CFLAGS: -I${SRCDIR}/../.toolchain/cuda/include
#cgo LDFLAGS: -ldl
#include <stdlib.h>
#include "cuda_shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// The driver is opened (dlopen of libcuda.so.1) and initialized (cuInit) once,
// at the first call that needs it.
var libcuda struct {
	once sync.Once
	err  error
}

// noDevice wraps the reason no device can be used; errors.Is(err,
// ErrNoDevice) holds, and errors.As reaches the DriverError of cuInit.
type noDevice struct{ cause error }

// Error says there is no device and why.
func (e *noDevice) Error() string {
	return "mokc driver: no CUDA device: " + strings.TrimPrefix(e.cause.Error(), "mokc driver: ")
}

// Is makes errors.Is(err, ErrNoDevice) hold.
func (e *noDevice) Is(target error) bool { return target == ErrNoDevice }

// Unwrap returns the reason (the dlopen message or cuInit's DriverError).
func (e *noDevice) Unwrap() error { return e.cause }

func initDriver() error {
	libcuda.once.Do(func() {
		var msg [512]C.char
		if C.mk_load(&msg[0], C.size_t(len(msg))) != 0 {
			libcuda.err = &noDevice{errors.New(C.GoString(&msg[0]))}
			return
		}
		if r := C.mk_init(); r != C.CUDA_SUCCESS {
			libcuda.err = &noDevice{driverError("cuInit", r)}
		}
	})
	return libcuda.err
}

// driverError returns nil for CUDA_SUCCESS and a *DriverError otherwise.
func driverError(call string, r C.CUresult) error {
	if r == C.CUDA_SUCCESS {
		return nil
	}
	var name, msg *C.char
	C.mk_errorName(r, &name, &msg)
	e := &DriverError{Call: call, Code: int(r), Name: fmt.Sprintf("CUresult(%d)", int(r))}
	if name != nil {
		e.Name = C.GoString(name)
	} else if n, ok := initErrorNames[int(r)]; ok {
		e.Name = n
	}
	if msg != nil {
		e.Message = C.GoString(msg)
	}
	return e
}

// initErrorNames names the results cuInit can return when cuGetErrorName
// cannot be asked (the toolkit's stub libcuda answers every call with
// CUDA_ERROR_STUB_LIBRARY). Values from cuda.h.
var initErrorNames = map[int]string{
	int(C.CUDA_ERROR_INVALID_VALUE):                  "CUDA_ERROR_INVALID_VALUE",
	int(C.CUDA_ERROR_OUT_OF_MEMORY):                  "CUDA_ERROR_OUT_OF_MEMORY",
	int(C.CUDA_ERROR_NOT_INITIALIZED):                "CUDA_ERROR_NOT_INITIALIZED",
	int(C.CUDA_ERROR_STUB_LIBRARY):                   "CUDA_ERROR_STUB_LIBRARY",
	int(C.CUDA_ERROR_NO_DEVICE):                      "CUDA_ERROR_NO_DEVICE",
	int(C.CUDA_ERROR_DEVICE_UNAVAILABLE):             "CUDA_ERROR_DEVICE_UNAVAILABLE",
	int(C.CUDA_ERROR_SYSTEM_DRIVER_MISMATCH):         "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
	int(C.CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE): "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
	int(C.CUDA_ERROR_NOT_SUPPORTED):                  "CUDA_ERROR_NOT_SUPPORTED",
	int(C.CUDA_ERROR_UNKNOWN):                        "CUDA_ERROR_UNKNOWN",
}

// Available reports whether the driver loads, initializes and has at least
// one device.
func Available() bool {
	n, err := DeviceCount()
	return err == nil && n > 0
}

// DeviceCount returns the number of CUDA devices (cuDeviceGetCount). Without
// a usable driver it returns an error that is ErrNoDevice.
func DeviceCount() (int, error) {
	return driverInt("cuDeviceGetCount", func(n *C.int) C.CUresult { return C.mk_deviceGetCount(n) })
}

// DriverVersion returns the CUDA version the driver supports, as
// 1000*major + 10*minor (e.g. 12040 for 12.4), from cuDriverGetVersion.
func DriverVersion() (int, error) {
	return driverInt("cuDriverGetVersion", func(v *C.int) C.CUresult { return C.mk_driverGetVersion(v) })
}

// driverInt initializes the driver and returns the int that get, the
// driver call named call, writes.
func driverInt(call string, get func(*C.int) C.CUresult) (int, error) {
	if err := initDriver(); err != nil {
		return 0, err
	}
	var v C.int
	if err := driverError(call, get(&v)); err != nil {
		return 0, err
	}
	return int(v), nil
}

// Context is an open device: the device's primary context, retained by Open
// and released by Close. Every method makes the context current on the
// calling OS thread, so a Context may be used from any goroutine; the driver
// serializes what needs serializing.
type Context struct {
	ctx    C.CUcontext
	dev    C.CUdevice
	props  DeviceProps
	closed atomic.Bool
}

var errClosed = errors.New("mokc driver: context is closed")

// Open retains the primary context of device deviceOrdinal (0-based) and
// reads its properties. Contexts opened on the same device share the primary
// context and so their allocations and modules. Without a usable driver or
// device the error is ErrNoDevice (errors.Is).
func Open(deviceOrdinal int) (*Context, error) {
	n, err := DeviceCount()
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, &noDevice{errors.New("cuDeviceGetCount reports 0 devices")}
	}
	if deviceOrdinal < 0 || deviceOrdinal >= n {
		return nil, fmt.Errorf("mokc driver: device ordinal %d out of range: %d device(s)", deviceOrdinal, n)
	}
	c := &Context{}
	if err := driverError("cuDeviceGet", C.mk_deviceGet(&c.dev, C.int(deviceOrdinal))); err != nil {
		return nil, err
	}
	if err := c.readProps(deviceOrdinal); err != nil {
		return nil, err
	}
	if err := driverError("cuDevicePrimaryCtxRetain", C.mk_primaryCtxRetain(&c.ctx, c.dev)); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Context) readProps(ordinal int) error {
	p := &c.props
	p.Ordinal = ordinal
	var name [256]C.char
	if err := driverError("cuDeviceGetName", C.mk_deviceGetName(&name[0], C.int(len(name)), c.dev)); err != nil {
		return err
	}
	p.Name = C.GoString(&name[0])
	attrs := []intAttr{
		{C.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &p.ComputeMajor},
		{C.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &p.ComputeMinor},
		{C.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &p.SMCount},
		{C.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &p.MaxThreadsPerBlock},
		{C.CU_DEVICE_ATTRIBUTE_WARP_SIZE, &p.WarpSize},
		{C.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &p.MaxSharedBytesPerBlock},
		{C.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &p.MaxSharedBytesPerBlockOptin},
		{C.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, &p.MaxSharedBytesPerSM},
		{C.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, &p.MaxRegistersPerBlock},
		{C.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, &p.L2Bytes},
		{C.CU_DEVICE_ATTRIBUTE_CLOCK_RATE, &p.ClockKHz},
		{C.CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, &p.MemoryClockKHz},
		{C.CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, &p.MemoryBusWidthBits},
	}
	err := readAttrs("cuDeviceGetAttribute", attrs, func(v *C.int, attr C.int) C.CUresult {
		return C.mk_deviceGetAttribute(v, attr, c.dev)
	})
	if err != nil {
		return err
	}
	var total C.size_t
	if err := driverError("cuDeviceTotalMem", C.mk_deviceTotalMem(&total, c.dev)); err != nil {
		return err
	}
	p.TotalMemBytes = int(total)
	return nil
}

func (c *Context) live() error {
	if c == nil || c.closed.Load() {
		return errClosed
	}
	return nil
}

// Close releases the primary context (cuDevicePrimaryCtxRelease). When the
// last Context of the device closes, the driver destroys the primary context
// and with it every allocation, stream, event and module made through it.
// Closing twice is a no-op.
func (c *Context) Close() error {
	if c == nil || c.closed.Swap(true) {
		return nil
	}
	return driverError("cuDevicePrimaryCtxRelease", C.mk_primaryCtxRelease(c.dev))
}

// Device returns the properties read by Open.
func (c *Context) Device() DeviceProps { return c.props }

// Synchronize waits until all work in the context has finished
// (cuCtxSynchronize); an asynchronous kernel fault surfaces here. A kernel
// fault (illegal address or instruction) is sticky: every later call in the
// process fails with the same error.
func (c *Context) Synchronize() error {
	if err := c.live(); err != nil {
		return err
	}
	return driverError("cuCtxSynchronize", C.mk_ctxSynchronize(c.ctx))
}

// Alloc allocates bytes (> 0) of device memory (cuMemAlloc; 256-byte aligned
// or better). The memory is not initialized: poison it with Memset when a
// test must notice unwritten bytes.
func (c *Context) Alloc(bytes int) (DevicePtr, error) {
	if err := c.live(); err != nil {
		return 0, err
	}
	if bytes <= 0 {
		return 0, fmt.Errorf("mokc driver: Alloc(%d): size must be > 0 bytes", bytes)
	}
	var p C.CUdeviceptr
	if err := driverError("cuMemAlloc", C.mk_memAlloc(c.ctx, &p, C.size_t(bytes))); err != nil {
		return 0, err
	}
	return DevicePtr(p), nil
}

// Free releases memory from Alloc (cuMemFree).
func (c *Context) Free(ptr DevicePtr) error {
	if err := c.live(); err != nil {
		return err
	}
	return driverError("cuMemFree", C.mk_memFree(c.ctx, C.CUdeviceptr(ptr)))
}

// Memset sets bytes bytes at ptr to value (cuMemsetD8), synchronously with
// respect to the host for pageable semantics: it is ordered after all earlier
// work on the legacy default stream.
func (c *Context) Memset(ptr DevicePtr, value byte, bytes int) error {
	return c.sized("Memset", "cuMemsetD8", bytes, nil, func(n C.size_t, _ C.CUstream) C.CUresult {
		return C.mk_memsetD8(c.ctx, C.CUdeviceptr(ptr), C.uchar(value), n)
	})
}

// MemsetAsync is Memset on stream (cuMemsetD8Async; nil: the default stream).
func (c *Context) MemsetAsync(ptr DevicePtr, value byte, bytes int, stream *Stream) error {
	return c.sized("MemsetAsync", "cuMemsetD8Async", bytes, stream, func(n C.size_t, s C.CUstream) C.CUresult {
		return C.mk_memsetD8Async(c.ctx, C.CUdeviceptr(ptr), C.uchar(value), n, s)
	})
}

// CopyToDevice copies the whole host slice src to dst (cuMemcpyHtoD),
// len(src)*element-size bytes. src is a slice of a fixed-size numeric type
// ([]byte, []uint16, []int32, []float32, ..., or a named type over one, such
// as a bf16 type over uint16). The call returns when src may be reused.
func (c *Context) CopyToDevice(dst DevicePtr, src any) error {
	return c.hostCopy("cuMemcpyHtoD", src, nil, func(p unsafe.Pointer, n C.size_t, _ C.CUstream) C.CUresult {
		return C.mk_memcpyHtoD(c.ctx, C.CUdeviceptr(dst), p, n)
	})
}

// CopyFromDevice fills the whole host slice dst from src (cuMemcpyDtoH),
// len(dst)*element-size bytes; dst as for CopyToDevice. It returns when the
// data is in dst.
func (c *Context) CopyFromDevice(dst any, src DevicePtr) error {
	return c.hostCopy("cuMemcpyDtoH", dst, nil, func(p unsafe.Pointer, n C.size_t, _ C.CUstream) C.CUresult {
		return C.mk_memcpyDtoH(c.ctx, p, C.CUdeviceptr(src), n)
	})
}

// CopyToDeviceAsync is CopyToDevice ordered on stream (cuMemcpyHtoDAsync).
// Go slices are pageable memory, so the driver stages src before returning
// and src may be reused at once; the transfer itself may still be in flight.
func (c *Context) CopyToDeviceAsync(dst DevicePtr, src any, stream *Stream) error {
	return c.hostCopy("cuMemcpyHtoDAsync", src, stream, func(p unsafe.Pointer, n C.size_t, s C.CUstream) C.CUresult {
		return C.mk_memcpyHtoDAsync(c.ctx, C.CUdeviceptr(dst), p, n, s)
	})
}

// CopyFromDeviceAsync is CopyFromDevice ordered on stream
// (cuMemcpyDtoHAsync). Into pageable Go memory the driver completes the copy
// before returning, so dst is filled when the call returns.
func (c *Context) CopyFromDeviceAsync(dst any, src DevicePtr, stream *Stream) error {
	return c.hostCopy("cuMemcpyDtoHAsync", dst, stream, func(p unsafe.Pointer, n C.size_t, s C.CUstream) C.CUresult {
		return C.mk_memcpyDtoHAsync(c.ctx, p, C.CUdeviceptr(src), n, s)
	})
}

// CopyDeviceToDevice copies bytes bytes from src to dst (cuMemcpyDtoD).
func (c *Context) CopyDeviceToDevice(dst, src DevicePtr, bytes int) error {
	if bytes == 0 {
		return c.live()
	}
	return c.sized("CopyDeviceToDevice", "cuMemcpyDtoD", bytes, nil, func(n C.size_t, _ C.CUstream) C.CUresult {
		return C.mk_memcpyDtoD(c.ctx, C.CUdeviceptr(dst), C.CUdeviceptr(src), n)
	})
}

// sized checks that c is open, stream usable (nil: the default stream) and
// bytes >= 0 (else an error naming method), then runs run, the driver
// call named call, with bytes and the stream's handle.
func (c *Context) sized(method, call string, bytes int, stream *Stream, run func(n C.size_t, s C.CUstream) C.CUresult) error {
	if err := c.live(); err != nil {
		return err
	}
	s, err := stream.handle()
	if err != nil {
		return err
	}
	if bytes < 0 {
		return fmt.Errorf("mokc driver: %s: negative size %d", method, bytes)
	}
	return driverError(call, run(C.size_t(bytes), s))
}

// hostCopy checks that c is open and stream usable (nil: the default
// stream), then runs the driver copy named call over the whole host slice
// h (hostBytes): its address, its size in bytes and the stream's handle.
// An empty slice copies nothing.
func (c *Context) hostCopy(call string, h any, stream *Stream, run func(p unsafe.Pointer, n C.size_t, s C.CUstream) C.CUresult) error {
	if err := c.live(); err != nil {
		return err
	}
	s, err := stream.handle()
	if err != nil {
		return err
	}
	p, n, err := hostBytes(h)
	if err != nil || n == 0 {
		return err
	}
	return driverError(call, run(p, C.size_t(n), s))
}

// Stream is a CUDA stream (cuStreamCreate with CU_STREAM_DEFAULT: it
// synchronizes with the legacy default stream). A nil *Stream passed to any
// call means the legacy default stream.
type Stream struct {
	ctx       *Context
	s         C.CUstream
	destroyed bool
}

var errStreamDestroyed = errors.New("mokc driver: stream is destroyed")

func (s *Stream) handle() (C.CUstream, error) {
	if s == nil {
		return nil, nil
	}
	if s.destroyed {
		return nil, errStreamDestroyed
	}
	return s.s, s.ctx.live()
}

// NewStream creates a stream.
func (c *Context) NewStream() (*Stream, error) {
	s := &Stream{ctx: c}
	return created(c, "cuStreamCreate", s, func() C.CUresult { return C.mk_streamCreate(c.ctx, &s.s) })
}

// created returns v once create, the driver call named call that fills
// v's handle in c, succeeds (nil and the error otherwise, or when c is
// closed).
func created[T any](c *Context, call string, v *T, create func() C.CUresult) (*T, error) {
	if err := c.live(); err != nil {
		return nil, err
	}
	if err := driverError(call, create()); err != nil {
		return nil, err
	}
	return v, nil
}

// Synchronize waits until all work on the stream has finished
// (cuStreamSynchronize); nil waits on the default stream.
func (s *Stream) Synchronize() error {
	h, err := s.handle()
	if err != nil {
		return err
	}
	if s == nil {
		return errors.New("mokc driver: Synchronize on a nil stream: use Context.Synchronize")
	}
	return driverError("cuStreamSynchronize", C.mk_streamSynchronize(s.ctx.ctx, h))
}

// Destroy destroys the stream (cuStreamDestroy); work already queued still
// completes.
func (s *Stream) Destroy() error {
	h, err := s.handle()
	if err != nil || s == nil {
		return err
	}
	s.destroyed = true
	return driverError("cuStreamDestroy", C.mk_streamDestroy(s.ctx.ctx, h))
}

// BeginCapture starts recording the work queued on the stream into a graph
// (cuStreamBeginCapture, CU_STREAM_CAPTURE_MODE_RELAXED: the calls of
// other threads are not checked, since a goroutine may move between
// threads): launches, asynchronous copies and memsets on the stream are
// recorded, not run, until EndCapture. The stream must not be nil (the
// legacy default stream cannot be captured).
func (s *Stream) BeginCapture() error {
	if s == nil {
		return errors.New("mokc driver: BeginCapture on a nil stream: capture a stream of NewStream")
	}
	h, err := s.handle()
	if err != nil {
		return err
	}
	return driverError("cuStreamBeginCapture", C.mk_streamBeginCapture(s.ctx.ctx, h))
}

// EndCapture ends the capture BeginCapture started and returns the
// recorded work as an instantiated graph (cuStreamEndCapture,
// cuGraphInstantiate with no flags).
func (s *Stream) EndCapture() (*Graph, error) {
	if s == nil {
		return nil, errors.New("mokc driver: EndCapture on a nil stream")
	}
	h, err := s.handle()
	if err != nil {
		return nil, err
	}
	g := &Graph{ctx: s.ctx}
	if err := driverError("cuStreamEndCapture", C.mk_streamEndCapture(s.ctx.ctx, h, &g.g)); err != nil {
		return nil, err
	}
	if err := driverError("cuGraphInstantiate", C.mk_graphInstantiate(s.ctx.ctx, &g.exec, g.g)); err != nil {
		C.mk_graphDestroy(s.ctx.ctx, g.g)
		return nil, err
	}
	return g, nil
}

// Graph is recorded work, instantiated: each Launch replays it with the
// arguments it was recorded with (device addresses included), so new
// inputs are written into the same buffers before a replay.
type Graph struct {
	ctx       *Context
	g         C.CUgraph
	exec      C.CUgraphExec
	destroyed bool
}

// Launch queues one replay of the graph on stream (cuGraphLaunch; nil: the
// default stream).
func (g *Graph) Launch(stream *Stream) error {
	if err := g.live(); err != nil {
		return err
	}
	h, err := stream.handle()
	if err != nil {
		return err
	}
	return driverError("cuGraphLaunch", C.mk_graphLaunch(g.ctx.ctx, g.exec, h))
}

// live refuses a nil or destroyed graph, or one whose context is closed.
func (g *Graph) live() error {
	if g == nil || g.destroyed {
		return errors.New("mokc driver: graph is nil or destroyed")
	}
	return g.ctx.live()
}

// Destroy releases the graph (cuGraphExecDestroy, cuGraphDestroy); replays
// already queued still complete.
func (g *Graph) Destroy() error {
	if g.destroyed {
		return nil
	}
	g.destroyed = true
	if err := g.ctx.live(); err != nil {
		return err
	}
	err := driverError("cuGraphExecDestroy", C.mk_graphExecDestroy(g.ctx.ctx, g.exec))
	return errors.Join(err, driverError("cuGraphDestroy", C.mk_graphDestroy(g.ctx.ctx, g.g)))
}

// Event is a CUDA event with timing enabled (cuEventCreate,
// CU_EVENT_DEFAULT).
type Event struct {
	ctx       *Context
	e         C.CUevent
	destroyed bool
}

func (e *Event) live() error {
	if e == nil || e.destroyed {
		return errors.New("mokc driver: event is nil or destroyed")
	}
	return e.ctx.live()
}

// NewEvent creates an event.
func (c *Context) NewEvent() (*Event, error) {
	e := &Event{ctx: c}
	return created(c, "cuEventCreate", e, func() C.CUresult { return C.mk_eventCreate(c.ctx, &e.e) })
}

// Record records the event on stream (cuEventRecord; nil: the default
// stream): it completes when all work queued on stream before it has.
func (e *Event) Record(stream *Stream) error {
	if err := e.live(); err != nil {
		return err
	}
	s, err := stream.handle()
	if err != nil {
		return err
	}
	return driverError("cuEventRecord", C.mk_eventRecord(e.ctx.ctx, e.e, s))
}

// Synchronize waits until the event has completed (cuEventSynchronize).
func (e *Event) Synchronize() error {
	if err := e.live(); err != nil {
		return err
	}
	return driverError("cuEventSynchronize", C.mk_eventSynchronize(e.ctx.ctx, e.e))
}

// Destroy destroys the event (cuEventDestroy).
func (e *Event) Destroy() error {
	if err := e.live(); err != nil {
		return err
	}
	e.destroyed = true
	return driverError("cuEventDestroy", C.mk_eventDestroy(e.ctx.ctx, e.e))
}

// ElapsedMs waits for end and returns the time between the two recorded
// events in milliseconds (cuEventElapsedTime; resolution about 0.5 us).
func ElapsedMs(start, end *Event) (float32, error) {
	if err := start.live(); err != nil {
		return 0, err
	}
	if err := end.Synchronize(); err != nil {
		return 0, err
	}
	var ms C.float
	if err := driverError("cuEventElapsedTime", C.mk_eventElapsedTime(end.ctx.ctx, &ms, start.e, end.e)); err != nil {
		return 0, err
	}
	return float32(ms), nil
}

// Module is a module JIT-compiled from PTX by the driver.
type Module struct {
	ctx      *Context
	mod      C.CUmodule
	info     string
	params   map[string]int // parameter count per .entry, from the PTX text
	unloaded bool
}

// jitLogBytes is the size of each JIT log buffer.
const jitLogBytes = 1 << 16

// LoadModule JIT-compiles PTX text and loads it (cuModuleLoadDataEx with
// CU_JIT_ERROR_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER and CU_JIT_LOG_VERBOSE).
// When the JIT refuses the PTX the error is a *DriverError (usually
// CUDA_ERROR_INVALID_PTX) whose Log, also printed by Error(), holds ptxas's
// messages with PTX line numbers. On success InfoLog returns the verbose log
// (registers, shared memory, spills per kernel).
func (c *Context) LoadModule(ptx string) (*Module, error) {
	if err := c.live(); err != nil {
		return nil, err
	}
	if strings.IndexByte(ptx, 0) >= 0 {
		return nil, errors.New("mokc driver: LoadModule: PTX text contains a NUL byte")
	}
	img := C.CString(ptx)
	defer C.free(unsafe.Pointer(img))
	errLog := (*C.char)(C.calloc(jitLogBytes, 1))
	defer C.free(unsafe.Pointer(errLog))
	infoLog := (*C.char)(C.calloc(jitLogBytes, 1))
	defer C.free(unsafe.Pointer(infoLog))
	m := &Module{ctx: c}
	r := C.mk_moduleLoad(c.ctx, &m.mod, img, errLog, jitLogBytes, infoLog, jitLogBytes)
	info := strings.TrimSpace(cBuffer(infoLog, jitLogBytes))
	if err := driverError("cuModuleLoadDataEx", r); err != nil {
		de := err.(*DriverError)
		de.Log = strings.TrimSpace(cBuffer(errLog, jitLogBytes))
		if de.Log == "" {
			de.Log = info
		}
		return nil, de
	}
	m.info = info
	m.params = ptxEntryParams(ptx)
	return m, nil
}

// cBuffer returns the NUL-terminated string in a C buffer of n bytes.
func cBuffer(p *C.char, n int) string {
	b := unsafe.Slice((*byte)(unsafe.Pointer(p)), n)
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

// InfoLog returns the JIT's verbose log of the load.
func (m *Module) InfoLog() string { return m.info }

func (m *Module) live() error {
	if m == nil || m.unloaded {
		return errors.New("mokc driver: module is nil or unloaded")
	}
	return m.ctx.live()
}

// Function looks up the kernel (.entry) called name (cuModuleGetFunction).
func (m *Module) Function(name string) (*Function, error) {
	if err := m.live(); err != nil {
		return nil, err
	}
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	f := &Function{ctx: m.ctx, mod: m, name: name, nParams: -1}
	if n, ok := m.params[name]; ok {
		f.nParams = n
	}
	if err := driverError("cuModuleGetFunction", C.mk_moduleGetFunction(m.ctx.ctx, &f.fn, m.mod, cname)); err != nil {
		var de *DriverError
		if errors.As(err, &de) {
			de.Message += ": kernel " + name
		}
		return nil, err
	}
	return f, nil
}

// Unload unloads the module (cuModuleUnload); its Functions become invalid.
func (m *Module) Unload() error {
	if err := m.live(); err != nil {
		return err
	}
	m.unloaded = true
	return driverError("cuModuleUnload", C.mk_moduleUnload(m.ctx.ctx, m.mod))
}

// Function is a kernel of a loaded Module.
type Function struct {
	ctx  *Context
	mod  *Module
	fn   C.CUfunction
	name string
	// nParams is the kernel's parameter count from the module's PTX text,
	// -1 when the scan did not find the entry.
	nParams int

	paramsOnce sync.Once
	params     []int
	paramsErr  error
}

func (f *Function) live() error {
	if f == nil {
		return errors.New("mokc driver: nil function")
	}
	return f.mod.live()
}

// Name returns the kernel's name.
func (f *Function) Name() string { return f.name }

// Attributes reads the kernel's resource usage (cuFuncGetAttribute).
func (f *Function) Attributes() (FuncAttributes, error) {
	var a FuncAttributes
	if err := f.live(); err != nil {
		return a, err
	}
	list := []intAttr{
		{C.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &a.MaxThreadsPerBlock},
		{C.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, &a.StaticSharedBytes},
		{C.CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES, &a.ConstBytes},
		{C.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, &a.LocalBytes},
		{C.CU_FUNC_ATTRIBUTE_NUM_REGS, &a.NumRegs},
		{C.CU_FUNC_ATTRIBUTE_PTX_VERSION, &a.PTXVersion},
		{C.CU_FUNC_ATTRIBUTE_BINARY_VERSION, &a.BinaryVersion},
		{C.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, &a.MaxDynamicSharedBytes},
	}
	err := readAttrs("cuFuncGetAttribute", list, func(v *C.int, attr C.int) C.CUresult {
		return C.mk_funcGetAttribute(f.ctx.ctx, v, attr, f.fn)
	})
	return a, err
}

// intAttr is a driver attribute (a CU_DEVICE_ATTRIBUTE_* or
// CU_FUNC_ATTRIBUTE_* value) and where readAttrs stores it.
type intAttr struct {
	attr C.int
	dst  *int
}

// readAttrs reads every attribute of list with get, the driver call named
// call, stopping at the first error.
func readAttrs(call string, list []intAttr, get func(v *C.int, attr C.int) C.CUresult) error {
	for _, a := range list {
		var v C.int
		if err := driverError(call, get(&v, a.attr)); err != nil {
			return err
		}
		*a.dst = int(v)
	}
	return nil
}

// maxParams bounds the parameter scan (kernel parameter space is at most
// 32764 bytes since CUDA 12.1).
const maxParams = 32764

// ParamSizes returns the size in bytes of each of the kernel's parameters,
// in order, from cuFuncGetParamInfo (driver 12.4+; with an older driver the
// error is a *DriverError CUDA_ERROR_NOT_SUPPORTED). The parameter count
// comes from the module's PTX, so no call asks past the last parameter.
func (f *Function) ParamSizes() ([]int, error) {
	if err := f.live(); err != nil {
		return nil, err
	}
	f.paramsOnce.Do(func() {
		if C.mk_has_param_info() == 0 {
			f.paramsErr = driverError("cuFuncGetParamInfo", C.CUDA_ERROR_NOT_SUPPORTED)
			return
		}
		limit := maxParams
		if f.nParams >= 0 {
			limit = f.nParams
		}
		sizes := []int{}
		for i := 0; i < limit; i++ {
			var off, size C.size_t
			r := C.mk_funcGetParamInfo(f.ctx.ctx, f.fn, C.size_t(i), &off, &size)
			if r == C.CUDA_ERROR_INVALID_VALUE {
				break // past the last parameter
			}
			if err := driverError("cuFuncGetParamInfo", r); err != nil {
				f.paramsErr = err
				return
			}
			sizes = append(sizes, int(size))
		}
		f.params = sizes
	})
	return append([]int(nil), f.params...), f.paramsErr
}

// SetMaxDynamicSharedBytes lets launches of the kernel request up to n bytes
// of dynamic shared memory (cuFuncSetAttribute
// CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES). It is required above
// 48 KiB; n plus the static shared memory must not exceed
// DeviceProps.MaxSharedBytesPerBlockOptin.
func (f *Function) SetMaxDynamicSharedBytes(n int) error {
	if err := f.live(); err != nil {
		return err
	}
	if n < 0 {
		return fmt.Errorf("mokc driver: SetMaxDynamicSharedBytes(%d): negative size", n)
	}
	return driverError("cuFuncSetAttribute", C.mk_funcSetAttribute(f.ctx.ctx, f.fn,
		C.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, C.int(n)))
}

// MaxActiveClusters returns how many thread-block clusters of cluster
// blocks (along x) of the kernel, each block of block threads with
// sharedBytes of dynamic shared memory, can be resident on the device at
// once (cuOccupancyMaxActiveClusters; grid is the grid the launch would
// use, a multiple of cluster). A persistent kernel in clusters sizes its
// grid by it: clusters past it would only start once others end. Set
// SetMaxDynamicSharedBytes first when sharedBytes exceeds 48 KiB.
func (f *Function) MaxActiveClusters(grid, block, sharedBytes, cluster int) (int, error) {
	if err := f.live(); err != nil {
		return 0, err
	}
	if cluster < 1 || grid < cluster || grid%cluster != 0 || block < 1 || sharedBytes < 0 {
		return 0, fmt.Errorf("mokc driver: MaxActiveClusters(grid %d, block %d, shared %d, cluster %d): want a grid of whole clusters", grid, block, sharedBytes, cluster)
	}
	var n C.int
	if err := driverError("cuOccupancyMaxActiveClusters", C.mk_maxActiveClusters(f.ctx.ctx, &n, f.fn,
		C.uint(grid), C.uint(block), C.uint(sharedBytes), C.uint(cluster))); err != nil {
		return 0, fmt.Errorf("%w (kernel %s)", err, f.name)
	}
	return int(n), nil
}

// MaxActiveBlocksPerSM returns how many blocks of the kernel, each of
// block threads with sharedBytes of dynamic shared memory, can be
// resident on one SM at once (cuOccupancyMaxActiveBlocksPerMultiprocessor),
// given its registers per thread and the shared-memory carveout it asks
// for (SetPreferredSharedCarveout). A persistent kernel meant to run
// several blocks per SM sizes its grid by it. Set SetMaxDynamicSharedBytes
// first when sharedBytes exceeds 48 KiB.
func (f *Function) MaxActiveBlocksPerSM(block, sharedBytes int) (int, error) {
	if err := f.live(); err != nil {
		return 0, err
	}
	if block < 1 || sharedBytes < 0 {
		return 0, fmt.Errorf("mokc driver: MaxActiveBlocksPerSM(block %d, shared %d): want a block of at least one thread", block, sharedBytes)
	}
	var n C.int
	if err := driverError("cuOccupancyMaxActiveBlocksPerMultiprocessor", C.mk_maxActiveBlocks(f.ctx.ctx, &n, f.fn,
		C.int(block), C.size_t(sharedBytes))); err != nil {
		return 0, fmt.Errorf("%w (kernel %s)", err, f.name)
	}
	return int(n), nil
}

// SetPreferredSharedCarveout asks that an SM running the kernel give
// percent (0..100) of its unified L1/shared memory to shared memory
// (cuFuncSetAttribute CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT;
// 100: the most shared memory, which a kernel of several blocks per SM,
// each with a large share, needs). The driver takes it as a hint.
func (f *Function) SetPreferredSharedCarveout(percent int) error {
	if err := f.live(); err != nil {
		return err
	}
	if percent < 0 || percent > 100 {
		return fmt.Errorf("mokc driver: SetPreferredSharedCarveout(%d): want a percentage 0..100", percent)
	}
	return driverError("cuFuncSetAttribute", C.mk_funcSetAttribute(f.ctx.ctx, f.fn,
		C.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, C.int(percent)))
}

// SetNonPortableClusterSizeAllowed allows clusters of more than 8 blocks
// (up to 16 on H100/H200) for the kernel (cuFuncSetAttribute
// CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED).
func (f *Function) SetNonPortableClusterSizeAllowed(allowed bool) error {
	if err := f.live(); err != nil {
		return err
	}
	v := C.int(0)
	if allowed {
		v = 1
	}
	return driverError("cuFuncSetAttribute", C.mk_funcSetAttribute(f.ctx.ctx, f.fn,
		C.CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, v))
}

// Launch queues the kernel on stream (nil: the legacy default stream) with
// grid blocks of block threads and sharedBytes bytes of dynamic shared memory
// (cuLaunchKernel). Each argument is passed with exactly its size in Args;
// when the driver reports the kernel's parameter list (cuFuncGetParamInfo)
// a count or size mismatch is an error before launch. The launch is
// asynchronous: execution faults surface at the next synchronizing call.
func (f *Function) Launch(grid, block Dim3, sharedBytes int, stream *Stream, args *Args) error {
	return f.launch(false, LaunchConfig{Grid: grid, Block: block, SharedBytes: sharedBytes, Stream: stream}, args)
}

// LaunchEx is Launch through cuLaunchKernelEx, with the launch attributes
// of cfg (a thread-block cluster size when cfg.Cluster is set, programmatic
// stream serialization with cfg.Programmatic).
func (f *Function) LaunchEx(cfg LaunchConfig, args *Args) error {
	return f.launch(true, cfg, args)
}

func (f *Function) launch(ex bool, cfg LaunchConfig, args *Args) error {
	if err := f.live(); err != nil {
		return err
	}
	s, err := cfg.Stream.handle()
	if err != nil {
		return err
	}
	if err := checkLaunch(cfg.Grid, cfg.Block, cfg.SharedBytes, cfg.Cluster); err != nil {
		return fmt.Errorf("%w (kernel %s)", err, f.name)
	}
	if err := args.Err(); err != nil {
		return err
	}
	if f.nParams >= 0 && args.Len() != f.nParams {
		// The driver would read f.nParams pointers from kernelParams.
		return fmt.Errorf("mokc driver: launch %s: kernel has %d parameters, Args has %d", f.name, f.nParams, args.Len())
	}
	if want, err := f.ParamSizes(); err == nil {
		if err := checkParamSizes(f.name, want, args); err != nil {
			return err
		}
	}
	g, b := cfg.Grid.normalized(), cfg.Block.normalized()
	var c [3]int
	if cfg.Cluster != (Dim3{}) {
		c = cfg.Cluster.normalized()
	}
	var blob unsafe.Pointer
	var offs *C.uint64_t
	n := args.Len()
	if n > 0 {
		blob = unsafe.Pointer(&args.buf[0])
		offs = (*C.uint64_t)(unsafe.Pointer(&args.offs[0]))
	}
	exFlag, call := C.int(0), "cuLaunchKernel"
	if ex {
		exFlag, call = 1, "cuLaunchKernelEx"
	}
	r := C.mk_launch(f.ctx.ctx, f.fn, exFlag,
		C.uint(g[0]), C.uint(g[1]), C.uint(g[2]),
		C.uint(b[0]), C.uint(b[1]), C.uint(b[2]),
		C.uint(c[0]), C.uint(c[1]), C.uint(c[2]), cBool(cfg.Programmatic),
		C.uint(cfg.SharedBytes), s,
		blob, C.size_t(len(argsBuf(args))), offs, C.int(n))
	if err := driverError(call, r); err != nil {
		var de *DriverError
		if errors.As(err, &de) {
			de.Message += ": kernel " + f.name
		}
		return err
	}
	return nil
}

func argsBuf(a *Args) []byte {
	if a == nil {
		return nil
	}
	return a.buf
}

// EncodeTensorMapTiled encodes a TMA tensor map (cuTensorMapEncodeTiled) for
// a tensor at globalAddr and returns its 128 bytes, to be passed by value with
// Args.Bytes to a kernel parameter `.param .align 64 .b8 name[128]`.
// Dimension 0 is the innermost (contiguous) one; globalDims are in elements,
// globalStrides (rank-1 entries, dimensions 1..rank-1) in bytes, boxDims in
// elements; elementStrides may be nil for all 1. The arguments are first
// validated by CheckTensorMapTiled, whose error names the violated rule; a
// refusal by the driver is a *DriverError. The context is made current on
// the calling thread first: without a current context the driver refuses
// the encoding (CUDA_ERROR_INVALID_CONTEXT, seen on the H200 when a
// goroutine moved to another OS thread). The tensor map is only usable on
// sm_90 or newer.
//
// In the kernel, take the parameter's generic address with
// `mov.b64 %rd, name; cvta.param.u64 %rd, %rd;` (without the cvta the H200
// faults with CUDA_ERROR_MISALIGNED_ADDRESS). Measured on the H200 (driver
// 580): the box's inner start coordinate times the element size must be a
// multiple of 16 bytes, else the load faults with
// CUDA_ERROR_ILLEGAL_INSTRUCTION; outer and negative coordinates are free and
// out-of-bounds elements read as zero with OOBFillZero.
func (c *Context) EncodeTensorMapTiled(dtype TensorMapDataType, rank int, globalAddr DevicePtr, globalDims, globalStrides []uint64,
	boxDims, elementStrides []uint32, interleave TensorMapInterleave, swizzle TensorMapSwizzle,
	l2Promotion TensorMapL2Promotion, oobFill TensorMapOOBFill) ([TensorMapBytes]byte, error) {
	var out [TensorMapBytes]byte
	if err := CheckTensorMapTiled(dtype, rank, globalAddr, globalDims, globalStrides, boxDims, elementStrides,
		interleave, swizzle, l2Promotion, oobFill); err != nil {
		return out, err
	}
	if err := c.live(); err != nil {
		return out, err
	}
	if elementStrides == nil {
		elementStrides = make([]uint32, rank)
		for i := range elementStrides {
			elementStrides[i] = 1
		}
	}
	strides := append([]uint64(nil), globalStrides...)
	if len(strides) == 0 {
		strides = []uint64{0} // rank 1: the driver reads no stride
	}
	r := C.mk_tensorMapEncodeTiled(c.ctx, unsafe.Pointer(&out[0]), C.int(dtype), C.uint(rank), C.uint64_t(globalAddr),
		(*C.cuuint64_t)(unsafe.Pointer(&globalDims[0])), (*C.cuuint64_t)(unsafe.Pointer(&strides[0])),
		(*C.cuuint32_t)(unsafe.Pointer(&boxDims[0])), (*C.cuuint32_t)(unsafe.Pointer(&elementStrides[0])),
		C.int(interleave), C.int(swizzle), C.int(l2Promotion), C.int(oobFill))
	if err := driverError("cuTensorMapEncodeTiled", r); err != nil {
		return out, err
	}
	return out, nil
}

// cBool is b as a C int (1 or 0).
func cBool(b bool) C.int {
	if b {
		return 1
	}
	return 0
}
