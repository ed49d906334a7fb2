//go:build cuda

package driver_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/internal/gputest"
)

// These tests need a GPU. Without one (no driver, the toolkit's stub
// libcuda, or no device) they skip; with MOKC_REQUIRE_GPU=1 they fail
// instead (gputest.Open), so a run on a GPU machine cannot pass by
// skipping. Build the binary here with `go test -c -tags cuda ./driver` and
// run it there.

func newRand(t *testing.T) *rand.Rand {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0x6d6f6b63))
}

func alloc(t *testing.T, ctx *driver.Context, bytes int) driver.DevicePtr {
	t.Helper()
	p, err := ctx.Alloc(bytes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctx.Free(p); err != nil {
			t.Error(err)
		}
	})
	return p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestDeviceOpen(t *testing.T) {
	ctx := gputest.Open(t)
	p := ctx.Device()
	t.Logf("%+v", p)
	if p.Name == "" || p.SMCount <= 0 || p.WarpSize != 32 || p.ComputeCapability() < 70 ||
		p.MaxThreadsPerBlock < 1024 || p.L2Bytes <= 0 || p.TotalMemBytes <= 0 ||
		p.MaxSharedBytesPerBlock < 48*1024 || p.MaxSharedBytesPerBlockOptin < p.MaxSharedBytesPerBlock {
		t.Fatalf("implausible device properties %+v", p)
	}
	v, err := driver.DriverVersion()
	must(t, err)
	if v < 12000 {
		t.Fatalf("driver version %d, want CUDA 12 or newer", v)
	}
	n, err := driver.DeviceCount()
	must(t, err)
	if !driver.Available() || n < 1 {
		t.Fatal("device opened but Available() or DeviceCount() disagree")
	}
	if _, err := driver.Open(n); err == nil || !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("Open(%d): %v", n, err)
	}
	if _, err := driver.Open(-1); err == nil {
		t.Fatal("Open(-1) succeeded")
	}
}

func TestAllocCopyRoundTrip(t *testing.T) {
	ctx := gputest.Open(t)
	r := newRand(t)
	const n = 1<<16 + 7
	f32 := make([]float32, n)
	u16 := make([]uint16, n)
	i32 := make([]int32, n)
	u8 := make([]uint8, n)
	for i := range n {
		f32[i] = r.Float32()*2 - 1
		u16[i] = uint16(r.Uint32())
		i32[i] = int32(r.Uint32())
		u8[i] = uint8(r.Uint32())
	}
	stream, err := ctx.NewStream()
	must(t, err)
	defer stream.Destroy()
	for _, c := range []struct {
		name    string
		src     any
		dst     func() any
		bytes   int
		compare func(any) bool
	}{
		{"f32", f32, func() any { return make([]float32, n) }, 4 * n, func(v any) bool { return slices.Equal(v.([]float32), f32) }},
		{"u16", u16, func() any { return make([]uint16, n) }, 2 * n, func(v any) bool { return slices.Equal(v.([]uint16), u16) }},
		{"i32", i32, func() any { return make([]int32, n) }, 4 * n, func(v any) bool { return slices.Equal(v.([]int32), i32) }},
		{"u8", u8, func() any { return make([]uint8, n) }, n, func(v any) bool { return slices.Equal(v.([]uint8), u8) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			poison := byte(r.Uint32() | 1)
			// One guard region of 256 bytes after the data proves the copy
			// wrote exactly len*size bytes.
			d := alloc(t, ctx, c.bytes+256)
			must(t, ctx.Memset(d, poison, c.bytes+256))
			must(t, ctx.CopyToDevice(d, c.src))
			back := c.dst()
			must(t, ctx.CopyFromDevice(back, d))
			if !c.compare(back) {
				t.Fatal("synchronous round trip differs")
			}
			guard := make([]byte, 256)
			must(t, ctx.CopyFromDevice(guard, d.Offset(c.bytes)))
			for i, b := range guard {
				if b != poison {
					t.Fatalf("guard byte %d = %#x, want poison %#x", i, b, poison)
				}
			}
			// Async on a stream, through a device-to-device copy.
			d2 := alloc(t, ctx, c.bytes)
			must(t, ctx.MemsetAsync(d2, poison, c.bytes, stream))
			must(t, ctx.CopyToDeviceAsync(d2, c.src, stream))
			must(t, stream.Synchronize())
			d3 := alloc(t, ctx, c.bytes)
			must(t, ctx.CopyDeviceToDevice(d3, d2, c.bytes))
			back = c.dst()
			must(t, ctx.CopyFromDeviceAsync(back, d3, stream))
			must(t, stream.Synchronize())
			if !c.compare(back) {
				t.Fatal("asynchronous round trip differs")
			}
		})
	}
	if _, err := ctx.Alloc(0); err == nil {
		t.Error("Alloc(0) succeeded")
	}
	d := alloc(t, ctx, 64)
	if err := ctx.CopyToDevice(d, []string{"x"}); err == nil {
		t.Error("CopyToDevice accepted []string")
	}
}

