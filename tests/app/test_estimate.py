"""`zerotrain estimate` and `check-config --model` (CPU backend):

* the --json estimate equals a real run's --memory-report (predicted_bytes, and the measured
  bytes of every predicted category) for gpt-tiny at 2 ranks, stages 2 and 3, recompute on/off,
  and at 1-4 ranks (stage 2), where the communicator category is the MPI chunk scratch's formula;
* --device cuda estimates NCCL's buffers from its defaults and NCCL_BUFFSIZE / NCCL_MAX_NCHANNELS
  (a bad value exits 2 naming the variable);
* GPT-2 124M at N=1024 answers in well under a second; a too-small --device-memory exits 1 with
  the deficit;
* train's fit check on the CPU device refuses a model too large for this node with the same
  per-rank figure the estimate gives for that config (device total + host total);
* ZeRO-Offload's claims: a 10B GPT fits one 32 GB device at stage 2 with offload_optimizer (device
  model states = 2Ψ, no device gradients), 13B fits 40 GB, a 20B GPT at 4 ranks, stage 3 with
  optimizer and parameter offload keeps no model state on the device, and the predicted model
  states equal the ZeRO-Offload formula printed beside them;
* bf16 at stages 0-1 keeps only the fp32 gradient accumulator (4 bytes per element beside the
  2-byte params): 6 + 12/N bytes per parameter, predicted == measured, and the line says so;
* bad input (bad model, bad config, world size 0, bad size) exits 2 with a message naming it.
"""
import json
import os
import re
import subprocess
import tempfile
import time
import unittest

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
REPO = os.environ.get("ZT_REPO", ".")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1"]
TINY = os.path.join(REPO, "configs/models/gpt-tiny.json")
GPT2 = os.path.join(REPO, "configs/models/gpt2-124m.json")


def run(args, **kw):
    return subprocess.run([BIN] + args, capture_output=True, text=True, timeout=120, **kw)


