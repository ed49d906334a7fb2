package ptx

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mokc/mokc/target"
)

// TestSequentialize checks phi-copy sequentialization against the meaning
// of a parallel copy on random copy sets: permutations with cycles (swaps,
// rotations), fan-out (one source, several destinations), chains and
// self-copies. Fresh seed per run, printed on failure.
func TestSequentialize(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 7))
	for iter := 0; iter < 2000; iter++ {
		nregs := 2 + rng.IntN(8)
		regs := make([]string, nregs)
		for i := range regs {
			regs[i] = fmt.Sprintf("%%r%d", i+1)
		}
		// Distinct destinations, arbitrary sources.
		perm := rng.Perm(nregs)
		ndst := 1 + rng.IntN(nregs)
		var ms []move
		for _, d := range perm[:ndst] {
			src := regs[rng.IntN(nregs)]
			if src == regs[d] {
				continue // parallelCopy drops self-copies
			}
			ms = append(ms, move{dst: regs[d], src: src, k: kI32})
		}
		// Parallel semantics: every destination gets the old source value.
		init := map[string]int{}
		for i, r := range regs {
			init[r] = 100 + i
		}
		want := map[string]int{}
		for r, v := range init {
			want[r] = v
		}
		for _, m := range ms {
			want[m.dst] = init[m.src]
		}
		ntemp := 0
		seq := sequentialize(ms, func(kind) string { ntemp++; return fmt.Sprintf("%%t%d", ntemp) })
		state := map[string]int{}
		for r, v := range init {
			state[r] = v
		}
		for _, m := range seq {
			v, ok := state[m.src]
			if !ok {
				t.Fatalf("seed %d: move reads %s before it is written: %v", seed, m.src, seq)
			}
			state[m.dst] = v
		}
		for _, r := range regs {
			if state[r] != want[r] {
				t.Fatalf("seed %d: copies %v sequentialized as %v: %s = %d, want %d", seed, ms, seq, r, state[r], want[r])
			}
		}
		if len(seq) > len(ms)+ntemp {
			t.Fatalf("seed %d: %d moves for %d copies and %d temporaries", seed, len(seq), len(ms), ntemp)
		}
	}
}

// TestSwapNeedsTemp pins the swap case: two moves become three through a
// temporary, in an order that preserves both values.
func TestSwapNeedsTemp(t *testing.T) {
	seq := sequentialize([]move{{"%r1", "%r2", kI32}, {"%r2", "%r1", kI32}}, func(kind) string { return "%t" })
	got := fmt.Sprint(seq)
	if len(seq) != 3 || !strings.Contains(got, "%t") {
		t.Fatalf("swap sequentialized as %s", got)
	}
}

// TestPassCheckers shows that the invariant checkers catch a pipeline that
// skips a pass: without split-critical-edges, phi-elim must place copies on
// a block with two successors, which checkPhiCopies refuses.
func TestPassCheckers(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("testdata", "loop_phi.ll"))
	if err != nil {
		t.Fatal(err)
	}
	var broken []pass
	for _, p := range passes {
		if p.name != "split-critical-edges" {
			broken = append(broken, p)
		}
	}
	c := &compilation{mod: parse(t, "loop_phi.ll", string(src)), target: target.SM90a, version: "8.0"}
	err = runPasses(c, broken)
	if err == nil || !strings.Contains(err.Error(), "invariant of pass phi-elim broken") {
		t.Fatalf("got %v, want the phi-elim checker to fire", err)
	}
	// And the full pipeline passes every checker.
	c = &compilation{mod: parse(t, "loop_phi.ll", string(src)), target: target.SM90a, version: "8.0"}
	if err := runPasses(c, passes); err != nil {
		t.Fatal(err)
	}
}

const unitHeader = `target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"
`

// compileBody compiles a kernel @k(params) { body } and returns its PTX.
func compileBody(t *testing.T, params, body string) string {
	t.Helper()
	src := unitHeader + "define void @k(" + params + ") {\nentry:\n" + body + "\n  ret void\n}\n" +
		"!nvvm.annotations = !{!0}\n!0 = !{void (" + paramTypes(params) + ")* @k, !\"kernel\", i32 1}\n"
	out, err := Compile(parse(t, "unit.ll", src), target.SM90a)
	if err != nil {
		t.Fatalf("Compile: %v\n%s", err, src)
	}
	return out
}

