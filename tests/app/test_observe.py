"""End-to-end tests of where-the-time-goes outputs of `zerotrain train` and `zerotrain explain`
(CPU backend, 2 ranks under mpirun):

* wall_clock_breakdown: progress lines and metrics rows (every rank) carry the breakdown fields.
* --trace: valid trace-event JSON, merged and per rank; lanes in time order; every collective
  slice is in the comm log with the same op and bytes; per traced step, the ops match explain;
  flow arrows from backward to reduction.
* comms_logger prints a per-op table per rank; --comm-log writes one JSON line per collective.
* Breakdown and tracing on vs off: loss curves bitwise identical.
* explain's collective list == the comm log of a 1-step run, stages 0-3.
* Bad input exits 2 naming the flag.
"""
import collections
import json
import os
import re
import subprocess
import unittest

from e2e_case import TempDirCase

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1"]


def ds(stage, **extra):
    z = {"stage": stage, "overlap_comm": True, "reduce_bucket_size": 3000, "allgather_bucket_size": 5000,
         "stage3_param_persistence_threshold": 100, "stage3_prefetch_bucket_size": 3000,
         "stage3_max_live_parameters": 20000}
    cfg = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4, "zero_optimization": z,
           "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}
    cfg.update(extra)
    return cfg


def explain_collectives(stdout):
    """(op, label, count, bytes, dtype) per line of explain's collective list."""
    out = []
    for line in stdout.splitlines():
        m = re.match(r"\s+\d+\s+(?:micro \d+|boundary)\s+\S+(?: u\d+| step)?\s+(\w+)\s+(.+?)\s+count (\d+)\s+(\d+) B\s+(\w+)$",
                     line)
        if m:
            out.append((m.group(1), m.group(2).strip(), int(m.group(3)), int(m.group(4)), m.group(5)))
    return out


class ObserveCase(TempDirCase):
    """Runs `zerotrain train` at 2 ranks and `zerotrain explain` on configs written in the test's directory."""

    def run_cmd(self, cmd, check=True):
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if check and p.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
        return p

    def train(self, cfg, steps, *extra, check=True):
        c = self.write("ds_%d.json" % len(os.listdir(self.d)), cfg)
        return self.run_cmd([MPIEXEC] + MPI_FLAGS + ["-np", "2", BIN, "train", "--config", c, "--model", self.model,
                                                     "--data", "markov:vocab=64,order=1,seed=3", "--steps",
                                                     str(steps), "--log-every", "1"] + list(extra), check)

    def explain(self, cfg):
        c = self.write("explain.json", cfg)
        return self.run_cmd([BIN, "explain", "--config", c, "--model", self.model, "--world-size", "2"]).stdout


