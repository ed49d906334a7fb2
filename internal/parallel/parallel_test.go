package parallel

import (
	"runtime"
	"sync/atomic"
	"testing"
)

// TestParallelRange checks that Range covers every index exactly
// once, in contiguous chunks, serially for cheap ranges and in several
// chunks otherwise.
func TestParallelRange(t *testing.T) {
	old := runtime.GOMAXPROCS(4)
	defer runtime.GOMAXPROCS(old)
	for _, c := range []struct{ n, work int }{{0, 1 << 20}, {1, 1 << 20}, {7, 1 << 20}, {1000, 1}, {1000, 1 << 10}, {4097, 1 << 12}} {
		seen := make([]atomic.Int32, c.n)
		var calls atomic.Int32
		Range(c.n, c.work, func(lo, hi int) {
			calls.Add(1)
			if lo < 0 || lo >= hi || hi > c.n {
				t.Errorf("n=%d: chunk [%d, %d)", c.n, lo, hi)
				return
			}
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			if v := seen[i].Load(); v != 1 {
				t.Fatalf("n=%d work=%d: index %d run %d times", c.n, c.work, i, v)
			}
		}
		serial := c.n*c.work < serialWork
		switch n := calls.Load(); {
		case c.n == 0 && n != 0:
			t.Errorf("n=0: %d calls", n)
		case c.n > 0 && serial && n != 1:
			t.Errorf("n=%d work=%d: %d calls, want 1 (serial)", c.n, c.work, n)
		case c.n > 1 && !serial && n < 2:
			t.Errorf("n=%d work=%d: %d call, want several", c.n, c.work, n)
		}
	}
}
