package schedule

import (
	"strings"
	"testing"
	"time"

	"github.com/mokc/mokc/target"
)

// Every preset and every Hugging Face config mokc ships passes the limits
// with room to spare, and every limit refuses the first value beyond it.
func TestLayerLimits(t *testing.T) {
	for _, n := range Presets() {
		l, _ := Preset(n)
		if l.TopK*4 > MaxTopK || l.Experts*16 > MaxExperts || l.Hidden*4 > MaxHidden ||
			l.Intermediate*4 > MaxIntermediate || l.SharedWidth()*3 > MaxIntermediate || l.WeightBytes()*3 > target.MaxMemoryBytes() {
			t.Errorf("%s is within 4x of a size limit or 3x of the memory limit: %v, %d weight bytes", n, l, l.WeightBytes())
		}
	}
	base, _ := Preset("qwen3-30b-a3b")
	shared, _ := Preset("qwen2-57b-a14b")
	small := Layer{Hidden: 8, Intermediate: 8, Experts: 64, TopK: 8}
	checkLayerCases(t, []layerCase{
		{"top-k 33", small, func(l *Layer) { l.TopK = MaxTopK + 1 }, "Layer.TopK", "<= 32 (the combine"},
		{"top-k 1e6", small, func(l *Layer) { l.TopK = 1_000_000 }, "Layer.TopK", "<= 32"},
		{"experts 65537", small, func(l *Layer) { l.Experts = MaxExperts + 1 }, "Layer.Experts", "<= 65536 (one dispatch block"},
		{"experts 1e6", small, func(l *Layer) { l.Experts = 1_000_000; l.TopK = 1_000_000 }, "Layer.Experts", "<= 65536"},
		{"hidden", small, func(l *Layer) { l.Hidden = MaxHidden + 8 }, "Layer.Hidden", "<= 65536 (GEMM column"},
		{"intermediate", small, func(l *Layer) { l.Intermediate = MaxIntermediate + 8 }, "Layer.Intermediate", "<= 65536 (GEMM column"},
		{"shared experts", shared, func(l *Layer) { l.SharedExperts = MaxSharedExperts + 1 }, "Layer.SharedExperts", "0..64"},
		{"shared width", shared, func(l *Layer) { l.SharedExperts = 4 }, "Layer.SharedIntermediate", "<= 65536"},
		{"shared intermediate", shared, func(l *Layer) { l.SharedIntermediate = MaxIntermediate + 8 }, "Layer.SharedIntermediate", "<= 65536"},
		{"weights", base, func(l *Layer) { l.Hidden, l.Intermediate, l.Experts = 16384, 16384, 4096 }, "Layer.Experts", "largest GPU"},
		{"weights just over", Layer{Hidden: 8192, Intermediate: 8192, Experts: 477, TopK: 8}, func(*Layer) {}, "Layer.Experts", "192.0 GB"},
	})
	// The largest layer within every limit is valid and its schedules are.
	edge := Layer{Hidden: 8192, Intermediate: 8192, Experts: 476, TopK: MaxTopK}
	if err := edge.Validate(); err != nil {
		t.Fatalf("%v: %v", edge, err)
	}
	for _, tg := range target.All() {
		if _, err := DefaultSchedule(edge, tg); err != nil {
			t.Errorf("%v: %v", tg, err)
		}
	}
	wide := Layer{Hidden: MaxHidden, Intermediate: MaxIntermediate, Experts: 4, TopK: 2, SharedExperts: 1, SharedIntermediate: MaxIntermediate}
	if err := wide.Validate(); err != nil {
		t.Fatalf("%v: %v", wide, err)
	}
}

// layerCase is an invalid layer: from with edit applied must be refused
// on field with a message containing rule.
type layerCase struct {
	name  string
	from  Layer
	edit  func(*Layer)
	field string
	rule  string
}

// checkLayerCases checks that Validate and DefaultSchedule (every target)
// refuse each case, within 100 ms.
func checkLayerCases(t *testing.T, cases []layerCase) {
	t.Helper()
	for _, c := range cases {
		l := c.from
		c.edit(&l)
		start := time.Now()
		wantFieldErr(t, c.name, l.Validate(), c.field, c.rule)
		for _, tg := range target.All() {
			if _, err := DefaultSchedule(l, tg); err == nil {
				t.Errorf("%s: DefaultSchedule(%v) accepts the layer", c.name, tg)
			}
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("%s: refusing took %v", c.name, d)
		}
	}
}

