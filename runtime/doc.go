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
// error word as a *RoutingError.
//
// UploadWeights, UploadWeightSource and UploadInputs move host data
// (schedule.Weights, a WeightSource such as schedule.WeightGen, an input and
// its schedule.Routing) to device tensors in the layouts of the program's
// buffers, as Bindings ready for Forward.
package runtime
