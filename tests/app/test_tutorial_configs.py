"""Configs as people write them: configs/ds/tutorial, no "optimizer" section (docs/config.md §4).

* Each tutorial config trains 5 steps at 2 ranks on the tiny GPT: exit 0, finite losses, the last
  below the first; `check-config` (under the same mpirun) gives the same verdict; both print the
  one line naming the client optimizer, and check-config's JSON has no optimizer section.
* The client optimizer from flags trains bit for bit like the equivalent config section:
  `--optimizer sgd --lr 0.01 --momentum 0.9` vs {"type": "SGD", ...}, and the defaults vs an
  explicit AdamW section (lr 3e-4, betas [0.9, 0.95], eps 1e-8, weight decay 0.1): the same
  losses, grad norms and final weights.
* Flags beside a config section, bad flag values and flags that do not apply: exit 2 from both
  commands, naming the flag.
* Schedules with the client optimizer: WarmupLR warms up to the client's --lr; OneCycle cycles
  AdamW's beta1 (runs, lr follows the cycle).
* activation_checkpointing.partition_activations: true trains, with the one "not used" warning.
"""
import json
import math
import os
import subprocess
import tempfile
import unittest

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
REPO = os.environ.get("ZT_REPO", ".")
TUTORIAL = os.path.join(REPO, "configs", "ds", "tutorial")
MODEL = os.path.join(REPO, "configs", "models", "gpt-tiny.json")
DATA = "markov:vocab=64,order=1,seed=3"
MPI = [MPIEXEC, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2",
       "-x", "OMP_NUM_THREADS=1", "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1",
       "-x", "ZT_COMM_TIMEOUT_S=120"]
CONFIGS = ["zero2_overlap.json", "zero1.json", "zero2_small_buckets.json", "zero3_offload.json",
           "micro1_gas8_offload_cpuckpt.json"]
ADAMW_DEFAULT_LINE = ("optimizer: AdamW lr 0.0003 betas (0.9, 0.95) eps 1e-08 weight_decay 0.1 (client optimizer: "
                      "the defaults; a config \"optimizer\" section takes precedence); scheduler: none (constant lr)")


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def load(name):
    with open(os.path.join(TUTORIAL, name)) as f:
        return json.load(f)


