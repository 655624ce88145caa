"""Regression tests for hostile-input reproductions (CPU backend, mpirun at 2 ranks).

Each test states the reproduction and asserts: the documented exit code, one message naming the
input, no signal, no abort banner, and (for multi-rank runs) that every rank ends within seconds.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
import unittest

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
LAUNCH = os.environ.get("ZT_LAUNCH", os.path.join(os.environ.get("ZT_REPO", "."), "launcher", "zt-launch"))
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1", "-x", "ZT_COMM_TIMEOUT_S=60"]
GPT = {"type": "gpt", "vocab_size": 8, "n_ctx": 16, "n_layer": 1, "n_head": 2, "n_embd": 32}
DS = {"train_batch_size": 8, "zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}
BANNERS = ["terminate called", "Aborted", "Traceback", "core dumped", "Segmentation", "MPI_ABORT"]


def run(cmd, timeout=60, env=None):
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env)
    p.elapsed = time.monotonic() - t0
    p.out = p.stdout.decode("utf-8", "replace")
    p.err = p.stderr.decode("utf-8", "replace")
    return p


class Hostile(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.model = self.write("gpt.json", json.dumps(GPT))
        self.cfg = self.write("ds.json", json.dumps(DS))

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, data):
        path = os.path.join(self.d, name)
        with open(path, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
        return path

    def train(self, args, np_=1, timeout=60):
        cmd = ([MPIEXEC] + MPI_FLAGS + ["-np", str(np_)] if np_ > 1 else []) + [BIN, "train"] + args
        return run(cmd, timeout)

    def base(self, **over):
        a = {"--config": self.cfg, "--model": self.model, "--data": "markov:vocab=8", "--steps": "2"}
        a.update(over)
        out = []
        for k, v in a.items():
            out += [k, v]
        return out

    def assert_clean(self, p, code, *needles, within=None):
        text = p.out + p.err
        self.assertEqual(p.returncode, code, text)
        for n in needles:
            self.assertIn(n, p.err, text)
        for b in BANNERS:
            self.assertNotIn(b, text)
        if within is not None:
            self.assertLess(p.elapsed, within, text)

    # 1. An input error seen by one rank: every rank exits 2 at once, with one message.
    def test_1_unwritable_outputs_at_two_ranks(self):
        for flag in ["--metrics", "--memory-report", "--save-weights"]:
            p = self.train(self.base(**{flag: os.path.join(self.d, "no", "such", "dir", "f")}), np_=2)
            self.assert_clean(p, 2, flag, "does not exist", within=30)
            self.assertEqual(p.err.count("error:"), 1, p.err)
            if flag == "--save-weights":  # an existing directory is an HF folder target (model.safetensors)
                fifo = os.path.join(self.d, "weights.fifo")
                if not os.path.exists(fifo):
                    os.mkfifo(fifo)
                p = self.train(self.base(**{flag: fifo}), np_=2)
                self.assert_clean(p, 2, flag, "fifo", within=30)
                continue
            p = self.train(self.base(**{flag: self.d}), np_=2)  # a directory
            self.assert_clean(p, 2, flag, "directory", within=30)

    def test_1_bad_token_in_one_ranks_shard_at_two_ranks(self):
        # Each rank validates half of the file; the bad id is in rank 1's half only.
        tokens = bytes([1, 2, 3] * 200) + bytes([200]) + bytes([4] * 10)
        data = self.write("t.bin", tokens)
        p = self.train(self.base(**{"--data": "text:" + data}), np_=2)
        self.assert_clean(p, 2, "token 200", "vocab_size", within=30)

    def test_1_non_finite_weights_in_one_ranks_shard_at_two_ranks(self):
        path = os.path.join(self.d, "w.safetensors")
        self.assert_clean(self.train(self.base(**{"--steps": "0", "--save-weights": path})), 0)
        with open(path, "r+b") as f:  # the last float of the file lands in the last rank's shard
            f.seek(-4, os.SEEK_END)
            f.write(struct.pack("<f", float("nan")))
        p = self.train(self.base(**{"--init-from": path}), np_=2)
        self.assert_clean(p, 2, "NaN", "finite", within=30)

    # 2. Invalid UTF-8 in a config string or a --set value.
    def test_2_invalid_utf8(self):
        bad = self.write("bad.json", b'{"train_batch_size": 8, "x": "\xff"}')
        p = run([BIN, "check-config", bad])
        self.assert_clean(p, 2, "invalid UTF-8", "byte offset 30")
        self.assert_clean(self.train(self.base(**{"--config": bad}), np_=2), 2, "invalid UTF-8")
        p = run([BIN.encode(), b"check-config", self.cfg.encode(), b"--set", b"k=\xff"])
        self.assert_clean(p, 2, "invalid UTF-8")
        lone = self.write("lone.json", '{"train_batch_size": 8, "x": "\\ud800"}')
        self.assert_clean(run([BIN, "check-config", lone]), 2, "surrogate")

    # 3. Saves: unique temporaries, no replaced symlinks or devices, no temporary left behind.
    def test_3_save_refuses_symlinks_and_leaves_no_temporaries(self):
        target = self.write("target.safetensors", b"keep")
        link = os.path.join(self.d, "link.safetensors")
        os.symlink(target, link)
        p = self.train(self.base(**{"--steps": "0", "--save-weights": link}))
        self.assert_clean(p, 2, "symbolic link")
        self.assertTrue(os.path.islink(link))
        with open(target, "rb") as f:
            self.assertEqual(f.read(), b"keep")
        out = os.path.join(self.d, "ok.safetensors")
        procs = [subprocess.Popen([BIN, "train"] + self.base(**{"--steps": "0", "--seed": str(s), "--save-weights": out}),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for s in (1, 2)]
        self.assertEqual([q.wait(timeout=60) for q in procs], [0, 0])
        self.assertEqual([n for n in os.listdir(self.d) if ".tmp" in n], [])
        p = self.train(self.base(**{"--steps": "0", "--init-from": out}))  # the survivor is one whole run's file
        self.assert_clean(p, 0)

    # 4. Unbounded reads: devices and FIFOs where a file is expected.
    def test_4_devices_and_fifos_are_refused(self):
        self.assert_clean(run([BIN, "check-config", "/dev/zero"], timeout=20), 2, "character device")
        fifo = os.path.join(self.d, "fifo")
        os.mkfifo(fifo)
        self.assert_clean(run([BIN, "check-config", fifo], timeout=20), 2, "FIFO")
        for flag, value in [("--model", fifo), ("--data", "text:" + fifo), ("--data", "tokens:" + fifo),
                            ("--init-from", fifo), ("--config", "/dev/zero")]:
            self.assert_clean(self.train(self.base(**{flag: value}), timeout=20), 2, "regular file")
        big = self.write("big.json", "{" + " " * (17 << 20) + "}")
        self.assert_clean(run([BIN, "check-config", big]), 2, "at most")

    # 5. Models that cannot fit, overflowing numbers, duplicate keys.
    def test_5_models_that_cannot_fit(self):
        huge = dict(GPT, vocab_size=1 << 30, n_embd=1 << 20, n_head=1, n_layer=4096)
        mlp = {"type": "mlp", "dims": [1 << 24, 1 << 24, 1], "activation": "gelu", "task": "regression"}
        for name, model, data, needle in [("huge.json", json.dumps(huge), "markov:vocab=8", "per rank"),
                                          ("mlp.json", json.dumps(mlp), "teacher", "per rank"),
                                          ("inf.json", json.dumps(GPT).replace('"vocab_size": 8', '"vocab_size": 1e400'),
                                           "markov:vocab=8", "overflow"),
                                          ("dup.json", json.dumps(GPT)[:-1] + ', "n_ctx": 32}', "markov:vocab=8",
                                           "duplicate key")]:
            p = self.train(self.base(**{"--model": self.write(name, model), "--data": data}), np_=2)
            self.assert_clean(p, 2, needle, within=30)

    # 6. Parsing is linear in the number of keys.
    def test_6_many_keys_parse_fast(self):
        doc = {"train_batch_size": 8, "optimizer": {"type": "AdamW"}}
        doc.update({"k%d" % i: i for i in range(80000)})
        p = run([BIN, "check-config", self.write("many.json", json.dumps(doc))], timeout=60)
        self.assert_clean(p, 0, within=20)

    # 7. Out-of-range integer flags.
    def test_7_integer_flags_out_of_range(self):
        for flag in ["--steps", "--seed", "--log-every", "--max-skipped-steps"]:
            self.assert_clean(self.train(self.base(**{flag: "99999999999999999999"})), 2, flag)
        self.assert_clean(run([BIN, "check-config", self.cfg, "--hidden-size", "99999999999999999999"]), 2,
                          "--hidden-size")

    def test_7_comm_timeout_variable(self):
        for bad in ["abc", "nan", "0", "-5", "inf"]:
            p = run(["env", "ZT_COMM_TIMEOUT_S=" + bad, BIN, "train"] + self.base())
            self.assert_clean(p, 2, "ZT_COMM_TIMEOUT_S")
        p = run(["env", "NCCL_TIMEOUT=1800", BIN, "train"] + self.base())
        self.assert_clean(p, 0, "NCCL_TIMEOUT", "ZT_COMM_TIMEOUT_S")

    # --help everywhere (exit 0, usage on stdout), exit codes listed.
    def test_help_everywhere(self):
        bench = os.path.join(os.path.dirname(BIN), "benchmarks")
        for cmd in [[BIN, "--help"], [BIN, "train", "--help"], [BIN, "check-config", "--help"], [BIN, "version", "--help"],
                    [BIN, "sample", "--help"],
                    [sys.executable, LAUNCH, "--help"], [os.path.join(bench, "zt_comm_bench"), "--help"],
                    [os.path.join(bench, "zt_host_optim_bench"), "--help"], [BIN, "tokenize", "--help"],
                    [BIN, "tokenize", "encode", "--help"], [os.path.join(bench, "zt_tokenizer_bench"), "--help"],
                    [os.path.join(bench, "train", "zt_train_bench"), "--help"]]:
            if not os.path.exists(cmd[0]) and cmd[0] != sys.executable:
                continue  # a benchmark not built in this configuration
            p = run(cmd)
            self.assert_clean(p, 0)
            self.assertIn("usage", p.out.lower(), " ".join(cmd))
        self.assertIn("exit codes", run([BIN, "train", "--help"]).out)

    # 8. zt-launch: bad quoting, binary env files, device hostfiles, absurd slot counts.
    def test_8_launcher_inputs(self):
        binary = self.write("bin.env", b"A=\xff\xfe\x00")
        slots = self.write("hosts", "localhost slots=99999999999999999999\n")
        for args, needle in [(["--launcher-args", "--foo 'x"], "balanced quotes"),
                             (["--env-file", binary], "UTF-8"),
                             (["--hostfile", "/dev/zero"], "regular file"),
                             (["--hostfile", slots], "from 1 to")]:
            n = [] if "--hostfile" in args else ["-n", "2"]
            p = run([sys.executable, LAUNCH, "--dry-run"] + n + args + ["/bin/true"], timeout=20)
            self.assert_clean(p, 2, needle)

    # 9. Non-finite weights are refused; a run whose steps are all skipped stops with exit 4.
    def test_9_all_steps_skipped_stops(self):
        # lr 1e30 with bf16 (no loss scale to lower): the first update makes the weights
        # infinite, every later step overflows and is skipped.
        bf16 = dict(DS, bf16={"enabled": True}, gradient_clipping=0, optimizer={"type": "SGD", "params": {"lr": 1e30}})
        cfg = self.write("bf16.json", json.dumps(bf16))
        p = self.train(self.base(**{"--config": cfg, "--steps": "50", "--max-skipped-steps": "3"}), np_=2)
        self.assert_clean(p, 4, "the last 3 steps were all skipped", within=60)
        self.assertEqual(p.err.count("error:"), 1, p.err)

    # 10. Token files are validated once per job (each rank one shard), not once per rank.
    def test_10_token_validation_is_sharded(self):
        tokens = bytes([1, 2, 3, 4] * 4096)
        p = self.train(self.base(**{"--data": "text:" + self.write("ok.bin", tokens)}), np_=2)
        self.assert_clean(p, 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
