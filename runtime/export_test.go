package runtime

// SetLaunchGrid makes ly launch the kernel named name with blocks blocks
// along x from the next Forward on (0: the plan's grid again, in whole
// resident clusters for a kernel in clusters), for tests that need a grid
// the plan would not launch (more blocks than can be resident, to make a
// co-resident kernel's waits time out).
func SetLaunchGrid(ly *Layer, name string, blocks int) {
	ly.mu.Lock()
	defer ly.mu.Unlock()
	for i, k := range ly.plan.Kernels {
		switch {
		case k.Name != name:
		case blocks > 0:
			if ly.gridOverride == nil {
				ly.gridOverride = map[int]int{}
			}
			ly.gridOverride[i] = blocks
		default:
			delete(ly.gridOverride, i)
		}
	}
}