func TestMemset(t *testing.T) {
	ctx := gputest.Open(t)
	r := newRand(t)
	const n = 1 << 20
	d := alloc(t, ctx, n)
	a, b := byte(r.Uint32()), byte(r.Uint32())
	if a == b {
		b = ^a
	}
	lo, hi := 1+r.IntN(n/2), n/2+r.IntN(n/2-1)
	must(t, ctx.Memset(d, a, n))
	must(t, ctx.Memset(d.Offset(lo), b, hi-lo))
	got := make([]byte, n)
	must(t, ctx.CopyFromDevice(got, d))
	for i, v := range got {
		want := a
		if i >= lo && i < hi {
			want = b
		}
		if v != want {
			t.Fatalf("byte %d = %#x, want %#x (range [%d,%d) set to %#x)", i, v, want, lo, hi, b)
		}
	}
}

func TestEventsTiming(t *testing.T) {
	ctx := gputest.Open(t)
	s, err := ctx.NewStream()
	must(t, err)
	defer s.Destroy()
	start, err := ctx.NewEvent()
	must(t, err)
	defer start.Destroy()
	end, err := ctx.NewEvent()
	must(t, err)
	defer end.Destroy()
	const n = 256 << 20
	d := alloc(t, ctx, n)
	must(t, start.Record(s))
	for range 4 {
		must(t, ctx.MemsetAsync(d, 0x5A, n, s))
	}
	must(t, end.Record(s))
	ms, err := driver.ElapsedMs(start, end)
	must(t, err)
	t.Logf("4 x 256 MiB memset: %.3f ms (%.0f GB/s)", ms, 4*float64(n)/float64(ms)/1e6)
	if !(ms > 0) || ms > 10000 {
		t.Fatalf("elapsed %v ms", ms)
	}
}

func loadFunction(t *testing.T, ctx *driver.Context, ptx, name string) (*driver.Module, *driver.Function) {
	t.Helper()
	m, err := ctx.LoadModule(ptx)
	must(t, err)
	t.Cleanup(func() { m.Unload() })
	f, err := m.Function(name)
	must(t, err)
	return m, f
}