// MaxTokens keeps T*K and the GEMM work items below 2^31 - 2^16, for the
// presets and for the extreme tiles and layers the limits allow.
func TestMaxTokens(t *testing.T) {
	l, _ := Preset("qwen3-30b-a3b")
	if got, want := l.MaxTokens(), (1<<31-1<<16)/8; got != want {
		t.Errorf("qwen3-30b-a3b MaxTokens = %d, want %d", got, want)
	}
	if (Layer{}).MaxTokens() != 0 {
		t.Error("the zero Layer has a token limit")
	}
	// mxfp8: the quantize kernels' thread index (one per 8 elements of the
	// T*K routed rows of width max(H, I)) stays an unsigned i32.
	for _, n := range []string{"qwen3-30b-a3b", "deepseek-v3", "mixtral-8x7b"} {
		l, _ := Preset(n)
		l.Precision = MXFP8
		T, w := int64(l.MaxTokens()), int64(max(l.Hidden, l.Intermediate))
		if threads := T * int64(l.TopK) * w / 8; threads > 1<<32-1<<16 || (T+1)*int64(l.TopK)*w/8 <= 1<<32-1<<16 {
			t.Errorf("%s mxfp8: MaxTokens = %d: %d quantize threads, want the most up to 2^32 - 2^16", n, T, threads)
		}
	}
	for _, n := range Presets() {
		l, _ := Preset(n)
		for _, tg := range target.All() {
			s, err := DefaultSchedule(l, tg)
			if err != nil {
				t.Fatal(err)
			}
			T := s.MaxTokens(l)
			if T < 1<<24 || T > l.MaxTokens() {
				t.Errorf("%s %v: MaxTokens = %d (layer %d)", n, tg, T, l.MaxTokens())
			}
			checkWorkItems(t, n, l, s, T)
		}
	}
	// The widest layer with the narrowest sm_90a tiles and the most experts
	// still runs hundreds of thousands of tokens.
	worst := Layer{Hidden: MaxHidden / 2, Intermediate: 8, Experts: MaxExperts, TopK: MaxTopK}
	if err := worst.Validate(); err != nil {
		t.Fatal(err)
	}
	s, err := DefaultSchedule(worst, target.SM90a)
	if err != nil {
		t.Fatal(err)
	}
	s.Variant = nil
	s.FC2.N = 8
	T := s.MaxTokens(worst)
	if T < 100_000 || T >= worst.MaxTokens() {
		t.Errorf("narrow tiles: MaxTokens = %d (layer %d)", T, worst.MaxTokens())
	}
	checkWorkItems(t, "narrow tiles", worst, s, T)
	s.Stages = 1
	if s.MaxTokens(worst) != 0 {
		t.Error("an invalid schedule has a token limit")
	}
}

// checkWorkItems checks that at T tokens every routed GEMM's work items fit
// the index limit and that at T+1 something does not (or T is the layer's).
func checkWorkItems(t *testing.T, name string, l Layer, s Schedule, T int) {
	t.Helper()
	fits := func(T int) bool {
		ok := T*l.TopK <= indexLimit
		for _, g := range []struct {
			tile Tile
			n    int
		}{{s.FC1, 2 * l.Intermediate}, {s.FC2, l.Hidden}} {
			blocks := (g.n + g.tile.N - 1) / g.tile.N
			tiles := (T*l.TopK+g.tile.M-1)/g.tile.M + l.Experts
			ok = ok && tiles*blocks <= indexLimit
		}
		return ok
	}
	if !fits(T) {
		t.Errorf("%s: %d tokens overflow", name, T)
	}
	if s.Variant == nil && l.SharedExperts == 0 && fits(T+1) {
		t.Errorf("%s: %d tokens is not the largest", name, T)
	}
}

func TestWeightBytes(t *testing.T) {
	l, _ := Preset("deepseek-v3")
	// 256 experts x 3 x 2048 x 7168 bf16 + one shared expert of 2048.
	want := int64(256*3*2048*7168*2 + 3*2048*7168*2)
	if got := l.WeightBytes(); got != want {
		t.Errorf("deepseek-v3 WeightBytes = %d, want %d", got, want)
	}
	g, _ := Preset("gpt-oss-20b")
	want = int64(32*3*2880*2880*2 + 32*(2*2880+2880)*4)
	if got := g.WeightBytes(); got != want {
		t.Errorf("gpt-oss-20b WeightBytes = %d, want %d", got, want)
	}
	if !strings.Contains(gigabytes(192e9), "192.0 GB") {
		t.Error(gigabytes(192e9))
	}
}
