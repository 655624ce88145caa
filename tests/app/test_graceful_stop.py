"""Graceful stop (CPU backend, under mpirun): SIGTERM or SIGUSR1 to any rank -> every rank
finishes the current step, a checkpoint of that step is written (with --save-checkpoint), the job
exits 75 saying "stopped by signal SIG at step N, checkpoint at DIR/global_stepN", and --resume
continues bitwise: final weights and every metrics row equal the uninterrupted run's.

The stage x rank-count matrix is covered sparsely by a seeded choice (ZT_STOP_SEED): every stage
0-3 and every rank count 1-3 at least once; the signalled rank and the step are drawn too.
"""
import json
import os
import random
import re
import signal
import subprocess
import tempfile
import time
import unittest

from test_control_plane import rank_pids  # our ranks by rank, from /proc

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1", "-x", "ZT_COMM_TIMEOUT_S=60"]
DATA = "markov:vocab=64,order=1,seed=3"
STEPS = 200
EXIT_STOPPED = 75
EXACT = ["step", "loss", "lr", "grad_norm", "clip_coef", "loss_scale", "skipped", "samples", "tokens"]


def slurp(path):
    with open(path, "rb") as f:
        return f.read()


def rows(path):
    with open(path) as f:
        return [{k: r[k] for k in EXACT} for r in map(json.loads, f)]


def command(np_, args):
    return ([MPIEXEC] + MPI_FLAGS + ["-np", str(np_)] if np_ > 1 else []) + [BIN, "train"] + args


