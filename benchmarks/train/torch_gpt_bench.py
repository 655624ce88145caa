#!/usr/bin/env python3
"""torch_gpt_bench.py — the PyTorch side of benchmarks/train/bench_train.cpp.

Same GPT-2 architecture as zerotrain's (include/zerotrain/model/gpt.h): tied wte, learned wpe,
pre-norm blocks (LayerNorm eps 1e-5, c_attn [C,3C] + bias, causal softmax attention scaled by
1/sqrt(C/H), c_proj, MLP C->4C->C with tanh-GELU), final LayerNorm, logits = x·wteᵀ, mean
cross-entropy. fp32 on the CPU, eager mode, AdamW (lr 1e-3, betas 0.9/0.95, eps 1e-8, wd 0.1).
One timed step = zero_grad(set_to_none) + forward + backward [+ clip_grad_norm_ with --clip] +
optimizer.step(), each phase timed with time.perf_counter after the previous one returns (CPU ops
are synchronous). Prints and appends the same CSV columns as zt_train_bench.

--dist ddp|zero: one rank of a data-parallel run over gloo (RANK, WORLD_SIZE, MASTER_ADDR,
MASTER_PORT from the environment, as torchrun sets them): the model wrapped in
DistributedDataParallel (gradients all-reduced during backward), optimizer AdamW (ddp) or
ZeroRedundancyOptimizer(AdamW) (zero: optimizer state sharded, parameters broadcast after the
step: the counterpart of ZeRO stage 1). Each rank runs its own micro-batch B; rank 0 prints and
writes the row, whose tokens count all ranks (WORLD_SIZE·B·T per step).

PyTorch is NOT a zerotrain dependency. Install it only to run this comparison, e.g. on Debian 12:
    apt-get install python3-torch
"""
import argparse
import math
import os
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.H = H
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def attn(self, x, mask):
        B, T, C = x.shape
        hs = C // self.H
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.H, hs).transpose(1, 2)  # [B,H,T,hs]
        k = k.view(B, T, self.H, hs).transpose(1, 2)
        v = v.view(B, T, self.H, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        att = att.masked_fill(mask[:T, :T], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)

    def forward(self, x, mask):
        x = x + self.attn(self.ln_1(x), mask)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, V, T, L, H, C):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList([Block(C, H) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)
        # mask[t, t2] is True above the diagonal (future positions). A plain attribute, not a
        # buffer: DDP broadcasts buffers, and gloo in PyTorch 1.13 cannot broadcast bool tensors.
        self.mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for blk in self.h:
            x = blk(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied head [B,T,V]
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--foreach", action="store_true", help="AdamW(foreach=True) (multi-tensor path)")
    ap.add_argument("--clip", type=float, default=0.0, help="clip_grad_norm_ to this norm (0: no clipping)")
    ap.add_argument("--dist", choices=["none", "ddp", "zero"], default="none",
                    help="one rank of DDP / ZeroRedundancyOptimizer over gloo (env RANK, WORLD_SIZE, MASTER_*)")
    ap.add_argument("--label", default="", help="impl column (default: pytorch-<version>[-ddp|-zero])")
    ap.add_argument("--csv", default="")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    rank, world = 0, 1
    model = GPT(a.vocab, a.seq, a.n_layer, a.n_head, a.n_embd)
    nparams = sum(p.numel() for p in model.parameters())
    hp = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    if a.dist == "none":
        opt = torch.optim.AdamW(model.parameters(), foreach=a.foreach, **hp)
    else:
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        dist.init_process_group("gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
        model = DistributedDataParallel(model)
        if a.dist == "ddp":
            opt = torch.optim.AdamW(model.parameters(), foreach=a.foreach, **hp)
        else:
            from torch.distributed.optim import ZeroRedundancyOptimizer
            opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, **hp)
    g = torch.Generator().manual_seed(42 + rank)
    idx = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
    tgt = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)

    rows, losses = [], []
    for k in range(a.warmup + a.steps):
        c0 = time.process_time()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(idx, tgt)
        t1 = time.perf_counter()
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        t2 = time.perf_counter()
        opt.step()
        t3 = time.perf_counter()
        c1 = time.process_time()
        losses.append(loss.item())
        if k >= a.warmup:
            rows.append(((t1 - t0) * 1e3, (t2 - t1) * 1e3, (t3 - t2) * 1e3, (t3 - t0) * 1e3, (c1 - c0) * 1e3))

    if rank != 0:
        return
    tot = [r[3] for r in rows]
    med, mean, mn = statistics.median(tot), statistics.fmean(tot), min(tot)
    fwd, bwd, optm, cpu = (statistics.median(r[i] for r in rows) for i in (0, 1, 2, 4))
    tokens = world * a.batch * a.seq
    tok_s = tokens / (med / 1e3)
    # PaLM convention: T * (6N + 12 L C T) per sequence, N counts wte once.
    gflop = tokens * (6 * nparams + 12 * a.n_layer * a.n_embd * a.seq) / 1e9
    impl = a.label or ("pytorch-" + torch.__version__.split("+")[0] + ("-foreach" if a.foreach else "") +
                       ("" if a.dist == "none" else "-" + a.dist))
    print("PyTorch %s single-process GPT training throughput (CPU, fp32, AdamW%s)" %
          (torch.__version__, ", foreach" if a.foreach else ""))
    print("  model: V=%d T=%d L=%d H=%d C=%d, %d params; batch B=%d (%d tokens/step)" %
          (a.vocab, a.seq, a.n_layer, a.n_head, a.n_embd, nparams, a.batch, tokens))
    print("  threads: torch.get_num_threads() = %d; warm-up %d, timed %d steps; ranks %d (%s, gloo); clip %g" %
          (torch.get_num_threads(), a.warmup, a.steps, world, a.dist, a.clip))
    print("  loss first %.4f, last %.4f (ln V = %.4f)" % (losses[0], losses[-1], math.log(a.vocab)))
    print("%-10s %7s %10s %10s %10s %9s %9s %9s %12s %9s %10s %14s" %
          ("impl", "threads", "step_ms", "mean_ms", "min_ms", "fwd_ms", "bwd_ms", "opt_ms", "tokens_per_s", "GFLOP/s",
           "cpu_ms", "tokens_per_cpu_s"))
    print("%-10s %7d %10.2f %10.2f %10.2f %9.2f %9.2f %9.2f %12.0f %9.2f %10.2f %14.0f" %
          ("pytorch", a.threads, med, mean, mn, fwd, bwd, optm, tok_s, gflop / (med / 1e3), cpu, a.batch * a.seq / (cpu / 1e3)))
    if a.csv:
        fresh = not os.path.exists(a.csv)
        with open(a.csv, "a") as f:
            if fresh:
                f.write("impl,vocab,seq,n_layer,n_head,n_embd,params,batch,threads,warmup,steps,step_ms_median,"
                        "step_ms_mean,step_ms_min,fwd_ms,bwd_ms,opt_ms,tokens_per_s,gflops,cpu_ms,tokens_per_cpu_s\n")
            f.write("%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.1f,%.3f,%.3f,%.1f\n" %
                    (impl, a.vocab, a.seq, a.n_layer, a.n_head, a.n_embd, nparams, a.batch, a.threads, a.warmup,
                     a.steps, med, mean, mn, fwd, bwd, optm, tok_s, gflop / (med / 1e3), cpu, a.batch * a.seq / (cpu / 1e3)))


if __name__ == "__main__":
    try:
        main()
    finally:
        # An initialised gloo group left to the interpreter's exit can abort the process
        # ("terminate called without an active exception") after the results are written.
        import torch.distributed as dist
        if dist.is_available() and dist.is_initialized():
            dist.barrier()
            dist.destroy_process_group()
