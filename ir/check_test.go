package ir_test

import (
	"strings"
	"testing"

	"github.com/llir/llvm/asm"
	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/constant"
	"github.com/llir/llvm/ir/metadata"
	"github.com/llir/llvm/ir/types"

	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/ir"
)

// The test DSL: a module is LLVM 14 text (typed pointers) after a standard
// header, parsed by llir's asm package.
const header = `target datalayout = "e-i64:64-i128:128-v16:16-v32:32-n16:32:64"
target triple = "nvptx64-nvidia-cuda"
`

func parse(t *testing.T, src string) *llir.Module {
	t.Helper()
	m, err := asm.ParseString("test.ll", header+src)
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, src)
	}
	return m
}

// kernel wraps body (instructions, one per line, may start with labels) in
// `define void @k(params) { ... }` annotated as a kernel.
func kernel(params, body string) string {
	return "define void @k(" + params + ") {\nentry:\n" + body + "\n}\n" +
		"!nvvm.annotations = !{!0}\n!0 = !{void (" + paramTypes(params) + ")* @k, !\"kernel\", i32 1}\n"
}

func paramTypes(params string) string {
	if params == "" {
		return ""
	}
	var ts []string
	for _, p := range strings.Split(params, ",") {
		f := strings.Fields(p)
		ts = append(ts, strings.Join(f[:len(f)-1], " "))
	}
	return strings.Join(ts, ", ")
}

func wantReject(t *testing.T, name string, m *llir.Module, wants ...string) {
	t.Helper()
	err := ir.Check(m)
	if err == nil {
		t.Errorf("%s: Check accepted the module", name)
		return
	}
	for _, w := range wants {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error does not mention %q:\n%v", name, w, err)
		}
	}
}

