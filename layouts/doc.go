// Package layouts describes the tiles mokc's kernels use and converts data
// into and out of them on the host, bit-exactly: CuTe-style shape:stride
// layouts and swizzles, BF16 tiles and shared-memory matrix descriptors for
// sm_80, sm_90a and sm_100a, MXFP8 (E4M3 data with UE8M0 block-32 scales, OCP
// Microscaling v1.0) and the sm_100 scale-factor tile layout.
package layouts
