// Package roofline draws roofline plots of measured runs: achieved TFLOP/s
// against arithmetic intensity (FLOPs per byte moved to and from device
// memory), both axes logarithmic, under the roof min(peak TFLOP/s,
// peak GB/s × intensity) (S. Williams, A. Waterman, D. Patterson,
// "Roofline: an insightful visual performance model for multicore
// architectures", CACM 52(4), 2009). The drawing is gonum.org/v1/plot's;
// the package only chooses what to draw.
package roofline
