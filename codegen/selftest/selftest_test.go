package selftest

import (
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/ir"
)

var update = flag.Bool("update", false, "rewrite testdata/llc/*.ptx from llc-19")

// llcPTX compiles case c through llc-19 (ir.LLVM19Text → llc-19).
func llcPTX(t *testing.T, c Case) string {
	t.Helper()
	llc := toolchain.NeedLLC(t)
	m, err := c.Build()
	if err != nil {
		t.Fatal(err)
	}
	text, err := ir.LLVM19Text(m)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.ll"), filepath.Join(dir, "out.ptx")
	if err := os.WriteFile(in, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	attr := "+ptx78"
	if c.Target != "sm_80" {
		attr = "+ptx80"
	}
	msg, err := exec.Command(llc, "-mtriple=nvptx64-nvidia-cuda", "-mcpu="+c.Target, "-mattr="+attr, "-O2", "-o", out, in).CombinedOutput()
	if err != nil {
		t.Fatalf("llc-19: %v\n%s", err, msg)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGenerateLLCPTX keeps testdata/llc/<case>.ptx, llc-19's PTX of every
// case (carried by the GPU test, since the GPU machine has no llc), in step
// with the kernels: a stale file fails; -update rewrites them.
func TestGenerateLLCPTX(t *testing.T) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			got := llcPTX(t, c)
			path := filepath.Join("testdata", "llc", c.Name+".ptx")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./codegen/selftest -run TestGenerateLLCPTX -update)", err)
			}
			if string(want) != got {
				t.Fatalf("%s is stale: run go test ./codegen/selftest -run TestGenerateLLCPTX -update", path)
			}
		})
	}
}

// TestAssemble checks that every case's PTX, ours and llc-19's, assembles
// with ptxas for the case's target.
func TestAssemble(t *testing.T) {
	for _, c := range Cases() {
		t.Run(c.Name, func(t *testing.T) {
			toolchain.NeedPtxas(t, c.Target)
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
				if err := toolchain.Assemble(src, c.Target); err != nil {
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
