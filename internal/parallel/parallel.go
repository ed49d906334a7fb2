package parallel

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// serialWork is the number of multiply-adds below which a loop runs on
// the calling goroutine.
const serialWork = 1 << 16

// For runs f(i) for i in 0..n-1 on up to GOMAXPROCS goroutines. work is
// the approximate cost of one call in multiply-adds; cheap loops run
// serially.
func For(n, work int, f func(i int)) {
	With(n, work, func() struct{} { return struct{}{} }, func(_ struct{}, i int) { f(i) })
}

// With is For with per-goroutine state: each goroutine (or the one serial
// loop) calls newState once and passes the result to every f it runs.
func With[S any](n, work int, newState func() S, f func(state S, i int)) {
	workers := Workers(n, work)
	if workers <= 1 {
		st := newState()
		for i := 0; i < n; i++ {
			f(st, i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := newState()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				f(st, i)
			}
		}()
	}
	wg.Wait()
}

// Workers is the number of goroutines For and With run n calls of work
// multiply-adds each on: one for a loop cheaper than serialWork in all,
// else up to GOMAXPROCS, at most n.
func Workers(n, work int) int {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 || n*work < serialWork {
		return 1
	}
	return workers
}

// Range runs f(lo, hi) on contiguous chunks [lo, hi) that together cover
// 0..n-1 exactly once, on up to GOMAXPROCS goroutines (For over the
// chunks, about four per goroutine for balance). work is the approximate
// cost of one index in multiply-adds; a range cheaper than serialWork in
// all runs as the single call f(0, n) on the calling goroutine. f may be
// called from several goroutines at once; it must write only what belongs
// to its own indices and never split a sum over them, so that every
// result is computed by one goroutine in one order and does not depend on
// the number of cores or on the chunking.
func Range(n, work int, f func(lo, hi int)) {
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
	For(chunks, size*work, func(c int) {
		f(c*size, min(n, (c+1)*size))
	})
}