class GracefulStop(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.model = self.write("gpt.json", {"type": "gpt", "vocab_size": 64, "n_ctx": 32, "n_layer": 2,
                                             "n_head": 2, "n_embd": 64})

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, *names):
        return os.path.join(self.d, *names)

    def write(self, name, obj):
        with open(self.path(name), "w") as f:
            json.dump(obj, f)
        return self.path(name)

    def config(self, stage, np_):
        return self.write(f"ds{stage}.json", {
            "train_batch_size": 4 * np_, "train_micro_batch_size_per_gpu": 2,
            "zero_optimization": {"stage": stage, "reduce_bucket_size": 3000},
            "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.01}},
            "scheduler": {"type": "WarmupDecayLR",
                          "params": {"warmup_num_steps": 5, "total_num_steps": STEPS, "warmup_max_lr": 3e-3}}})

    def train(self, np_, args, timeout=300):
        p = subprocess.run(command(np_, args), capture_output=True, text=True, timeout=timeout)
        return p

    def run_and_signal(self, np_, args, marker, after_step, victim, sig, twice=False, to_launcher=False):
        """Starts the run, waits for rank 0's progress line of `after_step`, signals `victim`."""
        proc = subprocess.Popen(command(np_, args + ["--log-every", "1"]), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        sent = False
        try:
            for line in proc.stdout:
                m = re.match(r"step\s+(\d+) \|", line)
                if m and int(m.group(1)) >= after_step:
                    if to_launcher:
                        os.kill(proc.pid, sig)
                    else:
                        pid = rank_pids(marker)[victim] if np_ > 1 else proc.pid
                        os.kill(pid, sig)
                        if twice:  # another signal: two pending SIGTERMs would merge into one
                            os.kill(pid, signal.SIGUSR1)
                    sent = True
                    break
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        self.assertTrue(sent, "the run ended before step %d" % after_step)
        return proc.returncode, err

    def check_stop_and_resume(self, np_, stage, victim, after_step, sig=signal.SIGTERM, to_launcher=False):
        what = f"{np_} rank(s), stage {stage}, {signal.Signals(sig).name} to rank {victim} after step {after_step}"
        cfg = self.config(stage, np_)
        common = ["--config", cfg, "--model", self.model, "--data", DATA, "--steps", str(STEPS)]
        tag = f"np{np_}s{stage}{signal.Signals(sig).name}"
        ref_w, ref_m = self.path(tag + "ref.safetensors"), self.path(tag + "ref.jsonl")
        p = self.train(np_, common + ["--save-weights", ref_w, "--metrics", ref_m])
        self.assertEqual(p.returncode, 0, what + p.stderr)
        ck, m1 = self.path(tag + "ck"), self.path(tag + "a.jsonl")
        rc, err = self.run_and_signal(np_, common + ["--save-checkpoint", ck, "--metrics", m1], ck, after_step,
                                      victim, sig, to_launcher=to_launcher)
        self.assertEqual(rc, EXIT_STOPPED, what + "\n" + err)
        m = re.search(r"zerotrain train: stopped by signal (SIG\w+) at step (\d+), checkpoint at (\S+) \(exit 75\)",
                      err)
        self.assertIsNotNone(m, what + "\n" + err)
        self.assertEqual(m.group(1), signal.Signals(sig).name)
        n = int(m.group(2))
        self.assertTrue(after_step <= n < STEPS, what + f": stopped at step {n}")
        self.assertEqual(m.group(3), os.path.join(ck, f"global_step{n}"))
        self.assertTrue(os.path.isfile(os.path.join(ck, f"global_step{n}", "meta.json")), what)
        self.assertEqual(slurp(os.path.join(ck, "latest")).decode().strip(), f"global_step{n}")
        self.assertEqual(len(rows(m1)), n, what + ": every finished step has its metrics row")
        m2, w2 = self.path(tag + "b.jsonl"), self.path(tag + "b.safetensors")
        p = self.train(np_, common + ["--resume", ck, "--metrics", m2, "--save-weights", w2])
        self.assertEqual(p.returncode, 0, what + p.stderr)
        self.assertIn(f"resumed from {ck}/global_step{n}", p.stdout)
        self.assertEqual(rows(m1) + rows(m2), rows(ref_m), what + ": losses continue bitwise")
        self.assertEqual(slurp(w2), slurp(ref_w), what + ": final weights bitwise equal")

    def test_sigterm_any_rank_any_stage_resumes_bitwise(self):
        rnd = random.Random(int(os.environ.get("ZT_STOP_SEED", "22")))
        ranks = [1, 2, 3, rnd.choice([1, 2, 3])]
        rnd.shuffle(ranks)
        for stage, np_ in zip(range(4), ranks):
            victim = rnd.randrange(np_)
            after = rnd.randint(2, 20)
            with self.subTest(stage=stage, ranks=np_, victim=victim, after=after):
                self.check_stop_and_resume(np_, stage, victim, after)

    def test_sigusr1_to_every_rank_through_the_launcher(self):
        # mpirun forwards SIGUSR1 to every rank: each has the flag, one stop, one checkpoint.
        self.check_stop_and_resume(2, 2, 0, 5, sig=signal.SIGUSR1, to_launcher=True)

    def test_without_save_checkpoint_and_second_signal(self):
        cfg = self.config(1, 2)
        common = ["--config", cfg, "--model", self.model, "--data", DATA, "--steps", "1000"]
        marker = self.path("nock.jsonl")
        rc, err = self.run_and_signal(2, common + ["--metrics", marker], marker, 3, 1, signal.SIGTERM)
        self.assertEqual(rc, EXIT_STOPPED, err)
        self.assertRegex(err, r"stopped by signal SIGTERM at step \d+, no checkpoint: --save-checkpoint not set")
        # A second signal (SIGTERM then SIGUSR1) ends the rank at once: the job fails as for a dead
        # rank, without a checkpoint.
        ck = self.path("ck2")
        rc, err = self.run_and_signal(2, common + ["--save-checkpoint", ck], ck, 3, 1, signal.SIGTERM, twice=True)
        self.assertNotIn(rc, (0, EXIT_STOPPED), err)
        self.assertIn("second stop signal", err)
        self.assertNotIn("stopped by signal", err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
