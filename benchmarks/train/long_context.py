#!/usr/bin/env python3
"""Long-context sweep: `zerotrain train` on one rank, micro-batch 1, a small GPT
(V=256, C=64, L=2, H=2) at n_ctx 512 ... 8192, tiled attention with recompute none / block and
the materialised attention (recompute none) up to --max-materialised. Runs go in interleaved
rounds (every variant once per round) so machine-load drift spreads over all of them; each run
takes --steps × 8192/T steps (at least --steps), so every run trains about as many tokens.
Per variant: tokens/s (median over rounds of each run's median step after the first, min..max
over rounds), activations peak + workspace from --memory-report (MiB), the peak of everything
the tracker counted (MiB), and the first and last losses.

Threads: --threads (default 1) OpenMP and OpenBLAS threads per run; one thread is far steadier
than two on a loaded 2-core VM.

usage: long_context.py [--bin build/zerotrain] [--rounds 3] [--steps 4] [--threads 1]
                       [--max-materialised 8192] [--csv out.csv]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

TS = (512, 1024, 2048, 4096, 8192)
VARIANTS = (("tiled", "none"), ("tiled", "block"), ("materialised", "none"))
CONFIG = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
          "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.0}},
          "zero_optimization": {"stage": 0}}
MIB = 1 << 20


def run(args, d, T, attention, recompute):
    model = os.path.join(d, "model.json")
    with open(model, "w") as f:
        json.dump({"type": "gpt", "vocab_size": 256, "n_ctx": T, "n_layer": 2, "n_head": 2, "n_embd": 64,
                   "attention": attention}, f)
    cfg, rep, met = (os.path.join(d, n) for n in ("ds.json", "rep.json", "met.jsonl"))
    with open(cfg, "w") as f:
        json.dump(CONFIG, f)
    steps = max(args.steps, args.steps * 8192 // T)
    cmd = [args.bin, "train", "--config", cfg, "--model", model, "--device", "cpu", "--data",
           "markov:vocab=256,order=1,seed=3", "--steps", str(steps), "--recompute", recompute,
           "--memory-report", rep, "--metrics", met, "--log-every", "1000"]
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads), OPENBLAS_NUM_THREADS=str(args.threads))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    steps = [json.loads(line) for line in open(met)]
    cats = json.load(open(rep))["ranks"][0]["categories"]
    act_ws = cats["activations"]["peak_bytes"] + cats["workspace"]["measured_bytes"]
    losses = [s["loss"] for s in steps]
    if not all(math.isfinite(x) for x in losses):
        sys.exit(f"T={T} {attention} recompute {recompute}: non-finite loss {losses}")
    return {"T": T, "attention": attention, "recompute": recompute,
            "tokens_per_s": statistics.median(s["tokens_per_s"] for s in steps[1:]),
            "act_ws_mib": act_ws / MIB, "peak_mib": max(s["mem_peak_bytes"] for s in steps) / MIB,
            "loss_first": losses[0], "loss_last": losses[-1]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/zerotrain")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-materialised", type=int, default=8192, help="largest T for the materialised attention")
    ap.add_argument("--csv")
    args = ap.parse_args()
    if args.steps < 2 or args.rounds < 1 or args.threads < 1:
        sys.exit("long_context.py: --steps >= 2 (the first step is not timed), --rounds >= 1, --threads >= 1 expected")
    keys = [(T, a, r) for T in TS for a, r in VARIANTS if a != "materialised" or T <= args.max_materialised]
    runs = {k: [] for k in keys}
    with tempfile.TemporaryDirectory() as d:
        for rnd in range(args.rounds):
            for k in keys:
                runs[k].append(run(args, d, *k))
                r = runs[k][-1]
                print(f"round {rnd + 1} T={k[0]:5d} {k[1]:>12} recompute {k[2]:<5} {r['tokens_per_s']:8.0f} tok/s "
                      f"act+ws {r['act_ws_mib']:8.2f} MiB  peak {r['peak_mib']:8.2f} MiB  "
                      f"loss {r['loss_first']:.4f} -> {r['loss_last']:.4f}", file=sys.stderr, flush=True)
    print("| T (tokens) | attention | recompute | tokens/s (median, min..max) | activations + workspace (MiB) "
          "| peak tracked (MiB) | loss first -> last (nats) |")
    print("|---|---|---|---|---|---|---|")
    rows = []
    for k in keys:
        tps = [r["tokens_per_s"] for r in runs[k]]
        r0 = runs[k][0]
        rows.append((k[0], k[1], k[2], statistics.median(tps), min(tps), max(tps), r0["act_ws_mib"], r0["peak_mib"],
                     r0["loss_first"], r0["loss_last"]))
        print("| %d | %s | %s | %.0f (%.0f..%.0f) | %.2f | %.2f | %.4f -> %.4f |" % rows[-1])
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("T,attention,recompute,tokens_per_s_median,tokens_per_s_min,tokens_per_s_max,act_ws_mib,"
                    "peak_mib,loss_first,loss_last\n")
            for row in rows:
                f.write("%d,%s,%s,%.1f,%.1f,%.1f,%.3f,%.3f,%.5f,%.5f\n" % row)


if __name__ == "__main__":
    main()
