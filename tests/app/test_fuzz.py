"""Bounded, seeded fuzz test of every input zerotrain and zt-launch read.

Mutates a valid config, model file, safetensors file, token file and hostfile (byte flips,
insertions, truncation, splices of hostile tokens) and runs the command that reads each (model
and weights files: `train` and `sample`). Every run
must end with exit 0 or 2, never a signal, an abort banner, a traceback or a timeout; an exit 2
prints exactly one error line.

Checkpoints get their own budget: a saved checkpoint's meta.json is mutated as it is (the
checksum must catch the edit) and as format version 1 without the checksum (so the value checks
themselves are reached), and its directory is damaged (shards removed, truncated, flipped,
replaced by directories; `latest` rewritten); `consolidate` and `train --resume` read each case.

  ZT_FUZZ_SECONDS  time budget (default 45: CI); longer runs: ZT_FUZZ_SECONDS=3600
  ZT_FUZZ_CKPT_SECONDS  the checkpoint part's budget (default: half of ZT_FUZZ_SECONDS)
  ZT_FUZZ_SEED     seed (default 14); the same seed replays the same cases (the corpus replay)
A failing case is kept under $ZT_FUZZ_KEEP (default: the temp dir is printed and kept).
"""
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

BIN = os.environ.get("ZT_BIN", "build/zerotrain")
LAUNCH = os.environ.get("ZT_LAUNCH", os.path.join(os.environ.get("ZT_REPO", "."), "launcher", "zt-launch"))
SECONDS = float(os.environ.get("ZT_FUZZ_SECONDS", "45"))
SEED = int(os.environ.get("ZT_FUZZ_SEED", "14"))
CKPT_SECONDS = float(os.environ.get("ZT_FUZZ_CKPT_SECONDS", str(SECONDS / 2)))
BANNERS = ["terminate called", "Aborted", "Traceback", "core dumped", "Segmentation", "AddressSanitizer",
           "runtime error:", "MPI_ABORT"]
HOSTILE = [b"\xff", b"\x00", b"1e400", b"-1", b"99999999999999999999", b"NaN", b'"auto"', b"null", b"[]", b"{}",
           b'"', b"'''", b"/*", b"\\u", b"\\ud800", b"true", b"1e-400", b"0", b"\n", b",", b":", b"{" * 300]

