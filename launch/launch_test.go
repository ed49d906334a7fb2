package launch

import (
	"encoding/json"
	"math/big"
	"math/rand/v2"
	"reflect"
	"testing"
)

func TestExprEval(t *testing.T) {
	cases := []struct {
		e    Expr
		T    int64
		want int64
	}{
		{Const(7), 0, 7},
		{Const(7), 1000, 7},
		{PerT(3, 2), 5, 17},
		{Expr{A: 8, B: 128 * 4, D: 128, Min: 1}, 0, 4},
		{Expr{A: 8, B: 128 * 4, D: 128, Min: 1}, 17, 6}, // ceil(136/128)+4
		{Expr{A: 1, D: 8, Min: 1}, 0, 1},
		{Expr{A: 1, D: 8, Min: 1}, 9, 2},
		{Expr{A: 3, B: 5}, 4, 17},                  // D = 0 read as 1
		{Expr{A: 1, B: -9, D: 4}, 2, 0},            // max(0, ceil(-7/4))
		{Expr{A: 1, B: -9, D: 4, Min: -10}, 2, -1}, // ceil(-1.75)
	}
	for _, c := range cases {
		if got := c.e.Eval(c.T); got != c.want {
			t.Errorf("%v at T=%d = %d, want %d", c.e, c.T, got, c.want)
		}
	}
}

// TestExprEvalRandom checks Eval against SizeFormula computed with big
// integers (ceiling of the exact quotient) on random coefficients.
func TestExprEvalRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	for range 20000 {
		e := Expr{A: r.Int64N(1 << 12), B: r.Int64N(1<<24) - 1<<20, D: r.Int64N(1 << 10), Min: r.Int64N(1 << 12)}
		T := r.Int64N(1 << 20)
		d := max(e.D, 1)
		n := big.NewInt(e.A)
		n.Mul(n, big.NewInt(T)).Add(n, big.NewInt(e.B))
		q, m := new(big.Int).DivMod(n, big.NewInt(d), new(big.Int)) // Euclidean: q = floor(n/d) for d > 0
		if m.Sign() != 0 {
			q.Add(q, big.NewInt(1))
		}
		want := max(q.Int64(), e.Min)
		if got := e.Eval(T); got != want {
			t.Fatalf("%+v at T=%d = %d, want %d", e, T, got, want)
		}
	}
}

func TestExprString(t *testing.T) {
	for _, c := range []struct {
		e    Expr
		want string
	}{
		{Const(4096), "4096"},
		{PerT(8, 0), "8*T"},
		{PerT(1, 0), "T"},
		{PerT(2, -3), "2*T-3"},
		{Expr{A: 8, B: 8192, D: 128, Min: 1}, "max(1, ceil((8*T+8192)/128))"},
		{Expr{B: 256, D: 128, Min: 1}, "ceil((256)/128)"},
		{Expr{B: 100, D: 1, Min: 200}, "max(200, 100)"},
	} {
		if got := c.e.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
}

// TestManifestKernelJSON pins the manifest format of a kernel entry: the
// launch plan's fields inline (not under a "Kernel" key), in order, then the
// PTX layout.
func TestManifestKernelJSON(t *testing.T) {
	v := PerT(1, 0)
	k := ManifestKernel{
		Kernel: Kernel{Name: "k", Block: 128, Grid: [3]Expr{Const(2), Const(1), Const(1)}, SharedBytes: 64,
			Params: []Param{{Name: "src", Type: ParamPtr, Size: 8, Buffer: "src"}, {Name: "T", Type: ParamI32, Size: 4, Value: &v}}},
		ParamBytes: 12, StaticSharedBytes: 16,
		ParamLayout: []PTXParam{{Name: "src", Type: ".u64", Size: 8, Align: 8}, {Name: "T", Type: ".u32", Size: 4, Align: 4, Offset: 8}},
	}
	js, err := json.Marshal(k)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"name":"k","params":[{"name":"src","type":"ptr","size":8,"buffer":"src"},` +
		`{"name":"T","type":"i32","size":4,"value":{"a":1,"b":0,"d":1,"min":0}}],` +
		`"block":128,"grid":[{"a":0,"b":2,"d":1,"min":2},{"a":0,"b":1,"d":1,"min":1},{"a":0,"b":1,"d":1,"min":1}],` +
		`"shared_bytes":64,"param_bytes":12,"param_layout":[{"name":"src","type":".u64","size":8,"align":8,"offset":0,"byval":false},` +
		`{"name":"T","type":".u32","size":4,"align":4,"offset":8,"byval":false}],"static_shared_bytes":16}`
	if string(js) != want {
		t.Errorf("kernel entry JSON\n got %s\nwant %s", js, want)
	}
}

// TestManifestRoundTrip writes a manifest with random contents as JSON and
// reads it back unchanged.
func TestManifestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	ex := func() Expr {
		return Expr{A: r.Int64N(64), B: r.Int64N(1 << 20), D: 1 + r.Int64N(256), Min: r.Int64N(8)}
	}
	val := ex()
	m := Manifest{Mokc: "v", SizeFormula: SizeFormula, Notes: []string{"n"}, Layer: "l", Target: "sm_90a", PTXVersion: "8.0",
		Shape: Shape{Hidden: 1 + r.IntN(8192), Intermediate: 1 + r.IntN(4096), Experts: 1 + r.IntN(256), TopK: 1 + r.IntN(8),
			SharedWidth: r.IntN(4096), Activation: "swiglu", FC1Rows: FC1Interleaved},
		Buffers: []Buffer{{Name: "src", Kind: BufInput, DType: "bf16", Shape: []Expr{ex(), ex()}, Bytes: ex(), Doc: "d"},
			{Name: ErrBuffer, Kind: BufOutput, DType: "u32", Shape: []Expr{Const(1)}, Bytes: Const(4)}},
		Kernels: []ManifestKernel{{Kernel: Kernel{Name: "k", Block: 32 * (1 + r.IntN(32)), Grid: [3]Expr{ex(), ex(), ex()},
			SharedBytes: r.IntN(1 << 17), SkipIfZeroT: r.IntN(2) == 1, Params: []Param{
				{Name: "tm", Type: ParamTmap, Size: 128, Align: 64, Role: "a", Buffer: "src", TensorMap: &TensorMap{Operand: "a", DType: "bf16",
					Dims: []Expr{ex(), ex()}, StrideBytes: []Expr{ex()}, Box: []int{64, 1 + r.IntN(256)}, Swizzle: 128}},
				{Name: "T", Type: ParamI64, Size: 8, Value: &val}}},
			ParamBytes: 136, ParamLayout: []PTXParam{{Name: "tm", Type: ".b8", Size: 128, Align: 64, ByVal: true},
				{Name: "T", Type: ".u64", Size: 8, Align: 8, Offset: 128}}, StaticSharedBytes: r.IntN(1024)}},
		Schedule: "s",
	}
	back, err := roundTrip(m)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, m) {
		t.Errorf("round trip changed the manifest:\n got %+v\nwant %+v", back, m)
	}
}

// roundTrip writes v as JSON and reads it back.
func roundTrip[V any](v V) (V, error) {
	var back V
	js, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(js, &back)
	}
	return back, err
}
