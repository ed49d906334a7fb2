package driver

import (
	"errors"
	"fmt"
)

// ErrNoCUDA is returned by every call that needs a GPU when the package was
// built without the "cuda" build tag.
var ErrNoCUDA = errors.New("mokc driver: built without CUDA support (rebuild with -tags cuda)")

// ErrNoDevice is returned (wrapped, test it with errors.Is) when the package
// was built with the "cuda" tag but no usable GPU is present: libcuda cannot
// be loaded, cuInit fails (for example with CUDA_ERROR_STUB_LIBRARY or
// CUDA_ERROR_NO_DEVICE), or the device count is 0. Tests skip on it.
var ErrNoDevice = errors.New("mokc driver: no CUDA device")

// DriverError is a failed CUDA driver API call.
//
// Call is the driver entry point as documented (without the _v2 suffix the
// headers map it to), Code the CUresult value, Name its cuGetErrorName
// spelling (for example "CUDA_ERROR_INVALID_PTX") and Message its
// cuGetErrorString description. Log holds the JIT error log of a failed
// cuModuleLoadDataEx (ptxas's messages, with PTX line numbers); it is empty
// for other calls.
type DriverError struct {
	Call    string // driver entry point, e.g. "cuModuleLoadDataEx"
	Code    int    // CUresult value
	Name    string // cuGetErrorName of Code, e.g. "CUDA_ERROR_INVALID_PTX"; "CUresult(N)" if unnamed
	Message string // cuGetErrorString of Code; may be empty
	Log     string // JIT error log of a failed cuModuleLoadDataEx; empty otherwise
}

// Error formats the error as "mokc driver: <call>: <name> (<message>)",
// followed by the JIT log on its own lines when there is one.
func (e *DriverError) Error() string {
	s := fmt.Sprintf("mokc driver: %s: %s", e.Call, e.Name)
	if e.Message != "" {
		s += " (" + e.Message + ")"
	}
	if e.Log != "" {
		s += "\nJIT log:\n" + e.Log
	}
	return s
}
