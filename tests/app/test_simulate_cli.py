"""`zerotrain simulate` from the command line (no run, no GPU):

* every stage answers (exit 0) with each field printed with its unit; --json parses and agrees
  with the text; --trace is a trace scripts/render_step_svg.py draws;
* a slower inter-node link (a profile copy at 100 Gb/s instead of 400 Gb/s per GPU) predicts a
  slower stage-3 step at N=16 over 2 nodes; overlap_comm off never exposes less communication;
* GPT-2 124M at N=1024 answers quickly (the time is printed; asserted only under 10 s);
* bad input exits 2 naming it: a profile with a missing, unknown or non-positive key, a bad flag,
  a world size the nodes cannot hold.
"""
import json
import os
import re
import subprocess
import tempfile
import time
import unittest

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
REPO = os.environ.get("ZT_REPO", ".")
GPT2 = os.path.join(REPO, "configs/models/gpt2-124m.json")
H100 = os.path.join(REPO, "configs/hardware/h100_sxm_8x.json")


def run(args):
    return subprocess.run([BIN] + args, capture_output=True, text=True, timeout=120)


class Simulate(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def config(self, stage, overlap=True, gas=1):
        path = os.path.join(self.d, f"s{stage}_{overlap}_{gas}.json")
        with open(path, "w") as f:
            json.dump({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": gas, "bf16": {"enabled": True},
                       "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
                       "zero_optimization": {"stage": stage, "overlap_comm": overlap, "reduce_bucket_size": 2e7,
                                             "allgather_bucket_size": 2e7, "stage3_max_reuse_distance": 0}}, f)
        return path

    def profile(self, **changes):
        with open(H100) as f:
            doc = json.load(f)
        for k, v in changes.items():
            if v is None:
                doc.pop(k)
            else:
                doc[k] = v
        path = os.path.join(self.d, "profile%d.json" % len(os.listdir(self.d)))
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    def simulate(self, stage, world=16, hardware=H100, overlap=True, extra=()):
        out = os.path.join(self.d, "sim.json")
        p = run(["simulate", "--config", self.config(stage, overlap), "--model", GPT2, "--world-size", str(world),
                 "--hardware", hardware, "--json", out] + list(extra))
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(out) as f:
            return p.stdout, json.load(f)

    def test_every_stage_prints_fields_with_units(self):
        for stage in range(4):
            text, j = self.simulate(stage)
            for field in (r"step time: +[0-9.]+ ms", r"compute busy: +[0-9.]+ ms", r"comm busy: +[0-9.]+ ms \(\d+ collectives, [0-9.]+ MiB sent per rank\)",
                          r"exposed communication: +[0-9.]+ ms, overlap [0-9.]+%", r"[0-9]+ tokens/s", r"MFU [0-9.]+%",
                          r"critical path \(\d+ slices", r"simulated in [0-9.]+ s"):
                self.assertRegex(text, field, f"stage {stage}")
            step = float(re.search(r"step time: +([0-9.]+) ms", text).group(1))
            self.assertAlmostEqual(j["step_ms"], step, places=2)
            self.assertEqual(j["stage"], stage)
            self.assertGreater(j["tokens_per_s"], 0)
            self.assertTrue(0 < j["mfu"] < 1)
            self.assertGreaterEqual(j["step_ms"] + 1e-9, j["compute_busy_ms"])
            self.assertAlmostEqual(j["critical_path"][-1]["end_ms"], j["step_ms"], places=6)

    def test_trace_renders(self):
        trace, svg = os.path.join(self.d, "t.json"), os.path.join(self.d, "x.svg")
        self.simulate(3, extra=["--trace", trace])
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
        lanes = {e["tid"] for e in events if e["ph"] == "X"}
        self.assertEqual(lanes, {0, 1})
        self.assertTrue(any(e["ph"] == "X" and e["name"].startswith("reduce_scatter") for e in events))
        p = subprocess.run(["python3", os.path.join(REPO, "scripts/render_step_svg.py"), trace, "--out", svg],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(svg) as f:
            self.assertIn("<svg", f.read())

    def test_slower_inter_node_link_is_slower(self):
        _, fast = self.simulate(3, hardware=self.profile(inter_node_bytes_per_s_per_gpu=400e9 / 8))
        _, slow = self.simulate(3, hardware=self.profile(inter_node_bytes_per_s_per_gpu=100e9 / 8))
        self.assertEqual(fast["nodes"], 2)
        self.assertGreater(slow["step_ms"], fast["step_ms"])

    def test_overlap_off_exposes_no_less(self):
        for stage in range(4):
            _, on = self.simulate(stage, overlap=True)
            _, off = self.simulate(stage, overlap=False)
            self.assertGreaterEqual(off["comm_exposed_ms"] + 1e-9, on["comm_exposed_ms"], f"stage {stage}")

    def test_gpt2_at_1024_ranks_is_fast(self):
        start = time.monotonic()
        text, j = self.simulate(3, world=1024)
        took = time.monotonic() - start
        print(f"simulate GPT-2 124M, stage 3, N=1024: {took:.3f} s wall clock")
        self.assertEqual(j["nodes"], 128)
        self.assertLess(took, 10)

    def test_bad_input_exits_2(self):
        cases = [
            (["--hardware", self.profile(hbm_bytes_per_s=None)], "hbm_bytes_per_s"),
            (["--hardware", self.profile(hbm_bandwidth=1)], "hbm_bandwidth"),
            (["--hardware", self.profile(host_link_bytes_per_s=0)], "host_link_bytes_per_s"),
            (["--hardware", os.path.join(self.d, "missing.json")], "missing.json"),
            (["--hardware", H100, "--speed", "1"], "--speed"),
            (["--hardware", H100, "--nodes", "1"], "gpus_per_node 8"),
            (["--hardware", H100, "--nodes", "3"], "--nodes 3"),
        ]
        for extra, needle in cases:
            p = run(["simulate", "--config", self.config(2), "--model", GPT2, "--world-size", "16"] + extra)
            self.assertEqual(p.returncode, 2, f"{extra}: {p.stdout}{p.stderr}")
            self.assertIn(needle, p.stderr, extra)
        p = run(["simulate", "--config", self.config(2), "--model", GPT2, "--hardware", H100])
        self.assertEqual(p.returncode, 2)
        self.assertIn("--world-size", p.stderr)


if __name__ == "__main__":
    unittest.main()
