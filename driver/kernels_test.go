package driver_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mokc/mokc/internal/toolchain"
)

// Hand-written PTX kernels for the GPU tests (cuda_test.go). They are checked
// with ptxas here so that a GPU test failure is never a typo in its input.

// ptxModule is a PTX module for target (e.g. "sm_80") holding body: the
// .version 8.0 header of every test kernel, then its declarations.
func ptxModule(target, body string) string {
	return ".version 8.0\n.target " + target + "\n.address_size 64\n\n" + body
}

// ptxTarget returns the target of a module from ptxModule.
func ptxTarget(ptx string) string {
	_, rest, _ := strings.Cut(ptx, ".target ")
	target, _, _ := strings.Cut(rest, "\n")
	return target
}

// mixedParamsPTX: mixed_params(u32 n, u64 data, f32 scale, u64 fout,
// 128-byte by-value blob, u32 k, u64 bout). Threads i < n do
// data[i] += 1 and fout[i] = float(data[i]) * scale; thread 0 copies the 32
// words of blob to bout[0..31] and k to bout[32]. A parameter passed with the
// wrong size shifts every later one, so the outputs prove exact sizes.
var mixedParamsPTX = func() string {
	var b strings.Builder
	b.WriteString(ptxModule("sm_80", `.visible .entry mixed_params(
	.param .u32 p_n,
	.param .u64 p_data,
	.param .f32 p_scale,
	.param .u64 p_fout,
	.param .align 64 .b8 p_blob[128],
	.param .u32 p_k,
	.param .u64 p_bout
)
{
	.reg .pred %p<3>;
	.reg .b32 %r<10>;
	.reg .f32 %f<3>;
	.reg .b64 %rd<8>;

	ld.param.u32 %r1, [p_n];
	ld.param.u64 %rd1, [p_data];
	ld.param.f32 %f1, [p_scale];
	ld.param.u64 %rd2, [p_fout];
	ld.param.u32 %r2, [p_k];
	ld.param.u64 %rd3, [p_bout];
	cvta.to.global.u64 %rd1, %rd1;
	cvta.to.global.u64 %rd2, %rd2;
	cvta.to.global.u64 %rd3, %rd3;
	mov.u32 %r3, %ctaid.x;
	mov.u32 %r4, %ntid.x;
	mov.u32 %r5, %tid.x;
	mad.lo.s32 %r6, %r3, %r4, %r5;
	setp.ge.u32 %p1, %r6, %r1;
	@%p1 bra DATA_DONE;
	mul.wide.u32 %rd4, %r6, 4;
	add.s64 %rd5, %rd1, %rd4;
	ld.global.u32 %r7, [%rd5];
	add.s32 %r7, %r7, 1;
	st.global.u32 [%rd5], %r7;
	cvt.rn.f32.u32 %f2, %r7;
	mul.rn.f32 %f2, %f2, %f1;
	add.s64 %rd6, %rd2, %rd4;
	st.global.f32 [%rd6], %f2;
DATA_DONE:
	setp.ne.u32 %p2, %r6, 0;
	@%p2 bra DONE;
`))
	for j := 0; j < 32; j++ {
		fmt.Fprintf(&b, "\tld.param.u32 %%r8, [p_blob+%d];\n\tst.global.u32 [%%rd3+%d], %%r8;\n", 4*j, 4*j)
	}
	b.WriteString(`	st.global.u32 [%rd3+128], %r2;
DONE:
	ret;
}
`)
	return b.String()
}()

