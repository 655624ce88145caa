#!/usr/bin/env python3
"""overlap_sweep.py — step time, exposed communication and peak memory of `zerotrain train` on
the CPU backend, for ZeRO stages x overlap_comm on/off x reduce_bucket_size, at several rank counts.

For every (ranks N, stage, overlap, bucket) it writes a DeepSpeed config (fp32, AdamW, no clipping,
micro-batch --micro per rank, no gradient accumulation), runs
    mpirun -np N zerotrain train --config C --model M --data markov: --steps S --metrics F --memory-report R
and reads the metrics JSONL (rank 0's per-step wall time) and the memory report (every rank's
per-category peak bytes).

Compute-only baseline (what "exposed communication" is measured against): for each (N, stage),
N independent single-rank runs of the same config (world size 1, same micro-batch per rank, same
thread count; MPI singletons, no mpirun), started at the same time. Each does exactly one rank's
forward/backward work with no communication partner (world-1 collectives are local copies), and the N processes compete for
the same cores as the N ranks do, so oversubscription slows the baseline as much as the real run.
    exposed_comm_ms = step_ms - compute_only_ms
is the part of the step that communication (and waiting for the slowest rank) adds on top of the
compute. Bias: at stages 1-3 the world-1 baseline updates the whole model, a rank of N only 1/N
of it, so the baseline overstates compute by (1 - 1/N) x AdamW time (zt_train_bench's opt_ms;
docs/benchmarks.md gives the figure) and exposed_comm_ms is low by that much.

Step times are medians over the steps after --skip warm-up steps; the *_min columns use each
run's fastest step instead (with more ranks than cores the baseline's fastest steps come after
some of its processes have finished, so prefer the medians there). Writes a table (stdout and
--out-dir/overlap_sweep.md) and a CSV (--out-dir/overlap_sweep.csv).
"""
import argparse
import concurrent.futures
import csv
import json
import os
import statistics
import subprocess
import sys
import tempfile

MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe", "-x", "OMP_NUM_THREADS", "-x", "OPENBLAS_NUM_THREADS",
          "-x", "OPENBLAS_CORETYPE", "-x", "OMPI_MCA_mpi_yield_when_idle"]


def ds_config(stage, overlap, bucket, micro, world):
    z = {"stage": stage, "overlap_comm": overlap, "reduce_bucket_size": bucket, "allgather_bucket_size": bucket}
    return {"train_batch_size": micro * world, "train_micro_batch_size_per_gpu": micro,
            "gradient_accumulation_steps": 1, "zero_optimization": z,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8,
                                                      "weight_decay": 0.1}}}


def step_ms_of(metrics_path, skip):
    """(median, min) of rank 0's step wall times after `skip` warm-up steps, in ms."""
    steps = [json.loads(line) for line in open(metrics_path) if line.strip()]
    ms = [s.get("step_time_ms", s.get("step_ms")) for s in steps][skip:]
    if not ms:
        raise RuntimeError("%s: no steps after skipping %d" % (metrics_path, skip))
    return statistics.median(ms), min(ms)