func TestCheckRejectsText(t *testing.T) {
	cases := []struct {
		name  string
		src   string
		wants []string
	}{
		{"frem", kernel("float %a, float addrspace(1)* %p",
			"%x = frem float %a, %a\nstore float %x, float addrspace(1)* %p\nret void"),
			[]string{"@k", "frem float %a, %a", "frem is not in the subset"}},
		{"unknown intrinsic", kernel("float %a",
			"%x = call float @llvm.nvvm.foo.f(float %a)\nret void") + "declare float @llvm.nvvm.foo.f(float)\n",
			[]string{"@k", "call float @llvm.nvvm.foo.f(float %a)", "intrinsic @llvm.nvvm.foo.f is not in the subset"}},
		{"external call", kernel("i32 %a", "call void @ext(i32 %a)\nret void") + "declare void @ext(i32)\n",
			[]string{"@k", "call void @ext(i32 %a)", "call to external function @ext"}},
		{"32-byte vector load", kernel("<8 x i32> addrspace(1)* %p",
			"%v = load <8 x i32>, <8 x i32> addrspace(1)* %p, align 32\nret void"),
			[]string{"@k", "load <8 x i32>", "vector access of 32 bytes"}},
		{"address space 7", kernel("i32 addrspace(1)* %q",
			"%p = addrspacecast i32 addrspace(1)* %q to i32*\n%r = addrspacecast i32* %p to i32 addrspace(7)*\n%v = load i32, i32 addrspace(7)* %r\nret void"),
			[]string{"@k", "load i32, i32 addrspace(7)* %r", "address space 7"}},
		{"param address space 101", kernel("i32 addrspace(101)* %p", "%v = load i32, i32 addrspace(101)* %p\nret void"),
			[]string{"@k", "address space 101"}},
		{"shufflevector", kernel("<2 x i32> %a",
			"%s = shufflevector <2 x i32> %a, <2 x i32> %a, <2 x i32> <i32 1, i32 0>\nret void"),
			[]string{"@k", "shufflevector", "instruction is not in the subset"}},
		{"constant expression", "@s = internal addrspace(3) global [4 x i32] zeroinitializer, align 16\n" +
			kernel("", "store i32 1, i32 addrspace(3)* getelementptr ([4 x i32], [4 x i32] addrspace(3)* @s, i32 0, i32 1)\nret void"),
			[]string{"@k", "store i32 1", "constant expressions must be instructions"}},
		{"indirect call", kernel("void ()* %fp", "call void %fp()\nret void"),
			[]string{"@k", "call void %fp()", "indirect calls"}},
		{"asm bad output", kernel("i32 addrspace(1)* %p",
			"%x = call i32 asm sideeffect \"mov.u32 $0, 1;\", \"=q\"()\nstore i32 %x, i32 addrspace(1)* %p\nret void"),
			[]string{"@k", "asm sideeffect", "output constraint \"=q\""}},
		{"asm clobber", kernel("", "call void asm sideeffect \"bar.sync 0;\", \"~{cc}\"()\nret void"),
			[]string{"@k", "clobber \"~{cc}\""}},
		{"asm operand out of range", kernel("i32 %a", "call void asm sideeffect \"st.u32 [$3], $0;\", \"r\"(i32 %a)\nret void"),
			[]string{"@k", "names $3 but there are 1 operands"}},
		{"asm type mismatch", kernel("i64 %a", "call void asm sideeffect \"mov.u32 $0, $0;\", \"r\"(i64 %a)\nret void"),
			[]string{"@k", "constraint r does not fit i64"}},
		{"asm n not constant", kernel("i32 %a", "call void asm sideeffect \"nanosleep.u32 $0;\", \"n\"(i32 %a)\nret void"),
			[]string{"@k", "constraint n needs an integer constant"}},
		{"atomic load", kernel("i32 addrspace(1)* %p", "%v = load atomic i32, i32 addrspace(1)* %p acquire, align 4\nret void"),
			[]string{"@k", "load atomic i32", "atomic loads and stores are not in the subset"}},
		{"atomicrmw nand", kernel("i32 addrspace(1)* %p", "%v = atomicrmw nand i32 addrspace(1)* %p, i32 1 monotonic\nret void"),
			[]string{"@k", "atomicrmw nand", "operation nand is not supported"}},
		{"atomicrmw seq_cst", kernel("i32 addrspace(1)* %p", "%v = atomicrmw add i32 addrspace(1)* %p, i32 1 seq_cst\nret void"),
			[]string{"@k", "atomicrmw add", "ordering seq_cst"}},
		{"atomicrmw syncscope", kernel("i32 addrspace(1)* %p", "%v = atomicrmw add i32 addrspace(1)* %p, i32 1 syncscope(\"block\") monotonic\nret void"),
			[]string{"@k", "sync scope \"block\""}},
		{"atomicrmw const space", kernel("i32 addrspace(4)* %p", "%v = atomicrmw add i32 addrspace(4)* %p, i32 1 monotonic\nret void"),
			[]string{"@k", "address space 4 is not generic, global or shared"}},
		{"cmpxchg i16", kernel("i16 addrspace(1)* %p", "%v = cmpxchg i16 addrspace(1)* %p, i16 1, i16 2 monotonic monotonic\nret void"),
			[]string{"@k", "cmpxchg i16", "needs i32 or i64"}},
		{"fence", kernel("", "fence acq_rel\nret void"), []string{"@k", "fence acq_rel", "fence is not in the subset"}},
		{"alloca outside entry", kernel("", "br label %b\nb:\n%a = alloca i32\nret void"),
			[]string{"@k", "alloca i32", "alloca outside the entry block"}},
		{"duplicate case", kernel("i32 %x", "switch i32 %x, label %d [ i32 1, label %d\n i32 1, label %d ]\nd:\nret void"),
			[]string{"@k", "switch i32 %x", "duplicate case value 1"}},
		{"named type", "%T = type { i32 }\n" + kernel("%T addrspace(1)* %p", "ret void"),
			[]string{"named type %T"}},
		{"global address space 5", "@g = internal addrspace(5) global i32 0\n" + kernel("", "ret void"),
			[]string{"global @g", "address space 5"}},
		{"global address space 0", "@g = internal global i32 0\n" + kernel("", "ret void"),
			[]string{"global @g", "address space 0"}},
		{"shared initializer", "@s = internal addrspace(3) global i32 7\n" + kernel("", "ret void"),
			[]string{"global @s", "shared initializer 7"}},
		{"float global", "@g = internal addrspace(1) global float 1.0\n" + kernel("", "ret void"),
			[]string{"global @g", "initializer 1.0"}},
		{"byval not a tensor map", "define void @k(i32* byval(i32) align 4 %b) {\nentry:\nret void\n}\n" +
			"!nvvm.annotations = !{!0}\n!0 = !{void (i32*)* @k, !\"kernel\", i32 1, !\"grid_constant\", !{i32 1}}\n",
			[]string{"@k", "byval parameter %b", "only [128 x i8]* byval([128 x i8]) align 64"}},
		{"byval not grid_constant", "define void @k([128 x i8]* byval([128 x i8]) align 64 %t) {\nentry:\nret void\n}\n" +
			"!nvvm.annotations = !{!0}\n!0 = !{void ([128 x i8]*)* @k, !\"kernel\", i32 1}\n",
			[]string{"kernel @k", "byval parameter %t is not listed under grid_constant"}},
		{"byval on device function", "define internal void @f([128 x i8]* byval([128 x i8]) align 64 %t) {\nentry:\nret void\n}\n",
			[]string{"@f", "byval is only allowed on kernels"}},
		{"load i1", kernel("i1 addrspace(1)* %p", "%v = load i1, i1 addrspace(1)* %p\nret void"),
			[]string{"@k", "load i1", "access of type i1"}},
		{"vector of 3", kernel("<3 x i32> addrspace(1)* %p", "%v = load <3 x i32>, <3 x i32> addrspace(1)* %p\nret void"),
			[]string{"@k", "<3 x i32>"}},
		{"under-aligned vector", kernel("<4 x i32> addrspace(1)* %p, <4 x i32> %v",
			"store <4 x i32> %v, <4 x i32> addrspace(1)* %p, align 4\nret void"),
			[]string{"@k", "store <4 x i32> %v", "alignment 4 is below the access size 16"}},
		{"variable extractelement", kernel("<4 x i32> %v, i32 %i", "%e = extractelement <4 x i32> %v, i32 %i\nret void"),
			[]string{"@k", "extractelement <4 x i32> %v, i32 %i", "constant index"}},
		{"call kernel", "define void @k2() {\nentry:\ncall void @k()\nret void\n}\n" + kernel("", "ret void") +
			"!1 = !{void ()* @k2, !\"kernel\", i32 1}\n",
			[]string{"@k2", "call void @k()", "call to kernel @k"}},
		{"varargs", "define internal void @f(i32 %a, ...) {\nentry:\nret void\n}\n",
			[]string{"@f", "variadic"}},
		{"unknown annotation key", "define void @k() {\nentry:\nret void\n}\n!nvvm.annotations = !{!0}\n" +
			"!0 = !{void ()* @k, !\"kernel\", i32 1, !\"cluster_max_blocks\", i32 2}\n",
			[]string{"@k", "key \"cluster_max_blocks\""}},
		{"cluster_dim_x range", "define void @k() {\nentry:\nret void\n}\n!nvvm.annotations = !{!0}\n" +
			"!0 = !{void ()* @k, !\"kernel\", i32 1, !\"cluster_dim_x\", i32 16}\n",
			[]string{"@k", "\"cluster_dim_x\" must be i32 in [1, 8]"}},
		{"maxntidx range", "define void @k() {\nentry:\nret void\n}\n!nvvm.annotations = !{!0}\n" +
			"!0 = !{void ()* @k, !\"kernel\", i32 1, !\"maxntidx\", i32 4096}\n",
			[]string{"@k", "\"maxntidx\" must be i32 in [1, 1024]"}},
		{"kernel returning i32", "define i32 @k() {\nentry:\nret i32 0\n}\n!nvvm.annotations = !{!0}\n" +
			"!0 = !{i32 ()* @k, !\"kernel\", i32 1}\n",
			[]string{"kernel @k returns i32"}},
		{"other named metadata", kernel("", "ret void") + "!llvm.ident = !{!1}\n!1 = !{!\"x\"}\n",
			[]string{"!llvm.ident"}},
		{"phi from non-predecessor", kernel("i1 %c",
			"br i1 %c, label %a, label %b\na:\nbr label %j\nb:\nbr label %j\nj:\n%p = phi i32 [ 1, %a ], [ 2, %entry ]\nret void"),
			[]string{"@k", "phi i32", "incoming block %entry is not a predecessor of %j", "no incoming value from predecessor %b"}},
		{"use not dominated", kernel("i1 %c, i32 %x",
			"br i1 %c, label %a, label %b\na:\n%y = add i32 %x, 1\nbr label %b\nb:\n%z = add i32 %y, 1\nret void"),
			[]string{"@k", "%z = add i32 %y, 1", "operand %y does not dominate this use"}},
		{"phi operand not dominated", kernel("i1 %c",
			"br i1 %c, label %a, label %b\na:\n%y = add i32 1, 1\nbr label %j\nb:\nbr label %j\nj:\n%p = phi i32 [ %y, %b ], [ 0, %a ]\nret void"),
			[]string{"@k", "operand %y does not dominate this use"}},
		{"branch to entry", kernel("", "br label %entry"), []string{"@k", "entry block cannot be a branch target"}},
		{"select on vectors", kernel("i1 %c, <2 x i32> %a", "%s = select i1 %c, <2 x i32> %a, <2 x i32> %a\nret void"),
			[]string{"@k", "select i1 %c", "want a scalar or pointer"}},
		{"i128 arithmetic", kernel("i128 %a", "%b = add i128 %a, %a\nret void"), []string{"@k", "i128"}},
		{"vector arithmetic", kernel("<2 x i32> %a", "%b = add <2 x i32> %a, %a\nret void"),
			[]string{"@k", "add <2 x i32> %a, %a", "operands of type <2 x i32>"}},
		{"intrinsic signature", kernel("", "%t = call i32 @llvm.nvvm.read.ptx.sreg.tid.x(i32 1)\nret void") +
			"declare i32 @llvm.nvvm.read.ptx.sreg.tid.x(i32)\n",
			[]string{"intrinsic @llvm.nvvm.read.ptx.sreg.tid.x declared as i32 (i32), want i32 ()"}},
		{"metadata attachment", kernel("i32 %a", "%b = add i32 %a, 1, !foo !1\nret void") + "!1 = !{}\n",
			[]string{"@k", "metadata attachments"}},
		{"indirectbr", kernel("i8* %a", "indirectbr i8* %a, [label %b]\nb:\nret void"),
			[]string{"@k", "indirectbr", "terminator is not in the subset"}},
		{"bitcast across address spaces", kernel("i32 addrspace(1)* %p", "%q = bitcast i32 addrspace(1)* %p to i32 addrspace(3)*\nret void"),
			[]string{"@k", "bitcast", "conversion from i32 addrspace(1)* to i32 addrspace(3)*"}},
		{"addrspacecast between specific spaces", kernel("i32 addrspace(1)* %p", "%q = addrspacecast i32 addrspace(1)* %p to i32 addrspace(3)*\nret void"),
			[]string{"@k", "addrspacecast"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			wantReject(t, c.name, parse(t, c.src), c.wants...)
		})
	}
}

