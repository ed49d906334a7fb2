package runtime

// SetLaunchGrid makes ly launch the kernel named name with blocks blocks
// along x from the next Forward on (0: the plan's grid again), for tests
// that need a grid the plan would not launch (more blocks than can be
// resident, to make a co-resident kernel's waits time out).
func SetLaunchGrid(ly *Layer, name string, blocks int) {
	ly.mu.Lock()
	defer ly.mu.Unlock()
	for i, k := range ly.plan.Kernels {
		if k.Name != name {
			continue
		}
		if ly.gridX == nil {
			ly.gridX = map[int]int{}
		}
		if blocks == 0 {
			delete(ly.gridX, i)
		} else {
			ly.gridX[i] = blocks
		}
	}
}
