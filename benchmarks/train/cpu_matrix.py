#!/usr/bin/env python3
"""cpu_matrix.py — the CPU benchmark matrix, zerotrain vs PyTorch, as interleaved pairs.

One command runs, for each of --rounds rounds, every case below back to back (zerotrain, then
PyTorch, then zerotrain through the next launcher, ...), so both sides of a pair see the same
machine load; the tables report medians over rounds. The GPT is the matrix's (V=256, T=128, L=4,
H=4, C=128, micro-batch 8 per rank, fp32, AdamW lr 1e-3 betas 0.9/0.95 eps 1e-8 wd 0.1,
gradient clipping 1.0, no accumulation).

  case           zerotrain (`zerotrain train`, defaults)          PyTorch (torch_gpt_bench.py)
  1 rank, 1 thr  stage 0, `taskset -c 0` (1 CPU in the mask)      same taskset, 1 thread
  1 rank, 2 thr  stage 0, both CPUs                               2 threads
  2 ranks, st 0  plain mpirun and zt-launch, stage 0              DDP over gloo, 1 thread/rank
  2 ranks, st 1  plain mpirun and zt-launch, stage 1              DDP + ZeroRedundancyOptimizer(AdamW)
  2 ranks, st 2/3  as stage 1, compared with stage 1's step time  —

zerotrain runs with OMP_NUM_THREADS / OPENBLAS_NUM_THREADS removed from the environment (it sizes
its pools from its affinity mask and node-local ranks, as a user gets it); data is its
`markov:` generator (vocabulary 256). PyTorch uses uniform random tokens; the work per step is
the same. Step time: zerotrain, the median of rank 0's `step_ms` (--metrics) over the steps
after --skip; PyTorch, the median of its timed steps after the same number of warm-up steps.
tokens/s = ranks · 8 · 128 / step time. Writes <out>/cpu_matrix.csv (one row per run) and
<out>/cpu_matrix.md (the tables). docs/benchmarks.md, section 3.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
MODEL = {"type": "gpt", "name": "gpt-cpu-matrix-c128", "vocab_size": 256, "n_ctx": 128, "n_layer": 4, "n_head": 4,
         "n_embd": 128}
MICRO = 8
TARGET_RATIO, TARGET_STAGE = 1.3, 1.10


def ds_config(stage):
    return {"train_micro_batch_size_per_gpu": MICRO, "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
            "zero_optimization": {"stage": stage},
            "optimizer": {"type": "AdamW",
                          "params": {"lr": 1e-3, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}}}


def user_env():
    env = dict(os.environ)
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        env.pop(k, None)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")  # what root needs for mpirun; no effect on threads
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    return env


def run_zt(a, tmp, tag, ranks, stage, launcher, cpus):
    cfg, metrics = os.path.join(tmp, tag + ".json"), os.path.join(tmp, tag + ".jsonl")
    with open(cfg, "w") as f:
        json.dump(ds_config(stage), f)
    if os.path.exists(metrics):
        os.remove(metrics)
    args = ["train", "--config", cfg, "--model", os.path.join(tmp, "model.json"), "--data", "markov:",
            "--steps", str(a.steps), "--metrics", metrics, "--log-every", str(a.steps)]
    env = user_env()
    if launcher == "zt-launch":
        env["ZT_BIN"] = a.zerotrain
        cmd = [os.path.join(REPO, "launcher", "zt-launch"), "-q", "-n", str(ranks)] + args
    elif ranks > 1:
        cmd = ["mpirun", "-np", str(ranks)] + a.mpirun_args.split() + [a.zerotrain] + args
    else:
        cmd = [a.zerotrain] + args
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s\n%s" % (" ".join(cmd), out.returncode, out.stdout, out.stderr))
    steps = [json.loads(line) for line in open(metrics) if line.strip()][a.skip:]
    ms = statistics.median(s["step_ms"] for s in steps)
    header = next((ln.strip() for ln in out.stdout.splitlines() if ln.startswith("threads:")), "")
    return {"step_ms": ms, "tokens_per_s": ranks * MICRO * MODEL["n_ctx"] / (ms / 1e3), "layout": header,
            "cmd": " ".join(cmd)}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_torch(a, tmp, tag, ranks, threads, dist, cpus):
    csv = os.path.join(tmp, tag + ".csv")
    if os.path.exists(csv):
        os.remove(csv)
    cmd = [a.python, os.path.join(HERE, "torch_gpt_bench.py"), "--vocab", str(MODEL["vocab_size"]),
           "--seq", str(MODEL["n_ctx"]), "--n-layer", str(MODEL["n_layer"]), "--n-head", str(MODEL["n_head"]),
           "--n-embd", str(MODEL["n_embd"]), "--batch", str(MICRO), "--threads", str(threads), "--clip", "1.0",
           "--warmup", str(a.skip), "--steps", str(a.steps - a.skip), "--dist", dist, "--csv", csv]
    if cpus:
        cmd = ["taskset", "-c", cpus] + cmd
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(ranks))
    procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for r in range(ranks)]
    outs = [p.communicate() for p in procs]
    for p, (o, e) in zip(procs, outs):
        if p.returncode != 0:
            raise RuntimeError("%s failed (%d):\n%s\n%s" % (" ".join(cmd), p.returncode, o, e))
    lines = open(csv).read().splitlines()
    row = dict(zip(lines[0].split(","), lines[1].split(",")))
    ms = float(row["step_ms_median"])
    return {"step_ms": ms, "tokens_per_s": float(row["tokens_per_s"]), "layout": outs[0][0].splitlines()[2].strip(),
            "cmd": ("%d x " % ranks if ranks > 1 else "") + " ".join(cmd)}


# (case, ranks, stage, zerotrain launchers, cpus for taskset, torch threads per rank, torch dist or None)
def cases(a):
    launchers = a.launchers.split(",")
    return [("1 rank, 1 thread", 1, 0, ["direct"], "0", 1, "none"),
            ("1 rank, 2 threads", 1, 0, ["direct"], "", 2, "none"),
            ("2 ranks, stage 0 vs DDP", 2, 0, launchers, "", 1, "ddp"),
            ("2 ranks, stage 1 vs ZeroRedundancyOptimizer", 2, 1, launchers, "", 1, "zero"),
            ("2 ranks, stage 2", 2, 2, launchers, "", 0, None),
            ("2 ranks, stage 3", 2, 3, launchers, "", 0, None)]


def machine():
    model, flags = "?", set()
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name") and model == "?":
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags") and not flags:
            flags = set(line.split(":", 1)[1].split())
    isa = " ".join(f for f in ("avx2", "fma", "f16c", "avx512f", "avx512bw") if f in flags)
    return model, isa, os.cpu_count()


def load():
    return " ".join(open("/proc/loadavg").read().split()[:3])


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def tables(a, rows, info):
    by = {}
    for r in rows:
        by.setdefault((r["case"], r["impl"], r["launcher"]), []).append(r)
    md = ["Machine: %s, %d CPUs, ISA flags: %s; load average %s (start) / %s (end); %s" % info,
          "", "### zerotrain ÷ PyTorch, tokens/s (target ≥ %.1f×)" % TARGET_RATIO, "",
          "| case | zerotrain launch | zerotrain tokens/s | PyTorch | PyTorch tokens/s | ratio per round | median ratio | target met |",
          "|---|---|---|---|---|---|---|---|"]
    for case, ranks, stage, launchers, _, _, dist in cases(a):
        if dist is None:
            continue
        pt = by.get((case, "pytorch", dist), [])
        for la in launchers:
            zt = by.get((case, "zerotrain", la), [])
            if not zt or not pt:
                continue
            ratios = [z["tokens_per_s"] / p["tokens_per_s"] for z, p in zip(zt, pt)]
            m = med(ratios)
            md.append("| %s | %s | %.0f | %s | %.0f | %s | **%.2f** | %s |" % (
                case, la, med([z["tokens_per_s"] for z in zt]), {"none": "eager", "ddp": "DDP (gloo)",
                                                                     "zero": "ZeRO-1 (gloo)"}[dist],
                med([p["tokens_per_s"] for p in pt]), ", ".join("%.2f" % x for x in ratios), m,
                "yes" if m >= TARGET_RATIO else "no"))
    md += ["", "### Stage 2 and 3 step time ÷ stage 1 (2 ranks, target ≤ %.2f)" % TARGET_STAGE, "",
           "| stage | launch | step_ms (median) | stage-1 step_ms | ratio per round | median ratio | target met |",
           "|---|---|---|---|---|---|---|"]
    s1 = "2 ranks, stage 1 vs ZeroRedundancyOptimizer"
    for case in ("2 ranks, stage 2", "2 ranks, stage 3"):
        for la in a.launchers.split(","):
            zs, z1 = by.get((case, "zerotrain", la), []), by.get((s1, "zerotrain", la), [])
            if not zs or not z1:
                continue
            ratios = [x["step_ms"] / y["step_ms"] for x, y in zip(zs, z1)]
            m = med(ratios)
            md.append("| %s | %s | %.1f | %.1f | %s | **%.2f** | %s |" % (
                case[-1], la, med([x["step_ms"] for x in zs]), med([y["step_ms"] for y in z1]),
                ", ".join("%.2f" % x for x in ratios), m, "yes" if m <= TARGET_STAGE else "no"))
    md += ["", "### Thread scaling, one rank: tokens/s at 2 threads ÷ at 1 thread", "",
           "| impl | 1 thread tokens/s | 2 threads tokens/s | speedup per round | median speedup |", "|---|---|---|---|---|"]
    for impl, la in (("zerotrain", "direct"), ("pytorch", "none")):
        one, two = by.get(("1 rank, 1 thread", impl, la), []), by.get(("1 rank, 2 threads", impl, la), [])
        if not one or not two:
            continue
        sp = [y["tokens_per_s"] / x["tokens_per_s"] for x, y in zip(one, two)]
        md.append("| %s | %.0f | %.0f | %s | **%.2f** |" % (impl, med([x["tokens_per_s"] for x in one]),
                                                            med([y["tokens_per_s"] for y in two]),
                                                            ", ".join("%.2f" % x for x in sp), med(sp)))
    md += ["", "Layouts and commands (round 1):", ""]
    seen = set()
    for r in rows:
        if (r["case"], r["impl"], r["launcher"]) not in seen:
            seen.add((r["case"], r["impl"], r["launcher"]))
            md.append("* %s / %s / %s: `%s` — %s" % (r["case"], r["impl"], r["launcher"], r["cmd"], r["layout"]))
    return "\n".join(md) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zerotrain", default=os.path.join(REPO, "build", "zerotrain"))
    ap.add_argument("--python", default="/usr/bin/python3", help="the Python with torch (Debian python3-torch)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=16, help="steps per run, warm-up included")
    ap.add_argument("--skip", type=int, default=4, help="warm-up steps left out of the median")
    ap.add_argument("--launchers", default="mpirun,zt-launch", help="for the 2-rank cases: mpirun and/or zt-launch")
    ap.add_argument("--mpirun-args", default="--bind-to none", help="after 'mpirun -np 2' (shell-split)")
    ap.add_argument("--only", default="", help="comma-separated case numbers (1-6) to run; default all")
    ap.add_argument("--out-dir", default="out/cpu_matrix")
    a = ap.parse_args()
    if a.steps <= a.skip:
        sys.exit("--steps must exceed --skip")
    os.makedirs(a.out_dir, exist_ok=True)
    model, isa, ncpu = machine()
    load0 = load()
    print("cpu_matrix: %s, %d CPUs, %s; load average %s; OPENBLAS_CORETYPE=%s" %
          (model, ncpu, isa, load0, os.environ.get("OPENBLAS_CORETYPE", "(unset)")), flush=True)
    only = {int(x) for x in a.only.split(",") if x}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "model.json"), "w") as f:
            json.dump(MODEL, f)
        for rnd in range(1, a.rounds + 1):
            for k, (case, ranks, stage, launchers, cpus, threads, dist) in enumerate(cases(a), 1):
                if only and k not in only:
                    continue
                runs = [("zerotrain", la) for la in launchers[:1]]
                if dist is not None:
                    runs.append(("pytorch", dist))
                runs += [("zerotrain", la) for la in launchers[1:]]
                for impl, la in runs:
                    tag = "r%d_c%d_%s_%s" % (rnd, k, impl, la)
                    t0 = time.time()
                    r = (run_zt(a, tmp, tag, ranks, stage, la, cpus) if impl == "zerotrain" else
                         run_torch(a, tmp, tag, ranks, threads, dist, cpus))
                    r.update(round=rnd, case=case, impl=impl, launcher=la, ranks=ranks, stage=stage,
                             load=load(), wall_s=round(time.time() - t0, 1))
                    rows.append(r)
                    print("round %d | %-44s | %-9s %-9s | step %8.1f ms | %7.0f tokens/s | load %s" %
                          (rnd, case, impl, la, r["step_ms"], r["tokens_per_s"], r["load"]), flush=True)
    keys = ["round", "case", "impl", "launcher", "ranks", "stage", "step_ms", "tokens_per_s", "load", "wall_s"]
    with open(os.path.join(a.out_dir, "cpu_matrix.csv"), "w") as f:
        f.write(",".join(keys) + "\n")
        for r in rows:
            f.write(",".join('"%s"' % r[k] if k == "case" else str(round(r[k], 2) if isinstance(r[k], float)
                                                                  else r[k]) for k in keys) + "\n")
    info = (model, ncpu, isa, load0, load(), "OPENBLAS_CORETYPE=%s" % os.environ.get("OPENBLAS_CORETYPE", "(unset)"))
    md = tables(a, rows, info)
    with open(os.path.join(a.out_dir, "cpu_matrix.md"), "w") as f:
        f.write(md)
    print("\n" + md)


if __name__ == "__main__":
    main()
