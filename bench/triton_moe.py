#!/usr/bin/env python3
"""Triton fused-MoE forward: the peer baseline of `mokc bench` in the design of vLLM's and
SGLang's `fused_moe` (docs/perf.md; ../shared/FACTS.md names the design), written here.

Design (as those projects describe it): the (token, slot) routes are sorted by expert and each
expert's list is padded to a multiple of BLOCK_M ("align": sorted_ids, one expert id per block of
BLOCK_M, the padded total); one Triton GEMM kernel per FC then runs over those blocks, each
program loading its BLOCK_M rows of A by their route ids (FC1: the token rows of x, no gather
pass; FC2: the FC1 activations of the routes), the block's expert weights, and storing its rows
of C by route id; FC2 multiplies its outputs by the routing weights, and a sum over the top-k
slots gives y. The activation (SwiGLU, or GPT-OSS's clamped one) is a PyTorch op between the two
GEMMs, as in those projects; the alignment is PyTorch ops here (vLLM runs it as one CUDA kernel),
so the script also times the pipeline without it ("gemms": alignment computed beforehand). The
whole forward is captured in a CUDA graph and replayed, as a serving engine runs it.

Reports, per model and token count: median time (triton.testing.do_bench over graph replays),
TFLOP/s, GB/s and the fraction of the measured roofline, with the same FLOP and byte counts as
bench/torch_moe.py, after checking the pipeline against torch_moe.reference (float64) on small
shapes.

Usage: python3 bench/triton_moe.py [--models a,b] [--tokens 64,4096] [--large 128x256x64x8x3,...] [--json out.json]
"""
import argparse
import json
import os
import sys

import torch
import triton
import triton.language as tl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_moe  # noqa: E402  (MODELS, make, reference, act, flops_bytes)


