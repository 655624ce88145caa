#!/usr/bin/env python3
"""torch_gpt2.py — the step device-check.sh's gpt2-bf16 times, in plain PyTorch, for side-by-side
numbers: GPT-2 124M (tied embeddings, pre-LN, GELU-tanh), B x T=1024, bf16 autocast over fp32
weights, fused AdamW, one GPU, eager mode (no torch.compile: a cold compile does not fit the
device check's budget). Prints tokens/s and MFU with zerotrain's formula
(6N + 12*L*C*T FLOPs per token, N all parameters with wte counted once; 989 TFLOP/s dense bf16
on H100/H200) and a final "NOTE: " line for the summary table."""
import argparse
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.ln1, self.ln2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.qkv, self.proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.fc, self.out = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (y.view(b, t, self.h, c // self.h).transpose(1, 2) for y in (q, k, v))
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(a)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, vocab=50257, ctx=1024, layers=12, heads=12, c=768):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(ctx, c)
        self.blocks = nn.ModuleList(Block(c, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(c)
        self.lm_head = nn.Linear(c, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # tied
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    a = ap.parse_args()
    torch.manual_seed(1)
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False  # like zerotrain's cuBLAS calls
    model = GPT().to(dev)
    n_params = sum(p.numel() for p in model.parameters())  # tied weight counted once
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, fused=True)
    vocab = 256  # the token range zerotrain's markov:vocab=256 data uses; the model keeps 50257 outputs
    x = torch.randint(0, vocab, (a.batch, a.seq + 1), device=dev)
    inp, tgt = x[:, :-1].contiguous(), x[:, 1:].contiguous()
    flops_per_token = 6.0 * n_params + 12.0 * 12 * 768 * a.seq
    name = torch.cuda.get_device_name()
    peak = 989e12 if ("H100" in name or "H200" in name) else (312e12 if "A100" in name else 0)
    times, losses = [], []
    for _ in range(a.steps):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(inp, tgt)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())  # synchronises
        times.append(time.perf_counter() - t0)
    tail = times[5:] or times
    sec = statistics.median(tail)
    tok = a.batch * a.seq / sec
    mfu = tok * flops_per_token / peak if peak else float("nan")
    print(f"torch {torch.__version__} on {name}: GPT-2 {n_params / 1e6:.1f}M params, B={a.batch} T={a.seq} bf16 autocast")
    print(f"torch gpt2-124m: {tok:.0f} tok/s, {sec * 1e3:.1f} ms/step, MFU {100 * mfu:.1f}% "
          f"(median of steps 6-{a.steps}), loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
          f"peak mem {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
    print(f"NOTE: {tok:.0f} tok/s, MFU {100 * mfu:.1f}%, {sec * 1e3:.0f} ms/step (PyTorch eager, same shapes)")
    return 0 if all(map(math.isfinite, losses)) else 1


if __name__ == "__main__":
    raise SystemExit(main())
