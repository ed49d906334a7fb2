package selftest

import (
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/mokc/mokc/internal/goldenfile"
	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/ir"
)

var update = flag.Bool("update", false, "rewrite testdata/llc/*.ptx from llc-19")

// llcPTX compiles case c through llc-19 (ir.LLVM19Text → llc-19).
func llcPTX(t *testing.T, c Case) string {
	t.Helper()
	toolchain.NeedLLC(t)
	m, err := c.Build()
	if err != nil {
		t.Fatal(err)
	}
	text, err := ir.LLVM19Text(m)
	if err != nil {
		t.Fatal(err)
	}
	ptx, err := toolchain.CompileLLC(text, c.Target.String())
	if err != nil {
		t.Fatal(err)
	}
	return ptx
}

// TestGenerateLLCPTX keeps testdata/llc/<case>.ptx, llc-19's PTX of every
// case (carried by the GPU test, since the GPU machine has no llc), in step
// with the kernels: a stale file fails; -update rewrites them.
func TestGenerateLLCPTX(t *testing.T) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			got := llcPTX(t, c)
			goldenfile.Check(t, filepath.Join("testdata", "llc", c.Name+".ptx"), got, *update,
				"go test ./codegen/selftest -run TestGenerateLLCPTX -update")
		})
	}
}

// TestAssemble checks that every case's PTX, ours and llc-19's, assembles
// with ptxas for the case's target.
func TestAssemble(t *testing.T) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			toolchain.NeedPtxas(t, c.Target.String())
			variants := map[string]string{}
			if ours, err := compileOurs(c); err != nil {
				t.Fatalf("ptx: %v", err)
			} else if ours != "" {
				variants["ours"] = ours
			}
			if b, err := os.ReadFile(filepath.Join("testdata", "llc", c.Name+".ptx")); err == nil {
				variants["llc"] = string(b)
			} else {
				t.Fatal(err)
			}
			for name, src := range variants {
				if err := toolchain.Assemble(src, c.Target.String()); err != nil {
					t.Errorf("%s PTX: %v", name, err)
				}
			}
		})
	}
}

// TestBuild checks that every case builds and passes ir.Check.
func TestBuild(t *testing.T) {
	if len(Cases()) < 4 {
		t.Fatalf("only %d cases registered", len(Cases()))
	}
	for _, c := range Cases() {
		if _, err := c.Build(); err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
	}
}
