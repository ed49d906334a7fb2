package toolchain

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Environment variables that override where the tools are found.
const (
	EnvPtxas      = "MOKC_PTXAS"         // ptxas 12.x, for sm_80 and sm_90a
	EnvPtxasSM100 = "MOKC_PTXAS_SM100"   // ptxas from CUDA >= 12.8, for sm_100a
	EnvLLC        = "MOKC_LLC"           // llc from LLVM 19
	EnvRequire    = "MOKC_REQUIRE_TOOLS" // "1": tests fail instead of skipping when a tool is absent (CI sets it)
	toolchainDir  = ".toolchain"
)

// Root returns the repository root: the nearest directory at or above the
// working directory that holds go.mod.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("toolchain: no go.mod at or above the working directory")
		}
		dir = parent
	}
}

func find(env string, candidates ...string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("toolchain: %s=%s: %v", env, p, err)
		}
		return p, nil
	}
	root, _ := Root()
	for _, c := range candidates {
		if !filepath.IsAbs(c) && !strings.Contains(c, "/") {
			if p, err := exec.LookPath(c); err == nil {
				return p, nil
			}
			continue
		}
		if !filepath.IsAbs(c) {
			if root == "" {
				continue
			}
			c = filepath.Join(root, c)
		}
		if _, err := os.Stat(c); err == nil {
			return c, nil
		}
	}
	return "", fmt.Errorf("toolchain: not found (set %s or run `make toolchain`); looked for %s", env, strings.Join(candidates, ", "))
}

// Ptxas returns the ptxas that assembles PTX for target ("sm_80", "sm_90a",
// "sm_100a"). sm_100a needs CUDA 12.8 or newer; the others use ptxas 12.x.
func Ptxas(target string) (string, error) {
	if target == "sm_100a" {
		return find(EnvPtxasSM100, toolchainDir+"/nvcc/bin/ptxas")
	}
	return find(EnvPtxas, toolchainDir+"/cuda/bin/ptxas")
}

// LLC returns llc from LLVM 19 (Debian package llvm-19).
func LLC() (string, error) {
	return find(EnvLLC, toolchainDir+"/llvm/bin/llc", "llc-19", "/usr/lib/llvm-19/bin/llc")
}

// Assemble runs ptxas on ptxText for target and returns ptxas's log in the
// error when it refuses the input, or when it reports a serialized wgmma
// pipeline (serializedWGMMA: a kernel whose wgmma.mma_async ptxas had to
// wait for one by one is a defect of the kernel, not a note to read past).
// The cubin is discarded.
func Assemble(ptxText, target string) error {
	ptxas, err := Ptxas(target)
	if err != nil {
		return err
	}
	log, err := AssembleLog(ptxas, ptxText, target)
	if err != nil {
		return err
	}
	if serializedWGMMA(log) {
		return fmt.Errorf("ptxas -arch=%s serialized a wgmma pipeline:\n%s", target, log)
	}
	return nil
}

// AssembleLog runs the ptxas at path ptxas on ptxText for target and
// returns what it printed (its info lines), or an error with that log when
// it refuses the input. The cubin is discarded.
func AssembleLog(ptxas, ptxText, target string) (string, error) {
	return assemble(ptxas, ptxText, target)
}

// assemble runs ptxas on ptxText for target with the flags more and
// returns what it printed (see AssembleLog).
func assemble(ptxas, ptxText, target string, more ...string) (string, error) {
	dir, err := os.MkdirTemp("", "mokc-ptxas")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	in := filepath.Join(dir, "in.ptx")
	if err := os.WriteFile(in, []byte(ptxText), 0o644); err != nil {
		return "", err
	}
	var out bytes.Buffer
	cmd := exec.Command(ptxas, append(append([]string{"-arch=" + target}, more...), "-o", filepath.Join(dir, "out.cubin"), in)...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("ptxas -arch=%s: %v\n%s", target, err, out.String())
	}
	return out.String(), nil
}

