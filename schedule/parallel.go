package schedule

import "runtime"

// parallelRange runs f(lo, hi) on contiguous chunks [lo, hi) that together
// cover 0..n-1 exactly once, on up to GOMAXPROCS goroutines (parallelFor
// over the chunks, about four per goroutine for balance). work is the
// approximate cost of one index in multiply-adds; a range cheaper than
// serialWork in all runs as the single call f(0, n) on the calling
// goroutine. f may be called from several goroutines at once; it must
// write only what belongs to its own indices and never split a sum over
// them, so that every result is computed by one goroutine in one order and
// does not depend on the number of cores or on the chunking.
func parallelRange(n, work int, f func(lo, hi int)) {
	if n <= 0 {
		return
	}
	workers := runtime.GOMAXPROCS(0)
	if workers <= 1 || n*work < serialWork {
		f(0, n)
		return
	}
	size := (n + 4*workers - 1) / (4 * workers)
	chunks := (n + size - 1) / size
	parallelFor(chunks, size*work, func(c int) {
		f(c*size, min(n, (c+1)*size))
	})
}

// addTo sets dst[i] += src[i] for every i < len(src), split over goroutines
// (each element is one addition, so the result does not depend on them).
func addTo(dst, src []float64) {
	dst = dst[:len(src)]
	parallelRange(len(src), 1, func(lo, hi int) {
		d := dst[lo:hi]
		for i, v := range src[lo:hi] {
			d[i] += v
		}
	})
}
