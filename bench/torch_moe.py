#!/usr/bin/env python3
"""PyTorch grouped-GEMM MoE forward: the peer baseline for `mokc bench`.

Pipeline (what a PyTorch user would write): sort the (token, slot) routes by
expert, gather x, torch._grouped_mm for FC1, SwiGLU (or the model's
activation), torch._grouped_mm for FC2, weighted combine with index_add_ in
fp32, plus the dense shared expert. The shape table mirrors the presets of
package schedule (sources: the models' config.json files).

Reports, per model and token count: median time over CUDA-event timings
(triton.testing.do_bench, median), TFLOP/s, GB/s (weights read once + x read +
y written) and the fraction of the measured dense-bf16 roofline.

With --backward it times a training step's layer work instead: the same
forward under autograd, then backward from a random dy (the weights' .grad
accumulating over iterations, as main grads do), after checking x.grad and
the weight gradients against float64 autograd on a small shape. FLOPs are
then 3x the forward's (the dgrad and wgrad GEMMs; autograd keeps the
activations, so nothing is recomputed).

Usage: python3 bench/torch_moe.py [--models a,b] [--tokens 4096] [--backward] [--json out.json]
"""
import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F

# name: (H, I, E, K, shared_count, I_s, activation)
MODELS = {
    "qwen3-30b-a3b": (2048, 768, 128, 8, 0, 0, "swiglu"),
    "deepseek-v3": (7168, 2048, 256, 8, 1, 2048, "swiglu"),
    "gpt-oss-120b": (2880, 2880, 128, 4, 0, 0, "gptoss"),
    "qwen3-235b-a22b": (4096, 1536, 128, 8, 0, 0, "swiglu"),
    "kimi-k2": (7168, 2048, 384, 8, 1, 2048, "swiglu"),
    "mixtral-8x7b": (4096, 14336, 8, 2, 0, 0, "swiglu"),
}


def act(h, kind, I):
    if kind == "gptoss":
        g, u = h[:, 0::2], h[:, 1::2]
        g = g.clamp(max=7.0)
        u = u.clamp(-7.0, 7.0)
        return g * torch.sigmoid(1.702 * g) * (u + 1)
    g, u = h[:, :I], h[:, I:]
    return F.silu(g) * u


def make(model, T, dev, seed=0):
    H, I, E, K, S, Is, kind = MODELS[model]
    g = torch.Generator(device=dev).manual_seed(seed)
    x = torch.randn(T, H, device=dev, generator=g).bfloat16()
    w1 = (torch.randn(E, 2 * I, H, device=dev, generator=g) / math.sqrt(H)).bfloat16()
    w2 = (torch.randn(E, H, I, device=dev, generator=g) / math.sqrt(I)).bfloat16()
    b1 = b2 = None
    if kind == "gptoss":
        b1 = (0.1 * torch.randn(E, 2 * I, device=dev, generator=g)).bfloat16()
        b2 = (0.1 * torch.randn(E, H, device=dev, generator=g)).bfloat16()
    logits = torch.randn(T, E, device=dev, generator=g)
    probs = torch.softmax(logits, dim=-1)
    w, ids = torch.topk(probs, K, dim=-1)
    w = (w / w.sum(-1, keepdim=True)).float()
    shared = None
    if S:
        sw1 = (torch.randn(2 * S * Is, H, device=dev, generator=g) / math.sqrt(H)).bfloat16()
        sw2 = (torch.randn(H, S * Is, device=dev, generator=g) / math.sqrt(S * Is)).bfloat16()
        shared = (sw1, sw2)
    return dict(x=x, w1=w1, w2=w2, b1=b1, b2=b2, ids=ids.int(), w=w, shared=shared,
                dims=(H, I, E, K, S, Is, kind))


