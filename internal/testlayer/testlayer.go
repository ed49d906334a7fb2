// Package testlayer gives tests the layers and schedules they start from,
// failing the test instead of returning an error: a preset by name (with
// MXFP8 weights by a suffix), a preset with per-expert weight storage, and
// a layer's default schedule on a target.
package testlayer

import (
	"strings"
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

// Named returns the preset named name (Preset), or, for "<preset> mxfp8",
// that preset with MXFP8 routed weights (schedule.MXFP8).
func Named(t testing.TB, name string) schedule.Layer {
	t.Helper()
	base, mx := strings.CutSuffix(name, " mxfp8")
	l := Preset(t, base)
	if mx {
		l.Precision = schedule.MXFP8
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

// PerExpert returns preset name (Preset) with per-expert weight storage
// (schedule.PerExpertWeights: the weights and the backward's routed main
// grads behind device pointer tables) and main grads of dtype g, named
// "<name>-per-expert-<g>" (e.g. "qwen3-30b-a3b-per-expert-bf16").
func PerExpert(t testing.TB, name string, g schedule.GradDType) schedule.Layer {
	t.Helper()
	l := Preset(t, name)
	l.Storage, l.MainGrad = schedule.PerExpertWeights, g
	l.Name += "-per-expert-" + g.String()
	return l
}
