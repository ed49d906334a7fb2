// Package runtime loads mokc's PTX with the CUDA driver API
// (gorgonia.org/cu, plus a thin cgo shim for cuFuncSetAttribute,
// cuTensorMapEncodeTiled and cuLaunchKernelEx) and launches it from Go.
//
// It is built with the build tag "cuda". Without the tag the same API exists
// and every call that needs a GPU returns ErrNoCUDA.
package runtime
