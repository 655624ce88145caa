"""What the program writes, and only that: regression tests for output files and checkpoint directories.

Each test reproduces a case that once did harm (a followed symlink, a truncated file with exit 0, a
deleted file the run did not create, a wrapped integer flag) and asserts exit 2 with one message naming
the input, and that nothing else on disk changed.
"""
import os
import resource
import signal
import socket
import subprocess
import unittest

import test_hostile_inputs as hostile
from test_hostile_inputs import BIN, MPIEXEC, MPI_FLAGS


def run(cmd, timeout=60, **kw):
    p = subprocess.run(cmd, capture_output=True, timeout=timeout, **kw)
    p.out, p.err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    return p


def host_tag():
    return "".join(c if c.isalnum() or c in "_-" else "_" for c in socket.gethostname()) or "localhost"


def dead_pid():
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def small_file_limit():
    """A child whose files cannot grow past 1 KiB (EFBIG instead of SIGXFSZ): a full disk without root."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))


class Outputs(unittest.TestCase):
    # The hostile-input tests' fixture: a temporary directory with a tiny GPT and a stage-2 config.
    setUp, tearDown, write = hostile.Hostile.setUp, hostile.Hostile.tearDown, hostile.Hostile.write
    assert_clean = hostile.Hostile.assert_clean

    def path(self, *names):
        return os.path.join(self.d, *names)

    def read(self, path):
        with open(path, "rb") as f:
            return f.read()

    def train(self, args, np_=1, timeout=60, **kw):
        cmd = ([MPIEXEC] + MPI_FLAGS + ["-np", str(np_)] if np_ > 1 else []) + [BIN, "train"] + args
        return run(cmd, timeout, **kw)

    def base(self, *extra, **over):
        return hostile.Hostile.base(self, **over) + list(extra)

    # --trace, --comm-log and estimate --json follow no planted symlink (the target is untouched).
    def test_outputs_refuse_planted_symlinks(self):
        victim = self.write("victim", "precious")
        os.makedirs(self.path("tr"))
        os.symlink(victim, self.path("tr", "trace.json"))
        os.symlink(victim, self.path("comm.jsonl"))
        os.symlink(victim, self.path("est.json"))
        self.assert_clean(self.train(self.base(**{"--trace": self.path("tr")})), 2, "--trace", "symbolic link")
        self.assert_clean(self.train(self.base(**{"--comm-log": self.path("comm.jsonl")})), 2, "--comm-log",
                          "symbolic link")
        p = run([BIN, "estimate", "--config", self.cfg, "--model", self.model, "--world-size", "2", "--device", "cpu",
                 "--json", self.path("est.json")])
        self.assert_clean(p, 2, "--json", "symbolic link")
        self.assertEqual(self.read(victim), b"precious")
        for link in ["tr/trace.json", "comm.jsonl", "est.json"]:
            self.assertTrue(os.path.islink(self.path(link)), link)

    # A full device: exit 2 naming the file, never exit 0 with an empty file.
    def test_full_device_is_exit_2(self):
        for flag in ["--metrics", "--memory-report", "--comm-log"]:
            p = self.train(self.base(**{flag: "/dev/full"}))
            self.assert_clean(p, 2, flag + " /dev/full", "No space left")
        p = run([BIN, "estimate", "--config", self.cfg, "--model", self.model, "--world-size", "2", "--device", "cpu",
                 "--json", "/dev/full"])
        self.assert_clean(p, 2, "--json /dev/full")
        bench = os.path.join(os.path.dirname(BIN), "benchmarks", "train", "zt_train_bench")
        p = run([bench, "--n-embd", "32", "--n-layer", "1", "--n-head", "2", "--seq", "16", "--vocab", "8", "--batch",
                 "2", "--warmup", "1", "--steps", "1", "--json", "/dev/full"])
        self.assert_clean(p, 2, "--json /dev/full")
        # A device is written in place on every rank (no /dev/null.rank1 is created).
        p = self.train(self.base(**{"--metrics": "/dev/null", "--comm-log": "/dev/null"}), np_=2)
        self.assert_clean(p, 0)
        self.assertFalse(os.path.exists("/dev/null.rank1"))

    # A full file system (a 64 KiB tmpfs when this test may mount one, else a 4 KiB file size limit):
    # --metrics, --memory-report, --comm-log and --trace end with exit 2, not truncated files and exit 0.
    def test_full_file_system_is_exit_2(self):
        mnt = self.path("mnt")
        os.makedirs(mnt)
        mounted = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt],
                                                       capture_output=True).returncode == 0
        try:
            kw = {}
            if mounted:  # fill it up to its last 2 KiB
                with open(os.path.join(mnt, "filler"), "wb", buffering=0) as f:
                    try:
                        f.write(b"\0" * (64 * 1024))
                    except OSError:
                        pass
            else:
                kw["preexec_fn"] = small_file_limit  # files stop at 1 KiB
            for flag, value, steps in [("--metrics", "m.jsonl", "40"), ("--memory-report", "mem.json", "1"),
                                       ("--comm-log", "comm.jsonl", "40"), ("--trace", "tr", "2")]:
                target = os.path.join(mnt, value)
                p = self.train(self.base(**{flag: target, "--steps": steps}), **kw)
                self.assert_clean(p, 2, flag + " " + target)
                self.assertRegex(p.err, "No space left|File too large")
        finally:
            if mounted:
                subprocess.run(["umount", mnt], check=True)

    # No two outputs (nor an output and an input) may name one file; devices may repeat.
    def test_one_file_for_two_outputs_is_exit_2(self):
        out = self.path("out.json")
        for a, b in [("--metrics", "--trace"), ("--metrics", "--comm-log"), ("--memory-report", "--save-weights"),
                     ("--comm-log", "--memory-report")]:
            p = self.train(self.base(**{a: out, b: os.path.join(self.d, ".", "out.json")}))
            self.assert_clean(p, 2, a, b, "name the same file")
        self.assert_clean(self.train(self.base(**{"--metrics": self.model})), 2, "--model", "--metrics")
        p = self.train(self.base(**{"--metrics": self.path("m.jsonl"), "--comm-log": self.path("m.jsonl.rank1")}), np_=2)
        self.assert_clean(p, 2, "name the same file")
        self.assertFalse(os.path.exists(self.path("m.jsonl")))
        self.assert_clean(self.train(self.base(**{"--metrics": "/dev/null", "--memory-report": "/dev/null"})), 0)

    # An empty value (an unset shell variable) is an error naming the flag, never "not given".
    def test_empty_values_are_exit_2(self):
        for flag in ["--save-checkpoint", "--save-weights", "--metrics", "--memory-report", "--comm-log", "--trace",
                     "--resume", "--init-from", "--data", "--trace-steps"]:
            self.assert_clean(self.train(self.base(**{flag: ""})), 2, flag + " '': empty value")
        p = self.train(self.base("--resume", self.d, "--tag", ""))
        self.assert_clean(p, 2, "--tag '': empty value")
        p = run([BIN, "estimate", "--config", self.cfg, "--model", self.model, "--world-size", "2", "--json", ""])
        self.assert_clean(p, 2, "--json '': empty value")
        self.assert_clean(run([BIN, "consolidate", "", self.path("w.safetensors")]), 2, "DIR '': empty path")
        self.assert_clean(run([BIN, "consolidate", self.d, ""]), 2, "OUT '': empty path")
        self.assert_clean(run([BIN, "explain", "--config", "", "--model", self.model, "--world-size", "2"]), 2,
                          "--config '': empty value")

    # Integer flags are range-checked to the type they are stored in (--keep-last 4294967297 once kept 1).
    def test_integer_flags_fit_their_type(self):
        for flag, value, needle in [("--keep-last", "4294967297", "<= 2147483647"),
                                    ("--keep-last", "-1", ">= 1"),
                                    ("--save-every", "0x10", "--save-every '0x10'"),
                                    ("--log-every", " 5", "--log-every ' 5'"),
                                    ("--steps", "+3", "--steps '+3'")]:
            extra = ["--save-checkpoint", self.path("ck")] if flag in ("--keep-last", "--save-every") else []
            self.assert_clean(self.train(self.base(*extra, **{flag: value})), 2, flag, needle)
        p = self.train(self.base("--cuda-graph", **{"--cuda-graph-warmup": "4294967297"}))
        self.assert_clean(p, 2, "--cuda-graph-warmup", "<= 2147483647")
        for v in ["4294967297", "+2", "2x"]:
            p = run([BIN, "estimate", "--config", self.cfg, "--model", self.model, "--world-size", v])
            self.assert_clean(p, 2, "--world-size")
        self.assertFalse(os.path.exists(self.path("ck")))

    # consolidate DIR OUT with OUT inside the checkpoint once destroyed it.
    def test_consolidate_refuses_an_output_inside_the_checkpoint(self):
        ck = self.path("ck")
        self.assert_clean(self.train(self.base(**{"--save-checkpoint": ck})), 0)
        before = {n: self.read(os.path.join(ck, "global_step2", n)) for n in os.listdir(os.path.join(ck, "global_step2"))}
        os.symlink(ck, self.path("alias"))
        for out in [os.path.join(ck, "global_step2", "meta.json"), os.path.join(ck, "latest"),
                    os.path.join(ck, "global_step2") + "/", self.path("alias", "global_step2", "x.safetensors")]:
            for src in [ck, os.path.join(ck, "global_step2")]:
                self.assert_clean(run([BIN, "consolidate", src, out]), 2, "inside the checkpoint")
        after = {n: self.read(os.path.join(ck, "global_step2", n)) for n in os.listdir(os.path.join(ck, "global_step2"))}
        self.assertEqual(before, after)
        self.assertEqual(self.read(os.path.join(ck, "latest")), b"global_step2\n")
        self.assert_clean(run([BIN, "consolidate", ck, self.path("w.safetensors")]), 0)

    # A save creates and deletes only the names it owns (2 ranks: the temporary's name is rank 0's).
    def test_save_touches_only_its_own_names(self):
        ck = self.path("ck")
        os.makedirs(ck)
        victim = self.write("victim", "precious")
        host = host_tag()
        mine_dead = os.path.join(ck, ".tmp-global_step1.%s.%d" % (host, dead_pid()))
        mine_alive = os.path.join(ck, ".tmp-global_step1.%s.%d" % (host, os.getpid()))
        other_host = os.path.join(ck, ".tmp-global_step1.elsewhere.%d" % dead_pid())
        foreign = os.path.join(ck, ".tmp-notes")
        for d in [mine_dead, mine_alive, other_host, foreign]:
            os.makedirs(d)
            self.write(os.path.join(d, "f"), "x")
        os.symlink(victim, os.path.join(ck, "latest.tmp"))
        os.symlink(victim, os.path.join(ck, ".zerotrain-write-probe"))
        os.makedirs(os.path.join(ck, "global_step0"))  # not a checkpoint: --keep-last leaves it
        self.write(os.path.join(ck, "global_step0", "notes.txt"), "mine")
        p = self.train(self.base(**{"--save-checkpoint": ck, "--save-every": "1", "--steps": "3", "--keep-last": "1"}),
                       np_=2)
        self.assert_clean(p, 0, "global_step0 is not a zerotrain checkpoint; left in place",
                          "removed " + mine_dead + ", the temporary of a killed save")
        names = sorted(os.listdir(ck))
        self.assertEqual(names, sorted(["latest", "latest.tmp", ".zerotrain-write-probe", "global_step0", "global_step3",
                                        os.path.basename(mine_alive), os.path.basename(other_host), ".tmp-notes"]))
        self.assertEqual(self.read(victim), b"precious")
        self.assertEqual(self.read(os.path.join(ck, "global_step0", "notes.txt")), b"mine")
        # A regular file (or a foreign directory) at the tag to write is refused, not replaced.
        self.write(os.path.join(ck, "global_step2"), "a file of mine")
        os.makedirs(os.path.join(ck, "global_step1"))
        self.write(os.path.join(ck, "global_step1", "notes.txt"), "mine")
        p = self.train(self.base(**{"--save-checkpoint": ck, "--steps": "2"}))
        self.assert_clean(p, 2, "global_step2 exists and is not a zerotrain checkpoint")
        self.assertEqual(self.read(os.path.join(ck, "global_step2")), b"a file of mine")
        p = self.train(self.base(**{"--save-checkpoint": ck, "--steps": "1"}))
        self.assert_clean(p, 2, "global_step1 exists and is not a zerotrain checkpoint")
        self.assertEqual(self.read(os.path.join(ck, "global_step1", "notes.txt")), b"mine")
        self.assertEqual(self.read(os.path.join(ck, "latest")), b"global_step3\n")
        # A zerotrain checkpoint at the tag is replaced (a run that saves step 3 again).
        self.assert_clean(self.train(self.base(**{"--save-checkpoint": ck, "--steps": "3"})), 0)

    # --save-weights temporaries of killed runs: removed at the next start when their process is gone.
    def test_stale_weights_temporaries_of_dead_runs_are_removed(self):
        out = self.path("w.safetensors")
        host = host_tag()
        dead = "%s.tmp.%s.%d.aB3dE9" % (out, host, dead_pid())
        alive = "%s.tmp.%s.%d.Zz0000" % (out, host, os.getpid())
        elsewhere = "%s.tmp.otherhost.%d.xY1234" % (out, dead_pid())
        for f in [dead, alive, elsewhere]:
            self.write(f, b"\0" * (1 << 20))
        p = self.train(self.base(**{"--save-weights": out, "--steps": "0"}))
        self.assert_clean(p, 0, "removed " + dead)
        self.assertFalse(os.path.exists(dead))
        self.assertTrue(os.path.exists(alive) and os.path.exists(elsewhere))
        self.assertTrue(os.path.getsize(out) > 0)


if __name__ == "__main__":
    unittest.main()