class Estimate(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def config(self, stage, recompute="none"):
        path = os.path.join(self.d, f"s{stage}_{recompute}.json")
        with open(path, "w") as f:
            json.dump({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
                       "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
                       "zero_optimization": {"stage": stage, "reduce_bucket_size": 2000},
                       "activation_checkpointing": {"zerotrain_recompute": recompute}}, f)
        return path

    def check_against_run(self, stage, recompute, np_):
        cfg = self.config(stage, recompute)
        est, rep = os.path.join(self.d, "est.json"), os.path.join(self.d, "rep.json")
        p = run(["estimate", "--config", cfg, "--model", TINY, "--world-size", str(np_), "--device", "cpu",
                 "--json", est])
        self.assertEqual(p.returncode, 0, p.stderr)
        t = subprocess.run([MPIEXEC] + MPI_FLAGS + ["-np", str(np_), BIN, "train", "--config", cfg, "--model", TINY,
                            "--device", "cpu", "--data", "markov:vocab=64,order=1,seed=1", "--steps", "1",
                            "--memory-report", rep], capture_output=True, text=True, timeout=300)
        self.assertEqual(t.returncode, 0, t.stdout + t.stderr)
        e, r = json.load(open(est)), json.load(open(rep))
        self.assertEqual((e["stage"], e["world_size"]), (r["stage"], r["world_size"]))
        self.assertEqual(len(e["ranks"]), np_)
        for re_, rr in zip(e["ranks"], r["ranks"]):
            for cat, v in re_["categories"].items():
                got = rr["categories"][cat]
                what = (stage, recompute, np_, cat)
                self.assertEqual(v["predicted_bytes"], got["predicted_bytes"], what)
                if v["predicted_bytes"] is not None:
                    measured = got["peak_bytes"] if cat == "gather" else got["measured_bytes"]
                    self.assertEqual(v["predicted_bytes"], measured, what)
        return e

    def test_estimate_equals_memory_report(self):
        for stage in (2, 3):
            for recompute in ("none", "block"):
                self.check_against_run(stage, recompute, 2)

    def test_communicator_buffers_at_1_to_4_ranks(self):
        # The MPI chunk scratch: none at one rank, else max(2(n-1) x 256 KiB, n x 16 KiB) (docs/design.md).
        for np_ in (1, 2, 3, 4):
            e = self.check_against_run(2, "none", np_)
            want = 0 if np_ == 1 else max(2 * (np_ - 1) * 262144, np_ * 16384)
            for r in e["ranks"]:
                self.assertEqual(r["categories"]["communicator"]["predicted_bytes"], want, np_)

    def test_nccl_buffers_are_estimated_from_the_environment(self):
        cfg = self.config(2)

        def communicator(world, env):
            est = os.path.join(self.d, "nccl.json")
            p = run(["estimate", "--config", cfg, "--model", TINY, "--world-size", str(world), "--device", "cuda",
                     "--json", est], env=dict(os.environ, **env))
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("nccl communicator", p.stdout)
            return json.load(open(est))["ranks"][0]["categories"]["communicator"]["predicted_bytes"]

        defaults = {"NCCL_BUFFSIZE": "", "NCCL_LL_BUFFSIZE": "", "NCCL_LL128_BUFFSIZE": "", "NCCL_MAX_NCHANNELS": ""}
        simple, ll, ll128 = 4 << 20, 8 * 512 * 8 * 16, 120 * 640 * 8 * 8  # NCCL's compile-time defaults
        barrier = 4  # the one float barrier() all-reduces
        self.assertEqual(communicator(1, defaults), barrier)  # no peers, no transport buffers
        self.assertEqual(communicator(8, defaults), barrier + 32 * 2 * (simple + ll + ll128))
        small = dict(defaults, NCCL_BUFFSIZE="1048576", NCCL_MAX_NCHANNELS="4")
        self.assertEqual(communicator(8, small), barrier + 4 * 2 * ((1 << 20) + ll + ll128))
        for var, bad in (("NCCL_BUFFSIZE", "4MB"), ("NCCL_BUFFSIZE", "0"), ("NCCL_MAX_NCHANNELS", "65")):
            p = run(["estimate", "--config", cfg, "--model", TINY, "--world-size", "2", "--device", "cuda"],
                    env=dict(os.environ, **dict(defaults, **{var: bad})))
            self.assertEqual(p.returncode, 2, (var, bad, p.stdout + p.stderr))
            self.assertIn(var + "='" + bad + "'", p.stderr)

    def test_gpt2_at_1024_ranks_is_fast_and_checks_the_budget(self):
        cfg = self.config(3)
        t0 = time.monotonic()
        p = run(["estimate", "--config", cfg, "--model", GPT2, "--world-size", "1024", "--nodes", "128",
                 "--device-memory", "80GiB"])
        self.assertLess(time.monotonic() - t0, 5.0)  # well under a second on a quiet machine
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("fits", p.stdout)
        p = run(["estimate", "--config", cfg, "--model", GPT2, "--world-size", "2", "--device-memory", "100MiB"])
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("deficit", p.stdout)
        c = run(["check-config", cfg, "--model", GPT2, "--world-size", "2"])
        self.assertEqual(c.returncode, 0, c.stderr)
        self.assertIn("memory estimate per rank", c.stderr)

    def test_train_fit_check_is_the_estimate(self):
        model = os.path.join(self.d, "gpt-10b.json")
        with open(model, "w") as f:
            json.dump({"type": "gpt", "name": "gpt-10b", "vocab_size": 50257, "n_ctx": 1024, "n_layer": 48,
                       "n_head": 32, "n_embd": 4096}, f)
        for stage in (1, 3):
            cfg, est = self.config(stage), os.path.join(self.d, f"est{stage}.json")
            p = run(["estimate", "--config", cfg, "--model", model, "--world-size", "2", "--device", "cpu",
                     "--json", est])
            self.assertEqual(p.returncode, 0, p.stderr)
            totals = re.search(r"device total per rank: (\d+) B .*; host total per rank: (\d+) B", p.stdout)
            self.assertIsNotNone(totals, p.stdout)
            figure = int(totals.group(1)) + int(totals.group(2))
            ranks = json.load(open(est))["ranks"]
            self.assertEqual(figure, max(sum(c["predicted_bytes"] or 0 for c in r["categories"].values()) for r in ranks))
            t = subprocess.run([MPIEXEC] + MPI_FLAGS + ["-np", "2", BIN, "train", "--config", cfg, "--model", model,
                                "--device", "cpu", "--data", "markov:vocab=64,order=1,seed=1", "--steps", "1"],
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(t.returncode, 2, t.stdout + t.stderr)
            m = re.search(r"gpt-10b.json: [0-9.e+]+ parameters need (\d+) B \([0-9.e+]+ GiB\) per rank as "
                          r"`zerotrain estimate` predicts it \(ZeRO stage (\d), world 2\), but this node has (\d+) B",
                          t.stderr)
            self.assertIsNotNone(m, t.stderr)
            self.assertEqual((int(m.group(1)), int(m.group(2))), (figure, stage))
            self.assertGreater(figure, int(m.group(3)))
            self.assertNotIn("Traceback", t.stderr)

    def offload_estimate(self, config, model, world, device_memory):
        est = os.path.join(self.d, "offload.json")
        p = run(["estimate", "--config", os.path.join(REPO, "configs/ds/offload", config), "--model",
                 os.path.join(REPO, "configs/models", model), "--world-size", str(world), "--recompute", "block",
                 "--device", "cuda", "--device-memory", device_memory, "--json", est])
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)  # 0: fits
        self.assertIn("fits: device memory per rank", p.stdout)
        m = re.search(r"device: predicted (\d+) B .*formula .* = (\d+) B\n\s+host:   predicted (\d+) B .*= (\d+) B",
                      p.stdout)
        self.assertIsNotNone(m, p.stdout)
        self.assertEqual(m.group(1), m.group(2))  # device model states == the formula's
        self.assertEqual(m.group(3), m.group(4))  # host model states == the formula's
        with open(est) as f:
            cats = json.load(f)["ranks"][0]["categories"]
        return {k: v["predicted_bytes"] for k, v in cats.items()}, int(m.group(1))

    def test_bf16_stages_0_1_keep_fp32_grads_only(self):
        # Backward accumulates straight into the fp32 gradient buffer: grads are 4 bytes per element
        # where params are 2 (no 16-bit copy), so model states are (6 + 12/N) bytes per element.
        for stage in (0, 1):
            e = self.check_against_run(stage, "none", 2)  # predicted == measured, categories as below
            n = 64
            est = os.path.join(self.d, f"gpt2_s{stage}.json")
            p = run(["estimate", "--config", self.config(stage), "--model", GPT2, "--world-size", str(n), "--json",
                     est])
            self.assertEqual(p.returncode, 0, p.stderr)
            c = {k: v["predicted_bytes"] for k, v in json.load(open(est))["ranks"][0]["categories"].items()}
            elems = c["params"] // 2
            self.assertEqual(c["grads"], 4 * elems, f"stage {stage}: fp32 grads only")
            shards = 1 if stage == 0 else n
            self.assertEqual(c["master"] + c["optimizer_moments"], 12 * elems // shards, f"stage {stage}")
            per_param = re.search(r"B here \(([0-9.]+) B per parameter\)", p.stdout)
            self.assertIsNotNone(per_param, p.stdout)
            self.assertAlmostEqual(float(per_param.group(1)), 6 + 12 / shards, delta=0.01)
            self.assertEqual(e["ranks"][0]["categories"]["grads"]["predicted_bytes"],
                             2 * e["ranks"][0]["categories"]["params"]["predicted_bytes"])

    def test_zero_offload_fits_what_the_paper_fits(self):
        cats, device_states = self.offload_estimate("zero2_offload_fp16.json", "gpt-10b.json", 1, "32GB")
        self.assertEqual(cats["grads"], 0)
        self.assertEqual(device_states, cats["params"])  # 2Ψ: the fp16 parameters only
        self.assertEqual(cats["host_grads"] * 3, cats["host_moments"] * 3 // 2)  # 4Ψ vs 8Ψ
        self.offload_estimate("zero2_offload_fp16.json", "gpt-13b.json", 1, "40GB")
        cats, device_states = self.offload_estimate("zero3_offload_params_fp16.json", "gpt-20b.json", 4, "24GB")
        self.assertEqual(device_states, 0)
        device_total = sum(v for k, v in cats.items() if v is not None and not k.startswith(("host_", "pinned")))
        self.assertLess(device_total, 10 * 10**9)  # the working set only: a few GB, not Ψ/N-sized

    def test_bad_input_exits_2(self):
        bad_model = os.path.join(self.d, "bad_model.json")
        with open(bad_model, "w") as f:
            f.write('{"type": "gpt", "vocab_size": 0}')
        bad_cfg = os.path.join(self.d, "bad_cfg.json")
        with open(bad_cfg, "w") as f:
            f.write('{"train_micro_batch_size_per_gpu": "x"')
        cfg = self.config(1)
        cases = {
            "bad model": ["--config", cfg, "--model", bad_model, "--world-size", "2"],
            "missing model": ["--config", cfg, "--model", os.path.join(self.d, "nope.json"), "--world-size", "2"],
            "bad config": ["--config", bad_cfg, "--model", TINY, "--world-size", "2"],
            "world size 0": ["--config", cfg, "--model", TINY, "--world-size", "0"],
            "bad size": ["--config", cfg, "--model", TINY, "--world-size", "2", "--device-memory", "lots"],
            "bad recompute": ["--config", cfg, "--model", TINY, "--world-size", "2", "--recompute", "all"],
            "bad device": ["--config", cfg, "--model", TINY, "--world-size", "2", "--device", "tpu"],
        }
        for what, args in cases.items():
            p = run(["estimate"] + args)
            self.assertEqual(p.returncode, 2, what + "\n" + p.stdout + p.stderr)
            self.assertIn("error:", p.stderr, what)


if __name__ == "__main__":
    unittest.main()