class Observe(ObserveCase):

    def test_breakdown_trace_comm_log_and_comms_logger(self):
        m, tdir, clog = (os.path.join(self.d, x) for x in ("m.jsonl", "trace", "comm.jsonl"))
        cfg = ds(2, wall_clock_breakdown=True, comms_logger={"enabled": True})
        p = self.train(cfg, 4, "--metrics", m, "--trace", tdir, "--trace-steps", "2:3", "--comm-log", clog)
        steps = [l for l in p.stdout.splitlines() if l.startswith("step ")]
        self.assertEqual(len(steps), 4)
        for l in steps:
            self.assertRegex(l, r"fwd [\d.]+ ms bwd [\d.]+ ms optim [\d.]+ ms \| comm busy [\d.]+ ms exposed [\d.]+ ms "
                                r"idle wait [\d.]+ ms")
        self.assertIn("wall_clock_breakdown per rank", p.stdout)
        # The communication's own exposed time: at each wait the least over ranks, so never above a
        # rank's own exposed time, step by step and so in the medians.
        per_rank = [float(x) for x in re.findall(r"^  rank \d: .* exposed ([\d.]+) ms", p.stdout, re.M)]
        own = re.findall(r"^  all ranks: exposed ([\d.]+) ms the communication's own", p.stdout, re.M)
        self.assertEqual((len(per_rank), len(own)), (2, 1), p.stdout)
        self.assertLessEqual(float(own[0]), min(per_rank), p.stdout)
        self.assertEqual(len(re.findall(r"rank \d comms_logger", p.stdout)), 2, p.stdout)
        for path in (m, m + ".rank1"):
            rows = [json.loads(l) for l in open(path)]
            self.assertEqual(len(rows), 4)
            for r in rows:
                for k in ("fwd_ms", "bwd_ms", "optim_ms", "comm_busy_ms", "comm_exposed_ms", "comm_wait_idle_ms",
                          "overlap_pct", "step_ms"):
                    self.assertIn(k, r)
                # exposed is stall time while the comm stream worked: never above busy (float rounding aside),
                # and the phases plus both parts of the stalls tile the compute stream's window.
                self.assertLessEqual(r["comm_exposed_ms"], r["comm_busy_ms"] + 0.01, r)
                parts = r["fwd_ms"] + r["bwd_ms"] + r["optim_ms"] + r["comm_exposed_ms"] + r["comm_wait_idle_ms"]
                self.assertAlmostEqual(parts, r["breakdown_window_ms"], delta=1e-3 + 1e-6 * r["breakdown_window_ms"])
        logged = {}
        for rank, path in ((0, clog), (1, clog + ".rank1")):
            for l in open(path):
                e = json.loads(l)
                logged[(rank, e["seq"])] = e
        merged = json.load(open(os.path.join(tdir, "trace.json")))["traceEvents"]
        for rank in (0, 1):
            self.assertTrue(os.path.exists(os.path.join(tdir, "trace.rank%d.json" % rank)))
        last_ts = {}
        per_step = collections.defaultdict(collections.Counter)
        flows = collections.Counter()
        for e in merged:
            self.assertIn(e["ph"], ("X", "M", "s", "f"))
            if e["ph"] in ("s", "f"):
                flows[e["ph"]] += 1
            if e["ph"] != "X":
                continue
            for k in ("name", "ts", "dur", "pid", "tid"):
                self.assertIn(k, e)
            lane = (e["pid"], e["tid"])
            self.assertGreaterEqual(e["ts"], last_ts.get(lane, -1e18), "lane %s out of order at %s" % (lane, e["name"]))
            last_ts[lane] = e["ts"]
            if e["tid"] == 1:
                a = e["args"]
                c = logged[(e["pid"], a["seq"])]
                self.assertEqual((c["op"], c["bytes"], c["label"]), (a["op"], a["bytes"], a["label"]))
                per_step[(e["pid"], a["step"])][a["op"]] += 1
        self.assertEqual(sorted(per_step), [(0, 2), (0, 3), (1, 2), (1, 3)])
        planned = collections.Counter(c[0] for c in explain_collectives(self.explain(cfg)))
        for key, ops in per_step.items():
            self.assertEqual(ops, planned, key)
        self.assertGreater(flows["s"], 0)
        self.assertEqual(flows["s"], flows["f"])

    def test_timing_leaves_the_loss_curve_bitwise_equal(self):
        curves = []
        for on in (False, True):
            m = os.path.join(self.d, "m%d.jsonl" % on)
            extra = ["--trace", os.path.join(self.d, "t")] if on else []
            self.train(ds(3, wall_clock_breakdown=on), 3, "--metrics", m, *extra)
            curves.append([json.loads(l)["loss"] for l in open(m)])
        self.assertEqual(curves[0], curves[1])

    def test_explain_equals_a_one_step_run(self):
        for stage in range(4):
            cfg = ds(stage)
            planned = explain_collectives(self.explain(cfg))
            self.assertGreater(len(planned), 1)
            clog = os.path.join(self.d, "c%d.jsonl" % stage)
            self.train(cfg, 1, "--comm-log", clog)
            # The trainer's control exchanges (per-step agreement, verdicts) are logged too; the plan lists data collectives.
            entries = [e for e in map(json.loads, open(clog)) if e["op"] not in ("gather_strings", "max_over_ranks")]
            got = [(e["op"], e["label"], e["count"], e["bytes"], e["dtype"]) for e in entries][-len(planned):]
            self.assertEqual(got, planned, "stage %d" % stage)

    def test_explain_nodes_counts_the_bytes_each_node_sends(self):
        # 4 ranks on 2 nodes: the MPI backend's direct exchange sends 2*(4-2)/4 = all of each
        # reduce-scatter's and all-gather's bytes off the node; NCCL's rings (4-1)/4 of them.
        for stage in (2, 3):
            c = self.write("nodes%d.json" % stage, ds(stage, train_batch_size=16))
            out = self.run_cmd([BIN, "explain", "--config", c, "--model", self.model, "--world-size", "4",
                                "--nodes", "2"]).stdout
            planned = explain_collectives(out)
            self.assertTrue(planned and all(op in ("reduce_scatter", "all_gather") for op, *_ in planned), out)
            total = sum(b for _, _, _, b, _ in planned)
            mpi = int(re.search(r"\((\d+) B\) with the MPI backend", out).group(1))
            nccl = int(re.search(r"\((\d+) B\) with NCCL", out).group(1))
            self.assertEqual(mpi, total, out)
            self.assertEqual(nccl, round(0.75 * total), out)
            self.assertIn("across 2 nodes of 2 ranks, %d of the %d collectives cross nodes" % (len(planned), len(planned)), out)
        p = self.run_cmd([BIN, "explain", "--config", c, "--model", self.model, "--world-size", "4", "--nodes", "3"],
                         check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--world-size 4 is not a multiple of --nodes 3", p.stderr)

    def test_bad_input_exits_2(self):
        p = self.train(ds(1), 1, "--trace", self.d, "--trace-steps", "5:2", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--trace-steps", p.stderr)
        p = self.train(ds(1), 1, "--comm-log", "/nonexistent/dir/c.jsonl", check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--comm-log", p.stderr)
        p = self.run_cmd([BIN, "explain", "--config", "/nonexistent.json", "--model", self.model, "--world-size", "2"],
                         check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("/nonexistent.json", p.stderr)
        p = self.run_cmd([BIN, "explain", "--model", self.model], check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("--world-size", p.stderr)
        p = self.run_cmd([BIN, "explain", "--help"])
        self.assertIn("usage: zerotrain explain", p.stdout)


if __name__ == "__main__":
    unittest.main()