func TestLaunchMixedParams(t *testing.T) {
	ctx := gputest.Open(t)
	r := newRand(t)
	m, f := loadFunction(t, ctx, mixedParamsPTX, "mixed_params")
	t.Logf("JIT info log:\n%s", m.InfoLog())
	if _, err := m.Function("no_such_kernel"); err == nil || !strings.Contains(err.Error(), "no_such_kernel") {
		t.Errorf("missing kernel: %v", err)
	}
	attrs, err := f.Attributes()
	must(t, err)
	t.Logf("attributes %+v", attrs)
	if attrs.NumRegs <= 0 || attrs.PTXVersion != 80 || attrs.MaxThreadsPerBlock <= 0 {
		t.Errorf("implausible attributes %+v", attrs)
	}
	if sizes, err := f.ParamSizes(); err == nil {
		if want := []int{4, 8, 4, 8, 128, 4, 8}; !slices.Equal(sizes, want) {
			t.Errorf("ParamSizes %v, want %v", sizes, want)
		}
	} else {
		t.Logf("no parameter check: %v", err)
	}

	const n = 1000
	data := make([]uint32, n)
	for i := range data {
		data[i] = r.Uint32() >> 1
	}
	scale := r.Float32() + 0.25
	blob := make([]byte, 128)
	for i := range blob {
		blob[i] = byte(r.Uint32())
	}
	k := r.Uint32() | 1
	dData := alloc(t, ctx, 4*n)
	dF := alloc(t, ctx, 4*n)
	dB := alloc(t, ctx, 4*33)
	must(t, ctx.Memset(dF, 0xFF, 4*n))
	must(t, ctx.Memset(dB, 0xFF, 4*33))
	must(t, ctx.CopyToDevice(dData, data))
	args := driver.NewArgs().U32(n).Ptr(dData).F32(scale).Ptr(dF).Bytes(blob).U32(k).Ptr(dB)
	must(t, f.Launch(driver.Dim3{X: (n + 127) / 128}, driver.Dim3{X: 128}, 0, nil, args))
	must(t, ctx.Synchronize())

	gotData := make([]uint32, n)
	gotF := make([]float32, n)
	gotB := make([]uint32, 33)
	must(t, ctx.CopyFromDevice(gotData, dData))
	must(t, ctx.CopyFromDevice(gotF, dF))
	must(t, ctx.CopyFromDevice(gotB, dB))
	for i := range n {
		if gotData[i] != data[i]+1 {
			t.Fatalf("data[%d] = %d, want %d", i, gotData[i], data[i]+1)
		}
		want := float32(data[i]+1) * scale
		if math.Float32bits(gotF[i]) != math.Float32bits(want) {
			t.Fatalf("fout[%d] = %v, want %v", i, gotF[i], want)
		}
	}
	for j := range 32 {
		want := uint32(blob[4*j]) | uint32(blob[4*j+1])<<8 | uint32(blob[4*j+2])<<16 | uint32(blob[4*j+3])<<24
		if gotB[j] != want {
			t.Fatalf("128-byte parameter word %d = %#x, want %#x", j, gotB[j], want)
		}
	}
	if gotB[32] != k {
		t.Fatalf("u32 parameter after the 128-byte one = %#x, want %#x", gotB[32], k)
	}

	if _, err := f.ParamSizes(); err == nil {
		bad := driver.NewArgs().U64(n).Ptr(dData).F32(scale).Ptr(dF).Bytes(blob).U32(k).Ptr(dB)
		err := f.Launch(driver.Dim3{X: 8}, driver.Dim3{X: 128}, 0, nil, bad)
		if err == nil || !strings.Contains(err.Error(), "parameter 0 is 4 bytes in the kernel but 8 bytes") {
			t.Errorf("8-byte n: %v", err)
		}
	}
	// The count comes from the PTX text: refused before the driver reads
	// seven kernelParams pointers from a two-element array.
	short := driver.NewArgs().U32(n).Ptr(dData)
	if err := f.Launch(driver.Dim3{X: 8}, driver.Dim3{X: 128}, 0, nil, short); err == nil || !strings.Contains(err.Error(), "kernel has 7 parameters, Args has 2") {
		t.Errorf("launch with 2 of 7 parameters: %v", err)
	}
	if err := f.Launch(driver.Dim3{X: 1}, driver.Dim3{X: 2048}, 0, nil, args); err == nil {
		t.Error("launch with 2048 threads per block succeeded")
	}
}

func TestLoadBrokenPTX(t *testing.T) {
	ctx := gputest.Open(t)
	m, err := ctx.LoadModule(brokenPTX)
	if err == nil {
		m.Unload()
		t.Fatal("broken PTX loaded")
	}
	t.Logf("%v", err)
	var de *driver.DriverError
	if !errors.As(err, &de) {
		t.Fatalf("error %T is not a *DriverError", err)
	}
	if de.Call != "cuModuleLoadDataEx" || de.Name != "CUDA_ERROR_INVALID_PTX" {
		t.Errorf("call %q name %q", de.Call, de.Name)
	}
	if !strings.Contains(de.Log, brokenSymbol) || !strings.Contains(err.Error(), brokenSymbol) {
		t.Errorf("the error does not carry the JIT log naming %s:\n%v", brokenSymbol, err)
	}
}