def forward(p):
    x, w1, w2, ids, w = p["x"], p["w1"], p["w2"], p["ids"], p["w"]
    H, I, E, K, S, Is, kind = p["dims"]
    T = x.shape[0]
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=E)
    offs = torch.cumsum(counts, 0).to(torch.int32)
    tok = order // K
    xs = x.index_select(0, tok)
    h = torch._grouped_mm(xs, w1.transpose(-2, -1), offs=offs)
    if p["b1"] is not None:
        h = h + p["b1"].repeat_interleave(counts, dim=0, output_size=xs.shape[0])
    a = act(h, kind, I).bfloat16()
    o = torch._grouped_mm(a, w2.transpose(-2, -1), offs=offs)
    if p["b2"] is not None:
        o = o + p["b2"].repeat_interleave(counts, dim=0, output_size=xs.shape[0])
    wt = w.reshape(-1).index_select(0, order).unsqueeze(1)
    y = torch.zeros(T, H, device=x.device, dtype=torch.float32)
    y.index_add_(0, tok, o.float() * wt)
    if p["shared"] is not None:
        sw1, sw2 = p["shared"]
        hs = x @ sw1.t()
        y += (act(hs, "swiglu", S * Is).bfloat16() @ sw2.t()).float()
    return y.bfloat16()


def reference(p):
    """Float64 loop over experts (slow; small shapes only)."""
    x, w1, w2, ids, w = p["x"].double(), p["w1"].double(), p["w2"].double(), p["ids"], p["w"].double()
    H, I, E, K, S, Is, kind = p["dims"]
    y = torch.zeros_like(x)
    for e in range(E):
        t, k = torch.nonzero(ids == e, as_tuple=True)
        if t.numel() == 0:
            continue
        h = x[t] @ w1[e].t()
        if p["b1"] is not None:
            h = h + p["b1"][e].double()
        o = act(h, kind, I) @ w2[e].t()
        if p["b2"] is not None:
            o = o + p["b2"][e].double()
        y.index_add_(0, t, o * w[t, k].unsqueeze(1))
    if p["shared"] is not None:
        sw1, sw2 = (s.double() for s in p["shared"])
        y += act(x @ sw1.t(), "swiglu", S * Is) @ sw2.t()
    return y


def with_grads(p):
    """The parameters of p as leaves that require gradients (x, weights, biases,
    shared weights, routing weights)."""
    q = dict(p)
    for k in ("x", "w1", "w2", "b1", "b2", "w"):
        if q[k] is not None:
            q[k] = q[k].detach().clone().requires_grad_(True)
    if q["shared"] is not None:
        q["shared"] = tuple(t.detach().clone().requires_grad_(True) for t in q["shared"])
    return q


def leaves(q):
    out = [q[k] for k in ("x", "w1", "w2", "b1", "b2", "w") if q[k] is not None]
    return out + (list(q["shared"]) if q["shared"] is not None else [])


def check_backward(dev):
    """x.grad, the routing-weight and weight gradients of the pipeline against
    float64 autograd of reference() on a small gpt-oss-shaped layer."""
    small = make("gpt-oss-120b", 64, dev, seed=2)
    for k in ("w1", "w2", "b1", "b2"):
        small[k] = small[k][:8].contiguous()
    small["ids"] = small["ids"] % 8
    small["dims"] = (2880, 2880, 8, 4, 0, 0, "gptoss")
    q = with_grads(small)
    dy = torch.randn(64, 2880, device=dev).bfloat16()
    forward(q).backward(dy)
    r = {k: (v.detach().double().requires_grad_(True) if torch.is_tensor(v) and v.is_floating_point() else v)
         for k, v in small.items()}
    reference(r).backward(dy.double())
    worst = 0.0
    for k in ("x", "w1", "w2", "b1", "b2", "w"):
        got, ref = q[k].grad.double(), r[k].grad
        rel = float((got - ref).norm() / ref.norm())
        worst = max(worst, rel)
        print(f"  backward check {k}.grad: rel L2 {rel:.2e}")
        assert rel < 1e-2, (k, rel)
    return worst


