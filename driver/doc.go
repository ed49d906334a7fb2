// Package driver is mokc's binding of the CUDA driver API: device and
// context (Open, Context, DeviceProps), device memory (DevicePtr, Alloc,
// copies, memsets), streams and events, module load with the JIT's error
// log in the returned error (Context.LoadModule, Module), kernel launch with
// exact parameter sizes (Function.Launch through cuLaunchKernel,
// Function.LaunchEx through cuLaunchKernelEx for thread-block clusters; Args
// packs the parameters), cuFuncSetAttribute for more than 48 KiB of dynamic
// shared memory, and cuTensorMapEncodeTiled for TMA
// (Context.EncodeTensorMapTiled, checked in pure Go by CheckTensorMapTiled).
// It knows nothing of MoE layers: package runtime executes a compiled layer
// on top of it, and the GPU tests of codegen launch their kernels through it.
//
// The GPU code is built with the build tag "cuda" and needs cuda.h from CUDA
// 12.x at compile time (found under .toolchain/cuda/include, or through
// CGO_CFLAGS). libcuda is not linked: it is opened with dlopen
// ("libcuda.so.1") at the first call, so a binary or test binary built on a
// machine without a GPU starts anywhere, and reports ErrNoDevice where the
// driver is missing, is the toolkit's stub (cuInit fails with
// CUDA_ERROR_STUB_LIBRARY) or sees no device. The driver entry points are
// called directly through a small C shim rather than through gorgonia.org/cu,
// whose package initializer calls cuInit and exits the process when it fails,
// which would make a "no GPU here" test skip impossible; the shim also carries
// what gorgonia.org/cu lacks (cuFuncSetAttribute, cuTensorMapEncodeTiled,
// cuLaunchKernelEx, parameters that are not 8 bytes).
//
// Without the tag the same API exists; every call that needs a GPU returns
// ErrNoCUDA. Args, Dim3, DevicePtr, CheckTensorMapTiled and the enums are
// pure Go and work in both builds.
//
// Every driver failure is a *DriverError naming the call and the CUresult
// (cuGetErrorName). Each call makes its Context current on the calling OS
// thread inside the same C call, so Contexts can be used from any goroutine.
//
// Dimension conventions follow the driver: Dim3 X is the fastest-varying
// extent; tensor map dimension 0 is the innermost (contiguous) one. Sizes are
// in bytes unless a name says otherwise.
package driver
