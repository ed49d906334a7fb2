// Package runtime executes mokc's compiled MoE layers: a Layer loads the PTX
// of a layer's forward and its launch manifest (launch.Manifest) on a device
// and queues the whole forward on a stream (Layer.Forward), with its own
// workspace and error word; UploadWeights, UploadWeightSource and
// UploadInputs move host data to device tensors in the layouts the forward
// reads.
//
// The CUDA driver binding the Layer runs on (contexts, memory, streams,
// events, modules, launches, tensor maps) is package driver.
package runtime
