package schedule

import "github.com/mokc/mokc/internal/parallel"

// addTo sets dst[i] += src[i] for every i < len(src), split over goroutines
// (each element is one addition, so the result does not depend on them).
func addTo(dst, src []float64) {
	dst = dst[:len(src)]
	parallel.Range(len(src), 1, func(lo, hi int) {
		d := dst[lo:hi]
		for i, v := range src[lo:hi] {
			d[i] += v
		}
	})
}
