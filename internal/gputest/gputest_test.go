package gputest

import (
	"slices"
	"testing"

	"github.com/mokc/mokc/target"
)

func TestTargets(t *testing.T) {
	for _, c := range []struct {
		cc   int
		want []target.Target
	}{{75, nil}, {80, []target.Target{target.SM80}}, {90, []target.Target{target.SM80, target.SM90a}}} {
		if got := Targets(c.cc); !slices.Equal(got, c.want) {
			t.Errorf("Targets(%d) = %v, want %v", c.cc, got, c.want)
		}
	}
}