func TestCheckRejectsWrongTarget(t *testing.T) {
	m, err := asm.ParseString("t.ll", "target triple = \"x86_64-unknown-linux-gnu\"\n")
	if err != nil {
		t.Fatal(err)
	}
	wantReject(t, "triple", m, "target triple \"x86_64-unknown-linux-gnu\"", "data layout")
}

// newAPIModule returns a module with one kernel @k(i32 %a) built through
// llir directly (for structures the text parser refuses).
func newAPIModule() (*llir.Module, *llir.Func, *llir.Block) {
	m := llir.NewModule()
	m.TargetTriple, m.DataLayout = ir.Triple, ir.DataLayout
	f := m.NewFunc("k", types.Void, llir.NewParam("a", types.I32))
	md := &metadata.Tuple{MetadataID: -1, Fields: []metadata.Field{f, &metadata.String{Value: "kernel"}, constant.NewInt(types.I32, 1)}}
	m.MetadataDefs = append(m.MetadataDefs, md)
	m.NamedMetadataDefs["nvvm.annotations"] = &metadata.NamedDef{Name: "nvvm.annotations", Nodes: []metadata.Node{md}}
	return m, f, f.NewBlock("entry")
}

func TestCheckRejectsAPI(t *testing.T) {
	t.Run("no terminator", func(t *testing.T) {
		m, f, b := newAPIModule()
		b.NewAdd(f.Params[0], f.Params[0])
		wantReject(t, "no terminator", m, "@k", "block %entry does not end in a terminator")
	})
	t.Run("use before definition", func(t *testing.T) {
		m, f, b := newAPIModule()
		later := llir.NewAdd(f.Params[0], f.Params[0])
		b.NewMul(later, f.Params[0])
		b.Insts = append(b.Insts, later)
		b.NewRet(nil)
		wantReject(t, "use before def", m, "@k", "mul i32", "used before its definition")
	})
	t.Run("operand types differ", func(t *testing.T) {
		m, f, b := newAPIModule()
		b.NewAdd(f.Params[0], constant.NewInt(types.I64, 3))
		b.NewRet(nil)
		wantReject(t, "types", m, "@k", "operands have different types")
	})
	t.Run("value from another function", func(t *testing.T) {
		m, f, b := newAPIModule()
		g := m.NewFunc("g", types.Void, llir.NewParam("z", types.I32))
		gb := g.NewBlock("entry")
		gb.NewRet(nil)
		g.Linkage = 0
		b.NewAdd(f.Params[0], g.Params[0])
		b.NewRet(nil)
		wantReject(t, "cross function", m, "@k", "parameter %z belongs to another function")
	})
	t.Run("annotation of a missing function", func(t *testing.T) {
		m, _, b := newAPIModule()
		b.NewRet(nil)
		stray := llir.NewFunc("stray", types.Void)
		md := &metadata.Tuple{MetadataID: -1, Fields: []metadata.Field{stray, &metadata.String{Value: "kernel"}, constant.NewInt(types.I32, 1)}}
		m.MetadataDefs = append(m.MetadataDefs, md)
		nd := m.NamedMetadataDefs["nvvm.annotations"]
		nd.Nodes = append(nd.Nodes, md)
		wantReject(t, "missing function", m, "does not start with a function of the module")
	})
	t.Run("kernel listed twice", func(t *testing.T) {
		m, _, b := newAPIModule()
		b.NewRet(nil)
		nd := m.NamedMetadataDefs["nvvm.annotations"]
		nd.Nodes = append(nd.Nodes, nd.Nodes[0])
		wantReject(t, "twice", m, "lists kernel @k twice")
	})
	t.Run("phi after non-phi", func(t *testing.T) {
		m, f, b := newAPIModule()
		loop := f.NewBlock("loop")
		b.NewBr(loop)
		x := loop.NewAdd(f.Params[0], f.Params[0])
		loop.NewPhi(llir.NewIncoming(f.Params[0], b), llir.NewIncoming(x, loop))
		loop.NewBr(loop)
		wantReject(t, "phi order", m, "@k", "phi after a non-phi instruction")
	})
	t.Run("nil module", func(t *testing.T) {
		if ir.Check(nil) == nil {
			t.Error("Check(nil) accepted")
		}
	})
}

