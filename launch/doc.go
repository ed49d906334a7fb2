// Package launch is the launch manifest of a compiled layer: what a launcher
// in any language needs to load mokc's PTX and run its kernels.
//
// It holds the types only, shared by the three packages that meet in the
// manifest: codegen builds the launch plan (Kernel, Param, TensorMap,
// Buffer, with every size an Expr of the token count T), compiler joins it
// with the PTX entries' parameter layouts (PTXParam) into a Manifest and
// writes it as JSON (`mokc build --emit manifest`), and runtime decodes that
// JSON back into a Manifest and launches from it. The JSON field names are
// the manifest format; a change to them is a change of format.
//
// Of mokc it imports only schedule (for ShapeOf), so that every other
// package (runtime included, which codegen's GPU tests import) can import it.
package launch
