package runtime

// SetLaunchGrid makes ly launch the kernel named name with blocks blocks
// along x from the next Forward on (0: the plan's grid again, in whole
// resident clusters for a kernel in clusters), for tests
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
		switch {
		case blocks > 0:
			ly.gridX[i] = blocks
		case k.Cluster > 1 && k.GridPerSM: // the plan's grid in clusters again
			g, err := clusterGrid(ly.funcs[i], k, ly.ctx.Device().SMCount)
			if err != nil {
				panic(err)
			}
			ly.gridX[i] = g
		default:
			delete(ly.gridX, i)
		}
	}
}
