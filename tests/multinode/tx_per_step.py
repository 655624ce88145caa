#!/usr/bin/env python3
"""Bytes each emulated node sends per training step (run by emulated-cluster.sh --tx-report).

Watches rank 0's --metrics JSONL; each time a step line appears, it reads every node's
/sys/class/net/eth0/statistics/tx_bytes inside that node's namespace. The bytes of a step are the
counter's growth since the previous step line (step 1's include the start-up: launching the
daemons, wiring up MPI, the first broadcast), and its wall time ("wall_ms") the time between the
two lines, which unlike the step's own step_ms includes everything between steps. When several
step lines appear between two reads, or more appear while the counters are read (a watcher that
fell behind a fast run), bytes and time are split evenly over them and marked "shared": N.
On SIGTERM it reads the file once more, then writes one JSON line per step to --out and a table
to stderr.
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PREFIX = os.environ.get("ZT_MN_PREFIX", "ztmn")
POLL_S = 0.002


class NodeCounter:
    """A shell inside node i's namespace that prints eth0's tx_bytes for every line it reads
    (one process per node for the whole run: `ip netns exec` per read would cost milliseconds)."""

    def __init__(self, index):
        self.name = "node%d" % index
        loop = "while read -r _; do cat /sys/class/net/eth0/statistics/tx_bytes; done"
        self.proc = subprocess.Popen(["ip", "netns", "exec", "%s-node%d" % (PREFIX, index), "sh", "-c", loop],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, universal_newlines=True)

    def read(self):
        self.proc.stdin.write("\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


class StepWatcher:
    """Complete lines appended to the metrics file since the last call, parsed."""

    def __init__(self, path):
        self.path, self.offset, self.partial = path, 0, ""

    def new_steps(self):
        try:
            with open(self.path) as f:
                f.seek(self.offset)
                text = f.read()
                self.offset = f.tell()
        except FileNotFoundError:
            return []
        lines = (self.partial + text).split("\n")
        self.partial = lines.pop()
        return [json.loads(ln) for ln in lines if ln.strip()]


def watch(counters, watcher, stopping):
    """Rows, one per step line, until stopping is non-empty (then after one last read)."""
    last, last_t = [c.read() for c in counters], time.monotonic()
    rows = []
    while True:
        final = bool(stopping)
        steps = watcher.new_steps()
        while steps:
            now, now_t = [c.read() for c in counters], time.monotonic()
            later = watcher.new_steps()  # lines written while the counters were read: their bytes are in now
            if not later:
                break
            steps += later
        if steps:
            for st in steps:
                rows.append({"step": st["step"], "step_ms": st.get("step_ms"), "shared": len(steps),
                             "wall_ms": (now_t - last_t) * 1000 / len(steps),
                             "tx_bytes": {c.name: (n - l) // len(steps) for c, n, l in zip(counters, now, last)}})
            last, last_t = now, now_t
        if final:
            return rows
        time.sleep(POLL_S)


def print_table(rows, names):
    print("bytes sent per step by each node (eth0 tx_bytes; step 1 includes start-up):", file=sys.stderr)
    print("  step   step ms   wall ms  " + "".join("%14s" % ("%s B" % n) for n in names), file=sys.stderr)
    for r in rows:
        shared = "  (split over %d steps)" % r["shared"] if r["shared"] > 1 else ""
        sent = "".join("%14d" % r["tx_bytes"][n] for n in names)
        print("  %4d  %8.1f  %8.1f  %s%s" % (r["step"], r["step_ms"] or 0.0, r["wall_ms"], sent, shared),
              file=sys.stderr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--metrics", required=True, help="rank 0's --metrics JSONL")
    ap.add_argument("--nodes", type=int, required=True)
    ap.add_argument("--out", required=True, help="JSON lines: one per step")
    args = ap.parse_args()

    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    counters = [NodeCounter(i) for i in range(args.nodes)]
    rows = watch(counters, StepWatcher(args.metrics), stopping)
    for c in counters:
        c.close()
    with open(args.out, "w") as f:
        for r in rows:
            f.write(json.dumps(r, sort_keys=True) + "\n")
    print_table(rows, [c.name for c in counters])


if __name__ == "__main__":
    main()
