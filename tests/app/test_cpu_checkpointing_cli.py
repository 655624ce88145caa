"""activation_checkpointing.cpu_checkpointing through the CLI (CPU backend, 2 ranks, gpt-tiny).

The tutorial config configs/ds/tutorial/micro1_gas8_offload_cpuckpt.json (micro-batch 1 x
gradient accumulation 8, bf16, stage 2, contiguous_gradients false, offload_optimizer cpu,
partition_activations and cpu_checkpointing), 5 steps at 2 ranks:
  * as written (no recompute): check-config and train both accept it and print the one warning
    that cpu_checkpointing has no effect without recompute; no host_activations bytes;
  * with `train --recompute block`: no such warning; the memory report's host_activations equals
    its prediction and the L-1 kept block inputs on every rank, device activations are lower than
    block recompute alone, and the loss curve is bitwise the one of the run as written (recompute
    and the host round trip change no bits);
  * `zerotrain estimate --recompute block` predicts the same host_activations bytes.
"""
import json
import os
import subprocess
import tempfile
import unittest

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
REPO = os.environ.get("ZT_REPO", ".")
MPI = [MPIEXEC, "--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-np", "2", "-x", "OMP_NUM_THREADS=1",
       "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1", "-x", "ZT_COMM_TIMEOUT_S=120"]
MODEL = os.path.join(REPO, "configs/models/gpt-tiny.json")
TUTORIAL = os.path.join(REPO, "configs/ds/tutorial/micro1_gas8_offload_cpuckpt.json")
WARNING = "activation_checkpointing.cpu_checkpointing: true has no effect without activation recompute"

# The runs use the tutorial file with ADD merged in and the REMOVE paths dropped; with both empty
# (as now: the file trains as written) they run the file itself.
ADD = {}
REMOVE = []


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout, p.stderr


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class CpuCheckpointingCli(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.d = cls.tmp.name
        with open(MODEL) as f:
            m = json.load(f)
        # One kept block input per rank leaves the device for each of blocks 0..L-2 (bf16: 2 bytes).
        cls.host_bytes = (m["n_layer"] - 1) * 1 * m["n_ctx"] * m["n_embd"] * 2
        cls.cfg = cls.config_file("tutorial.json", {})
        cls.no_cpu = cls.config_file("no_cpu.json", {"activation_checkpointing": {"cpu_checkpointing": False}})
        cls.runs = {}

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def config_file(cls, name, patch):
        if not ADD and not REMOVE and not patch:
            return TUTORIAL
        with open(TUTORIAL) as f:
            doc = json.load(f)
        for path in REMOVE:
            *parents, leaf = path.split(".")
            d = doc
            for k in parents:
                d = d[k]
            del d[leaf]
        for top, value in list(ADD.items()) + list(patch.items()):
            if isinstance(value, dict) and isinstance(doc.get(top), dict):
                doc[top] = {**doc[top], **value}
            else:
                doc[top] = value
        out = os.path.join(cls.d, name)
        with open(out, "w") as f:
            json.dump(doc, f)
        return out

    def train(self, name, cfg, *extra):
        if name not in self.runs:
            metrics, report = os.path.join(self.d, name + ".jsonl"), os.path.join(self.d, name + ".mem.json")
            rc, out, err = run(MPI + [BIN, "train", "--config", cfg, "--model", MODEL, "--data",
                                      "markov:vocab=64,order=1,seed=3", "--steps", "5", "--seed", "7", "--device", "cpu",
                                      "--metrics", metrics, "--memory-report", report, *extra])
            self.assertEqual(rc, 0, f"{name}: {out}\n{err}")
            with open(report) as f:
                ranks = json.load(f)["ranks"]
            self.runs[name] = (read_jsonl(metrics), ranks, out + err)
        return self.runs[name]

    def test_as_written_trains_with_the_one_warning(self):
        rc, out, err = run([BIN, "check-config", self.cfg, "--world-size", "2"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(err.count(WARNING), 1, err)
        rows, ranks, log = self.train("as_written", self.cfg)
        self.assertEqual(len(rows), 5)
        self.assertEqual(log.count(WARNING), 1, log)
        self.assertEqual(len(ranks), 2)
        for r in ranks:
            host = r["categories"]["host_activations"]
            self.assertEqual((host["measured_bytes"], host["predicted_bytes"]), (0, 0))

    def test_with_recompute_the_inputs_live_on_the_host_bitwise(self):
        rows, ranks, log = self.train("block_cpu", self.cfg, "--recompute", "block")
        self.assertNotIn(WARNING, log)
        self.assertIn("cpu_checkpointing=on", log)
        ref_rows, _, _ = self.train("as_written", self.cfg)
        self.assertEqual([r["loss"] for r in rows], [r["loss"] for r in ref_rows])
        self.assertEqual([r["grad_norm"] for r in rows], [r["grad_norm"] for r in ref_rows])
        alone_rows, alone_ranks, _ = self.train("block_alone", self.no_cpu, "--recompute", "block")
        self.assertEqual([r["loss"] for r in rows], [r["loss"] for r in alone_rows])
        for r, alone in zip(ranks, alone_ranks):
            host = r["categories"]["host_activations"]
            self.assertEqual(host["measured_bytes"], self.host_bytes, r["rank"])
            self.assertEqual(host["predicted_bytes"], host["measured_bytes"], r["rank"])
            act, act_alone = r["categories"]["activations"], alone["categories"]["activations"]
            self.assertEqual(act["measured_bytes"], act_alone["measured_bytes"] - self.host_bytes, r["rank"])
            self.assertEqual(act["predicted_bytes"], act["measured_bytes"], r["rank"])
        est_json = os.path.join(self.d, "estimate.json")
        rc, out, err = run([BIN, "estimate", "--config", self.cfg, "--model", MODEL, "--world-size", "2",
                            "--recompute", "block", "--device", "cpu", "--json", est_json])
        self.assertEqual(rc, 0, err)
        self.assertNotIn(WARNING, err)
        self.assertIn("host_activations (cpu_checkpointing)", out)
        with open(est_json) as f:
            est = json.load(f)
        for r in est["ranks"]:
            self.assertEqual(r["categories"]["host_activations"]["predicted_bytes"], self.host_bytes)


if __name__ == "__main__":
    unittest.main(verbosity=2)
