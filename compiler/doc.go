// Package compiler is mokc's pipeline from a layer description to PTX, as a
// table of stages run in order, each followed by its check:
//
//	validate  schedule.Schedule.Validate           (the layer and schedule)
//	codegen   codegen.Build -> LLVM IR + launch plan  (checked by ir.Check)
//	ptx       ptx.CompileModule -> PTX text + kernel metadata
//	manifest  the launch plan joined with the PTX kernel metadata (launch.Manifest)
//
// The result (Artifact) carries the PTX, the LLVM IR text and a JSON manifest
// that lets any language load the PTX and launch its kernels: every kernel's
// name, parameters (name, type, size, alignment, offset, binding), grid as a
// function of the token count, block size and dynamic shared memory, and the
// buffers the caller and the workspace provide.
//
// Errors name the stage that failed and carry a command that reproduces it.
package compiler