func TestDynamicShared100K(t *testing.T) {
	ctx := gputest.Open(t)
	r := newRand(t)
	const bytes = 100 * 1024
	if ctx.Device().MaxSharedBytesPerBlockOptin < bytes {
		t.Skipf("device allows %d bytes of shared memory per block", ctx.Device().MaxSharedBytesPerBlockOptin)
	}
	_, f := loadFunction(t, ctx, dynSmemPTX, "dyn_smem")
	const words = bytes / 4
	seed := r.Uint32()
	out := alloc(t, ctx, bytes)
	must(t, ctx.Memset(out, 0xEE, bytes))
	args := driver.NewArgs().Ptr(out).U32(words).U32(seed)
	if err := f.Launch(driver.Dim3{X: 1}, driver.Dim3{X: 256}, bytes, nil, args); err == nil {
		t.Fatal("a 100 KiB launch succeeded before SetMaxDynamicSharedBytes")
	} else {
		t.Logf("before opting in: %v", err)
	}
	must(t, f.SetMaxDynamicSharedBytes(bytes))
	attrs, err := f.Attributes()
	must(t, err)
	if attrs.MaxDynamicSharedBytes != bytes {
		t.Errorf("MaxDynamicSharedBytes = %d, want %d", attrs.MaxDynamicSharedBytes, bytes)
	}
	// Two 100 KiB blocks fit an SM of 228 KiB (sm_90, sm_100) once the
	// carveout gives shared memory the most: the occupancy query says so.
	must(t, f.SetPreferredSharedCarveout(100))
	n, err := f.MaxActiveBlocksPerSM(256, bytes)
	must(t, err)
	if want := ctx.Device().MaxSharedBytesPerSM / (bytes + 1024); n != want {
		t.Errorf("MaxActiveBlocksPerSM(256, %d) = %d, want %d (%d bytes of shared memory per SM)", bytes, n, want, ctx.Device().MaxSharedBytesPerSM)
	}
	if _, err := f.MaxActiveBlocksPerSM(0, bytes); err == nil {
		t.Error("MaxActiveBlocksPerSM of 0 threads: no error")
	}
	if err := f.SetPreferredSharedCarveout(101); err == nil {
		t.Error("SetPreferredSharedCarveout(101): no error")
	}
	must(t, f.Launch(driver.Dim3{X: 1}, driver.Dim3{X: 256}, bytes, nil, args))
	must(t, ctx.Synchronize())
	got := make([]uint32, words)
	must(t, ctx.CopyFromDevice(got, out))
	for j, v := range got {
		if want := uint32((j+1)%words)*3 + seed; v != want {
			t.Fatalf("out[%d] = %#x, want %#x", j, v, want)
		}
	}
}

func TestTensorMapTMA(t *testing.T) {
	ctx := gputest.Open(t)
	if ctx.Device().ComputeMajor < 9 {
		t.Skipf("TMA needs sm_90; device is sm_%d", ctx.Device().ComputeCapability())
	}
	r := newRand(t)
	const rows, cols, box = 256, 512, 64
	host := make([]uint16, rows*cols) // bf16 bits, never 0 so that OOB zeros show
	for i := range host {
		host[i] = uint16(r.Uint32()) | 1
	}
	d := alloc(t, ctx, 2*rows*cols)
	must(t, ctx.CopyToDevice(d, host))
	if _, err := ctx.EncodeTensorMapTiled(driver.TensorMapBF16, 2, d.Offset(8), []uint64{cols, rows}, []uint64{2 * cols},
		[]uint32{box, box}, nil, driver.InterleaveNone, driver.SwizzleNone, driver.L2Promotion128B, driver.OOBFillZero); err == nil ||
		!strings.Contains(err.Error(), "16-byte aligned") {
		t.Errorf("misaligned address: %v", err)
	}

	_, f := loadFunction(t, ctx, tmaLoadPTX, "tma_load_2d")
	out := alloc(t, ctx, 2*box*box)
	for _, swizzle := range []driver.TensorMapSwizzle{driver.SwizzleNone, driver.Swizzle128B} {
		tmap, err := ctx.EncodeTensorMapTiled(driver.TensorMapBF16, 2, d, []uint64{cols, rows}, []uint64{2 * cols},
			[]uint32{box, box}, nil, driver.InterleaveNone, swizzle, driver.L2Promotion128B, driver.OOBFillZero)
		must(t, err)
		nonzero := false
		for _, b := range tmap {
			nonzero = nonzero || b != 0
		}
		if !nonzero {
			t.Fatal("tensor map is all zeros")
		}
		// The box's inner start coordinate must be a multiple of 16 bytes
		// (8 bf16): other values fault with CUDA_ERROR_ILLEGAL_INSTRUCTION on
		// the H200. Outer coordinates and negative ones are free.
		coords := [][2]int{{64, 32}, {cols - box, rows - box/2}, {-8, -3}, {8 * r.IntN((cols-box)/8), r.IntN(rows - box)}}
		for _, c := range coords {
			c0, c1 := c[0], c[1]
			must(t, ctx.Memset(out, 0xCC, 2*box*box))
			must(t, f.Launch(driver.Dim3{X: 1}, driver.Dim3{X: 128}, 0, nil, driver.NewArgs().Bytes(tmap[:]).Ptr(out).I32(int32(c0)).I32(int32(c1))))
			must(t, ctx.Synchronize())
			got := make([]uint16, box*box)
			must(t, ctx.CopyFromDevice(got, out))
			for i := range box {
				for j := range box {
					want := uint16(0) // out of bounds: zero fill
					if c1+i >= 0 && c1+i < rows && c0+j >= 0 && c0+j < cols {
						want = host[(c1+i)*cols+c0+j]
					}
					// With the 128B swizzle, 16-byte chunk k of a 128-byte
					// row r lands at chunk k ^ (r % 8).
					pos := i*box + j
					if swizzle == driver.Swizzle128B {
						pos = i*box + ((j/8)^(i%8))*8 + j%8
					}
					if got[pos] != want {
						t.Fatalf("swizzle %d, box at (%d,%d): element [%d][%d] = %#04x, want %#04x", swizzle, c0, c1, i, j, got[pos], want)
					}
				}
			}
		}
	}
}

