#!/usr/bin/env python3
"""torch.optim.AdamW on the CPU, the baseline for zt_host_optim_bench (bench_host_optim.cpp).

Same problem: one flat fp32 parameter of --params elements with an fp32 gradient, AdamW
(lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0.01), torch.set_num_threads(--threads).
--mode foreach (foreach=True), forloop (foreach=False) or fused (fused=True; exits 3 when this
torch has no fused CPU AdamW). Times optimizer.step() only; prints one key=value line with
units in the key names (28 B/element of state traffic, as the C++ side counts it).

    /usr/bin/python3 benchmarks/bench_host_optim_torch.py --params 16M --threads 1 --mode foreach
"""
import argparse
import statistics
import sys
import time

import torch


def count(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(s[:-1]) * mult[s[-1].upper()]) if s[-1].upper() in mult else int(s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", default="16M")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--mode", choices=["foreach", "forloop", "fused"], default="foreach")
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    n = count(args.params)
    torch.set_num_threads(args.threads)
    p = torch.nn.Parameter(torch.rand(n, dtype=torch.float32) - 0.5)
    p.grad = torch.rand(n, dtype=torch.float32) * 2 - 1
    kw = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}
    try:
        if args.mode == "fused":
            opt = torch.optim.AdamW([p], fused=True, **kw)
            opt.step()
        else:
            opt = torch.optim.AdamW([p], foreach=(args.mode == "foreach"), **kw)
    except (TypeError, RuntimeError) as e:
        print(f"fused AdamW unavailable in torch {torch.__version__} on CPU: {e}", file=sys.stderr)
        sys.exit(3)
    ms = []
    with torch.no_grad():
        for i in range(args.warmup + args.iters):
            t0 = time.perf_counter()
            opt.step()
            if i >= args.warmup:
                ms.append((time.perf_counter() - t0) * 1e3)
    med = statistics.median(ms)
    print(f"impl=torch-{args.mode} params={n} threads={args.threads} adam_ms_per_step={med:.3f} "
          f"adam_GB_per_s={28.0 * n / (med * 1e6):.2f} torch_version={torch.__version__}")


if __name__ == "__main__":
    main()
