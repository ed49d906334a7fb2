// Package testlayer gives tests the layers and schedules they start from,
// failing the test instead of returning an error: a preset by name and a
// layer's default schedule on a target.
package testlayer

import (
	"testing"

	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// Preset returns the preset layer named name (schedule.Preset); an unknown
// name fails t.
func Preset(t testing.TB, name string) schedule.Layer {
	t.Helper()
	l, err := schedule.Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// DefaultSchedule returns l's default schedule on tg
// (schedule.DefaultSchedule); an error fails t.
func DefaultSchedule(t testing.TB, l schedule.Layer, tg target.Target) schedule.Schedule {
	t.Helper()
	s, err := schedule.DefaultSchedule(l, tg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