@triton.jit
def moe_gemm(a_ptr, b_ptr, c_ptr, bias_ptr, w_ptr, sorted_ptr, eid_ptr, npad_ptr,
             N, K, num_valid, stride_am, stride_be, stride_bn, stride_cm,
             A_DIV: tl.constexpr, HAS_BIAS: tl.constexpr, MUL_W: tl.constexpr,
             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    """C[r, n] = sum_k A[r // A_DIV, k] * B[e, n, k] (+ bias[e, n]) (* w[r]) for the routes r of
    block pid_m (expert e), bf16 in and out, f32 sums; blocks past the padded total exit."""
    pid = tl.program_id(0)
    npad = tl.load(npad_ptr)
    num_m = tl.cdiv(npad, BM)
    num_n = tl.cdiv(N, BN)
    width = GROUP_M * num_n
    first_m = (pid // width) * GROUP_M
    if first_m >= num_m:
        return
    gsize = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % gsize
    pid_n = (pid % width) // gsize
    if pid_n >= num_n:  # the grid covers the most blocks any routing pads to
        return
    offs_m = pid_m * BM + tl.arange(0, BM)
    rows = tl.load(sorted_ptr + offs_m)
    valid = rows < num_valid
    e = tl.load(eid_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BN + tl.arange(0, BN)
    nmask = offs_n < N
    offs_k = tl.arange(0, BK)
    a_rows = (rows // A_DIV).to(tl.int64)
    a_ptrs = a_ptr + a_rows[:, None] * stride_am + offs_k[None, :]
    b_ptrs = b_ptr + e * stride_be + offs_n[None, :].to(tl.int64) * stride_bn + offs_k[:, None]
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        kmask = offs_k < K - k * BK
        a = tl.load(a_ptrs, mask=valid[:, None] & kmask[None, :], other=0.0)
        b = tl.load(b_ptrs, mask=kmask[:, None] & nmask[None, :], other=0.0)
        acc += tl.dot(a, b)
        a_ptrs += BK
        b_ptrs += BK
    if HAS_BIAS:
        acc += tl.load(bias_ptr + e * N + offs_n, mask=nmask, other=0.0).to(tl.float32)[None, :]
    if MUL_W:
        acc *= tl.load(w_ptr + rows, mask=valid, other=0.0)[:, None]
    c_ptrs = c_ptr + rows[:, None].to(tl.int64) * stride_cm + offs_n[None, :]
    tl.store(c_ptrs, acc.to(tl.bfloat16), mask=valid[:, None] & nmask[None, :])


def config(routes, E):
    """Block sizes by mean routes per expert (the shapes vLLM's default table picks from)."""
    if routes // E <= 32:
        return dict(BM=16, BN=64, BK=128, GROUP_M=1, num_warps=4, num_stages=4)
    if routes // E <= 256:
        return dict(BM=64, BN=128, BK=64, GROUP_M=8, num_warps=4, num_stages=4)
    return dict(BM=128, BN=128, BK=64, GROUP_M=8, num_warps=8, num_stages=4)


def cfgname(c):
    """BMxBNxBKxWARPSxSTAGES of block sizes c."""
    return "%dx%dx%dx%dx%d" % (c["BM"], c["BN"], c["BK"], c["num_warps"], c["num_stages"])


class Aligner:
    """The routes sorted by expert, each expert padded to BM: sorted_ids (padding: the route
    count, past every route), one expert id per block, the padded total; PyTorch ops that a
    CUDA graph captures (no host sync)."""

    def __init__(self, T, K, E, BM, dev):
        self.T, self.K, self.E, self.BM = T, K, E, BM
        n = T * K
        self.max_pad = n + E * (BM - 1)
        self.max_blocks = triton.cdiv(self.max_pad, BM)
        self.sorted_ids = torch.empty(self.max_blocks * BM, dtype=torch.int32, device=dev)
        self.eid = torch.empty(self.max_blocks, dtype=torch.int32, device=dev)
        self.npad = torch.empty(1, dtype=torch.int32, device=dev)
        self.ones = torch.ones(n, dtype=torch.int64, device=dev)
        self.ar = torch.arange(n, dtype=torch.int64, device=dev)
        self.blocks = torch.arange(self.max_blocks, dtype=torch.int64, device=dev)

    def __call__(self, ids):
        flat = ids.reshape(-1).long()
        counts = torch.zeros(self.E, dtype=torch.int64, device=ids.device).scatter_add_(0, flat, self.ones)
        padded = (counts + self.BM - 1) // self.BM * self.BM
        pstart = torch.cumsum(padded, 0) - padded
        cstart = torch.cumsum(counts, 0) - counts
        order = torch.argsort(flat, stable=True)
        se = flat[order]
        self.sorted_ids.fill_(self.T * self.K)
        self.sorted_ids.scatter_(0, pstart[se] + self.ar - cstart[se], order.int())
        bend = torch.cumsum(padded // self.BM, 0)
        self.eid.copy_(torch.clamp(torch.searchsorted(bend, self.blocks, right=True), max=self.E - 1))
        self.npad.copy_(padded.sum().reshape(1))


class Pipeline:
    """The forward of layer p (torch_moe.make's) with block sizes cfg (None: config's)."""

    def __init__(self, p, cfg=None):
        self.p = p
        H, I, E, K, S, Is, kind = p["dims"]
        T = p["x"].shape[0]
        dev = p["x"].device
        self.cfg = cfg or config(T * K, E)
        self.align = Aligner(T, K, E, self.cfg["BM"], dev)
        self.h = torch.empty(T * K, 2 * I, dtype=torch.bfloat16, device=dev)
        self.o = torch.empty(T * K, H, dtype=torch.bfloat16, device=dev)
        self.dims = (T, H, I, E, K, S, Is, kind)

    def gemm(self, a, b, c, bias, w, a_div):
        T, H, I, E, K, S, Is, kind = self.dims
        N, Kd = b.shape[1], b.shape[2]
        cfg = self.cfg
        al = self.align
        grid = (al.max_blocks * triton.cdiv(N, cfg["BN"]),)
        moe_gemm[grid](a, b, c, bias if bias is not None else c, w if w is not None else c,
                       al.sorted_ids, al.eid, al.npad, N, Kd, T * K, a.stride(0), b.stride(0), b.stride(1),
                       c.stride(0), A_DIV=a_div, HAS_BIAS=bias is not None, MUL_W=w is not None,
                       BM=cfg["BM"], BN=cfg["BN"], BK=cfg["BK"], GROUP_M=cfg["GROUP_M"],
                       num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])

    def experts(self):
        p = self.p
        T, H, I, E, K, S, Is, kind = self.dims
        self.gemm(p["x"], p["w1"], self.h, p["b1"], None, K)
        a = torch_moe.act(self.h, kind, I).bfloat16()
        self.gemm(a, p["w2"], self.o, p["b2"], p["w"].reshape(-1), 1)
        y = self.o.view(T, K, H).float().sum(1)
        if p["shared"] is not None:
            sw1, sw2 = p["shared"]
            y += (torch_moe.act(p["x"] @ sw1.t(), "swiglu", S * Is).bfloat16() @ sw2.t()).float()
        return y.bfloat16()

    def forward(self):
        self.align(self.p["ids"])
        return self.experts()


def graphed(fn):
    """fn captured in a CUDA graph (after a warm-up on a side stream); returns replay."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g.replay


def check(dev):
    """The pipeline against torch_moe.reference (float64) on small layers of each activation,
    at decode and many-row block sizes; the worst rel L2."""
    worst = 0.0
    for model, T, E in (("gpt-oss-120b", 64, 8), ("qwen3-30b-a3b", 300, 16), ("qwen3-30b-a3b", 3, 16),
                        ("deepseek-v3", 40, 16)):
        p = torch_moe.make(model, T, dev, seed=3)
        H, I, E0, K, S, Is, kind = p["dims"]
        for k in ("w1", "w2", "b1", "b2"):
            if p[k] is not None:
                p[k] = p[k][:E].contiguous()
        p["ids"] = (p["ids"] % E).int()
        p["dims"] = (H, I, E, K, S, Is, kind)
        ref = torch_moe.reference(p)
        pipe = Pipeline(p)
        got = pipe.forward().double()
        rel = float((got - ref).norm() / ref.norm())
        print(f"triton pipeline check ({model} shape, E={E}, T={T}, BM={pipe.cfg['BM']}): rel L2 {rel:.2e}")
        assert rel < 1e-2, (model, T, rel)
        worst = max(worst, rel)
    return worst


def ceilings(dev, do_bench):
    """The measured dense bf16 rate (TFLOP/s, an 8192^3 matmul) and copy bandwidth (GB/s, read
    plus written), as bench/torch_moe.py measures them."""
    a = torch.randn(8192, 8192, device=dev).bfloat16()
    b = torch.randn(8192, 8192, device=dev).bfloat16()
    ms = do_bench(lambda: a @ b, warmup=50, rep=300, return_mode="median")
    peak_tf = 2 * 8192**3 / ms / 1e9
    s = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
    d = torch.empty_like(s)
    ms = do_bench(lambda: d.copy_(s), warmup=20, rep=200, return_mode="median")
    return peak_tf, 2 * s.numel() / ms / 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="qwen3-30b-a3b,deepseek-v3,gpt-oss-120b,mixtral-8x7b")
    ap.add_argument("--tokens", default="64,4096")
    ap.add_argument("--json", default="")
    ap.add_argument("--large", default="",
                    help="comma-separated BMxBNxBKxWARPSxSTAGES block sizes to time above 32 routes per expert "
                         "(each one a row; the check runs with the default)")
    ap.add_argument("--no-check", action="store_true")
    args = ap.parse_args()
    from triton.testing import do_bench
    dev = "cuda"
    if not args.no_check:
        check(dev)
    larges = [None]
    if args.large:
        larges = []
        for c in args.large.split(","):
            bm, bn, bk, w, st = (int(v) for v in c.split("x"))
            larges.append(dict(BM=bm, BN=bn, BK=bk, GROUP_M=8, num_warps=w, num_stages=st))
    peak_tf, peak_gbs = ceilings(dev, do_bench)
    print(f"ceilings: dense bf16 {peak_tf:.0f} TFLOP/s, copy {peak_gbs:.0f} GB/s")
    rows = []
    for model in args.models.split(","):
        for T in [int(t) for t in args.tokens.split(",")]:
            p = torch_moe.make(model, T, dev)
            fl, by = torch_moe.flops_bytes(p)
            H, I, E, K = p["dims"][:4]
            for cfg in (larges if T * K // E > 32 else [None]):
                try:
                    rows += timed(p, cfg, model, T, fl, by, peak_tf, peak_gbs, do_bench)
                except Exception as err:  # a block size that does not fit (shared memory, registers)
                    print(f"{model} T={T} {cfg}: {type(err).__name__}: {str(err)[:200]}", flush=True)
            del p
            torch.cuda.empty_cache()
    out = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, triton=triton.__version__,
               peak_tflops=peak_tf, peak_gbs=peak_gbs, rows=rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


def timed(p, cfg, model, T, fl, by, peak_tf, peak_gbs, do_bench):
    """The rows of one layer with block sizes cfg (None: config's): the full pipeline and its GEMMs
    alone, as CUDA-graph replays."""
    rows = []
    pipe = Pipeline(p, cfg)
    full = graphed(pipe.forward)
    ms_full = do_bench(full, warmup=20, rep=200, return_mode="median")
    pipe.align(p["ids"])
    gemms = graphed(pipe.experts)
    ms_gemms = do_bench(gemms, warmup=20, rep=200, return_mode="median")
    floor_ms = max(fl / (peak_tf * 1e9), by / (peak_gbs * 1e6))
    for impl, ms in (("triton fused_moe", ms_full), ("triton fused_moe gemms", ms_gemms)):
        rows.append(dict(impl=impl, model=model, tokens=T, median_ms=ms, tflops=fl / ms / 1e9,
                         gbs=by / ms / 1e6, roofline_ms=floor_ms, roofline_fraction=floor_ms / ms,
                         config=pipe.cfg))
        print(f"{impl:24s} {model:16s} T={T:5d} {cfgname(pipe.cfg):14s}  {ms:8.3f} ms  {fl / ms / 1e9:6.1f} TFLOP/s  "
              f"{by / ms / 1e6:7.0f} GB/s  roofline {floor_ms:.3f} ms ({100 * floor_ms / ms:.0f}%)", flush=True)
    del pipe, full, gemms
    return rows


if __name__ == "__main__":
    sys.exit(main())
