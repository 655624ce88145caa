#!/usr/bin/env python3
"""Step-time cost of ZeRO-Offload: a 2-rank GPT at ZeRO stage 2 (CPU backend) with the device
optimizer vs offload_optimizer at several sub_group_size values, run as interleaved rounds
(none, offload A, offload B, ..., none, ...) so machine-load drift spreads over all variants.
Reports the median step time (ms) over rounds of each run's median step (first 3 steps dropped)
and the ratio to the no-offload run. On the CPU backend "device" and "host" are the same memory,
so this measures the offload pipeline's own overhead: each bucket's reduced gradient slice
copied down and added into the host shard every micro-step, the chunked host update, the
parameter uploads. --gas sets gradient_accumulation_steps (more micro-steps: more host additions).

usage: offload_cost.py [--bin build/zerotrain] [--rounds 3] [--steps 20] [--np 2] [--gas 1] [--csv out.csv]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODEL = {"type": "gpt", "vocab_size": 256, "n_ctx": 128, "n_layer": 4, "n_head": 4, "n_embd": 128}
VARIANTS = [("device optimizer", None), ("offload, sub_group 1e9", 1000000000),
            ("offload, sub_group 1e5", 100000), ("offload, sub_group 1e4", 10000)]


def config(sub_group, gas):
    z = {"stage": 2, "overlap_comm": True, "reduce_bucket_size": 500000}
    if sub_group is not None:
        z["sub_group_size"] = sub_group
        z["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    return {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": gas, "gradient_clipping": 1.0,
            "zero_optimization": z, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}


def run(args, d, name, sub_group):
    cfg = os.path.join(d, f"{name}.json")
    json.dump(config(sub_group, args.gas), open(cfg, "w"))
    metrics = os.path.join(d, f"{name}.jsonl")
    launcher = os.path.join(os.path.dirname(__file__), "..", "..", "launcher", "zt-launch")
    cmd = [sys.executable, launcher, "-n", str(args.np), "train", "--config", cfg, "--model", args.model,
           "--data", "markov:vocab=256,order=1,seed=3", "--steps", str(args.steps), "--metrics", metrics,
           "--log-every", "1000"]
    env = dict(os.environ, ZT_BIN=args.bin)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    ms = [json.loads(line)["step_ms"] for line in open(metrics)][3:]
    return statistics.median(ms)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/zerotrain")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--gas", type=int, default=1)
    ap.add_argument("--csv")
    args = ap.parse_args()
    if args.rounds < 1 or args.steps < 5 or args.np < 1 or args.gas < 1:
        sys.exit("offload_cost.py: --rounds >= 1, --steps >= 5, --np >= 1 and --gas >= 1 expected")
    with tempfile.TemporaryDirectory() as d:
        args.model = os.path.join(d, "model.json")
        json.dump(MODEL, open(args.model, "w"))
        results = {name: [] for name, _ in VARIANTS}
        for r in range(args.rounds):
            for i, (name, sub) in enumerate(VARIANTS):
                results[name].append(run(args, d, f"v{i}", sub))
    base = statistics.median(results[VARIANTS[0][0]])
    print(f"GPT V=256 T=128 L=4 H=4 C=128, {args.np} ranks, ZeRO stage 2, micro-batch 4, CPU backend; "
          f"median over {args.rounds} interleaved rounds of each run's median step")
    print(f"{'variant':<26} {'step ms':>9} {'min..max ms':>15} {'vs device optimizer':>20}")
    rows = []
    for name, _ in VARIANTS:
        m = statistics.median(results[name])
        print(f"{name:<26} {m:9.2f} {min(results[name]):7.2f}..{max(results[name]):<7.2f} {m / base:19.2f}x")
        rows.append((name, m, min(results[name]), max(results[name]), m / base))
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("variant,median_step_ms,min_ms,max_ms,ratio_vs_device\n")
            for row in rows:
                f.write("%s,%.3f,%.3f,%.3f,%.3f\n" % row)


if __name__ == "__main__":
    main()
