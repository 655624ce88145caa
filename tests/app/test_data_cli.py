"""File data in `zerotrain train` (CPU backend, mpirun): several files as one stream, jsonl:, shuffle.

* tokens: given as a directory, a glob and an explicit ':' list of the same files in the same
  order trains identically (the same loss on every step), and the data line names the files.
* shuffle=1: a new window order every epoch, rank 0 logs each epoch's first step; a run stopped
  mid-epoch and resumed from its checkpoint ends with weights bitwise equal to the uninterrupted
  run's; without shuffle=1 the losses differ (the order matters).
* jsonl: trains on each line's field (text by default, field=NAME), bytes as tokens.
* Bad paths, bad JSON lines and bad options exit 2 naming the file (and line).
"""
import json
import os
import re
import struct
import subprocess
import unittest

from e2e_case import TempDirCase

BIN = os.path.abspath(os.environ.get("ZT_BIN", "build/zerotrain"))
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1", "-x", "ZT_COMM_TIMEOUT_S=60"]
CONFIG = {"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "zero_optimization": {"stage": 2},
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}}}
BYTE_GPT = {"type": "gpt", "vocab_size": 256, "n_ctx": 16, "n_layer": 1, "n_head": 2, "n_embd": 16}


class DataCli(TempDirCase):
    def setUp(self):
        super().setUp()
        self.cfg = self.write("ds.json", CONFIG)
        self.parts = os.path.join(self.d, "parts")
        os.mkdir(self.parts)
        # 161 + 97 + 81 tokens, n_ctx 16: 10 + 6 + 5 = 21 windows per epoch (2.6 global batches of 8).
        for i, n in enumerate([161, 97, 81]):
            toks = [(7 * j + 3 * i + j // 5) % 64 for j in range(n)]
            with open(os.path.join(self.parts, "train_%d.bin" % i), "wb") as f:
                f.write(struct.pack("<%dH" % n, *toks))

    def train(self, data, args, ranks=2, expect=0, model=None):
        cmd = [MPIEXEC, "-np", str(ranks)] + MPI_FLAGS + [
            BIN, "train", "--config", self.cfg, "--model", model or self.model, "--data", data, "--device", "cpu",
            "--log-every", "1"] + args
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, expect, out)
        return out

    def losses(self, out):
        return re.findall(r"^step +\d+ \| loss ([0-9.]+)", out, re.M)

    def test_dir_glob_and_list_are_one_stream(self):
        files = [os.path.join(self.parts, "train_%d.bin" % i) for i in range(3)]
        runs = {spec: self.train(spec, ["--steps", "4"]) for spec in
                ["tokens:" + self.parts + "/", "tokens:" + self.parts + "/train_*.bin", "tokens:" + ":".join(files)]}
        outs = list(runs.values())
        self.assertEqual(len(self.losses(outs[0])), 4, outs[0])
        for out in outs:
            self.assertEqual(self.losses(out), self.losses(outs[0]), out)
            self.assertIn("3 files in this order", out)
            self.assertIn("21 sequences of 16+1 per epoch", out)
            self.assertIn("data: epoch 2 begins at step 3 (global sequence 21)", out)
        reversed_order = self.train("tokens:" + ":".join(reversed(files)), ["--steps", "4"])
        self.assertNotEqual(self.losses(reversed_order), self.losses(outs[0]))

    def test_shuffle_resumes_bitwise_mid_epoch(self):
        spec = "tokens:" + self.parts + ",shuffle=1"
        whole = os.path.join(self.d, "whole.safetensors")
        out = self.train(spec, ["--steps", "8", "--save-weights", whole])
        self.assertIn("shuffled: a new order every epoch (seed", out)
        for line in ["epoch 2 begins at step 3 (global sequence 21)", "epoch 3 begins at step 6 (global sequence 42)",
                     "epoch 4 begins at step 8 (global sequence 63)"]:
            self.assertIn("data: " + line, out)
        plain = self.train("tokens:" + self.parts, ["--steps", "8"])
        self.assertNotEqual(self.losses(plain)[1:], self.losses(out)[1:])
        ck = os.path.join(self.d, "ck")
        first = self.train(spec, ["--steps", "4", "--save-checkpoint", ck])  # 32 sequences: epoch 2, position 11
        self.assertEqual(self.losses(first), self.losses(out)[:4])
        resumed = os.path.join(self.d, "resumed.safetensors")
        second = self.train(spec, ["--steps", "8", "--resume", ck, "--save-weights", resumed])
        self.assertEqual(self.losses(second), self.losses(out)[4:])
        with open(whole, "rb") as a, open(resumed, "rb") as b:
            self.assertEqual(a.read(), b.read(), "resumed weights differ from the uninterrupted run's")

    def test_jsonl(self):
        model = self.write("byte_gpt.json", BYTE_GPT)
        docs = [{"text": "document number %d says hello\nacross lines" % i, "body": "b%d" % i * 5} for i in range(12)]
        path = self.write("docs.jsonl", "".join(json.dumps(d) + "\n" for d in docs))
        out = self.train("jsonl:" + path, ["--steps", "2"], model=model)
        self.assertIn("data: jsonl: '%s' (bytes)" % path, out)
        self.assertEqual(len(self.losses(out)), 2, out)
        body = self.train("jsonl:" + path + ",field=body,sep=10,shuffle=1", ["--steps", "2"], model=model)
        self.assertNotEqual(self.losses(body), self.losses(out))
        bad = self.write("bad.jsonl", '{"text": "fine"}\n{"text": 3}\n')
        err = self.train("jsonl:" + path + ":" + bad, ["--steps", "1"], ranks=1, expect=2, model=model)
        self.assertIn("data file '%s' line 2: the field \"text\" is a number, expected a string" % bad, err)

    def test_bad_inputs_exit_2(self):
        empty = os.path.join(self.d, "empty")
        os.mkdir(empty)
        short = os.path.join(self.d, "short.bin")
        with open(short, "wb") as f:
            f.write(struct.pack("<4H", 1, 2, 3, 4))
        cases = [("tokens:" + self.parts + "/nothing_*.bin", "matches no file"),
                 ("tokens:" + empty, "holds no regular file"),
                 ("tokens:" + self.parts + ":" + short, "data file '%s': holds 4 tokens" % short),
                 ("tokens:" + self.parts + ",shuffle=yes", "shuffle must be 0 or 1"),
                 ("text:" + self.parts + "::" + short, "an empty path in the list"),
                 ("jsonl:" + self.write("not.jsonl", "{}\n{oops\n"), "line 1: the object has no field \"text\"")]
        for spec, needle in cases:
            err = self.train(spec, ["--steps", "1"], ranks=1, expect=2)
            self.assertIn(needle, err, spec)


if __name__ == "__main__":
    unittest.main()
