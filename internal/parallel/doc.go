// Package parallel runs the CPU side's loops (the float64 reference, the
// moe program interpreter) on up to GOMAXPROCS goroutines with results
// that do not depend on the number of cores: each index is run by one
// goroutine, and the caller's f writes only what belongs to its own
// indices, never splitting a sum over them. Loops cheaper than a few
// tens of thousands of multiply-adds stay on the calling goroutine.
package parallel
