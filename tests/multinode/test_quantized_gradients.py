"""Quantised gradients (zero_quantized_gradients, qgZ) across emulated nodes: two hops, and the bytes.

ctest: multinode_quantized_gradients. 2 nodes x 2 ranks train fp32 ZeRO-3 (gpt-tiny, parameters
gathered, no persistence) with and without zero_quantized_gradients, with --comm-log and --tx-report
(each node's eth0 tx_bytes per step). Checks:
* every bucket's reduction is two all_to_alls: "bN int4 intra" over the node's 2 ranks, sending
  nothing to the other node, then "bN int4 inter" over one rank of each node, which does; no
  reduce-scatter is left;
* the busiest node's bytes per step, qgZ / plain, within 0.1 of the ratio `zerotrain explain
  --nodes 2` predicts, and below 0.75 (the gradients cross as int4 partial sums of the node);
* the losses within 2% of the plain run's at every step.
Exits 77 (skipped) when this machine cannot create namespaces.
"""
import json
import os
import re
import statistics
import subprocess
import unittest

from mn_common import CLUSTER, REPO, TempDirTest, exit_if_no_cluster, leftovers, run, zerotrain_env
from test_train import fp32_config, losses, train_args

STEPS = 6
MODEL = os.path.join(REPO, "configs", "models", "gpt-tiny.json")


class QuantizedGradientsAcrossNodes(TempDirTest):
    def write_config(self, on):
        c = fp32_config(3, small_buckets=False)
        c["zero_optimization"].update({"stage3_param_persistence_threshold": 0, "zero_quantized_gradients": on})
        path = os.path.join(self.dir, "g%d.json" % on)
        with open(path, "w") as f:
            json.dump(c, f)
        return path

    def predicted(self, cfg):
        env = zerotrain_env()
        p = subprocess.run([env["ZT_BIN"], "explain", "--config", cfg, "--model", MODEL, "--world-size", "4",
                            "--nodes", "2"], capture_output=True, text=True, env=env, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        m = re.search(r"\((\d+) B\) with the MPI backend", p.stdout)
        self.assertIsNotNone(m, p.stdout)
        return int(m.group(1))

    def train(self, on):
        name = "g%d" % on
        report, log = os.path.join(self.dir, name + ".tx.jsonl"), os.path.join(self.dir, name + ".comm.jsonl")
        rc, out = run(["bash", CLUSTER, "--tx-report", report, "--", "-q"]
                      + train_args(self.write_config(on), os.path.join(self.dir, name), steps=STEPS)
                      + ["--comm-log", log], self.dir, timeout=120)
        self.assertEqual(rc, 0, out)
        self.assertEqual(leftovers(), [])
        with open(report) as f:
            rows = [json.loads(ln) for ln in f]
        self.assertEqual([r["step"] for r in rows], list(range(1, STEPS + 1)), out)
        sent = max(statistics.mean(r["tx_bytes"][node] for r in rows[1:]) for node in rows[0]["tx_bytes"])
        with open(log) as f:
            records = [json.loads(ln) for ln in f]
        return sent, losses(os.path.join(self.dir, name + ".jsonl")), records

    def test_two_hops_and_the_bytes_leaving_each_node(self):
        plain_sent, plain_losses, _ = self.train(False)
        sent, q_losses, log = self.train(True)
        self.assertFalse([r for r in log if r["op"] == "reduce_scatter"])
        intra = [r for r in log if r["op"] == "all_to_all" and r["label"].endswith(" int4 intra")]
        inter = [r for r in log if r["op"] == "all_to_all" and r["label"].endswith(" int4 inter")]
        self.assertGreater(len(intra), 0)
        self.assertEqual(len(intra), len(inter))
        for r in intra:
            self.assertEqual((r.get("ranks"), r["node_send_bytes"]), (2, 0), r)
        for r in inter:
            self.assertEqual((r.get("ranks"), r.get("across")), (2, True), r)
            self.assertGreater(r["node_send_bytes"], 0, r)
        p0, p1 = self.predicted(self.write_config(False)), self.predicted(self.write_config(True))
        print("bytes per step leaving the busiest node: %.0f plain, %.0f int4 gradients: ratio %.3f (explain "
              "predicts %d -> %d B, %.3f)" % (plain_sent, sent, sent / plain_sent, p0, p1, p1 / p0), flush=True)
        self.assertLess(abs(sent / plain_sent - p1 / p0), 0.1)
        self.assertLess(sent / plain_sent, 0.75)
        self.assertEqual([s for s, _ in q_losses], [s for s, _ in plain_losses])
        for (s, a), (_, b) in zip(plain_losses, q_losses):
            self.assertLess(abs(a - b) / a, 0.02, "step %d: %.5f plain vs %.5f quantised gradients" % (s, a, b))


if __name__ == "__main__":
    exit_if_no_cluster()
    unittest.main(verbosity=2)
