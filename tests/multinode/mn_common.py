"""Shared by the emulated-cluster tests: paths, the skip rule, running the cluster script."""
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CLUSTER = os.path.join(HERE, "emulated-cluster.sh")
ZT_LAUNCH = os.path.join(REPO, "launcher", "zt-launch")
PREFIX = "ztmn"
EXIT_SKIP = 77


def exit_if_no_cluster():
    """ctest SKIP_RETURN_CODE: exit 77 with the reason when this machine cannot build a cluster."""
    p = subprocess.run(["bash", CLUSTER, "--probe"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True)
    if p.returncode == EXIT_SKIP:
        print(p.stdout.strip(), flush=True)
        sys.exit(EXIT_SKIP)
    if p.returncode != 0:
        sys.exit("emulated-cluster.sh --probe failed (exit %d): %s" % (p.returncode, p.stdout))


def zerotrain_env():
    """ZT_BIN (set by ctest) or build/zerotrain; OMPI's run-as-root variables are not needed."""
    env = dict(os.environ)
    env.setdefault("ZT_BIN", os.path.join(REPO, "build", "zerotrain"))
    for name in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"):
        env.pop(name, None)
    return env


def run(argv, cwd, timeout):
    p = subprocess.run(argv, cwd=cwd, env=zerotrain_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, timeout=timeout)
    return p.returncode, p.stdout


def leftovers():
    """Everything of an emulated cluster that exists now: namespaces, links, hosts files, run dirs."""
    found = []
    ns = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, universal_newlines=True).stdout
    found += [ln.split()[0] for ln in ns.splitlines() if ln.startswith(PREFIX + "-")]
    links = subprocess.run(["ip", "-o", "link", "show"], stdout=subprocess.PIPE, universal_newlines=True).stdout
    found += [m for m in re.findall(r"^\d+: ([^:@]+)", links, re.M) if m.startswith(PREFIX + "-")]
    if os.path.isdir("/etc/netns"):
        found += ["/etc/netns/" + d for d in os.listdir("/etc/netns") if d.startswith(PREFIX + "-")]
    found += ["/tmp/" + d for d in os.listdir("/tmp") if d.startswith(PREFIX + "-run.")]
    return found


def ns_pids(ns):
    p = subprocess.run(["ip", "netns", "pids", ns], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       universal_newlines=True)
    return [int(x) for x in p.stdout.split()]


def rank_pid(ns, rank):
    """The pid of MPI rank `rank` running inside namespace ns, or None."""
    for pid in ns_pids(ns):
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if b"OMPI_COMM_WORLD_RANK=%d" % rank in env:
            return pid
    return None


class TempDirTest(unittest.TestCase):
    """Each test runs in its own fresh directory, self.dir, removed afterwards."""

    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="zt-mn-test.")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)
