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
import unittest

from mn_common import ClusterRun, TempDirTest, exit_if_no_cluster, explain_node_bytes
from test_train import fp32_config, losses, train_args

STEPS = 6


class QuantizedGradientsAcrossNodes(TempDirTest):
    def write_config(self, on):
        c = fp32_config(3, small_buckets=False)
        c["zero_optimization"].update({"stage3_param_persistence_threshold": 0, "zero_quantized_gradients": on})
        path = os.path.join(self.dir, "g%d.json" % on)
        with open(path, "w") as f:
            json.dump(c, f)
        return path

    def train(self, on):
        prefix = os.path.join(self.dir, "g%d" % on)
        r = ClusterRun(self, self.dir, "g%d" % on, train_args(self.write_config(on), prefix, steps=STEPS), STEPS,
                       comm_log=True)
        return r.sent, losses(prefix + ".jsonl"), r.records

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
        p0, p1 = explain_node_bytes(self, self.write_config(False)), explain_node_bytes(self, self.write_config(True))
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
