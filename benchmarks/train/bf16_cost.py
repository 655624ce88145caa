#!/usr/bin/env python3
"""Step time of bf16 compute vs fp32 compute on the CPU backend, with each bf16 GEMM path.

For 1 and 2 ranks (--ranks) and ZeRO stages 1-3 (--stages), a GPT of 5.3 M parameters
(V=2048, T=128, L=6, H=4, C=256, micro-batch 4 per rank, AdamW, clipping 1.0) runs as
`zerotrain train` through zt-launch in four variants: fp32, bf16 with ZT_CPU_BF16_GEMM=dpbf16
(left out on a CPU without AVX512_BF16 and with --avx2), =native (AVX-512 tile, or AVX2 tile on an
AVX2 CPU or with --avx2) and =widen; thread pools are
sized by zerotrain itself (OMP_NUM_THREADS / OPENBLAS_NUM_THREADS removed: 2 threads at 1 rank
on a 2-CPU machine, 1 per rank at 2 ranks). Every round runs
every (ranks, stage, variant) back to back, so machine-load drift spreads over all of them; the
variants' order rotates from round to round, so none always runs first or after the same one. A
run's time is the median of rank 0's step_ms (--metrics) after the first --skip steps; the
table gives per case the median over rounds of each variant and the median over rounds of the
per-round ratio to fp32. A second table pools every step time a variant took over all rounds
and gives its 10th percentile and that percentile's ratio to fp32's: a shared machine's noise
only adds time, so a gap that holds at the 10th percentile is the code's, not the machine's.
Stage 3 runs with stage3_param_persistence_threshold 1000, so its parameters are gathered. The
load average is printed before and after.

--avx2 measures the AVX2-only path on an AVX-512 machine: every run gets ZT_CPU_ISA=avx2 and
OPENBLAS_CORETYPE=Haswell (zerotrain's kernels and OpenBLAS's both without AVX-512); the dpbf16
variant is left out (it needs AVX-512).

usage: bf16_cost.py [--bin build/zerotrain] [--rounds 3] [--steps 10] [--skip 3] [--ranks 1,2]
                    [--stages 1,2,3] [--avx2] [--csv out.csv]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODEL = {"type": "gpt", "name": "gpt-5m", "vocab_size": 2048, "n_ctx": 128, "n_layer": 6, "n_head": 4,
         "n_embd": 256}
VARIANTS = [("fp32", False, None), ("bf16 dpbf16", True, "dpbf16"), ("bf16 native", True, "native"),
            ("bf16 widen", True, "widen")]


def config(stage, bf16):
    z = {"stage": stage}
    if stage == 3:
        z["stage3_param_persistence_threshold"] = 1000
    c = {"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
         "zero_optimization": z, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}
    if bf16:
        c["bf16"] = {"enabled": True}
    return c


def run(args, d, ranks, stage, variant):
    name, bf16, gemm = variant
    tag = f"r{ranks}s{stage}{name.replace(' ', '_')}"
    cfg = os.path.join(d, tag + ".json")
    with open(cfg, "w") as f:
        json.dump(config(stage, bf16), f)
    metrics = os.path.join(d, tag + ".jsonl")
    launcher = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "launcher", "zt-launch")
    cmd = [sys.executable, launcher, "-n", str(ranks), "train", "--config", cfg, "--model", args.model, "--data",
           "markov:vocab=2048,order=1,seed=3", "--steps", str(args.steps), "--metrics", metrics, "--log-every",
           "1000"]
    env = dict(os.environ, ZT_BIN=args.bin)
    for k in ("ZT_CPU_BF16_GEMM", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):  # pools sized as a user gets them
        env.pop(k, None)
    if gemm:
        env["ZT_CPU_BF16_GEMM"] = gemm
    if args.avx2:
        env.update(ZT_CPU_ISA="avx2", OPENBLAS_CORETYPE="Haswell")
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    with open(metrics) as f:
        ms = [json.loads(line)["step_ms"] for line in f][args.skip:]
    return ms, next((l for l in p.stdout.splitlines() if l.startswith("threads:")), "")


def percentile(xs, q):
    """The q-quantile of xs (0 <= q <= 1), nearest rank below."""
    xs = sorted(xs)
    return xs[int(q * (len(xs) - 1))]


def print_table(kind, names):
    """The header of a markdown table: fp32's ms, then each bf16 variant's ms and ratio to fp32."""
    print(f"| ranks | stage | fp32{kind} ms | " + " | ".join(f"{n}{kind} ms | {n}{kind} / fp32" for n in names) + " |")
    print("|---|---|---|" + "---|---|" * len(names))


def print_row(case, cells):
    """One case's row: cells = [fp32 ms, then (ms, ratio) per variant]."""
    print("| %d | %d | %.1f | " % (case[0], case[1], cells[0]) +
          " | ".join("%.1f | %.2f" % tuple(cells[i:i + 2]) for i in range(1, len(cells), 2)) + " |")


