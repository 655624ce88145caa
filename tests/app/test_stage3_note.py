"""The stage-3 threshold note of `check-config --model` and `train` (CPU backend).

* The bundled configs/ds/stage3.json on gpt-tiny (every tensor under DeepSpeed's default
  stage3_param_persistence_threshold of 1e5): one line says every parameter is persistent, names
  the largest tensor and the key to lower, and gives stage 3's predicted device memory per rank
  beside stage 2's — the same figures check-config's estimate prints for each stage.
* A low persistence threshold with the default prefetch / reuse settings: the line says every
  gathered parameter is live at once at the peak and names those keys.
* Thresholds that really partition (low persistence, prefetch and reuse distance) and stage 2
  configs: no such line.
* `train` prints the same line in its run header.
"""
import json
import os
import re
import subprocess
import unittest

from e2e_case import TempDirCase

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
REPO = os.environ.get("ZT_REPO", ".")
TINY = os.path.join(REPO, "configs/models/gpt-tiny.json")
STAGE3 = os.path.join(REPO, "configs/ds/stage3.json")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1"]


def check_config(path):
    p = subprocess.run([BIN, "check-config", path, "--model", TINY, "--world-size", "2"], capture_output=True,
                       text=True, timeout=120)
    return p


def notes(text):
    return [l for l in text.splitlines() if l.startswith("stage 3: ")]


def device_total_mib(text):
    m = re.search(r"device total per rank: \d+ B \(([0-9.]+) MiB\)", text)
    return m.group(1)


class Stage3Note(TempDirCase):
    def config(self, stage, **zero):
        with open(STAGE3) as f:
            text = "\n".join(l for l in f if not l.lstrip().startswith("//"))
        cfg = json.loads(text)
        cfg["zero_optimization"]["stage"] = stage
        cfg["zero_optimization"].update(zero)
        return self.write(f"s{stage}_{len(zero)}.json", cfg)

    def test_bundled_stage3_config_keeps_every_parameter_persistent(self):
        p = check_config(STAGE3)
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = notes(p.stderr)
        self.assertEqual(len(lines), 1, p.stderr)
        line = lines[0]
        self.assertIn("every parameter is persistent", line)
        self.assertIn("stage3_param_persistence_threshold = 100000 elements; the largest has 4096", line)
        self.assertIn("set zero_optimization.stage3_param_persistence_threshold below 4096", line)
        s2 = check_config(self.config(2))
        self.assertEqual(s2.returncode, 0, s2.stderr)
        self.assertEqual(notes(s2.stderr), [], "no note at stage 2")
        self.assertIn(f"{device_total_mib(p.stderr)} MiB at stage 3 vs {device_total_mib(s2.stderr)} MiB at stage 2",
                      line)

    def test_gathered_parameters_all_live_at_the_peak(self):
        p = check_config(self.config(3, stage3_param_persistence_threshold=100))
        self.assertEqual(p.returncode, 0, p.stderr)
        lines = notes(p.stderr)
        self.assertEqual(len(lines), 1, p.stderr)
        self.assertIn("every gathered parameter is live at once at the step's peak (12 of 28 tensors gathered", lines[0])
        self.assertIn("stage3_max_reuse_distance and stage3_prefetch_bucket_size", lines[0])

    def test_partitioning_thresholds_print_nothing(self):
        for threshold in (100, 1000):
            p = check_config(self.config(3, stage3_param_persistence_threshold=threshold,
                                         stage3_prefetch_bucket_size=1000, stage3_max_reuse_distance=0))
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(notes(p.stderr), [], p.stderr)

    def test_train_prints_the_note(self):
        p = subprocess.run([MPIEXEC] + MPI_FLAGS + ["-np", "2", BIN, "train", "--config", STAGE3, "--model", TINY,
                            "--data", "markov:vocab=64,order=1,seed=3", "--steps", "1"],
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertEqual(notes(p.stdout), notes(check_config(STAGE3).stderr))


if __name__ == "__main__":
    unittest.main(verbosity=2)
