package codegen

import (
	"strings"
	"testing"

	"github.com/mokc/mokc/moe"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestLowerRefusesBackward: the backward program's ops have no kernels
// yet; Lower says which op it stopped at instead of emitting a partial
// program.
func TestLowerRefusesBackward(t *testing.T) {
	l, err := schedule.Preset("qwen3-30b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	p, err := moe.Backward(l)
	if err != nil {
		t.Fatal(err)
	}
	s, err := schedule.DefaultSchedule(l, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Lower(p, s, PerOp)
	if err == nil || !strings.Contains(err.Error(), "fc2_dgrad") {
		t.Fatalf("Lower(backward) = %v, want an error naming fc2_dgrad", err)
	}
}
