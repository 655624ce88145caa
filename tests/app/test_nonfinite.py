"""Non-finite training and untrustworthy checkpoint inputs (CPU backend; mpirun at 2 ranks where a
reproduction needed it).

- A diverging run never ends with exit 0: fp32 and bf16 steps with a NaN/Inf gradient norm are
  skipped like fp16 overflow steps and counted; --max-skipped-steps in a row, or a non-finite final
  loss, end the run with exit 4 and a message saying why.
- A checkpoint holding NaN/Inf does not resume and is not consolidated (exit 2 naming the tensor)
  unless --allow-non-finite.
- meta.json carries its own checksum: an edit of one value is refused (exit 2); the older format
  without it still loads, with a warning, and its values are range-checked.
- Crafted safetensors headers (overlap, hole, trailing bytes, a duplicate name) and an absurd data
  cursor are exit 2 naming the input.
"""
import json
import os
import shutil
import struct
import tempfile
import unittest

import test_hostile_inputs as hostile
from test_hostile_inputs import BIN, MPI_FLAGS, MPIEXEC, run

GPT = {"type": "gpt", "vocab_size": 8, "n_ctx": 16, "n_layer": 1, "n_head": 2, "n_embd": 32}
DS = {"train_batch_size": 8, "zero_optimization": {"stage": 2}, "gradient_clipping": 0,
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}}


def put(path, data):
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    return path


def get(path):
    with open(path, "rb") as f:
        return f.read()


def temp_dir(test):
    d = tempfile.mkdtemp(prefix="zt_nonfinite_")
    test.addCleanup(shutil.rmtree, d, True)
    return d


class NonFinite(unittest.TestCase):
    def setUp(self):
        self.d = temp_dir(self)
        self.model = self.write("gpt.json", json.dumps(GPT))

    def write(self, name, text):
        return put(os.path.join(self.d, name), text)

    def config(self, name, **over):
        return self.write(name, json.dumps(dict(DS, **over)))

    def train(self, cfg, *extra, np_=1, steps="4"):
        cmd = ([MPIEXEC] + MPI_FLAGS + ["-np", str(np_)] if np_ > 1 else []) + [
            BIN, "train", "--config", cfg, "--model", self.model, "--data", "markov:vocab=8", "--steps", steps,
            "--log-every", "1"] + list(extra)
        return run(cmd, timeout=120)

    def assert_clean(self, p, code, *needles):
        hostile.Hostile.assert_clean(self, p, code, *needles)  # the code, the messages, no banner
        if code != 0:
            self.assertEqual(p.err.count("error"), 1, p.err)

    # fp32 with a diverging learning rate: the steps go non-finite, are skipped (SKIPPED on the
    # progress line, counted), and the run stops with exit 4 instead of training on NaN.
    def test_fp32_diverging_lr_stops_with_exit_4(self):
        cfg = self.config("fp32.json", optimizer={"type": "SGD", "params": {"lr": 1e30}})
        metrics = os.path.join(self.d, "m.jsonl")
        p = self.train(cfg, "--max-skipped-steps", "3", "--metrics", metrics, steps="50", np_=2)
        self.assert_clean(p, 4, "the last 3 steps were all skipped")
        self.assertIn("SKIPPED (non-finite gradients)", p.out)
        rows = [json.loads(l) for l in get(metrics).decode().splitlines()]
        self.assertTrue(rows[-1]["skipped"])
        self.assertEqual(rows[-1]["skipped_steps"], sum(r["skipped"] for r in rows))
        self.assertLess(len(rows), 50, "the run must stop early")
        # Without the early stop the run still does not succeed: its final loss is non-finite.
        p = self.train(cfg, "--max-skipped-steps", "0", steps="6")
        self.assert_clean(p, 4, "the final loss is")

    # bf16, shorter than --max-skipped-steps, ending on NaN: exit 4 saying why, and no final
    # checkpoint or weights written.
    def test_bf16_short_run_ending_non_finite(self):
        cfg = self.config("bf16.json", bf16={"enabled": True}, optimizer={"type": "SGD", "params": {"lr": 1e30}})
        weights = os.path.join(self.d, "w.safetensors")
        p = self.train(cfg, "--save-weights", weights, steps="5")
        self.assert_clean(p, 4, "the final loss is", "no final checkpoint or weights were written")
        self.assertFalse(os.path.exists(weights))

    # Finite runs are unchanged by the policy: same losses with and without --max-skipped-steps 0.
    def test_finite_run_is_unchanged(self):
        cfg = self.config("ok.json")
        a = self.train(cfg, steps="3")
        b = self.train(cfg, "--max-skipped-steps", "0", steps="3")
        self.assert_clean(a, 0)
        self.assert_clean(b, 0)
        loss = [l.split("|")[1] for l in a.out.splitlines() if l.startswith("step ")]
        self.assertEqual(loss, [l.split("|")[1] for l in b.out.splitlines() if l.startswith("step ")])
        self.assertNotIn("skipped", a.out)

    # A checkpoint of NaN weights (bf16 with check_grad_overflow false applies non-finite steps):
    # --resume and consolidate refuse it naming the tensor; --allow-non-finite loads it.
    def test_checkpoint_holding_nan(self):
        cfg = self.config("nan.json", bf16={"enabled": True, "check_grad_overflow": False},
                          optimizer={"type": "SGD", "params": {"lr": 1e30}})
        ck = os.path.join(self.d, "ck")
        p = self.train(cfg, "--save-checkpoint", ck, "--save-every", "1", "--max-skipped-steps", "0", steps="4")
        self.assert_clean(p, 4, "the final loss is")
        self.assertTrue(os.path.exists(os.path.join(ck, "latest")), p.out + p.err)
        p = self.train(cfg, "--resume", ck, steps="5")
        self.assert_clean(p, 2, "checkpoint shard", "is NaN", "--allow-non-finite")
        self.assertRegex(p.err, r'tensor "(master|exp_avg|momentum)[^"]*" element \d+ is NaN')
        p = self.train(cfg, "--resume", ck, "--allow-non-finite", "--max-skipped-steps", "0", steps="5")
        self.assert_clean(p, 4, "the final loss is")
        out = os.path.join(self.d, "out.safetensors")
        p = run([BIN, "consolidate", ck, out])
        self.assert_clean(p, 2, "refusing to export non-finite weights", "--allow-non-finite")
        self.assertFalse(os.path.exists(out))
        p = run([BIN, "consolidate", ck, out, "--allow-non-finite"])
        self.assert_clean(p, 0)
        self.assertTrue(os.path.exists(out))

    # --init-from NaN weights: refused naming the tensor, loaded with --allow-non-finite.
    def test_init_from_nan(self):
        w = os.path.join(self.d, "w.safetensors")
        self.assert_clean(self.train(self.config("ok.json"), "--save-weights", w, steps="0"), 0)
        data = bytearray(get(w))
        hdr = struct.unpack("<Q", data[:8])[0]
        data[8 + hdr:8 + hdr + 4] = struct.pack("<f", float("nan"))
        bad = self.write("nan.safetensors", bytes(data))
        cfg = self.config("ok.json")
        self.assert_clean(self.train(cfg, "--init-from", bad, steps="1"), 2, "is NaN", "--allow-non-finite")
        p = self.train(cfg, "--init-from", bad, "--allow-non-finite", "--max-skipped-steps", "2", steps="3")
        self.assertIn(p.returncode, (0, 4), p.out + p.err)