// serializedWGMMA reports whether a ptxas log says it serialized wgmma
// instructions ("Potential Performance Loss: wgmma.mma_async instructions
// are serialized due to ...": a divergent path (C7518), insufficient
// registers, other instructions touching accumulators, ...). Not C7517
// ("warpgroup.wait is injected ... to allow use of registers defined by
// GMMA"): ptxas 12.5 reports it for registers read after
// wgmma.wait_group 1 whose group has completed, which ptxas 12.9 accepts
// as written (TestSM90MXAssemble checks that with 12.9).
func serializedWGMMA(log string) bool {
	return strings.Contains(log, "wgmma.mma_async instructions are serialized")
}

// CompileLLC compiles LLVM IR text (LLVM 19 syntax, see ir.LLVM19Text) to
// PTX for target with llc-19 (-O2; PTX ISA 7.8 for sm_80, 8.0 otherwise),
// and returns llc's messages in the error when it refuses the input.
func CompileLLC(llvmText, target string) (string, error) {
	llc, err := LLC()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "mokc-llc")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "in.ll"), filepath.Join(dir, "out.ptx")
	if err := os.WriteFile(in, []byte(llvmText), 0o644); err != nil {
		return "", err
	}
	attr := "+ptx80"
	if target == "sm_80" {
		attr = "+ptx78"
	}
	msg, err := exec.Command(llc, "-mtriple=nvptx64-nvidia-cuda", "-mcpu="+target, "-mattr="+attr, "-O2", "-o", out, in).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("llc-19 -mcpu=%s: %v\n%s", target, err, msg)
	}
	b, err := os.ReadFile(out)
	return string(b), err
}

// Need returns the path of a tool for a test, or skips the test with a
// message when it is absent. When MOKC_REQUIRE_TOOLS=1 (set by CI) an absent
// tool fails the test instead.
func Need(t testing.TB, lookup func() (string, error)) string {
	t.Helper()
	p, err := lookup()
	if err != nil {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	return p
}

// NeedPtxas is Need for the ptxas of target.
func NeedPtxas(t testing.TB, target string) string {
	t.Helper()
	return Need(t, func() (string, error) { return Ptxas(target) })
}

// NeedLLC is Need for llc-19.
func NeedLLC(t testing.TB) string {
	t.Helper()
	return Need(t, LLC)
}

// Resources is what ptxas -v reports of one kernel.
type Resources struct {
	Registers   int // registers per thread
	SpillStores int // bytes of spill stores
	SpillLoads  int // bytes of spill loads
}

// KernelResources assembles ptxText for target with the ptxas at path
// ptxas and -v, and returns each entry's registers and spills by name
// (parseResources), or an error with ptxas's log when it refuses the
// input. The cubin is discarded.
func KernelResources(ptxas, ptxText, target string) (map[string]Resources, error) {
	log, err := assemble(ptxas, ptxText, target, "-v")
	if err != nil {
		return nil, err
	}
	return parseResources(log), nil
}

// parseResources reads ptxas -v's lines "Compiling entry function 'k'",
// "N bytes stack frame, S bytes spill stores, L bytes spill loads" and
// "Used R registers" into each entry's Resources.
func parseResources(log string) map[string]Resources {
	out := map[string]Resources{}
	var name string
	for _, line := range strings.Split(log, "\n") {
		var r Resources
		switch {
		case strings.Contains(line, "Compiling entry function '"):
			name = strings.SplitN(strings.SplitN(line, "'", 3)[1], "'", 2)[0]
		case name == "":
		case strings.Contains(line, "bytes spill stores"):
			var frame int
			if _, err := fmt.Sscanf(strings.TrimSpace(line), "%d bytes stack frame, %d bytes spill stores, %d bytes spill loads", &frame, &r.SpillStores, &r.SpillLoads); err == nil {
				cur := out[name]
				cur.SpillStores, cur.SpillLoads = r.SpillStores, r.SpillLoads
				out[name] = cur
			}
		case strings.Contains(line, "Used "):
			if _, err := fmt.Sscanf(line[strings.Index(line, "Used "):], "Used %d registers", &r.Registers); err == nil {
				cur := out[name]
				cur.Registers = r.Registers
				out[name] = cur
			}
		}
	}
	return out
}
