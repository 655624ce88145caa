"""A rank killed on a remote node ends the whole job, and the report names the rank and its host.

ctest: multinode_kill_remote_rank. 2 nodes x 2 ranks train (fp32 ZeRO-2) until rank 3, on node1,
gets SIGKILL. mpirun (started by zt-launch on node0) must stop every other rank and exit within
30 s, printing which rank died on which node and how. Exits 77 (skipped) when this machine cannot
create namespaces.
"""
import json
import os
import signal
import subprocess
import time
import unittest

from mn_common import CLUSTER, PREFIX, TempDirTest, exit_if_no_cluster, leftovers, rank_pid, zerotrain_env
from test_train import fp32_config, train_args

END_WITHIN_S = 30


def metrics_lines(path):
    try:
        with open(path) as f:
            return sum(1 for ln in f if ln.endswith("\n"))
    except FileNotFoundError:
        return 0


class KillTests(TempDirTest):
    def test_sigkill_of_a_remote_rank_ends_the_job(self):
        config = os.path.join(self.dir, "stage2.json")
        with open(config, "w") as f:
            json.dump(fp32_config(2), f)
        log = open(os.path.join(self.dir, "job.log"), "w+")
        p = subprocess.Popen(["bash", CLUSTER, "--", "-q"] + train_args(config, "run", steps=100000), cwd=self.dir,
                             env=zerotrain_env(), stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 60
            while metrics_lines(os.path.join(self.dir, "run.jsonl")) < 2 and time.monotonic() < deadline:
                self.assertIsNone(p.poll(), "the job ended before it was killed")
                time.sleep(0.1)
            pid = rank_pid(PREFIX + "-node1", 3)
            self.assertIsNotNone(pid, "rank 3 is not running inside node1's namespace")
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                self.assertIn(b"zerotrain\0train\0", f.read())
            os.kill(pid, signal.SIGKILL)
            killed_at = time.monotonic()
            p.wait(timeout=END_WITHIN_S + 30)
            took = time.monotonic() - killed_at
        finally:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
            log.seek(0)
            out = log.read()
            log.close()
        print("the job ended %.1f s after rank 3 was killed, exit %d" % (took, p.returncode))
        self.assertLessEqual(took, END_WITHIN_S, out)
        self.assertEqual(p.returncode, 128 + signal.SIGKILL, out)
        self.assertIn("mpirun noticed that process rank 3 with PID %d on node node1 exited on signal 9 (Killed)."
                      % pid, out)
        self.assertEqual(leftovers(), [])


if __name__ == "__main__":
    exit_if_no_cluster()
    unittest.main(verbosity=2)