// dynSmemPTX: dyn_smem(u64 out, u32 words, u32 seed) fills `words` 32-bit
// words of dynamic shared memory with j*3+seed, then writes
// out[j] = smem[(j+1) % words], so every word crosses between threads.
var dynSmemPTX = ptxModule("sm_80", `.extern .shared .align 16 .b8 dsmem[];

.visible .entry dyn_smem(
	.param .u64 p_out,
	.param .u32 p_words,
	.param .u32 p_seed
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<10>;
	.reg .b64 %rd<8>;

	ld.param.u64 %rd1, [p_out];
	cvta.to.global.u64 %rd1, %rd1;
	ld.param.u32 %r1, [p_words];
	ld.param.u32 %r2, [p_seed];
	mov.u32 %r3, %tid.x;
	mov.u32 %r4, %ntid.x;
	mov.u64 %rd2, dsmem;
	mov.u32 %r5, %r3;
FILL:
	setp.ge.u32 %p1, %r5, %r1;
	@%p1 bra FILLED;
	mad.lo.s32 %r6, %r5, 3, %r2;
	mul.wide.u32 %rd3, %r5, 4;
	add.s64 %rd4, %rd2, %rd3;
	st.shared.u32 [%rd4], %r6;
	add.s32 %r5, %r5, %r4;
	bra FILL;
FILLED:
	bar.sync 0;
	mov.u32 %r5, %r3;
READ:
	setp.ge.u32 %p1, %r5, %r1;
	@%p1 bra DONE;
	add.s32 %r7, %r5, 1;
	rem.u32 %r7, %r7, %r1;
	mul.wide.u32 %rd3, %r7, 4;
	add.s64 %rd4, %rd2, %rd3;
	ld.shared.u32 %r8, [%rd4];
	mul.wide.u32 %rd5, %r5, 4;
	add.s64 %rd6, %rd1, %rd5;
	st.global.u32 [%rd6], %r8;
	add.s32 %r5, %r5, %r4;
	bra READ;
DONE:
	ret;
}
`)

// brokenPTX refers to a symbol that does not exist; the JIT log must name it.
const brokenSymbol = "undeclared_symbol_mokc"

var brokenPTX = ptxModule("sm_80", `.visible .entry broken(
	.param .u64 p_out
)
{
	.reg .b32 %r<2>;
	ld.global.u32 %r1, [`+brokenSymbol+`];
	ret;
}
`)

// tmaLoadPTX: tma_load_2d(128-byte tensor map, u64 out, i32 c0, i32 c1)
// loads one 64x64 bf16 box at element coordinates (c0 inner, c1 outer) with
// cp.async.bulk.tensor into shared memory (no swizzle), waits on an
// mbarrier, and copies the 8192 bytes to out.
var tmaLoadPTX = ptxModule("sm_90a", `.visible .entry tma_load_2d(
	.param .align 64 .b8 p_tmap[128],
	.param .u64 p_out,
	.param .u32 p_c0,
	.param .u32 p_c1
)
{
	.reg .pred %p<4>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<8>;
	.shared .align 1024 .b8 tile[8192];
	.shared .align 8 .b64 bar;

	mov.u32 %r1, %tid.x;
	mov.u32 %r6, %ntid.x;
	ld.param.u32 %r2, [p_c0];
	ld.param.u32 %r3, [p_c1];
	ld.param.u64 %rd1, [p_out];
	cvta.to.global.u64 %rd1, %rd1;
	mov.b64 %rd2, p_tmap;
	cvta.param.u64 %rd2, %rd2;
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra INITED;
	mbarrier.init.shared::cta.b64 [bar], 1;
	fence.mbarrier_init.release.cluster;
INITED:
	bar.sync 0;
	@%p1 bra WAIT;
	mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [bar], 8192;
	cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [tile], [%rd2, {%r2, %r3}], [bar];
WAIT:
	mbarrier.try_wait.parity.shared::cta.b64 %p2, [bar], 0;
	@!%p2 bra WAIT;
	mov.u32 %r4, %r1;
	mov.u64 %rd4, tile;
COPY:
	setp.ge.u32 %p3, %r4, 2048;
	@%p3 bra DONE;
	mul.wide.u32 %rd5, %r4, 4;
	add.s64 %rd6, %rd4, %rd5;
	ld.shared.u32 %r5, [%rd6];
	add.s64 %rd7, %rd1, %rd5;
	st.global.u32 [%rd7], %r5;
	add.s32 %r4, %r4, %r6;
	bra COPY;
DONE:
	ret;
}
`)

