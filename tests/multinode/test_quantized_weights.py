"""Quantised weights (zero_quantized_weights) across emulated nodes: the bytes that leave each node.

ctest: multinode_quantized_weights. 2 nodes x 2 ranks train fp32 ZeRO-3 (gpt-tiny, parameters
gathered, no persistence) with and without zero_quantized_weights; --tx-report gives the bytes each
node sent per step (its eth0 tx_bytes). The prediction comes from `zerotrain explain`'s list of the
step's collectives: the gathers shrink from 4 bytes per element to ~1 (int8 codes + one fp32 scale
per 8000), the gradient reduce-scatters do not. Checks: the measured ratio of the busiest node's
bytes (quantised / plain) within 0.1 of the ratio of the collectives' bytes, and the quantised run's
losses within 2% of the plain run's. Exits 77 (skipped) when this machine cannot create namespaces.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
import unittest

from mn_common import GPT_TINY, ClusterRun, exit_if_no_cluster, zerotrain_env
from test_train import fp32_config, losses, train_args

STEPS = 6


def config(quantized):
    c = fp32_config(3, small_buckets=False)
    c["zero_optimization"].update({"stage3_param_persistence_threshold": 0, "zero_quantized_weights": quantized})
    return c


class QuantizedWeightsAcrossNodes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="zt-mn-test.")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def write_config(self, quantized):
        path = os.path.join(self.dir, "q%d.json" % quantized)
        with open(path, "w") as f:
            json.dump(config(quantized), f)
        return path

    def planned_bytes(self, cfg):
        """Σ bytes of the step's collectives by explain, (gathers, the rest), for 4 ranks."""
        env = zerotrain_env()
        p = subprocess.run([env["ZT_BIN"], "explain", "--config", cfg,
                            "--model", GPT_TINY, "--world-size", "4"],
                           capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        gathers = rest = 0
        for line in p.stdout.splitlines():
            m = re.match(r"\s+\d+\s+(?:micro \d+|boundary)\s+\S+(?: u\d+| step)?\s+(\w+)\s+(.+?)\s+count \d+\s+(\d+) B", line)
            if m:
                if m.group(2).startswith("gather "):
                    gathers += int(m.group(3))
                else:
                    rest += int(m.group(3))
        self.assertGreater(gathers, 0, p.stdout)
        return gathers, rest

    def train(self, quantized):
        prefix = os.path.join(self.dir, "q%d" % quantized)
        r = ClusterRun(self, self.dir, "q%d" % quantized, train_args(self.write_config(quantized), prefix, steps=STEPS),
                       STEPS)
        return r.sent, losses(prefix + ".jsonl")

    def test_bytes_leaving_each_node_shrink_as_predicted(self):
        plain_bytes, plain_losses = self.train(False)
        q_bytes, q_losses = self.train(True)
        g0, r0 = self.planned_bytes(self.write_config(False))
        g1, r1 = self.planned_bytes(self.write_config(True))
        predicted, measured = (g1 + r1) / (g0 + r0), q_bytes / plain_bytes
        print("bytes per step leaving the busiest node: %.0f plain, %.0f int8 weights: ratio %.3f (collectives "
              "predict %.3f; gathers %d -> %d B)" % (plain_bytes, q_bytes, measured, predicted, g0, g1), flush=True)
        self.assertLess(abs(measured - predicted), 0.1)
        self.assertEqual([s for s, _ in q_losses], [s for s, _ in plain_losses])
        for (s, a), (_, b) in zip(plain_losses, q_losses):
            self.assertLess(abs(a - b) / a, 0.02, "step %d: %.5f plain vs %.5f quantised" % (s, a, b))


if __name__ == "__main__":
    exit_if_no_cluster()
    unittest.main(verbosity=2)
