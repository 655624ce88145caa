#!/usr/bin/env python3
"""Runs zt_host_optim_bench (ours) and bench_host_optim_torch.py (torch.optim.AdamW) interleaved
— ours, torch foreach, torch for-loop, torch fused (if this torch has it on CPU), then again —
for --rounds rounds per (params, threads), and prints one markdown table of the medians over
rounds (each run itself reports the median of its --iters steps).

Columns: ms/step; GB/s of state traffic at 28 B/element (read p, m, v, g + write p, m, v, fp32);
memcpy GB/s (same thread count, 14 B/element copied = 28 B/element read + written, measured by
the C++ run); our fraction of it; speed-up of ours over each torch mode.

    python3 benchmarks/bench_host_optim_run.py --bench build/benchmarks/zt_host_optim_bench \
        --params 1M,16M,128M --threads 1,2 --rounds 3
"""
import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode == 3:  # torch mode unavailable (fused)
        return None
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stdout}{r.stderr}")
    line = r.stdout.strip().splitlines()[-1]
    return dict(kv.split("=", 1) for kv in line.split())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", default="build/benchmarks/zt_host_optim_bench")
    ap.add_argument("--python", default="/usr/bin/python3", help="interpreter that has torch")
    ap.add_argument("--params", default="1M,16M,128M")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    torch_py = os.path.join(HERE, "bench_host_optim_torch.py")
    rows = []
    for params in args.params.split(","):
        for threads in args.threads.split(","):
            common = ["--params", params, "--threads", threads, "--iters", str(args.iters)]
            results = {}
            for _ in range(args.rounds):
                runs = [("ours", [args.bench] + common)]
                runs += [(f"torch-{m}", [args.python, torch_py, "--mode", m] + common) for m in ("foreach", "forloop", "fused")]
                for name, cmd in runs:
                    res = run(cmd)
                    if res is not None:
                        results.setdefault(name, []).append(res)
            med = {k: statistics.median(float(r["adam_ms_per_step"]) for r in v) for k, v in results.items()}
            ours = results["ours"]
            copy_gbs = statistics.median(float(r["memcpy_GB_per_s"]) for r in ours)
            n = int(ours[0]["params"])
            for name in results:
                gbs = 28.0 * n / (med[name] * 1e6)
                frac = f"{gbs / copy_gbs:.2f}" if name == "ours" else ""
                label = ours[0]["impl"] if name == "ours" else name
                rows.append((params, threads, label, med[name], gbs, copy_gbs, frac,
                             "" if name == "ours" else f"{med[name] / med['ours']:.1f}x"))
            sys.stdout.flush()
    print(f"\nmedians of {args.rounds} interleaved rounds x {args.iters} steps; fp32 p/m/v/g, no param_out\n")
    print("| params | threads | implementation | ms/step | state GB/s (28 B/elem) | memcpy GB/s | fraction of memcpy | ours is faster by |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]:.2f} | {r[4]:.2f} | {r[5]:.2f} | {r[6]} | {r[7]} |")


if __name__ == "__main__":
    main()
