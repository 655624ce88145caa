"""DeepSpeed's tensorboard and csv_monitor sections, end to end (CPU backend, 2 ranks under mpirun).

* Both monitors on (fp16, wall_clock_breakdown): rank 0 alone writes; every csv file holds its
  header and one row per optimizer step, and the event file one record per step and tag, with
  global_samples as the step and the values of the --metrics JSONL (train_loss = loss, lr,
  loss_scale, the breakdown's fields).
* Event files are read with this file's own TFRecord/protobuf parser, which checks both masked
  CRC-32Cs of every record; where the `tensorboard` package is importable its event reader must
  decode the same events.
* tensorboard's default output_path ("") puts DeepSpeedJobName/ in the working directory.
* A bad output_path (a file where a directory must be, a planted symlink, a NUL character) ends
  every rank with exit 2 before the first step, and nothing is written through the symlink.
"""
import csv
import glob
import json
import os
import struct
import subprocess
import unittest

from e2e_case import TempDirCase

BIN = os.path.abspath(os.environ.get("ZT_BIN", "build/zerotrain"))
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1", "-x", "ZT_COMM_TIMEOUT_S=60"]
STEPS = 4
BREAKDOWN_TAGS = ["forward", "backward", "backward_inner", "backward_allreduce", "step"]


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc32c(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def read_records(path):
    """Each TFRecord's data; AssertionError on a bad length or CRC."""
    with open(path, "rb") as f:
        data = f.read()
    out, i = [], 0
    while i < len(data):
        assert i + 12 <= len(data), f"{path}: truncated record header at byte {i}"
        (n,) = struct.unpack_from("<Q", data, i)
        assert struct.unpack_from("<I", data, i + 8)[0] == masked_crc32c(data[i:i + 8]), f"{path}: length CRC at {i}"
        assert i + 16 + n <= len(data), f"{path}: truncated record at byte {i}"
        body = data[i + 12:i + 12 + n]
        assert struct.unpack_from("<I", data, i + 12 + n)[0] == masked_crc32c(body), f"{path}: data CRC at {i}"
        out.append(body)
        i += 16 + n
    return out


def proto_fields(buf):
    """{field number: [values]} of one protobuf message (varint, fixed64, bytes, fixed32)."""
    fields, i = {}, 0

    def varint():
        nonlocal i
        v = shift = 0
        while True:
            b = buf[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v

    while i < len(buf):
        key = varint()
        num, wire = key >> 3, key & 7
        if wire == 0:
            v = varint()
        elif wire == 1:
            v, i = buf[i:i + 8], i + 8
        elif wire == 2:
            n = varint()
            v, i = buf[i:i + n], i + n
        elif wire == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        fields.setdefault(num, []).append(v)
    return fields


def decode_event(body):
    """(wall_time, step, file_version or None, [(tag, simple_value)])."""
    f = proto_fields(body)
    wall = struct.unpack("<d", f[1][0])[0]
    step = f.get(2, [0])[0]
    version = f[3][0].decode() if 3 in f else None
    values = []
    for summary in f.get(5, []):
        for v in proto_fields(summary).get(1, []):
            vf = proto_fields(v)
            values.append((vf[1][0].decode(), struct.unpack("<f", vf[2][0])[0]))
    return wall, step, version, values


def tensorboard_events(path):
    """The same tuples from the tensorboard package's reader, or None when it is not installed."""
    try:
        from tensorboard.backend.event_processing.event_file_loader import LegacyEventFileLoader
    except ImportError:
        return None
    out = []
    for e in LegacyEventFileLoader(path).Load():
        values = [(v.tag, v.simple_value) for v in e.summary.value]
        out.append((e.wall_time, e.step, e.file_version or None, values))
    return out


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


class Monitors(TempDirCase):

    def train(self, cfg, *extra):
        c = self.write("ds_%d.json" % len(os.listdir(self.d)), cfg)
        cmd = [MPIEXEC] + MPI_FLAGS + ["-np", "2", BIN, "train", "--config", c, "--model", self.model, "--data",
                                       "markov:vocab=64,order=1,seed=3", "--steps", str(STEPS), "--log-every", "1"]
        return subprocess.run(cmd + list(extra), capture_output=True, text=True, timeout=300, cwd=self.d)

    def config(self, **extra):
        cfg = {"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, "zero_optimization": {"stage": 2},
               "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}},
               "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 3}}}
        cfg.update(extra)
        return cfg

    def test_crc32c_of_the_parser(self):
        self.assertEqual(crc32c(b"123456789"), 0xE3069283)
        self.assertEqual(crc32c(bytes(32)), 0x8A9136AA)

    def test_both_monitors_hold_the_metrics_numbers(self):
        metrics = os.path.join(self.d, "m.jsonl")
        cfg = self.config(fp16={"enabled": True}, wall_clock_breakdown=True,
                          tensorboard={"enabled": True},
                          csv_monitor={"enabled": True, "output_path": os.path.join(self.d, "csv"), "job_name": "j"})
        p = self.train(cfg, "--metrics", metrics)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("monitor: tensorboard: DeepSpeedJobName/events.out.tfevents.", p.stdout)
        with open(metrics) as f:
            rows = [json.loads(line) for line in f]
        self.assertEqual(len(rows), STEPS)
        self.assertEqual([r["samples"] for r in rows], [16 * (k + 1) for k in range(STEPS)])
        expected = {"train_loss": [r["loss"] for r in rows], "lr": [r["lr"] for r in rows],
                    "loss_scale": [r["loss_scale"] for r in rows]}
        allreduce = [r["comm_exposed_ms"] + r["comm_wait_idle_ms"] for r in rows]
        expected.update({"elapsed_time_ms_forward": [r["fwd_ms"] for r in rows],
                         "elapsed_time_ms_backward": [r["bwd_ms"] + a for r, a in zip(rows, allreduce)],
                         "elapsed_time_ms_backward_inner": [r["bwd_ms"] for r in rows],
                         "elapsed_time_ms_backward_allreduce": allreduce,
                         "elapsed_time_ms_step": [r["optim_ms"] for r in rows]})
        self.assertGreater(len(set(expected["lr"])), 1, "the warm-up should change the lr between steps")
        samples = [r["samples"] for r in rows]

        # csv_monitor: one file per event, DeepSpeed's names, header + one row per step.
        csv_dir = os.path.join(self.d, "csv", "j")
        self.assertEqual(sorted(os.listdir(csv_dir)), sorted(f"Train_Samples_{k}.csv" for k in expected))
        for name, values in expected.items():
            path = os.path.join(csv_dir, f"Train_Samples_{name}.csv")
            with open(path, newline="") as f:
                text = f.read()
            self.assertTrue(text.endswith("\r\n"), path)
            table = list(csv.reader(text.splitlines()))
            self.assertEqual(table[0], ["step", name], path)
            self.assertEqual([int(s) for s, _ in table[1:]], samples, path)
            self.assertEqual([float(v) for _, v in table[1:]], values, path)  # bitwise: the JSONL's doubles

        # tensorboard: rank 0 only, one file, version record then one record per step and tag.
        files = glob.glob(os.path.join(self.d, "DeepSpeedJobName", "events.out.tfevents.*"))
        self.assertEqual(len(files), 1, files)
        events = [decode_event(b) for b in read_records(files[0])]
        self.assertEqual(events[0][2], "brain.Event:2")
        self.assertEqual(events[0][3], [])
        got = {}
        for _, step, version, values in events[1:]:
            self.assertIsNone(version)
            self.assertEqual(len(values), 1)
            tag, value = values[0]
            got.setdefault(tag, []).append((step, value))
        self.assertEqual(sorted(got), sorted(f"Train/Samples/{k}" for k in expected))
        for name, values in expected.items():
            self.assertEqual(got[f"Train/Samples/{name}"], [(s, f32(v)) for s, v in zip(samples, values)], name)
        tb = tensorboard_events(files[0])
        if tb is not None:  # the tensorboard package's reader decodes the same events
            self.assertEqual([(s, v, vals) for _, s, v, vals in tb], [(s, v, vals) for _, s, v, vals in events])

    def assert_refused(self, cfg, *needles):
        p = self.train(cfg)
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertNotRegex(p.stdout, r"(?m)^step\s+1 ", "training started")
        for n in needles:
            self.assertIn(n, p.stderr)
        self.assertEqual(p.stderr.count("zerotrain train: error:"), 1, p.stderr)  # reported once, all ranks exit 2

    def test_bad_output_path_exits_2_before_training(self):
        a_file = self.write("a_file", "x")
        self.assert_refused(self.config(tensorboard={"enabled": True, "output_path": a_file}), "tensorboard", a_file)
        self.assert_refused(self.config(csv_monitor={"enabled": True, "output_path": self.d, "job_name": "a_file"}),
                            "csv_monitor", a_file)
        planted_dir = os.path.join(self.d, "planted", "DeepSpeedJobName")
        os.makedirs(planted_dir)
        target = os.path.join(self.d, "target")
        os.symlink(target, os.path.join(planted_dir, "Train_Samples_lr.csv"))
        self.assert_refused(self.config(csv_monitor={"enabled": True, "output_path": os.path.join(self.d, "planted")}),
                            "csv_monitor", "symlink")
        self.assertFalse(os.path.exists(target), "a file was written through the planted symlink")
        self.assert_refused(self.config(tensorboard={"enabled": True, "output_path": "a\u0000b"}),
                            "tensorboard.output_path")


if __name__ == "__main__":
    unittest.main(verbosity=2)
