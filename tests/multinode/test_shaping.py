"""A slow link between the emulated nodes makes steps slower, by as much as the bytes say.

ctest: multinode_shaped_link. 2 nodes x 2 ranks train (fp32 ZeRO-2, gpt-tiny) with the nodes'
outgoing links unlimited, then limited to 2 Mbit/s (tc tbf). --tx-report gives the bytes each
node sent per step (its eth0 tx_bytes) and the wall time from one step's end to the next. Checks:
  - every node sends at least one fp32 copy of the parameters per step (ZeRO-2 across 2 nodes:
    half the gradients out, half the updated parameters out, each at least half a copy), and the
    same bytes with the link limited as without;
  - a limited step lasts (wall time) at least 70% of (bytes sent / rate), and longer than an
    unlimited one by at least half of that: the link, not the CPUs, sets its length. The step's
    own step_ms grows too, by at least a quarter of it (the rest of the wait falls between steps,
    outside step_ms).
--delay needs netem: where the kernel lacks it the script must say so and run undelayed; the
delay measurement is then skipped with that reason. Exits 77 (skipped) when this machine cannot
create namespaces.
"""
import json
import os
import re
import shutil
import statistics
import tempfile
import unittest

from mn_common import CLUSTER, exit_if_no_cluster, leftovers, run
from test_train import fp32_config, train_args

STEPS = 6
RATE, RATE_BITS_PER_S = "2mbit", 2e6
DELAY, DELAY_S = "20ms", 0.020
PARAM_BYTES = 28544 * 4  # gpt-tiny in fp32


class ShapingTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="zt-mn-test.")
        cls.config = os.path.join(cls.dir, "stage2.json")
        with open(cls.config, "w") as f:
            json.dump(fp32_config(2, small_buckets=False), f)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def train(self, name, *shaping):
        """Over steps 2.. (1 has the start-up): median wall ms and step ms, and the mean bytes per step of
        the busiest node (a mean: bytes that reach the counter after a step's line count for the next)."""
        report = os.path.join(self.dir, name + ".tx.jsonl")
        rc, out = run(["bash", CLUSTER, *shaping, "--tx-report", report, "--", "-q"]
                      + train_args(self.config, name, steps=STEPS), self.dir, timeout=120)
        self.assertEqual(rc, 0, out)
        self.assertEqual(leftovers(), [])
        self.assertIn("bytes sent per step by each node (eth0 tx_bytes", out)
        with open(report) as f:
            rows = [json.loads(ln) for ln in f]
        self.assertEqual([r["step"] for r in rows], list(range(1, STEPS + 1)), out)
        mean_sent = {node: statistics.mean(r["tx_bytes"][node] for r in rows[1:]) for node in rows[0]["tx_bytes"]}
        for node, sent in mean_sent.items():
            self.assertGreaterEqual(sent, PARAM_BYTES, "%s: %s sends too little per step" % (name, node))
        wall_ms = statistics.median(r["wall_ms"] for r in rows[1:])
        step_ms = statistics.median(r["step_ms"] for r in rows[1:])
        sent = max(mean_sent.values())
        print("%-9s median step: %.1f ms wall, %.1f ms step_ms; the busiest node sends %.0f B per step"
              % (name, wall_ms, step_ms, sent), flush=True)
        return wall_ms, step_ms, sent, out

    def test_a_slow_link_slows_the_steps(self):
        fast_wall, fast_step, fast_bytes, _ = self.train("unlimited")
        slow_wall, slow_step, slow_bytes, out = self.train("limited", "--rate", RATE)
        self.assertIn("outgoing link per node: %s" % RATE, out)
        self.assertLess(abs(slow_bytes - fast_bytes), 0.2 * fast_bytes, "the traffic itself changed with the rate")
        wire_ms = slow_bytes * 8 / RATE_BITS_PER_S * 1000
        print("at %s the busiest node's bytes need %.1f ms per step on the wire" % (RATE, wire_ms), flush=True)
        self.assertGreaterEqual(slow_wall, 0.7 * wire_ms)
        self.assertGreaterEqual(slow_wall - fast_wall, 0.5 * wire_ms)
        self.assertGreaterEqual(slow_step - fast_step, 0.25 * wire_ms)

    def test_a_delay_needs_netem(self):
        rc, out = run(["bash", CLUSTER, "--delay", DELAY, "--", "-q", "--", "/bin/true"], self.dir, timeout=60)
        self.assertEqual(rc, 0, out)
        self.assertEqual(leftovers(), [])
        missing = re.search(r"--delay %s is unavailable: (.+); the links are not delayed" % DELAY, out)
        if missing:
            self.assertIn("outgoing link per node: unlimited rate, no added delay", out)
            self.skipTest("no delay measured: " + missing.group(1))
        self.assertIn("outgoing link per node: unlimited rate, %s" % DELAY, out)
        fast_wall, _, _, _ = self.train("undelayed")
        slow_wall, _, _, _ = self.train("delayed", "--delay", DELAY)
        self.assertGreaterEqual(slow_wall - fast_wall, DELAY_S * 1000)  # at least one crossing per step waits


if __name__ == "__main__":
    exit_if_no_cluster()
    unittest.main(verbosity=2)
