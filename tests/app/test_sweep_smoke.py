"""Smoke run of benchmarks/train/overlap_sweep.py: 2 points (stage 2, overlap off/on) x 1 repeat at
2 ranks on the tiny GPT; the CSVs and table exist, every point has its breakdown columns, and the
PNG exists when matplotlib is importable (otherwise the script says so and the test still passes)."""
import csv
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

REPO = os.environ.get("ZT_REPO", ".")
BIN = os.environ.get("ZT_BIN", "build/zerotrain")
H100 = os.path.join(REPO, "configs/hardware/h100_sxm_8x.json")


class SweepSmoke(unittest.TestCase):
    def test_two_points(self):
        with tempfile.TemporaryDirectory() as d:
            model = os.path.join(d, "gpt.json")
            with open(model, "w") as f:
                json.dump({"type": "gpt", "vocab_size": 64, "n_ctx": 16, "n_layer": 2, "n_head": 2, "n_embd": 32}, f)
            out = os.path.join(d, "out")
            p = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", "train", "overlap_sweep.py"),
                                "--zerotrain", BIN, "--model", model, "--data", "markov:vocab=64,order=1,seed=3",
                                "--ranks", "2", "--stages", "2", "--overlap", "0,1",
                                "--buckets", "3000,500000000,1000000000", "--profile", H100,
                                "--repeats", "1", "--steps", "3", "--skip", "1", "--out-dir", out],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            rows = list(csv.DictReader(open(os.path.join(out, "sweep.csv"))))
            # 5e8 and 1e9 elements give the tiny model the same plan: measured once, listed beside it
            self.assertEqual(len(rows), 4)
            self.assertIn("6 grid points, 4 distinct plans measured", p.stdout)
            collapsed = [r for r in rows if "bucket 1000000000" in r["same_plan_as"]]
            self.assertEqual(len(collapsed), 2)
            self.assertTrue(all(r["bucket"] == "500000000" for r in collapsed))
            small = [r for r in rows if r["bucket"] == "3000"]
            self.assertGreater(int(small[0]["buckets"]), int(collapsed[0]["buckets"]))
            for r in rows:
                self.assertGreater(float(r["step_ms"]), 0)
                self.assertGreater(float(r["comm_busy_ms"]), 0)
                self.assertGreater(float(r["pred_step_ms"]), 0)
                self.assertGreaterEqual(float(r["load"]), 0)
            raw = list(csv.DictReader(open(os.path.join(out, "sweep_raw.csv"))))
            self.assertEqual(len(raw), 4 * 3)
            md = open(os.path.join(out, "sweep.md")).read()
            self.assertIn("on_over_off", md)  # overlap on vs off compared per bucket size
            self.assertEqual(md.count("| 2 | 2 | 3000 |") + md.count("| 2 | 2 | 500000000 |"), 2)
            png = os.path.join(out, "sweep_2ranks.png")
            if importlib.util.find_spec("matplotlib"):
                self.assertTrue(os.path.exists(png))
            else:
                self.assertIn("matplotlib not found", p.stdout)
                print("matplotlib absent: PNG skipped (apt-get install python3-matplotlib)")


if __name__ == "__main__":
    unittest.main()
