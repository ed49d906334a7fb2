package schedule

import "math"

// act holds one gated activation with its constants (formulas and sources:
// the Activation constants).
type act struct {
	kind  Activation
	limit float64 // L (ClampedSwiGLU, GPTOSS)
	alpha float64 // GPTOSS
}

func sigmoid(x float64) float64 {
	if x >= 0 {
		return 1 / (1 + math.Exp(-x))
	}
	e := math.Exp(x)
	return e / (1 + e)
}

// clampIn returns min(g, L) and clamp(u, -L, L). math.Min/Max propagate NaN,
// so a NaN input stays NaN (IEEE semantics; a GPU min.f32 would return the
// other operand).
func (a act) clampIn(g, u float64) (float64, float64) {
	if a.kind == SwiGLU {
		return g, u
	}
	return math.Min(g, a.limit), math.Max(math.Min(u, a.limit), -a.limit)
}

// forward returns h = act(g, u).
func (a act) forward(g, u float64) float64 {
	g, u = a.clampIn(g, u)
	if a.kind == GPTOSS {
		return g * sigmoid(a.alpha*g) * (u + 1)
	}
	return g * sigmoid(g) * u
}

// backward returns dg, du for upstream gradient dh. Clamped inputs pass no
// gradient: dg = 0 when g > L; du = 0 when u is outside [-L, L].
func (a act) backward(g, u, dh float64) (dg, du float64) {
	gc, uc := a.clampIn(g, u)
	var dgc, duc float64
	if a.kind == GPTOSS {
		s := sigmoid(a.alpha * gc)
		dgc = (s + gc*a.alpha*s*(1-s)) * (uc + 1) * dh
		duc = gc * s * dh
	} else {
		s := sigmoid(gc)
		dgc = (s + gc*s*(1-s)) * uc * dh
		duc = gc * s * dh
	}
	if a.kind == SwiGLU {
		return dgc, duc
	}
	if g > a.limit {
		dgc = 0
	}
	if u < -a.limit || u > a.limit {
		duc = 0
	}
	return dgc, duc
}

// Apply returns h = a(g, u) with clamp limit L (ClampedSwiGLU, GPTOSS) and
// sigmoid slope alpha (GPTOSS): the formulas of the Activation constants,
// in float64.
func (a Activation) Apply(g, u, limit, alpha float64) float64 {
	return act{a, limit, alpha}.forward(g, u)
}

// Grad returns dL/dg and dL/du of h = a(g, u) for the upstream gradient
// dh = dL/dh (chain rule on the formulas of the Activation constants; an
// input cut by a clamp passes no gradient).
func (a Activation) Grad(g, u, limit, alpha, dh float64) (dg, du float64) {
	return act{a, limit, alpha}.backward(g, u, dh)
}
