#!/usr/bin/env python3
"""ZeRO-3 across two emulated nodes over a shaped link, with and without zero_quantized_weights.

Each round runs both configurations back to back on tests/multinode/emulated-cluster.sh (2 nodes x 2
ranks, each node's outgoing link limited to --rate by tc): `zerotrain train`, fp32, ZeRO stage 3 with
every parameter gathered before each unit's forward and backward (stage3_param_persistence_threshold
0), AdamW, the same Markov data; GPT of --layers x --embd (vocab 1024, T=64, micro-batch 4). A run's
step time is the median step_ms after the first --skip steps; its bytes per step are the busiest
node's mean eth0 tx_bytes over steps 2.. (--tx-report). Prints per round and the medians: step ms,
tokens/s, MiB each node sends per step, and quantised / plain. Needs root (network namespaces).

usage: zeropp_link.py [--bin build/zerotrain] [--rate 1gbit] [--rounds 3] [--steps 10] [--skip 3]
                      [--layers 4] [--embd 256]
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


def run(args, d, quantized, rnd):
    name = "%s%d" % ("q" if quantized else "p", rnd)
    cfg = os.path.join(d, name + ".json")
    with open(cfg, "w") as f:
        json.dump({"train_micro_batch_size_per_gpu": BATCH, "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
                   "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0,
                                         "zero_quantized_weights": quantized},
                   "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}, f)
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
    args = ap.parse_args()
    tokens = RANKS * BATCH * T
    res = {False: [], True: []}
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "model.json"), "w") as f:
            json.dump({"type": "gpt", "vocab_size": 1024, "n_ctx": T, "n_layer": args.layers, "n_head": 4,
                       "n_embd": args.embd}, f)
        print("rate %s, 2 nodes x 2 ranks, ZeRO-3 fp32, GPT %d x %d; %d tokens per step" % (args.rate, args.layers,
                                                                                           args.embd, tokens))
        for rnd in range(args.rounds):
            for q in (False, True):
                res[q].append(run(args, d, q, rnd))
            (pm, pb), (qm, qb) = res[False][-1], res[True][-1]
            print("round %d: plain %.1f ms %.2f MiB/node/step, quantised %.1f ms %.2f MiB/node/step: "
                  "throughput x%.3f, bytes x%.3f" % (rnd + 1, pm, pb / 2**20, qm, qb / 2**20, pm / qm, qb / pb),
                  flush=True)
    med = {q: (statistics.median(m for m, _ in res[q]), statistics.median(b for _, b in res[q])) for q in res}
    for q, label in ((False, "plain    "), (True, "quantised")):
        print("%s median step %.1f ms, %.0f tokens/s, %.2f MiB per node per step"
              % (label, med[q][0], tokens / med[q][0] * 1000, med[q][1] / 2**20))
    print("quantised / plain: throughput x%.3f, bytes per node x%.3f (median of rounds: x%.3f)"
          % (med[False][0] / med[True][0], med[True][1] / med[False][1],
             statistics.median(p[0] / q[0] for p, q in zip(res[False], res[True]))))


if __name__ == "__main__":
    main()
