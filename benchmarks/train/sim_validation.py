#!/usr/bin/env python3
"""sim_validation.py — `zerotrain simulate` against measured runs on this machine.

For each world size N in --ranks, this machine is first measured as a hardware profile
(`mpirun -np N zerotrain simulate --calibrate`, at the model's shapes). Then every point of the grid
— stage x overlap_comm x reduce/allgather bucket size x gradient accumulation, at a fixed
micro-batch — is predicted with that profile (`simulate --json`) and measured (`train` with
`wall_clock_breakdown`: rank 0's step_ms, the median over the steps after --skip, and the exposed
communication below; then the median over --repeats runs; all runs of all points in a seeded
shuffled order so load drifts spread over every point).

Measured exposed communication: the simulated ranks are identical, measured ones drift apart, and
a rank that reaches a collective first also waits there for the last one. That wait is rank skew,
not communication. wall_clock_breakdown's summary line "all ranks: exposed X ms the
communication's own" takes, at each of a step's waits on communication, the least over the ranks
(the last rank to arrive waited for the collective alone), summed: `meas_exposed_ms`, what the
simulator predicts (one rank: its own median). The CSV also keeps the least of the ranks' median
totals (`least_rank_exposed_ms`) and rank 0's (`rank0_exposed_ms`), both with the skew in them.

Reported: per point predicted vs measured step time and exposed communication; per world size
and overall, the median of |predicted - measured| / measured step time, Spearman's rank
correlation of predicted vs measured step time, the share of points whose exposed communication
is within 25% or 2 ms and the median |predicted - measured| exposed time; the machine's load
average before and after. Writes --out-dir/validation.csv and
validation.md. Not a test (nothing asserted) unless --check gives bounds, as the CI smoke run does.
"""
import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from overlap_sweep import launch_argv  # noqa: E402  (the sweep's launch: threads per rank, binding)


def config(p, micro, persist):
    z = {"stage": p["stage"], "overlap_comm": bool(p["overlap"]), "reduce_bucket_size": p["bucket"],
         "allgather_bucket_size": p["bucket"]}
    if p["stage"] == 3:
        z.update({"stage3_param_persistence_threshold": persist, "stage3_prefetch_bucket_size": p["bucket"]})
    return {"train_micro_batch_size_per_gpu": micro, "gradient_accumulation_steps": p["gas"],
            "wall_clock_breakdown": True, "zero_optimization": z,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "weight_decay": 0.1}}}


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f)
    return path


