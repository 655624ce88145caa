"""`zerotrain train --init-from DIR/` (CPU backend, mpirun): Hugging Face folders in.

* A folder written by `--save-weights DIR/` (model.safetensors + config.json) loads back bitwise:
  --init-from it with --steps 0 and --save-weights again writes the same bytes, with --model and
  with the model built from config.json alone (2 ranks, ZeRO stage 3: each rank reads its slices).
* A sharded folder (model.safetensors.index.json + model-0000x-of-00002.safetensors, written here by
  a small safetensors writer) gives the same weights.
* Bad folders exit 2 naming the problem: no weights file, a parameter without a weight_map entry,
  a missing shard, a tensor missing from its shard, an index entry that is no parameter, config.json disagreeing with --model, and no
  --model without config.json.
"""
import json
import os
import shutil
import struct
import subprocess
import unittest

from e2e_case import TempDirCase

BIN = os.path.abspath(os.environ.get("ZT_BIN", "build/zerotrain"))
MPIEXEC = os.environ.get("ZT_MPIEXEC", "mpirun")
MPI_FLAGS = ["--allow-run-as-root", "--oversubscribe", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1",
             "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMPI_MCA_mpi_yield_when_idle=1", "-x", "ZT_COMM_TIMEOUT_S=60"]
CONFIG = {"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2,
          "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
          "optimizer": {"type": "AdamW", "params": {"lr": 1e-2}}}


def read_safetensors(path):
    """(header dict without __metadata__, {name: raw bytes})."""
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    data = blob[8 + n:]
    return header, {k: data[v["data_offsets"][0]:v["data_offsets"][1]] for k, v in header.items()}


def write_safetensors(path, header, tensors):
    """A safetensors file holding `tensors` (name -> bytes) with the dtypes and shapes of `header`."""
    out, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        b = tensors[name]
        out[name] = {"dtype": header[name]["dtype"], "shape": header[name]["shape"], "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    text = json.dumps(out).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


class InitFromCli(TempDirCase):
    def setUp(self):
        super().setUp()
        self.cfg = self.write("ds.json", CONFIG)

    def train(self, args, ranks=2, expect=0, model=True):
        cmd = [MPIEXEC, "-np", str(ranks)] + MPI_FLAGS + [
            BIN, "train", "--config", self.cfg, "--data", "markov:vocab=64,seed=3", "--device", "cpu"] + \
            (["--model", self.model] if model else []) + args
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        out = p.stdout + p.stderr
        self.assertEqual(p.returncode, expect, out)
        return out

    def path(self, *parts):
        return os.path.join(self.d, *parts)

    def same_files(self, a, b):
        for name in ["model.safetensors", "config.json"]:
            with open(os.path.join(a, name), "rb") as x, open(os.path.join(b, name), "rb") as y:
                self.assertEqual(x.read(), y.read(), "%s differs between %s and %s" % (name, a, b))

    def sharded_copy(self, src, dst):
        """dst/: src's model.safetensors cut into two shards + the index, and src's config.json."""
        os.mkdir(dst)
        header, tensors = read_safetensors(os.path.join(src, "model.safetensors"))
        names = sorted(tensors)
        weight_map = {}
        for i in range(2):
            shard = "model-%05d-of-00002.safetensors" % (i + 1)
            part = {n: tensors[n] for j, n in enumerate(names) if j % 2 == i}
            write_safetensors(os.path.join(dst, shard), header, part)
            weight_map.update({n: shard for n in part})
        with open(os.path.join(dst, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": sum(len(b) for b in tensors.values())}, "weight_map": weight_map}, f)
        shutil.copy(os.path.join(src, "config.json"), dst)
        return weight_map

    def test_folder_round_trip_and_shards(self):
        trained = self.path("trained") + "/"
        self.train(["--steps", "3", "--save-weights", trained])
        fresh = self.path("fresh") + "/"
        self.train(["--steps", "0", "--save-weights", fresh])
        with open(trained + "model.safetensors", "rb") as a, open(fresh + "model.safetensors", "rb") as b:
            self.assertNotEqual(a.read(), b.read())  # training changed the weights: the comparison below means something
        again = self.path("again") + "/"
        out = self.train(["--steps", "0", "--init-from", trained, "--save-weights", again])
        self.assertIn("initialised from " + trained, out)
        self.same_files(trained, again)
        built = self.path("built") + "/"
        out = self.train(["--steps", "0", "--init-from", trained, "--save-weights", built], model=False)
        self.assertIn("n_layer=2 n_head=2 n_embd=32", out)
        self.same_files(trained, built)
        sharded = self.path("sharded")
        self.sharded_copy(trained, sharded)
        from_shards = self.path("from_shards") + "/"
        self.train(["--steps", "0", "--init-from", sharded + "/", "--save-weights", from_shards], model=False)
        self.same_files(trained, from_shards)
        # The folder named without a trailing slash, with --model, trains on.
        self.assertIn("initialised from", self.train(["--steps", "1", "--init-from", sharded], ranks=1))

    def test_bad_folders_exit_2(self):
        good = self.path("good") + "/"
        self.train(["--steps", "0", "--save-weights", good], ranks=1)
        cases = []
        empty = self.path("empty")
        os.mkdir(empty)
        cases.append((empty, "holds neither model.safetensors nor model.safetensors.index.json", True))
        no_entry = self.path("no_entry")
        wm = self.sharded_copy(good, no_entry)
        del wm["h.0.ln_1.weight"]
        with open(os.path.join(no_entry, "model.safetensors.index.json"), "w") as f:
            json.dump({"weight_map": wm}, f)
        cases.append((no_entry, "no \"weight_map\" entry for parameter \"h.0.ln_1.weight\"", True))
        no_shard = self.path("no_shard")
        self.sharded_copy(good, no_shard)
        os.remove(os.path.join(no_shard, "model-00002-of-00002.safetensors"))
        cases.append((no_shard, "model-00002-of-00002.safetensors (holding", True))
        moved = self.path("moved")
        wm = self.sharded_copy(good, moved)
        first = sorted(wm)[0]
        wm[first] = "model-00002-of-00002.safetensors" if wm[first].startswith("model-00001") else "model-00001-of-00002.safetensors"
        with open(os.path.join(moved, "model.safetensors.index.json"), "w") as f:
            json.dump({"weight_map": wm}, f)
        cases.append((moved, "missing tensor \"%s\"" % first, True))
        extra = self.path("extra")
        wm = self.sharded_copy(good, extra)
        wm["lm_head.bias"] = "model-00001-of-00002.safetensors"
        with open(os.path.join(extra, "model.safetensors.index.json"), "w") as f:
            json.dump({"weight_map": wm}, f)
        cases.append((extra, "unexpected tensor \"lm_head.bias\"", True))
        other = self.path("other")
        shutil.copytree(good, other)
        with open(os.path.join(other, "config.json")) as f:
            c = json.load(f)
        c["n_embd"] = 64
        with open(os.path.join(other, "config.json"), "w") as f:
            json.dump(c, f)
        cases.append((other, "config.json has n_embd 64, --model %s has n_embd 32" % self.model, True))
        bare = self.path("bare")
        os.mkdir(bare)
        shutil.copy(os.path.join(good, "model.safetensors"), bare)
        cases.append((bare, "--model is required unless --init-from names a folder with a config.json", False))
        for folder, needle, model in cases:
            err = self.train(["--steps", "0", "--init-from", folder], ranks=1, expect=2, model=model)
            self.assertIn(needle, err, folder)


if __name__ == "__main__":
    unittest.main()