func TestClusterLaunch(t *testing.T) {
	ctx := gputest.Open(t)
	if ctx.Device().ComputeMajor < 9 {
		t.Skipf("clusters need sm_90; device is sm_%d", ctx.Device().ComputeCapability())
	}
	_, f := loadFunction(t, ctx, clusterPTX, "cluster_rank")
	const blocks = 8
	out := alloc(t, ctx, 8*blocks)
	for _, cluster := range []int{0, 2, 4} {
		must(t, ctx.Memset(out, 0xFF, 8*blocks))
		cfg := driver.LaunchConfig{Grid: driver.Dim3{X: blocks}, Block: driver.Dim3{X: 32}}
		if cluster > 0 {
			cfg.Cluster = driver.Dim3{X: cluster}
		}
		must(t, f.LaunchEx(cfg, driver.NewArgs().Ptr(out)))
		must(t, ctx.Synchronize())
		got := make([]uint32, 2*blocks)
		must(t, ctx.CopyFromDevice(got, out))
		size := max(cluster, 1)
		for b := range blocks {
			if got[2*b] != uint32(b%size) || got[2*b+1] != uint32(size) {
				t.Fatalf("cluster %d: block %d reports rank %d of %d, want %d of %d", cluster, b, got[2*b], got[2*b+1], b%size, size)
			}
		}
	}
	err := f.LaunchEx(driver.LaunchConfig{Grid: driver.Dim3{X: 6}, Block: driver.Dim3{X: 32}, Cluster: driver.Dim3{X: 4}}, driver.NewArgs().Ptr(out))
	if err == nil || !strings.Contains(err.Error(), "not a multiple of cluster") {
		t.Errorf("grid 6 with cluster 4: %v", err)
	}
}

func TestClosedContext(t *testing.T) {
	ctx := gputest.Open(t)
	ctx2, err := driver.Open(0) // a second reference to the primary context
	must(t, err)
	must(t, ctx2.Close())
	must(t, ctx2.Close()) // no-op
	if _, err := ctx2.Alloc(64); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("Alloc on a closed context: %v", err)
	}
	// The first context still works.
	d := alloc(t, ctx, 64)
	must(t, ctx.Memset(d, 1, 64))
	s, err := ctx.NewStream()
	must(t, err)
	must(t, s.Destroy())
	if err := ctx.MemsetAsync(d, 1, 64, s); err == nil {
		t.Fatal("MemsetAsync on a destroyed stream succeeded")
	}
}

// A programmatic launch (LaunchConfig.Programmatic) may start while the
// kernel before it runs, and griddepcontrol.wait still orders it after
// that kernel: the consumer, launched right after a producer that spins
// for about 20 µs before writing, reads the producer's value every time.
func TestProgrammaticLaunch(t *testing.T) {
	ctx := gputest.Open(t)
	if ctx.Device().ComputeMajor < 9 {
		t.Skipf("programmatic dependent launch needs sm_90; device is sm_%d", ctx.Device().ComputeCapability())
	}
	m, produce := loadFunction(t, ctx, pdlPTX, "pdl_produce")
	consume, err := m.Function("pdl_consume")
	must(t, err)
	mid, out := alloc(t, ctx, 4), alloc(t, ctx, 4)
	for i := range 20 {
		v := uint32(1000 + i)
		must(t, produce.Launch(driver.Dim3{X: 1}, driver.Dim3{X: 32}, 0, nil, driver.NewArgs().Ptr(mid).I32(int32(v)).I64(40000)))
		cfg := driver.LaunchConfig{Grid: driver.Dim3{X: 1}, Block: driver.Dim3{X: 32}, Programmatic: true}
		must(t, consume.LaunchEx(cfg, driver.NewArgs().Ptr(mid).Ptr(out)))
		must(t, ctx.Synchronize())
		var got [1]uint32
		must(t, ctx.CopyFromDevice(got[:], out))
		if got[0] != v {
			t.Fatalf("launch %d: the consumer read %d, want the producer's %d", i, got[0], v)
		}
	}
}