// clusterPTX: cluster_rank(u64 out): thread 0 of block b writes
// out[2b] = %cluster_ctarank and out[2b+1] = %cluster_nctarank.
var clusterPTX = ptxModule("sm_90", `.visible .entry cluster_rank(
	.param .u64 p_out
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<6>;
	.reg .b64 %rd<4>;

	mov.u32 %r1, %tid.x;
	setp.ne.u32 %p1, %r1, 0;
	@%p1 bra DONE;
	ld.param.u64 %rd1, [p_out];
	cvta.to.global.u64 %rd1, %rd1;
	mov.u32 %r2, %ctaid.x;
	mov.u32 %r3, %cluster_ctarank;
	mov.u32 %r4, %cluster_nctarank;
	mul.wide.u32 %rd2, %r2, 8;
	add.s64 %rd3, %rd1, %rd2;
	st.global.u32 [%rd3], %r3;
	st.global.u32 [%rd3+4], %r4;
DONE:
	ret;
}
`)

// pdlPTX: pdl_produce(u64 out, u32 v, u64 cycles) lets its dependents
// launch, spins for cycles clock cycles, then writes *out = v;
// pdl_consume(u64 in, u64 out) waits for the grids it depends on
// (griddepcontrol.wait) and copies *in to *out.
var pdlPTX = ptxModule("sm_90", `.visible .entry pdl_produce(
	.param .u64 p_out,
	.param .u32 p_v,
	.param .u64 p_cycles
)
{
	.reg .pred %p<2>;
	.reg .b32 %r<2>;
	.reg .b64 %rd<6>;

	griddepcontrol.launch_dependents;
	ld.param.u64 %rd1, [p_out];
	cvta.to.global.u64 %rd1, %rd1;
	ld.param.u32 %r1, [p_v];
	ld.param.u64 %rd2, [p_cycles];
	mov.u64 %rd3, %clock64;
SPIN:
	mov.u64 %rd4, %clock64;
	sub.s64 %rd5, %rd4, %rd3;
	setp.lt.s64 %p1, %rd5, %rd2;
	@%p1 bra SPIN;
	st.global.u32 [%rd1], %r1;
	ret;
}

.visible .entry pdl_consume(
	.param .u64 p_in,
	.param .u64 p_out
)
{
	.reg .b32 %r<2>;
	.reg .b64 %rd<3>;

	griddepcontrol.wait;
	ld.param.u64 %rd1, [p_in];
	cvta.to.global.u64 %rd1, %rd1;
	ld.param.u64 %rd2, [p_out];
	cvta.to.global.u64 %rd2, %rd2;
	ld.global.u32 %r1, [%rd1];
	st.global.u32 [%rd2], %r1;
	ret;
}
`)

func TestKernelsAssemble(t *testing.T) {
	for _, k := range []struct{ name, ptx string }{
		{"mixed_params", mixedParamsPTX},
		{"dyn_smem", dynSmemPTX},
		{"tma_load_2d", tmaLoadPTX},
		{"cluster_rank", clusterPTX},
		{"pdl", pdlPTX},
	} {
		t.Run(k.name, func(t *testing.T) {
			target := ptxTarget(k.ptx)
			toolchain.NeedPtxas(t, target)
			if err := toolchain.Assemble(k.ptx, target); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("broken", func(t *testing.T) {
		toolchain.NeedPtxas(t, ptxTarget(brokenPTX))
		err := toolchain.Assemble(brokenPTX, ptxTarget(brokenPTX))
		if err == nil || !strings.Contains(err.Error(), brokenSymbol) {
			t.Fatalf("ptxas should refuse brokenPTX naming %s; got %v", brokenSymbol, err)
		}
	})
}
