package ptx

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llir/llvm/asm"
	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/types"

	"github.com/mokc/mokc/internal/goldenfile"
	"github.com/mokc/mokc/internal/toolchain"
	mokcir "github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/target"
)

var update = flag.Bool("update", false, "rewrite the golden PTX files under testdata/golden")

// A test case is a testdata/*.ll file in LLVM 14 (typed pointer) syntax.
// Directives in its leading comment lines:
//
//	; targets: sm_90a sm_100a     compile only for these (default: all)
//	; llc: skip <reason>          leave it out of the llc-19 differential test
type testCase struct {
	name    string
	path    string
	src     string
	targets []target.Target
	llcSkip string
}

func loadCases(t *testing.T, dir string) []testCase {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.ll"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no test cases in %s", dir)
	}
	var out []testCase
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		tc := testCase{name: strings.TrimSuffix(filepath.Base(p), ".ll"), path: p, src: string(b), targets: target.All()}
		for _, l := range strings.Split(tc.src, "\n") {
			if !strings.HasPrefix(l, ";") {
				break
			}
			l = strings.TrimSpace(strings.TrimPrefix(l, ";"))
			switch {
			case strings.HasPrefix(l, "targets:"):
				tc.targets = nil
				for _, f := range strings.Fields(strings.TrimPrefix(l, "targets:")) {
					tg, err := target.Parse(f)
					if err != nil {
						t.Fatal(err)
					}
					tc.targets = append(tc.targets, tg)
				}
			case strings.HasPrefix(l, "llc: skip"):
				tc.llcSkip = strings.TrimSpace(strings.TrimPrefix(l, "llc: skip"))
			}
		}
		out = append(out, tc)
	}
	return out
}

func parse(t *testing.T, name, src string) *llir.Module {
	t.Helper()
	m, err := asm.ParseString(name, src)
	if err != nil {
		t.Fatalf("parse %s: %v", name, err)
	}
	fixParsedTypes(m)
	return m
}

// fixParsedTypes works around llir v0.3.6's text parser, which types the
// result of cmpxchg as { T, i8 } where LLVM (and llir's builder) has
// { T, i1 }.
func fixParsedTypes(m *llir.Module) {
	for pass := 0; pass < 2; pass++ {
		for _, f := range m.Funcs {
			for _, b := range f.Blocks {
				for _, inst := range b.Insts {
					switch inst := inst.(type) {
					case *llir.InstCmpXchg:
						inst.Typ = types.NewStruct(inst.New.Type(), types.I1)
					case *llir.InstExtractValue:
						if _, ok := inst.X.(*llir.InstCmpXchg); ok && pass == 1 {
							inst.Typ = nil
							inst.Type()
						}
					}
				}
			}
		}
	}
}

// TestGolden compiles every testdata/*.ll for each of its targets, compares
// the PTX with testdata/golden/<name>.<target>.ptx (-update rewrites them),
// and assembles it with the target's ptxas.
func TestGolden(t *testing.T) {
	for _, tc := range loadCases(t, "testdata") {
		for _, target := range tc.targets {
			t.Run(tc.name+"/"+target.String(), func(t *testing.T) {
				m := parse(t, tc.path, tc.src)
				got, err := Compile(m, target)
				if err != nil {
					t.Fatalf("Compile: %v", err)
				}
				goldenfile.Check(t, filepath.Join("testdata", "golden", tc.name+"."+target.String()+".ptx"), got, *update,
					"go test ./ptx -run TestGolden -update")
				// Compiling again gives the same text (deterministic names).
				again, err := Compile(parse(t, tc.path, tc.src), target)
				if err != nil || again != got {
					t.Errorf("second compilation differs (err %v)", err)
				}
				toolchain.NeedPtxas(t, target.String())
				if err := toolchain.Assemble(got, target.String()); err != nil {
					t.Errorf("ptxas rejects our PTX: %v\n%s", err, numbered(got))
				}
			})
		}
	}
}

// TestLLCDifferential compiles each test case with llc-19 for sm_90a too and
// requires ptxas to accept both outputs.
func TestLLCDifferential(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	for _, tc := range loadCases(t, "testdata") {
		t.Run(tc.name, func(t *testing.T) {
			if tc.llcSkip != "" {
				t.Skipf("llc: skip %s", tc.llcSkip)
			}
			if !hasTarget(tc.targets, target.SM90a) {
				t.Skip("not compiled for sm_90a")
			}
			m := parse(t, tc.path, tc.src)
			ours, err := Compile(m, target.SM90a)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			text, err := llvm19Text(m)
			if err != nil {
				t.Fatalf("LLVM 19 text: %v", err)
			}
			toolchain.NeedLLC(t)
			theirs, err := toolchain.CompileLLC(text, "sm_90a")
			if err != nil {
				t.Fatalf("llc-19 rejects the IR: %v\n%s", err, numbered(text))
			}
			toolchain.NeedPtxas(t, target.SM90a.String())
			if err := toolchain.Assemble(theirs, target.SM90a.String()); err != nil {
				t.Errorf("ptxas rejects llc-19's PTX: %v", err)
			}
			if err := toolchain.Assemble(ours, target.SM90a.String()); err != nil {
				t.Errorf("ptxas rejects our PTX: %v", err)
			}
		})
	}
}

func hasTarget(ts []target.Target, t target.Target) bool {
	for _, x := range ts {
		if x == t {
			return true
		}
	}
	return false
}

// TestErrors compiles each testdata/errors/*.ll, which must be refused with
// an *Error whose text contains every "; error: <text>" line of the file.
func TestErrors(t *testing.T) {
	for _, tc := range loadCases(t, filepath.Join("testdata", "errors")) {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for _, l := range strings.Split(tc.src, "\n") {
				if s, ok := strings.CutPrefix(l, "; error: "); ok {
					want = append(want, s)
				}
			}
			if len(want) == 0 {
				t.Fatal("no ; error: lines")
			}
			for _, target := range tc.targets {
				_, err := Compile(parse(t, tc.path, tc.src), target)
				if err == nil {
					t.Fatalf("%s: compiled; want an error containing %q", target, want)
				}
				var e *Error
				if !errors.As(err, &e) {
					t.Fatalf("%s: error %v is a %T, want *ptx.Error", target, err, err)
				}
				for _, w := range want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error %q does not contain %q", target, err, w)
					}
				}
			}
		})
	}
}

func numbered(s string) string {
	var b strings.Builder
	for i, l := range strings.Split(s, "\n") {
		fmt.Fprintf(&b, "%4d %s\n", i+1, l)
	}
	return b.String()
}

// llvm19Text is the module in LLVM 19 syntax (opaque pointers) for llc-19.
func llvm19Text(m *llir.Module) (string, error) { return mokcir.LLVM19Text(m) }