class MetaJson(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        d = cls.tmp.name
        cls.model = os.path.join(d, "gpt.json")
        cls.cfg = os.path.join(d, "ds.json")
        put(cls.model, json.dumps(GPT))
        put(cls.cfg, json.dumps(DS))
        cls.ck = os.path.join(d, "ck")
        p = run([BIN, "train", "--config", cls.cfg, "--model", cls.model, "--data", "markov:vocab=8", "--steps", "2",
                 "--save-checkpoint", cls.ck])
        assert p.returncode == 0, p.out + p.err
        cls.meta_path = os.path.join(cls.ck, "global_step2", "meta.json")
        cls.meta_text = get(cls.meta_path).decode()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        self.d = tempfile.mkdtemp(dir=self.tmp.name)
        self.ck = os.path.join(self.d, "ck")
        shutil.copytree(MetaJson.ck, self.ck)
        self.meta = os.path.join(self.ck, "global_step2", "meta.json")

    def resume_and_consolidate(self, code, *needles):
        for cmd in ([BIN, "train", "--config", self.cfg, "--model", self.model, "--data", "markov:vocab=8",
                     "--steps", "3", "--resume", self.ck],
                    [BIN, "consolidate", self.ck, os.path.join(self.d, "out.safetensors")]):
            p = run(cmd)
            text = p.out + p.err
            self.assertEqual(p.returncode, code, " ".join(cmd) + "\n" + text)
            for n in needles:
                self.assertIn(n, p.err, text)
            for b in hostile.BANNERS:
                self.assertNotIn(b, text)

    # A one-character change of a value that steers the continuation: refused, naming the file.
    def test_one_character_edits_are_refused(self):
        meta = json.loads(self.meta_text)
        for key, path in [("seed", ["seed"]), ("successful_steps", ["steps", "successful_steps"]),
                          ("last_batch_iteration", ["lr_schedule", "last_batch_iteration"]),
                          ("cur_scale", ["loss_scaler", "cur_scale"])]:
            v = meta
            for k in path[:-1]:
                v = v[k]
            old = '"%s": %s' % (key, json.dumps(v[path[-1]]))
            self.assertIn(old, self.meta_text, key)
            digit = old[-1]
            new = old[:-1] + ("1" if digit != "1" else "0")
            with open(self.meta, "w") as f:
                f.write(self.meta_text.replace(old, new, 1))
            self.resume_and_consolidate(2, "meta.json checksum mismatch", self.meta)

    # The format before the checksum (version 1) still loads, with a warning; its values are
    # range-checked (an out-of-range world size or stage, a negative count: exit 2 naming the key).
    def test_version_one_and_range_checks(self):
        meta = json.loads(self.meta_text)
        del meta["meta_xxh64"]
        meta["version"] = 1
        with open(self.meta, "w") as f:
            json.dump(meta, f)
        self.resume_and_consolidate(0, "format version 1")
        for where, value, key in [(("zero", "world_size"), 2 ** 32 + 2, "zero.world_size"),
                                  (("zero", "stage"), 99, "zero.stage"),
                                  (("steps", "global_steps"), -1, "steps.global_steps"),
                                  (("loss_scaler", "cur_scale"), -1.0, "loss_scaler.cur_scale"),
                                  (("model", "config"), {"type": 7}, "model.config")]:
            bad = json.loads(json.dumps(meta))
            bad[where[0]][where[1]] = value
            with open(self.meta, "w") as f:
                json.dump(bad, f)
            self.resume_and_consolidate(2, key)


class CraftedFiles(unittest.TestCase):
    def setUp(self):
        self.d = temp_dir(self)
        self.model = os.path.join(self.d, "m.json")
        put(self.model, json.dumps({"type": "mlp", "dims": [2, 2], "activation": "gelu", "task": "regression"}))
        self.cfg = put(os.path.join(self.d, "ds.json"), json.dumps(DS))

    def init_from(self, header, data):
        text = json.dumps(header).encode()
        path = os.path.join(self.d, "w.safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + data)
        return run([BIN, "train", "--config", self.cfg, "--model", self.model, "--data", "teacher:", "--steps", "0",
                    "--init-from", path])

    # Offsets must tile the data block: overlap, hole, trailing bytes, a duplicate name -> exit 2.
    def test_safetensors_offsets_tile_the_data(self):
        def t(a, b, shape):
            return {"dtype": "F32", "shape": shape, "data_offsets": [a, b]}
        ok = {"fc.0.weight": t(0, 16, [2, 2]), "fc.0.bias": t(16, 24, [2])}
        p = self.init_from(ok, bytes(24))
        self.assertEqual(p.returncode, 0, p.out + p.err)
        for header, data, needle in [
                ({"fc.0.weight": t(0, 16, [2, 2]), "fc.0.bias": t(8, 16, [2])}, bytes(16), "overlap"),
                ({"fc.0.weight": t(0, 16, [2, 2]), "fc.0.bias": t(20, 28, [2])}, bytes(28), "leave a hole"),
                (ok, bytes(32), "8 trailing bytes")]:
            p = self.init_from(header, data)
            self.assertEqual(p.returncode, 2, p.out + p.err)
            self.assertIn(needle, p.err)
            self.assertIn("tensor" if needle != "8 trailing bytes" else "after the last tensor", p.err)
        text = ('{"fc.0.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},'
                '"fc.0.bias":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},'
                '"fc.0.bias":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}}').encode()
        path = os.path.join(self.d, "dup.safetensors")
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + bytes(24))
        p = run([BIN, "train", "--config", self.cfg, "--model", self.model, "--data", "teacher:", "--steps", "0",
                 "--init-from", path])
        self.assertEqual(p.returncode, 2, p.out + p.err)
        self.assertIn('tensor "fc.0.bias" is named twice', p.err)

    # A data cursor beyond 2^62 samples: exit 2 naming --steps, not a negative byte offset.
    def test_absurd_data_cursor(self):
        tokens = os.path.join(self.d, "t.bin")
        put(tokens, bytes([1, 2, 3, 4] * 64))
        gpt = os.path.join(self.d, "gpt.json")
        put(gpt, json.dumps(GPT))
        p = run([BIN, "train", "--config", self.cfg, "--model", gpt, "--data", "text:" + tokens,
                 "--steps", str(2 ** 63 - 1)])
        self.assertEqual(p.returncode, 2, p.out + p.err)
        self.assertIn("--steps 9223372036854775807", p.err)
        self.assertIn("data cursor", p.err)
        self.assertNotIn("byte -", p.err)


if __name__ == "__main__":
    unittest.main(verbosity=2)
