"""`zerotrain sample` and `train --sample-every` (CPU backend).

* A tiny byte-level GPT trained on "abcdefghi" repeated continues any prompt of that text greedily:
  from a weights file, an HF folder (train --save-weights DIR/), a checkpoint (--resume, --tag),
  and a bf16 file (consolidate --dtype bf16), all with the same output.
* Seeded sampling gives the same text on every run; generation stops at n_ctx + 1 tokens.
* Bad inputs exit 2 with a message naming the input.
* train --sample-every at ZeRO stage 3 on 2 ranks prints "sample @ step S:" lines every N steps and
  at the end, and its losses are bitwise those of the same run without samples.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

BIN = os.path.abspath(os.environ.get("ZT_BIN", "build/zerotrain"))
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1", "-x", "ZT_COMM_TIMEOUT_S=60"]
ENV = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
BYTE_GPT = {"type": "gpt", "vocab_size": 256, "n_ctx": 32, "n_layer": 2, "n_head": 2, "n_embd": 32}
# 9 bytes: the text: stream's sequences start at multiples of n_ctx = 32, so every phase of the
# cycle appears at every position and the model must learn the sequence, not the position.
CYCLE = "abcdefghi"


def config(stage):
    return {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4,
            "zero_optimization": {"stage": stage, "reduce_bucket_size": 3000, "stage3_param_persistence_threshold": 64},
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "weight_decay": 0.0}}}


def expected(prompt, n):
    """The prompt continued by n bytes of the cycle."""
    start = CYCLE.index(prompt[-1]) + 1
    return prompt + "".join(CYCLE[(start + i) % len(CYCLE)] for i in range(n))


class SampleCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        cls.model = cls.write("byte_gpt.json", BYTE_GPT)
        cls.text = cls.write("cycle.txt", CYCLE * 2000)
        cls.cfg = cls.write("stage0.json", config(0))
        cls.ckpt = os.path.join(cls.tmp, "ckpt")
        cls.hf = os.path.join(cls.tmp, "hf") + "/"
        p = subprocess.run([BIN, "train", "--config", cls.cfg, "--model", cls.model, "--data", "text:" + cls.text,
                            "--steps", "300", "--device", "cpu", "--save-weights", cls.hf,
                            "--save-checkpoint", cls.ckpt], capture_output=True, text=True, timeout=300, env=ENV)
        assert p.returncode == 0, p.stdout + p.stderr
        cls.train_out = p.stdout

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def write(cls, name, obj):
        path = os.path.join(cls.tmp, name)
        with open(path, "w") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj))
        return path

    def sample(self, args, expect=0):
        p = subprocess.run([BIN, "sample", "--device", "cpu"] + args, capture_output=True, encoding="latin-1",
                           timeout=120, env=ENV)
        self.assertEqual(p.returncode, expect, p.stdout + p.stderr)
        return p

    def test_greedy_continues_the_training_text(self):
        self.assertRegex(self.train_out, r"step +300 \| loss 0\.0")  # it has learnt the cycle
        for prompt in ["abcdefghi", "cde", "i"]:
            p = self.sample(["--weights", self.hf, "--model", self.model, "--prompt", prompt, "--tokens", "20",
                             "--temperature", "0"])
            self.assertEqual(p.stdout, expected(prompt, 20) + "\n")
            self.assertIn("20 token(s)", p.stderr)
            self.assertIn("key/value cache", p.stderr)

    def test_every_weights_source_gives_the_same_text(self):
        bf16 = os.path.join(self.tmp, "bf16.safetensors")
        c = subprocess.run([BIN, "consolidate", self.ckpt, bf16, "--dtype", "bf16"], capture_output=True, text=True)
        self.assertEqual(c.returncode, 0, c.stderr)
        base = ["--model", self.model, "--prompt", "fgh", "--tokens", "25", "--temperature", "0"]
        outs = {
            "folder": self.sample(["--weights", self.hf] + base).stdout,
            "file": self.sample(["--weights", self.hf + "model.safetensors"] + base).stdout,
            "checkpoint": self.sample(["--resume", self.ckpt] + base).stdout,
            "tag": self.sample(["--resume", self.ckpt, "--tag", "global_step300"] + base).stdout,
            "bf16": self.sample(["--weights", bf16] + base).stdout,
        }
        for name, out in outs.items():
            self.assertEqual(out, expected("fgh", 25) + "\n", name)

    def test_seeded_sampling_is_reproducible(self):
        args = ["--weights", self.hf, "--model", self.model, "--prompt", "abc", "--tokens", "20",
                "--temperature", "3", "--top-k", "50", "--top-p", "0.95", "--seed", "11"]
        first = self.sample(args).stdout
        self.assertEqual(self.sample(args).stdout, first)
        self.assertTrue(first.startswith("abc"))
        # At this temperature the draws matter: other seeds give other text.
        others = {self.sample(args[:-1] + [str(s)]).stdout for s in (12, 13, 14)}
        self.assertTrue(others - {first}, others)

    def test_help(self):
        p = self.sample(["--help"])
        for needle in ["usage: zerotrain sample", "--top-p", "n_ctx + 1", "exit codes"]:
            self.assertIn(needle, p.stdout)

    def test_generation_stops_at_the_context(self):
        p = self.sample(["--weights", self.hf, "--model", self.model, "--prompt", "ab", "--tokens", "100",
                         "--temperature", "0"])
        # n_ctx = 32 positions: the sequence ends at 33 tokens.
        self.assertEqual(p.stdout, expected("ab", 31) + "\n")
        self.assertIn("stopped after 31 of 100 token(s)", p.stderr)
        self.assertIn("n_ctx=32", p.stderr)

    def test_device_cuda(self):
        """Without a visible GPU --device cuda is exit 2; with one, the same greedy text as the CPU."""
        args = ["--weights", self.hf, "--model", self.model, "--prompt", "bcd", "--tokens", "20", "--temperature", "0"]
        gpu = shutil.which("nvidia-smi") and subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
        p = subprocess.run([BIN, "sample", "--device", "cuda"] + args, capture_output=True, encoding="latin-1",
                           timeout=120, env=ENV)
        if gpu:
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout, expected("bcd", 20) + "\n")
        else:
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn("--device cuda", p.stderr)

    def test_bad_inputs_exit_2(self):
        other = self.write("other.json", dict(BYTE_GPT, n_embd=16))
        mlp = self.write("mlp.json", {"type": "mlp", "dims": [4, 8, 2], "activation": "gelu", "task": "regression"})
        small = self.write("small_vocab.json", dict(BYTE_GPT, vocab_size=64))
        ok = ["--model", self.model, "--prompt", "abc", "--tokens", "5"]
        cases = [
            (["--weights", os.path.join(self.tmp, "missing.safetensors")] + ok, "missing.safetensors"),
            (["--weights", self.tmp] + ok, "without model.safetensors"),
            (["--weights", self.hf, "--model", other, "--prompt", "abc", "--tokens", "5"], "shape"),
            (["--resume", self.ckpt, "--model", other, "--prompt", "abc", "--tokens", "5"], "another model"),
            (["--resume", self.ckpt, "--tag", "global_step7"] + ok, "global_step7"),
            (["--weights", self.hf, "--model", mlp, "--prompt", "abc", "--tokens", "5"], "is an MLP; sampling needs a token model file (gpt or llama)"),
            (["--weights", self.hf, "--model", small, "--prompt", "abc", "--tokens", "5"], "outside the model's vocabulary"),
            (["--weights", self.hf] + ok[:-1] + ["0"], "--tokens '0'"),
            (["--weights", self.hf] + ok + ["--top-p", "1.5"], "--top-p"),
            (["--weights", self.hf] + ok + ["--top-p", "0"], "--top-p"),
            (["--weights", self.hf] + ok + ["--temperature", "-1"], "--temperature"),
            (["--weights", self.hf] + ok + ["--top-k", "-3"], "--top-k"),
            (["--weights", self.hf] + ok + ["--seed", "x"], "--seed"),
            (ok, "one of --weights"),
            (["--weights", self.hf, "--resume", self.ckpt] + ok, "one of --weights"),
            (["--weights", self.hf, "--tag", "x"] + ok, "--tag"),
            (["--weights", self.hf, "--model", self.model, "--prompt", "", "--tokens", "5"], "empty prompt"),
            (["--weights", self.hf, "--model", self.model, "--prompt", "a" * 33, "--tokens", "5"], "n_ctx=32"),
            (["--weights", self.hf] + ok + ["--bogus"], "unknown flag"),
            (["--weights", self.hf] + ok + ["--device", "tpu"], "--device 'tpu'"),
            (["--weights", self.hf] + ok + ["--tokens"], "needs a value"),
        ]
        for args, needle in cases:
            p = self.sample(args, expect=2)
            self.assertIn(needle, p.stderr, args)
            self.assertTrue(p.stderr.startswith("zerotrain sample: error: "), p.stderr)
            self.assertEqual(p.stdout, "", args)

    def run_train(self, stage, ranks, extra, name):
        metrics = os.path.join(self.tmp, name + ".jsonl")
        cmd = [MPIEXEC, "-np", str(ranks)] + MPI_FLAGS + [
            BIN, "train", "--config", self.write(name + ".json", config(stage)), "--model", self.model,
            "--data", "text:" + self.text, "--steps", "25", "--device", "cpu", "--metrics", metrics] + extra
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        with open(metrics) as f:
            losses = [json.loads(line)["loss"] for line in f if line.strip()]
        return p.stdout, losses

    def test_sample_every_at_stage3_leaves_training_unchanged(self):
        out, with_samples = self.run_train(3, 2, ["--sample-every", "10", "--sample-prompt", "abc",
                                                  "--sample-tokens", "12"], "s3_samples")
        plain_out, plain = self.run_train(3, 2, [], "s3_plain")
        self.assertEqual(len(plain), 25)
        self.assertEqual(with_samples, plain)  # bitwise: the JSON floats are printed exactly
        steps = [int(s) for s in re.findall(r"^sample @ step (\d+): ", out, re.M)]
        self.assertEqual(steps, [10, 20, 25])
        for s in steps:
            line = re.search(r"^sample @ step %d: (.*)$" % s, out, re.M).group(1)
            self.assertTrue(line.startswith("abc"), line)
        self.assertNotIn("sample @", plain_out)

    def test_sample_every_bad_flags_exit_2(self):
        mlp = self.write("mlp2.json", {"type": "mlp", "dims": [4, 8, 2], "activation": "gelu", "task": "regression"})
        base = [BIN, "train", "--config", self.cfg, "--data", "text:" + self.text, "--steps", "2", "--device", "cpu"]
        cases = [
            (["--model", self.model, "--sample-every", "5"], "--sample-prompt"),
            (["--model", self.model, "--sample-prompt", "ab"], "--sample-every"),
            (["--model", self.model, "--sample-tokens", "4"], "need --sample-every"),
            (["--model", self.model, "--sample-every", "0", "--sample-prompt", "ab"], "--sample-every"),
            (["--model", self.model, "--sample-every", "5", "--sample-prompt", "ab", "--sample-temperature", "-2"],
             "--sample-temperature"),
            (["--model", self.model, "--sample-every", "5", "--sample-prompt", "x" * 40], "n_ctx=32"),
            (["--model", mlp, "--data", "teacher:noise=0.1,seed=1", "--sample-every", "5", "--sample-prompt", "ab"],
             "needs a token model (gpt or llama)"),
        ]
        for args, needle in cases:
            p = subprocess.run(base + args, capture_output=True, text=True, timeout=120, env=ENV)
            self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
            self.assertIn(needle, p.stderr, args)


if __name__ == "__main__":
    unittest.main(verbosity=2)
