"""zerotrain on the emulated cluster: the same training as on one node, bit for bit.

ctest: multinode_equal_stage{0,1,2,3}. 2 nodes x 2 ranks (TCP between the nodes, shared memory
within one), and for stage 3 also 4 nodes x 1 rank, against 1 node x 4 ranks (`zt-launch -n 4`):
fp32, gpt-tiny, markov data, 10 steps.
The per-step losses must be equal and the saved safetensors files identical byte for byte: the
MPI backend reduces in rank order whatever the transport, and rank r owns the same shard and the
same data in both layouts. Exits 77 (skipped) when this machine cannot create namespaces.
"""
import json
import os
import unittest

from mn_common import CLUSTER, REPO, ZT_LAUNCH, TempDirTest, exit_if_no_cluster, leftovers, run

STEPS = 10


def fp32_config(stage, small_buckets=True):
    """With small_buckets, overlap and accumulation, each step has several collectives of each kind."""
    zero = {"stage": stage}
    if small_buckets:
        zero.update({"overlap_comm": True, "reduce_bucket_size": 2000})
    if stage == 3 and small_buckets:
        zero.update({"stage3_param_persistence_threshold": 100, "stage3_prefetch_bucket_size": 300})
    return {"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
            "gradient_clipping": 1.0, "zero_optimization": zero,
            "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.95], "weight_decay": 0.1}}}


def train_args(config, out_prefix, steps=STEPS):
    return ["train", "--config", config, "--model", os.path.join(REPO, "configs", "models", "gpt-tiny.json"),
            "--data", "markov:vocab=64,order=1,seed=3", "--steps", str(steps), "--device", "cpu", "--seed", "5",
            "--metrics", out_prefix + ".jsonl", "--save-weights", out_prefix + ".safetensors"]


def losses(path):
    with open(path) as f:
        return [(r["step"], r["loss"]) for r in map(json.loads, f)]


class EqualityTests(TempDirTest):
    def check_stage(self, stage, layouts=((2, 2),)):
        """Each (nodes, ranks per node) layout of 4 ranks against 1 node x 4 ranks."""
        config = os.path.join(self.dir, "stage%d.json" % stage)
        with open(config, "w") as f:
            json.dump(fp32_config(stage), f)
        rc, out = run([ZT_LAUNCH, "-q", "-n", "4"] + train_args(config, "one"), self.dir, timeout=120)
        self.assertEqual(rc, 0, out)
        one_losses = losses(os.path.join(self.dir, "one.jsonl"))
        self.assertEqual(len(one_losses), STEPS)
        with open(os.path.join(self.dir, "one.safetensors"), "rb") as f:
            one_bytes = f.read()
        self.assertGreater(len(one_bytes), 28544 * 4)  # gpt-tiny's parameters in fp32, plus the header

        for nodes, slots in layouts:
            name = "%dx%d" % (nodes, slots)
            rc, out = run(["bash", CLUSTER, "--nodes", str(nodes), "--slots", str(slots), "--", "-q"]
                          + train_args(config, name), self.dir, timeout=120)
            self.assertEqual(rc, 0, out)
            self.assertEqual(leftovers(), [])
            self.assertIn("ZeRO stage %d, world 4" % stage, out)
            self.assertIn("fp32 compute", out)
            for rank in range(4):  # really separate nodes: host names and local ranks from MPI
                self.assertRegex(out, r"rank %d\s+host node%d\s+node %d/%d\s+local_rank %d/%d"
                                 % (rank, rank // slots, rank // slots, nodes, rank % slots, slots))
            self.assertEqual(losses(os.path.join(self.dir, name + ".jsonl")), one_losses, name)
            with open(os.path.join(self.dir, name + ".safetensors"), "rb") as f:
                self.assertTrue(f.read() == one_bytes, "stage %d: the weights saved by %d nodes x %d ranks "
                                                       "differ from 1 node x 4 ranks" % (stage, nodes, slots))

    def test_stage0(self):
        self.check_stage(0)

    def test_stage1(self):
        self.check_stage(1)

    def test_stage2(self):
        self.check_stage(2)

    def test_stage3(self):
        self.check_stage(3, layouts=((2, 2), (4, 1)))


if __name__ == "__main__":
    exit_if_no_cluster()
    unittest.main(verbosity=2)
