package selftest

import (
	"fmt"
	"sort"
	"sync"

	llir "github.com/llir/llvm/ir"
	"github.com/llir/llvm/ir/enum"
	"github.com/llir/llvm/ir/types"
	"github.com/llir/llvm/ir/value"

	"github.com/mokc/mokc/ir"
	"github.com/mokc/mokc/target"
)

// Case is one self-test kernel.
type Case struct {
	Name        string        // kernel name, also the module name and the testdata file name
	Target      target.Target // lowest target it needs: sm_80 or sm_90a
	Block       int           // threads per block
	SharedBytes int           // dynamic shared memory per block
	// Build returns a fresh module holding the kernel (checked by ir).
	Build func() (*llir.Module, error)
}

var (
	mu    sync.Mutex
	cases = map[string]Case{}
)

// register adds a case; a duplicate name panics at init (a programming error).
func register(c Case) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := cases[c.Name]; dup {
		panic("selftest: duplicate case " + c.Name)
	}
	cases[c.Name] = c
}

// Cases returns every self-test case sorted by name.
func Cases() []Case {
	mu.Lock()
	defer mu.Unlock()
	out := make([]Case, 0, len(cases))
	for _, c := range cases {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the case named name.
func Lookup(name string) (Case, error) {
	mu.Lock()
	defer mu.Unlock()
	c, ok := cases[name]
	if !ok {
		return Case{}, fmt.Errorf("selftest: no case %q", name)
	}
	return c, nil
}

// Sizes of the self-test kernels.
const (
	AxpbBlock     = 256
	ReduceBlock   = 256   // threads of st_reduce (8 warps)
	ReducePerBlk  = 4096  // f32 elements summed per block
	BigSmemBlock  = 1024  // threads of st_bigsmem
	BigSmemWords  = 25600 // u32 per block: 102400 bytes of dynamic shared memory
	MMABlock      = 32
	bigSmemBytes  = 4 * BigSmemWords
	reduceWarps   = ReduceBlock / 32
	mmaSmemABytes = 16 * 16 * 2
)

var (
	i16p = ir.GlobalPtr(types.I16)
	i32p = ir.GlobalPtr(types.I32)
	f32p = ir.GlobalPtr(types.Float)
)

func init() {
	register(Case{Name: "st_axpb", Target: target.SM80, Block: AxpbBlock, Build: buildAxpb})
	register(Case{Name: "st_reduce", Target: target.SM80, Block: ReduceBlock, Build: buildReduce})
	register(Case{Name: "st_bigsmem", Target: target.SM80, Block: BigSmemBlock, SharedBytes: bigSmemBytes, Build: buildBigSmem})
	register(Case{Name: "st_mma", Target: target.SM80, Block: MMABlock, Build: buildMMA})
}

// buildAxpb: y[i] = bf16(fma(a, float(x[i]), b)) for i < n; x, y bf16 [n].
func buildAxpb() (*llir.Module, error) {
	m := ir.NewModule("st_axpb")
	k := m.Kernel("st_axpb", ir.P("x", i16p), ir.P("y", i16p), ir.P("a", types.Float), ir.P("b", types.Float), ir.P("n", types.I32))
	k.MaxThreads(AxpbBlock)
	i := k.GlobalThreadIdx()
	k.If(k.ICmp(enum.IPredSLT, i, k.Param("n")), func() {
		x := k.BF16ToF32(k.Load(k.Index(k.Param("x"), i)))
		y := k.FMA(k.Param("a"), x, k.Param("b"))
		k.Store(k.F32ToBF16(y), k.Index(k.Param("y"), i))
	})
	k.Ret(nil)
	return m.Finish()
}

// buildReduce: out[blk] = sum of x[blk*ReducePerBlk + i], i < ReducePerBlk,
// in this order: thread t adds i = t, t+256, ... sequentially; each warp
// then folds with shfl.sync.bfly 16, 8, 4, 2, 1 (v += shfl(v)); lane 0
// stores its warp's sum to static shared memory; thread 0 adds the 8 warp
// sums in warp order.
func buildReduce() (*llir.Module, error) {
	m := ir.NewModule("st_reduce")
	sh := m.StaticShared("st_reduce_warps", ir.Array(reduceWarps, types.Float), 16)
	k := m.Kernel("st_reduce", ir.P("x", f32p), ir.P("out", f32p))
	k.MaxThreads(ReduceBlock)
	tid := k.ThreadIdx(ir.X)
	blk := k.BlockIdx(ir.X)
	base := k.Index(k.Param("x"), k.Mul(blk, ir.Int32(ReducePerBlk)))
	sum := k.ForCarry(tid, ir.Int32(ReducePerBlk), ir.Int32(ReduceBlock), []value.Value{ir.Float32(0)},
		func(i value.Value, c []value.Value) []value.Value {
			return []value.Value{k.FAdd(c[0], k.Load(k.Index(base, i)))}
		})[0]
	full := ir.Int32(-1)
	for d := int64(16); d >= 1; d /= 2 {
		sum = k.FAdd(sum, k.ShflBfly(full, sum, ir.Int32(d)))
	}
	lane := k.And(tid, ir.Int32(31))
	warp := k.LShr(tid, ir.Int32(5))
	k.If(k.ICmp(enum.IPredEQ, lane, ir.Int32(0)), func() {
		k.Store(sum, k.GEP(sh, ir.Int32(0), warp))
	})
	k.SyncThreads()
	k.If(k.ICmp(enum.IPredEQ, tid, ir.Int32(0)), func() {
		var s value.Value = ir.Float32(0)
		for w := int64(0); w < reduceWarps; w++ {
			s = k.FAdd(s, k.Load(k.GEP(sh, ir.Int32(0), ir.Int32(w))))
		}
		k.Store(s, k.Index(k.Param("out"), blk))
	})
	k.Ret(nil)
	return m.Finish()
}

// buildBigSmem: block blk copies x[blk*W .. blk*W+W) (W = BigSmemWords u32)
// into 100 KB of dynamic shared memory, synchronises, and writes it back
// reversed: y[blk*W + i] = x[blk*W + W-1-i].
func buildBigSmem() (*llir.Module, error) {
	m := ir.NewModule("st_bigsmem")
	sm := m.DynamicShared("st_bigsmem_buf", 16)
	k := m.Kernel("st_bigsmem", ir.P("x", i32p), ir.P("y", i32p))
	k.MaxThreads(BigSmemBlock)
	tid := k.ThreadIdx(ir.X)
	off := k.Mul(k.BlockIdx(ir.X), ir.Int32(BigSmemWords))
	x := k.Index(k.Param("x"), off)
	y := k.Index(k.Param("y"), off)
	buf := k.SharedAt(sm, ir.Int32(0), types.I32)
	k.For(tid, ir.Int32(BigSmemWords), ir.Int32(BigSmemBlock), func(i value.Value) {
		k.Store(k.Load(k.Index(x, i)), k.Index(buf, i))
	})
	k.SyncThreads()
	k.For(tid, ir.Int32(BigSmemWords), ir.Int32(BigSmemBlock), func(i value.Value) {
		j := k.Sub(ir.Int32(BigSmemWords-1), i)
		k.Store(k.Load(k.Index(buf, j)), k.Index(y, i))
	})
	k.Ret(nil)
	return m.Finish()
}

// buildMMA: one warp computes D = A·B + C with one
// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (PTX ISA 9.7.14.5.8):
// A bf16 [16][16] row-major, B bf16 [8][16] (row n holds column n of the
// 16x8 operand: K-major), C and D f32 [16][8] row-major. A and B go through
// shared memory and are loaded with ldmatrix .x4 (A) and .x2 (B).
func buildMMA() (*llir.Module, error) {
	m := ir.NewModule("st_mma")
	sm := m.StaticShared("st_mma_ab", ir.Array(16*16+8*16, types.I16), 16)
	k := m.Kernel("st_mma", ir.P("a", i16p), ir.P("b", i16p), ir.P("c", f32p), ir.P("d", f32p))
	k.MaxThreads(MMABlock)
	lane := k.ThreadIdx(ir.X)
	base := k.GEP(sm, ir.Int32(0), ir.Int32(0))
	// Copy A (256 halves) and B (128 halves) to shared memory.
	k.For(lane, ir.Int32(256), ir.Int32(32), func(i value.Value) {
		k.Store(k.Load(k.Index(k.Param("a"), i)), k.Index(base, i))
	})
	k.For(lane, ir.Int32(128), ir.Int32(32), func(i value.Value) {
		k.Store(k.Load(k.Index(k.Param("b"), i)), k.Index(base, k.Add(i, ir.Int32(256))))
	})
	k.SyncThreads()
	// A: lane l addresses row l%16, column 8*(l/16).
	aIdx := k.Add(k.Mul(k.And(lane, ir.Int32(15)), ir.Int32(16)), k.Mul(k.LShr(lane, ir.Int32(4)), ir.Int32(8)))
	aAddr := k.PtrToInt(k.Index(base, aIdx))
	a := k.AsmCallN("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4];", "=r,=r,=r,=r,l",
		[]types.Type{types.I32, types.I32, types.I32, types.I32}, aAddr)
	// B: lanes 0-7 address rows n = l (k 0..7), lanes 8-15 rows n = l-8 (k 8..15).
	l16 := k.And(lane, ir.Int32(15))
	bIdx := k.Add(ir.Int32(256), k.Add(k.Mul(k.And(l16, ir.Int32(7)), ir.Int32(16)), k.Mul(k.LShr(l16, ir.Int32(3)), ir.Int32(8))))
	bAddr := k.PtrToInt(k.Index(base, bIdx))
	bb := k.AsmCallN("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {$0, $1}, [$2];", "=r,=r,l",
		[]types.Type{types.I32, types.I32}, bAddr)
	// C / D fragment: c0, c1 at row g = l/4, columns 2*(l%4) + {0, 1}; c2, c3 at row g+8.
	g := k.LShr(lane, ir.Int32(2))
	col := k.Mul(k.And(lane, ir.Int32(3)), ir.Int32(2))
	idx := []value.Value{
		k.Add(k.Mul(g, ir.Int32(8)), col),
		k.Add(k.Add(k.Mul(g, ir.Int32(8)), col), ir.Int32(1)),
		k.Add(k.Mul(k.Add(g, ir.Int32(8)), ir.Int32(8)), col),
		k.Add(k.Add(k.Mul(k.Add(g, ir.Int32(8)), ir.Int32(8)), col), ir.Int32(1)),
	}
	c := make([]value.Value, 4)
	for j := range c {
		c[j] = k.Load(k.Index(k.Param("c"), idx[j]))
	}
	f := types.Float
	d := k.AsmCallN("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};",
		"=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", []types.Type{f, f, f, f},
		a[0], a[1], a[2], a[3], bb[0], bb[1], c[0], c[1], c[2], c[3])
	for j := range d {
		k.Store(d[j], k.Index(k.Param("d"), idx[j]))
	}
	k.Ret(nil)
	return m.Finish()
}