// paramTypes strips the names from a parameter list.
func paramTypes(params string) string {
	var ts []string
	depth, start := 0, 0
	for i := 0; i <= len(params); i++ {
		if i < len(params) {
			switch params[i] {
			case '{', '<', '[':
				depth++
			case '}', '>', ']':
				depth--
			}
			if params[i] != ',' || depth > 0 {
				continue
			}
		}
		p := strings.TrimSpace(params[start:i])
		ts = append(ts, p[:strings.LastIndex(p, " ")])
		start = i + 1
	}
	return strings.Join(ts, ", ")
}

// TestConstructs compiles one construct at a time and looks for the exact
// PTX instruction it must produce (registers written as patterns).
func TestConstructs(t *testing.T) {
	type tc struct {
		name, params, body string
		want               []string // regular expressions, each must match a line
	}
	r := `%r\d+`
	rs := `%rs\d+`
	rd := `%rd\d+`
	p := `%p\d+`
	f := `%f\d+`
	cases := []tc{
		{"fadd.rn", "float %a, float %b, float addrspace(1)* %o", "%x = fadd float %a, %b\n store float %x, float addrspace(1)* %o",
			[]string{`add\.rn\.f32 \t` + f + `, ` + f + `, ` + f + `;`, `st\.global\.f32`}},
		{"fdiv.rn", "float %a, float %b, float addrspace(1)* %o", "%x = fdiv float %a, %b\n store float %x, float addrspace(1)* %o",
			[]string{`div\.rn\.f32`}},
		{"sdiv i8 normalizes", "i8 %a, i8 %b, i8 addrspace(1)* %o", "%x = sdiv i8 %a, %b\n store i8 %x, i8 addrspace(1)* %o",
			[]string{`cvt\.s16\.s8 \t` + rs + `, ` + rs, `div\.s16`}},
		{"udiv i8 normalizes", "i8 %a, i8 %b, i8 addrspace(1)* %o", "%x = udiv i8 %a, %b\n store i8 %x, i8 addrspace(1)* %o",
			[]string{`and\.b16 \t` + rs + `, ` + rs + `, 255;`, `div\.u16`}},
		{"shl i16 amount to u32", "i16 %a, i16 %b, i16 addrspace(1)* %o", "%x = shl i16 %a, %b\n store i16 %x, i16 addrspace(1)* %o",
			[]string{`cvt\.u32\.u16 \t` + r + `, ` + rs, `shl\.b16 \t` + rs + `, ` + rs + `, ` + r + `;`}},
		{"ashr i64", "i64 %a, i64 %b, i64 addrspace(1)* %o", "%x = ashr i64 %a, %b\n store i64 %x, i64 addrspace(1)* %o",
			[]string{`cvt\.u32\.u64`, `shr\.s64`}},
		{"select i1 on i1", "i1 %c, i1 %a, i1 %b, i8 addrspace(1)* %o", "%x = select i1 %c, i1 %a, i1 %b\n %z = zext i1 %x to i8\n store i8 %z, i8 addrspace(1)* %o",
			[]string{`not\.pred`, `or\.pred`, `selp\.u16 \t` + rs + `, 1, 0, ` + p}},
		{"zext i1", "i1 %c, i32 addrspace(1)* %o", "%z = zext i1 %c to i32\n store i32 %z, i32 addrspace(1)* %o",
			[]string{`ld\.param\.u8`, `and\.b16 \t` + rs + `, ` + rs + `, 1;`, `setp\.eq\.b16`, `selp\.u32 \t` + r + `, 1, 0, ` + p}},
		{"sext i1", "i1 %c, i64 addrspace(1)* %o", "%z = sext i1 %c to i64\n store i64 %z, i64 addrspace(1)* %o",
			[]string{`selp\.s64 \t` + rd + `, -1, 0, ` + p}},
		{"fptosi rzi", "float %a, i32 addrspace(1)* %o", "%z = fptosi float %a to i32\n store i32 %z, i32 addrspace(1)* %o",
			[]string{`cvt\.rzi\.s32\.f32`}},
		{"uitofp i8", "i8 %a, float addrspace(1)* %o", "%z = uitofp i8 %a to float\n store float %z, float addrspace(1)* %o",
			[]string{`and\.b16 \t` + rs + `, ` + rs + `, 255;`, `cvt\.rn\.f32\.u16`}},
		{"gep i32 index", "float addrspace(1)* %a, i32 %i, float addrspace(1)* %o", "%q = getelementptr float, float addrspace(1)* %a, i32 %i\n %v = load float, float addrspace(1)* %q\n store float %v, float addrspace(1)* %o",
			[]string{`mul\.wide\.s32 \t` + rd + `, ` + r + `, 4;`, `add\.s64`, `ld\.global\.f32`}},
		{"gep struct", "{ i8, double } addrspace(1)* %a, double addrspace(1)* %o", "%q = getelementptr { i8, double }, { i8, double } addrspace(1)* %a, i64 1, i32 1\n %v = load double, double addrspace(1)* %q\n store double %v, double addrspace(1)* %o",
			[]string{`add\.s64 \t` + rd + `, ` + rd + `, 24;`}},
		{"v4 store", "<4 x i32> addrspace(1)* %o, i32 %x", "%v = insertelement <4 x i32> zeroinitializer, i32 %x, i32 2\n store <4 x i32> %v, <4 x i32> addrspace(1)* %o, align 16",
			[]string{`st\.global\.v4\.u32 \t\[` + rd + `\], \{` + r + `, ` + r + `, ` + r + `, ` + r + `\};`}},
		{"under-aligned v2 split", "<2 x float> addrspace(1)* %a, <2 x float> addrspace(1)* %o", "%v = load <2 x float>, <2 x float> addrspace(1)* %a, align 4\n store <2 x float> %v, <2 x float> addrspace(1)* %o, align 8",
			[]string{`ld\.global\.f32 \t` + f + `, \[` + rd + `\+4\];`, `st\.global\.v2\.f32`}},
		{"shared atomic", "i32 addrspace(3)* %s, i32 addrspace(1)* %o", "%v = atomicrmw add i32 addrspace(3)* %s, i32 1 syncscope(\"block\") monotonic\n store i32 %v, i32 addrspace(1)* %o",
			[]string{`atom\.relaxed\.cta\.shared\.add\.u32 \t` + r + `, \[` + rd + `\], 1;`}},
		{"cmpxchg flag", "i32 addrspace(1)* %a, i8 addrspace(1)* %o", "%c = cmpxchg i32 addrspace(1)* %a, i32 0, i32 1 syncscope(\"device\") acquire monotonic\n %ok = extractvalue { i32, i1 } %c, 1\n %z = zext i1 %ok to i8\n store i8 %z, i8 addrspace(1)* %o",
			[]string{`atom\.acquire\.gpu\.global\.cas\.b32 \t` + r + `, \[` + rd + `\], 0, 1;`, `setp\.eq\.s32 \t` + p + `, ` + r + `, 0;`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := compileBody(t, c.params, c.body)
			for _, w := range c.want {
				if !regexp.MustCompile(w).MatchString(out) {
					t.Errorf("no line matches %q in\n%s", w, out)
				}
			}
		})
	}
}

