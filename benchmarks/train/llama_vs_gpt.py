#!/usr/bin/env python3
"""Tokens/s of the bundled ~15M Llama against a GPT of the same parameter count and context.

Both models train with `zerotrain train` through zt-launch on the CPU backend, fp32, ZeRO stage 1,
AdamW, micro-batch --batch, the thread pools as a user gets them (zerotrain sizes them), on the
same Markov data. Llama: configs/models/llama-15m.json (V=4096, C=288, L=16, 6 query / 2 key-value
heads, SwiGLU I=768, tied head, T=256). GPT: V=4096, C=288, L=14, H=6, T=256, tied head (the
closest GPT-2 shape with as many parameters). Every round runs both back to back, so machine-load
drift spreads over both; a run's time is the median of step_ms (--metrics) after the first --skip
steps. Prints per round and the medians: step ms, tokens/s, and Llama / GPT tokens/s.

usage: llama_vs_gpt.py [--bin build/zerotrain] [--rounds 5] [--steps 16] [--skip 4] [--batch 4] [--ranks 1]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.normpath(os.path.join(HERE, "..", ".."))
GPT = {"type": "gpt", "name": "gpt-15m", "vocab_size": 4096, "n_ctx": 256, "n_layer": 14, "n_head": 6, "n_embd": 288}
CONTEXT = 256


def run(args, d, name, model):
    cfg = os.path.join(d, "ds.json")
    with open(cfg, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": args.batch, "gradient_accumulation_steps": 1,
                   "gradient_clipping": 1.0, "zero_optimization": {"stage": 1},
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}, f)
    metrics = os.path.join(d, name + ".jsonl")
    cmd = [sys.executable, os.path.join(REPO, "launcher", "zt-launch"), "-n", str(args.ranks), "train", "--config", cfg,
           "--model", model, "--data", "markov:vocab=1024,order=1,seed=3", "--steps", str(args.steps), "--metrics",
           metrics, "--log-every", "1000"]
    env = dict(os.environ, ZT_BIN=args.bin)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.pop(k, None)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    with open(metrics) as f:
        ms = statistics.median([json.loads(line)["step_ms"] for line in f][args.skip:])
    return ms, args.ranks * args.batch * CONTEXT / ms * 1000


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/zerotrain")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--skip", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--ranks", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        gpt = os.path.join(d, "gpt-15m.json")
        with open(gpt, "w") as f:
            json.dump(GPT, f)
        models = [("llama", os.path.join(REPO, "configs", "models", "llama-15m.json")), ("gpt", gpt)]
        with open("/proc/loadavg") as f:
            print("load average before:", f.read().split()[0])
        ratios, results = [], {name: [] for name, _ in models}
        for r in range(args.rounds):
            row = {name: run(args, d, name, m) for name, m in models}
            for name in row:
                results[name].append(row[name])
            ratios.append(row["llama"][1] / row["gpt"][1])
            print("round %d: llama %.1f ms (%.0f tokens/s), gpt %.1f ms (%.0f tokens/s), llama/gpt %.3f" % (
                r + 1, *row["llama"], *row["gpt"], ratios[-1]), flush=True)
        with open("/proc/loadavg") as f:
            print("load average after:", f.read().split()[0])
        for name, _ in models:
            print("%-5s median step %.1f ms, %.0f tokens/s" % (name, statistics.median(x[0] for x in results[name]),
                                                              statistics.median(x[1] for x in results[name])))
        print("llama / gpt tokens/s: median %.3f over %d rounds" % (statistics.median(ratios), args.rounds))


if __name__ == "__main__":
    main()
