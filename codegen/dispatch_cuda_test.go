//go:build cuda

package codegen_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/mokc/mokc/codegen"
	"github.com/mokc/mokc/driver"
	"github.com/mokc/mokc/launch"
	"github.com/mokc/mokc/schedule"
)

// moe_dispatch_small writes what moe_init, moe_count, moe_scan and
// moe_permute write, byte for byte: counts, offsets, the GEMM work lists,
// row_of_slot, src_slot and the error word, on random ids with unrouted
// (-1) and out-of-range ones, at T = 0, 1, 37 and the largest T it serves.
func TestDispatchSmallGPU(t *testing.T) {
	ctx := openGPU(t)
	for _, c := range codegen.ForwardCases(t) {
		p := codegen.BuildForwardCaseDispatch(t, c, schedule.DispatchOps) // the four kernels past its T
		small := kernelNamed(p, "moe_dispatch_small")
		if small == nil {
			continue // the routing-map form keeps its route op between init and count
		}
		t.Run(c.Name, func(t *testing.T) {
			ex := newExecutorOf(t, ctx, p)
			four := []string{"moe_init", "moe_count", "moe_scan", "moe_permute"}
			var written []string // the buffers the kernels write
			for _, prm := range small.Params {
				if prm.Type == codegen.ParamPtr && prm.Buffer != "ids" {
					written = append(written, prm.Buffer)
				}
			}
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 1))
			l := c.Layer
			tmax := small.Tokens[0].Max
			for _, T := range []int{0, 1, 37, int(tmax)} {
				ids := randomIDs(rng, T, l.TopK, l.Experts)
				d := &dev{t: t, ctx: ctx}
				bufs := map[string]driver.DevicePtr{"ids": d.put(ids, 4*len(ids))}
				for _, name := range written {
					bufs[name] = d.put(nil, bufBytes(p, name, T))
				}
				got := runNamed(t, ex, d, T, bufs, written, "moe_dispatch_small")
				want := runNamed(t, ex, d, T, bufs, written, four...)
				for _, name := range written {
					if i := slices.Compare(got[name], want[name]); i != 0 {
						t.Errorf("T=%d: %s differs from the four kernels' (%v vs %v)", T, name, head(got[name]), head(want[name]))
					}
				}
				d.free()
			}
		})
	}
}

// kernelNamed is p's kernel of that name, or nil.
func kernelNamed(p *codegen.Program, name string) *codegen.Kernel {
	for i := range p.Kernels {
		if p.Kernels[i].Name == name {
			return &p.Kernels[i]
		}
	}
	return nil
}