GPT = {"type": "gpt", "vocab_size": 16, "n_ctx": 8, "n_layer": 1, "n_head": 2, "n_embd": 16}
DS = {"train_batch_size": 4, "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
      "zero_optimization": {"stage": 2, "reduce_bucket_size": 500, "overlap_comm": False},
      "bf16": {"enabled": False}, "fp16": {"enabled": False, "loss_scale": 0},
      "optimizer": {"type": "AdamW", "params": {"lr": 1e-3, "betas": [0.9, 0.999], "weight_decay": 0.01}},
      "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 5}}}


def mutate(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        pos = rng.randrange(len(data) + 1)
        if op == 0 and data:
            data[min(pos, len(data) - 1)] = rng.randrange(256)
        elif op == 1:
            data[pos:pos] = rng.choice(HOSTILE)
        elif op == 2:
            del data[pos:pos + rng.randint(1, 8)]
        elif op == 3:
            data = data[:pos]
        else:
            data[pos:pos] = bytes(data[rng.randrange(len(data) + 1):][:rng.randint(1, 16)])
    return bytes(data)


class Fuzz(unittest.TestCase):
    def test_fuzz(self):
        self.fuzz_in_temp_dir("zt_fuzz_", random.Random(SEED), self.run_cases)

    def test_fuzz_checkpoints(self):
        self.fuzz_in_temp_dir("zt_fuzz_ckpt_", random.Random(SEED + 1), self.run_checkpoint_cases)

    def fuzz_in_temp_dir(self, prefix, rng, cases):
        d = tempfile.mkdtemp(prefix=prefix)
        try:
            cases(rng, d)
        except AssertionError:
            print("fuzz: failing inputs kept in %s (seed %d)" % (d, SEED), file=sys.stderr)
            raise
        shutil.rmtree(d)

    def write(self, d, name, data):
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def check(self, cmd, what, codes=(0, 2)):
        try:
            p = subprocess.run(cmd, capture_output=True, timeout=60)
        except subprocess.TimeoutExpired:
            self.fail("timeout: %s (%s)" % (" ".join(cmd), what))
        out = (p.stdout + p.stderr).decode("utf-8", "replace")
        self.assertIn(p.returncode, codes, "exit %d: %s (%s)\n%s" % (p.returncode, " ".join(cmd), what, out))
        for b in BANNERS:
            self.assertNotIn(b, out, "%s (%s)" % (" ".join(cmd), what))
        if p.returncode == 2:
            lines = [l for l in p.stderr.decode("utf-8", "replace").splitlines() if "error" in l]
            self.assertEqual(len(lines), 1, "%s (%s)\n%s" % (" ".join(cmd), what, out))

    # The model and config files in d, and a first good run writing what the cases mutate.
    def seed_run(self, d, *outputs):
        model = self.write(d, "gpt.json", json.dumps(GPT).encode())
        cfg = self.write(d, "ds.json", json.dumps(DS, indent=1).encode())
        self.check([BIN, "train", "--config", cfg, "--model", model, "--data", "markov:vocab=16"] + list(outputs),
                   "seed run")
        return model, cfg

    def run_cases(self, rng, d):
        weights = os.path.join(d, "w.safetensors")
        model, cfg = self.seed_run(d, "--steps", "0", "--save-weights", weights)
        with open(weights, "rb") as f:
            weights_bytes = f.read()
        tokens = bytes(rng.randrange(16) for _ in range(400))
        hostfile = b"# hosts\nlocalhost slots=2\nworker-1 slots=4\n"
        base = ["--steps", "1", "--log-every", "1"]
        sample = ["--prompt", "\x01\x02\x03", "--tokens", "4", "--device", "cpu"]  # ids below GPT's vocab of 16
        kinds = ["config", "model", "weights", "tokens", "hostfile"]
        deadline = time.monotonic() + SECONDS
        n = 0
        while time.monotonic() < deadline:
            kind = kinds[n % len(kinds)]
            n += 1
            if kind == "config":
                bad = self.write(d, "c.json", mutate(rng, json.dumps(DS, indent=1).encode()))
                self.check([BIN, "check-config", bad, "--world-size", "1"], kind)
                self.check([BIN, "train", "--config", bad, "--model", model, "--data", "markov:vocab=16"] + base, kind)
            elif kind == "model":
                bad = self.write(d, "m.json", mutate(rng, json.dumps(GPT).encode()))
                self.check([BIN, "train", "--config", cfg, "--model", bad, "--data", "markov:vocab=16"] + base, kind)
                self.check([BIN, "sample", "--weights", weights, "--model", bad] + sample, kind)
            elif kind == "weights":
                hdr = int.from_bytes(weights_bytes[:8], "little")
                cut = 8 + hdr  # mutate the length and the JSON header, keep the data
                data = mutate(rng, weights_bytes[:cut]) + weights_bytes[cut:] if rng.random() < 0.8 else \
                    mutate(rng, weights_bytes)
                bad = self.write(d, "w2.safetensors", data)
                self.check([BIN, "train", "--config", cfg, "--model", model, "--data", "markov:vocab=16",
                            "--init-from", bad] + base, kind)
                self.check([BIN, "sample", "--weights", bad, "--model", model] + sample, kind)
            elif kind == "tokens":
                bad = self.write(d, "t.bin", mutate(rng, tokens))
                fmt = rng.choice(["text:", "tokens:"])
                self.check([BIN, "train", "--config", cfg, "--model", model, "--data", fmt + bad] + base, kind)
            else:
                bad = self.write(d, "hosts", mutate(rng, hostfile))
                self.check([sys.executable, LAUNCH, "--dry-run", "--hostfile", bad, "/bin/true"], kind)
        print("fuzz: %d cases in %.0f s, seed %d" % (n, SECONDS, SEED), file=sys.stderr)
        self.assertGreater(n, 10)


    # One damaged copy of a good checkpoint per case: meta.json mutated (as saved, or as format
    # version 1 without its checksum), or the directory's files removed, truncated, flipped or
    # replaced. `train --resume` may also end with exit 4: a version-1 meta.json cannot be
    # verified, and an in-range but crafted state (a huge static loss scale) can go non-finite.
    def run_checkpoint_cases(self, rng, d):
        good = os.path.join(d, "good")
        model, cfg = self.seed_run(d, "--steps", "2", "--save-checkpoint", good)
        tag = os.path.join(good, "global_step2")
        with open(os.path.join(tag, "meta.json"), "rb") as f:
            meta = f.read()
        v1 = json.loads(meta)
        del v1["meta_xxh64"]
        v1["version"] = 1
        v1 = json.dumps(v1, indent=1).encode()
        shards = sorted(n for n in os.listdir(tag) if n.endswith(".safetensors"))
        deadline = time.monotonic() + CKPT_SECONDS
        n = 0
        while time.monotonic() < deadline:
            n += 1
            ck = os.path.join(d, "ck")
            shutil.rmtree(ck, ignore_errors=True)
            shutil.copytree(good, ck)
            t = os.path.join(ck, "global_step2")
            kind = rng.choice(["meta", "meta_v1", "meta_v1", "dir"])
            if kind == "meta":
                self.write(t, "meta.json", mutate(rng, meta))
            elif kind == "meta_v1":
                self.write(t, "meta.json", mutate(rng, v1))
            else:
                kind = self.damage_directory(rng, ck, t, shards)
            out = os.path.join(d, "out.safetensors")
            self.check([BIN, "consolidate", ck, out], kind)
            if n % 3 == 0:
                self.check([BIN, "train", "--config", cfg, "--model", model, "--data", "markov:vocab=16", "--steps", "3",
                            "--resume", ck], kind, codes=(0, 2, 4))
        print("fuzz: %d checkpoint cases in %.0f s, seed %d" % (n, CKPT_SECONDS, SEED), file=sys.stderr)
        self.assertGreater(n, 5)

    def damage_directory(self, rng, ck, t, shards):
        op = rng.randrange(7)
        victim = os.path.join(t, rng.choice(shards + ["meta.json"]))
        if op == 0:
            os.remove(victim)
        elif op == 1:
            with open(victim, "r+b") as f:
                f.truncate(rng.randrange(os.path.getsize(victim) + 1))
        elif op == 2:
            with open(victim, "r+b") as f:
                size = os.path.getsize(victim)
                f.seek(rng.randrange(size))
                f.write(bytes([rng.randrange(256)]))
        elif op == 3:
            os.remove(victim)
            os.mkdir(victim)
        elif op == 4:
            self.write(ck, "latest", mutate(rng, b"global_step2\n"))
        elif op == 5:
            os.remove(victim)
            os.symlink(victim, victim)  # a loop
        else:
            self.write(ck, "latest", rng.choice([b"", b"..\n", b"global_step2/../global_step2\n", b"latest\n"]))
        return "checkpoint directory op %d on %s" % (op, os.path.basename(victim))


if __name__ == "__main__":
    unittest.main(verbosity=2)
