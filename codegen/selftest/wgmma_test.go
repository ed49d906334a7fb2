package selftest

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/ir"
)

var wgmmaUpdate = flag.Bool("update-wgmma", false, "rewrite testdata/wgmma_llc.ptx from llc-19")

// wgmmaLLCPath is the llc-19 PTX of the self-test kernel, embedded by the
// GPU test (wgmma_cuda_test.go) for the bit-identical differential run.
const wgmmaLLCPath = "testdata/wgmma_llc.ptx"

// wgmmaLLC compiles the self-test module with llc-19 for sm_90a / PTX 8.0.
func wgmmaLLC(t *testing.T) string {
	t.Helper()
	llc := toolchain.NeedLLC(t)
	m, err := WGMMAModule()
	if err != nil {
		t.Fatal(err)
	}
	text, err := ir.LLVM19Text(m)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in := filepath.Join(dir, "wgmma.ll")
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(llc, "-O3", "-mtriple=nvptx64-nvidia-cuda", "-mcpu=sm_90a", "-mattr=+ptx80", "-o", "-", in)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("llc-19: %v\n%s", err, errb.String())
	}
	return out.String()
}

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

// TestWGMMALLCTestdata regenerates the llc-19 PTX of the self-test and
// checks that the committed testdata matches it (run with -update-wgmma to
// rewrite it), then assembles it for sm_90a.
func TestWGMMALLCTestdata(t *testing.T) {
	got := wgmmaLLC(t)
	if *wgmmaUpdate {
		if err := os.WriteFile(wgmmaLLCPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(wgmmaLLCPath)
	if err != nil {
		t.Fatalf("%v (run go test -run TestWGMMALLCTestdata -update-wgmma)", err)
	}
	if string(want) != got {
		t.Fatalf("%s is stale: llc-19 output differs (run go test -run TestWGMMALLCTestdata -update-wgmma)", wgmmaLLCPath)
	}
	toolchain.NeedPtxas(t, "sm_90a")
	if err := toolchain.Assemble(got, "sm_90a"); err != nil {
		t.Fatalf("llc-19 PTX: %v", err)
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
