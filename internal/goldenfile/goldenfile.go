// Package goldenfile compares test output with a file in the repository and
// rewrites the file when a test runs with its package's -update flag.
package goldenfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Check marks t failed (t.Errorf: the test goes on) when got differs from
// the file at path, naming regenerate (the command that rewrites the file)
// and showing the start of the diff. With update it writes got to path
// (creating its directory) instead.
func Check(t testing.TB, path, got string, update bool, regenerate string) {
	t.Helper()
	if update {
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
		t.Errorf("%v (run %s)", err, regenerate)
		return
	}
	if d := cmp.Diff(string(want), got); d != "" {
		if len(d) > 4000 {
			d = d[:4000] + "\n... (truncated)"
		}
		t.Errorf("%s is stale (-file +now); if intended, run %s and review the diff:\n%s", path, regenerate, d)
	}
}