// TestPredicates checks every icmp and fcmp predicate's setp form.
func TestPredicates(t *testing.T) {
	icmp := map[string]string{"eq": "eq.s32", "ne": "ne.s32", "ugt": "gt.u32", "uge": "ge.u32", "ult": "lt.u32",
		"ule": "le.u32", "sgt": "gt.s32", "sge": "ge.s32", "slt": "lt.s32", "sle": "le.s32"}
	for pred, want := range icmp {
		out := compileBody(t, "i32 %a, i32 %b, i8 addrspace(1)* %o",
			"%c = icmp "+pred+" i32 %a, %b\n %z = zext i1 %c to i8\n store i8 %z, i8 addrspace(1)* %o")
		if !strings.Contains(out, "setp."+want+" \t") {
			t.Errorf("icmp %s: no setp.%s in\n%s", pred, want, out)
		}
	}
	fcmp := map[string]string{"oeq": "eq", "one": "ne", "ogt": "gt", "oge": "ge", "olt": "lt", "ole": "le",
		"ueq": "equ", "une": "neu", "ugt": "gtu", "uge": "geu", "ult": "ltu", "ule": "leu", "ord": "num", "uno": "nan"}
	for pred, want := range fcmp {
		out := compileBody(t, "double %a, double %b, i8 addrspace(1)* %o",
			"%c = fcmp "+pred+" double %a, %b\n %z = zext i1 %c to i8\n store i8 %z, i8 addrspace(1)* %o")
		if !strings.Contains(out, "setp."+want+".f64 \t") {
			t.Errorf("fcmp %s: no setp.%s.f64 in\n%s", pred, want, out)
		}
	}
	for pred, want := range map[string]string{"true": "mov.pred \t%p1, -1;", "false": "mov.pred \t%p1, 0;"} {
		out := compileBody(t, "float %a, float %b, i8 addrspace(1)* %o",
			"%c = fcmp "+pred+" float %a, %b\n %z = zext i1 %c to i8\n store i8 %z, i8 addrspace(1)* %o")
		if !strings.Contains(out, want) {
			t.Errorf("fcmp %s: no %q in\n%s", pred, want, out)
		}
	}
}