class TutorialConfigs(unittest.TestCase):
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

    def train(self, cfg, tag, extra=(), steps=5):
        metrics = os.path.join(self.d, tag + ".jsonl")
        weights = os.path.join(self.d, tag + ".safetensors")
        rc, out, err = run(MPI + [BIN, "train", "--config", cfg, "--model", MODEL, "--data", DATA, "--steps",
                                  str(steps), "--seed", "5", "--metrics", metrics, "--save-weights", weights,
                                  *extra])
        rows = []
        if rc == 0:
            with open(metrics) as f:
                rows = [json.loads(line) for line in f if line.strip()]
        return rc, out, err, rows, weights

    def check_config(self, cfg, extra=()):
        return run(MPI + [BIN, "check-config", cfg, "--model", MODEL, *extra])

    def test_each_tutorial_config_trains_as_written(self):
        for name in CONFIGS:
            with self.subTest(config=name):
                cfg = os.path.join(TUTORIAL, name)
                self.assertNotIn("optimizer", load(name))
                rc, out, err, rows, _ = self.train(cfg, name)
                self.assertEqual(rc, 0, f"{name}: train exited {rc}\n{out}\n{err}")
                losses = [r["loss"] for r in rows]
                self.assertEqual(len(losses), 5, out)
                self.assertTrue(all(math.isfinite(x) for x in losses), losses)
                self.assertLess(losses[-1], losses[0], f"{name}: loss did not decrease: {losses}")
                self.assertTrue(all(r["lr"] == 3e-4 for r in rows), [r["lr"] for r in rows])  # constant lr
                self.assertEqual(sum(line.startswith("optimizer: ") for line in out.splitlines()), 1, out)
                self.assertIn(ADAMW_DEFAULT_LINE, out)
                crc, cout, cerr = self.check_config(cfg)
                self.assertEqual(crc, rc, f"{name}: check-config exit {crc} != train exit {rc}\n{cerr}")
                self.assertNotIn("optimizer", json.loads(cout), "check-config must not invent an optimizer section")
                self.assertEqual(cerr.count(ADAMW_DEFAULT_LINE), 1, cerr)

    def assert_same_run(self, a, b, what):
        rc_a, out_a, err_a, rows_a, w_a = a
        rc_b, out_b, err_b, rows_b, w_b = b
        self.assertEqual(rc_a, 0, f"{what}: {out_a}\n{err_a}")
        self.assertEqual(rc_b, 0, f"{what}: {out_b}\n{err_b}")
        self.assertEqual(len(rows_a), 5)
        for key in ("loss", "grad_norm", "lr"):
            self.assertEqual([r[key] for r in rows_a], [r[key] for r in rows_b], f"{what}: {key} differs")
        with open(w_a, "rb") as fa, open(w_b, "rb") as fb:
            self.assertTrue(fa.read() == fb.read(), f"{what}: final weights differ")

    def test_client_flags_equal_the_equivalent_section(self):
        base = load("zero2_overlap.json")
        plain = self.write("plain.json", base)
        sgd_section = self.write("sgd.json", dict(base, optimizer={"type": "SGD",
                                                                   "params": {"lr": 0.01, "momentum": 0.9}}))
        flags = self.train(plain, "sgd_flags", ["--optimizer", "sgd", "--lr", "0.01", "--momentum", "0.9"])
        self.assertIn("optimizer: SGD lr 0.01 momentum 0.9 weight_decay 0 (client optimizer from --optimizer, --lr, "
                      "--momentum, defaults for the rest", flags[1])
        section = self.train(sgd_section, "sgd_section")
        self.assertIn("optimizer: SGD lr 0.01 momentum 0.9 weight_decay 0 (the config's \"optimizer\" section)",
                      section[1])
        self.assert_same_run(flags, section, "SGD flags vs section")
        adamw_section = self.write("adamw.json", dict(base, optimizer={
            "type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}}))
        self.assert_same_run(self.train(plain, "adamw_defaults"), self.train(adamw_section, "adamw_section"),
                             "AdamW defaults vs section")
        different = self.train(plain, "adamw_lr", ["--lr", "1e-3"])  # the flags do reach the optimizer
        self.assertNotEqual([r["loss"] for r in different[3]][1:], [r["loss"] for r in flags[3]][1:])

    def test_bad_flags_exit_2_naming_the_flag(self):
        plain = os.path.join(TUTORIAL, "zero2_overlap.json")
        section = self.write("section.json", dict(load("zero2_overlap.json"),
                                                  optimizer={"type": "AdamW", "params": {"lr": 1e-3}}))
        cases = [
            (plain, ["--lr", "abc"], "--lr 'abc'"),
            (plain, ["--lr", "0"], "--lr '0'"),
            (plain, ["--betas", "0.9"], "--betas '0.9'"),
            (plain, ["--betas", "0.9,1.5"], "--betas (B2) '1.5'"),
            (plain, ["--eps", "-1"], "--eps '-1'"),
            (plain, ["--weight-decay", "x"], "--weight-decay 'x'"),
            (plain, ["--optimizer", "lion"], "--optimizer 'lion'"),
            (plain, ["--momentum", "0.9"], "--momentum: does not apply to --optimizer adamw"),
            (plain, ["--optimizer", "sgd", "--betas", "0.9,0.95"], "--betas: does not apply to --optimizer sgd"),
            (section, ["--lr", "0.01"], "--lr: given, but the config"),
        ]
        for cfg, flags, needle in cases:
            with self.subTest(flags=flags):
                rc, out, err, _, _ = self.train(cfg, "bad", flags)
                self.assertEqual(rc, 2, f"{flags}: train exited {rc}\n{out}\n{err}")
                self.assertIn(needle, err)
                crc, cout, cerr = self.check_config(cfg, flags)
                self.assertEqual(crc, 2, f"{flags}: check-config exited {crc}\n{cerr}")
                self.assertIn(needle, cerr)
                self.assertEqual(cout, "")

    def test_schedules_with_the_client_optimizer(self):
        base = load("zero2_overlap.json")
        warm = self.write("warm.json", dict(base, scheduler={
            "type": "WarmupLR", "params": {"warmup_num_steps": 4, "warmup_type": "linear"}}))
        rc, out, err, rows, _ = self.train(warm, "warm", ["--lr", "0.002"], steps=6)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("scheduler: WarmupLR (the config's \"scheduler\" section)", out)
        # Step k uses f(k - 2) (optim/lr_schedule.h); linear warm-up: f(t) = min(t, 4) / 4 of the client's lr.
        expected = [0.002 * min(max(k - 2, 0), 4) / 4 for k in range(1, 7)]
        for got, want in zip([r["lr"] for r in rows], expected):
            self.assertAlmostEqual(got, want, places=12)
        one = self.write("one.json", dict(base, scheduler={
            "type": "OneCycle", "params": {"cycle_min_lr": 1e-4, "cycle_max_lr": 1e-3, "cycle_first_step_size": 2}}))
        rc, out, err, rows, _ = self.train(one, "one", steps=5)
        self.assertEqual(rc, 0, out + err)
        self.assertNotIn("cycle_momentum is disabled", err)  # AdamW has betas: momentum cycles
        lrs = [r["lr"] for r in rows]
        self.assertAlmostEqual(max(lrs), 1e-3, places=12)
        self.assertAlmostEqual(lrs[0], 1e-4, places=12)
        rc, out, err, _, _ = self.train(one, "one_sgd", ["--optimizer", "sgd"], steps=2)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("cycle_momentum is disabled because the optimizer has no betas", err)

    def test_partition_activations_is_not_used(self):
        cfg = self.write("pa.json", dict(load("zero2_overlap.json"),
                                         activation_checkpointing={"partition_activations": True}))
        rc, out, err, rows, _ = self.train(cfg, "pa")
        self.assertEqual(rc, 0, out + err)
        self.assertEqual(err.count("set but not used"), 1, err)
        self.assertIn("activation_checkpointing.partition_activations = true", err)
        plain = self.train(os.path.join(TUTORIAL, "zero2_overlap.json"), "pa_plain")
        self.assertEqual([r["loss"] for r in rows], [r["loss"] for r in plain[3]])
        crc, _, cerr = self.check_config(cfg)
        self.assertEqual(crc, 0, cerr)
        self.assertEqual(cerr.count("set but not used"), 1, cerr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
