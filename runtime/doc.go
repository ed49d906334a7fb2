// Package runtime executes mokc's compiled MoE layers on a GPU. It holds the
// layer executor only; the CUDA driver binding it runs on (contexts, device
// memory, streams, events, modules, launches, tensor maps) is package
// driver.
//
// A Layer is one layer's forward loaded on a device. NewLayer compiles a
// layer and schedule with package compiler (behind a compiled-module cache,
// in memory and on disk: CacheDirEnv) and uses the compiled launch manifest
// (launch.Manifest) as a Go value; LoadLayer loads prebuilt PTX and the
// JSON of its manifest (`mokc build --emit ptx` and `--emit manifest`).
// Either way the manifest is checked against the layer before anything is
// loaded.
//
// The manifest declares every buffer of the program (codegen's program
// declares each once): inputs and outputs the caller provides, scratch
// buffers the Layer allocates in its workspace, and the error word the
// Layer owns. The runtime knows none of them by name: Layer.Inputs and
// Layer.Outputs describe the caller's buffers (name, dtype, shape as a
// function of the token count T), Layer.Forward takes them as Bindings, a
// map from buffer name to Tensor, and checks every binding against the
// manifest (missing or extra names, dtype, shape at T, bytes, alignment,
// overlapping outputs) before launching anything, with errors naming the
// buffer. Forward queues the whole forward on a stream without host
// synchronisation; CheckErrors waits for it and reports the program's
// error words as a *RoutingError (bad routing) and a *WaitTimeoutError (a
// co-resident kernel's block that waited too long for another's work:
// outputs not valid). CaptureForward (CaptureBackward) records
// one pass into a CUDA graph instead, replayed on the same buffers; the
// workspace is then pinned (a larger T is refused).
//
// The error words (moe.BufErr, u32 [2]) are not bindable: binding it is an error
// naming it. The kernels report bad routing there and nowhere else (an
// expert id outside [-1, E) counts as -1, a routing-map row with more than
// K routes keeps its first K), so a word the caller owned could be read
// late or never, and a forward with bad routing would pass for a good one;
// owned by the Layer, it is cleared by every Forward and read by
// CheckErrors, the one verdict callers need. Routing values are used as
// given: a NaN or Inf weight (or probability of a routed map entry) makes
// its token's row of y non-finite, which PoisonCounts counts, never a
// wrong finite value; values of unrouted slots are not read.
//
// Poison and PoisonCounts are the output check of `mokc run` and the GPU
// tests: y filled with a NaN pattern the kernels never write before the
// forward, then the elements still holding it counted.
//
// UploadWeights, UploadWeightSource and UploadInputs move host data
// (schedule.Weights, a WeightSource such as schedule.WeightGen, an input and
// its schedule.Routing) to device tensors in the layouts of the program's
// buffers, as Bindings ready for Forward. AllocMainGrads allocates the main
// grads Layer.Backward adds to, grouped or (per-expert weight storage) one
// allocation per expert behind a pointer table.
package runtime
