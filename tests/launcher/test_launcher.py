"""Tests of launcher/zt-launch: hostfile parsing and slot selection, the exact mpirun/srun commands
it prints with --dry-run, input errors (exit 2), and real runs under mpirun.

Run: python3 tests/launcher/test_launcher.py [HostfileTests DryRunTests ErrorTests RealRunTests]
Environment: ZT_BIN (the built zerotrain; RealRunTests trains with it when it exists).
"""
import contextlib
import io
import os
import shlex
import subprocess
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCHER = os.path.join(REPO, "launcher", "zt-launch")
sys.path.insert(0, os.path.join(REPO, "launcher"))
from ztlaunch import cli, environment, hostfile  # noqa: E402
from ztlaunch.errors import LaunchError  # noqa: E402

IS_ROOT = os.getuid() == 0


def clean_env(**extra):
    """This environment without anything that changes the launcher's choices, plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "OMP_", "OPENBLAS_", "NCCL_", "UCX_", "GOMP_"))
           and k not in ("CUDA_VISIBLE_DEVICES", "ZT_MPIRUN")}
    env.update(extra)
    return env


def launch(args, **extra):
    p = subprocess.run([sys.executable, LAUNCHER] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, env=clean_env(**extra), cwd=REPO, timeout=120)
    return p.returncode, p.stdout, p.stderr


def launch_in_process(args, **extra):
    """zt-launch's main() in this process (fast); only for runs that print or fail, never exec."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        old_cwd = os.getcwd()
        os.chdir(REPO)
        try:
            rc = cli.main(args, clean_env(**extra))
        finally:
            os.chdir(old_cwd)
    return rc, out.getvalue(), err.getvalue()


def dry(args, **extra):
    rc, out, err = launch_in_process(["--dry-run"] + args, **extra)
    if rc != 0:
        raise AssertionError("zt-launch %s exited %d: %s" % (args, rc, err))
    lines = out.strip().splitlines()
    if len(lines) != 1:
        raise AssertionError("--dry-run printed %d lines, expected one: %r" % (len(lines), out))
    return shlex.split(lines[0])


def x_values(argv):
    """The '-x' arguments, in order."""
    return [argv[i + 1] for i, w in enumerate(argv) if w == "-x"]


def contexts(argv):
    """mpirun argv split into MPMD app contexts at ':'."""
    out, cur = [], []
    for w in argv:
        if w == ":":
            out.append(cur)
            cur = []
        else:
            cur.append(w)
    return out + [cur]


def opt(argv, flag):
    return argv[argv.index(flag) + 1]


HOSTFILE = """# a DeepSpeed hostfile
worker-1 slots=4   # the big one

worker-2 slots=2
	worker-3   slots=3
"""


