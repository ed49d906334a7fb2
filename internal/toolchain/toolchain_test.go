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

// TestParseResources reads ptxas -v's registers and spills per entry.
func TestParseResources(t *testing.T) {
	log := `ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'moe_fc1' for 'sm_90a'
ptxas info    : Function properties for moe_fc1
    0 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers
ptxas info    : Compiling entry function 'moe_fc2' for 'sm_90a'
ptxas info    : Function properties for moe_fc2
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 90 registers
`
	got := parseResources(log)
	want := map[string]Resources{"moe_fc1": {128, 8, 4}, "moe_fc2": {90, 0, 0}}
	if len(got) != len(want) || got["moe_fc1"] != want["moe_fc1"] || got["moe_fc2"] != want["moe_fc2"] {
		t.Errorf("parseResources = %+v, want %+v", got, want)
	}
}
