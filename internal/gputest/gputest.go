// Package gputest opens the GPU for mokc's GPU tests (the cuda-tagged tests
// of driver and runtime): Open skips a test where there is no device, or
// fails it when EnvRequire is set, so that a run on a GPU machine cannot
// pass by skipping.
package gputest

import (
	"errors"
	"os"
	"testing"

	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/target"
)

// EnvRequire is the environment variable that, set to "1", makes Open fail
// a test instead of skipping it when no device is usable
// (scripts/device-verify.sh sets it).
const EnvRequire = "MOKC_REQUIRE_GPU"

// Open opens device 0 for test t and closes it when t ends (an error of
// Close fails t). Where the driver reports driver.ErrNoDevice (no driver,
// the toolkit's stub libcuda, no device) it skips t, or fails it when
// EnvRequire is "1"; any other error fails t. Without the cuda build tag
// Open fails t with driver.ErrNoCUDA: call it from cuda-tagged tests.
func Open(t testing.TB) *driver.Context {
	t.Helper()
	ctx, err := driver.Open(0)
	if errors.Is(err, driver.ErrNoDevice) {
		if os.Getenv(EnvRequire) == "1" {
			t.Fatalf("%s=1 but: %v", EnvRequire, err)
		}
		t.Skipf("skipping: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ctx.Close(); err != nil {
			t.Error(err)
		}
	})
	return ctx
}

// Targets returns the targets a device of compute capability cc (major*10 +
// minor) runs, in target.All's order (target.Target.RunsOn): sm_80 from
// 8.0 on, sm_90a on 9.0 exactly, sm_100a on 10.0 exactly.
func Targets(cc int) []target.Target {
	var ts []target.Target
	for _, t := range target.All() {
		if t.RunsOn(cc) == nil {
			ts = append(ts, t)
		}
	}
	return ts
}
