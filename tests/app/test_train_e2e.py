"""End-to-end tests of `zerotrain train` on the CPU backend, under mpirun.

* GPT on Markov data gets within 0.05 nats of the data's optimal loss (mean of the last steps,
  so batch-to-batch noise does not decide the outcome); MLP on teacher data reaches <= 1.1 sigma^2.
* --save-weights / --init-from round-trip bit for bit across stages and world sizes.
* Bad input (missing file, bad model JSON, bad data spec, bad flag, bad config) -> message, exit 2.
"""
import json
import os
import subprocess
import tempfile
import unittest

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
REPO = os.environ.get("ZT_REPO", ".")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1"]


def write(path, obj):
    with open(path, "w") as f:
        f.write(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def train(np_, args, check=True):
    cmd = [MPIEXEC] + MPI_FLAGS + ["-np", str(np_), BIN, "train"] + args
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p


def mean_last(metrics, n):
    losses = [json.loads(line)["loss"] for line in open(metrics)]
    return sum(losses[-n:]) / n, losses


def best_loss(stdout):
    for line in stdout.splitlines():
        if line.startswith("best achievable loss of this data:"):
            return float(line.split(":")[1].split()[0])
    raise AssertionError("no best-loss line in:\n" + stdout)


class TrainEndToEnd(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.d, name)

    def test_gpt_markov_reaches_optimal_loss(self):
        model = write(self.path("gpt.json"), {"type": "gpt", "vocab_size": 8, "n_ctx": 16, "n_layer": 1,
                                               "n_head": 2, "n_embd": 32})
        cfg = write(self.path("ds.json"), {"train_batch_size": 32, "zero_optimization": {"stage": 1},
                                           "optimizer": {"type": "AdamW", "params": {"lr": 3e-3}}})
        metrics = self.path("m.jsonl")
        p = train(2, ["--config", cfg, "--model", model, "--data", "markov:vocab=8,order=1,seed=1",
                      "--steps", "250", "--metrics", metrics])
        final, losses = mean_last(metrics, 40)
        best = best_loss(p.stdout)
        self.assertLess(final - best, 0.05, f"mean loss of the last 40 steps {final:.4f}, optimum {best:.4f}")
        self.assertGreater(losses[0] - best, 0.3, "training must start far from the optimum")
        rec = json.loads(open(metrics).readline())
        for key in ["step", "loss", "lr", "grad_norm", "clip_coef", "loss_scale", "skipped", "samples", "tokens",
                    "step_ms", "tokens_per_s", "mem_peak_bytes", "memory"]:
            self.assertIn(key, rec)
        self.assertEqual(rec["tokens"], 32 * 16)
        self.assertIn("params", rec["memory"])

    def test_mlp_teacher_reaches_noise_floor(self):
        model = write(self.path("mlp.json"), {"type": "mlp", "dims": [4, 16, 16, 2], "activation": "gelu",
                                               "task": "regression"})
        cfg = write(self.path("ds.json"), {
            "train_batch_size": 128, "zero_optimization": {"stage": 3},
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "weight_decay": 0.0}},
            "scheduler": {"type": "WarmupCosineLR", "params": {"warmup_num_steps": 50, "total_num_steps": 2000,
                                                               "warmup_type": "linear", "cos_min_ratio": 0.01}}})
        metrics = self.path("m.jsonl")
        train(2, ["--config", cfg, "--model", model, "--data", "teacher:noise=0.1,seed=2", "--steps", "2000",
                  "--metrics", metrics, "--log-every", "500"])
        final, _ = mean_last(metrics, 100)
        self.assertLessEqual(final, 1.1 * 0.1 ** 2, f"MSE {final:.5f} vs 1.1 sigma^2 = {1.1 * 0.01:.5f}")

    def test_save_and_init_round_trip_across_stages_and_world_sizes(self):
        model = os.path.join(REPO, "configs/models/gpt-tiny.json")
        data = "markov:vocab=64,order=1,seed=3"
        for (stage_a, np_a, stage_b, np_b) in [(3, 3, 0, 1), (0, 2, 3, 2), (1, 3, 2, 4), (2, 4, 1, 2)]:
            with self.subTest(a=(stage_a, np_a), b=(stage_b, np_b)):
                tbs = 12 * np_a
                cfg_a = write(self.path("a.json"), {"train_batch_size": tbs, "zero_optimization": {"stage": stage_a},
                                                    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})
                cfg_b = write(self.path("b.json"), {"train_batch_size": 4 * np_b,
                                                    "zero_optimization": {"stage": stage_b},
                                                    "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})
                a, b = self.path("a.safetensors"), self.path("b.safetensors")
                train(np_a, ["--config", cfg_a, "--model", model, "--data", data, "--steps", "2",
                             "--save-weights", a])
                train(np_b, ["--config", cfg_b, "--model", model, "--data", data, "--steps", "0",
                             "--init-from", a, "--save-weights", b])
                self.assertEqual(open(a, "rb").read(), open(b, "rb").read(),
                                 "weights saved after loading must equal the loaded file")

    def test_bad_input_exits_2_with_a_message(self):
        model = os.path.join(REPO, "configs/models/gpt-tiny.json")
        cfg = os.path.join(REPO, "configs/ds/stage2.json")
        bad_model = write(self.path("bad_model.json"), {"type": "gpt", "vocab_size": 64, "n_ctx": 32,
                                                        "n_layer": 2, "n_head": 3, "n_embd": 32})
        bad_cfg = write(self.path("bad_cfg.json"), {"train_batch_size": 32,
                                                    "zero_optimization": {"stage": 2, "reduce_bucket_sise": 5}})
        cases = [
            (["--config", self.path("missing.json"), "--model", model, "--data", "markov:vocab=64", "--steps", "1"],
             "missing.json"),
            (["--config", cfg, "--model", bad_model, "--data", "markov:vocab=64", "--steps", "1"], "n_head"),
            (["--config", bad_cfg, "--model", model, "--data", "markov:vocab=64", "--steps", "1"],
             "reduce_bucket_size"),
            (["--config", cfg, "--model", model, "--data", "nonsense:x=1", "--steps", "1"], "nonsense"),
            (["--config", cfg, "--model", model, "--data", "tokens:" + self.path("none.bin"), "--steps", "1"],
             "none.bin"),
            (["--config", cfg, "--model", model, "--data", "markov:vocab=64", "--steps", "-3"], "--steps"),
            (["--config", cfg, "--model", model, "--data", "markov:vocab=64", "--steps", "1", "--bogus"], "--bogus"),
            (["--config", cfg, "--model", model, "--data", "markov:vocab=64", "--steps", "1",
              "--init-from", self.path("nothing.safetensors")], "nothing.safetensors"),
        ]
        for args, needle in cases:
            with self.subTest(needle=needle):
                p = train(2, args, check=False)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn(needle, p.stderr)
                self.assertEqual(p.stderr.count("error:"), 1, "reported once (rank 0):\n" + p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
