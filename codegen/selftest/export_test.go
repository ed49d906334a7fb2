package selftest

// Sizes of the self-test kernels that their GPU tests (the external package
// selftest_test, build tag cuda) need.
const (
	ReduceWarps  = reduceWarps  // warps of the reduction kernel's block
	BigSmemBytes = bigSmemBytes // dynamic shared memory of the big-smem kernel, bytes
)
