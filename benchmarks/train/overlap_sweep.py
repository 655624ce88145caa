#!/usr/bin/env python3
"""overlap_sweep.py — where the step time goes across ZeRO settings, measured inside each run
(`wall_clock_breakdown`: exposed communication is the time the compute stream stalled on the
comm stream, comm busy the time the comm stream ran collectives; docs/observability.md).

Grid: ranks x stage x overlap_comm x reduce_bucket_size x allgather_bucket_size x stage-3
(prefetch, max_live) pairs. Each point runs --repeats times (default 3); the runs of all points
are shuffled (seeded) so drifting load on a shared machine spreads over every point instead of
biasing one. Per run: medians over the steps after --skip of rank 0's step_ms, fwd/bwd/optim,
comm_busy_ms, comm_exposed_ms; peak memory from --memory-report. Per point: the median of the
run medians and their spread (min..max over repeats). Two points whose spreads overlap are
"indistinguishable" on this machine; the table marks, per (ranks, stage, overlap), the bucket
sizes whose step time cannot be told apart from the best one.

Stage 3 gathers for real: stage3_param_persistence_threshold defaults to --s3-persist (1000
elements) instead of DeepSpeed's 1e5, under which every parameter of the small sweep model would
be persistent (gathered once per step, never released, no prefetch to tune).

Before running, each point's plan is read from `zerotrain explain` (the bucket plan, the step
program and the collectives; not the config values): points whose plans are identical are one
measured point, the others listed beside it ("same plan as"), and every row shows its gradient
bucket count. Each run records the machine's 1-minute load average before it starts. With
--profile P.json (a hardware profile, e.g. from `zerotrain simulate --calibrate`) each point's
simulated step time and exposed communication stand beside the measured ones. --dtypes fp32,bf16
runs both precisions. Per (ranks, stage, bucket, dtype), overlap on vs off is compared directly:
the step-time ratio on/off over paired runs (the same repeat index, run close in time) and a
sign-test confidence that overlap is faster (the share of pairs where it was, with the binomial
probability of seeing at least that many by chance).

Outputs in --out-dir: sweep_raw.csv (every step of every run), sweep.csv (one row per point),
sweep.md (the table), plots (matplotlib, optional: a message and no PNG without it), and with
--traces the trace directory of each point's first repeat (Perfetto / chrome://tracing).
Ranks are launched as zt-launch launches them: mpirun --bind-to none, OMP/OpenBLAS threads =
cores / ranks (at least 1), mpi_yield_when_idle when ranks outnumber cores.
"""
import argparse
import csv
import math
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile


def ds_config(p, micro, persist):
    doc = _ds_config(p, micro, persist)
    if p.get("dtype") == "bf16":
        doc["bf16"] = {"enabled": True}
    return doc


def _ds_config(p, micro, persist):
    z = {"stage": p["stage"], "overlap_comm": bool(p["overlap"]), "reduce_bucket_size": p["bucket"],
         "allgather_bucket_size": p["ag_bucket"]}
    if p["stage"] == 3:
        z.update({"stage3_param_persistence_threshold": persist, "stage3_prefetch_bucket_size": p["prefetch"],
                  "stage3_max_live_parameters": p["max_live"]})
    return {"train_batch_size": micro * p["ranks"], "train_micro_batch_size_per_gpu": micro,
            "gradient_accumulation_steps": 1, "wall_clock_breakdown": True, "zero_optimization": z,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8,
                                                      "weight_decay": 0.1}}}


