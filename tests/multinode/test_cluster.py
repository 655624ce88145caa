"""The emulated cluster itself: nodes, names, the skip rule, and cleanup on every exit path.

ctest: multinode_cluster. Exits 77 (skipped) when this machine cannot create namespaces.
"""
import os
import shutil
import signal
import subprocess
import time
import unittest

from mn_common import (CLUSTER, EXIT_SKIP, PREFIX, TempDirTest, exit_if_no_cluster, leftovers, ns_pids, run,
                       zerotrain_env)

RANK_LINE = 'echo "rank=$OMPI_COMM_WORLD_RANK local=$OMPI_COMM_WORLD_LOCAL_RANK host=$(hostname) ' \
            'addr=$(ip -4 -o addr show eth0 | awk \'{print $4}\')"'


def wait_for(predicate, timeout, what):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError("timed out after %.0f s waiting for %s" % (timeout, what))


class ClusterTests(TempDirTest):
    def test_ranks_land_on_their_nodes_and_nothing_is_left(self):
        rc, out = run(["bash", CLUSTER, "--nodes", "3", "--slots", "2", "--", "-q", "--", "/bin/sh", "-c",
                       RANK_LINE], self.dir, timeout=60)
        self.assertEqual(rc, 0, out)
        for rank in range(6):
            node = rank // 2
            self.assertIn("rank=%d local=%d host=node%d addr=10.77.0.%d/24" % (rank, rank % 2, node, node + 1),
                          out)
        self.assertEqual(leftovers(), [])

    def test_a_failing_job_is_cleaned_up_and_its_exit_code_kept(self):
        rc, out = run(["bash", CLUSTER, "--", "-q", "--", "/bin/sh", "-c",
                       '[ "$OMPI_COMM_WORLD_RANK" = 3 ] && exit 7; exit 0'], self.dir, timeout=60)
        self.assertEqual(rc, 7, out)
        self.assertEqual(leftovers(), [])

    def test_sigterm_to_the_script_removes_everything(self):
        p = subprocess.Popen(["bash", CLUSTER, "--", "-q", "--", "/bin/sleep", "600"], cwd=self.dir,
                             env=zerotrain_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        try:
            wait_for(lambda: len(ns_pids(PREFIX + "-node1")) >= 2, 30, "the sleeps on node1")
            p.send_signal(signal.SIGTERM)
            p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.assertEqual(p.returncode, 143)
        self.assertEqual(leftovers(), [])

    def test_leftovers_of_a_killed_run_are_removed_on_the_next_start(self):
        p = subprocess.Popen(["bash", CLUSTER, "--", "-q", "--", "/bin/sleep", "600"], cwd=self.dir,
                             env=zerotrain_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: len(ns_pids(PREFIX + "-node1")) >= 2, 30, "the sleeps on node1")
        stranded = ns_pids(PREFIX + "-node0") + ns_pids(PREFIX + "-node1")
        p.kill()  # SIGKILL: no trap runs, the cluster and its processes stay
        p.wait()
        self.assertIn(PREFIX + "-node0", leftovers())
        rc, out = run(["bash", CLUSTER, "--cleanup"], self.dir, timeout=60)
        self.assertEqual(rc, 0, out)
        self.assertIn("removing what an earlier run left behind: %s-node0 %s-node1" % (PREFIX, PREFIX), out)
        self.assertEqual(leftovers(), [])
        for pid in stranded:
            self.assertFalse(os.path.exists("/proc/%d" % pid) and not _is_zombie(pid),
                             "pid %d of the killed run still runs" % pid)

    def test_bad_arguments_exit_2(self):
        for args, message in ((["--nodes", "0", "--", "train"], "--nodes '0': expected 1 to 200"),
                              (["--rate", "fast", "--", "train"], "--rate 'fast': expected a tc rate"),
                              (["--tx-report", "r.jsonl", "--", "train"], "needs the train arguments to include "
                                                                          "--metrics PATH"),
                              (["--bogus"], "unknown option '--bogus'"),
                              ([], "no zt-launch arguments after --")):
            rc, out = run(["bash", CLUSTER] + args, self.dir, timeout=30)
            self.assertEqual(rc, 2, (args, out))
            self.assertIn(message, out)
        self.assertEqual(leftovers(), [])

    @unittest.skipUnless(os.getuid() == 0 and shutil.which("setpriv"), "needs root and setpriv to drop privilege")
    def test_without_privilege_it_skips_with_the_reason(self):
        p = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "bash", CLUSTER,
                            "--", "train"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                           cwd="/", timeout=30)
        self.assertEqual(p.returncode, EXIT_SKIP, p.stdout)
        self.assertRegex(p.stdout, r"SKIP: cannot build an emulated cluster here: cannot create a network namespace "
                                   r"\(ip netns add: .+\); run as root")


def _is_zombie(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


if __name__ == "__main__":
    exit_if_no_cluster()
    unittest.main(verbosity=2)
