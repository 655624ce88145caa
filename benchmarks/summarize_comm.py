#!/usr/bin/env python3
"""Summarise repeated zt_comm_bench runs (their --csv files) into one markdown table.

Each CSV row is one (op, ranks, size) measured in one run: ours vs the direct library call on
the same buffers, best of --rounds. Repeated runs are independent job launches; this prints,
per (op, size), the median over runs of our bus bandwidth and the direct call's (GB/s), and the
median and the minimum over runs of ratio = busbw(ours) / busbw(direct).

    python3 benchmarks/summarize_comm.py run1.csv run2.csv run3.csv [--min-bytes 1M]
"""
import argparse
import csv
import statistics
import sys
from collections import defaultdict


def die(message):
    print(f"summarize_comm.py: {message}", file=sys.stderr)
    sys.exit(2)


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    t = text.strip().upper()
    try:
        if t and t[-1] in units:
            return int(float(t[:-1]) * units[t[-1]])
        return int(t)
    except ValueError:
        die(f"--min-bytes '{text}': expected a byte count like 4096, 64K or 1M")


def human(nbytes):
    """'16 MiB'; sizes the benchmark rounded down to a multiple of ranks·element get a '≈'."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        whole = round(nbytes / scale)
        if whole >= 1 and abs(nbytes - whole * scale) <= 64:
            return f"{whole} {unit}" if nbytes == whole * scale else f"≈{whole} {unit}"
    return f"{nbytes} B"


REQUIRED = {"op", "ranks", "bytes", "ours_busbw_gbs", "direct_busbw_gbs", "busbw_ratio"}


def load(paths):
    rows = defaultdict(list)  # (op, ranks, bytes) -> [(ours, direct, ratio)] one per run
    order = []
    for path in paths:
        try:
            with open(path, newline="") as f:
                reader = csv.DictReader(f)
                missing = REQUIRED - set(reader.fieldnames or [])
                if missing:
                    die(f"{path}: not a zt_comm_bench CSV (missing columns {sorted(missing)})")
                for r in reader:
                    key = (r["op"], int(r["ranks"]), int(r["bytes"]))
                    if key not in rows:
                        order.append(key)
                    rows[key].append((float(r["ours_busbw_gbs"]), float(r["direct_busbw_gbs"]),
                                      float(r["busbw_ratio"])))
        except OSError as e:
            die(f"{path}: cannot read ({e.strerror})")
        except (KeyError, ValueError) as e:
            die(f"{path}: malformed row ({e})")
    return order, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv", nargs="+", help="zt_comm_bench --csv outputs, one per run")
    ap.add_argument("--min-bytes", default="0", help="only sizes >= this (e.g. 1M)")
    a = ap.parse_args()
    floor = parse_size(a.min_bytes)
    order, rows = load(a.csv)
    print("| op | ranks | size | runs | ours busbw (GB/s, median) | direct busbw (GB/s, median) "
          "| ratio median | ratio min |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    worst = None
    op_rank = {}
    for op, _, _ in order:
        op_rank.setdefault(op, len(op_rank))
    for key in sorted(order, key=lambda k: (k[1], op_rank[k[0]], k[2])):
        op, ranks, nbytes = key
        if nbytes < floor:
            continue
        runs = rows[key]
        ours = statistics.median(r[0] for r in runs)
        direct = statistics.median(r[1] for r in runs)
        ratios = [r[2] for r in runs]
        lo = min(ratios)
        print(f"| {op} | {ranks} | {human(nbytes)} | {len(runs)} | {ours:.3f} | {direct:.3f} "
              f"| {statistics.median(ratios):.2f} | {lo:.2f} |")
        if worst is None or lo < worst[0]:
            worst = (lo, op, ranks, nbytes)
    if worst:
        print(f"\nlowest single-run ratio: {worst[0]:.2f} ({worst[1]}, {worst[2]} ranks, {human(worst[3])})")


if __name__ == "__main__":
    main()