def launch_argv(ranks):
    cores = len(os.sched_getaffinity(0))
    threads = str(max(1, cores // ranks))
    argv = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", str(ranks),
            "-x", "OMP_NUM_THREADS=" + threads, "-x", "OPENBLAS_NUM_THREADS=" + threads]
    if ranks > cores:
        argv += ["--mca", "mpi_yield_when_idle", "1"]
    if os.environ.get("OPENBLAS_CORETYPE"):
        argv += ["-x", "OPENBLAS_CORETYPE"]
    return argv


def plan_signature(a, tmp, p):
    """(signature, gradient buckets) of the plan `zerotrain explain` prints for point p."""
    cfg = os.path.join(tmp, "explain.json")
    with open(cfg, "w") as f:
        json.dump(ds_config(p, a.micro, a.s3_persist), f)
    out = subprocess.run([a.zerotrain, "explain", "--config", cfg, "--model", a.model, "--world-size", str(p["ranks"])],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("explain failed: %s" % out.stderr)
    lines = out.stdout.splitlines()
    buckets = next(int(l.split()[2]) for l in lines if l.startswith("bucket plan:"))
    start = next(i for i, l in enumerate(lines) if l.startswith("bucket plan:"))
    return "\n".join(lines[start:]), buckets


def predict(a, tmp, p):
    """Simulated (step_ms, comm_exposed_ms) of point p on --profile, or (None, None)."""
    if not a.profile:
        return None, None
    cfg, js = os.path.join(tmp, "sim_cfg.json"), os.path.join(tmp, "sim.json")
    with open(cfg, "w") as f:
        json.dump(ds_config(p, a.micro, a.s3_persist), f)
    out = subprocess.run([a.zerotrain, "simulate", "--config", cfg, "--model", a.model, "--world-size", str(p["ranks"]),
                          "--hardware", a.profile, "--json", js], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("simulate failed: %s" % out.stderr)
    with open(js) as f:
        j = json.load(f)
    return round(j["step_ms"], 2), round(j["comm_exposed_ms"], 2)


def overlap_verdicts(points, runs, skip):
    """Per (ranks, stage, bucket, ag_bucket, prefetch, max_live, dtype): overlap on vs off over paired repeats."""
    key = lambda p: tuple(p[k] for k in ("ranks", "stage", "bucket", "ag_bucket", "prefetch", "max_live", "dtype"))
    by = {}
    for i, p in enumerate(points):
        by.setdefault(key(p), {})[p["overlap"]] = i
    out = []
    for k, pair in by.items():
        if 0 not in pair or 1 not in pair:
            continue
        med = lambda i, r: statistics.median(s["step_ms"] for s in runs[i][r][0][skip:])
        n = min(len(runs[pair[0]]), len(runs[pair[1]]))
        ratios = [med(pair[1], r) / med(pair[0], r) for r in range(n)]
        wins = sum(x < 1 for x in ratios)
        # P(at least `wins` of n pairs favour overlap if it made no difference): the sign test's p-value.
        p_value = sum(math.comb(n, j) for j in range(wins, n + 1)) / 2 ** n
        out.append(dict(zip(("ranks", "stage", "bucket", "ag_bucket", "prefetch", "max_live", "dtype"), k),
                        on_over_off=round(statistics.median(ratios), 3), pairs=n, overlap_faster_in=wins,
                        p_value=round(p_value, 3)))
    return out


FIELDS = ("step_ms", "fwd_ms", "bwd_ms", "optim_ms", "comm_busy_ms", "comm_exposed_ms", "comm_wait_idle_ms")


def run_point(a, tmp, p, rep, trace_dir):
    tag = "r%d_s%d_o%d_b%d_g%d_p%d_l%d_%s_%d" % (p["ranks"], p["stage"], p["overlap"], p["bucket"], p["ag_bucket"],
                                               p["prefetch"], p["max_live"], p["dtype"], rep)
    cfg = os.path.join(tmp, tag + ".json")
    with open(cfg, "w") as f:
        json.dump(ds_config(p, a.micro, a.s3_persist), f)
    metrics, mem = os.path.join(tmp, tag + ".jsonl"), os.path.join(tmp, tag + ".mem.json")
    cmd = launch_argv(p["ranks"]) + [a.zerotrain, "train", "--config", cfg, "--model", a.model, "--data", a.data,
                                     "--steps", str(a.steps), "--metrics", metrics, "--memory-report", mem,
                                     "--log-every", str(a.steps)]
    if trace_dir:
        cmd += ["--trace", trace_dir, "--trace-steps", "%d:%d" % (a.skip + 1, a.skip + 2)]
    load = os.getloadavg()[0]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("command failed (%d): %s\n%s" % (r.returncode, " ".join(cmd), r.stdout[-3000:]))
    steps = [dict(json.loads(line), load=load) for line in open(metrics) if line.strip()]
    ranks = json.load(open(mem))["ranks"]
    peak = max(sum(c["peak_bytes"] for c in rk["categories"].values()) for rk in ranks) / 2**20
    return steps, peak


def summarise(point, runs, skip):
    """Median over repeats of each run's median over steps after `skip`, and the min..max spread."""
    row = dict(point)
    row["repeats"] = len(runs)
    for f in FIELDS:
        per_run = [statistics.median(s[f] for s in steps[skip:]) for steps, _ in runs]
        row[f] = round(statistics.median(per_run), 2)
        row[f + "_lo"], row[f + "_hi"] = round(min(per_run), 2), round(max(per_run), 2)
    row["exposed_pct_of_busy"] = round(100 * row["comm_exposed_ms"] / row["comm_busy_ms"], 1) if row["comm_busy_ms"] else ""
    row["peak_mib"] = round(max(peak for _, peak in runs), 3)
    row["load"] = round(statistics.median(steps[0]["load"] for steps, _ in runs), 1)
    return row


def mark_indistinguishable(rows):
    """Per (ranks, stage, overlap): bucket points whose step_ms spread overlaps the best point's."""
    groups = {}
    for r in rows:
        groups.setdefault((r["ranks"], r["stage"], r["overlap"], r["dtype"]), []).append(r)
    for g in groups.values():
        best = min(g, key=lambda r: r["step_ms"])
        for r in g:
            r["same_as_best"] = int(r is best or (r["step_ms_lo"] <= best["step_ms_hi"] and best["step_ms_lo"] <= r["step_ms_hi"]))


def plots(rows, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not found: no PNG written (apt-get install python3-matplotlib to get the plots)")
        return []
    written = []
    for n in sorted({r["ranks"] for r in rows}):
        fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
        for stage, (ov, style) in itertools.product(sorted({r["stage"] for r in rows}), [(0, "--"), (1, "-")]):
            pts = sorted((r for r in rows if r["ranks"] == n and r["stage"] == stage and r["overlap"] == ov
                          and r["ag_bucket"] == r["bucket"]), key=lambda r: r["bucket"])
            if not pts:
                continue
            x = [r["bucket"] for r in pts]
            label = "stage %d overlap %s" % (stage, "on" if ov else "off")
            color = "C%d" % int(stage)
            for ax, f in zip(axes[:2], ("step_ms", "comm_exposed_ms")):
                y = [r[f] for r in pts]
                err = [[r[f] - r[f + "_lo"] for r in pts], [r[f + "_hi"] - r[f] for r in pts]]
                ax.errorbar(x, y, yerr=err, linestyle=style, marker="o", capsize=3, label=label, color=color)
            axes[2].plot(x, [r["peak_mib"] for r in pts], linestyle=style, marker="o", label=label, color=color)
        for ax, t in zip(axes, ("step time (ms, median; bars: min..max over repeats)", "exposed communication (ms)",
                                "peak memory per rank (MiB)")):
            ax.set_xscale("log")
            ax.set_xlabel("reduce_bucket_size = allgather_bucket_size (elements)")
            ax.set_title(t, fontsize=9)
            ax.grid(alpha=0.3)
        axes[0].legend(fontsize=7)
        fig.suptitle("%d ranks" % int(n))
        fig.tight_layout()
        path = os.path.join(out_dir, "sweep_%dranks.png" % int(n))
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    return written


def ints(text):
    return [int(float(x)) for x in text.split(",") if x]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zerotrain", default=os.path.join(root, "build", "zerotrain"))
    ap.add_argument("--model", default=os.path.join(here, "gpt-sweep.json"))
    ap.add_argument("--data", default="markov:")
    ap.add_argument("--ranks", default="2,4")
    ap.add_argument("--stages", default="0,1,2,3")
    ap.add_argument("--overlap", default="0,1", help="overlap_comm values (0/1)")
    ap.add_argument("--buckets", default="50000,500000000", help="reduce_bucket_size values (elements)")
    ap.add_argument("--ag-buckets", default="same", help="allgather_bucket_size values, or 'same' as the bucket")
    ap.add_argument("--s3", default="50000:1000000000", help="stage-3 prefetch:max_live pairs (elements), comma separated")
    ap.add_argument("--s3-persist", type=int, default=1000, help="stage3_param_persistence_threshold (elements)")
    ap.add_argument("--micro", type=int, default=4, help="micro-batch per rank")
    ap.add_argument("--dtypes", default="fp32", help="fp32, bf16 or both (comma separated)")
    ap.add_argument("--profile", default="", help="hardware profile: print simulate's prediction beside each point")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--skip", type=int, default=3, help="warm-up steps left out of each run's median")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1, help="shuffle seed for the run order")
    ap.add_argument("--traces", action="store_true", help="keep a trace of 2 steps of each point's first repeat")
    ap.add_argument("--out-dir", default=".")
    ap.add_argument("--replot", action="store_true", help="only redraw the plots from --out-dir/sweep.csv")
    a = ap.parse_args()
    if a.replot:
        num = lambda v: float(v) if v.replace(".", "", 1).lstrip("-").isdigit() else v
        rows = [{k: num(v) for k, v in r.items()} for r in csv.DictReader(open(os.path.join(a.out_dir, "sweep.csv")))]
        for path in plots(rows, a.out_dir):
            print("plot:", path)
        return
    if a.steps <= a.skip:
        sys.exit("--steps %d must exceed --skip %d" % (a.steps, a.skip))
    if not os.path.exists(a.zerotrain):
        sys.exit("--zerotrain %s: not found (build it first: cmake --build build --target zerotrain)" % a.zerotrain)
    os.makedirs(a.out_dir, exist_ok=True)
    s3 = [tuple(int(float(v)) for v in pair.split(":")) for pair in a.s3.split(",")]
    grid = []
    for n, st, ov, b, dt in itertools.product(ints(a.ranks), ints(a.stages), ints(a.overlap), ints(a.buckets),
                                              a.dtypes.split(",")):
        for g in ([b] if a.ag_buckets == "same" else ints(a.ag_buckets)):
            for pf, live in (s3 if st == 3 else [(0, 0)]):
                grid.append({"ranks": n, "stage": st, "overlap": ov, "bucket": b, "ag_bucket": g, "prefetch": pf,
                             "max_live": live, "dtype": dt})
    points, first = [], {}  # points with distinct plans; signature -> index
    with tempfile.TemporaryDirectory(prefix="zt_sweep_plan_") as tmp:
        for p in grid:
            sig, p["buckets"] = plan_signature(a, tmp, p)
            sig = (sig, p["ranks"], p["overlap"], p["dtype"])
            if sig in first:
                same = points[first[sig]]
                same["same_plan_as"] = (same.get("same_plan_as", "") + " " if same.get("same_plan_as") else "") + \
                    "bucket %d/%d" % (p["bucket"], p["ag_bucket"]) + (" prefetch %d live %d" % (p["prefetch"], p["max_live"])
                                                                    if p["stage"] == 3 else "")
                continue
            first[sig] = len(points)
            p["pred_step_ms"], p["pred_exposed_ms"] = predict(a, tmp, p)
            points.append(p)
    for p in points:
        p.setdefault("same_plan_as", "")
    print("%d grid points, %d distinct plans measured" % (len(grid), len(points)))
    order = [(i, rep) for i in range(len(points)) for rep in range(a.repeats)]
    random.Random(a.seed).shuffle(order)
    runs = {i: [] for i in range(len(points))}
    raw = []
    with tempfile.TemporaryDirectory(prefix="zt_sweep_") as tmp:
        for k, (i, rep) in enumerate(order):
            p = points[i]
            trace = os.path.join(a.out_dir, "traces", "point%d" % i) if a.traces and rep == 0 else None
            steps, peak = run_point(a, tmp, p, rep, trace)
            runs[i].append((steps, peak))
            for s in steps:
                raw.append(dict(p, repeat=rep, run_order=k, step=s["step"], **{f: s[f] for f in FIELDS}))
            print("[%d/%d] %s repeat %d: step %.1f ms, exposed %.1f ms" % (
                k + 1, len(order), p, rep, statistics.median(s["step_ms"] for s in steps[a.skip:]),
                statistics.median(s["comm_exposed_ms"] for s in steps[a.skip:])), flush=True)
    rows = [summarise(points[i], runs[i], a.skip) for i in range(len(points))]
    mark_indistinguishable(rows)
    for name, data in (("sweep_raw.csv", raw), ("sweep.csv", rows)):
        with open(os.path.join(a.out_dir, name), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(data[0].keys()))
            w.writeheader()
            w.writerows(data)
    cols = ["ranks", "stage", "dtype", "overlap", "bucket", "ag_bucket", "prefetch", "max_live", "buckets", "step_ms",
            "comm_busy_ms", "comm_exposed_ms", "exposed_pct_of_busy", "peak_mib", "load", "same_as_best", "same_plan_as"]
    if a.profile:
        cols[10:10] = ["pred_step_ms", "pred_exposed_ms"]
    fmt = lambda r, c: ("%s (%s..%s)" % (r[c], r[c + "_lo"], r[c + "_hi"])) if c + "_lo" in r else str(r[c])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r, c) for c in cols) + " |" for r in rows]
    table = "\n".join(lines)
    verdicts = overlap_verdicts(points, runs, a.skip)
    if verdicts:
        vcols = list(verdicts[0].keys())
        vlines = ["| " + " | ".join(vcols) + " |", "|" + "---|" * len(vcols)]
        vlines += ["| " + " | ".join(str(v[c]) for c in vcols) + " |" for v in verdicts]
        table += ("\n\noverlap_comm on vs off, paired by repeat: on_over_off = median step-time ratio; p_value = "
                  "chance of overlap winning at least that many pairs if it made no difference (sign test)\n" +
                  "\n".join(vlines))
    with open(os.path.join(a.out_dir, "sweep.md"), "w") as f:
        f.write(table + "\n")
    print("\nms per step, rank 0: median over repeats of each run's median (min..max over repeats); "
          "exposed_pct_of_busy = comm_exposed / comm_busy; same_as_best = 1 when the step_ms spread overlaps the "
          "best bucket size's of the same ranks/stage/overlap (indistinguishable here); buckets = gradient buckets of "
          "the plan; same_plan_as = grid settings with an identical plan, not run again; load = 1-minute load "
          "average before the run\n" + table)
    for path in plots(rows, a.out_dir):
        print("plot:", path)


if __name__ == "__main__":
    main()
