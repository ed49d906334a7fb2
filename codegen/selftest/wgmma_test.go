package selftest

import (
	"strings"
	"testing"
)

// TestWGMMAModule checks the IR: one kernel with the documented parameters,
// its tensor maps passed by value, and the instructions the test is about.
func TestWGMMAModule(t *testing.T) {
	m, err := WGMMAModule()
	if err != nil {
		t.Fatal(err)
	}
	s := m.String()
	for _, want := range []string{
		"byval([128 x i8]) align 64 %tmap_a",
		"grid_constant",
		"mbarrier.init.shared::cta.b64",
		"mbarrier.arrive.expect_tx.shared::cta.b64",
		"mbarrier.try_wait.parity.shared::cta.b64",
		"cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
		"fence.proxy.async.shared::cta",
		"wgmma.fence.sync.aligned",
		"wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16",
		"wgmma.commit_group.sync.aligned",
		"wgmma.wait_group.sync.aligned 0",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("module lacks %q", want)
		}
	}
	if n := strings.Count(s, "wgmma.mma_async"); n != WGMMABK/16 {
		t.Errorf("%d wgmma.mma_async per K block, want %d", n, WGMMABK/16)
	}
}

// TestWGMMAReference checks the float64 reference on a case with a known
// answer: A = all-ones rows scaled by row index, B = identity-like columns.
func TestWGMMAReference(t *testing.T) {
	k := 64
	a := make([]uint16, WGMMAM*k)
	bm := make([]uint16, WGMMAN*k)
	for m := 0; m < WGMMAM; m++ {
		for kk := 0; kk < k; kk++ {
			a[m*k+kk] = 0x3f80 // 1.0
		}
	}
	for n := 0; n < WGMMAN; n++ {
		bm[n*k+n%k] = 0x4000 // 2.0 at k = n
	}
	c := WGMMAReference(a, bm, k)
	for m := 0; m < WGMMAM; m++ {
		for n := 0; n < WGMMAN; n++ {
			if c[m*WGMMAN+n] != 2 {
				t.Fatalf("C[%d][%d] = %v, want 2", m, n, c[m*WGMMAN+n])
			}
		}
	}
}