def run(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("command failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stdout[-3000:]))
    return r.stdout


def calibrate(a, tmp, n):
    out = os.path.join(tmp, "local_%d.json" % n)
    cfg = write_json(os.path.join(tmp, "cal_%d.json" % n), config({"stage": 1, "overlap": 1, "bucket": a.buckets[0],
                                                                  "gas": 1}, a.micro, a.s3_persist))
    print(run(launch_argv(n) + [a.zerotrain, "simulate", "--calibrate", "--config", cfg, "--model", a.model,
                                "--out", out]).strip().splitlines()[0])
    return out


def predict(a, tmp, p, profile):
    cfg = write_json(os.path.join(tmp, "p.json"), config(p, a.micro, a.s3_persist))
    js = os.path.join(tmp, "sim.json")
    run([a.zerotrain, "simulate", "--config", cfg, "--model", a.model, "--world-size", str(p["ranks"]),
         "--hardware", profile, "--json", js])
    with open(js) as f:
        j = json.load(f)
    return j["step_ms"], j["comm_exposed_ms"]


# wall_clock_breakdown's closing summary: one line per rank with its median exposed communication.
RANK_EXPOSED = re.compile(r"^\s*rank (\d+): .* exposed ([0-9.]+) ms", re.M)


# ... and, with several ranks, the communication's own exposed time (each wait's least over ranks).
OWN_EXPOSED = re.compile(r"^\s*all ranks: exposed ([0-9.]+) ms the communication's own", re.M)


def measure(a, tmp, p, rep):
    """(rank 0's step ms, the communication's own exposed ms, the least of the ranks' median exposed
    ms, rank 0's median exposed ms) over the steps after --skip (wall_clock_breakdown's summary
    leaves out only the first step)."""
    tag = "r%d_s%d_o%d_b%d_g%d_%d" % (p["ranks"], p["stage"], p["overlap"], p["bucket"], p["gas"], rep)
    cfg = write_json(os.path.join(tmp, tag + ".json"), config(p, a.micro, a.s3_persist))
    metrics = os.path.join(tmp, tag + ".jsonl")
    out = run(launch_argv(p["ranks"]) + [a.zerotrain, "train", "--config", cfg, "--model", a.model, "--data", a.data,
                                         "--steps", str(a.steps), "--metrics", metrics, "--log-every", str(a.steps)])
    steps = [json.loads(line) for line in open(metrics) if line.strip()][a.skip:]
    per_rank = [float(m.group(2)) for m in RANK_EXPOSED.finditer(out)]
    own = [float(m.group(1)) for m in OWN_EXPOSED.finditer(out)]
    if len(per_rank) != p["ranks"] or len(own) != (1 if p["ranks"] > 1 else 0):
        sys.exit("expected %d per-rank breakdown lines from train and the ranks' own line, got %d and %d:\n%s"
                 % (p["ranks"], len(per_rank), len(own), out[-2000:]))
    rank0 = statistics.median(s["comm_exposed_ms"] for s in steps)
    return statistics.median(s["step_ms"] for s in steps), own[0] if own else rank0, min(per_rank), rank0


def spearman(x, y):
    def ranks(v):
        order = sorted(range(len(v)), key=lambda i: v[i])
        r = [0.0] * len(v)
        for k, i in enumerate(order):
            r[i] = float(k)
        return r
    rx, ry = ranks(x), ranks(y)
    n = len(x)
    return 1.0 if n < 2 else 1 - 6 * sum((a - b) ** 2 for a, b in zip(rx, ry)) / (n * (n * n - 1))


def within(pred, meas):
    """The exposed-communication bound: within 25% of the measurement or 2 ms of it."""
    return int(abs(pred - meas) <= max(2.0, 0.25 * meas))


def summarize(points):
    """(median |error| of the step as a fraction, Spearman of predicted vs measured step, share of
    points whose exposed communication is within 25% or 2 ms, median |exposed error| in ms, the
    share within bounds of the least-waiting rank's total instead)."""
    err = statistics.median(abs(p["err_pct"]) for p in points) / 100
    rho = spearman([p["pred_ms"] for p in points], [p["meas_ms"] for p in points])
    ok = sum(p["exposed_ok"] for p in points) / len(points)
    exposed = statistics.median(abs(p["pred_exposed_ms"] - p["meas_exposed_ms"]) for p in points)
    least_rank_ok = sum(p["least_rank_ok"] for p in points) / len(points)
    return err, rho, ok, exposed, least_rank_ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zerotrain", default="build/zerotrain")
    ap.add_argument("--model", default=os.path.join(os.path.dirname(__file__), "gpt-sweep.json"))
    ap.add_argument("--data", default="markov:vocab=64,order=1,seed=1")
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--stages", default="0,1,2,3")
    ap.add_argument("--overlap", default="0,1")
    ap.add_argument("--buckets", default="50000,500000000", help="elements; pick sizes that give different plans")
    ap.add_argument("--gas", default="1,2")
    ap.add_argument("--micro", type=int, default=16)
    ap.add_argument("--s3-persist", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--skip", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out-dir", default="sim_validation")
    ap.add_argument("--check", default="", help="bounds to assert: MEDIAN_ERR,MIN_SPEARMAN (e.g. 0.5,0.3)")
    a = ap.parse_args()
    a.buckets = [int(b) for b in a.buckets.split(",")]
    ints = lambda s: [int(x) for x in s.split(",")]  # noqa: E731
    os.makedirs(a.out_dir, exist_ok=True)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        profiles = {n: calibrate(a, tmp, n) for n in ints(a.ranks)}
        points = [{"ranks": n, "stage": s, "overlap": o, "bucket": b, "gas": g} for n in ints(a.ranks)
                  for s in ints(a.stages) for o in ints(a.overlap) for b in a.buckets for g in ints(a.gas)]
        for p in points:
            p["pred_ms"], p["pred_exposed_ms"] = predict(a, tmp, p, profiles[p["ranks"]])
        runs = [(i, rep) for i in range(len(points)) for rep in range(a.repeats)]
        random.Random(a.seed).shuffle(runs)
        measured = {}
        for i, rep in runs:
            measured.setdefault(i, []).append(measure(a, tmp, points[i], rep))
    for i, p in enumerate(points):
        p["meas_ms"] = round(statistics.median(m[0] for m in measured[i]), 3)
        p["meas_exposed_ms"] = round(statistics.median(m[1] for m in measured[i]), 3)
        p["least_rank_exposed_ms"] = round(statistics.median(m[2] for m in measured[i]), 3)
        p["rank0_exposed_ms"] = round(statistics.median(m[3] for m in measured[i]), 3)
        p["err_pct"] = round(100 * (p["pred_ms"] - p["meas_ms"]) / p["meas_ms"], 1)
        p["exposed_ok"] = within(p["pred_exposed_ms"], p["meas_exposed_ms"])
        p["least_rank_ok"] = within(p["pred_exposed_ms"], p["least_rank_exposed_ms"])
    keys = ["ranks", "stage", "overlap", "bucket", "gas", "pred_ms", "meas_ms", "err_pct", "pred_exposed_ms",
            "meas_exposed_ms", "exposed_ok", "least_rank_exposed_ms", "least_rank_ok", "rank0_exposed_ms"]
    with open(os.path.join(a.out_dir, "validation.csv"), "w") as f:
        f.write(",".join(keys) + "\n")
        for p in points:
            f.write(",".join(str(round(p[k], 3) if isinstance(p[k], float) else p[k]) for k in keys) + "\n")
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(str(round(p[k], 3) if isinstance(p[k], float) else p[k]) for k in keys) + " |"
              for p in points]
    groups = [(str(n), [p for p in points if p["ranks"] == n]) for n in ints(a.ranks)] + [("all", points)]
    table = ["| ranks | points | median \\|predicted − measured\\| / measured step | Spearman, predicted vs measured "
             "step | exposed comm within 25% or 2 ms | median \\|predicted − measured\\| exposed | within bounds of "
             "the least-waiting rank's total |", "|---|---|---|---|---|---|---|"]
    for name, g in groups:
        e, r, ok, ex, least = summarize(g)
        table.append("| %s | %d | %.1f%% | %.2f | %.0f%% | %.2f ms | %.0f%% |" % (name, len(g), 100 * e, r, 100 * ok, ex,
                                                                               100 * least))
    median_err, rho, exposed_ok, _, _ = summarize(points)
    summary = ("%d points: median |predicted - measured| / measured step time %.1f%%; exposed communication within "
               "25%% or 2 ms at %.0f%% of points; Spearman rank correlation %.2f; load average %.1f before, %.1f after"
               % (len(points), 100 * median_err, 100 * exposed_ok, rho, load_before, os.getloadavg()[0]))
    with open(os.path.join(a.out_dir, "validation.md"), "w") as f:
        f.write("\n".join(lines) + "\n\n" + "\n".join(table) + "\n\n" + summary + "\n")
    print("\n".join(lines))
    print("\n".join(table))
    print(summary)
    if a.check:
        max_err, min_rho = (float(x) for x in a.check.split(","))
        if median_err > max_err or rho < min_rho:
            sys.exit("validation outside the bounds: median error %.3f (max %.3f), Spearman %.2f (min %.2f)"
                     % (median_err, max_err, rho, min_rho))


if __name__ == "__main__":
    main()
