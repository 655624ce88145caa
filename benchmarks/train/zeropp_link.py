#!/usr/bin/env python3
"""ZeRO-3 across two emulated nodes over a shaped link: plain, and with ZeRO++'s hpZ, qwZ and qgZ.

Each round runs every variant back to back on tests/multinode/emulated-cluster.sh (2 nodes x 2 ranks,
each node's outgoing link limited to --rate by tc): `zerotrain train`, fp32 (--bf16: bf16 compute,
fp32 master weights), ZeRO stage 3 with every parameter released after each use and gathered again
before each unit's forward and backward (stage3_param_persistence_threshold 0,
stage3_max_reuse_distance 0: what a model too large to keep gathered does), AdamW, the same Markov
data; GPT of --layers x --embd (vocab 1024, T=64, micro-batch 4). Variants: plain; hpz
(zero_hpz_partition_size 2, one node's ranks); qwz (zero_quantized_weights); qgz
(zero_quantized_gradients); all (the three together). A run's step time is the median step_ms after
the first --skip steps; its bytes per step are the busiest node's mean eth0 tx_bytes over steps 2..
(--tx-report). Prints per round and the medians: step ms, tokens/s, MiB each node sends per step,
and each variant / plain. Needs root (network namespaces).

usage: zeropp_link.py [--bin build/zerotrain] [--rate 1gbit] [--rounds 3] [--steps 10] [--skip 3]
                      [--layers 4] [--embd 256] [--variants plain,hpz,qwz,qgz,all] [--bf16]
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
CLUSTER = os.path.join(REPO, "tests", "multinode", "emulated-cluster.sh")
T, BATCH, RANKS = 64, 4, 4
# What each variant adds to zero_optimization.
VARIANTS = {"plain": {}, "hpz": {"zero_hpz_partition_size": 2}, "qwz": {"zero_quantized_weights": True},
            "qgz": {"zero_quantized_gradients": True},
            "all": {"zero_hpz_partition_size": 2, "zero_quantized_weights": True, "zero_quantized_gradients": True}}


def run(args, d, variant, rnd):
    name = "%s%d" % (variant, rnd)
    cfg = os.path.join(d, name + ".json")
    zero = {"stage": 3, "stage3_param_persistence_threshold": 0, "stage3_max_reuse_distance": 0}
    zero.update(VARIANTS[variant])
    ds = {"train_micro_batch_size_per_gpu": BATCH, "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
          "zero_optimization": zero, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}
    if args.bf16:
        ds["bf16"] = {"enabled": True}
    with open(cfg, "w") as f:
        json.dump(ds, f)
    model = os.path.join(d, "model.json")
    metrics, tx = os.path.join(d, name + ".jsonl"), os.path.join(d, name + ".tx.jsonl")
    cmd = ["bash", CLUSTER, "--rate", args.rate, "--tx-report", tx, "--", "-q", "train", "--config", cfg, "--model",
           model, "--data", "markov:vocab=1024,order=1,seed=3", "--steps", str(args.steps), "--device", "cpu",
           "--metrics", metrics, "--log-every", "1000"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, ZT_BIN=os.path.abspath(args.bin)))
    if p.returncode != 0:
        sys.exit("%s failed (%d):\n%s\n%s" % (" ".join(cmd), p.returncode, p.stdout, p.stderr))
    with open(metrics) as f:
        ms = statistics.median([json.loads(line)["step_ms"] for line in f][args.skip:])
    with open(tx) as f:
        rows = [json.loads(line) for line in f][1:]
    sent = max(statistics.mean(r["tx_bytes"][n] for r in rows) for n in rows[0]["tx_bytes"])
    return ms, sent


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/zerotrain")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--skip", type=int, default=3)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--embd", type=int, default=256)
    ap.add_argument("--variants", default="plain,hpz,qwz,qgz,all")
    ap.add_argument("--bf16", action="store_true", help="bf16 compute (the gathers and reductions in bf16)")
    args = ap.parse_args()
    variants = args.variants.split(",")
    for v in variants:
        if v not in VARIANTS:
            sys.exit("--variants: unknown variant %r (expected some of %s)" % (v, ", ".join(VARIANTS)))
    if variants[0] != "plain":
        variants.insert(0, "plain")
    tokens = RANKS * BATCH * T
    res = {v: [] for v in variants}
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "model.json"), "w") as f:
            json.dump({"type": "gpt", "vocab_size": 1024, "n_ctx": T, "n_layer": args.layers, "n_head": 4,
                       "n_embd": args.embd}, f)
        print("rate %s, 2 nodes x 2 ranks, ZeRO-3 %s, GPT %d x %d; %d tokens per step"
              % (args.rate, "bf16" if args.bf16 else "fp32", args.layers, args.embd, tokens))
        for rnd in range(args.rounds):
            for v in variants:
                res[v].append(run(args, d, v, rnd))
            pm, pb = res["plain"][-1]
            print("round %d: " % (rnd + 1) + "; ".join(
                "%s %.1f ms %.2f MiB/node/step (throughput x%.3f, bytes x%.3f)"
                % (v, res[v][-1][0], res[v][-1][1] / 2**20, pm / res[v][-1][0], res[v][-1][1] / pb) for v in variants),
                flush=True)
    med = {v: (statistics.median(m for m, _ in res[v]), statistics.median(b for _, b in res[v])) for v in variants}
    for v in variants:
        per_round = [p[0] / q[0] for p, q in zip(res["plain"], res[v])]
        print("%-8s median step %.1f ms, %.0f tokens/s, %.2f MiB per node per step; vs plain: throughput x%.3f "
              "(rounds %s), bytes per node x%.3f"
              % (v, med[v][0], tokens / med[v][0] * 1000, med[v][1] / 2**20, med["plain"][0] / med[v][0],
                 ", ".join("%.2f" % x for x in per_round), med[v][1] / med["plain"][1]))


if __name__ == "__main__":
    main()