def load_average():
    with open("/proc/loadavg") as f:
        return f.read().split()[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/zerotrain")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--skip", type=int, default=3)
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--stages", default="1,2,3")
    ap.add_argument("--avx2", action="store_true", help="force the AVX2-only path (ZT_CPU_ISA, OPENBLAS_CORETYPE)")
    ap.add_argument("--csv")
    args = ap.parse_args()
    try:
        ranks = [int(r) for r in args.ranks.split(",")]
        stages = [int(s) for s in args.stages.split(",")]
    except ValueError:
        sys.exit("bf16_cost.py: --ranks and --stages expect comma-separated integers")
    if args.rounds < 1 or args.skip < 0 or args.steps < args.skip + 2 or min(ranks) < 1 or \
            not set(stages) <= {0, 1, 2, 3}:
        sys.exit("bf16_cost.py: --rounds >= 1, --steps >= --skip + 2, ranks >= 1 and stages in 0..3 expected")
    with open("/proc/cpuinfo") as f:
        flags = f.read().split()
    for flag, path in (("avx512_bf16", "dpbf16"), ("avx2", "native")):
        if flag not in flags or (args.avx2 and path == "dpbf16"):
            print(f"{'--avx2' if flag in flags else 'no ' + flag + ' on this CPU'}: the {path} variant is left out")
            VARIANTS[:] = [v for v in VARIANTS if v[2] != path]
    cases = [(r, s) for r in ranks for s in stages]
    times = {(c, v[0]): [] for c in cases for v in VARIANTS}  # each run's median step ms
    steps = {(c, v[0]): [] for c in cases for v in VARIANTS}  # every step ms, pooled over rounds
    headers = {}
    print(f"load average at start {load_average()}", flush=True)
    with tempfile.TemporaryDirectory() as d:
        args.model = os.path.join(d, "model.json")
        with open(args.model, "w") as f:
            json.dump(MODEL, f)
        for r in range(args.rounds):
            for c in cases:
                for v in VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]:  # each slot in turn
                    step_ms, header = run(args, d, c[0], c[1], v)
                    ms = statistics.median(step_ms)
                    times[(c, v[0])].append(ms)
                    steps[(c, v[0])] += step_ms
                    headers[(c[0], v[0])] = header
                    print(f"round {r + 1}: {c[0]} rank(s), stage {c[1]}, {v[0]}: {ms:.1f} ms (load average "
                          f"{load_average()})", flush=True)
    print(f"load average at end {load_average()}")
    for (r, name), h in sorted(headers.items()):
        print(f"{r} rank(s), {name}: {h}")
    print(f"GPT 5.3 M parameters (V=2048 T=128 L=6 H=4 C=256), micro-batch 4 per rank; ms per step, median over "
          f"{args.rounds} interleaved rounds of each run's median after {args.skip} steps; ratio = median of the "
          f"per-round ratios to fp32")
    names = [v[0] for v in VARIANTS[1:]]
    rows = []
    print_table("", names)
    for c in cases:
        f32 = times[(c, "fp32")]
        cells = [statistics.median(f32)]
        for n in names:
            cells += [statistics.median(times[(c, n)]), statistics.median(x / f for x, f in zip(times[(c, n)], f32))]
        print_row(c, cells)
        rows.append([c[0], c[1]] + cells)
    print(f"\nEvery step time after {args.skip} steps pooled over the {args.rounds} rounds: 10th percentile, ms, and "
          f"its ratio to fp32's")
    print_table(" p10", names)
    for c, row in zip(cases, rows):
        f32 = percentile(steps[(c, "fp32")], 0.1)
        cells = [f32]
        for n in names:
            x = percentile(steps[(c, n)], 0.1)
            cells += [x, x / f32]
        print_row(c, cells)
        row += cells
    if args.csv:
        with open(args.csv, "w") as f:
            cols = [f"{n.replace(' ', '_')}_ms,{n.replace(' ', '_')}_over_fp32" for n in names]
            cols_p10 = [f"{n.replace(' ', '_')}_p10_ms,{n.replace(' ', '_')}_p10_over_fp32" for n in names]
            f.write("ranks,stage,fp32_ms," + ",".join(cols) + ",fp32_p10_ms," + ",".join(cols_p10) + "\n")
            for row in rows:
                f.write(",".join(str(x) if isinstance(x, int) else "%.4f" % x for x in row) + "\n")


if __name__ == "__main__":
    main()
