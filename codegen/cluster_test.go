package codegen

import (
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/testlayer"
	"github.com/mokc/mokc/internal/toolchain"
	"github.com/mokc/mokc/ptx"
	"github.com/mokc/mokc/schedule"
	"github.com/mokc/mokc/target"
)

// TestSM90Cluster: with Schedule.Cluster = 2 on sm_90a the routed FC1 and
// FC2 kernels (bf16, and mxfp8's register-fed ones) that run over
// TMA-loaded dispatched rows with an even number of column blocks are
// built for 2-CTA clusters (the plan's
// kernel says cluster 2, the PTX declares .reqnctapercluster 2, 1, 1, A's
// tensor map box is half the tile's rows, loaded by a multicast TMA, and
// the stages are released in the peer CTA too); the other GEMMs (the
// decode forms gathering their rows or promoting 32-row tiles, the shared
// expert's) keep no cluster,
// and the kernels launched at each T are the same as without; the module
// assembles with ptxas without spills. The backward builds too.
func TestSM90Cluster(t *testing.T) {
	for _, name := range []string{"qwen3-30b-a3b", "gpt-oss-20b", "mixtral-8x7b", "deepseek-v2-lite", "qwen3-30b-a3b mxfp8", "gpt-oss-20b mxfp8"} {
		l := testlayer.Named(t, name)
		s := testlayer.DefaultSchedule(t, l, target.SM90a)
		s.Items = schedule.ItemsFixed         // the clusters' walk, in both
		s.FC2Large = schedule.LargeRowsTile{} // tiles of at most 128 token rows, in both
		base, err := Build(l, s)
		if err != nil {
			t.Fatal(err)
		}
		s.Cluster = 2
		p, err := Build(l, s)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := lowerBackward(t, l, s); err != nil {
			t.Errorf("%s backward: %v", name, err)
		}
		for _, T := range []int64{1, 64, 300, 2000, 4096} {
			if a, b := launchedAt(p, T), launchedAt(base, T); strings.Join(a, " ") != strings.Join(b, " ") {
				t.Errorf("%s T = %d: kernels %v with clusters, %v without", name, T, a, b)
			}
		}
		clustered := 0
		for _, k := range p.Kernels {
			// The routed GEMMs but the forms gathering their rows and the
			// mxfp8 decode tiles (promoted, the operand swap); the bf16
			// decode tiles pair too.
			routed := (strings.HasPrefix(k.Name, "moe_fc1") || strings.HasPrefix(k.Name, "moe_fc2")) && !strings.HasSuffix(k.Name, "_gathered") &&
				!(strings.Contains(k.Name, "_decode") && l.Precision == schedule.MXFP8)
			if k.Cluster == 0 {
				if routed && evenBlocks(t, l, s, k.Name) {
					t.Errorf("%s: %s has no cluster, though its column blocks pair up", name, k.Name)
				}
				continue
			}
			clustered++
			if k.Cluster != 2 || !routed || !k.GridPerSM {
				t.Errorf("%s: %s: cluster %d, grid_per_sm %v", name, k.Name, k.Cluster, k.GridPerSM)
			}
			for _, q := range k.Params {
				if q.Name == "tmap_a" {
					if box := q.TensorMap.Box; box[1] != tileRows(s, k.Name)/2 {
						t.Errorf("%s: %s: A box %v, want %d rows", name, k.Name, box, tileRows(s, k.Name)/2)
					}
				}
			}
		}
		if clustered == 0 {
			t.Fatalf("%s: no kernel built in clusters", name)
		}
		res, err := ptx.CompileModule(p.Module, target.SM90a)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, want := range []string{".reqnctapercluster 2, 1, 1", ".multicast::cluster", "mapa.shared::cluster.u32", "mbarrier.arrive.shared::cluster.b64", "barrier.cluster.wait.acquire"} {
			if n := strings.Count(res.Text, want); n < clustered {
				t.Errorf("%s: %q %d times for %d clustered kernels", name, want, n, clustered)
			}
		}
		// The peer release is a .release.cta arrive: a cluster-scope one puts a
		// memory barrier in every consumer warp's stage (peerArrive).
		for _, bad := range []string{"mbarrier.arrive.release.cluster", "try_wait.parity.acquire.cluster"} {
			if strings.Contains(res.Text, bad) {
				t.Errorf("%s: %q in the PTX", name, bad)
			}
		}
		if testing.Short() {
			continue
		}
		toolchain.NeedPtxas(t, target.SM90a.String())
		if err := toolchain.Assemble(res.Text, target.SM90a.String()); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// evenBlocks reports whether kernel's GEMM (moe_fc1.., moe_fc2..) has an
// even number of column blocks under s (or its variant, for a kernel of
// the variant's suffix).
func evenBlocks(t *testing.T, l schedule.Layer, s schedule.Schedule, kernel string) bool {
	t.Helper()
	v := kernelSchedule(s, kernel)
	n, bn := l.Hidden, v.FC2.N
	if strings.HasPrefix(kernel, "moe_fc1") {
		n, bn = l.Intermediate, v.FC1.N/2
	}
	return (n+bn-1)/bn%2 == 0
}

// tileRows is the row tile (M) of kernel's GEMM under s or its variant.
func tileRows(s schedule.Schedule, kernel string) int { return kernelSchedule(s, kernel).FC1.M }

// kernelSchedule is the schedule of a routed GEMM kernel of s: its Decode
// tiles' (moe_fc1_<Decode.Name>...), its variant's (moe_fc1_<variant>...)
// or s.
func kernelSchedule(s schedule.Schedule, kernel string) schedule.Schedule {
	if d, ok := s.DecodeSchedule(); ok && strings.Contains(kernel, "_"+s.Decode.Name) {
		return d
	}
	if v, ok := s.VariantSchedule(); ok && strings.Count(kernel, "_") > 1 {
		return v
	}
	return s
}

// TestClusterRefused: a cluster is refused with its reason where it
// cannot apply: on sm_80, with the queue walk or per-expert weights (the
// schedule), and for a layer none of whose GEMMs pair their column blocks
// (the engine builds none of them in clusters); with the chain, the
// chained kernels pair where both GEMMs do.
func TestClusterRefused(t *testing.T) {
	l := testlayer.Preset(t, "qwen3-30b-a3b")
	s80 := testlayer.DefaultSchedule(t, l, target.SM80)
	s80.Cluster = 2
	if err := s80.Validate(l); err == nil || !strings.Contains(err.Error(), "or 2 on sm_90a") {
		t.Errorf("sm_80 cluster 2: %v", err)
	}
	for _, c := range []struct {
		what string
		edit func(*schedule.Layer, *schedule.Schedule)
		want string
	}{
		{"queue", func(l *schedule.Layer, s *schedule.Schedule) { s.Items = schedule.ItemsQueue }, "fixed order"},
		{"per-expert", func(l *schedule.Layer, s *schedule.Schedule) { l.Storage = schedule.PerExpertWeights }, "grouped weights"},
	} {
		l, s := l, testlayer.DefaultSchedule(t, l, target.SM90a)
		s.Cluster = 2
		c.edit(&l, &s)
		if _, err := Build(l, s); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with cluster 2: %v, want an error saying %q", c.what, err, c.want)
		}
	}
	// With the chain: a bf16 forward's base chained kernel pairs (both
	// GEMMs' column blocks do; its gathered form and qwen3-30b-a3b's
	// tile variant, whose FC2 has 11 blocks, do not); an mxfp8 forward
	// chains its decode GEMMs (unpaired) and pairs its register-fed ones.
	for _, prec := range []schedule.Precision{schedule.BF16, schedule.MXFP8} {
		l := l
		l.Precision = prec
		s := testlayer.DefaultSchedule(t, l, target.SM90a)
		s.Cluster, s.Chain, s.Items = 2, schedule.ChainFC, schedule.ItemsFixed
		s = s.FC2LargeWhereValid(l)
		p, err := Build(l, s)
		if err != nil {
			t.Fatalf("%v chain with cluster 2: %v", prec, err)
		}
		var got []string
		for _, k := range p.Kernels {
			if k.Cluster == 2 {
				got = append(got, k.Name)
			}
		}
		want := []string{"moe_fc1_fc2"}
		if prec == schedule.MXFP8 {
			want = []string{"moe_fc1", "moe_fc2"}
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%v chain with cluster 2: kernels in clusters %v, want %v", prec, got, want)
		}
	}
	odd := l
	odd.Name, odd.Hidden, odd.Intermediate = "odd-blocks", 640, 384 // FC2 640/256 and FC1 384/128: 3 blocks each
	s := testlayer.DefaultSchedule(t, odd, target.SM90a)
	s.Cluster, s.Variant, s.Items = 2, nil, schedule.ItemsFixed
	_, err := Build(odd, s)
	if err == nil || !strings.Contains(err.Error(), "builds none of this program's GEMMs in clusters") {
		t.Errorf("%s with cluster 2: %v", odd.Name, err)
	}
	if err != nil {
		t.Log(err)
	}
}
