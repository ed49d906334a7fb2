package schedule

import "github.com/mokc/mokc/internal/parallel"

// This file holds the float64 matrix kernel of the CPU reference. Every
// product of the reference is one call of gemmNT; each output element is
// computed by exactly one goroutine in a fixed order, so results do not
// depend on the number of cores.

// gemmBlock is the number of B rows a worker converts to float64 and then
// multiplies with every row of A.
const gemmBlock = 16

// gemmNT computes c(i, j) = sum over p < k of a[i*k+p] * b[j*k+p] for i < m,
// j < n (A [m,k] and B [n,k], both row-major; with bT, B is given as its
// [k,n] transpose, c(i, j) = sum a[i*k+p] * b[p*n+j]) and hands them to out a row
// segment at a time: out(i, j0, v) receives c(i, j0..j0+len(v)-1); v is
// reused after out returns. out is called from several goroutines at once,
// never twice for the same element. Each element is summed in float64 in
// increasing p, identically on every run and whatever the blocking.
func gemmNT[TB float32 | float64](m, n, k int, a []float64, b []TB, bT bool, out func(i, j0 int, v []float64)) {
	if m == 0 || n == 0 {
		return
	}
	blocks := (n + gemmBlock - 1) / gemmBlock
	work := func(buf []float64, blk int) {
		j0 := blk * gemmBlock
		j1 := min(j0+gemmBlock, n)
		nb := j1 - j0
		bb := buf[:nb*k]
		if bT {
			// Gather the block's columns, 8 rows of B at a time so that
			// every write fills a whole cache line of bb.
			p := 0
			for ; p+8 <= k; p += 8 {
				for j := 0; j < nb; j++ {
					d := bb[j*k+p : j*k+p+8]
					c := j0 + j + p*n
					d[0], d[1], d[2], d[3] = float64(b[c]), float64(b[c+n]), float64(b[c+2*n]), float64(b[c+3*n])
					d[4], d[5], d[6], d[7] = float64(b[c+4*n]), float64(b[c+5*n]), float64(b[c+6*n]), float64(b[c+7*n])
				}
			}
			for ; p < k; p++ {
				for j, v := range b[p*n+j0 : p*n+j1] {
					bb[j*k+p] = float64(v)
				}
			}
		} else {
			src := b[j0*k : j1*k]
			for i := range bb {
				bb[i] = float64(src[i])
			}
		}
		var c0, c1 [gemmBlock]float64
		i := 0
		for ; i+2 <= m; i += 2 {
			a0 := a[i*k : i*k+k]
			a1 := a[(i+1)*k : (i+1)*k+k]
			j := 0
			for ; j+4 <= nb; j += 4 {
				c0[j], c0[j+1], c0[j+2], c0[j+3], c1[j], c1[j+1], c1[j+2], c1[j+3] = dot2x4(a0, a1, bb[j*k:j*k+k], bb[(j+1)*k:(j+1)*k+k], bb[(j+2)*k:(j+2)*k+k], bb[(j+3)*k:(j+3)*k+k])
			}
			for ; j < nb; j++ {
				bj := bb[j*k : j*k+k]
				c0[j] = dot(a0, bj)
				c1[j] = dot(a1, bj)
			}
			out(i, j0, c0[:nb])
			out(i+1, j0, c1[:nb])
		}
		for ; i < m; i++ {
			ai := a[i*k : i*k+k]
			for j := 0; j < nb; j++ {
				c0[j] = dot(ai, bb[j*k:j*k+k])
			}
			out(i, j0, c0[:nb])
		}
	}
	// The serial cutoff compares m*n*k multiply-adds (rounded up per block).
	parallel.With(blocks, (m*n*k+blocks-1)/blocks, func() []float64 { return make([]float64, gemmBlock*k) }, work)
}

// dot returns the float64 dot product of a and b (len(b) >= len(a)),
// summing in increasing index.
func dot(a, b []float64) float64 {
	b = b[:len(a)]
	var s float64
	for p, v := range a {
		s += float64(v * b[p])
	}
	return s
}

// dot2x4 returns the eight dot products of a0, a1 with b0..b3 (all of the
// same length), each summed in increasing index like dot.
func dot2x4(a0, a1, b0, b1, b2, b3 []float64) (c00, c01, c02, c03, c10, c11, c12, c13 float64) {
	n := len(a0)
	a1 = a1[:n]
	b0 = b0[:n]
	b1 = b1[:n]
	b2 = b2[:n]
	b3 = b3[:n]
	for p := 0; p < n; p++ {
		x0, x1 := a0[p], a1[p]
		y0, y1, y2, y3 := b0[p], b1[p], b2[p], b3[p]
		c00 += float64(x0 * y0)
		c01 += float64(x0 * y1)
		c02 += float64(x0 * y2)
		c03 += float64(x0 * y3)
		c10 += float64(x1 * y0)
		c11 += float64(x1 * y1)
		c12 += float64(x1 * y2)
		c13 += float64(x1 * y3)
	}
	return
}
