package codegen

import (
	"fmt"
	"testing"

	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// groupedItem is gemmDecode's decoding of item it with Tile.GroupM = g
// over tiles row tiles of dense rows and nBlocks column blocks, in Go.
func groupedItem(it, tiles, g, nBlocks int) (t, nb int) {
	first := it / (g * nBlocks) * g
	r := it % (g * nBlocks)
	gsize := min(g, tiles-first)
	return first + r%gsize, r / gsize
}

// tiledItem is gemmDecode's decoding of item it with Tile.GroupM = g over
// the work list of experts with rows[e] rows each in tiles of bm rows (as
// emitScan writes it: each expert's tiles in order, (expert, first row))
// and nBlocks column blocks, in Go.
func tiledItem(it, g, bm, nBlocks int, list [][2]int, offsets []int) (t, nb int) {
	q := it / nBlocks
	e, row0 := list[q][0], list[q][1]
	k := (row0 - offsets[e]) / bm
	R := (offsets[e+1] - offsets[e] + bm - 1) / bm
	t0 := q - k%g
	gsize := min(g, R-(k-k%g))
	r := it - t0*nBlocks
	return t0 + r%gsize, r / gsize
}

// TestGroupedItemsTiled: with GroupM over a work list of experts (ragged
// row counts, experts without rows, one-tile experts) the items decode to
// every (tile, column block) exactly once; a group's tiles are of one
// expert, row tiles fastest within it; and an expert with one row tile
// runs its column blocks in order, as without grouping.
func TestGroupedItemsTiled(t *testing.T) {
	const bm = 128
	for _, rows := range [][]int{{1024, 1024}, {128, 0, 129, 1, 1000, 256, 0, 897}, {64, 64, 64}, {5000}} {
		list, offsets := expertTiles(rows, bm)
		tiles := len(list)
		for _, nBlocks := range []int{1, 3, 16, 112} {
			for _, g := range []int{1, 2, 3, 8, 16} {
				seen := make([]bool, tiles*nBlocks)
				for it := 0; it < tiles*nBlocks; it++ {
					tl, nb := tiledItem(it, g, bm, nBlocks, list, offsets)
					if tl < 0 || tl >= tiles || nb < 0 || nb >= nBlocks || seen[tl*nBlocks+nb] {
						t.Fatalf("rows %v blocks %d group %d: item %d -> (%d, %d) out of range or twice", rows, nBlocks, g, it, tl, nb)
					}
					seen[tl*nBlocks+nb] = true
					if q := it / nBlocks; list[tl][0] != list[q][0] {
						t.Fatalf("rows %v blocks %d group %d: item %d -> tile %d of expert %d, in the group of tile %d of expert %d", rows, nBlocks, g, it, tl, list[tl][0], q, list[q][0])
					}
					if e := list[tl][0]; rows[e] <= bm && (tl != it/nBlocks || nb != it%nBlocks) {
						t.Fatalf("rows %v blocks %d group %d: item %d of a one-tile expert -> (%d, %d), want (%d, %d)", rows, nBlocks, g, it, tl, nb, it/nBlocks, it%nBlocks)
					}
					if it > 0 {
						// Within a group, row tiles fastest: the previous item is the
						// previous tile of the same column block, or the group's last
						// tile of the previous block, or the previous group's last item.
						pt, pnb := tiledItem(it-1, g, bm, nBlocks, list, offsets)
						if !(pnb == nb && pt == tl-1) && !(pnb == nb-1 && tl <= pt) && !(nb == 0 && pnb == nBlocks-1 && pt < tl) {
							t.Fatalf("rows %v blocks %d group %d: item %d -> (%d, %d) after (%d, %d)", rows, nBlocks, g, it, tl, nb, pt, pnb)
						}
					}
				}
			}
		}
	}
}

// TestGroupedItems: with GroupM the items 0..tiles*nBlocks-1 of dense
// rows decode to every (row tile, column block) exactly once, a group's
// row tiles fastest, whatever the group size, tile and block counts (a
// last group smaller than the others included).
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

// TestGroupMAssemble lowers the forward and the backward of presets whose
// experts have many row tiles (mixtral-8x7b) and few (qwen3-30b-a3b,
// deepseek-v3 with its 192-row variant) with GroupM 8 for the persistent
// engines and assembles mokc's PTX with ptxas (sm_100a with the CUDA 12.9
// ptxas).
func TestGroupMAssemble(t *testing.T) {
	for _, name := range []string{"mixtral-8x7b", "qwen3-30b-a3b", "deepseek-v3"} {
		for _, tg := range []target.Target{target.SM90a, target.SM100a} {
			l, s := presetSchedule(t, name, tg)
			s.GroupM = 8
			for _, build := range []func(schedule.Layer) (*moe.Program, error){moe.Forward, moe.Backward} {
				p, err := build(l)
				if err != nil {
					t.Fatal(err)
				}
				t.Run(fmt.Sprintf("%s/%v/%d-ops", name, tg, len(p.Ops)), func(t *testing.T) {
					prog, err := Lower(p, s, PerOp)
					if err != nil {
						t.Fatal(err)
					}
					toolchain.NeedPtxas(t, tg.String())
					assembleOurs(t, prog.Module, tg)
				})
			}
		}
	}
}

// TestPairItems: the walk of a 2-CTA cluster (newPairWork) decodes item
// it of the cluster with the pair's column blocks (nBlocks/2 of twice the
// width, tiledItem's formulas) and gives CTA rank r column block 2c+r:
// both CTAs of a cluster always decode the same row tile, and every (row
// tile, column block) goes to exactly one CTA of one cluster item.
func TestPairItems(t *testing.T) {
	const bm = 128
	for _, rows := range [][]int{{1024, 1024}, {128, 0, 129, 1, 1000, 256, 0, 897}, {64}, {5000, 3}} {
		list, offsets := expertTiles(rows, bm)
		tiles := len(list)
		for _, nBlocks := range []int{2, 6, 16, 112} {
			for _, g := range []int{0, 1, 3, 8} {
				seen := make([]bool, tiles*nBlocks)
				for it := 0; it < tiles*nBlocks/2; it++ {
					var tl, c int
					if g == 0 {
						tl, c = it/(nBlocks/2), it%(nBlocks/2)
					} else {
						tl, c = tiledItem(it, g, bm, nBlocks/2, list, offsets)
					}
					for r := range 2 {
						nb := 2*c + r
						if tl < 0 || tl >= tiles || nb >= nBlocks || seen[tl*nBlocks+nb] {
							t.Fatalf("rows %v blocks %d group %d: cluster item %d rank %d -> (%d, %d) out of range or twice", rows, nBlocks, g, it, r, tl, nb)
						}
						seen[tl*nBlocks+nb] = true
					}
				}
			}
		}
	}
}

// expertTiles is the work list of experts with rows[e] rows each in tiles of
// bm rows, as emitScan writes it (each expert's tiles in order, (expert,
// first row)), and the experts' row offsets.
func expertTiles(rows []int, bm int) (list [][2]int, offsets []int) {
	offsets = []int{0}
	for e, n := range rows {
		for j := 0; j < (n+bm-1)/bm; j++ {
			list = append(list, [2]int{e, offsets[e] + j*bm})
		}
		offsets = append(offsets, offsets[e]+n)
	}
	return list, offsets
}