// TestKernelInfo checks the launch metadata of the golden kernels.
func TestKernelInfo(t *testing.T) {
	load := func(name string, tg target.Target) *Result {
		src, err := os.ReadFile(filepath.Join("testdata", name+".ll"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := CompileModule(parse(t, name, string(src)), tg)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Kernels) != 1 {
			t.Fatalf("%s: %d kernels", name, len(r.Kernels))
		}
		return r
	}
	r := load("params", target.SM80)
	k := r.Kernels[0]
	type pw struct {
		name        string
		size, align int
		offset      int
	}
	want := []pw{{"a", 1, 1, 0}, {"b", 2, 2, 2}, {"c", 4, 4, 4}, {"d", 8, 8, 8}, {"e", 4, 4, 16}, {"f", 8, 8, 24},
		{"g", 2, 2, 32}, {"h", 1, 1, 34}, {"gp", 8, 8, 40}, {"genp", 8, 8, 48}, {"sp", 8, 8, 56}, {"tmap", 128, 64, 64}, {"last", 4, 4, 192}}
	if len(k.Params) != len(want) {
		t.Fatalf("params: %+v", k.Params)
	}
	for i, w := range want {
		got := k.Params[i]
		if got.Name != w.name || got.Size != w.size || got.Align != w.align || got.Offset != w.offset {
			t.Errorf("param %d = %+v, want %+v", i, got, w)
		}
	}
	if !k.Params[11].ByVal || k.ParamBytes != 196 || r.Version != "8.0" || k.Name != "many_params" {
		t.Errorf("kernel info %+v (version %s)", k, r.Version)
	}
	if !strings.Contains(r.Text, ".param .align 64 .b8 tmap[128]") || !strings.Contains(r.Text, "cvta.param.u64") {
		t.Errorf("tensor map parameter not declared/addressed as expected")
	}

	k = load("block_reduce", target.SM90a).Kernels[0]
	if k.StaticSharedBytes != 36 || k.DynamicShared || k.MaxThreads != 256 || k.MaxNTID != [3]int{256, 0, 0} {
		t.Errorf("block_sum: %+v", k)
	}
	k = load("dyn_smem", target.SM90a).Kernels[0]
	if k.StaticSharedBytes != 16 || !k.DynamicShared || k.MaxThreads != 1024 {
		t.Errorf("dyn_reverse: %+v", k)
	}
	r = load("bf16_axpy", target.SM100a)
	k = r.Kernels[0]
	if k.MinBlocksPerSM != 2 || k.MaxRegs != 64 || r.Version != "8.8" || !strings.Contains(r.Text, ".target sm_100a") {
		t.Errorf("bf16_axpy: %+v %s", k, r.Version)
	}
	k = load("tma_cluster", target.SM90a).Kernels[0]
	if k.ClusterDim != [3]int{2, 1, 1} || k.StaticSharedBytes != 4096+8 {
		t.Errorf("tma_load: %+v", k)
	}
}

// TestCallsShareStaticShared: a kernel is charged for the shared variables of
// the functions it calls.
func TestCallsShareStaticShared(t *testing.T) {
	src := unitHeader + `
@a = internal addrspace(3) global [100 x i8] undef, align 4
@b = internal addrspace(3) global [64 x i32] undef, align 16
define internal void @touch(i32 %i) {
entry:
  %p = getelementptr [64 x i32], [64 x i32] addrspace(3)* @b, i32 0, i32 %i
  store i32 %i, i32 addrspace(3)* %p
  ret void
}
define void @k1(i32 %i) {
entry:
  call void @touch(i32 %i)
  ret void
}
define void @k2(i8 %v) {
entry:
  store i8 %v, i8 addrspace(3)* getelementptr ([100 x i8], [100 x i8] addrspace(3)* @a, i32 0, i32 3)
  call void @touch(i32 1)
  ret void
}
!nvvm.annotations = !{!0, !1}
!0 = !{void (i32)* @k1, !"kernel", i32 1}
!1 = !{void (i8)* @k2, !"kernel", i32 1}
`
	r, err := CompileModule(parse(t, "shared.ll", src), target.SM80)
	if err != nil {
		t.Fatal(err)
	}
	if got := []int{r.Kernels[0].StaticSharedBytes, r.Kernels[1].StaticSharedBytes}; got[0] != 256 || got[1] != 112+256 {
		t.Errorf("static shared bytes %v, want [256 368]", got)
	}
}

// TestRejectsUnknownTarget: targets other than the three are an error.
func TestRejectsUnknownTarget(t *testing.T) {
	if _, err := Compile(parse(t, "x.ll", unitHeader), target.Target(7)); err == nil {
		t.Fatal("sm_75 accepted")
	}
}