def run_one(a, tmp, tag, world, cfg, want_memory):
    cfg_path = os.path.join(tmp, tag + ".json")
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    metrics, mem = os.path.join(tmp, tag + ".jsonl"), os.path.join(tmp, tag + ".mem.json")
    # World size 1 (the compute-only baseline) runs as an MPI singleton, without mpirun: N
    # concurrent mpirun/orted pairs would themselves take CPU from the 2 cores being measured.
    launcher = MPIRUN + ["-np", str(world)] if world > 1 else []
    cmd = launcher + [a.zerotrain, "train", "--config", cfg_path, "--model", a.model,
                    "--data", a.data, "--steps", str(a.steps), "--metrics", metrics, "--log-every", str(a.steps)]
    if want_memory:
        cmd += ["--memory-report", mem]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("command failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stdout[-3000:]))
    med, mn = step_ms_of(metrics, a.skip)
    out = {"step_ms": med, "step_min_ms": mn}
    if want_memory:
        ranks = json.load(open(mem))["ranks"]
        # Per rank: sum over categories of each category's peak (an upper bound on the rank's
        # simultaneous peak), and the bucket category alone (what overlap / bucket size pins).
        out["peak_mib"] = [sum(c["peak_bytes"] for c in rk["categories"].values()) / 2**20 for rk in ranks]
        out["bucket_mib"] = [rk["categories"].get("buckets", {}).get("peak_bytes", 0) / 2**20 for rk in ranks]
    return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zerotrain", default=os.path.join(root, "build", "zerotrain"))
    ap.add_argument("--model", default=os.path.join(here, "gpt-sweep.json"))
    ap.add_argument("--data", default="markov:")
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--stages", default="0,1,2,3")
    ap.add_argument("--buckets", default="50000,500000000", help="reduce_bucket_size values (elements)")
    ap.add_argument("--micro", type=int, default=4, help="micro-batch per rank")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--skip", type=int, default=3, help="warm-up steps left out of the median")
    ap.add_argument("--out-dir", default=".")
    a = ap.parse_args()
    for k, v in (("OMP_NUM_THREADS", "1"), ("OPENBLAS_NUM_THREADS", "1"), ("OMPI_MCA_mpi_yield_when_idle", "1")):
        os.environ.setdefault(k, v)
    os.environ.setdefault("OPENBLAS_CORETYPE", "")  # exported to the ranks as is; empty = OpenBLAS detects
    if not os.environ["OPENBLAS_CORETYPE"]:
        del os.environ["OPENBLAS_CORETYPE"]
        MPIRUN[MPIRUN.index("OPENBLAS_CORETYPE") - 1:MPIRUN.index("OPENBLAS_CORETYPE") + 1] = []
    ranks = [int(x) for x in a.ranks.split(",")]
    stages = [int(x) for x in a.stages.split(",")]
    buckets = [int(float(x)) for x in a.buckets.split(",")]
    os.makedirs(a.out_dir, exist_ok=True)

    rows = []
    with tempfile.TemporaryDirectory(prefix="zt_sweep_") as tmp:
        for n in ranks:
            for st in stages:
                # Compute-only: n concurrent world-1 runs of the same per-rank work.
                cfg1 = ds_config(st, False, buckets[-1], a.micro, 1)
                with concurrent.futures.ThreadPoolExecutor(n) as ex:
                    futs = [ex.submit(run_one, a, tmp, "base_n%d_s%d_p%d" % (n, st, i), 1, cfg1, False) for i in range(n)]
                    compute_ms = statistics.fmean(f.result()["step_ms"] for f in futs)
                    compute_min = statistics.fmean(f.result()["step_min_ms"] for f in futs)
                for ov in (False, True):
                    for b in buckets:
                        tag = "n%d_s%d_o%d_b%d" % (n, st, ov, b)
                        r = run_one(a, tmp, tag, n, ds_config(st, ov, b, a.micro, n), True)
                        row = {"ranks": n, "stage": st, "overlap_comm": int(ov), "reduce_bucket_size": b,
                               "step_ms": round(r["step_ms"], 2), "compute_only_ms": round(compute_ms, 2),
                               "exposed_comm_ms": round(r["step_ms"] - compute_ms, 2),
                               "exposed_pct": round(100 * (r["step_ms"] - compute_ms) / r["step_ms"], 1),
                               "step_min_ms": round(r["step_min_ms"], 2), "compute_only_min_ms": round(compute_min, 2),
                               "exposed_comm_min_ms": round(r["step_min_ms"] - compute_min, 2),
                               "peak_mib_max_rank": round(max(r["peak_mib"]), 3),
                               "peak_mib_per_rank": " ".join("%.3f" % x for x in r["peak_mib"]),
                               "bucket_mib_rank0": round(r["bucket_mib"][0], 3)}
                        rows.append(row)
                        print("ranks %d stage %d overlap %d bucket %-10d step %8.2f ms  compute-only %8.2f ms  "
                              "exposed %8.2f ms (min-based %8.2f ms)  peak %.2f MiB" %
                              (n, st, ov, b, row["step_ms"], compute_ms, row["exposed_comm_ms"],
                               row["exposed_comm_min_ms"], row["peak_mib_max_rank"]),
                              flush=True)

    cols = list(rows[0].keys())
    with open(os.path.join(a.out_dir, "overlap_sweep.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r[c]) for c in cols) + " |" for r in rows]
    table = "\n".join(lines)
    with open(os.path.join(a.out_dir, "overlap_sweep.md"), "w") as f:
        f.write(table + "\n")
    print("\nstep_ms: median wall time of one training step on rank 0 (ms); compute_only_ms: the same per-rank\n"
          "work as N concurrent single-rank runs (ms); exposed_comm_ms = step_ms - compute_only_ms;\n"
          "*_min_ms: the same from the fastest step of each run (less sensitive to other load on the machine);\n"
          "peak_mib_*: per rank, sum over memory categories of each category's peak (MiB);\n"
          "bucket_mib_rank0: peak of the reduce/all-reduce bucket buffers on rank 0 (MiB).\n")
    print(table)


if __name__ == "__main__":
    main()
