package golden

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/mokc/mokc/compiler"
	"github.com/mokc/mokc/internal/goldenfile"
	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

var update = flag.Bool("update", false, "rewrite the golden PTX files from the current compiler")

// variant is one kind of golden file: the presets as they are (bf16) on
// every target, and their MXFP8 form on the targets with an MXFP8 forward
// (sm_90a, sm_100a; docs/mxfp8.md).
type variant struct {
	suffix    string // "" or ".mxfp8", before the target in the file name
	precision schedule.Precision
	targets   []target.Target
}

var variants = []variant{
	{"", schedule.BF16, target.All()},
	{".mxfp8", schedule.MXFP8, []target.Target{target.SM90a, target.SM100a}},
}

// file is the golden file of preset p in variant v for target t.
func file(p string, v variant, t target.Target) string {
	return filepath.Join("testdata", fmt.Sprintf("%s%s.%s.ptx", p, v.suffix, t))
}

type result struct {
	name string
	ptx  string
	err  error
}

// compileAll compiles every preset for every target and variant, in
// parallel.
func compileAll(t *testing.T) []result {
	t.Helper()
	type job struct {
		preset string
		v      variant
		target target.Target
	}
	var jobs []job
	for _, p := range schedule.Presets() {
		for _, v := range variants {
			for _, tg := range v.targets {
				jobs = append(jobs, job{p, v, tg})
			}
		}
	}
	res := make([]result, len(jobs))
	parallel(len(jobs), func(i int) {
		j := jobs[i]
		res[i].name = file(j.preset, j.v, j.target)
		l, err := schedule.Preset(j.preset)
		if err != nil {
			res[i].err = err
			return
		}
		l.Precision = j.v.precision
		a, err := compiler.CompileDefault(l, j.target)
		if err != nil {
			res[i].err = err
			return
		}
		res[i].ptx = a.PTX.Text
	})
	return res
}

// TestGolden compiles every preset for every target (and its MXFP8 form
// for sm_90a) and diffs the PTX against testdata/<preset>.<target>.ptx
// (testdata/<preset>.mxfp8.<target>.ptx). With -update it rewrites the files
// (review the diff before committing).
func TestGolden(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles every preset for every target")
	}
	res := compileAll(t)
	seen := map[string]bool{}
	for _, r := range res {
		seen[filepath.Base(r.name)] = true
		if r.err != nil {
			t.Errorf("%s: %v", r.name, r.err)
			continue
		}
		goldenfile.Check(t, r.name, r.ptx, *update, "go test ./golden -update")
	}
	// No stale golden files.
	entries, _ := os.ReadDir("testdata")
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".ptx") && !seen[e.Name()] {
			if *update {
				os.Remove(filepath.Join("testdata", e.Name()))
				continue
			}
			t.Errorf("testdata/%s belongs to no preset and target (run -update)", e.Name())
		}
	}
}

// TestGoldenAssembles runs ptxas on every golden file for its target: 12.x
// for sm_80 and sm_90a, CUDA >= 12.8 for sm_100a.
func TestGoldenAssembles(t *testing.T) {
	if testing.Short() {
		t.Skip("assembles every golden file")
	}
	files, err := filepath.Glob("testdata/*.ptx")
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files (%v)", err)
	}
	sort.Strings(files)
	byTarget := map[string][]string{}
	for _, f := range files {
		parts := strings.Split(filepath.Base(f), ".")
		tg := parts[len(parts)-2]
		byTarget[tg] = append(byTarget[tg], f)
	}
	want := map[target.Target]int{}
	for _, v := range variants {
		for _, tg := range v.targets {
			want[tg] += len(schedule.Presets())
		}
	}
	for _, tg := range target.All() {
		toolchain.NeedPtxas(t, tg.String())
		if len(byTarget[tg.String()]) != want[tg] {
			t.Errorf("%s: %d golden files, want one per preset and variant (%d)", tg, len(byTarget[tg.String()]), want[tg])
		}
	}
	errs := make([]error, len(files))
	parallel(len(files), func(i int) {
		f := files[i]
		parts := strings.Split(filepath.Base(f), ".")
		text, err := os.ReadFile(f)
		if err == nil {
			err = toolchain.Assemble(string(text), parts[len(parts)-2])
		}
		errs[i] = err
	})
	for i, err := range errs {
		if err != nil {
			t.Errorf("%s: %v", files[i], truncate(err.Error(), 3000))
		}
	}
}

// parallel runs f(0), ..., f(n-1) on up to GOMAXPROCS goroutines and
// waits for all of them.
func parallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "\n... (truncated)"
}
