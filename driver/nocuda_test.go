//go:build !cuda

package driver

import (
	"errors"
	"strings"
	"testing"
)

func TestNoCUDA(t *testing.T) {
	if Available() {
		t.Fatal("Available() without the cuda tag")
	}
	if !strings.Contains(ErrNoCUDA.Error(), "built without CUDA support") {
		t.Fatalf("ErrNoCUDA text: %q", ErrNoCUDA)
	}
	ctx, err := Open(0)
	if ctx != nil || !errors.Is(err, ErrNoCUDA) {
		t.Fatalf("Open: %v, %v", ctx, err)
	}
	var c Context
	var s Stream
	var e Event
	var m Module
	var f Function
	errs := map[string]error{}
	_, errs["DeviceCount"] = DeviceCount()
	_, errs["DriverVersion"] = DriverVersion()
	errs["Close"] = c.Close()
	errs["Synchronize"] = c.Synchronize()
	_, errs["Alloc"] = c.Alloc(16)
	errs["Free"] = c.Free(1)
	errs["Memset"] = c.Memset(1, 0xAB, 16)
	errs["MemsetAsync"] = c.MemsetAsync(1, 0xAB, 16, &s)
	errs["CopyToDevice"] = c.CopyToDevice(1, []float32{1})
	errs["CopyFromDevice"] = c.CopyFromDevice([]float32{1}, 1)
	errs["CopyToDeviceAsync"] = c.CopyToDeviceAsync(1, []float32{1}, nil)
	errs["CopyFromDeviceAsync"] = c.CopyFromDeviceAsync([]float32{1}, 1, nil)
	errs["CopyDeviceToDevice"] = c.CopyDeviceToDevice(1, 2, 16)
	_, errs["NewStream"] = c.NewStream()
	_, errs["NewEvent"] = c.NewEvent()
	_, errs["LoadModule"] = c.LoadModule(".version 8.0\n.target sm_80\n.address_size 64\n")
	errs["Stream.Synchronize"] = s.Synchronize()
	errs["Stream.Destroy"] = s.Destroy()
	errs["Event.Record"] = e.Record(&s)
	errs["Event.Synchronize"] = e.Synchronize()
	errs["Event.Destroy"] = e.Destroy()
	_, errs["ElapsedMs"] = ElapsedMs(&e, &e)
	_, errs["Module.Function"] = m.Function("dyn_smem")
	errs["Module.Unload"] = m.Unload()
	_, errs["Attributes"] = f.Attributes()
	_, errs["ParamSizes"] = f.ParamSizes()
	errs["SetMaxDynamicSharedBytes"] = f.SetMaxDynamicSharedBytes(100 * 1024)
	errs["SetNonPortableClusterSizeAllowed"] = f.SetNonPortableClusterSizeAllowed(true)
	_, errs["MaxActiveBlocksPerSM"] = f.MaxActiveBlocksPerSM(128, 0)
	errs["SetPreferredSharedCarveout"] = f.SetPreferredSharedCarveout(100)
	errs["Launch"] = f.Launch(Dim3{X: 1}, Dim3{X: 32}, 0, nil, NewArgs().U32(1))
	errs["LaunchEx"] = f.LaunchEx(LaunchConfig{Grid: Dim3{X: 2}, Block: Dim3{X: 32}, Cluster: Dim3{X: 2}}, nil)
	a := bf16Tile()
	_, errs["EncodeTensorMapTiled"] = (&Context{}).EncodeTensorMapTiled(a.dtype, a.rank, a.addr, a.dims, a.strides, a.box, a.elemStr, a.interleave, a.swizzle, a.l2, a.oob)
	for name, err := range errs {
		if !errors.Is(err, ErrNoCUDA) {
			t.Errorf("%s: got %v, want ErrNoCUDA", name, err)
		}
	}
}
