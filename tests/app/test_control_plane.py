"""The trainer's control plane under mpirun (CPU backend): per-rank output errors, start-up
agreement of the ranks' arguments, the hang watchdog over control exchanges, ZT_COMM_TIMEOUT_S.

* One rank's --comm-log / --trace output cannot be written (a directory in its place on that rank
  only): every rank exits 2 within seconds, one message naming the flag.
* A rank stopped (SIGSTOP) in the middle of a checkpoint save: the hang watchdog ends the job
  (exit 3) within the timeout plus a margin.
* Ranks started with different arguments (mpirun's MPMD "A : B"): exit 2, one message naming the
  argument and the ranks that differ; a bad flag on one rank only: exit 2, no hang.
* ZT_COMM_TIMEOUT_S: decimal seconds >= 1 only (hex, exponents, signs, < 1 s: exit 2 naming it),
  also when only one rank's environment has the bad value.
"""
import glob
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest

from test_hostile_inputs import run  # the one subprocess runner of the hostile-input tests

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1"]
GPT = {"type": "gpt", "vocab_size": 8, "n_ctx": 16, "n_layer": 1, "n_head": 2, "n_embd": 32}
DS = {"train_batch_size": 8, "zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}
BANNERS = ["terminate called", "Aborted", "Traceback", "core dumped", "Segmentation", "MPI_ABORT"]


def mpirun(np_, timeout_s=60):
    return [MPIEXEC] + MPI_FLAGS + ["-x", f"ZT_COMM_TIMEOUT_S={timeout_s}", "-np", str(np_)]


class ControlPlane(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.model = self.write("gpt.json", json.dumps(GPT))
        self.cfg = self.write("ds.json", json.dumps(DS))

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, *names):
        return os.path.join(self.d, *names)

    def write(self, name, data):
        with open(self.path(name), "w") as f:
            f.write(data)
        return self.path(name)

    def base(self, **over):
        a = {"--config": self.cfg, "--model": self.model, "--data": "markov:vocab=8", "--steps": "3"}
        a.update(over)
        return [x for kv in a.items() for x in kv]

    def assert_clean(self, p, code, *needles, within=20):
        text = p.out + p.err
        self.assertEqual(p.returncode, code, text)
        for n in needles:
            self.assertIn(n, text)
        for b in BANNERS:
            self.assertNotIn(b, text)
        self.assertLess(p.elapsed, within, "took %.1f s" % p.elapsed)
        self.assertEqual(text.count("zerotrain train: error"), 1 if code == 2 else text.count("zerotrain train: error"),
                         "one message:\n" + text)

    # --- one rank's output cannot be written -----------------------------------------------
    def test_comm_log_unwritable_on_one_rank(self):
        for np_ in [2, 3]:
            log = self.path(f"comm{np_}.jsonl")
            os.mkdir(log + f".rank{np_ - 1}")  # the last rank's file is a directory
            cfg = self.write(f"ds{np_}.json", json.dumps(dict(DS, train_batch_size=4 * np_)))
            p = run(mpirun(np_) + [BIN, "train"] + self.base(**{"--comm-log": log, "--config": cfg}))
            self.assert_clean(p, 2, "--comm-log", f".rank{np_ - 1}", within=15)

    def test_trace_rank_file_unwritable_on_one_rank(self):
        trace = self.path("trace")
        os.makedirs(os.path.join(trace, "trace.rank1.json"))
        p = run(mpirun(2) + [BIN, "train"] + self.base(**{"--trace": trace}))
        self.assert_clean(p, 2, "--trace", "trace.rank1.json", within=15)
        self.assertFalse(os.path.exists(os.path.join(trace, "trace.json")), "rank 0 did not go on to merge")

    def test_comm_log_and_trace_fine_when_writable(self):
        log, trace = self.path("ok.jsonl"), self.path("ok_trace")
        p = run(mpirun(2) + [BIN, "train"] + self.base(**{"--comm-log": log, "--trace": trace}))
        self.assertEqual(p.returncode, 0, p.out + p.err)
        with open(log + ".rank1") as f:
            ops = {json.loads(line)["op"] for line in f}
        self.assertIn("max_over_ranks", ops, "control exchanges are logged (and watched) like collectives")
        for f in ["trace.json", "trace.rank0.json", "trace.rank1.json"]:
            self.assertTrue(os.path.isfile(os.path.join(trace, f)), f)

    # --- a rank stopped during a checkpoint save -------------------------------------------
    def test_sigstop_during_a_save_is_caught_by_the_watchdog(self):
        model = self.write("mid.json", json.dumps({"type": "gpt", "vocab_size": 64, "n_ctx": 16, "n_layer": 4,
                                                     "n_head": 4, "n_embd": 256}))
        ck = self.path("ck_sigstop")
        timeout_s = 2
        cmd = mpirun(2, timeout_s) + [BIN, "train", "--config", self.cfg, "--model", model, "--data",
                                      "markov:vocab=64", "--steps", "1000", "--save-checkpoint", ck,
                                      "--save-every", "1", "--keep-last", "1"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        stopped_at, deadline = None, time.time() + 120
        try:
            while time.time() < deadline and proc.poll() is None and stopped_at is None:
                if any(os.path.getsize(f) > 0 for f in glob.glob(os.path.join(ck, ".tmp-*", "shard-*"))):
                    pids = rank_pids(ck)
                    if len(pids) == 2:
                        os.kill(pids[1], signal.SIGSTOP)
                        stopped_at = time.monotonic()
                time.sleep(0.002)
            out, err = proc.communicate(timeout=timeout_s + 60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for pid in rank_pids(ck):
                os.kill(pid, signal.SIGKILL)
        text = out.decode() + err.decode()
        self.assertIsNotNone(stopped_at, "never caught a save in progress\n" + text)
        elapsed = time.monotonic() - stopped_at
        self.assertEqual(proc.returncode, 3, text)
        self.assertIn("comm watchdog", text)
        self.assertIn(f"timeout {timeout_s}.0 s (ZT_COMM_TIMEOUT_S)", text)
        self.assertLess(elapsed, timeout_s + 20, text)

    # --- ranks started with different arguments ---------------------------------------------
    def mpmd(self, args0, args1, env0=(), env1=()):
        x0 = [a for kv in env0 for a in ["-x", kv]]
        x1 = [a for kv in env1 for a in ["-x", kv]]
        return run(mpirun(1)[:-2] + ["-np", "1"] + x0 + [BIN, "train"] + args0 + [":", "-np", "1"] + x1 +
                   [BIN, "train"] + args1)

    def test_argument_mismatch_names_argument_and_ranks(self):
        other_cfg = self.write("ds_other.json", json.dumps(dict(DS, train_batch_size=16)))
        other_model = self.write("gpt_other.json", json.dumps(dict(GPT, n_embd=64)))
        cases = [
            ({"--steps": "4"}, "--steps: rank 0 '3', rank 1 '4'"),
            ({"--seed": "7"}, "--seed: rank 0 not given, rank 1 '7'"),
            ({"--save-checkpoint": self.path("ck_b")}, "--save-checkpoint: rank 0 not given, rank 1"),
            ({"--data": "markov:vocab=8,seed=9"}, "--data: rank 0 'markov:vocab=8', rank 1 'markov:vocab=8,seed=9'"),
            ({"--config": other_cfg}, "--config content: rank 0 xxh64 0x"),
            ({"--model": other_model}, "--model content: rank 0 xxh64 0x"),
        ]
        for over, needle in cases:
            with self.subTest(over=over):
                p = self.mpmd(self.base(), self.base(**over))
                self.assert_clean(p, 2, needle, "different arguments", within=15)
        # The same content under another name (a node-local copy) is the same run.
        same_cfg = self.write("ds_copy.json", json.dumps(DS))
        p = self.mpmd(self.base(), self.base(**{"--config": same_cfg}))
        self.assertEqual(p.returncode, 0, p.out + p.err)

    def test_resume_mismatch_and_bad_flag_on_one_rank(self):
        p = self.mpmd(self.base(), self.base(**{"--resume": self.path("ck"), "--tag": "t"}))
        self.assert_clean(p, 2, "--resume: rank 0 not given, rank 1", within=15)
        self.assertNotIn("--tag:", p.err, "checkpoint.tag_validation governs --tag")
        p = self.mpmd(self.base(), self.base() + ["--no-such-flag"])
        self.assert_clean(p, 2, "unknown flag '--no-such-flag'", within=15)
        p = self.mpmd(self.base(), self.base(**{"--steps": "-1"}))
        self.assert_clean(p, 2, "--steps '-1'", within=15)

    # --- ZT_COMM_TIMEOUT_S ---------------------------------------------------------------
    def test_comm_timeout_decimal_and_at_least_one_second(self):
        env = dict(os.environ)
        for bad in ["0x10", "1e-9", "1e3", "0.5", "0", "-5", "+5", " 5", "5s", "5.", ".5", "inf", "nan", "1e308"]:
            with self.subTest(value=bad):
                env["ZT_COMM_TIMEOUT_S"] = bad
                p = run([BIN, "train"] + self.base(), env=env)
                self.assert_clean(p, 2, "ZT_COMM_TIMEOUT_S='%s'" % bad, "decimal seconds")
        for good in ["1", "2.5", "off", "300"]:
            with self.subTest(value=good):
                env["ZT_COMM_TIMEOUT_S"] = good
                self.assertEqual(run([BIN, "train"] + self.base(), env=env).returncode, 0, good)

    def test_comm_timeout_bad_on_one_rank_only(self):
        p = self.mpmd(self.base(), self.base(), env1=["ZT_COMM_TIMEOUT_S=0x10"])
        self.assert_clean(p, 2, "ZT_COMM_TIMEOUT_S='0x10'", within=15)


def rank_pids(marker):
    """Our zerotrain ranks (their command line holds the unique `marker`), by rank."""
    found = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            with open(f"/proc/{d}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        except OSError:
            continue
        if cmd and cmd[0].endswith(b"zerotrain") and marker.encode() in cmd:
            found.append((int(env.get(b"OMPI_COMM_WORLD_RANK", b"0")), int(d)))
    return [pid for _, pid in sorted(found)]


if __name__ == "__main__":
    unittest.main(verbosity=2)
