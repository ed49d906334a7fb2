package launch

import "fmt"

// SizeFormula is how every Expr of a manifest ({a, b, d, min}: grids, buffer
// sizes and shapes, scalar arguments, tensor-map extents) is evaluated at T
// tokens, as the manifest states it for launchers (Manifest.SizeFormula).
const SizeFormula = "max(min, ceil((a*T + b) / d)), d = 0 read as 1"

// Expr is a non-negative integer as a function of the token count T:
//
//	value(T) = max(Min, ceil((A*T + B) / D))
//
// (D = 0 is read as 1). Grid sizes and buffer sizes of a launch plan are
// Exprs so the host can size everything from T alone, without reading
// anything back from the device.
type Expr struct {
	A   int64 `json:"a"`   // coefficient of T
	B   int64 `json:"b"`   // constant term
	D   int64 `json:"d"`   // divisor of the ceiling division (0 read as 1)
	Min int64 `json:"min"` // lower bound of the value
}

// Const is the Expr that is c for every T.
func Const(c int64) Expr { return Expr{B: c, D: 1, Min: c} }

// PerT is the Expr a*T + b.
func PerT(a, b int64) Expr { return Expr{A: a, B: b, D: 1} }

// Eval returns the value of e at T tokens (SizeFormula; a negative
// numerator rounds toward zero).
func (e Expr) Eval(T int64) int64 {
	d := e.D
	if d <= 0 {
		d = 1
	}
	n := e.A*T + e.B
	v := (n + d - 1) / d
	if n < 0 {
		v = n / d
	}
	if v < e.Min {
		v = e.Min
	}
	return v
}

// String writes e in a readable form, e.g. "max(1, ceil((8*T+8192)/128))".
func (e Expr) String() string {
	d := e.D
	if d <= 0 {
		d = 1
	}
	var s string
	switch {
	case e.A == 0:
		s = fmt.Sprint(e.B)
	case e.A == 1:
		s = "T"
	default:
		s = fmt.Sprintf("%d*T", e.A)
	}
	switch {
	case e.A != 0 && e.B > 0:
		s += fmt.Sprintf("+%d", e.B)
	case e.A != 0 && e.B < 0:
		s += fmt.Sprintf("-%d", -e.B)
	}
	if d != 1 {
		s = fmt.Sprintf("ceil((%s)/%d)", s, d)
	}
	if e.Min > 0 && !(e.A == 0 && (e.B+d-1)/d >= e.Min) {
		s = fmt.Sprintf("max(%d, %s)", e.Min, s)
	}
	return s
}
