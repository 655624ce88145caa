"""ZeRO-Offload through the CLI (CPU backend, under mpirun).

* Every invalid offload field -> one message naming the JSON key, exit 2, from `check-config`
  and from `train` alike (they share the trainer's verdict).
* A stage-3 offload config (optimizer + parameters) trains, and its memory report shows device
  master / moments / params at 0 and the host categories equal to their prediction, per rank.
"""
import json
import os
import subprocess
import tempfile
import unittest

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
REPO = os.environ.get("ZT_REPO", ".")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1"]
MODEL = os.path.join(REPO, "configs/models/gpt-tiny.json")


def config(stage, offload_optimizer=None, offload_param=None):
    z = {"stage": stage, "reduce_bucket_size": 5000, "stage3_param_persistence_threshold": 100}
    if offload_optimizer is not None:
        z["offload_optimizer"] = offload_optimizer
    if offload_param is not None:
        z["offload_param"] = offload_param
    return {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "bf16": {"enabled": True},
            "zero_optimization": z, "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}


class OffloadCli(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, obj):
        path = os.path.join(self.d, name)
        with open(path, "w") as f:
            json.dump(obj, f)
        return path

    def run_both(self, cfg):
        """(check-config result, 2-rank train result) for one config."""
        path = self.write("ds.json", cfg)
        check = subprocess.run([BIN, "check-config", path, "--world-size", "2"], capture_output=True, text=True,
                               timeout=60)
        train = subprocess.run([MPIEXEC] + MPI_FLAGS + ["-np", "2", BIN, "train", "--config", path, "--model", MODEL,
                                "--data", "markov:vocab=64,order=1,seed=3", "--steps", "2"],
                               capture_output=True, text=True, timeout=300)
        return check, train

    def test_invalid_fields_exit_2_naming_the_key(self):
        cpu = {"device": "cpu"}
        cases = [
            (config(0, cpu), "offload_optimizer.device"),                                    # no shard at stage 0
            (config(2, {"device": "cpu", "buffer_count": 1}), "offload_optimizer.buffer_count"),
            (config(3, None, cpu), "offload_param.device"),                                  # param without optimizer
            (config(2, {"device": "nvme", "nvme_path": "/tmp"}), "offload_optimizer.device"),
            (config(2, {"device": "CPU"}), "offload_optimizer.device"),
            (config(2, {"device": "cpu", "pin_memory": "maybe"}), "offload_optimizer.pin_memory"),
            (config(2, {"device": "cpu", "buffer_cnt": 4}), "offload_optimizer.buffer_cnt"),
            (config(2, {"device": "cpu", "ratio": 0.5}), "offload_optimizer.ratio"),
            (config(3, cpu, {"device": "cpu", "max_in_cpu": -1}), "offload_param.max_in_cpu"),
        ]
        for cfg, key in cases:
            check, train = self.run_both(cfg)
            for what, p in (("check-config", check), ("train", train)):
                self.assertEqual(p.returncode, 2, f"{what} {key}: {p.stdout}\n{p.stderr}")
                self.assertIn(key, p.stderr, f"{what}: {p.stderr}")

    def test_check_config_prints_host_bytes_per_rank_and_node(self):
        path = self.write("ds.json", config(3, {"device": "cpu"}, {"device": "cpu"}))
        p = subprocess.run([BIN, "check-config", path, "--world-size", "4", "--model", MODEL], capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        per_rank = [l for l in p.stderr.splitlines() if "host total per rank" in l]
        per_node = [l for l in p.stderr.splitlines() if "host total per node (4 ranks" in l]
        self.assertEqual(len(per_rank), 1, p.stderr)
        self.assertEqual(len(per_node), 1, p.stderr)
        rank_bytes = int(per_rank[0].split("host total per rank:")[1].split()[0])
        node_bytes = int(per_node[0].split(":")[1].split()[0])
        self.assertGreater(rank_bytes, 0)
        self.assertEqual(node_bytes, 4 * rank_bytes)
        for cat in ("host_master", "host_moments", "host_params", "host_staging"):
            self.assertIn(cat, p.stderr)

    def test_stage3_offload_trains_and_reports_host_memory(self):
        cfg = config(3, {"device": "cpu", "pin_memory": False}, {"device": "cpu", "pin_memory": False})
        path = self.write("ds.json", cfg)
        check = subprocess.run([BIN, "check-config", path, "--world-size", "2"], capture_output=True, text=True)
        self.assertEqual(check.returncode, 0, check.stderr)
        report = os.path.join(self.d, "mem.json")
        p = subprocess.run([MPIEXEC] + MPI_FLAGS + ["-np", "2", BIN, "train", "--config", path, "--model", MODEL,
                            "--data", "markov:vocab=64,order=1,seed=3", "--steps", "3", "--memory-report", report],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        ranks = json.load(open(report))["ranks"]
        self.assertEqual(len(ranks), 2)
        for r in ranks:
            self.assertEqual(r["host_memory"], {"optimizer_pinned": False, "params_pinned": False})
            cats = r["categories"]
            for device_cat in ("master", "optimizer_moments", "params"):
                self.assertEqual(cats[device_cat]["predicted_bytes"], 0, device_cat)
                self.assertEqual(cats[device_cat]["measured_bytes"], 0, device_cat)
            for host_cat in ("host_master", "host_moments", "host_params", "host_staging"):
                self.assertGreater(cats[host_cat]["measured_bytes"], 0, host_cat)
                self.assertEqual(cats[host_cat]["measured_bytes"], cats[host_cat]["predicted_bytes"], host_cat)


if __name__ == "__main__":
    unittest.main()
