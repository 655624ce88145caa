"""`zerotrain simulate` against the engine on this machine (CPU backend, 2 ranks):

* `simulate --calibrate` under mpirun writes a profile that loads as --hardware (every key
  present, efficiencies in (0, 1], peaks and bandwidths > 0, the time beside compute in [0, 1 s));
  bad calibrate flags exit 2;
* for stages 0-3 the bytes a rank sends in one simulated step equal those of one step in the comm
  log of a real run;
* for stages 0-3 the simulated step runs the executor's ops: the collectives of one traced step of
  `train --trace` on rank 0 (name and label, with multiplicity) equal the simulated step's, and so
  do its unit forwards and backwards;
* benchmarks/train/sim_validation.py on a small subset: the prediction is within loose bounds of
  the measured step (median error at most 100%: a smoke test of units and scale, not the accuracy
  table, which is docs/benchmarks.md's).
"""
import collections
import json
import os
import subprocess
import sys
import tempfile
import unittest

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
REPO = os.environ.get("ZT_REPO", ".")
TINY = os.path.join(REPO, "configs/models/gpt-tiny.json")
MPI = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2"]


def run(args, timeout=600):
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout)


def events(path):
    with open(path) as f:
        t = json.load(f)
    return [e for e in (t["traceEvents"] if isinstance(t, dict) else t) if e.get("ph") == "X"]


class SimulateMeasured(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.d = cls.tmp.name
        cls.profile = os.path.join(cls.d, "local.json")
        p = run(MPI + [BIN, "simulate", "--calibrate", "--config", cls.config(2, 2), "--model", TINY,
                       "--out", cls.profile])
        assert p.returncode == 0, p.stdout + p.stderr
        print(p.stdout)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def config(cls, stage, gas):
        path = os.path.join(cls.d, "s%d_g%d.json" % (stage, gas))
        with open(path, "w") as f:
            json.dump({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": gas,
                       "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
                       "zero_optimization": {"stage": stage, "reduce_bucket_size": 20000, "allgather_bucket_size": 20000,
                                             "stage3_param_persistence_threshold": 100,
                                             "stage3_prefetch_bucket_size": 20000}}, f)
        return path

    def test_profile_is_complete(self):
        with open(self.profile) as f:
            doc = json.load(f)
        self.assertEqual(doc["gpus_per_node"], 2)
        for k, v in doc["efficiency"].items():
            self.assertTrue(0 < v <= 1, k)
        for k in ("peak_fp32_flops_per_s", "peak_bf16_flops_per_s", "hbm_bytes_per_s", "intra_node_bytes_per_s",
                  "collective_launch_latency_s", "device_memory_bytes"):
            self.assertGreater(doc[k], 0, k)
        self.assertIn("measured on", doc["sources"])
        # A collective's time beside running compute: 0 where the comm thread has a core to itself.
        self.assertGreaterEqual(doc["collective_beside_compute_s"], 0)
        self.assertLess(doc["collective_beside_compute_s"], 1)

    def test_simulated_ops_are_the_executed_ones(self):
        for stage in range(4):
            cfg = self.config(stage, 2)
            trace = os.path.join(self.d, "trace%d" % stage)
            p = run(MPI + [BIN, "train", "--config", cfg, "--model", TINY, "--data", "markov:", "--steps", "3",
                           "--trace", trace, "--trace-steps", "2:2"])
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            sim = os.path.join(self.d, "sim%d.json" % stage)
            s = run([BIN, "simulate", "--config", cfg, "--model", TINY, "--world-size", "2", "--hardware", self.profile,
                     "--trace", sim])
            self.assertEqual(s.returncode, 0, s.stderr)
            measured = events(os.path.join(trace, "trace.rank0.json"))
            predicted = [e for e in events(sim) if e.get("args", {}).get("step", 1) == 1]  # not the previous step's

            def collectives(ev):
                return collections.Counter(e["name"] for e in ev if e.get("cat") == "comm" or e.get("tid") == 1)

            def units(ev):
                return collections.Counter(e["name"] for e in ev if e["name"].split(" ")[0] in ("fwd", "bwd")
                                           and ":" not in e["name"])
            self.assertEqual(collectives(measured), collectives(predicted), "stage %d" % stage)
            self.assertEqual(units(measured), units(predicted), "stage %d" % stage)
            self.assertGreater(sum(collectives(measured).values()), 0)

    def test_simulated_bytes_are_the_comm_logs(self):
        # One steady step's collectives: the comm log of 3 steps minus that of 2 (set-up and
        # teardown collectives cancel), as bytes each rank sends (a ring moves (N-1)/N of a
        # reduce-scatter's or all-gather's buffer, twice that for an all-reduce).
        def sent(path):
            total = 0.0
            for line in open(path):
                c = json.loads(line)
                factor = {"all_reduce": 1.0, "reduce_scatter": 0.5, "all_gather": 0.5}.get(c["op"])
                total += factor * c["bytes"] if factor else 0.0
            return total

        for stage in range(4):
            cfg = self.config(stage, 2)
            logs = []
            for steps in (2, 3):
                log = os.path.join(self.d, "comm%d_%d.jsonl" % (stage, steps))
                p = run(MPI + [BIN, "train", "--config", cfg, "--model", TINY, "--data", "markov:", "--steps", str(steps),
                               "--comm-log", log])
                self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
                logs.append(sent(log))
            js = os.path.join(self.d, "bytes%d.json" % stage)
            s = run([BIN, "simulate", "--config", cfg, "--model", TINY, "--world-size", "2", "--hardware", self.profile,
                     "--json", js])
            self.assertEqual(s.returncode, 0, s.stderr)
            with open(js) as f:
                simulated = json.load(f)["comm_bytes_per_rank"]
            self.assertEqual(logs[1] - logs[0], simulated, "stage %d" % stage)

    def test_validation_smoke(self):
        out = os.path.join(self.d, "val")
        p = run([sys.executable, os.path.join(REPO, "benchmarks/train/sim_validation.py"), "--zerotrain", BIN,
                 "--ranks", "2", "--stages", "1,3", "--overlap", "1", "--buckets", "50000", "--gas", "1",
                 "--micro", "4", "--steps", "6", "--skip", "2", "--repeats", "1", "--out-dir", out, "--check", "1.0,-1"])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        print(p.stdout)
        with open(os.path.join(out, "validation.csv")) as f:
            self.assertEqual(len(f.read().strip().splitlines()), 3)  # header + 2 points

    def test_bad_calibrate_flags_exit_2(self):
        for args, needle in [(["--calibrate", "--config", self.config(1, 1), "--model", TINY], "--out"),
                             (["--calibrate", "--config", self.config(1, 1), "--model", TINY, "--out", "x.json",
                               "--world-size", "2"], "--world-size"),
                             (["--config", self.config(1, 1), "--model", TINY, "--world-size", "2", "--hardware",
                               self.profile, "--out", "x.json"], "--calibrate")]:
            p = run([BIN, "simulate"] + args)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn(needle, p.stderr)


if __name__ == "__main__":
    unittest.main()