// TestCheckAcceptsFixtures: everything the builders produce passes, both as
// built and after a round trip through llir's text parser.
func TestCheckAcceptsFixtures(t *testing.T) {
	for name, build := range fixtures {
		m := ir.NewModule(name)
		build(m)
		mod, err := m.Finish()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		back, err := asm.ParseString(name+".ll", mod.String())
		if err != nil {
			t.Fatalf("%s: parse back: %v", name, err)
		}
		if err := ir.Check(back); err != nil {
			t.Errorf("%s: parsed back: %v", name, err)
		}
	}
}

// TestCheckAcceptsText covers accepted forms the builders do not emit.
func TestCheckAcceptsText(t *testing.T) {
	src := `@lut = internal addrspace(4) constant [4 x i16] [i16 1, i16 2, i16 3, i16 4], align 2
@g = internal addrspace(1) global i64 0, align 8
@d = external addrspace(3) global [0 x i8], align 16
define void @k(i32 addrspace(1)* noalias nocapture %p, i32 %n, [128 x i8]* byval([128 x i8]) align 64 %t) {
entry:
  %a = alloca [2 x i32], align 4
  switch i32 %n, label %def [ i32 0, label %zero
                                   i32 7, label %def ]
zero:
  %v = load i32, i32 addrspace(1)* %p, align 4
  %w = add nsw i32 %v, 1
  br label %def
def:
  %x = phi i32 [ %w, %zero ], [ 0, %entry ], [ 0, %entry ]
  %e = getelementptr inbounds [4 x i16], [4 x i16] addrspace(4)* @lut, i64 0, i64 1
  %l = load i16, i16 addrspace(4)* %e
  %tb = getelementptr [128 x i8], [128 x i8]* %t, i32 0, i32 8
  %tv = load i8, i8* %tb, align 1
  %vec = insertelement <2 x half> undef, half 0xH3C00, i32 0
  %r = call { i32, i32 } asm sideeffect "mov.b32 $0, 1;\0A\09mov.b32 $1, 2;", "=&r,=r,~{memory}"()
  %r0 = extractvalue { i32, i32 } %r, 0
  %sum = add i32 %r0, %x
  store volatile i32 %sum, i32 addrspace(1)* %p, align 4
  unreachable
}
!nvvm.annotations = !{!0}
!0 = !{void (i32 addrspace(1)*, i32, [128 x i8]*)* @k, !"kernel", i32 1, !"grid_constant", !{i32 3}, !"maxntidx", i32 128, !"minctasm", i32 1, !"maxnreg", i32 64}
`
	m := parse(t, src)
	if err := ir.Check(m); err != nil {
		t.Fatal(err)
	}
	// What the checker accepts, llc-19 must compile.
	toolchain.NeedLLC(t)
	text, err := ir.LLVM19Text(m)
	if err != nil {
		t.Fatal(err)
	}
	out, err := toolchain.CompileLLC(text, "sm_90a")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if err := toolchain.Assemble(out, "sm_90a"); err != nil {
		if _, missing := toolchain.Ptxas("sm_90a"); missing == nil {
			t.Fatalf("%v\n%s", err, out)
		}
	}
}
