// Package testlayer gives tests the layers and schedules they start from,
// failing the test instead of returning an error: a preset by name (with
// MXFP8 weights by a suffix), a preset with per-expert weight storage, a
// layer's default schedule on a target, and tiles that fit two blocks per
// SM.
package testlayer

import (
	"strconv"
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

// Named returns the preset named name (Preset); "<preset> mxfp8" is that
// preset with MXFP8 routed weights (schedule.MXFP8) and "<preset> E<n>"
// with n routed experts (a smaller layer of the same shapes, whose float64
// reference is quicker), "<preset> E<n> mxfp8" both. A malformed suffix
// fails t.
func Named(t testing.TB, name string) schedule.Layer {
	t.Helper()
	base, mx := strings.CutSuffix(name, " mxfp8")
	experts := 0
	if i := strings.LastIndex(base, " E"); i >= 0 {
		n, err := strconv.Atoi(base[i+2:])
		if err != nil || n < 1 {
			t.Fatalf("testlayer: %q: want \"<preset> E<experts>\"", name)
		}
		base, experts = base[:i], n
	}
	l := Preset(t, base)
	if mx {
		l.Precision = schedule.MXFP8
	}
	if experts > 0 {
		l.Experts = experts
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

// SharesSMTiles sets s's routed GEMM tiles (FC1, FC2, Stages, Warps.MMA)
// to ones that fit one of two sm_90a blocks per SM (schedule.Schedule
// .BlocksPerSM) of one consumer warpgroup and prod producer warps
// (Warps.Producer: 1, a producer warp within 168 registers per thread;
// 4, a producer warpgroup whose consumers get 200-216 after setmaxnreg
// but whose wgmma stay within the launch's 128): with 1, 64x256x64 (FC1)
// and 64x192x64 (FC2) with two stages for bf16, 64x128x128 with three for
// mxfp8's register-fed GEMMs; with 4, 64x192x64 with three for bf16 and
// 128x128x128 with two for mxfp8 (one consumer warpgroup of 128 token
// rows) where l has no shared expert, else 64x128x128 with three; and the
// fixed walk of work items (Items), two blocks per SM's only one. It sets
// neither Warps.Producer nor BlocksPerSM.
func SharesSMTiles(s *schedule.Schedule, l schedule.Layer, prod int) {
	t := func(m, n, k int) schedule.Tile { return schedule.Tile{M: m, N: n, K: k} }
	s.Warps.MMA = 4
	s.Items = schedule.ItemsFixed         // the only walk of two blocks per SM, so one per SM too
	s.FC2Large = schedule.LargeRowsTile{} // its 192 rows need 8 MMA warps
	switch {
	case l.Precision == schedule.MXFP8 && prod == 4 && l.SharedExperts == 0:
		s.FC1, s.FC2, s.Stages = t(128, 128, 128), t(128, 128, 128), 2
	case l.Precision == schedule.MXFP8:
		s.FC1, s.FC2, s.Stages = t(64, 128, 128), t(64, 128, 128), 3
	case prod == 4:
		s.FC1, s.FC2, s.Stages = t(64, 192, 64), t(64, 192, 64), 3
	default:
		s.FC1, s.FC2, s.Stages = t(64, 256, 64), t(64, 192, 64), 2
	}
}
