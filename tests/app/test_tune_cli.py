"""`zerotrain tune` from the command line:

* the best config it writes is a DeepSpeed config that resolves, keeps the global batch, and whose
  `simulate` and `estimate` give the step time and memory tune printed for it; every candidate it
  prints fits --device-memory, and they are in order of predicted step time;
* settings that produce the same plan are collapsed (fewer distinct plans than settings);
* a device memory nothing fits in exits 1 saying how much the smallest needs;
* the tutorial's setting — a GPT of 1.3B parameters on 4 RTX 3090 (24 GiB) — gets a config that fits;
* --confirm runs the top candidates with mpirun on the CPU backend and prints predicted vs measured;
* bad input exits 2 naming it.
"""
import json
import os
import re
import subprocess
import tempfile
import unittest

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
REPO = os.environ.get("ZT_REPO", ".")
TINY = os.path.join(REPO, "configs/models/gpt-tiny.json")
GPT13 = os.path.join(REPO, "configs/models/gpt-1.3b.json")
H100 = os.path.join(REPO, "configs/hardware/h100_sxm_8x.json")
RTX = os.path.join(REPO, "configs/hardware/rtx3090_4x_pcie.json")

LINE = re.compile(r"^\s*(\d+)\.\s+([\d.]+) ms per step,\s+([\d.]+) ms exposed comm,.*device ([\d.]+) GiB per rank")


def run(args, timeout=300):
    return subprocess.run([BIN] + args, capture_output=True, text=True, timeout=timeout)


class Tune(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, doc):
        path = os.path.join(self.d, name)
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    def base(self, batch=16, stage=1):
        return self.write("base.json", {"train_batch_size": batch, "bf16": {"enabled": True},
                                        "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
                                        "zero_optimization": {"stage": stage}})

    def tune(self, config, model, world, hardware, *extra):
        out = os.path.join(self.d, "best.json")
        p = run(["tune", "--config", config, "--model", model, "--world-size", str(world), "--hardware", hardware,
                 "--out", out] + list(extra))
        return p, out

    def candidates(self, text):
        return [(int(m.group(1)), float(m.group(2)), float(m.group(3)), float(m.group(4)))
                for m in map(LINE.match, text.splitlines()) if m]

    def test_best_config_agrees_with_simulate_and_estimate(self):
        p, out = self.tune(self.base(batch=16), TINY, 2, H100, "--top", "8", "--device-memory", "1GiB")
        self.assertEqual(p.returncode, 0, p.stderr + p.stdout)
        m = re.search(r"tune: (\d+) settings, (\d+) distinct plans, (\d+) fit", p.stdout)
        settings, plans, fit = map(int, m.groups())
        self.assertLess(plans, settings)  # identical plans collapsed
        self.assertGreater(fit, 0)
        rows = self.candidates(p.stdout)
        self.assertEqual(len(rows), min(8, fit))
        times = [r[1] for r in rows]
        self.assertEqual(times, sorted(times))
        for r in rows:
            self.assertLessEqual(r[3], 1.0)  # every printed candidate fits in 1 GiB
        with open(out) as f:
            best = json.load(f)
        mbs, gas = best["train_micro_batch_size_per_gpu"], best["gradient_accumulation_steps"]
        self.assertEqual(mbs * gas * 2, 16)  # the global batch kept
        self.assertEqual(best["optimizer"]["type"], "AdamW")  # the rest of the config kept
        sim = os.path.join(self.d, "sim.json")
        s = run(["simulate", "--config", out, "--model", TINY, "--world-size", "2", "--hardware", H100, "--json", sim])
        self.assertEqual(s.returncode, 0, s.stderr)
        with open(sim) as f:
            self.assertAlmostEqual(json.load(f)["step_ms"], rows[0][1], places=3)
        e = run(["estimate", "--config", out, "--model", TINY, "--world-size", "2", "--device", "cuda",
                 "--device-memory", "1GiB"])
        self.assertEqual(e.returncode, 0, e.stdout + e.stderr)
        total = int(re.search(r"device total per rank: (\d+) B", e.stdout).group(1))
        self.assertAlmostEqual(total / 2**30, rows[0][3], places=2)

    def test_nothing_fits(self):
        p, out = self.tune(self.base(), TINY, 2, H100, "--device-memory", "1MiB")
        self.assertEqual(p.returncode, 1, p.stderr + p.stdout)
        self.assertIn("nothing fits; the smallest needs", p.stdout)
        self.assertFalse(os.path.exists(out))

    def test_tutorial_setting_fits_on_rtx3090(self):
        cfg = self.write("tut.json", {"bf16": {"enabled": True}, "train_batch_size": 32,
                                      "zero_optimization": {"stage": 2, "overlap_comm": True, "reduce_bucket_size": 5e5}})
        p, out = self.tune(cfg, GPT13, 4, RTX, "--top", "3")
        self.assertEqual(p.returncode, 0, p.stderr + p.stdout)
        print(p.stdout)
        e = run(["estimate", "--config", out, "--model", GPT13, "--world-size", "4", "--device", "cuda",
                 "--device-memory", "24GiB"])
        self.assertEqual(e.returncode, 0, e.stdout + e.stderr)
        self.assertIn("fits: device memory per rank", e.stdout)

    def test_confirm_runs_the_top_candidates(self):
        p, _ = self.tune(self.base(batch=8), TINY, 2, H100, "--top", "2", "--confirm", "2", "--confirm-steps", "5",
                         "--confirm-rounds", "2")
        self.assertEqual(p.returncode, 0, p.stderr + p.stdout)
        print(p.stdout)
        measured = re.findall(r"(\d)\. predicted\s+[\d.]+ ms, measured\s+([\d.]+) ms per step", p.stdout)
        self.assertEqual([m[0] for m in measured], ["1", "2"])
        self.assertTrue(all(float(m[1]) > 0 for m in measured))
        rho = float(re.search(r"Spearman rank correlation predicted vs measured (-?[\d.]+)", p.stdout).group(1))
        self.assertTrue(-1 <= rho <= 1)

    def test_bad_input_exits_2(self):
        base = self.base()
        cases = [
            (["--config", base, "--model", TINY, "--world-size", "2"], "--hardware"),
            (["--config", base, "--model", TINY, "--world-size", "2", "--hardware", H100, "--top", "0"], "--top"),
            (["--config", base, "--model", TINY, "--world-size", "3", "--hardware", H100, "--nodes", "2"], "--nodes"),
            (["--config", base, "--model", TINY, "--world-size", "2", "--hardware", H100, "--device-memory", "lots"],
             "--device-memory"),
            (["--config", base, "--model", TINY, "--world-size", "2", "--hardware", H100, "--frobnicate"], "--frobnicate"),
            (["--config", os.path.join(self.d, "missing.json"), "--model", TINY, "--world-size", "2", "--hardware", H100],
             "missing.json"),
            (["--config", self.write("odd.json", {"train_batch_size": 3, "zero_optimization": {"stage": 1}}),
              "--model", TINY, "--world-size", "2", "--hardware", H100], "train_batch_size"),
        ]
        for args, needle in cases:
            p = run(["tune"] + args)
            self.assertEqual(p.returncode, 2, f"{args}: {p.stdout}{p.stderr}")
            self.assertIn(needle, p.stderr, args)


if __name__ == "__main__":
    unittest.main()