// runNamed poisons the written buffers, launches the named kernels of ex's
// program in program order for T tokens (their token ranges aside; T = 0
// skips those that skip it) and returns the written buffers' bytes.
func runNamed(t *testing.T, ex *executor, d *dev, T int, bufs map[string]driver.DevicePtr, written []string, names ...string) map[string][]byte {
	t.Helper()
	for _, name := range written {
		if err := ex.ctx.Memset(bufs[name], 0xFF, bufBytes(ex.p, name, T)); err != nil {
			t.Fatal(err)
		}
	}
	sub := *ex.p
	sub.Kernels = nil
	for _, k := range ex.p.Kernels {
		if slices.Contains(names, k.Name) {
			k.Tokens = nil
			sub.Kernels = append(sub.Kernels, k)
		}
	}
	if len(sub.Kernels) != len(names) {
		t.Fatalf("kernels %v: the program has %d of them", names, len(sub.Kernels))
	}
	run := &executor{ctx: ex.ctx, mod: ex.mod, p: &sub, funcs: ex.funcs}
	if err := run.run(T, bufs); err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, name := range written {
		b := make([]byte, bufBytes(ex.p, name, T))
		if err := ex.ctx.CopyFromDevice(b, bufs[name]); err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	return out
}

// bufBytes is the size of buffer name for T tokens as dev.put allocates
// it (16 bytes for an empty one).
func bufBytes(p *codegen.Program, name string, T int) int {
	if n := int(p.Buffer(name).Bytes.Eval(int64(T))); n > 0 {
		return n
	}
	return 16
}

// head is the first bytes of b, for a message.
func head(b []byte) string { return fmt.Sprintf("% x", b[:min(len(b), 32)]) }

// moe_dispatch (the work queue, schedule.DispatchQueue) writes what
// moe_init, moe_count, moe_scan and moe_permute (schedule.DispatchOps)
// write, byte for byte, on random ids with unrouted (-1) and out-of-range
// ones, from the first T past moe_dispatch_small through partial, whole and
// many chunks of 2048 slots; every T runs twice on the same queue words, which
// only the kernel itself resets (they start zeroed, as the runtime
// allocates them), and the words are zero again at the end.
func TestDispatchQueueGPU(t *testing.T) {
	ctx := openGPU(t)
	for _, c := range codegen.ForwardCases(t) {
		p := codegen.BuildForwardCaseDispatch(t, c, schedule.DispatchQueue)
		queue := kernelNamed(p, "moe_dispatch")
		if queue == nil {
			continue // the routing-map form keeps its route op between init and count
		}
		ops := codegen.BuildForwardCaseDispatch(t, c, schedule.DispatchOps)
		t.Run(c.Name, func(t *testing.T) {
			exQ := newExecutorOf(t, ctx, p)
			exO := newExecutorOf(t, ctx, ops)
			var written []string // the buffers both forms write
			for _, prm := range queue.Params {
				if prm.Type == codegen.ParamPtr && prm.Buffer != "ids" && ops.Buffer(prm.Buffer) != nil {
					written = append(written, prm.Buffer)
				}
			}
			seed := rand.Uint64()
			t.Logf("seed %d", seed)
			rng := rand.New(rand.NewPCG(seed, 1))
			l := c.Layer
			tmin := int(queue.Tokens[0].Min)
			d := &dev{t: t, ctx: ctx}
			defer d.free()
			maxT := 9000
			bufs := map[string]driver.DevicePtr{}
			for _, name := range written {
				bufs[name] = d.put(nil, bufBytes(p, name, maxT))
			}
			bufs["dispatch_parts"] = d.put(nil, bufBytes(p, "dispatch_parts", maxT))
			bufs[launch.BufWorkQueue] = d.scratch(launch.BufWorkQueue, bufBytes(p, launch.BufWorkQueue, maxT))
			// 2048/K + 1 lies below the kernel's launch range (two chunks, the
			// second nearly empty); 16384/K fills whole chunks when K divides
			// 16384.
			for _, T := range []int{tmin, tmin + 1, 2048/l.TopK + 1, 16384 / l.TopK, 3000, maxT} {
				ids := randomIDs(rng, T, l.TopK, l.Experts)
				dT := &dev{t: t, ctx: ctx}
				bufs["ids"] = dT.put(ids, 4*len(ids))
				want := runNamed(t, exO, d, T, bufs, written, "moe_init", "moe_count", "moe_scan", "moe_permute")
				for run := range 2 {
					got := runNamed(t, exQ, d, T, bufs, written, "moe_dispatch")
					for _, name := range written {
						if i := slices.Compare(got[name], want[name]); i != 0 {
							t.Errorf("T=%d run %d: %s differs from the four kernels' (%v vs %v)", T, run, name, head(got[name]), head(want[name]))
						}
					}
				}
				dT.free()
			}
			words := make([]byte, bufBytes(p, launch.BufWorkQueue, maxT))
			if err := ctx.CopyFromDevice(words, bufs[launch.BufWorkQueue]); err != nil {
				t.Fatal(err)
			}
			for i, w := range words {
				if w != 0 {
					t.Fatalf("work queue byte %d is %#x after the runs, want 0", i, w)
				}
			}
		})
	}
}

// randomIDs is the ids [T, K] of a dispatch test over E experts: 5% of
// the slots unrouted (-1), 2% out of range (E .. E+2: reported, not
// routed; only for T > 1), the rest uniform.
func randomIDs(rng *rand.Rand, T, K, E int) []int32 {
	ids := make([]int32, T*K)
	for i := range ids {
		switch u := rng.IntN(100); {
		case u < 5:
			ids[i] = -1
		case u < 7 && T > 1:
			ids[i] = int32(E + rng.IntN(3))
		default:
			ids[i] = int32(rng.IntN(E))
		}
	}
	return ids
}

// newExecutorOf loads our PTX of p.
func newExecutorOf(t *testing.T, ctx *driver.Context, p *codegen.Program) *executor {
	t.Helper()
	src, err := ourPTX(p)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := newExecutor(ctx, p, src)
	if err != nil {
		t.Fatal(err)
	}
	return ex
}