def flops_bytes(p):
    H, I, E, K, S, Is, kind = p["dims"]
    T = p["x"].shape[0]
    routes = int((p["ids"] >= 0).sum())
    used = int(torch.unique(p["ids"]).numel())
    flops = 2 * routes * (2 * I * H + H * I) + 2 * T * (2 * S * Is * H + H * S * Is)
    bytes_ = 2 * used * 3 * I * H + 2 * 3 * S * Is * H + 2 * T * H * 2 + T * K * 8
    return flops, bytes_


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="qwen3-30b-a3b,deepseek-v3,gpt-oss-120b")
    ap.add_argument("--tokens", default="4096")
    ap.add_argument("--json", default="")
    ap.add_argument("--peak-tflops", type=float, default=0.0,
                    help="measured dense bf16 ceiling; measured here when 0")
    ap.add_argument("--peak-gbs", type=float, default=0.0)
    ap.add_argument("--backward", action="store_true",
                    help="time forward + backward (autograd) instead of the forward")
    args = ap.parse_args()
    from triton.testing import do_bench
    dev = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False

    # The pipeline must be right before it is timed.
    small = make("gpt-oss-120b", 64, dev, seed=1)
    small["w1"], small["w2"] = small["w1"][:8].contiguous(), small["w2"][:8].contiguous()
    small["b1"], small["b2"] = small["b1"][:8].contiguous(), small["b2"][:8].contiguous()
    small["ids"] = small["ids"] % 8
    small["dims"] = (2880, 2880, 8, 4, 0, 0, "gptoss")
    ref = reference(small)
    got = forward(small).double()
    rel = (got - ref).norm() / ref.norm()
    print(f"pipeline check (gpt-oss shape, E=8, T=64): rel L2 {rel:.2e}")
    assert rel < 1e-2, rel
    if args.backward:
        check_backward(dev)

    peak_tf, peak_gbs = args.peak_tflops, args.peak_gbs
    if peak_tf == 0:
        a = torch.randn(8192, 8192, device=dev).bfloat16()
        b = torch.randn(8192, 8192, device=dev).bfloat16()
        ms = do_bench(lambda: a @ b, warmup=50, rep=300, return_mode="median")
        peak_tf = 2 * 8192**3 / ms / 1e9
    if peak_gbs == 0:
        s = torch.empty(1 << 30, dtype=torch.uint8, device=dev)
        d = torch.empty_like(s)
        ms = do_bench(lambda: d.copy_(s), warmup=20, rep=200, return_mode="median")
        peak_gbs = 2 * s.numel() / ms / 1e6
    print(f"ceilings: dense bf16 {peak_tf:.0f} TFLOP/s, copy {peak_gbs:.0f} GB/s")

    rows = []
    for model in args.models.split(","):
        for T in [int(t) for t in args.tokens.split(",")]:
            p = make(model, T, dev)
            fl, by = flops_bytes(p)
            if args.backward:
                q = with_grads(p)
                dy = torch.randn(T, p["dims"][0], device=dev).bfloat16()
                ms = do_bench(lambda: forward(q).backward(dy), warmup=20, rep=200, return_mode="median",
                              grad_to_none=None)
                # dgrad and wgrad GEMMs; compulsory bytes add the active weights' grads read
                # and written (bf16) and dy, dx.
                H, I, E, K, S, Is, kind = p["dims"]
                used = int(torch.unique(p["ids"]).numel())
                fl, by = 3 * fl, by + 4 * (used * 3 * I * H + 3 * S * Is * H) + 2 * T * H * 2
            else:
                ms = do_bench(lambda: forward(p), warmup=50, rep=400, return_mode="median")
            tf = fl / ms / 1e9
            gbs = by / ms / 1e6
            floor_ms = max(fl / (peak_tf * 1e9), by / (peak_gbs * 1e6))
            row = dict(impl="torch._grouped_mm", model=model, tokens=T, median_ms=ms,
                       tflops=tf, gbs=gbs, roofline_ms=floor_ms, roofline_fraction=floor_ms / ms)
            row["pass"] = "forward+backward" if args.backward else "forward"
            rows.append(row)
            print(f"{model:16s} T={T:5d}  {ms:8.3f} ms  {tf:6.1f} TFLOP/s  {gbs:7.0f} GB/s  "
                  f"roofline {floor_ms:.3f} ms ({100 * floor_ms / ms:.0f}%)")
            del p
            torch.cuda.empty_cache()
    out = dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
               peak_tflops=peak_tf, peak_gbs=peak_gbs, rows=rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
