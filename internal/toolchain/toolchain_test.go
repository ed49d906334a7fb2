package toolchain

import "testing"

// TestSerializedWGMMA checks that ptxas's note of a serialized wgmma
// pipeline fails Assemble and that other notes do not.
func TestSerializedWGMMA(t *testing.T) {
	for log, want := range map[string]bool{
		"ptxas info    : (C7518) Potential Performance Loss: wgmma.mma_async instructions are serialized due to program dependence on compiler-inserted WG.DP in divergent path in the function 'moe_fc1'":                                        true,
		"ptxas info    : (C7517) warpgroup.wait is injected in around line 23 by compiler to allow use of registers defined by GMMA in function 'k'":                                                                                              false,
		"ptxas info    : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions defining accumulator registers of a wgmma between start and end of the pipeline stage in the function 'k'": true,
		"ptxas info    : 0 bytes gmem": false,
		"":                             false,
	} {
		if got := serializedWGMMA(log); got != want {
			t.Errorf("serializedWGMMA(%q) = %v, want %v", log, got, want)
		}
	}
}