class TempFiles(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path


class HostfileTests(TempFiles):
    def test_slots_comments_blank_lines(self):
        pool = hostfile.parse_hostfile_text(HOSTFILE, "hf")
        self.assertEqual(pool, [("worker-1", 4), ("worker-2", 2), ("worker-3", 3)])

    def test_bad_lines_name_file_and_line(self):
        cases = {
            "worker-1 slots=4\nworker-2\n": "hf:2",
            "worker-1 slots=4\n\n# c\nworker-2 slots=two\n": "hf:4",
            "worker-1 slots=0\n": "hf:1",
            "worker-1 slots=2 gpus=2\n": "hf:1",
            "worker-1 slots=2\nworker-1 slots=2\n": "hf:2",
            "# only comments\n\n": "hf",
        }
        for text, where in cases.items():
            with self.assertRaises(LaunchError, msg=text) as cm:
                hostfile.parse_hostfile_text(text, "hf")
            self.assertTrue(str(cm.exception).startswith(where + ":"), str(cm.exception))

    def test_selection_rules(self):
        pool = hostfile.parse_hostfile_text(HOSTFILE, "hf")
        sel = hostfile.select_slots
        self.assertEqual(sel(pool), [("worker-1", [0, 1, 2, 3]), ("worker-2", [0, 1]), ("worker-3", [0, 1, 2])])
        self.assertEqual(sel(pool, include="worker-3:2,0@worker-1"), [("worker-1", [0, 1, 2, 3]), ("worker-3", [0, 2])])
        self.assertEqual(sel(pool, exclude="worker-2@worker-1:1,3"), [("worker-1", [0, 2]), ("worker-3", [0, 1, 2])])
        self.assertEqual(sel(pool, exclude="worker-2:0,1"), [("worker-1", [0, 1, 2, 3]), ("worker-3", [0, 1, 2])])
        self.assertEqual(sel(pool, num_nodes=2, num_gpus=2), [("worker-1", [0, 1]), ("worker-2", [0, 1])])
        for kwargs in ({"include": "worker-1", "exclude": "worker-2"}, {"include": "worker-9"},
                       {"include": "worker-1:4"}, {"include": "worker-1:0,0"}, {"include": "worker-1:x"},
                       {"include": "worker-1@worker-1:0"}, {"exclude": "worker-1@worker-2@worker-3"},
                       {"num_nodes": 4}, {"num_gpus": 3}, {"num_gpus": 0}):
            with self.assertRaises(LaunchError, msg=str(kwargs)):
                sel(pool, **kwargs)


class DryRunTests(TempFiles):
    def test_single_node(self):
        argv = dry(["-n", "2", "--", "/bin/true", "a b"])
        self.assertEqual(argv[0], "mpirun")
        self.assertEqual(opt(argv, "-np"), "2")
        self.assertEqual("--allow-run-as-root" in argv, IS_ROOT)
        self.assertIn("--oversubscribe", argv)
        self.assertEqual(opt(argv, "--bind-to"), "none")
        self.assertNotIn("--host", argv)
        threads = str(max(1, environment.local_cores() // 2))
        xs = x_values(argv)
        self.assertIn("OMP_NUM_THREADS=" + threads, xs)
        self.assertIn("OPENBLAS_NUM_THREADS=" + threads, xs)
        # PASSIVE only where the ranks' teams would share cores.
        self.assertEqual("OMP_WAIT_POLICY=PASSIVE" in xs, 2 * int(threads) > environment.local_cores())
        self.assertIn("PATH", xs)
        self.assertEqual(argv[-2:], ["/bin/true", "a b"])

    def test_zerotrain_command_runs_the_built_binary(self):
        fake = self.write("zerotrain", "#!/bin/sh\n")
        os.chmod(fake, 0o755)
        argv = dry(["-n", "2", "train", "--config", "c.json", "--steps", "3"], ZT_BIN=fake)
        self.assertEqual(argv[-6:], [fake, "train", "--config", "c.json", "--steps", "3"])
        rc, _, err = launch_in_process(["--dry-run", "-n", "2", "train"], ZT_BIN=os.path.join(self.tmp.name, "missing"))
        self.assertEqual(rc, 2)
        self.assertIn("ZT_BIN=", err)

    def test_user_environment(self):
        argv = dry(["-n", "3", "--env", "A=1", "--env", "B=x y", "--export", "HOME", "--mca", "btl_tcp_if_include",
                    "ib0", "--launcher-args", "--tag-output", "/bin/true"],
                   OMP_NUM_THREADS="7", NCCL_DEBUG="INFO", ZT_FOO="1", OMPI_MCA_foo="1")
        xs = x_values(argv)
        blas = "OPENBLAS_NUM_THREADS=%d" % max(1, environment.local_cores() // 3)
        for want in ("A=1", "B=x y", "HOME", "OMP_NUM_THREADS", "NCCL_DEBUG", "ZT_FOO", blas):
            self.assertIn(want, xs)
        self.assertFalse(any(x.startswith("OMP_NUM_THREADS=") for x in xs), xs)  # the user's 7 is passed as set
        self.assertFalse(any(x.startswith("OMPI_") for x in xs), xs)
        self.assertEqual(argv[argv.index("--mca") + 1:argv.index("--mca") + 3], ["btl_tcp_if_include", "ib0"])
        self.assertIn("--tag-output", argv[:argv.index("-np")])
        # The program's own arguments are never read as launcher options.
        argv = dry(["-n", "2", "/bin/echo", "--launcher-args", "-x", "--env", "A=1", "-n", "5"])
        self.assertEqual(argv[-7:], ["/bin/echo", "--launcher-args", "-x", "--env", "A=1", "-n", "5"])
        self.assertEqual(opt(argv, "-np"), "2")
        # --env overrides the launcher's own choice.
        self.assertIn("OMP_WAIT_POLICY=ACTIVE", x_values(dry(["-n", "1", "--env", "OMP_WAIT_POLICY=ACTIVE", "true"])))

    def test_wait_policy_passive_only_where_teams_share_cores(self):
        cores = environment.local_cores()
        over = x_values(dry(["-n", str(cores + 1), "/bin/true"]))  # more ranks than cores
        self.assertIn("OMP_WAIT_POLICY=PASSIVE", over)
        one = x_values(dry(["-n", "1", "/bin/true"]))  # one team with every core
        self.assertIn("OMP_NUM_THREADS=%d" % cores, one)
        self.assertFalse(any(x.startswith("OMP_WAIT_POLICY") for x in one), one)
        # A team the user sized past the cores shares them: from the environment or from --env.
        self.assertIn("OMP_WAIT_POLICY=PASSIVE", x_values(dry(["-n", "1", "/bin/true"],
                                                              OMP_NUM_THREADS=str(cores + 1))))
        self.assertIn("OMP_WAIT_POLICY=PASSIVE",
                      x_values(dry(["-n", "1", "--env", "OMP_NUM_THREADS=%d,1" % (cores + 1), "/bin/true"])))
        self.assertNotIn("OMP_WAIT_POLICY=PASSIVE",
                         x_values(dry(["-n", str(cores + 1), "--env", "OMP_WAIT_POLICY=ACTIVE", "/bin/true"])))

    def test_default_ranks_follow_visible_gpus(self):
        argv = dry(["/bin/true"], CUDA_VISIBLE_DEVICES="4,5,6")
        self.assertEqual(opt(argv, "-np"), "3")
        self.assertIn("CUDA_VISIBLE_DEVICES", x_values(argv))  # passed unchanged
        self.assertEqual(opt(dry(["/bin/true"], CUDA_VISIBLE_DEVICES=""), "-np"), "1")

    def test_local_selection_maps_through_visible_devices(self):
        argv = dry(["--include", "localhost:0,2", "/bin/true"], CUDA_VISIBLE_DEVICES="4,5,6")
        self.assertEqual(opt(argv, "-np"), "2")
        self.assertIn("CUDA_VISIBLE_DEVICES=4,6", x_values(argv))
        self.assertNotIn("CUDA_VISIBLE_DEVICES", x_values(argv))
        argv = dry(["--exclude", "localhost:0", "/bin/true"], CUDA_VISIBLE_DEVICES="4,5,6")
        self.assertIn("CUDA_VISIBLE_DEVICES=5,6", x_values(argv))
        self.assertEqual(opt(dry(["--num-gpus", "2", "/bin/true"], CUDA_VISIBLE_DEVICES="4,5,6"), "-np"), "2")

    def test_hostfile_selection_per_host_devices(self):
        hf = self.write("hosts", HOSTFILE)
        argv = dry(["--hostfile", hf, "--include", "worker-1:0,2@worker-3:1", "/bin/true"])
        self.assertNotIn("--oversubscribe", argv)
        ctx = contexts(argv)
        self.assertEqual(len(ctx), 2)
        self.assertEqual((opt(ctx[0], "-np"), opt(ctx[0], "--host")), ("2", "worker-1:2"))
        self.assertEqual((opt(ctx[1], "-np"), opt(ctx[1], "--host")), ("1", "worker-3:1"))
        self.assertIn("CUDA_VISIBLE_DEVICES=0,2", x_values(ctx[0]))
        self.assertIn("CUDA_VISIBLE_DEVICES=1", x_values(ctx[1]))
        for c in ctx:  # OpenMPI applies -x per app context: each one carries the common list
            self.assertIn("OPENBLAS_NUM_THREADS=%d" % max(1, environment.local_cores() // 2), x_values(c))
            self.assertEqual(c[-1], "/bin/true")

    def test_hostfile_same_layout_is_one_context(self):
        hf = self.write("hosts", HOSTFILE)
        argv = dry(["--hostfile", hf, "--num-nodes", "2", "--num-gpus", "2", "/bin/true"],
                   CUDA_VISIBLE_DEVICES="7")
        self.assertNotIn(":", argv)
        self.assertEqual(opt(argv, "-np"), "4")
        self.assertEqual(opt(argv, "--host"), "worker-1:2,worker-2:2")
        self.assertIn("CUDA_VISIBLE_DEVICES=0,1", x_values(argv))
        self.assertNotIn("CUDA_VISIBLE_DEVICES", x_values(argv))
        argv = dry(["--hostfile", hf, "--exclude", "worker-1@worker-2:1", "/bin/true"])
        self.assertEqual([opt(c, "--host") for c in contexts(argv)], ["worker-2:1", "worker-3:3"])
        self.assertEqual(int(opt(contexts(argv)[1], "-np")), 3)

    def test_local_hostfile_oversubscribes(self):
        hf = self.write("hosts", "localhost slots=3\n")
        argv = dry(["--hostfile", hf, "/bin/true"])
        self.assertIn("--oversubscribe", argv)
        self.assertEqual(opt(argv, "--host"), "localhost:3")

    def test_srun_under_slurm(self):
        argv = dry(["-n", "4", "/bin/true", "x"], SLURM_JOB_ID="42")
        self.assertEqual(argv[:3], ["srun", "--ntasks", "4"])
        export = [w for w in argv if w.startswith("--export=")]
        self.assertEqual(len(export), 1)
        self.assertTrue(export[0].startswith("--export=ALL,"))
        threads = max(1, environment.local_cores() // 4)
        self.assertIn("OMP_NUM_THREADS=%d" % threads, export[0].split(","))
        self.assertEqual("OMP_WAIT_POLICY=PASSIVE" in export[0].split(","), 4 * threads > environment.local_cores())
        self.assertNotIn("--allow-run-as-root", argv)
        self.assertEqual(argv[-2:], ["/bin/true", "x"])
        self.assertEqual(opt(dry(["/bin/true"], SLURM_JOB_ID="42", SLURM_NTASKS="6"), "--ntasks"), "6")
        argv = dry(["--num-nodes", "2", "--num-gpus", "4", "/bin/true"], SLURM_JOB_ID="42")
        self.assertEqual((opt(argv, "--ntasks"), opt(argv, "--nodes"), opt(argv, "--ntasks-per-node")), ("8", "2", "4"))
        self.assertEqual(dry(["--launcher", "mpirun", "-n", "2", "/bin/true"], SLURM_JOB_ID="42")[0], "mpirun")

    def test_srun_hostfile(self):
        hf = self.write("hosts", HOSTFILE)
        argv = dry(["--launcher", "srun", "--hostfile", hf, "--include", "worker-1:1,2@worker-3:1,2", "/bin/true"])
        self.assertEqual(argv[:2], ["env", "CUDA_VISIBLE_DEVICES=1,2"])  # ',' cannot go inside --export
        self.assertEqual(opt(argv, "--nodelist"), "worker-1,worker-3")
        self.assertEqual((opt(argv, "--ntasks"), opt(argv, "--ntasks-per-node")), ("4", "2"))
        rc, _, err = launch_in_process(["--dry-run", "--launcher", "srun", "--hostfile", hf, "/bin/true"])
        self.assertEqual(rc, 2)
        self.assertIn("srun", err)


class ErrorTests(TempFiles):
    def assert_exit2(self, args, needle, **extra):
        rc, out, err = launch_in_process(args, **extra)
        self.assertEqual(rc, 2, "zt-launch %s: rc %d, stderr %s" % (args, rc, err))
        self.assertEqual(out, "")
        self.assertIn(needle, err)

    def test_bad_inputs(self):
        hf = self.write("hosts", HOSTFILE)
        bad = self.write("bad", "worker-1 slots=2\n# fine\nworker-2 slots\n")
        self.assert_exit2(["--hostfile", bad, "/bin/true"], bad + ":3")
        self.assert_exit2(["--hostfile", os.path.join(self.tmp.name, "nope"), "/bin/true"], "nope")
        self.assert_exit2(["--hostfile", hf, "--include", "worker-1", "--exclude", "worker-2", "/bin/true"],
                          "--include and --exclude")
        self.assert_exit2(["--hostfile", hf, "--include", "worker-7", "/bin/true"], "worker-7")
        self.assert_exit2(["-n", "0", "/bin/true"], "-n 0")
        self.assert_exit2(["-n", "two", "/bin/true"], "-n")
        self.assert_exit2(["--bogus", "/bin/true"], "--bogus")
        self.assert_exit2(["-n", "2"], "no program")
        self.assert_exit2(["-n", "2", "no-such-program-zt"], "no-such-program-zt")
        self.assert_exit2(["-n", "2", "--hostfile", hf, "/bin/true"], "-n")
        self.assert_exit2(["--export", "ZT_UNSET_VAR", "/bin/true"], "ZT_UNSET_VAR")
        self.assert_exit2(["--env", "1X=2", "/bin/true"], "1X=2")
        self.assert_exit2(["-n", "1", "/bin/true"], "mpirun", ZT_MPIRUN="/nonexistent/mpirun")

    def test_exit_code_of_the_script(self):
        rc, out, err = launch(["-n", "0", "/bin/true"])
        self.assertEqual((rc, out), (2, ""))
        self.assertIn("-n 0", err)


class RealRunTests(unittest.TestCase):
    def test_two_ranks_print(self):
        rc, out, err = launch(["-n", "2", "--", "/bin/sh", "-c", "echo rank $OMPI_COMM_WORLD_RANK of "
                               "$OMPI_COMM_WORLD_SIZE threads $OMP_NUM_THREADS"])
        self.assertEqual(rc, 0, err)
        threads = max(1, environment.local_cores() // 2)
        self.assertEqual(sorted(out.split("\n")[:-1]),
                         ["rank 0 of 2 threads %d" % threads, "rank 1 of 2 threads %d" % threads])

    def test_exit_code_passes_through(self):
        rc, _, _ = launch(["-n", "2", "-q", "--", "/bin/sh", "-c", "exit $((3 + OMPI_COMM_WORLD_RANK))"])
        self.assertIn(rc, (3, 4))

    def test_zerotrain_two_ranks(self):
        binary = os.environ.get("ZT_BIN")
        if binary:  # set by ctest: the binary must be there
            self.assertTrue(os.access(binary, os.X_OK), "ZT_BIN=%s is not an executable" % binary)
        else:
            binary = os.path.join(REPO, "build", "zerotrain")
            if not os.access(binary, os.X_OK):
                self.skipTest("ZT_BIN is not set and zerotrain is not built at %s" % binary)
        rc, out, err = launch(["-n", "2", "train", "--config", "configs/ds/stage2.json", "--model",
                               "configs/models/gpt-tiny.json", "--data", "markov:vocab=64,order=1,seed=3",
                               "--steps", "3", "--device", "cpu"], ZT_BIN=binary)
        self.assertEqual(rc, 0, out + err)
        self.assertIn("world 2", out)
        self.assertIn("step     3", out)


if __name__ == "__main__":
    unittest.main()
