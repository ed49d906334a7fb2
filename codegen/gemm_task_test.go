package codegen

import "testing"

// groupedItem is gemmDecode's decoding of item it with Tile.GroupM = g
// over tiles row tiles and nBlocks column blocks, in Go.
func groupedItem(it, tiles, g, nBlocks int) (t, nb int) {
	first := it / (g * nBlocks) * g
	r := it % (g * nBlocks)
	gsize := min(g, tiles-first)
	return first + r%gsize, r / gsize
}

// TestGroupedItems: with GroupM the items 0..tiles*nBlocks-1 decode to
// every (row tile, column block) exactly once, a group's row tiles
// fastest, whatever the group size, tile and block counts (a last group
// smaller than the others included).
func TestGroupedItems(t *testing.T) {
	for _, tiles := range []int{1, 2, 7, 8, 9, 64, 129} {
		for _, nBlocks := range []int{1, 3, 16, 112} {
			for _, g := range []int{1, 2, 4, 8, 16, 200} {
				seen := make([]bool, tiles*nBlocks)
				for it := 0; it < tiles*nBlocks; it++ {
					tl, nb := groupedItem(it, tiles, g, nBlocks)
					if tl < 0 || tl >= tiles || nb < 0 || nb >= nBlocks || seen[tl*nBlocks+nb] {
						t.Fatalf("tiles %d blocks %d group %d: item %d -> (%d, %d) out of range or twice", tiles, nBlocks, g, it, tl, nb)
					}
					seen[tl*nBlocks+nb] = true
					if it%(g*nBlocks) > 0 && it/(g*nBlocks)*g+g <= tiles { // inside a whole group: row tiles fastest
						pt, pnb := groupedItem(it-1, tiles, g, nBlocks)
						if !(pnb == nb && pt == tl-1) && !(pnb == nb-1 && tl == it/(g*nBlocks)*g) {
							t.Fatalf("tiles %d blocks %d group %d: item %d -> (%d, %d) after (%d, %d)", tiles, nBlocks, g, it, tl, nb, pt, pnb)
						}
					}
				}
			}
		}
	}
}
